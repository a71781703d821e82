"""The prequential evaluator: three views of one scored stream.

Events are scored one at a time or, vectorised, a batch at a time.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from stream_nb.evaluation.batch import BatchTables, score_arrays, score_mappings
from stream_nb.evaluation.decision import LossMatrix
from stream_nb.evaluation.kernels import MIN_BATCH
from stream_nb.evaluation.scoreboard import Scoreboard
from stream_nb.evaluation.state import scoreboard_from_state, scoreboard_to_state
from stream_nb.evaluation.views import LOG_FLOOR, MAX_LOSS

#: update_arrays scores queued batches together once this many events wait: one
#: vectorised pass costs a few dozen numpy calls whatever its length, so longer
#: passes amortise them (docs/benchmarks.md). Reading or changing the evaluator
#: (n, report, to_state, update, update_many) scores them first.
_DEFER_EVENTS = 8192


class PrequentialEvaluator:
    """Prequential metrics of a classifier, cumulative, windowed and faded.

    See the module docstring for the formulas, the baselines of ``kappa_m``
    and ``kappa_t`` and the values reported when a metric is undefined.

    Parameters
    ----------
    window
        Number of most recent events in the ``window`` view (≥ 1).
    fading_factor
        ``λ`` in (0, 1] of the ``fading`` view; the effective memory is about
        ``1 / (1 - λ)`` events (1000 for the default 0.999). ``λ = 1`` makes
        it equal to the cumulative view.
    loss_matrix
        Optional ``loss_matrix[predicted][true] -> cost``; entries left out
        default to the 0-1 loss. When given, every view also reports
        ``cost``, the mean cost of the decisions made (use
        :func:`bayes_risk_decision` to make decisions that minimise it).

    Examples
    --------
    >>> import math
    >>> ev = PrequentialEvaluator(window=2)
    >>> for y_true, y_pred, p_true in [("a", "a", 0.9), ("b", "a", 0.4), ("b", "b", 0.8)]:
    ...     ev.update(y_true, y_pred, {y_true: math.log(p_true)})
    >>> r = ev.report()
    >>> r["cumulative"]["n"], round(r["cumulative"]["accuracy"], 4)
    (3, 0.6667)
    >>> r["window"]["n"], r["window"]["accuracy"]
    (2, 0.5)
    >>> round(r["cumulative"]["log_loss"], 4)  # (-log .9 - log .4 - log .8) / 3
    0.4149
    >>> r["cumulative"]["confusion"]
    [['a', 'a', 1], ['b', 'a', 1], ['b', 'b', 1]]
    """

    def __init__(
        self,
        *,
        window: int = 1000,
        fading_factor: float = 0.999,
        loss_matrix: LossMatrix | None = None,
    ) -> None:
        # the settings (checked) and every statistic
        self._board = Scoreboard(window, fading_factor, loss_matrix)
        # caches of the batch path, derived from the labels (not part of the state)
        self._tables = BatchTables()
        # update_arrays batches not scored yet (same labels), and their events: scored
        # together once _DEFER_EVENTS are waiting, or before anything reads or
        # changes the state, so nobody can tell (see update_arrays)
        self._pending: list[tuple[Sequence[Hashable], list[Hashable], Any, Any]] = []
        self._pending_events = 0

    @property
    def window(self) -> int:
        """Number of most recent events in the ``window`` view."""
        return self._board.window_size

    @property
    def fading_factor(self) -> float:
        """``λ`` of the ``fading`` view."""
        return self._board.fading_factor

    @property
    def loss_matrix(self) -> dict[Hashable, dict[Hashable, float]] | None:
        """The loss matrix as checked (a copy of the one given), or ``None``."""
        return self._board.loss_matrix

    @property
    def n(self) -> int:
        """Number of labelled events evaluated since the start."""
        self._flush()
        return int(self._board.cumulative.n)

    @property
    def n_correct(self) -> int:
        """Number of those whose prediction was right."""
        self._flush()
        return int(self._board.cumulative.correct)

    def _flush(self) -> None:
        """Score the batches :meth:`update_arrays` queued (one vectorised pass)."""
        pending = self._pending
        if not pending:
            return
        self._pending = []
        self._pending_events = 0
        if len(pending) == 1:
            score_arrays(self._board, self._tables, *pending[0])
            return
        ys: list[Hashable] = []
        for batch in pending:
            ys.extend(batch[0])
        score_arrays(
            self._board,
            self._tables,
            ys,
            pending[0][1],
            np.concatenate([batch[2] for batch in pending]),
            np.concatenate([batch[3] for batch in pending]),
        )

    def update(
        self, y_true: Hashable, y_pred: Hashable | None, log_proba: Mapping[Any, float]
    ) -> None:
        """Score one labelled event with the prediction made before learning it.

        Parameters
        ----------
        y_true
            The event's label (a hashable scalar, not ``None``).
        y_pred
            The decision that was emitted; ``None`` when the model could not
            predict (never correct).
        log_proba
            ``log P(c | x)`` by class as predicted; classes left out have
            probability 0 (log loss at :data:`LOG_LOSS_FLOOR`).
        """
        self._flush()
        hash(y_pred)  # an unhashable prediction fails here, before any view changed
        lp = log_proba.get(y_true)
        if lp is None or not lp > LOG_FLOOR:  # also NaN
            loss = MAX_LOSS
        elif lp >= 0.0:
            loss = 0.0
        else:
            loss = -lp
        self._board.add(y_true, y_pred, loss)

    def update_many(
        self,
        ys_true: Sequence[Hashable],
        ys_pred: Sequence[Hashable | None],
        log_probas: Sequence[Mapping[Any, float]],
    ) -> None:
        """Score several labelled events, in order: exactly :meth:`update` on each triple.

        From :data:`MIN_BATCH` events on, the batch runs the vectorised path of
        :meth:`update_arrays` (each event's ``log P(y_true)`` is read from its
        mapping, the labels are coded once); the state and the report come out
        bit for bit as with :meth:`update` event by event. Shorter batches, and
        streams with more than 64 distinct true labels, run the per-event path.

        Raises
        ------
        TypeError
            If a prediction or a label is unhashable; checked for the whole batch before
            any view changed.
        ValueError
            If the three sequences differ in length.

        Examples
        --------
        >>> a, b = PrequentialEvaluator(window=2), PrequentialEvaluator(window=2)
        >>> events = [("x", "x", {"x": -0.1}), ("y", "x", {"x": -0.2}), ("y", "y", {"y": -0.3})]
        >>> for t, p, lp in events:
        ...     a.update(t, p, lp)
        >>> b.update_many(*zip(*events))
        >>> a.to_state() == b.to_state()
        True
        >>> many = [(t, p, lp) for _ in range(20) for t, p, lp in events]  # 60 events
        >>> for t, p, lp in many:
        ...     a.update(t, p, lp)
        >>> b.update_many(*zip(*many))  # the vectorised path
        >>> a.to_state() == b.to_state() and a.report() == b.report()
        True
        """
        self._flush()
        n = len(ys_true)
        if not (n == len(ys_pred) == len(log_probas)):
            raise ValueError(
                f"update_many needs as many predictions and log-probabilities as labels, got "
                f"{n}, {len(ys_pred)} and {len(log_probas)}"
            )
        if n < MIN_BATCH or not self._board.batchable:
            for p in ys_pred:
                hash(p)  # an unhashable prediction fails here, before any view changed
            for t in ys_true:
                hash(t)  # likewise an unhashable label
            update = self.update
            for t, p, lp in zip(ys_true, ys_pred, log_probas, strict=True):
                update(t, p, lp)
            return
        score_mappings(self._board, self._tables, ys_true, ys_pred, log_probas)

    def update_arrays(
        self,
        ys_true: Sequence[Hashable],
        labels: Sequence[Hashable],
        log_proba: np.ndarray,
        best: np.ndarray,
    ) -> None:
        """Score a batch given as arrays: the engine's vectorised path.

        Exactly :meth:`update` on ``(ys_true[i], labels[best[i]],
        dict(zip(labels, log_proba[i])))`` for ``i = 0, 1, ...`` in order,
        without a dict per event: the state and the report come out bit for
        bit as with :meth:`update` event by event, so where the batches are cut
        (or a checkpoint restored) does not matter. Every float sum is formed
        in the per-event order, from its value before the batch
        (``np.cumsum`` and ``np.bincount`` add in array order; adding 0.0 for
        an event that does not count changes nothing), and the fading view's
        scale is multiplied by λ once per event (``np.cumprod``) and
        renormalised at the same events.

        Parameters
        ----------
        ys_true
            The events' labels; a label absent from ``labels`` has probability
            0 (log loss at :data:`LOG_LOSS_FLOOR`).
        labels
            The classes, in the column order of ``log_proba``.
        log_proba
            ``log P(labels[j] | x_i)``, shape ``(len(ys_true), len(labels))``.
        best
            Integer array, shape ``(len(ys_true),)``: event ``i`` predicted
            ``labels[best[i]]`` (a prediction is required; use
            :meth:`update_many` for events without one).

        Raises
        ------
        ValueError
            If a shape disagrees or an index of ``best`` is out of range.
        TypeError
            If a label is unhashable. Nothing has changed when either is raised.

        Notes
        -----
        One batch costs a few dozen numpy operations on arrays of ``B`` events
        (× ``K`` classes for the majority baseline: the argmax of prefix sums
        of class counts, lowest first-seen code on ties, as the per-event rule
        keeps it; with ``K ≤ 2`` the sign of one prefix sum of the difference),
        O(B) Python work to code the labels and O(K²) for the dicts. Below
        :data:`MIN_BATCH` events, with more than 64 distinct true labels (128
        predicted ones) or with ``λ < 7.5e-4`` (fewer than :data:`MIN_BATCH`
        events between two renormalisations), the events run the per-event
        path instead.

        Batches are queued (while their ``labels`` stay the same) and scored
        together once ``_DEFER_EVENTS`` (8192) events wait, or as soon as
        anything reads or changes the evaluator (:attr:`n`, :meth:`report`,
        :meth:`to_state`, :meth:`update`, :meth:`update_many`, another
        ``labels``): the result is the same (bit for bit), one pass over
        2048 events costs less than two over 1024.

        Examples
        --------
        >>> labels = ["no", "yes"]
        >>> lp = np.log([[0.9, 0.1], [0.3, 0.7], [0.6, 0.4]])
        >>> ev = PrequentialEvaluator(window=2)
        >>> ev.update_arrays(["no", "no", "maybe"], labels, lp, lp.argmax(axis=1))
        >>> r = ev.report()["cumulative"]
        >>> r["n"], round(r["accuracy"], 4), r["confusion"]
        (3, 0.3333, [['no', 'no', 1], ['no', 'yes', 1], ['maybe', 'no', 1]])
        >>> round(r["log_loss"], 4)  # (-log .9 - log .3 + 34.54) / 3: "maybe" is no label
        11.9494
        >>> one = PrequentialEvaluator(window=2)
        >>> for y, row in zip(["no", "no", "maybe"], lp):
        ...     one.update(y, labels[int(row.argmax())], dict(zip(labels, row)))
        >>> one.report() == ev.report()
        True

        A batch of :data:`MIN_BATCH` events or more takes the vectorised path:

        >>> rng = np.random.default_rng(0)
        >>> lp = np.log(rng.dirichlet([1.0, 1.0], size=512))
        >>> ys = [labels[i] for i in rng.integers(0, 2, size=512)]
        >>> ev, one = PrequentialEvaluator(window=100), PrequentialEvaluator(window=100)
        >>> ev.update_arrays(ys, labels, lp, lp.argmax(axis=1))
        >>> for y, row in zip(ys, lp):
        ...     one.update(y, labels[int(row.argmax())], dict(zip(labels, row)))
        >>> ev.to_state() == one.to_state() and ev.report() == one.report()
        True
        """
        n = len(ys_true)
        k = len(labels)
        matrix = np.asarray(log_proba, dtype=np.float64)
        if matrix.shape != (n, k):
            raise ValueError(
                f"log_proba must have shape (len(ys_true), len(labels)) = ({n}, {k}), "
                f"got {matrix.shape}"
            )
        index = np.asarray(best)
        if index.shape != (n,) or (n and index.dtype.kind not in "iu"):
            raise ValueError(
                f"best must be an integer array of shape ({n},) (one column of log_proba "
                f"per event), got {index.dtype} of shape {index.shape}"
            )
        if n and (int(index.min()) < 0 or int(index.max()) >= k):
            raise ValueError(
                f"best must index labels, 0 ≤ best[i] < {k}; got values from "
                f"{int(index.min())} to {int(index.max())}"
            )
        dict.fromkeys(ys_true)  # TypeError for an unhashable label, before any change
        dict.fromkeys(labels)
        if n == 0:
            return
        labels = list(labels)
        if self._pending and self._pending[0][1] != labels:
            self._flush()
        self._pending.append((ys_true, labels, matrix, index))
        self._pending_events += n
        if self._pending_events >= _DEFER_EVENTS:
            self._flush()

    def report(self, *, confusion: bool = True) -> dict[str, Any]:
        """All metrics of the three views.

        Parameters
        ----------
        confusion
            Include each view's confusion matrix (O(cells)); ``False`` keeps
            the call O(K), for frequent monitoring.

        Returns
        -------
        dict
            ``{"cumulative": {...}, "window": {...}, "fading": {...}}``, each
            with ``n``, ``accuracy``, ``log_loss``, ``kappa``, ``kappa_m``,
            ``kappa_t``, ``macro_f1``, ``cost`` (with a loss matrix) and
            ``confusion`` (``[[truth, prediction, weight], ...]``, truths in
            the order first seen, then predictions in the order first
            emitted). Undefined metrics are ``None``. JSON-able.
        """
        self._flush()
        board = self._board
        with_cost = board.loss_matrix is not None
        order, pcode = board.true_codes, board.pred_codes
        return {
            "cumulative": board.cumulative.summary(1.0, with_cost, confusion, order, pcode),
            "window": board.window.summary(1.0, with_cost, confusion, order, pcode),
            "fading": board.fading.summary(board.scale, with_cost, confusion, order, pcode),
        }

    # ------------------------------------------------------------------ state
    def to_state(self) -> dict[str, Any]:
        """The evaluator as plain JSON-able data, for checkpoints.

        Labels are stored in ``[key, value]`` pairs and lists, never as JSON
        object keys, so ``1``, ``"1"``, ``1.5`` and ``True`` keep their types.

        Examples
        --------
        >>> import json
        >>> ev = PrequentialEvaluator()
        >>> ev.update(1, 1, {1: 0.0})
        >>> copy = PrequentialEvaluator.from_state(json.loads(json.dumps(ev.to_state())))
        >>> copy.report() == ev.report()
        True
        """
        self._flush()
        return scoreboard_to_state(self._board)

    @classmethod
    def from_state(cls, state: Mapping[str, Any]) -> PrequentialEvaluator:
        """Rebuild an evaluator from :meth:`to_state` output.

        Raises
        ------
        ModelStateError
            If the state is malformed or of an unknown format or version.
        """
        board = scoreboard_from_state(state)
        evaluator = cls(
            window=board.window_size,
            fading_factor=board.fading_factor,
            loss_matrix=board.loss_matrix,
        )
        evaluator._board = board  # (the same settings, checked once more by cls)
        return evaluator
