"""What the batch kernel learned, recorded into a tracked model-sync delta.

While a delta is tracked (:meth:`~stream_nb.base.Learner.track_delta`), every
event the model learns is learned by the delta too: a fresh model of the same
class that bins numbers with the cut points the model had when tracking began
and holds only what was learned since. The batch kernel learns runs of known
events straight into the model's dense block; :func:`record_run` then teaches
the delta the same events, in order:

* an event whose every item (its ``(feature, value)``, the same in both models)
  and class the delta holds already is learned as known items, consecutive ones
  at once (:meth:`~stream_nb.seminaive._base._SemiNaive._learn_known_run`: the
  counts, weights and single counts in event order, as ``learn_one`` adds them;
  for TAN and KDB the family counts, and a structure rebuild right after the
  event that is due for one);
* any other event (a value, feature or class new to the delta, a number whose
  cut points the delta does not have, a value past its cap) goes through the
  delta's ``learn_one`` with its raw values, which may give the delta the items
  the events after it need.

So the delta ends exactly as ``learn_one`` would have left it, event by event
(tested on its state, JSON for JSON).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from stream_nb.seminaive._known import Rows

if TYPE_CHECKING:
    from stream_nb.seminaive._base import _SemiNaive

__all__ = ["record_run"]


def record_run(
    model: _SemiNaive,
    rows: Rows,
    ys: Sequence[Hashable | None],
    ws: Sequence[float],
    raw: Callable[[int], Mapping[str, Any]],
) -> None:
    """Teach ``model``'s tracked delta the events its batch kernel just learned.

    ``rows[i]`` are event ``i``'s items in the model's dense block, ``ys[i]``
    its label (``None``: not learned), ``ws[i]`` its weight and ``raw(i)`` the
    event as given. Counts the events into ``model.delta_weight`` as
    ``learn_one`` does.
    """
    delta = model._delta
    assert isinstance(delta, type(model))  # (track_delta checks it)
    learned = [i for i, y in enumerate(ys) if y is not None]
    total = model._delta_weight
    for i in learned:
        total += ws[i]
    model._delta_weight = total
    named = model._store.dense.items if model._store.dense is not None else []
    items = rows if isinstance(rows, np.ndarray) else None
    p = 0
    while p < len(learned):
        block = delta._store.dense
        if block is None:  # (the delta's counts are sparse: one event at a time)
            for i in learned[p:]:
                delta.learn_one(raw(i), ys[i], ws[i])
            return
        index = block.index
        mapping = np.array([index.get(item, -1) for item in named], dtype=np.intp)
        classes = delta._store.classes
        at = learned[p:]
        ks = np.array([classes.get(ys[i], -1) for i in at], dtype=np.intp)
        if items is not None:
            translated: Any = mapping[items[at]]
            bad = (translated < 0).any(axis=1) | (ks < 0)
        else:
            translated = [mapping[rows[i]] for i in at]
            bad = np.array([(t < 0).any() for t in translated]) | (ks < 0)
        stop = int(np.argmax(bad)) if bad.any() else len(at)
        if stop:
            run = translated[:stop]
            if not isinstance(run, np.ndarray):
                run = [t.tolist() for t in run]
            delta._learn_known_run(run, ks[:stop], [ys[i] for i in at[:stop]],
                                   [ws[i] for i in at[:stop]])  # fmt: skip
        p += stop
        if p < len(learned):  # new to the delta: learned from its raw values
            i = learned[p]
            delta.learn_one(raw(i), ys[i], ws[i])
            p += 1
