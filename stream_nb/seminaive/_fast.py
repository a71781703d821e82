"""The fast paths of SPODE and AODE: known events one at a time, and the batch kernel.

A *known* event (see :mod:`~stream_nb.seminaive._known`) is scored straight from
the dense block's counts, every SPODE one product of ratios
(:mod:`~stream_nb.seminaive._products`): :func:`known_scores` one event at a time,
:func:`predict_learn_known` a batch (the learner's batch-kernel hook), through
:func:`~stream_nb.seminaive._products.predict_learn_products` when every event has
as many items (:func:`uniform_batch`), else one event at a time. The functions
take the learner (:class:`~stream_nb.seminaive._superparent._SuperParent`) and
read and update its store and scale as its own methods would.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

from stream_nb.seminaive._base import COUNT_TOLERANCE
from stream_nb.seminaive._dense import Bools, DenseBlock, Floats, Indices
from stream_nb.seminaive._known import (
    Rows,
    item_array,
    known_items,
    labels_and_weights_known,
    normalise,
)
from stream_nb.seminaive._products import (
    log_spodes,
    mix_logs,
    predict_learn_products,
    safe_length,
)

if TYPE_CHECKING:
    from stream_nb.seminaive._superparent import _SuperParent

__all__ = [
    "items_of",
    "known_ready",
    "known_scores",
    "known_spodes",
    "predict_learn_known",
    "spode_ratios",
]

_log = math.log


def known_ready(model: _SuperParent) -> DenseBlock | None:
    """The dense block when a known event may be scored from it directly (a dense
    block, something learned, ``α > 0``, unweighted, uniform mixture); else ``None``."""
    block = model._store.dense
    if block is None:
        return None
    ready = model._known_options
    if ready is None:  # (the options never change)
        ready = model._known_options = (
            model.alpha > 0.0 and model._score_weights is None and not model._weighted()
        )
    if not ready or not model._store.class_weight:
        return None
    if not block.lazy_columns:  # (scored from the block: a complete one learns lazily)
        block.lazy_columns = model._store.lazy_columns = True
    return block


def known_scores(
    model: _SuperParent, x: Mapping[str, Any]
) -> tuple[list[float], float | None] | None:
    """The scores of a known event (see :mod:`~stream_nb.seminaive._known`) from the
    dense block: ``(values, divisor)`` with AODE's ``Σ_p exp(SPODE_p(y))`` (SPODE's
    ``exp(SPODE_p(y))``) in class order times ``divisor`` (the same for every class:
    it cancels in the probabilities), or ``(values, None)`` with their logs when a
    product could underflow (:func:`~stream_nb.seminaive._products.safe_length`);
    ``None`` for anything else (see :func:`known_ready`; an unknown value; no
    qualifying parent)."""
    block = known_ready(model)
    if block is None:
        return None
    idx = known_items(block.codes, x)
    if not idx:
        return None
    # (learn_one(x) right after takes the same items: see items_of)
    model._last_event = (x, block, idx, list(x), list(x.values()))
    at = None
    parent = model._super_parent()
    if parent is not None:
        value = cast(Mapping[Any, Any], x).get(parent)
        if value is None:
            return None
        at = block.codes[parent].get(value)
    return known(model, block, idx, parent, at)


def known(
    model: _SuperParent, block: DenseBlock, idx: list[int], parent: Hashable | None, at: int | None
) -> tuple[list[float], float | None] | None:
    """:func:`known_scores` of an event of items ``idx``; ``parent`` is
    :meth:`_SuperParent._super_parent` and, with one, ``at`` the event's item of that feature
    (``None``: absent or missing)."""
    if parent is not None and at is None:
        return None
    a = model.alpha / model._scale  # (in raw units)
    block.prepare(a)
    _idx, ii, info, rows, _full = block.event(idx)
    d = len(idx)
    threshold = model._raw_threshold()
    length = safe_length(block, a, model._store.total_weight)
    if at is not None:
        position = idx.index(at)
        if block.vw[at] < threshold:
            return None
        c = info[4, position]
        if block.complete:  # (denominators from the diagonal, see _ratios)
            num = block.cells.take(rows[:d, position], axis=0)  # (d, K)
            num += a
            den = num[position] + (a * (block.s.take(info[4]) - 1.0))[:, None]
            den[position] = block.fw[c] + block.aks[c]
        else:
            cells = block.counts_rows.take(rows[:, position], axis=0)  # (2d, K)
            cells += block.offsets.take(info[2:4].ravel())[:, None]
            cells[d + position] = block.fw[c] + block.aks[c]
            num, den = cells[:d], cells[d:]
        np.divide(num, den, out=num)
        if d <= length:
            return np.multiply.reduce(num, axis=0).tolist(), 1.0
        return log_spodes(num[:, None], length)[0].tolist(), None
    ratio, fix, prior = spode_ratios(block, info, rows, d, a)
    keep = None
    if block.least < threshold:
        qualifies = block.vw.take(ii) >= threshold
        if not qualifies.all():
            if not qualifies.any():
                return None
            keep = qualifies
    if d <= length:
        products = np.multiply.reduce(ratio, axis=0)
        if fix is not None:
            products *= fix
        if keep is not None:
            products = products[keep]
        return np.add.reduce(products, axis=0).tolist(), prior
    spodes = log_spodes(ratio, length)
    if fix is not None:
        spodes += np.log(fix)
    if prior != 1.0:
        spodes -= _log(prior)
    if keep is not None:
        spodes = spodes[keep]
    return mix_logs(spodes).tolist(), None


def spode_ratios(
    block: DenseBlock, info: Indices, rows: Indices, d: int, alpha: float
) -> tuple[Floats, Floats | None, float]:
    """Every ratio of the SPODEs of an event (:meth:`DenseBlock.event` ``info`` and
    ``rows``), shape ``(d, d, K)`` (children, parents, classes), the factor of each
    parent's product (``None``: 1) and a divisor of every product.

    In general (:func:`~stream_nb.seminaive._products.ratios`) the ratios are
    ``P̂(x_j | y, x_p)``, the parent's own one ``P̂(y, x_p)``. In a complete block
    each denominator is ``N(y, x_p) + α S_j``, from the diagonal: only the item
    slots are read (:attr:`DenseBlock.cells`), every ratio (the parent's own one
    too) is divided by its denominator, and the factor
    ``(N(y, x_p) + α S_p) / (N_i + α K S_i)`` turns the parent's own ratio into
    ``P̂(y, x_p)``. With one ``S`` for every column the denominator is one
    ``(d, K)`` array, and ``N_i + α K S_i`` one number (every column has the same
    weight in a complete block): the divisor. ``alpha`` in raw units, the block
    prepared for it.
    """
    columns = info[3]
    if block.complete:
        ratio = block.cells.take(rows[:d], axis=0)  # N(y, x_p, x_j)
        ratio += alpha
        s = block.uniform_s
        if s is not None:
            den = ratio.diagonal().T + alpha * (s - 1.0)  # N(y, x_p) + α S
            ratio /= den
            c = columns[0]
            return ratio, den, float(block.weights[c] + block.slot_aks[c])
        prior = block.weights.take(columns)  # N_i + α K S_i
        prior += block.slot_aks.take(columns)
        own = block.vectors(d)[0]
        diagonal = ratio.diagonal().T  # N(y, x_p) + α
        dens = diagonal[None, :, :] + (alpha * (block.s.take(info[4]) - 1.0))[:, None, None]
        ratio /= dens  # (child j, parent p): N(y, x_p) + α S_j
        fix = dens[own, own]
        fix /= prior[:, None]
        return ratio, fix, 1.0
    prior = block.weights.take(columns)  # N_i + α K S_i
    prior += block.slot_aks.take(columns)
    own = block.vectors(d)[0]
    gathered = block.counts_rows.take(rows, axis=0)  # (2d, d, K)
    num = gathered[:d]
    num += alpha
    den = gathered[d:]
    den += block.offsets.take(columns)[:, None, None]  # + α S_j of each child
    den[own, own] = prior[:, None]
    np.divide(num, den, out=num)  # (as ratios())
    return num, None, 1.0


def known_spodes(model: _SuperParent, block: DenseBlock, idx: list[int]) -> tuple[Indices, Floats]:
    """Every ``SPODE_p(y)`` of an event of known items ``idx``, shape ``(d, K)``, with
    the items' indices."""
    block.prepare(model.alpha)  # (weighted AODE: no forgetting on this path)
    _idx, ii, info, rows, _full = block.event(idx)
    ratio, fix, prior = spode_ratios(block, info, rows, len(idx), model.alpha)
    spodes = log_spodes(ratio, safe_length(block, model.alpha, model._store.total_weight))
    if fix is not None:
        spodes += np.log(fix)
    if prior != 1.0:
        spodes -= _log(prior)
    return ii, spodes


