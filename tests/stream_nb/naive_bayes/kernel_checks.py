"""What the tests of the exact batch kernels share: a batch kernel against the per-event
loop of the same learner, batch after batch, and tolerant comparisons of states."""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from stream_nb.base import Learner
from stream_nb.datasets import zipf_text
from stream_nb.naive_bayes._arrays import MIN_BATCH

TOL = 1e-9

Event = tuple[dict[str, Any], Any, float]
Answers = tuple[list[dict[Hashable, float] | None], list[Hashable | None], dict[int, Exception]]
#: ``kernel(model, xs, ys, ws)``: the kernel's answers for the batch, or ``None`` (not taken)
Kernel = Callable[
    [Learner, Sequence[Mapping[str, Any]], Sequence[Hashable | None], Sequence[float]],
    Answers | None,
]


def zipf_documents(
    n: int,
    *,
    seed: int,
    weights: list[float] | None = None,
    binary: bool = False,
    always: bool = False,
) -> list[Event]:
    """Zipf documents over 3 classes, a 4th class from the middle on, 10% unlabelled, some
    zero counts and a few events made of new tokens only; ``binary``: 0/1 counts;
    ``always``: a token (``bias``) in every event; ``weights``: each event's drawn from
    them (else 1)."""
    rng = random.Random(seed)
    out: list[Event] = []
    for i, (x, y) in enumerate(zipf_text(seed, n, vocabulary=1500, length=(1, 25), classes=3)):
        x = dict(x)
        if i > n // 2 and rng.random() < 0.1:
            y = 3
        if rng.random() < 0.1:
            x[next(iter(x))] = 0
        if rng.random() < 0.01:
            x = {f"new{i}": 1, f"new{i}b": 2}
        if binary:
            x = {t: int(c > 0) for t, c in x.items()}
        if always:
            x["bias"] = 1
        label: Hashable | None = None if rng.random() < 0.1 else y
        out.append((x, label, rng.choice(weights) if weights else 1.0))
    return out


def close(a: Any, b: Any, path: str = "", tol: float = TOL) -> None:
    """Recursive equality, floats to ``tol`` (relative or absolute)."""
    if isinstance(a, float) or isinstance(b, float):
        assert isinstance(a, (int, float)) and isinstance(b, (int, float)), path
        assert math.isclose(a, b, rel_tol=tol, abs_tol=tol), f"{path}: {a} != {b}"
    elif isinstance(a, dict):
        assert isinstance(b, dict) and set(a) == set(b), path
        for k in a:
            close(a[k], b[k], f"{path}.{k}", tol)
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        for i, (u, v) in enumerate(zip(a, b, strict=True)):
            close(u, v, f"{path}[{i}]", tol)
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def against_the_loop(
    make: Callable[[], Learner],
    events: list[Event],
    seed: int,
    kernel: Kernel,
    *,
    exact_state: bool = False,
    warm: int = 50,
) -> int:
    """Warm up on a prefix, then batches of random sizes: ``kernel`` on one model, the
    per-event loop (:meth:`Learner.predict_learn_many` of the base class) on another.

    Every log posterior agrees to :data:`TOL`, every decision where the best class
    leads by more, and the states after every batch to :data:`TOL` (``exact_state``:
    exactly, in the same order). Returns the number of batches the kernel took.
    """
    fast, slow = make(), make()
    for x, y, w in events[:warm]:
        if y is not None:  # None: unlabelled (cannot be learned)
            fast.learn_one(x, y, w)
            slow.learn_one(x, y, w)
    rng = random.Random(seed)
    i, used = warm, 0
    while i < len(events):
        batch = events[i : i + rng.choice([MIN_BATCH, 100, 257, 600])]
        xs = [dict(e[0]) for e in batch]
        ys = [e[1] for e in batch]
        ws = [e[2] for e in batch]
        got = kernel(fast, xs, ys, ws)
        want = Learner.predict_learn_many(slow, xs, ys, ws)  # the per-event loop
        if got is None:  # unusual batch: the caller runs the loop
            got = Learner.predict_learn_many(fast, xs, ys, ws)
        else:
            used += 1
        lps, preds, errors = got
        assert errors == want[2] == {}
        for lp, want_lp, pred, want_pred in zip(lps, want[0], preds, want[1], strict=True):
            close(lp, want_lp)
            ranked = sorted(want_lp.values()) if want_lp else []
            if len(ranked) < 2 or ranked[-1] - ranked[-2] > TOL:
                assert pred == want_pred
        assert fast.n_learned == slow.n_learned
        if exact_state:
            assert fast.to_state() == slow.to_state()
        else:
            close(fast.to_state(), slow.to_state())
        i += len(batch)
    return used
