"""Exact batched prequential steps for GaussianNB and NaiveBayes (numpy).

:meth:`stream_nb.base.Learner.predict_learn_many` is defined as the loop
"predict event ``i`` with the model that learned events ``0..i-1``, then learn
it". For Gaussian and categorical statistics every quantity event ``i`` sees
is a *prefix sum* over the batch, so the whole batch is computed with a few
array operations instead of one Python loop per event and feature.

Gaussian statistics (per class ``k`` and feature ``j``; shift ``d = x - μ₀``
by the class mean at the batch start, so the sums do not cancel)::

    W_i  = Σ_{l<i, y_l=k} w_l                   n_i  = n₀ + W_i
    S1_i = Σ_{l<i, y_l=k} w_l d_l               μ_i  = μ₀ + S1_i / n_i
    S2_i = Σ_{l<i, y_l=k} w_l d_l²              M2_i = M2₀ + S2_i - S1_i² / n_i

(the Welford/Chan merge of the batch prefix into the start statistics). The
global per-feature statistics of ε likewise, with ``ε_i = var_smoothing ×
max_j M2g_ij / ng_ij``. Categorical counts ``N_{k,f,v}`` before event ``i`` are
the start counts plus an exclusive cumulative sum grouped by value, the
present weights ``N_{k,f}`` the class prefix ``W_i``, and the number of
distinct values ``S_f`` grows by one at the first *learned* occurrence of a
new value. Scores then follow the learners' formulas for all events × classes
at once, and the statistics after the batch are the prefix at ``i = B``.

The result equals the per-event path to rounding (about 1e-12 relative on
the log posteriors; the tests ask for 1e-9). Anything unusual returns
``None`` and the caller runs the per-event loop: forgetting (``half_life``),
fixed class priors, a label not learned before the batch, events with other
keys than the learned features, missing (``None``) or non-numeric values,
values beyond ``±MAX_VALUE`` or weights outside ``[MIN_WEIGHT, MAX_WEIGHT]``
(:mod:`stream_nb.limits`: the per-event path rejects those events), sums of
the batch whose squares leave the double range, classes without statistics
for some feature, all-constant features.
"""

from __future__ import annotations

import itertools
import math
import operator
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from stream_nb.base import ABSORB
from stream_nb.limits import MAX_VALUE, MAX_WEIGHT, MIN_VARIANCE, MIN_WEIGHT
from stream_nb.stats import LOG_2PI

__all__ = ["MIN_BATCH", "gaussian_predict_learn_columns", "gaussian_predict_learn_many"]

#: Below this many events the per-event loop is cheaper than numpy's fixed
#: cost per array operation (a few dozen per batch); see docs/benchmarks.md.
MIN_BATCH = 64

#: Same floor as stream_nb.naive_bayes.gaussian._MIN_EPSILON (ε never below it).
_MIN_EPSILON = MIN_VARIANCE

_NUMBERS = frozenset((int, float))

#: A feature's value -> code map starts afresh beyond this many values.
_MAX_CODES = 1 << 16

Result = tuple[list[dict[Hashable, float] | None], list[Hashable | None], dict[int, Exception]]
#: ``(labels, log_proba, best)``: the classes, the B × K log posteriors, the decisions' columns
ColumnResult = tuple[list[Hashable], np.ndarray, np.ndarray]


def _exclusive_cumsum(a: np.ndarray, axis: int = 0) -> np.ndarray:
    """Along ``axis``, entry ``i`` holds the sum of entries ``0..i-1`` (zeros for ``i = 0``)."""
    out = np.empty_like(a)
    if axis == 0:
        out[0] = 0.0
        np.cumsum(a[:-1], axis=0, out=out[1:])
    else:  # the last axis
        out[..., 0] = 0.0
        np.cumsum(a[..., :-1], axis=-1, out=out[..., 1:])
    return out


#: Up to this many classes, row-wise maxima and sums loop over the columns: numpy's
#: reductions over a short last axis cost ~10x more than a few whole-column operations.
_COLUMN_LOOP_CLASSES = 16


