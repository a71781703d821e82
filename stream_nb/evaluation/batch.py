"""The evaluator's vectorised update of a batch: exact, in the per-event order.

:func:`score_arrays` and :func:`score_mappings` code a batch's labels on a
:class:`~stream_nb.evaluation.scoreboard.Scoreboard` and score it with
:func:`update_batch` (or, when the batch is short or has too many classes,
with :meth:`Scoreboard.add <stream_nb.evaluation.scoreboard.Scoreboard.add>`
event by event); :class:`BatchTables` caches what the vectorised path derives
from the label codes.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np

from stream_nb.evaluation.decision import decision_cost
from stream_nb.evaluation.kernels import (
    BINS,
    MAX_BATCH_CLASSES,
    MIN_BATCH,
    add_counts,
    class_prefix,
    interleaved_sum,
    lookup,
    losses,
    majorities,
    register,
    replay_majority,
    running_sum,
)
from stream_nb.evaluation.scoreboard import Scoreboard
from stream_nb.evaluation.views import RENORMALISE_BELOW


class BatchTables:
    """What the vectorised path derives from a scoreboard's label codes and loss
    matrix (not part of its state), rebuilt by :meth:`refresh` when a label is added.

    Attributes
    ----------
    p2t
        Predicted code -> true code of the same label (-1: ``None``, or a
        label never true).
    diagonal, diagonal_labels
        The confusion cells ``t × K_p + p`` whose prediction is the true label
        ``t``, and those true labels.
    costs
        ``[predicted code, true code] -> cost`` with a loss matrix, else ``None``.
    index_template
        Bin indices reused by :func:`fading_run` (grown on demand).
    """

    __slots__ = ("costs", "diagonal", "diagonal_labels", "index_template", "key", "p2t")

    def __init__(self) -> None:
        self.key = (-1, -1)
        self.p2t: Any = None
        self.diagonal: Any = None
        self.diagonal_labels: list[Any] = []
        self.costs: Any = None
        self.index_template: Any = np.empty((0, 0), np.intp)

    def refresh(self, board: Scoreboard) -> None:
        """Rebuild the tables if ``board`` has coded a label since the last call."""
        key = (len(board.true_labels), len(board.pred_labels))
        if key == self.key:
            return
        order = board.true_codes
        p2t = self.p2t = np.array(
            [-1 if p is None else order.get(p, -1) for p in board.pred_labels], np.intp
        )
        same = np.flatnonzero(p2t >= 0)
        self.diagonal = p2t[same] * key[1] + same
        self.diagonal_labels = [board.true_labels[t] for t in p2t[same].tolist()]
        matrix = board.loss_matrix
        if matrix is not None:
            self.costs = np.array(
                [
                    [decision_cost(matrix, p, t) for t in board.true_labels]
                    for p in board.pred_labels
                ],
                np.float64,
            ).reshape(key[1], key[0])
        self.key = key


class CodedEvents(NamedTuple):
    """Events of a batch as arrays: true and predicted codes, hits, log losses,
    costs (``None`` without a loss matrix) and confusion cells."""

    tc: Any
    pc: Any
    correct: Any
    nochange: Any
    loss: Any
    cost: Any
    cells: Any

    def part(self, run: slice) -> CodedEvents:
        """The events of ``run``."""
        cost = None if self.cost is None else self.cost[run]
        return CodedEvents(
            self.tc[run], self.pc[run], self.correct[run], self.nochange[run], self.loss[run],
            cost, self.cells[run],
        )  # fmt: skip


def update_batch(
    board: Scoreboard, tables: BatchTables, tc: Any, pc: Any, loss: Any, last: Any
) -> None:
    """The vectorised path: events coded ``tc`` (true) and ``pc`` (predicted).

    Every label is registered and there are at most 64 true codes; ``last``
    is the batch's last true label. The result is the per-event path's, bit
    for bit: counts are integers, and every float sum is formed in the
    per-event order, from its value before the batch (``np.cumsum`` and
    ``np.bincount`` add in array order, and adding 0.0 for an event that does
    not count changes nothing).

    The majority classifier of a view predicts the argmax of the view's
    class totals *including* the event, ties to the lowest code (first
    seen): the incremental rule of :meth:`View.add
    <stream_nb.evaluation.views.View.add>` keeps exactly that, and
    ``np.argmax`` returns the first maximum. So its hits are read off prefix
    sums of class counts from the totals at the batch start (minus, for the
    window, the prefix of the evicted events).
    """
    b = len(tc)
    tlabels, plabels, order = board.true_labels, board.pred_labels, board.true_codes
    kt, kp = len(tlabels), len(plabels)
    tables.refresh(board)
    costs = tables.costs
    correct = tables.p2t[pc] == tc
    cost = None if costs is None else costs[pc, tc]
    previous = np.empty(b, np.intp)
    previous[0] = order.get(board.last, -1) if board.has_last else -1
    previous[1:] = tc[:-1]
    nochange = previous == tc
    cells = tc * kp + pc
    events = CodedEvents(tc, pc, correct, nochange, loss, cost, cells)
    batch_true = np.bincount(tc, minlength=kt)
    batch_pred = np.bincount(pc, minlength=kp)
    batch_cells = np.bincount(cells, minlength=kt * kp)
    diagonal = tables.diagonal  # the cells of correct predictions
    batch_tp = batch_cells[diagonal]
    n_correct = int(np.count_nonzero(correct))
    n_nochange = int(np.count_nonzero(nochange))
    true_key, pred_key = tlabels.__getitem__, plabels.__getitem__
    tp_key = tables.diagonal_labels.__getitem__

    def cell_key(j: int) -> tuple[Any, Any]:  # cell j = t × K_p + p
        t, p = divmod(j, kp)
        return (tlabels[t], plabels[p])

    # --- cumulative (weight 1)
    view = board.cumulative
    prefix = class_prefix(tc, kt)
    majority = majorities(prefix, kt, view.true, order, tc[:0])
    view.n += b
    view.correct += n_correct
    view.nochange_correct += n_nochange
    view.majority_correct += int(np.count_nonzero(majority == tc))
    view.loss = running_sum(view.loss, loss)
    if cost is not None:
        view.cost = running_sum(view.cost, cost)
    add_counts(view.true, true_key, batch_true)
    add_counts(view.pred, pred_key, batch_pred)
    add_counts(view.tp, tp_key, batch_tp)
    add_counts(view.confusion, cell_key, batch_cells)
    view.majority = tlabels[int(majority[-1])]

    # --- window (weight 1): the batch is appended to the ring; from event
    # `first` on, each event evicts the oldest one of (window ++ batch)
    view = board.window
    ring = board.ring
    size = board.window_size
    ring.reserve(b)
    start, end = ring.start, ring.end
    first = min(b, size - (end - start))
    evicted = b - first
    r_t, r_p, r_correct, r_loss, r_cost, r_nochange, r_majority = ring.arrays
    new = slice(end, end + b)
    r_t[new] = tc
    r_p[new] = pc
    r_correct[new] = correct
    r_loss[new] = loss
    r_cost[new] = 0.0 if cost is None else cost
    r_nochange[new] = nochange
    gone = slice(start, start + evicted)
    old_t = r_t[gone]
    majority = majorities(prefix, kt, view.true, order, old_t)
    hits = majority == tc
    r_majority[new] = hits
    ring.start, ring.end = start + evicted, end + b
    view.n += b - evicted
    view.correct += n_correct
    view.nochange_correct += n_nochange
    view.majority_correct += int(np.count_nonzero(hits))
    if evicted:
        old_p = r_p[gone]
        view.correct -= int(np.count_nonzero(r_correct[gone]))
        view.nochange_correct -= int(np.count_nonzero(r_nochange[gone]))
        view.majority_correct -= int(np.count_nonzero(r_majority[gone]))
        add_counts(view.true, true_key, batch_true - np.bincount(old_t, minlength=kt))
        add_counts(view.pred, pred_key, batch_pred - np.bincount(old_p, minlength=kp))
        cells_left = batch_cells - np.bincount(old_t * kp + old_p, minlength=kt * kp)
        add_counts(view.tp, tp_key, cells_left[diagonal])
        add_counts(view.confusion, cell_key, cells_left)
    else:
        add_counts(view.true, true_key, batch_true)
        add_counts(view.pred, pred_key, batch_pred)
        add_counts(view.tp, tp_key, batch_tp)
        add_counts(view.confusion, cell_key, batch_cells)
    view.majority = tlabels[int(majority[-1])]
    # The float sums as the per-event path forms them: "- evicted, + new" per
    # event, from the value re-added from the window's events
    # (Scoreboard.resum_window) at the last re-sum of the batch if there is
    # one (the k-th eviction re-sums when the eviction counter reaches
    # `size`), else from the value before the batch.
    resum = None
    counter = board.evictions + evicted
    if evicted:
        k = max(1, size - board.evictions)  # first eviction that re-sums
        if evicted >= k:
            k += (evicted - k) // size * size  # the last one
            resum = first + k - 1  # its event
            counter = evicted - k
    board.evictions = counter

    def window_sum(value: float, column: Any) -> float:
        """The window's sum of ``column`` after the batch, from ``value`` before it."""
        if resum is None:
            return interleaved_sum(
                value, column[end : end + first], column[gone], column[new][first:]
            )
        kept = slice(start + resum - first + 1, end + resum)  # after the eviction
        return interleaved_sum(
            float(column[kept].sum()),
            column[end + resum : end + resum + 1],
            column[start + resum - first + 1 : start + evicted],
            column[new][resum + 1 :],
        )

    view.loss = window_sum(view.loss, r_loss)
    if cost is not None or view.cost != 0.0:
        view.cost = window_sum(view.cost, r_cost)

    # --- fading: raw weight 1 / scale, the scale multiplied by λ per event and
    # renormalised (raw statistics × scale, scale = 1) when it drops below
    # RENORMALISE_BELOW, as in Scoreboard.add; runs between renormalisations at once
    lam = board.fading_factor
    scale = board.scale
    renormalised = False
    i = 0
    while i < b:
        m = b - i
        if lam == 1.0:
            scales = None
            length = m
            w = np.ones(m)
        else:
            factors = np.full(m, lam)
            factors[0] = 1.0 if renormalised else scale * lam
            scales = np.cumprod(factors)  # the scale at each event (multiplied in order)
            if scales[-1] >= RENORMALISE_BELOW:  # (the scales decrease)
                length = m
                w = 1.0 / scales
            else:
                length = int(np.argmax(scales < RENORMALISE_BELOW))
                w = 1.0 / scales[:length]
        if length:
            if length == b:  # the whole batch (the usual case): its counts are known
                run_counts = (batch_true, batch_pred, batch_cells, n_correct, n_nochange)
                fading_run(board, tables, events, w, run_counts)
            else:
                fading_run(board, tables, events.part(slice(i, i + length)), w, None)
            if scales is not None:
                scale = float(scales[length - 1])
        i += length
        renormalised = i < b
        if renormalised and scales is not None:
            board.fading.rescale(float(scales[length]))
            scale = 1.0
    board.scale = scale

    board.has_last = True
    board.last = last


