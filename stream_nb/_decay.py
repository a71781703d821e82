"""Forgetting over a batch, for the batch kernels.

With ``half_life`` a learner keeps its statistics in raw units with one global
scale (see :mod:`stream_nb.base`): learning event ``i`` of weight ``w_i``
multiplies the scale by ``γ^{w_i}`` and then adds ``w_i / scale`` raw units;
predicting event ``i`` smooths with ``α / scale``, the scale before it is
learned; an unlabelled event (predicted only) leaves the scale as it is. Over a
batch the scales are a running product, so a kernel learns the batch as an
ordinary weighted batch of *raw* weights and smooths each event with its own
``α / scale``.

:class:`BatchDecay` computes those numbers exactly as
:meth:`~stream_nb.base.Learner.learn_one` does, one multiplication after the
other (``numpy.multiply.accumulate`` is a running product, left to right), so
the scale after the batch is the per-event path's to the bit. A batch during
which the scale would fall below
:data:`~stream_nb.limits.RENORMALISE_BELOW` (the per-event path renormalises
there, once every ~100 half-lives) is not one a kernel takes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from stream_nb.limits import RENORMALISE_BELOW

__all__ = ["BatchDecay"]


class BatchDecay:
    """The forgetting scale across a batch, as learning it event by event sets it.

    Build it with :meth:`of`.

    Attributes
    ----------
    before
        ``B``: the scale before each event is learned (the one its prediction uses).
    raw
        ``B``: each labelled event's weight in raw units, ``w_i / scale_i`` with
        the scale after it is learned (an unlabelled event keeps its weight: it
        is not learned).
    end
        The scale after the batch.

    Examples
    --------
    >>> decay = BatchDecay.of(1.0, 0.5, ["a", None, "b"], None)
    >>> decay.before.tolist(), decay.raw.tolist(), decay.end
    ([1.0, 0.5, 0.5], [2.0, 1.0, 4.0], 0.25)
    >>> decay.smoothing(1.0).tolist()  # α / scale before each event
    [1.0, 2.0, 2.0]
    """

    __slots__ = ("before", "end", "raw")

    def __init__(self, before: np.ndarray, raw: np.ndarray, end: float) -> None:
        self.before = before
        self.raw = raw
        self.end = end

    @classmethod
    def of(
        cls,
        scale: float,
        gamma: float,
        ys: Sequence[object],
        ws: Sequence[float] | None,
    ) -> BatchDecay | None:
        """The decay of a batch with labels ``ys`` (``None``: predicted only) and weights
        ``ws`` (``None``: every weight 1), from the learner's ``scale`` and its
        ``γ = 2^(-1/half_life)``; ``None`` when the scale would fall below
        :data:`~stream_nb.limits.RENORMALISE_BELOW` within the batch."""
        n = len(ys)
        labelled = np.fromiter((y is not None for y in ys), bool, n)
        factors = np.where(labelled, gamma, 1.0)
        if ws is None:
            raw = np.ones(n)
        else:
            try:
                raw = np.array([float(w) for w in ws], dtype=np.float64)
            except (TypeError, ValueError):
                return None  # not numbers: the per-event path names the weight
            if raw.shape != (n,):
                return None
            odd = np.flatnonzero(labelled & (raw != 1.0))
            if len(odd):  # γ^w as learn_one computes it: Python's power
                factors[odd] = [gamma**w for w in raw[odd].tolist()]
        running = np.multiply.accumulate(np.concatenate(([scale], factors)))
        after = running[1:]
        if n and not after[-1] >= RENORMALISE_BELOW:  # (the product only decreases)
            return None  # (or a weight that is not a weight: NaN)
        np.divide(raw, after, out=raw, where=labelled)
        return cls(running[:-1], raw, float(running[-1]))

    def smoothing(self, alpha: float) -> np.ndarray:
        """``α / scale`` before each event: a smoothing constant in raw units."""
        out: np.ndarray = alpha / self.before
        return out
