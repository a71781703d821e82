"""The evaluator's vectorised update of a coded batch: exact, in the per-event order."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from stream_nb.evaluation.kernels import (
    _BINS,
    _MAX_BATCH_CLASSES,
    MIN_BATCH,
    _add_counts,
    _class_prefix,
    _interleaved_sum,
    _lookup,
    _losses,
    _majorities,
    _register,
    _replay_majority,
    _running_sum,
)
from stream_nb.evaluation.views import (
    _RENORMALISE_BELOW,
)

if TYPE_CHECKING:
    from stream_nb.evaluation.prequential import PrequentialEvaluator


def update_batch(ev: PrequentialEvaluator, tc: Any, pc: Any, loss: Any, last: Any) -> None:
    """The vectorised path: events coded ``tc`` (true) and ``pc`` (predicted).

    Every label is registered and there are at most 64 true codes. The
    result is the per-event path's, bit for bit: counts are integers, and
    every float sum is formed in the per-event order, from its value before
    the batch (``np.cumsum`` and ``np.bincount`` add in array order, and
    adding 0.0 for an event that does not count changes nothing).

    The majority classifier of a view predicts the argmax of the view's
    class totals *including* the event, ties to the lowest code (first
    seen): the incremental rule of :meth:`_View.add` keeps exactly that,
    and ``np.argmax`` returns the first maximum. So its hits are read off
    prefix sums of class counts from the totals at the batch start (minus,
    for the window, the prefix of the evicted events).
    """
    b = len(tc)
    kt, kp = len(ev._tlabels), len(ev._plabels)
    tlabels, plabels, order = ev._tlabels, ev._plabels, ev._order
    p2t, costs = ev._tables()
    correct = p2t[pc] == tc
    cost = None if costs is None else costs[pc, tc]
    previous = np.empty(b, np.intp)
    previous[0] = order.get(ev._last, -1) if ev._has_last else -1
    previous[1:] = tc[:-1]
    nochange = previous == tc
    cells = tc * kp + pc
    batch_true = np.bincount(tc, minlength=kt)
    batch_pred = np.bincount(pc, minlength=kp)
    batch_cells = np.bincount(cells, minlength=kt * kp)
    diagonal = ev._diagonal  # the cells of correct predictions
    batch_tp = batch_cells[diagonal]
    n_correct = int(np.count_nonzero(correct))
    n_nochange = int(np.count_nonzero(nochange))
    true_key, pred_key = tlabels.__getitem__, plabels.__getitem__
    tp_key = ev._diagonal_labels.__getitem__

    def cell_key(j: int) -> tuple[Any, Any]:  # cell j = t × K_p + p
        t, p = divmod(j, kp)
        return (tlabels[t], plabels[p])

    # --- cumulative (weight 1)
    view = ev._cumulative
    prefix = _class_prefix(tc, kt)
    majority = _majorities(prefix, kt, view.true, order, tc[:0])
    view.n += b
    view.correct += n_correct
    view.nochange_correct += n_nochange
    view.majority_correct += int(np.count_nonzero(majority == tc))
    view.loss = _running_sum(view.loss, loss)
    if cost is not None:
        view.cost = _running_sum(view.cost, cost)
    _add_counts(view.true, true_key, batch_true)
    _add_counts(view.pred, pred_key, batch_pred)
    _add_counts(view.tp, tp_key, batch_tp)
    _add_counts(view.confusion, cell_key, batch_cells)
    view.majority = tlabels[int(majority[-1])]

    # --- window (weight 1): the batch is appended to the ring; from event
    # `first` on, each event evicts the oldest one of (window ++ batch)
    view = ev._window
    ring = ev._ring
    size = ev.window
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
    majority = _majorities(prefix, kt, view.true, order, old_t)
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
        _add_counts(view.true, true_key, batch_true - np.bincount(old_t, minlength=kt))
        _add_counts(view.pred, pred_key, batch_pred - np.bincount(old_p, minlength=kp))
        cells_left = batch_cells - np.bincount(old_t * kp + old_p, minlength=kt * kp)
        _add_counts(view.tp, tp_key, cells_left[diagonal])
        _add_counts(view.confusion, cell_key, cells_left)
    else:
        _add_counts(view.true, true_key, batch_true)
        _add_counts(view.pred, pred_key, batch_pred)
        _add_counts(view.tp, tp_key, batch_tp)
        _add_counts(view.confusion, cell_key, batch_cells)
    view.majority = tlabels[int(majority[-1])]
    # The float sums as the per-event path forms them: "- evicted, + new" per
    # event, from the value re-added from the window's events (_resum_window)
    # at the last re-sum of the batch if there is one (the k-th eviction
    # re-sums when the eviction counter reaches `size`), else from the value
    # before the batch.
    resum = None
    counter = ev._evictions + evicted
    if evicted:
        k = max(1, size - ev._evictions)  # first eviction that re-sums
        if evicted >= k:
            k += (evicted - k) // size * size  # the last one
            resum = first + k - 1  # its event
            counter = evicted - k
    ev._evictions = counter
    columns = [(r_loss, "loss")]
    if cost is not None or view.cost != 0.0:
        columns.append((r_cost, "cost"))
    for column, name in columns:
        if resum is None:
            value = _interleaved_sum(
                getattr(view, name),
                column[end : end + first],
                column[gone],
                column[new][first:],
            )
        else:
            kept = slice(start + resum - first + 1, end + resum)  # after the eviction
            value = _interleaved_sum(
                float(column[kept].sum()),
                column[end + resum : end + resum + 1],
                column[start + resum - first + 1 : start + evicted],
                column[new][resum + 1 :],
            )
        setattr(view, name, value)

    # --- fading: raw weight 1 / scale, the scale multiplied by λ per event and
    # renormalised (raw statistics × scale, scale = 1) when it drops below
    # _RENORMALISE_BELOW, as in update; runs between renormalisations at once
    lam = ev.fading_factor
    scale = ev._scale
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
            if scales[-1] >= _RENORMALISE_BELOW:  # (the scales decrease)
                length = m
                w = 1.0 / scales
            else:
                length = int(np.argmax(scales < _RENORMALISE_BELOW))
                w = 1.0 / scales[:length]
        if length:
            if length == b:  # the whole batch (the usual case): its counts are known
                run_counts = (batch_true, batch_pred, batch_cells, n_correct, n_nochange)
                fading_run(ev, tc, pc, correct, nochange, loss, cost, w, cells, run_counts)
            else:
                run = slice(i, i + length)
                fading_run(ev,
                    tc[run], pc[run], correct[run], nochange[run], loss[run],
                    None if cost is None else cost[run], w, cells[run], None,
                )  # fmt: skip
            if scales is not None:
                scale = float(scales[length - 1])
        i += length
        renormalised = i < b
        if renormalised and scales is not None:
            ev._fading.rescale(float(scales[length]))
            scale = 1.0
    ev._scale = scale

    ev._has_last = True
    ev._last = last


def fading_run(
    ev: PrequentialEvaluator,
    tc: Any,
    pc: Any,
    correct: Any,
    nochange: Any,
    loss: Any,
    cost: Any,
    w: Any,
    cells: Any,
    counts: tuple[Any, Any, Any, int, int] | None,
) -> None:
    """Add a run of events of raw weights ``w`` to the fading view (no
    renormalisation inside), every sum in event order from its current value.

    ``counts``: the run's class, prediction and cell counts and numbers of
    hits and no-change hits, when already known.
    """
    view = ev._fading
    order, tlabels, plabels, pcode = ev._order, ev._tlabels, ev._plabels, ev._pcode
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
        replayed, final = _replay_majority(totals, carried, tc.tolist(), w.tolist())
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
    index = ev._index_template
    if index.shape[0] < m or index.shape[1] != width:
        index = ev._index_template = np.empty((max(m, 512), width), np.intp)
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
        np.concatenate((_BINS[:bins], index.ravel())),
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
    for d, label in zip(ev._diagonal.tolist(), ev._diagonal_labels, strict=True):
        if cell_counts[d]:  # tp[t] and the cell (t, t) receive the same additions
            tp[label] = values[kp + d]
    view.majority = tlabels[final]


def score_arrays(
    ev: PrequentialEvaluator,
    ys_true: Sequence[Hashable],
    labels: list[Hashable],
    matrix: Any,
    index: Any,
) -> None:
    """:meth:`update_arrays` on checked arrays (one vectorised pass)."""
    n = len(ys_true)
    tc, t_codes = _lookup(ev._order, ys_true)
    _, l_codes = _lookup(ev._pcode, labels)
    _register(ev._order, ev._tlabels, ys_true, t_codes)
    if tc is None:
        tc = np.array(t_codes, np.intp)
    order = ev._order
    column = np.full(len(ev._tlabels), -1, np.intp)  # true code -> log_proba column
    for j, label in enumerate(labels):  # a repeated label: its last column, as dict(zip())
        c = order.get(label)
        if c is not None:
            column[c] = j
    columns = column[tc]
    lp = matrix[np.arange(n), columns]
    lp[columns < 0] = np.nan  # absent from labels: probability 0
    loss = _losses(lp)
    pcode = ev._pcode
    if (
        n < MIN_BATCH
        or not ev._batchable
        or len(ev._tlabels) > _MAX_BATCH_CLASSES
        or len(pcode) + (0 if l_codes is None else l_codes.count(None)) > 2 * _MAX_BATCH_CLASSES
    ):
        update_one = ev._update_one
        for t, j, event_loss in zip(ys_true, index.tolist(), loss.tolist(), strict=True):
            update_one(t, labels[j], event_loss)
        return
    if l_codes is not None:
        # labels never predicted before: code those predicted now, in the order
        # first predicted (as update does; the codes order the outputs)
        first = sorted(
            (int(np.argmax(index == j)), j)
            for j, c in enumerate(l_codes)
            if c is None and (index == j).any()
        )
        _register(pcode, ev._plabels, [labels[j] for _, j in first], [None] * len(first))
    pc = np.array([pcode.get(label, -1) for label in labels], np.intp)[index]
    update_batch(ev, tc, pc, loss, ys_true[-1])