def fading_run(
    board: Scoreboard,
    tables: BatchTables,
    events: CodedEvents,
    w: Any,
    counts: tuple[Any, Any, Any, int, int] | None,
) -> None:
    """Add a run of events of raw weights ``w`` to the fading view (no
    renormalisation inside), every sum in event order from its current value.

    ``counts``: the run's class, prediction and cell counts and numbers of
    hits and no-change hits, when already known.
    """
    tc, pc, correct, nochange, loss, cost, cells = events
    view = board.fading
    order, pcode = board.true_codes, board.pred_codes
    tlabels, plabels = board.true_labels, board.pred_labels
    kt, kp = len(tlabels), len(plabels)
    k = max(kt, 2)
    m = len(tc)
    # the running class totals: the current totals, then each event's weight on
    # its class's row (0.0 elsewhere, which changes nothing), summed along the row
    totals = [0.0] * k
    for c, value in view.true.items():
        totals[order[c]] = value
    running = np.zeros((k, m + 1))
    running[:, 0] = totals
    running[tc, np.arange(1, m + 1)] = w
    np.cumsum(running, axis=1, out=running)
    # the majority: their argmax, unless a renormalisation rounded two totals
    # to a tie that the carried majority does not win on codes (then the
    # per-event rule decides, replayed: rare)
    carried = None if view.majority is None else order[view.majority]
    if carried is None or carried == max(range(kt), key=lambda j: (totals[j], -j)):
        if kt <= 2:
            majority = (running[1, 1:] > running[0, 1:]).view(np.int8)
        else:
            majority = running[:kt, 1:].argmax(axis=0)
        final = int(majority[-1])
        hits = majority == tc
    else:
        replayed, final = replay_majority(totals, carried, tc.tolist(), w.tolist())
        hits = np.array(replayed, dtype=bool)
    # Every other sum in one bincount, which adds in array order: each bin's
    # current value first, then the events, event by event (one column per
    # sum; 0.0 where the event does not count).
    n_cells = kt * kp
    if counts is None:
        counts = (
            np.bincount(tc, minlength=kt), np.bincount(pc, minlength=kp),
            np.bincount(cells, minlength=n_cells), int(np.count_nonzero(correct)),
            int(np.count_nonzero(nochange)),
        )  # fmt: skip
    true_counts, pred_counts, cell_counts, n_correct, n_nochange = counts
    bins = 6 + kp + n_cells
    starts = np.zeros(bins)
    starts[:6] = (
        view.n, view.correct, view.nochange_correct, view.majority_correct, view.loss,
        view.cost,
    )  # fmt: skip
    for p, value in view.pred.items():
        starts[6 + pcode[p]] = value
    for (t, p), value in view.confusion.items():
        starts[6 + kp + order[t] * kp + pcode[p]] = value
    width = 8 if cost is not None else 7
    index = tables.index_template
    if index.shape[0] < m or index.shape[1] != width:
        index = tables.index_template = np.empty((max(m, 512), width), np.intp)
        index[:, :5] = np.arange(5)  # n, correct, no-change, majority, loss
        index[:, 5] = 5  # cost (with a loss matrix)
    index = index[:m]
    weights = np.empty((m, width))
    weights[:, 0] = w
    np.multiply(w, correct, out=weights[:, 1])
    np.multiply(w, nochange, out=weights[:, 2])
    np.multiply(w, hits, out=weights[:, 3])
    np.multiply(w, loss, out=weights[:, 4])
    if cost is not None:
        np.multiply(w, cost, out=weights[:, 5])
    np.add(pc, 6, out=index[:, -2])
    np.add(cells, 6 + kp, out=index[:, -1])
    weights[:, -2] = w
    weights[:, -1] = w
    sums = np.bincount(
        np.concatenate((BINS[:bins], index.ravel())),
        np.concatenate((starts, weights.ravel())),
        bins,
    )
    scalars = sums[:6].tolist()
    view.n = scalars[0]
    # a flag that never held leaves its sum as it was (the per-event path never adds)
    if n_correct:
        view.correct = scalars[1]
    if n_nochange:
        view.nochange_correct = scalars[2]
    if hits.any():
        view.majority_correct = scalars[3]
    view.loss = scalars[4]
    if cost is not None:
        view.cost = scalars[5]
    totals = running[:, -1].tolist()
    true = view.true
    for j, count in enumerate(true_counts.tolist()):
        if count:
            true[tlabels[j]] = totals[j]
    pred = view.pred
    values = sums[6:].tolist()
    for j, count in enumerate(pred_counts.tolist()):
        if count:
            pred[plabels[j]] = values[j]
    confusion = view.confusion
    cell_counts = cell_counts.tolist()
    for j, count in enumerate(cell_counts):
        if count:
            confusion[(tlabels[j // kp], plabels[j % kp])] = values[kp + j]
    tp = view.tp
    for d, label in zip(tables.diagonal.tolist(), tables.diagonal_labels, strict=True):
        if cell_counts[d]:  # tp[t] and the cell (t, t) receive the same additions
            tp[label] = values[kp + d]
    view.majority = tlabels[final]


def score_arrays(
    board: Scoreboard,
    tables: BatchTables,
    ys_true: Sequence[Hashable],
    labels: list[Hashable],
    matrix: Any,
    index: Any,
) -> None:
    """:meth:`PrequentialEvaluator.update_arrays
    <stream_nb.evaluation.PrequentialEvaluator.update_arrays>` on checked arrays
    (one vectorised pass)."""
    n = len(ys_true)
    order = board.true_codes
    tc, t_codes = lookup(order, ys_true)
    _, l_codes = lookup(board.pred_codes, labels)
    register(order, board.true_labels, ys_true, t_codes)
    if tc is None:
        tc = np.array(t_codes, np.intp)
    column = np.full(len(board.true_labels), -1, np.intp)  # true code -> log_proba column
    for j, label in enumerate(labels):  # a repeated label: its last column, as dict(zip())
        c = order.get(label)
        if c is not None:
            column[c] = j
    columns = column[tc]
    lp = matrix[np.arange(n), columns]
    lp[columns < 0] = np.nan  # absent from labels: probability 0
    loss = losses(lp)
    pcode = board.pred_codes
    if (
        n < MIN_BATCH
        or not board.batchable
        or len(board.true_labels) > MAX_BATCH_CLASSES
        or len(pcode) + (0 if l_codes is None else l_codes.count(None)) > 2 * MAX_BATCH_CLASSES
    ):
        add = board.add
        for t, j, event_loss in zip(ys_true, index.tolist(), loss.tolist(), strict=True):
            add(t, labels[j], event_loss)
        return
    if l_codes is not None:
        # labels never predicted before: code those predicted now, in the order
        # first predicted (as Scoreboard.add does; the codes order the outputs)
        first = sorted(
            (int(np.argmax(index == j)), j)
            for j, c in enumerate(l_codes)
            if c is None and (index == j).any()
        )
        register(pcode, board.pred_labels, [labels[j] for _, j in first], [None] * len(first))
    pc = np.array([pcode.get(label, -1) for label in labels], np.intp)[index]
    update_batch(board, tables, tc, pc, loss, ys_true[-1])


def score_mappings(
    board: Scoreboard,
    tables: BatchTables,
    ys_true: Sequence[Hashable],
    ys_pred: Sequence[Hashable | None],
    log_probas: Sequence[Mapping[Any, float]],
) -> None:
    """:meth:`PrequentialEvaluator.update_many
    <stream_nb.evaluation.PrequentialEvaluator.update_many>` on a batch of
    :data:`MIN_BATCH` events or more, of equal lengths (a ``TypeError`` for an
    unhashable label comes before any change)."""
    n = len(ys_true)
    # codes first (TypeError for an unhashable label, before any change)
    tc, t_codes = lookup(board.true_codes, ys_true)
    pc, p_codes = lookup(board.pred_codes, ys_pred)
    try:  # log P(y_true); None (absent) becomes NaN
        log_p = np.fromiter(map(dict.get, log_probas, ys_true), np.float64, n)  # type: ignore[arg-type]
    except TypeError:  # not dicts: any mappings
        log_p = np.array([d.get(t) for d, t in zip(log_probas, ys_true, strict=True)], np.float64)
    register(board.true_codes, board.true_labels, ys_true, t_codes)
    register(board.pred_codes, board.pred_labels, ys_pred, p_codes)
    loss = losses(log_p)
    if len(board.true_labels) > MAX_BATCH_CLASSES or len(board.pred_labels) > 2 * MAX_BATCH_CLASSES:
        add = board.add
        for t, p, event_loss in zip(ys_true, ys_pred, loss.tolist(), strict=True):
            add(t, p, event_loss)
        return
    if tc is None:
        tc = np.array(t_codes, np.intp)
    if pc is None:
        pc = np.array(p_codes, np.intp)
    update_batch(board, tables, tc, pc, loss, ys_true[-1])
