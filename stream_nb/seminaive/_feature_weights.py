"""Scores of the semi-naive learners with ``feature_weights`` (fixed attribute weights).

With ``feature_weights={j: w_j}`` (``w_j = 1`` for features left out) every
*child* term ``log P̂(x_j | y, parents)`` is multiplied by ``w_j``:

* a SPODE with super-parent ``p`` splits its joint term
  ``P̂(y, x_p) = P̂_p(y) P̂(x_p | y)`` with ``P̂_p(y) = Σ_v P̂(y, v) =
  (N_p(y) + α S_p) / (N_p + α K S_p)`` and
  ``P̂(x_p | y) = (N(y, x_p) + α) / (N_p(y) + α S_p)`` (``N_p(y)``: weight of
  class ``y`` where ``p`` is present), and scores
  ``log P̂_p(y) + w_p log P̂(x_p | y) + Σ_{j ≠ p} w_j log P̂(x_j | y, x_p)``;
  with every weight 1 this is the unweighted SPODE (to rounding);
* TAN and KDB score ``log P̂(y) + Σ_j w_j log P̂(x_j | y, x_pa(j))``;
* the Naive Bayes terms (features past ``max_pair_features``, the fallback
  without a parent) and the Gaussian warm-up terms are weighted the same way.

A weight of 0 is a *selection*: the feature adds no term (not even a zero
count with ``α = 0``) and is used as no one's parent: it is not a super-parent
(AODE leaves its SPODE out of the mixture, SPODE falls back to Naive Bayes, an
automatic SPODE parent is the best feature of non-zero weight), and a TAN/KDB
child skips it (its next parent, else its Naive Bayes term; a family table
holding it is not used). Predictions then do not depend on the feature at all,
while its counts are still learned; SPODE and AODE predict exactly as a model
that never saw it (TAN and KDB still choose their structure with it).

These scores are computed one event at a time (no known-event path and no batch
kernel): for SPODE and AODE with ``α > 0`` and a dense block, every SPODE at
once from the block (:func:`~stream_nb.seminaive._general.weighted_spode_scores`),
otherwise from the counts with :class:`~stream_nb.seminaive._zero.ZeroScore`.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from stream_nb.seminaive._dense import DenseBlock, Floats
from stream_nb.seminaive._general import weighted_spode_scores
from stream_nb.seminaive._store import OTHER, Item
from stream_nb.seminaive._zero import ZeroScore, mix

if TYPE_CHECKING:
    from stream_nb.seminaive._dependence import _Dependence
    from stream_nb.seminaive._superparent import _SuperParent

__all__ = ["dependence_scores", "superparent_scores"]

_EMPTY: dict[Any, Any] = {}
_ABSENT = object()  # "feature not in the event"


def superparent_scores(
    model: _SuperParent, x: Mapping[str, Any], weights: Mapping[Hashable, float]
) -> dict[Hashable, float]:
    """SPODE and AODE scores of ``x`` with ``weights`` (see the module docstring)."""
    store = model._store
    categorical = store.categorical
    warming: dict[Hashable, float] = {}
    items = model._encode(x, False, warming)
    parents = [p for p in model._parents(items, model._super_parent()) if weights.get(p[0], 1.0)]
    a = model.alpha / model._scale
    classes = list(categorical.class_weight)
    n_classes = len(classes)
    if not parents:
        return model._with_warmup(_naive(model, items, weights, a, classes), warming)
    block = store.dense
    if block is not None and a > 0.0:
        found = _dense_spodes(model, block, items, weights, a, classes)
        if found is None:  # (as the sparse test above: no parent)
            return model._with_warmup(_naive(model, items, weights, a, classes), warming)
        mixed_dense = model._mix_weighted(*found)
        naive = _naive_terms(model, items, weights, a, classes)
        if naive is not None:
            mixed_dense = [v + t for v, t in zip(mixed_dense, naive, strict=True)]
        return model._with_warmup(dict(zip(classes, mixed_dense, strict=True)), warming)
    counts, present = categorical.counts, categorical.present
    pair_features = store.pair_features
    shared = ZeroScore(n_classes)  # Naive Bayes terms: the same in every SPODE
    children = []
    for j, vj in items:
        values = counts.get(j)
        w = weights.get(j, 1.0)
        if values is None or not w:
            continue
        if j in pair_features:
            children.append((j, vj, len(values), w))
        else:
            by_value, by_class = values.get(vj, _EMPTY), present[j]
            shared.add_weighted(
                [by_value.get(y, 0.0) for y in classes],
                [by_class.get(y, 0.0) for y in classes],
                len(values),
                a,
                w,
            )
    zeros = [0.0] * n_classes
    feature_weight = store.feature_weight
    pair_node = store.pair_node
    spodes = []
    for i, vi in parents:
        score = ZeroScore(n_classes)
        s_i = len(counts[i])
        with_i = [present[i].get(y, 0.0) for y in classes]
        score.add_weighted(with_i, [feature_weight[i]] * n_classes, n_classes, a * s_i, 1.0)
        by_value = counts[i].get(vi, _EMPTY)
        score.add_weighted(
            [by_value.get(y, 0.0) for y in classes], with_i, s_i, a, weights.get(i, 1.0)
        )
        for j, vj, s, w in children:
            if j != i:
                score.add_weighted(*pair_node((i, vi), (j, vj), zeros), s, a, w)
        spodes.append(score)
    mixture = model._parent_weights([i for i, _vi in parents])
    if not any(mixture):
        mixture = [1.0] * len(parents)
    kept = [(p, w) for p, w in zip(spodes, mixture, strict=True) if w > 0.0]
    mixed = mix([p for p, _w in kept], [w for _p, w in kept])
    mixed.extend(shared)
    return model._with_warmup(mixed.resolve(classes), warming)


def _dense_spodes(
    model: _SuperParent,
    block: DenseBlock,
    items: list[Item],
    weights: Mapping[Hashable, float],
    a: float,
    classes: list[Hashable],
) -> tuple[list[Hashable], Floats] | None:
    """The qualifying parents' features and their weighted SPODEs from the dense block
    (:func:`~stream_nb.seminaive._general.weighted_spode_scores`, ``α > 0``); ``None``:
    no parent."""
    feat = block.feat
    kept = [item for item in items if item[0] in feat and weights.get(item[0], 1.0)]
    idx, cols = block.children(kept)
    if not len(idx):
        return None
    qualifies = block.vw[idx] >= model._raw_threshold()
    parent = model._super_parent()
    if parent is not None:
        qualifies &= cols == feat.get(parent, -1)
    parents = np.flatnonzero(qualifies)
    if not len(parents):
        return None
    features = [kept[p][0] for p in parents.tolist()]
    present = model._store.categorical.present
    with_parent = np.array([[present[f].get(y, 0.0) for y in classes] for f in features])
    child_weights = np.array([weights.get(f, 1.0) for f, _v in kept])
    spodes = weighted_spode_scores(block, idx, cols, parents, a, child_weights, with_parent)
    return features, spodes


def _naive_terms(
    model: _SuperParent,
    items: list[Item],
    weights: Mapping[Hashable, float],
    a: float,
    classes: list[Hashable],
) -> list[float] | None:
    """The weighted Naive Bayes terms of the features without pair counts (the same in
    every SPODE); ``None`` when there are none."""
    store = model._store
    counts = store.categorical.counts
    pair_features = store.pair_features
    out: list[float] | None = None
    for j, vj in items:
        w = weights.get(j, 1.0)
        if j not in counts or j in pair_features or not w:
            continue
        terms = [w * t for t in store.categorical.log_likelihoods(j, vj, classes, a)]
        out = terms if out is None else [p + q for p, q in zip(out, terms, strict=True)]
    return out


def _naive(
    model: _SuperParent,
    items: list[Item],
    weights: Mapping[Hashable, float],
    a: float,
    classes: list[Hashable],
) -> dict[Hashable, float]:
    """The weighted Naive Bayes fallback of the single counts (no qualifying parent); as
    without weights, an item in the "other" bucket is left out."""
    categorical = model._store.categorical
    n_classes = len(classes)
    score = ZeroScore(n_classes)
    total = [categorical.total_weight] * n_classes
    class_weight = categorical.class_weight
    score.add_weighted([class_weight[y] for y in classes], total, n_classes, a, 1.0)
    counts, present = categorical.counts, categorical.present
    for j, vj in items:
        values = counts.get(j)
        if values is None or vj is OTHER:
            continue
        by_value, by_class = values.get(vj, _EMPTY), present[j]
        score.add_weighted(
            [by_value.get(y, 0.0) for y in classes],
            [by_class.get(y, 0.0) for y in classes],
            len(values),
            a,
            weights.get(j, 1.0),
        )
    return score.resolve(classes)


def dependence_scores(
    model: _Dependence, x: Mapping[str, Any], weights: Mapping[Hashable, float]
) -> dict[Hashable, float]:
    """TAN and KDB scores of ``x`` with ``weights``: the terms of
    :meth:`_Dependence._joint_log_likelihood` times their weights, weight-0 parents
    skipped (see the module docstring)."""
    store = model._store
    categorical = store.categorical
    class_weight = categorical.class_weight
    warming: dict[Hashable, float] = {}
    items = model._encode(x, False, warming)
    a = model.alpha / model._scale
    classes = list(class_weight)
    n_classes = len(classes)
    score = ZeroScore(n_classes)
    total = [categorical.total_weight] * n_classes
    score.add_weighted([class_weight[y] for y in classes], total, n_classes, a, 1.0)
    counts, present = categorical.counts, categorical.present
    value_weight = store.value_weight
    threshold = model._raw_threshold()
    xd = dict(items)
    zeros = [0.0] * n_classes
    for j, vj in items:
        values = counts.get(j)
        w = weights.get(j, 1.0)
        if values is None or not w:
            continue
        s = len(values)
        pa = [p for p in model._parents.get(j, ()) if weights.get(p, 1.0)]
        node = None
        if len(pa) >= 2 and len(pa) == len(model._parents[j]):
            key = tuple([xd.get(p, _ABSENT) for p in pa])
            if _ABSENT not in key:
                node = model._families[j].get(key)
                if node is not None and sum(node[0]) < threshold:
                    node = None
        if node is not None:  # the family counts
            score.add_weighted(node[1].get(vj, zeros), node[0], s, a, w)
            continue
        for p in pa:
            vp = xd.get(p, _ABSENT)
            if vp is not _ABSENT and value_weight[p].get(vp, 0.0) >= threshold:
                score.add_weighted(*store.pair_node((p, vp), (j, vj), zeros), s, a, w)
                break
        else:  # the Naive Bayes term
            by_value, by_class = values.get(vj, _EMPTY), present[j]
            score.add_weighted(
                [by_value.get(y, 0.0) for y in classes],
                [by_class.get(y, 0.0) for y in classes],
                s,
                a,
                w,
            )
    return model._with_warmup(score.resolve(classes), warming)