def _row_max_argmax(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each row's maximum and the column of its first maximum (as ``argmax``)."""
    if a.shape[1] > _COLUMN_LOOP_CLASSES:
        return a.max(axis=1), a.argmax(axis=1)
    top = a[:, 0].copy()
    best = np.zeros(len(a), dtype=np.intp)
    for k in range(1, a.shape[1]):
        column = a[:, k]
        best[column > top] = k  # strictly greater: ties keep the first column
        np.maximum(top, column, out=top)
    return top, best


def _row_sum(a: np.ndarray) -> np.ndarray:
    """Each row's sum, adding the columns left to right."""
    if a.shape[1] > _COLUMN_LOOP_CLASSES:
        return a.sum(axis=1)
    total = a[:, 0].copy()
    for k in range(1, a.shape[1]):
        total += a[:, k]
    return total


#: Products of factors between these bounds are exact to rounding in one ``log``.
_PRODUCT_LOW, _PRODUCT_HIGH = 1e-280, 1e280


def _sum_of_logs(a: np.ndarray, axis: int = 0) -> np.ndarray:
    """``np.log(a).sum(axis)`` as ``log(prod(a, axis))``: one logarithm per output instead
    of one per factor (the libm ``log`` is the kernel's costliest operation per
    element). Where a product leaves the normal range the logs are summed instead."""
    with np.errstate(over="ignore", under="ignore"):  # (checked just below)
        product = np.multiply.reduce(a, axis=axis)
    if product.min() > _PRODUCT_LOW and product.max() < _PRODUCT_HIGH:
        return np.log(product)
    return np.log(a).sum(axis=axis)


def _grouped_exclusive_cumsum(codes: np.ndarray, a: np.ndarray) -> np.ndarray:
    """Column ``i`` of the K × n array ``a``: the sum of columns ``l < i`` with
    ``codes[l] == codes[i]``."""
    # small codes sort as uint16, where numpy's stable sort is a radix sort (O(n))
    keys = codes.astype(np.uint16) if len(codes) and codes.max() < 1 << 16 else codes
    order = np.argsort(keys, kind="stable")
    sorted_codes = codes.take(order)
    # (``take`` along an axis: several times faster than fancy indexing of a 2-D array)
    sums = _exclusive_cumsum(a.take(order, axis=1), axis=-1)
    # subtract, in each group, the running sum reached at the group's first column
    new_group = np.empty(len(codes), dtype=bool)
    new_group[0] = True
    np.not_equal(sorted_codes[1:], sorted_codes[:-1], out=new_group[1:])
    group_of = np.cumsum(new_group) - 1
    sums -= sums.take(np.flatnonzero(new_group).take(group_of), axis=1)
    unsort = np.empty_like(order)
    unsort[order] = np.arange(len(order))
    return sums.take(unsort, axis=1)


def gaussian_predict_learn_many(
    model: Any,
    xs: Sequence[Mapping[str, Any]],
    ys: Sequence[Hashable | None],
    ws: Sequence[float],
) -> Result | None:
    """``model.predict_learn_many(xs, ys, ws)`` for GaussianNB / NaiveBayes, or ``None``.

    ``None`` (nothing changed) when the batch is not one this kernel handles;
    the caller then runs the per-event loop. See the module docstring.
    """
    b = len(xs)
    if b < MIN_BATCH or len(ys) != b or len(ws) != b:
        return None
    keys = tuple(xs[0])
    if not all(map(keys.__eq__, map(tuple, xs))):
        return None
    columns = list(zip(*[x.values() for x in xs])) if keys else []  # noqa: B905
    out = gaussian_predict_learn_columns(model, keys, columns, ys, ws)
    if out is None:
        return None
    labels, log_proba, best = out
    lp_rows = log_proba.tolist()
    log_probas: list[dict[Hashable, float] | None]
    if len(labels) == 2:
        first, second = labels
        log_probas = [{first: u, second: v} for u, v in lp_rows]
    else:
        log_probas = [dict(zip(labels, r, strict=True)) for r in lp_rows]
    predictions: list[Hashable | None] = list(map(labels.__getitem__, best.tolist()))
    return log_probas, predictions, {}


def gaussian_predict_learn_columns(
    model: Any,
    names: tuple[str, ...],
    columns: Sequence[Sequence[Any]],
    ys: Sequence[Hashable | None],
    ws: Sequence[float] | None = None,
) -> ColumnResult | None:
    """The kernel on column-wise events: feature ``names[j]`` of event ``i`` is ``columns[j][i]``.

    Same contract as :func:`gaussian_predict_learn_many` (the events are
    predicted then learned in order; ``None`` and nothing changed when the
    batch is not one the kernel handles), without building one dictionary
    per event: returns ``(labels, log_proba, best)`` where row ``i`` of the
    ``B × K`` array ``log_proba`` holds ``log P(labels[k] | x_i)`` and
    ``labels[best[i]]`` is event ``i``'s decision (the first most probable
    class). ``ws=None`` means every weight is 1.
    """
    b = len(ys)
    if b < MIN_BATCH or model.half_life is not None or model.class_prior is not None:
        return None
    g = model.gaussian  # the Gaussian statistics this kernel updates
    labels = g.labels
    index = g.class_index
    n_classes = len(labels)
    if n_classes == 0 or g.missing or g.max_var <= 0.0:
        return None
    gaussian: tuple[Hashable, ...] = g.order
    categorical: tuple[str, ...] | None = model._column_split(names)
    if categorical is None:
        return None
    if not gaussian or len(columns) != len(names):
        return None
    where: dict[Hashable, int] = {f: j for j, f in enumerate(names)}
    g_cols = [columns[where[f]] for f in gaussian]
    if any(len(col) != b for col in g_cols):
        return None
    if not _NUMBERS.issuperset(map(type, itertools.chain.from_iterable(g_cols))):
        return None  # (one C-level pass over every value)
    try:  # F × B (fromiter: no dtype discovery, which np.array does per element)
        x = np.fromiter(itertools.chain.from_iterable(g_cols), np.float64, len(g_cols) * b)
        x = x.reshape(len(g_cols), b)
    except (OverflowError, ValueError, TypeError):
        return None  # e.g. an int beyond the float range: the per-event path says so
    if not (np.abs(x) <= MAX_VALUE).all():
        return None  # NaN, ±inf or out of range: the per-event path rejects those events
    cat_values = [columns[where[f]] for f in categorical]
    if any(len(col) != b for col in cat_values):
        return None
    bucketed: frozenset[Hashable] = frozenset()
    if categorical and getattr(model, "max_values_per_feature", None) is not None:
        # values new to a full feature read as its "other" bucket (None), as per event
        found = model._bucket_columns(categorical, cat_values)
        if found is None:
            return None
        cat_values, bucketed = found
    # class index of every event (-1: unlabelled, predicted only)
    try:
        if None in ys:
            k_arr = np.array([-1 if y is None else index[y] for y in ys], dtype=np.intp)
        else:
            k_arr = np.fromiter(map(index.__getitem__, ys), np.intp, b)
    except (KeyError, TypeError):
        return None  # a new class (or an unhashable label): the per-event path
    unit = ws is None
    w = np.ones(b)
    if ws is not None:
        w = np.asarray(ws, dtype=np.float64)
        if len(w) != b or not ((w >= MIN_WEIGHT) & (w <= MAX_WEIGHT)).all():
            return None  # the per-event path raises the right error
        unit = bool((w == 1.0).all())
    labelled = k_arr >= 0
    n_labelled = int(labelled.sum())
    rows_l = np.arange(b) if n_labelled == b else np.flatnonzero(labelled)
    k_l = k_arr[rows_l]
    w_l = w[rows_l]
    onehot_kb = np.zeros((n_classes, b))
    onehot_kb.put(k_l * b + rows_l, w_l)  # K × B learning weights

    # --- categorical codes, checked before any statistic changes. Codes come from a
    # value -> code map kept on the model across batches (not a statistic: never
    # saved, and a stale code only names a value, whose counts are read afresh).
    vocabularies = g.kernel_codes
    cat_codes: list[tuple[list[Any], np.ndarray, list[int]]] = []
    for f, col in zip(categorical, cat_values, strict=True):
        vocabulary = vocabularies.get(f)
        if vocabulary is None or len(vocabulary[1]) > _MAX_CODES:
            vocabulary = vocabularies[f] = ({}, [])
        codes, code_values = vocabulary
        try:
            code_arr = np.fromiter(operator.itemgetter(*col)(codes), dtype=np.intp, count=b)
        except (KeyError, TypeError):
            # new values (never None: a missing value sends the batch to the per-event path)
            try:
                fresh = [value for value in dict.fromkeys(col) if value not in codes]
            except TypeError:
                return None  # unhashable value: the per-event path names it
            if f not in bucketed and any(value is None for value in fresh):
                return None
            for value in fresh:
                codes[value] = len(code_values)
                code_values.append(value)
            code_arr = np.fromiter(operator.itemgetter(*col)(codes), dtype=np.intp, count=b)
        in_batch = np.flatnonzero(np.bincount(code_arr, minlength=len(code_values))).tolist()
        cat_codes.append((code_values, code_arr, in_batch))

    g.sync()  # materialise lazily kept weights and variances
    # Layout F × K × B (feature, class, event): the events run along the last,
    # contiguous axis, so every numpy loop is B long (a short last axis costs ~10x),
    # and the sums over features are over the leading axis.
    n0 = np.array(g.n).T  # F × K
    mean0 = np.array(g.mean).T
    m20 = np.array(g.m2).T
    gn0 = np.array(g.all_n)  # F
    gmean0 = np.array(g.all_mean)
    gm20 = np.array(g.all_m2)
    cw0 = np.array(g.class_weight)

    # --- per-class Gaussian statistics before every event: F × K × B
    # (in place where possible: fewer temporaries stay in the CPU caches)
    d = x[:, None, :] - mean0[:, :, None]
    wd = onehot_kb[None, :, :] * d
    s1 = _exclusive_cumsum(wd, axis=-1)
    t1 = s1[:, :, -1] + wd[:, :, -1]  # the batch's sums S1, S2 (F × K), for after it
    wd *= d  # w d², in place
    s2 = _exclusive_cumsum(wd, axis=-1)
    t2 = s2[:, :, -1] + wd[:, :, -1]
    del wd
    wc = _exclusive_cumsum(onehot_kb, axis=-1)  # K × B
    # 1 / n_i; without missing values every feature has its class's weight: K × B
    if (n0 == n0[:1]).all():
        inv_n = 1.0 / (n0[0][:, None] + wc)
    else:
        inv_n = 1.0 / (n0[:, :, None] + wc[None, :, :])
    shift = s1 * inv_n  # μ_i - μ₀ = S1_i / n_i
    var = s1 * shift  # M2_i / n_i = (M2₀ + S2_i - S1_i² / n_i) / n_i
    np.subtract(s2, var, out=var)
    var += m20[:, :, None]
    var *= inv_n
    # --- global statistics (ε): F × B
    gd = x - gmean0[:, None]
    wl = np.where(labelled, w, 0.0)  # learning weight of every event (0 if unlabelled)
    gwd = wl[None, :] * gd
    gs1 = _exclusive_cumsum(gwd, axis=-1)
    gs2 = _exclusive_cumsum(gwd * gd, axis=-1)
    learned_before = _exclusive_cumsum(wl)  # B
    gn = gn0[:, None] + learned_before[None, :]
    gvar = (gm20[:, None] + gs2 - gs1 * gs1 / gn) / gn
    maxvar = gvar.max(axis=0)
    if not (maxvar > 0.0).all():
        return None  # all features constant at some point: the per-event path
    eps = np.maximum(model.var_smoothing * maxvar, _MIN_EPSILON)
    v = var
    v += eps[None, None, :]
    z2 = np.subtract(d, shift, out=shift)  # x - μ_i = d - S1_i / n_i
    z2 *= z2
    z2 /= v
    # K × B
    jll = -0.5 * (len(gaussian) * LOG_2PI + _sum_of_logs(v) + z2.sum(axis=0))
    # --- prior: log((N_y + α) / (N + Kα)), or the uniform 1/K
    if g.fit_prior:
        alpha = g.prior_alpha
        cw = cw0[:, None] + wc
        den = g.total_weight + learned_before + n_classes * alpha
        jll += np.log(cw + alpha) - np.log(den)[None, :]
    else:
        jll -= math.log(n_classes)
    # --- categorical terms: log((N_{y,f,v} + α) / (N_{y,f} + S_f α)), as K × n_cat × B
    value_totals = None
    if categorical:
        alpha = model.alpha
        present = model._present
        counts = model._counts
        n_cat = len(categorical)
        # All features at once: value codes made global (feature offsets), the events'
        # one-hot class weights repeated once per feature, and N_{y,f,v} before every
        # event as the start count plus a grouped exclusive cumsum over the batch.
        sizes = [len(code_values) for code_values, _, _ in cat_codes]
        offsets = np.cumsum([0, *sizes[:-1]]).tolist()
        codes_all = np.concatenate(
            [code_arr + offset for (_, code_arr, _), offset in zip(cat_codes, offsets, strict=True)]
        )
        seen_codes: list[int] = []  # global codes of learned values, and their counts
        seen_counts: list[float] = []
        pres0 = np.empty((n_classes, n_cat))
        smoothing = np.empty((1, n_cat, b))
        for j, (f, (code_values, code_arr, present_codes), offset) in enumerate(
            zip(categorical, cat_codes, offsets, strict=True)
        ):
            values = counts[f]
            by_class = present[f]
            unseen = []  # codes of values the model has not learned yet
            for c in present_codes:
                vc = values.get(code_values[c])
                if vc is not None:
                    seen_codes.append(offset + c)
                    seen_counts += [vc.get(y, 0.0) for y in labels]
                else:
                    unseen.append(c)
            pres0[:, j] = [by_class.get(y, 0.0) for y in labels]
            if unseen and not model._accepts_new_values(f, [code_values[c] for c in unseen]):
                return None  # a value past max_values_per_feature, or not a category
            if unseen:
                # S_f grows by one at each new value's first *learned* occurrence
                is_new = np.zeros(len(code_values), dtype=bool)
                is_new[unseen] = True
                learned_new = np.flatnonzero(labelled & is_new[code_arr])
                _, first = np.unique(code_arr[learned_new], return_index=True)
                new_first = np.sort(learned_new[first])
                distinct = len(values) + np.searchsorted(new_first, np.arange(b), side="left")
                smoothing[0, j] = distinct * alpha
            else:
                smoothing[0, j] = len(values) * alpha
        start = np.zeros((n_classes, sum(sizes)))  # K × global code
        if seen_codes:
            start[:, seen_codes] = np.array(seen_counts).reshape(-1, n_classes).T
        before = _grouped_exclusive_cumsum(codes_all, np.tile(onehot_kb, (1, n_cat)))
        count = (start.take(codes_all, axis=1) + before).reshape(n_classes, n_cat, b)
        count += alpha
        pres = pres0[:, :, None] + wc[:, None, :]
        pres += smoothing
        jll += _sum_of_logs(count, axis=1) - _sum_of_logs(pres, axis=1)
        if unit:
            # N_{y,f,v} learned in this batch, per global value code and class
            learned_codes = codes_all.reshape(n_cat, b)
            if n_labelled < b:
                learned_codes = learned_codes.take(rows_l, axis=1)
            learned_codes = learned_codes * n_classes + k_l
            value_totals = np.bincount(
                learned_codes.ravel(), minlength=sum(sizes) * n_classes
            ).reshape(-1, n_classes)

    # --- normalise (max-shifted log-sum-exp) and decide (first maximum)
    if not np.isfinite(jll).all():
        return None  # (a score beyond the double range: the per-event path)
    top, best = _row_max_argmax(jll.T)
    log_total = np.log(_row_sum(np.exp(jll - top[None, :]).T))
    if np.abs(top).max() < ABSORB:
        log_proba = (jll - (top + log_total)[None, :]).T  # B × K (a view of the K × B array)
    else:  # (see stream_nb.base.ABSORB)
        log_proba = ((jll - top[None, :]) - log_total[None, :]).T
    result_labels = list(labels)

    # --- the statistics after the batch (prefix at i = B), then learn counters
    wk = onehot_kb.sum(axis=1)  # K
    n_end = n0 + wk[None, :]
    # (M2 is a sum of squares: a difference that rounds below 0 is 0, as per event)
    m2_end = np.maximum(m20 + t2 - t1 * t1 / n_end, 0.0)
    g1 = gs1[:, -1] + gwd[:, -1]
    g2 = gs2[:, -1] + gwd[:, -1] * gd[:, -1]
    gn_end = gn[:, -1] + wl[-1]
    gm2_end = np.maximum(gm20 + g2 - g1 * g1 / gn_end, 0.0)
    if not (np.isfinite(m2_end).all() and np.isfinite(gm2_end).all()):
        return None  # a batch sum squared past the double range: the per-event path
    g.n = n_end.T.tolist()
    g.mean = (mean0 + t1 / n_end).T.tolist()
    g.m2 = m2_end.T.tolist()
    g.all_n = gn_end.tolist()
    g.all_mean = (gmean0 + g1 / gn_end).tolist()
    g.all_m2 = gm2_end.tolist()
    cw_list = g.class_weight
    total = g.total_weight
    # per class: (label, learned weight); unit weights give exact integer sums
    class_weights = [(labels[k], c) for k, c in enumerate(wk.tolist()) if c]
    if unit:
        for y, c in class_weights:
            cw_list[index[y]] += c
        total += float(n_labelled)
    else:
        for y, wi in zip(ys, w.tolist(), strict=True):
            if y is not None:
                cw_list[index[y]] += wi
                total += wi
    g.total_weight = total
    g.derive()
    for f, col, (code_values, _, _), offset in zip(
        categorical, cat_values, cat_codes, offsets if categorical else (), strict=True
    ):
        by_class = model._present[f]
        values = model._counts[f]
        items: list[tuple[Any, Hashable, float]]
        if value_totals is not None:
            for y, c in class_weights:
                by_class[y] = by_class.get(y, 0.0) + c
            totals = value_totals[offset : offset + len(code_values)]
            nz_values, nz_classes = np.nonzero(totals)
            items = [
                (code_values[c], labels[k], float(t))
                for c, k, t in zip(
                    nz_values.tolist(),
                    nz_classes.tolist(),
                    totals[nz_values, nz_classes].tolist(),
                    strict=True,
                )
            ]
        else:
            # real-valued weights: added one event at a time, as the per-event path does
            for y, wi in zip(ys, w.tolist(), strict=True):
                if y is not None:
                    by_class[y] = by_class.get(y, 0.0) + wi
            items = [
                (value, y, wi)
                for value, y, wi in zip(col, ys, w.tolist(), strict=True)
                if y is not None
            ]
        for value, y, weight in items:
            value_counts = values.get(value)
            if value_counts is None:
                values[value] = {y: weight}
            else:
                value_counts[y] = value_counts.get(y, 0.0) + weight
    if categorical:
        kinds = model._kinds
        for f in categorical:
            kinds.setdefault(f, "categorical")
    model.n_learned += n_labelled
    return result_labels, log_proba, best