def predict_learn_known(
    model: _SuperParent,
    rows: Rows,
    parent_items: list[int | None],
    ys: Sequence[Hashable | None],
    ws: Sequence[float],
) -> tuple[list[Hashable], Floats, Any] | None:
    """The batch kernel: predict then learn each known event in turn, as
    ``predict_log_proba_one`` then ``learn_one`` would.

    ``rows[i]`` are event ``i``'s items in the dense block,
    ``parent_items[i]`` its item of the super-parent feature (SPODE). A batch
    of events with as many items each, all qualifying as parents, goes through
    :func:`~stream_nb.seminaive._products.predict_learn_products`; any other is
    scored one event at a time from the dense block (or the Naive Bayes
    fallback) and learned with :meth:`PairStore.learn_known`. The scores are
    normalised at the end, all rows at once. ``None`` (nothing changed) unless
    the model has learned something and every label is ``None`` or a known
    class with a valid weight.
    """
    store = model._store
    block = known_ready(model)
    classes = store.classes
    if block is None:
        return None
    if not labels_and_weights_known(classes, ys, ws):
        return None
    labels = list(store.class_weight)
    parent = model._super_parent()
    jll_uniform = uniform_batch(model, block, rows, parent_items, ys, ws)
    if jll_uniform is not None:
        log_proba, best = normalise(jll_uniform)
        return labels, log_proba, best
    lists: list[list[int]] = rows.tolist() if isinstance(rows, np.ndarray) else rows
    learn = model._learn_known_step
    jll = []
    for idx, at, y, w in zip(lists, parent_items, ys, ws, strict=True):
        found = known(model, block, idx, parent, at)
        if found is None:
            fallback = model._fallback([block.items[a] for a in idx])
            row = [fallback[c] for c in labels]
        else:
            row, divisor = found
            if divisor is not None:
                shift = _log(divisor)
                row = [_log(v) - shift for v in row]
        jll.append(row)
        if y is not None:
            learn(idx, y, classes[y], w)
    log_proba, best = normalise(np.array(jll))
    return labels, log_proba, best


