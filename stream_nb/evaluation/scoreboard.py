"""What the prequential evaluator has counted, and the per-event update.

A :class:`Scoreboard` holds the evaluator's settings and running statistics:
the label codes, the three views, the window's events and the fading view's
scale. :class:`~stream_nb.evaluation.PrequentialEvaluator` owns one and is its
only user outside this package; inside it, :meth:`Scoreboard.add` scores one
event, :mod:`stream_nb.evaluation.batch` a coded batch (the same result, bit
for bit) and :mod:`stream_nb.evaluation.state` saves and loads it.
"""

from __future__ import annotations

from typing import Any

from stream_nb._exceptions import ConfigError
from stream_nb.evaluation.decision import LossMatrix, check_loss_matrix, decision_cost
from stream_nb.evaluation.kernels import MIN_BATCH
from stream_nb.evaluation.views import RENORMALISE_BELOW, Ring, View


class Scoreboard:
    """The settings and running statistics of a prequential evaluator.

    Parameters
    ----------
    window_size
        Number of most recent events in the ``window`` view (≥ 1).
    fading_factor
        ``λ`` in (0, 1] of the ``fading`` view.
    loss_matrix
        Optional ``loss_matrix[predicted][true] -> cost`` (checked and copied).

    Attributes
    ----------
    window_size, fading_factor, loss_matrix
        The checked settings.
    true_codes, true_labels
        True label -> code, the index of its first appearance (the
        majority's tie-break order), and code -> true label.
    pred_codes, pred_labels
        The same for predicted labels (``None``, no prediction, included), in
        the order first emitted.
    has_last, last
        Whether an event was scored, and its true label (the no-change
        baseline's prediction for the next one).
    cumulative, window, fading
        The three :class:`~stream_nb.evaluation.views.View` objects; the
        fading view in raw units (true = raw × ``scale``).
    ring
        The window's events (:class:`~stream_nb.evaluation.views.Ring`).
    evictions
        Window evictions since the window's float sums were last re-added
        from its events (:meth:`resum_window`, once per ``window_size``).
    scale
        The fading view's global scale, multiplied by ``λ`` per event and
        renormalised to 1 below :data:`~stream_nb.evaluation.views.RENORMALISE_BELOW`.
    batchable
        Whether batches may take the vectorised path: below ``λ ≈ 7.5e-4`` a
        run between two renormalisations is shorter than :data:`MIN_BATCH`
        events, and batches run the per-event path.

    Examples
    --------
    >>> board = Scoreboard(window_size=2, fading_factor=1.0)
    >>> for y_true, y_pred in [("a", "a"), ("b", "a"), ("b", "b")]:
    ...     board.add(y_true, y_pred, 0.5)
    >>> board.cumulative.n, board.cumulative.correct, board.window.n
    (3, 2, 2)
    >>> board.true_labels, board.pred_codes
    (['a', 'b'], {'a': 0, 'b': 1})
    """

    __slots__ = (
        "batchable",
        "cumulative",
        "evictions",
        "fading",
        "fading_factor",
        "has_last",
        "last",
        "loss_matrix",
        "pred_codes",
        "pred_labels",
        "ring",
        "scale",
        "true_codes",
        "true_labels",
        "window",
        "window_size",
    )

    def __init__(
        self,
        window_size: int = 1000,
        fading_factor: float = 0.999,
        loss_matrix: LossMatrix | None = None,
    ) -> None:
        if isinstance(window_size, bool) or not isinstance(window_size, int) or window_size < 1:
            raise ConfigError(f"window must be an integer ≥ 1 (events), got {window_size!r}")
        if (
            isinstance(fading_factor, bool)
            or not isinstance(fading_factor, (int, float))
            or not 0.0 < fading_factor <= 1.0
        ):
            raise ConfigError(
                f"fading_factor must be in (0, 1], got {fading_factor!r}; "
                "0.999 remembers about the last 1000 events"
            )
        self.window_size = window_size
        self.fading_factor = lam = float(fading_factor)
        self.loss_matrix = check_loss_matrix(loss_matrix)
        self.true_codes: dict[Any, int] = {}
        self.true_labels: list[Any] = []
        self.pred_codes: dict[Any, int] = {}
        self.pred_labels: list[Any] = []
        self.has_last = False
        self.last: Any = None
        self.cumulative = View()
        self.window = View()
        self.ring = Ring()
        self.evictions = 0
        self.fading = View()
        self.scale = 1.0
        self.batchable = lam**MIN_BATCH >= RENORMALISE_BELOW

    def add(self, y_true: Any, y_pred: Any, loss: float) -> None:
        """Score one event whose log loss is ``loss`` (the per-event path)."""
        correct = y_pred is not None and y_pred == y_true
        matrix = self.loss_matrix
        cost = 0.0 if matrix is None else decision_cost(matrix, y_pred, y_true)
        nochange_ok = self.has_last and self.last == y_true
        order = self.true_codes
        tc = order.get(y_true)
        if tc is None:
            tc = order[y_true] = len(self.true_labels)
            self.true_labels.append(y_true)
        pc = self.pred_codes.get(y_pred)
        if pc is None:
            pc = self.pred_codes[y_pred] = len(self.pred_labels)
            self.pred_labels.append(y_pred)

        self.cumulative.add(y_true, y_pred, 1, correct, loss, cost, nochange_ok, order)

        ring = self.ring
        view = self.window
        r_t, r_p, r_correct, r_loss, r_cost, r_nochange, r_majority = ring.views
        if ring.end - ring.start == self.window_size:
            s = ring.start
            old = (
                self.true_labels[r_t[s]], self.pred_labels[r_p[s]], r_correct[s], r_loss[s],
                r_cost[s], r_nochange[s], r_majority[s],
            )  # fmt: skip
            ring.start = s + 1
            view.remove(old)
            if old[0] == view.majority:
                view.find_majority(order)
            self.evictions += 1
            if self.evictions >= self.window_size:
                self.resum_window()
        majority_ok = view.add(y_true, y_pred, 1, correct, loss, cost, nochange_ok, order)
        e = ring.end
        if e == ring.capacity:
            ring.reserve(1)
            e = ring.end
            r_t, r_p, r_correct, r_loss, r_cost, r_nochange, r_majority = ring.views
        r_t[e] = tc
        r_p[e] = pc
        r_correct[e] = correct
        r_loss[e] = loss
        r_cost[e] = cost
        r_nochange[e] = nochange_ok
        r_majority[e] = majority_ok
        ring.end = e + 1

        lam = self.fading_factor
        if lam != 1.0:
            scale = self.scale * lam
            if scale < RENORMALISE_BELOW:
                self.fading.rescale(scale)
                scale = 1.0
            self.scale = scale
            self.fading.add(y_true, y_pred, 1.0 / scale, correct, loss, cost, nochange_ok, order)
        else:
            self.fading.add(y_true, y_pred, 1.0, correct, loss, cost, nochange_ok, order)

        self.has_last = True
        self.last = y_true

    def resum_window(self) -> None:
        """Re-add the window's float sums from its events, so subtraction errors
        never pile up.

        numpy's pairwise sum (error ~1e-16 × log2(window) relative to the sum
        of the terms): it depends on the values and their order only, so the
        batch path, which re-sums the same events, gets the same bits.
        """
        self.evictions = 0
        ring = self.ring
        live = slice(ring.start, ring.end)
        self.window.loss = float(ring.arrays[3][live].sum())
        self.window.cost = float(ring.arrays[4][live].sum())
