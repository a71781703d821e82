"""Scoring of the super-parent learners, SPODE and AODE.

A SPODE with super-parent ``p`` scores
``SPODE_p(y) = log P̂(y, x_p) + Σ_{j ≠ p} log P̂(x_j | y, x_p)`` with
``P̂(y, x_i) = (N(y, x_i) + α) / (N_i + α K S_i)`` and
``P̂(x_j | y, x_i) = (N(y, x_i, x_j) + α) / (N(y, x_i, j) + α S_j)``. AODE sums
``exp(SPODE_p)`` over every qualifying parent, SPODE has one: both are
:meth:`_SuperParent._joint_log_likelihood` with a different
:meth:`_SuperParent._super_parent`. Qualifying: a pair feature of the event
whose value has ``N(x_p) ≥ min_parent_count``; with none, the model falls back
to the Naive Bayes of the single counts. Features past ``max_pair_features``
add their Naive Bayes term to every SPODE.

Weighted AODE mixes the SPODEs with the weights of
:meth:`_SuperParent._parent_weights` (:mod:`stream_nb.seminaive._weights`); with
``alpha = 0`` the scores are :mod:`stream_nb.seminaive._zero`'s (one event at
a time, no known-event path or batch kernel).

Three paths compute these same formulas:

* **known events** (every value ``None`` or a string the dense block holds):
  every SPODE one product of ratios of the block's counts
  (:mod:`stream_nb.seminaive._fast`, :mod:`stream_nb.seminaive._products`), learned
  with :meth:`~stream_nb.seminaive._store.PairStore.learn_known`, no encoding;
* **batches of known events**: the batch kernel
  (:meth:`_SuperParent.predict_learn_columns`, :meth:`_SuperParent.predict_learn_many`),
  prequential like one event at a time;
* **everything else** (new values, numbers to discretise one event at a time,
  sparse counts): encoding, then the dense (:mod:`stream_nb.seminaive._general`)
  or sparse scores below.

With forgetting the first two score in raw units (α / scale), as the third.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from stream_nb._softmax import log_softmax
from stream_nb._state import LABEL_TYPES
from stream_nb.base import Capabilities
from stream_nb.seminaive._base import _SemiNaive
from stream_nb.seminaive._dense import DenseBlock, Floats
from stream_nb.seminaive._fast import items_of, known_scores, known_spodes, predict_learn_known
from stream_nb.seminaive._feature_weights import superparent_scores
from stream_nb.seminaive._general import spode_scores
from stream_nb.seminaive._known import Rows, known_items
from stream_nb.seminaive._store import OTHER, Item
from stream_nb.seminaive._zero import ZeroScore, mix

__all__ = ["_SuperParent"]

_log = math.log
_exp = math.exp
_EMPTY: dict[Any, Any] = {}

#: Products of probability ratios are folded into a log before they can fall
#: below this (the smallest normal double is 2.2e-308; keep a margin).
_LOG_SAFE_PRODUCT = math.log(1e-290)

#: ``(j, x_j, α S_j, −log S_j)`` of a child feature (see :meth:`_SuperParent._children`).
Child = tuple[Hashable, Hashable, float, float]


class _SuperParent(_SemiNaive):
    """Base of SPODE and AODE: the averaged one-dependence score (see the module docstring)."""

    capabilities = Capabilities(
        informative_features=True, column_kernel=True, kernel_records_delta=True
    )

    # whether the options allow the known-event path (see _fast.known_ready; set on first use)
    _known_options: bool | None = None
    # (x, block, its items, its keys, its values) of the last known prediction
    _last_event: tuple[Any, ...] | None = None

    def _super_parent(self) -> Hashable | None:
        """Hook: the one super-parent feature (SPODE), or ``None``: every qualifying one (AODE)."""
        return None

    def _weighted(self) -> bool:
        """Hook: whether the SPODEs are mixed with :meth:`_parent_weights` (weighted AODE)
        rather than uniformly; the batch kernel is then not used."""
        return False

    def _parent_weights(self, features: list[Hashable]) -> list[float]:
        """Hook: the weight of each parent feature's SPODE in the mixture (uniform here)."""
        return [1.0] * len(features)

    def _joint_log_likelihood(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        store = self._store
        class_weight = store.class_weight
        if not class_weight:
            return {}
        if self._score_weights is not None:
            return superparent_scores(self, x, self._score_weights)
        if self.alpha == 0.0:
            return self._zero_alpha_scores(x)
        if self._weighted():
            return self._weighted_scores(x)
        found = known_scores(self, x)
        if found is not None:
            values, divisor = found
            if divisor is not None:
                shift = _log(divisor)
                values = [_log(v) - shift for v in values]
            return dict(zip(class_weight, values, strict=True))
        class_weight = store.categorical.class_weight
        warming: dict[Hashable, float] = {}
        items = self._encode(x, False, warming)
        a = self.alpha / self._scale
        classes = list(class_weight)
        parent = self._super_parent()
        block = store.dense
        if block is not None:
            dense = self._dense_scores(items, a, parent)
            scores = None if dense is None else _sum_dense(dense, block)
        else:
            parents = self._parents(items, parent)
            scores = self._sparse_scores(parents, items, classes, a) if parents else None
        if scores is None:
            return self._with_warmup(self._fallback(items), warming)
        naive = self._naive_terms(items, classes, a)
        if naive is not None:  # features past max_pair_features: the same in every SPODE
            scores = [v + t for v, t in zip(scores, naive, strict=True)]
        return self._with_warmup(dict(zip(classes, scores, strict=True)), warming)

    def _weighted_scores(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        """``log Σ_p W_p exp(SPODE_p(y)) − log Σ_p W_p`` over the qualifying parents, with
        the weights of :meth:`_parent_weights` (all 0: uniform weights instead).

        A known event (see :mod:`~stream_nb.seminaive._known`, no forgetting) takes
        its SPODEs from the dense block (:func:`~stream_nb.seminaive._fast.known_spodes`), anything
        else from the counts."""
        store = self._store
        block = store.dense
        if block is not None and self._gamma is None:
            idx = known_items(block.codes, x)
            if idx:
                ii, spodes = known_spodes(self, block, idx)
                keep = block.vw.take(ii) >= self._raw_threshold()
                if keep.any():  # else no parent: the general path falls back
                    named = block.items
                    features = [named[a][0] for a in ii[keep].tolist()]
                    mixed = self._mix_weighted(features, spodes[keep])
                    return dict(zip(store.class_weight, mixed, strict=True))
        warming: dict[Hashable, float] = {}
        items = self._encode(x, False, warming)
        a = self.alpha / self._scale
        classes = list(store.categorical.class_weight)
        found = self._each_parent(items, a, classes)
        if found is None:
            return self._with_warmup(self._fallback(items), warming)
        scores = self._mix_weighted(*found)
        naive = self._naive_terms(items, classes, a)
        if naive is not None:  # features past max_pair_features: the same in every SPODE
            scores = [v + t for v, t in zip(scores, naive, strict=True)]
        return self._with_warmup(dict(zip(classes, scores, strict=True)), warming)

    def _mix_weighted(self, features: list[Hashable], spodes: Floats) -> list[float]:
        """``log Σ_p W_p exp(spodes_p) − log Σ_p W_p`` by class, ``W`` the
        :meth:`_parent_weights` of the parents' ``features`` (all 0: uniform)."""
        weights = np.array(self._parent_weights(features))
        if not weights.any():
            weights[:] = 1.0
        keep = weights > 0.0
        spodes, weights = spodes[keep], weights[keep]
        top = spodes.max(axis=0)
        mixed = np.log(weights @ np.exp(spodes - top)) + top - math.log(weights.sum())
        out: list[float] = mixed.tolist()
        return out

    def _zero_alpha_scores(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        """The scores with ``α = 0`` (see :mod:`stream_nb.seminaive._zero`): each qualifying
        parent's SPODE as a :class:`ZeroScore`, mixed by :func:`mix` (with
        :meth:`_parent_weights`), the Naive Bayes terms of features without pair counts
        added, then :mod:`stream_nb._mle`'s rule; no parent: the Naive Bayes scores."""
        store = self._store
        categorical = store.categorical
        warming: dict[Hashable, float] = {}
        items = self._encode(x, False, warming)
        classes = list(categorical.class_weight)
        n_classes = len(classes)
        counts, present = categorical.counts, categorical.present
        pair_features = store.pair_features
        parents = self._parents(items, self._super_parent())
        shared = ZeroScore(n_classes)  # the same in every SPODE
        children = []
        for j, vj in items:
            values = counts.get(j)
            if values is None:
                continue
            if parents and j in pair_features:
                children.append((j, vj, len(values)))
            elif parents or vj is not OTHER:  # (the Naive Bayes fallback leaves "other" out)
                by_value, by_class = values.get(vj, _EMPTY), present[j]
                shared.add(
                    [by_value.get(y, 0.0) for y in classes],
                    [by_class.get(y, 0.0) for y in classes],
                    len(values),
                )
        if not parents:
            class_weight = categorical.class_weight
            prior = ZeroScore(n_classes)
            total = [categorical.total_weight] * n_classes
            prior.add([class_weight[y] for y in classes], total, n_classes)
            prior.extend(shared)
            return self._with_warmup(prior.resolve(classes), warming)
        zeros = [0.0] * n_classes
        feature_weight = store.feature_weight
        pair_node = store.pair_node
        spodes = []
        for i, vi in parents:
            score = ZeroScore(n_classes)
            by_value = counts[i].get(vi, _EMPTY)
            score.add(
                [by_value.get(y, 0.0) for y in classes],
                [feature_weight[i]] * n_classes,
                n_classes * len(counts[i]),
            )
            for j, vj, s in children:
                if j != i:
                    score.add(*pair_node((i, vi), (j, vj), zeros), s)
            spodes.append(score)
        weights = self._parent_weights([i for i, _vi in parents])
        if not any(weights):
            weights = [1.0] * len(parents)
        kept = [(p, w) for p, w in zip(spodes, weights, strict=True) if w > 0.0]
        mixed = mix([p for p, _w in kept], [w for _p, w in kept])
        mixed.extend(shared)
        return self._with_warmup(mixed.resolve(classes), warming)

    def _each_parent(
        self, items: list[Item], a: float, classes: list[Hashable]
    ) -> tuple[list[Hashable], Floats] | None:
        """The qualifying parents' features and their ``SPODE_p(y)``, shape ``(parents, K)``
        in class order, from the dense block or the sparse counts; ``None``: no parent."""
        block = self._store.dense
        if block is not None:
            idx, cols = block.children(items)
            if not len(idx):
                return None
            parents = np.flatnonzero(block.vw[idx] >= self._raw_threshold())
            if not len(parents):
                return None
            named = block.items
            features = [named[a_][0] for a_ in idx[parents].tolist()]
            return features, spode_scores(block, idx, cols, parents, a)
        chosen = self._parents(items, None)
        if not chosen:
            return None
        children = self._children(items, a)
        chunk = self._safe_chunk(a, children)
        rows = [self._spode(p, children, classes, a, chunk) for p in chosen]
        return [f for f, _v in chosen], np.array(rows)

    def predict_log_proba_one(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        """:meth:`Learner.predict_log_proba_one`; a known event straight from the dense block."""
        if x.__class__ is dict:
            found = known_scores(self, x)
            if found is not None:
                values, divisor = found
                labels = self._store.class_weight
                if divisor is not None:
                    log_total = _log(sum(values))
                    return dict(zip(labels, [_log(v) - log_total for v in values], strict=True))
                return log_softmax(dict(zip(labels, values, strict=True)))
        return super().predict_log_proba_one(x)

    def predict_proba_one(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        """:meth:`Learner.predict_proba_one`; a known event straight from the dense block."""
        if x.__class__ is dict:
            found = known_scores(self, x)
            if found is not None:
                values, divisor = found
                labels = self._store.class_weight
                if divisor is not None:
                    total = sum(values)
                    return dict(zip(labels, [v / total for v in values], strict=True))
                log_proba = log_softmax(dict(zip(labels, values, strict=True)))
                return {c: _exp(v) for c, v in log_proba.items()}
        return super().predict_proba_one(x)

    # ------------------------------------------------------------------ batch kernel
    def _batch_ready(self) -> bool:
        """Whether the batch kernel may take a batch: the class declares it
        (``capabilities.column_kernel``), there is a dense block, :meth:`_parent_fixed`,
        not :meth:`_weighted`, ``α > 0`` and no ``feature_weights``."""
        return (
            type(self).capabilities.column_kernel
            and self._store.dense is not None
            and self._parent_fixed()
            and not self._weighted()
            and self.alpha > 0.0
            and self._score_weights is None
        )

    def _kernel_parent(self) -> Hashable | None:
        return self._super_parent()

    def _parent_fixed(self) -> bool:
        """Hook: whether :meth:`_super_parent` stays the same through a batch."""
        return True

    def _predict_learn_known(
        self,
        rows: Rows,
        parent_items: list[int | None],
        ys: Sequence[Hashable | None],
        ws: Sequence[float],
    ) -> tuple[list[Hashable], Floats, Any] | None:
        """The batch kernel (:func:`~stream_nb.seminaive._fast.predict_learn_known`)."""
        return predict_learn_known(self, rows, parent_items, ys, ws)

    def learn_one(self, x: Mapping[str, Any], y: Hashable, w: float = 1.0) -> None:
        """:meth:`Learner.learn_one`; a known event of a known class with weight 1, without
        forgetting or a tracked delta, straight into the dense block (the same counts)."""
        if (
            w == 1.0
            and x.__class__ is dict
            and y.__class__ in LABEL_TYPES
            and self._delta is None
            and self._gamma is None
        ):
            store = self._store
            block = store.dense
            k = store.classes.get(y)
            if block is not None and k is not None:  # (a learned class: a valid label)
                idx = items_of(self, block, x)
                if idx:
                    store.learn_known(idx, y, k, 1.0)
                    self.n_learned += 1
                    return
        super().learn_one(x, y, w)

    def _learn(self, x: Mapping[str, Any], y: Hashable, w: float) -> None:
        store = self._store
        block = store.dense
        if block is not None:
            k = store.classes.get(y)
            if k is not None:
                idx = known_items(block.codes, x)
                if idx:  # every value a known string of a pair feature: nothing to encode
                    store.learn_known(idx, y, k, w)
                    return
        super()._learn(x, y, w)

    def _parents(self, items: list[Item], feature: Hashable | None) -> list[Item]:
        """The event's items that qualify as super-parents (of ``feature`` only, if given)."""
        store = self._store
        value_weight = store.value_weight
        pair_features = store.pair_features
        threshold = self._raw_threshold()
        if feature is not None:
            items = [item for item in items if item[0] == feature]
        return [
            item
            for item in items
            if item[0] in pair_features and value_weight[item[0]].get(item[1], 0.0) >= threshold
        ]

    def _sparse_scores(
        self, parents: list[Item], items: list[Item], classes: list[Hashable], a: float
    ) -> list[float]:
        """``log Σ_p exp(SPODE_p(y))`` over ``parents`` from the sparse pair counts
        (a max-shifted log-sum-exp per class; one parent: its SPODE)."""
        children = self._children(items, a)
        chunk = self._safe_chunk(a, children)
        spode = self._spode
        scores = [spode(p, children, classes, a, chunk) for p in parents]
        if len(scores) == 1:
            return scores[0]
        combined = []
        exp = _exp
        for k in range(len(classes)):
            column = [s[k] for s in scores]
            m = max(column)
            combined.append(m + _log(sum([exp(v - m) for v in column])))
        return combined

    def _children(self, items: list[Item], a: float) -> list[Child]:
        """``(j, x_j, α·S_j, −log S_j)`` for the event's learned features with pair counts."""
        counts = self._store.categorical.counts
        pair_features = self._store.pair_features
        out = []
        for j, vj in items:
            values = counts.get(j)
            if values is not None and j in pair_features:
                s = len(values)
                out.append((j, vj, a * s, -_log(s)))
        return out

    def _spode(
        self,
        parent: Item,
        children: list[Child],
        classes: list[Hashable],
        a: float,
        chunk: int,
    ) -> list[float]:
        """``log P̂(y, x_p) + Σ_{j≠p} log P̂(x_j | y, x_p)`` for every class, in ``classes`` order.

        ``P̂(y, x_i) = (N(y, x_i) + α) / (N_i + α K S_i)`` and
        ``P̂(x_j | y, x_i) = (N(y, x_i, x_j) + α) / (N(y, x_i, j) + α S_j)``.
        """
        store = self._store
        log = _log
        i, vi = parent
        values = store.categorical.counts[i]
        pc = values.get(vi, _EMPTY)
        ld = log(store.feature_weight[i] + a * len(classes) * len(values))
        s = [log(pc.get(y, 0.0) + a) - ld for y in classes]
        sub = store.pairs.get(parent, _EMPTY)
        n_classes = len(classes)
        zeros = [0.0] * n_classes
        ones = [1.0] * n_classes
        # Σ log(ratio) = log Π ratio over chunks of at most ``chunk`` children:
        # one log per chunk instead of one per child, and ``chunk`` is small
        # enough that a product can never underflow (see _safe_chunk).
        p = ones
        const = 0.0
        get = sub.get
        if chunk >= len(children):  # the usual case: one log per class at the end
            for j, vj, sa, unseen in children:
                if j is i:
                    continue
                node = get(j)
                if node is None:  # N(y, x_i, j) = 0 for every y: the term is log(α / αS_j)
                    const += unseen
                    continue
                row = node[1].get(vj, zeros)
                p = [q * (r + a) / (c + sa) for q, r, c in zip(p, row, node[0], strict=True)]
            return [v + log(q) + const for v, q in zip(s, p, strict=True)]
        in_chunk = 0
        for j, vj, sa, unseen in children:
            if j is i:
                continue
            node = get(j)
            if node is None:
                const += unseen
                continue
            row = node[1].get(vj, zeros)
            p = [q * (r + a) / (c + sa) for q, r, c in zip(p, row, node[0], strict=True)]
            in_chunk += 1
            if in_chunk == chunk:
                s = [v + log(q) for v, q in zip(s, p, strict=True)]
                p = ones
                in_chunk = 0
        return [v + log(q) + const for v, q in zip(s, p, strict=True)]

    def _dense_scores(self, items: list[Item], a: float, parent: Hashable | None) -> Floats | None:
        """Dense ``SPODE_i(y)`` for the qualifying parents (all, or feature ``parent``).

        Shape ``(parents, K)`` in class-index order; ``None`` when no parent qualifies.
        """
        block = self._store.dense
        assert block is not None
        idx, cols = block.children(items)
        if not len(idx):
            return None
        if parent is None:
            parents = np.flatnonzero(block.vw[idx] >= self._raw_threshold())
        else:
            c = block.feat.get(parent)
            if c is None:
                return None
            parents = np.flatnonzero(cols == c)
            if not len(parents) or block.vw[idx[parents[0]]] < self._raw_threshold():
                return None
        if not len(parents):
            return None
        return spode_scores(block, idx, cols, parents, a)

    def _naive_terms(
        self, items: list[Item], classes: list[Hashable], a: float
    ) -> list[float] | None:
        """CategoricalNB terms of the event's learned features *without* pair counts.

        Features past ``max_pair_features`` are modelled as in Naive Bayes:
        ``log((N(y, x_j) + α) / (N(y, j) + α S_j))`` added to every class score.
        ``None`` when there are none.
        """
        store = self._store
        pair_features = store.pair_features
        if len(pair_features) == len(store.feature_weight):
            return None
        categorical = store.categorical
        counts = categorical.counts
        out: list[float] | None = None
        for j, vj in items:
            if j not in counts or j in pair_features:
                continue
            terms = categorical.log_likelihoods(j, vj, classes, a)
            out = terms if out is None else [p + q for p, q in zip(out, terms, strict=True)]
        return out

    def _safe_chunk(self, a: float, children: list[Child]) -> int:
        """Children whose ratios may be multiplied before taking a log, without underflow.

        Each ratio ``(N(y,x_i,x_j) + α) / (N(y,x_i,j) + αS_j)`` is at least
        ``f = α / (N + α max S_j)`` (all in raw units), so a product of ``L``
        ratios has a log above ``_LOG_SAFE_PRODUCT`` when ``L ≤ _LOG_SAFE_PRODUCT / log f``.
        """
        if not children:
            return 1
        s_max = max(sa for _j, _v, sa, _u in children)  # α max S_j, raw units
        f = a / (self._store.categorical.total_weight + s_max)
        if f >= 1.0:
            return len(children)
        return max(1, int(_LOG_SAFE_PRODUCT / _log(f)))


def _sum_dense(scores: Floats, block: DenseBlock) -> list[float]:
    """``log Σ_p exp(SPODE_p(y))`` of the dense ``(parents, K)`` scores (one parent: its row).

    Every score is a log-probability (≤ 0), so the plain sum cannot overflow;
    it is shifted by the max only if it underflows.
    """
    if len(scores) == 1:
        out: list[float] = scores[0].tolist()
        return out
    ones = block.vectors(len(scores))[1]
    total = ones @ np.exp(scores)
    if total.min() > 0.0:
        out = np.log(total).tolist()
        return out
    m = scores.max(axis=0)
    scores -= m
    out = (np.log(ones @ np.exp(scores)) + m).tolist()
    return out