def uniform_batch(
    model: _SuperParent,
    block: DenseBlock,
    rows: Rows,
    parent_items: list[int | None],
    ys: Sequence[Hashable | None],
    ws: Sequence[float],
) -> Floats | None:
    """The batch's scores with every event's items in one array
    (:func:`~stream_nb.seminaive._products.predict_learn_products`), when every event
    has as many items, none renormalises the model when learned (forgetting), every
    event has a qualifying parent and (SPODE) the parent qualifies; ``None`` (nothing
    changed) otherwise.

    With forgetting each event is scored in the raw units of the scale before it
    (α / scale) and learned with ``w / scale`` after its decay, as ``learn_one``
    (:meth:`~stream_nb.seminaive._base._SemiNaive._decay_steps`).
    """
    items = item_array(rows)
    if items is None:
        return None
    befores, raws, stop, scale = model._decay_steps(ys, ws)
    if stop < len(ys):
        return None  # (a renormalisation: one event at a time)
    at = None
    if model._super_parent() is not None:
        if None in parent_items:
            return None
        at = np.argmax(items == np.array(parent_items, dtype=np.intp)[:, None], axis=1)
    store = model._store
    classes = store.classes
    ks = [-1 if y is None else classes[y] for y in ys]
    k_of = np.array(ks, dtype=np.intp)
    raw_of = np.array(raws, dtype=np.float64)
    alphas = None
    if model._gamma is not None:
        alphas = model.alpha / np.array(befores)
    mask = qualifying(model, block, items, k_of, raw_of, befores)
    if mask is not None:
        if at is not None:
            if not mask[np.arange(len(items)), at].all():
                return None
            mask = None
        elif not mask.any(axis=1).all():
            return None  # (an event with no parent: Naive Bayes, one event at a time)
    weight = store.total_weight + float(raw_of.sum())
    length = safe_length(block, model.alpha / befores[0], weight)
    block.prepare(model.alpha / befores[0])
    jll = predict_learn_products(block, items, k_of, raw_of, length, at, alphas, mask)
    learned = k_of >= 0
    store.learned_known(items[learned], k_of[learned], ys, raws)
    model.n_learned += int(learned.sum())
    model._scale = scale
    return jll


def qualifying(
    model: _SuperParent,
    block: DenseBlock,
    items: Indices,
    ks: Indices,
    raws: Floats,
    befores: list[float],
) -> Bools | None:
    """Whether each item of each event qualifies as a parent when the event is scored
    (``N(x_i) ≥ min_parent_count`` in raw units, the weights of the batch's earlier
    events included, summed in event order); ``None``: all of them."""
    scale = min(befores)  # (the threshold is highest at the smallest scale)
    threshold = model.min_parent_count * (1.0 - COUNT_TOLERANCE) / scale
    if block.least >= threshold:
        return None
    used, at = np.unique(items, return_inverse=True)
    at = at.reshape(items.shape)
    weights = np.zeros((len(items) + 1, len(used)))
    weights[0] = block.vw[used]
    learned = np.flatnonzero(ks >= 0)
    weights[np.repeat(learned + 1, items.shape[1]), at[learned].ravel()] = np.repeat(
        raws[learned], items.shape[1]
    )
    np.cumsum(weights, axis=0, out=weights)
    before = weights[np.arange(len(items))[:, None], at]  # N(x_i) before each event
    mask: Bools = (
        before >= (model.min_parent_count * (1.0 - COUNT_TOLERANCE) / np.array(befores))[:, None]
    )
    return None if mask.all() else mask


def items_of(model: _SuperParent, block: DenseBlock, x: dict[str, Any]) -> list[int] | None:
    """:func:`~stream_nb.seminaive._known.known_items` of ``x``: those the last known
    prediction found when it was this very event, unchanged (same dict, keys and
    values) and scored by this block (items keep their index while it lives)."""
    last = model._last_event
    model._last_event = None
    if (
        last is not None
        and last[0] is x
        and last[1] is block
        and last[3] == list(x)
        and last[4] == list(x.values())
    ):
        idx: list[int] = last[2]
        return idx
    return known_items(block.codes, x)
