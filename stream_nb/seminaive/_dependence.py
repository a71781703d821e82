"""The base of TAN and KDB: Bayesian-network classifiers with a rebuilt structure.

The structure (each feature's parents) is rebuilt from the pair counts on a
schedule; KDB's features with two or more parents also keep *family* counts
(:mod:`stream_nb.seminaive._nodes` tables ``families[j][x_pa(j)]``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, Unpack

import numpy as np

from stream_nb._params import log_prior
from stream_nb._state import encode_key, pairs
from stream_nb.base import Capabilities, Learner
from stream_nb.seminaive import _nodes
from stream_nb.seminaive._base import (
    COUNT_TOLERANCE,
    SemiNaiveOptions,
    _SemiNaive,
    check_int,
    shared_signature,
)
from stream_nb.seminaive._dense import DenseBlock, Floats, Indices
from stream_nb.seminaive._feature_weights import dependence_scores
from stream_nb.seminaive._general import pair_terms
from stream_nb.seminaive._information import (
    conditional_mutual_information,
    feature_order,
    ranked,
)
from stream_nb.seminaive._known import Rows, item_array, labels_and_weights_known, normalise
from stream_nb.seminaive._nodes import Node, add_node, count
from stream_nb.seminaive._plan import Plan, family_terms
from stream_nb.seminaive._segment import learn_run, run_scores
from stream_nb.seminaive._states import read_dependence_state
from stream_nb.seminaive._store import Item
from stream_nb.seminaive._zero import ZeroScore

__all__ = ["SIGNIFICANCE_Z", "_Dependence"]

_log = math.log
_EMPTY: dict[Any, Any] = {}
_ABSENT = object()  # "feature not in the event" (OTHER is a real bucket)
_NB_TERM: list[Any] = []  # "no parent usable, use the Naive Bayes term"

#: The first structure rebuild happens after this many events (or
#: ``rebuild_every`` if smaller); the gap then doubles up to ``rebuild_every``.
_FIRST_REBUILD = 32

#: TAN/KDB join two features only if their conditional dependence is
#: significant: G > χ² quantile at z = 3.09 σ (one-sided p ≈ 0.001). Without
#: it, sampling noise between irrelevant features (E[G] = df) adds edges that
#: cost accuracy on short streams with many classes.
SIGNIFICANCE_Z = 3.09


class _Dependence(_SemiNaive):
    """Base of TAN and KDB: Bayesian-network classifiers with a periodically rebuilt structure.

    Each feature ``j`` has an ordered tuple of parents ``pa(j)`` (best first).
    Its term is, in order of preference,

    * ``log P̂(x_j | y, x_pa(j))`` from the sparse *family* counts when
      ``|pa(j)| ≥ 2``, every parent is present and that parent configuration
      has weight ≥ ``min_parent_count`` (with ``j`` present);
    * ``log P̂(x_j | y, x_p)`` from the pair store for the first parent ``p``
      present in the event with ``N(x_p) ≥ min_parent_count``;
    * the CategoricalNB term ``log((N(y, x_j) + α) / (N(y, j) + α S_j))``;

    plus the CategoricalNB prior ``log((N_y + α) / (N + Kα))``.

    Family counts of a feature start from zero whenever a rebuild changes its
    parent set (they cannot be recovered from pairwise counts).

    Batches of known events (every value ``None`` or a string the dense block
    holds, no forgetting) go through the batch kernel
    (:meth:`predict_learn_columns`, :meth:`predict_learn_many`): each event is
    scored from the block's counts and learned in turn, and a rebuild that
    falls inside the batch happens after the event that triggers it, exactly
    as one event at a time.

    With ``alpha=0`` (maximum likelihood) the same terms are scored as in
    :mod:`stream_nb.seminaive._zero` (zero counts ``-inf``, decided by
    :mod:`stream_nb._mle`'s rule), one event at a time (no batch kernel).
    """

    capabilities = Capabilities(
        informative_features=True, structure=True, column_kernel=True, kernel_records_delta=True
    )

    def structure(self) -> dict[str, Any] | None:
        """The parents of each feature at the last rebuild (:meth:`Learner.structure`)."""
        return {"parents": [{"feature": f, "parents": list(pa)} for f, pa in self.parents.items()]}

    @shared_signature
    def __init__(
        self,
        alpha: float = 1.0,
        *,
        rebuild_every: int = 1000,
        **options: Unpack[SemiNaiveOptions],
    ) -> None:
        super().__init__(alpha, **options)
        self.rebuild_every = check_int(rebuild_every, "rebuild_every", 1)
        self._parents: dict[Hashable, tuple[Hashable, ...]] = {}
        self._families: dict[Hashable, dict[tuple[Hashable, ...], Node]] = {}
        # the schedule counts learned weight (undecayed), so w=2 equals two events
        self._weight_seen = 0.0
        self._next_rebuild = float(min(_FIRST_REBUILD, self.rebuild_every))

    def _params(self) -> dict[str, Any]:
        params = super()._params()
        params["rebuild_every"] = self.rebuild_every
        return params

    @property
    def parents(self) -> dict[Hashable, tuple[Hashable, ...]]:
        """The current structure: feature -> its parents, best first (copy)."""
        return dict(self._parents)

    # ------------------------------------------------------------------ structure
    def _choose_parents(self) -> dict[Hashable, tuple[Hashable, ...]]:
        """Hook: the new structure, from :meth:`_dependencies` (TAN: a tree, KDB: k parents)."""
        raise NotImplementedError

    def _dependencies(self) -> tuple[list[Hashable], Callable[[Hashable, Hashable], float]]:
        """The pair features ranked by ``I(X_i; Y)`` (ties by name), and the weight of
        joining two of them: their ``I(X_i; X_j | Y)`` if significant (G test at
        ``SIGNIFICANCE_Z``, see
        :func:`~stream_nb.seminaive._information.conditional_mutual_information`), else 0.
        """
        store = self._store
        ranking = ranked(store, store.pair_features)
        cmi = conditional_mutual_information(store, self._scale, SIGNIFICANCE_Z)
        order = feature_order(store)

        def weight(a: Hashable, b: Hashable) -> float:
            return cmi.get((a, b) if order[a] < order[b] else (b, a), 0.0)

        return ranking, weight

    def rebuild(self) -> None:
        """Rebuild the structure from the current counts now (also done every ``rebuild_every``).

        Families whose parent set changed restart their counts from zero.
        """
        new = self._choose_parents()
        old = self._parents
        for j, pa in new.items():
            if set(pa) == set(old.get(j, ())):
                new[j] = old.get(j, pa)  # same set: keep the order family keys use
        families = {}
        for j, pa in new.items():
            if len(pa) >= 2:
                families[j] = self._families.get(j, {}) if old.get(j) == pa else {}
        self._parents = new
        self._families = families

    def _learn_known_run(
        self, rows: Rows, ks: Indices, ys: Sequence[Hashable], ws: Sequence[float]
    ) -> None:
        """:meth:`_SemiNaive._learn_known_run` with what :meth:`_after_learn` does after each
        event: its family counts, and a structure rebuild right after the event that is
        due for one."""
        block = self._store.dense
        assert block is not None
        named = block.items
        k_list = ks.tolist()
        t, n = 0, len(ys)
        while t < n:
            seen = self._weight_seen
            due = self._next_rebuild * (1.0 - COUNT_TOLERANCE)
            stop, rebuild = n, False
            for j in range(t, n):
                seen += ws[j] * self._scale  # raw w × scale = the event's weight
                if seen >= due:
                    stop, rebuild = j + 1, True
                    break
            super()._learn_known_run(rows[t:stop], ks[t:stop], ys[t:stop], ws[t:stop])
            if self._families:
                for j in range(t, stop):
                    self._count_families([named[a] for a in rows[j]], k_list[j], ws[j])
            self._weight_seen = seen
            if rebuild:
                self.rebuild()
                self._schedule()
            t = stop

    def _after_learn(self, items: list[Item], y: Hashable, w: float) -> None:
        self._count_families(items, self._store.classes[y], w)
        self._weight_seen += w * self._scale  # raw w × scale = the event's weight
        if self._weight_seen >= self._next_rebuild * (1.0 - COUNT_TOLERANCE):
            self.rebuild()
            self._schedule()

    def _count_families(self, items: list[Item], k: int, w: float) -> None:
        """Add an event of class index ``k`` to the family counts of its features."""
        families = self._families
        if families:
            xd = dict(items)
            parents = self._parents
            n_classes = len(self._store.classes)
            for j, fam in families.items():
                vj = xd.get(j, _ABSENT)
                if vj is _ABSENT:
                    continue
                key = tuple([xd.get(p, _ABSENT) for p in parents[j]])
                if _ABSENT not in key:
                    count(fam, key, vj, k, w, n_classes)

    def _schedule(self) -> None:
        """Next rebuild: the gap doubles from ``_FIRST_REBUILD`` up to ``rebuild_every``."""
        n = self._weight_seen
        self._next_rebuild = n + min(max(n, _FIRST_REBUILD), self.rebuild_every)

    # ------------------------------------------------------------------ scoring
    def _joint_log_likelihood(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        store = self._store
        categorical = store.categorical
        class_weight = categorical.class_weight
        if not class_weight:
            return {}
        if self._score_weights is not None:
            return dependence_scores(self, x, self._score_weights)
        if self.alpha == 0.0:
            return self._zero_alpha_scores(x)
        warming: dict[Hashable, float] = {}
        items = self._encode(x, False, warming)
        a = self.alpha / self._scale
        classes = list(class_weight)
        prior = log_prior(class_weight, categorical.total_weight, a, True, None)
        s = [prior[y] for y in classes]
        counts = categorical.counts
        present = categorical.present
        value_weight = store.value_weight
        pair_node = store.pair_node
        block = store.dense
        terms_at: list[tuple[int, int, int, float]] = []  # (parent item, child item, column, αS)
        index: dict[Any, int] = block.index if block is not None else _EMPTY
        get = index.get
        feat = block.feat if block is not None else _EMPTY
        parents = self._parents
        families = self._families
        threshold = self._raw_threshold()
        xd = dict(items)
        log = _log
        zeros = [0.0] * len(classes)
        for j, vj in items:
            values = counts.get(j)
            if values is None:
                continue
            n_values = len(values)
            sa = a * n_values
            pa = parents.get(j, ())
            node = None
            if len(pa) >= 2:
                key = tuple([xd.get(p, _ABSENT) for p in pa])
                if _ABSENT not in key:
                    node = families[j].get(key)
                    if node is not None and sum(node[0]) < threshold:
                        node = None
            if node is None:
                for p in pa:
                    vp = xd.get(p, _ABSENT)
                    if vp is not _ABSENT and value_weight[p].get(vp, 0.0) >= threshold:
                        if block is not None:  # gathered below, all features at once
                            terms_at.append((get((p, vp), 0), get((j, vj), 0), feat.get(j, 0), sa))
                            break
                        row, ctx = pair_node((p, vp), (j, vj), zeros)
                        terms = [log((r + a) / (c + sa)) for r, c in zip(row, ctx, strict=True)]
                        s = [v + t for v, t in zip(s, terms, strict=True)]
                        break
                else:
                    node = _NB_TERM
            if node is _NB_TERM:  # the Naive Bayes term (CategoricalStatistics.log_likelihoods)
                cg = present[j].get
                rg = values.get(vj, _EMPTY).get
                s = [
                    v + log((rg(y, 0.0) + a) / (cg(y, 0.0) + sa))
                    for v, y in zip(s, classes, strict=True)
                ]
            elif node is not None:  # the family counts
                row = node[1].get(vj, zeros)
                s = [v + log((r + a) / (c + sa)) for v, r, c in zip(s, row, node[0], strict=True)]
        if terms_at:
            assert block is not None
            s = [v + t for v, t in zip(s, pair_terms(block, terms_at, a).tolist(), strict=True)]
        return self._with_warmup(dict(zip(classes, s, strict=True)), warming)

    def _zero_alpha_scores(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        """The scores with ``α = 0``: the same terms, chosen as in
        :meth:`_joint_log_likelihood`, as a :class:`ZeroScore`
        (:mod:`stream_nb.seminaive._zero`), then :mod:`stream_nb._mle`'s rule."""
        store = self._store
        categorical = store.categorical
        class_weight = categorical.class_weight
        warming: dict[Hashable, float] = {}
        items = self._encode(x, False, warming)
        classes = list(class_weight)
        n_classes = len(classes)
        score = ZeroScore(n_classes)
        total = [categorical.total_weight] * n_classes
        score.add([class_weight[y] for y in classes], total, n_classes)
        counts, present = categorical.counts, categorical.present
        value_weight = store.value_weight
        threshold = self._raw_threshold()
        xd = dict(items)
        zeros = [0.0] * n_classes
        for j, vj in items:
            values = counts.get(j)
            if values is None:
                continue
            pa = self._parents.get(j, ())
            node = None
            if len(pa) >= 2:
                key = tuple([xd.get(p, _ABSENT) for p in pa])
                if _ABSENT not in key:
                    node = self._families[j].get(key)
                    if node is not None and sum(node[0]) < threshold:
                        node = None
            if node is not None:  # the family counts
                score.add(node[1].get(vj, zeros), node[0], len(values))
                continue
            for p in pa:
                vp = xd.get(p, _ABSENT)
                if vp is not _ABSENT and value_weight[p].get(vp, 0.0) >= threshold:
                    score.add(*store.pair_node((p, vp), (j, vj), zeros), len(values))
                    break
            else:  # the Naive Bayes term
                by_value, by_class = values.get(vj, _EMPTY), present[j]
                score.add(
                    [by_value.get(y, 0.0) for y in classes],
                    [by_class.get(y, 0.0) for y in classes],
                    len(values),
                )
        return self._with_warmup(score.resolve(classes), warming)

    # ------------------------------------------------------------------ batch kernel
    def _batch_ready(self) -> bool:
        """Whether the batch kernel may take a batch: the class declares it
        (``capabilities.column_kernel``), there is a dense block, no forgetting,
        ``α > 0`` and no ``feature_weights``."""
        return (
            type(self).capabilities.column_kernel
            and self._store.dense is not None
            and self._gamma is None
            and self.alpha > 0.0
            and self._score_weights is None
        )

    def _plan(self) -> Plan:
        block = self._store.dense
        assert block is not None
        return Plan(
            self._parents,
            self._families,
            block.feat,
            block.items,
            block.col_of.tolist(),
            n_items=block.vw.shape[0],
        )

    def _predict_learn_known(
        self,
        rows: Rows,
        parent_items: list[int | None],
        ys: Sequence[Hashable | None],
        ws: Sequence[float],
    ) -> tuple[list[Hashable], Floats, Any] | None:
        """The batch kernel: predict then learn each known event in turn, as
        :meth:`predict_log_proba_one` then :meth:`learn_one` would.

        ``rows[i]`` are event ``i``'s items in the dense block (``parent_items``:
        unused, no super-parent here). Each event's
        terms (:class:`~stream_nb.seminaive._plan.Plan`) are one gather and sum
        of the block's counts, plus its family terms; the class prior and the Naive
        Bayes denominators ``N(y, j) + α S_j`` come from prefix sums over the
        batch in event order (the same sums as one event at a time). A rebuild
        due after an event happens there and the rest of the batch uses the
        new structure. ``None`` (nothing changed) unless the model has learned
        something and every label is ``None`` or a known class with a valid weight.
        """
        store = self._store
        block = store.dense
        classes = store.classes
        if block is None or not store.class_weight or list(store.class_weight) != list(classes):
            return None  # (class weights in class-index order: the prefix sums rely on it)
        if not labels_and_weights_known(classes, ys, ws):
            return None
        labels = list(store.class_weight)
        n = len(rows)
        lists: list[list[int]] = rows.tolist() if isinstance(rows, np.ndarray) else rows
        ks = [-1 if y is None else classes[y] for y in ys]
        prior, denominators = self._prefix_terms(lists, ks, ws)
        scores = np.zeros((n, len(labels)))
        naive = np.zeros((n, len(block.feat)))
        extra: dict[int, list[float]] = {}
        uniform = _uniform(block, rows)
        start = 0
        due = self._next_rebuild * (1.0 - COUNT_TOLERANCE)
        for t, w in enumerate(ws):
            if ks[t] < 0:
                continue
            self._weight_seen += w * self._scale  # raw w × scale = the event's weight
            if self._weight_seen >= due:
                self._predict_learn_run(lists, ks, ws, start, t + 1, uniform, scores, naive, extra)
                self.rebuild()
                self._schedule()
                due = self._next_rebuild * (1.0 - COUNT_TOLERANCE)
                start = t + 1
        if start < n:
            self._predict_learn_run(lists, ks, ws, start, n, uniform, scores, naive, extra)
        self.n_learned += sum(k >= 0 for k in ks)
        scores += prior
        scores -= np.einsum("tc,tck->tk", naive, denominators)
        for t, terms in extra.items():
            scores[t] += terms
        log_proba, best = normalise(scores)
        return labels, log_proba, best

    def _predict_learn_run(
        self,
        rows: list[list[int]],
        ks: list[int],
        ws: Sequence[float],
        start: int,
        stop: int,
        uniform: Indices | None,
        scores: Floats,
        naive: Floats,
        extra: dict[int, list[float]],
    ) -> None:
        """Score then learn events ``start`` to ``stop`` (one structure): their table and
        family terms into ``scores`` and ``extra``, their Naive Bayes columns into ``naive``.

        A run of ``uniform`` events (same columns, no family counts, every parent
        item qualifying already: weights only grow) goes through
        :func:`~stream_nb.seminaive._segment.run_scores` at once, anything else
        one event at a time from the block's counts.
        """
        block = self._store.dense
        assert block is not None
        plan = self._plan()
        threshold = self._raw_threshold()
        if uniform is not None and not plan.families:
            items = uniform[start:stop]
            if not len(items) or block.vw[items].min() >= threshold:
                self._uniform_run(plan, items, ks[start:stop], ws[start:stop], scores[start:stop])
                positions = np.flatnonzero(self._parent_at(plan, items) < 0)
                naive[start:stop, block.col_of[items[0, positions]]] = 1.0
                return
        block.prepare(self.alpha)  # no forgetting: α in raw units is α
        a = self.alpha
        vw, s, col_of, named = block.vw, block.s, block.col_of, block.items

        def qualifies(item: int) -> bool:
            return bool(vw[item] >= threshold)

        def enough(node: Node) -> bool:
            return sum(node[0]) >= threshold

        def n_values(item: int) -> float:
            return float(s[col_of[item]])

        counts = block.counts_rows
        offsets = block.offsets
        n_items = block.vw.shape[0]
        learn = self._store.learn_known
        labels = list(self._store.classes)
        log = np.log
        for t in range(start, stop):
            idx = rows[t]
            at, signs, nb, nodes = plan.rows(idx, qualifies, enough)
            cells = np.array(at, dtype=np.intp)
            terms = counts.take(cells, axis=0)  # (the count, then + α or + α S_j)
            terms += offsets.take(cells // n_items)[:, None]
            np.add.reduce(log(terms, out=terms) * np.array(signs)[:, None], axis=0, out=scores[t])
            naive[t, nb] = 1.0
            if nodes:
                extra[t] = family_terms(nodes, named, n_values, a)
            k = ks[t]
            if k >= 0:
                learn(idx, labels[k], k, ws[t])
                self._count_families([named[i] for i in idx], k, ws[t])

    def _parent_at(self, plan: Plan, items: Indices) -> Indices:
        """For each position of a uniform run, the position of its parent (``-1``: none)."""
        block = self._store.dense
        assert block is not None
        columns = block.col_of[items[0]].tolist()
        position = {c: i for i, c in enumerate(columns)}
        out = np.full(len(columns), -1, dtype=np.intp)
        for i, c in enumerate(columns):
            for pc in plan.parent_cols.get(c, ()):
                if pc in position:
                    out[i] = position[pc]
                    break
        return out

    def _uniform_run(
        self, plan: Plan, items: Indices, ks: list[int], ws: Sequence[float], out: Floats
    ) -> None:
        """:meth:`_predict_learn_run` of a uniform run: scores into ``out``, then learning."""
        if not len(items):
            return
        store = self._store
        block = store.dense
        assert block is not None
        k_of = np.array(ks, dtype=np.intp)
        w_of = np.array(ws, dtype=np.float64)
        weights = np.zeros(out.shape)
        learned = np.flatnonzero(k_of >= 0)
        weights[learned, k_of[learned]] = w_of[learned]
        out += run_scores(block, items, self._parent_at(plan, items), weights, self.alpha)
        learn_run(block, items, k_of, w_of)
        labels = list(store.classes)
        ys = [labels[k] if k >= 0 else None for k in ks]
        store.learned_known(items[learned], k_of[learned], ys, ws)

    def _prefix_terms(
        self, rows: list[list[int]], ks: list[int], ws: Sequence[float]
    ) -> tuple[Floats, Floats]:
        """Before each event of the batch: the log class prior ``log((N_y + α) / (N + Kα))``,
        shape ``(B, K)``, and ``log(N(y, j) + α S_j)`` of every column, ``(B, F, K)``.

        The counts before event ``t`` are sums in event order of the counts
        before the batch and the weights of the learned events before ``t``.
        """
        store = self._store
        block = store.dense
        assert block is not None
        a = self.alpha
        n = len(rows)
        n_classes = block.n_classes
        n_features = len(block.feat)
        learned = [t for t, k in enumerate(ks) if k >= 0]
        w_of = np.array([ws[t] for t in learned], dtype=np.float64)
        k_of = np.array([ks[t] for t in learned], dtype=np.intp)
        at = np.array(learned, dtype=np.intp) + 1
        by_class = np.zeros((n + 1, n_classes))
        by_class[0] = list(store.class_weight.values())
        by_class[at, k_of] = w_of
        np.cumsum(by_class, axis=0, out=by_class)
        total = np.zeros(n + 1)
        total[0] = store.categorical.total_weight
        total[at] = w_of
        np.cumsum(total, out=total)
        prior: Floats = np.log(by_class[:n] + a) - np.log(total[:n] + n_classes * a)[:, None]
        by_column = np.zeros((n + 1, n_features, n_classes))
        by_column[0] = block.fy[:n_features, :n_classes]
        lengths = [len(rows[t]) for t in learned]
        cols = block.col_of[np.array([i for t in learned for i in rows[t]], dtype=np.intp)]
        by_column[np.repeat(at, lengths), cols, np.repeat(k_of, lengths)] = np.repeat(w_of, lengths)
        np.cumsum(by_column, axis=0, out=by_column)
        by_column = by_column[:n]
        by_column += (a * block.s[:n_features])[:, None]
        denominators: Floats = np.log(by_column)
        return prior, denominators

    # ------------------------------------------------------------------ merging
    def merge(self, other: Learner) -> Learner:
        """Add ``other``'s counts, then rebuild the structure from the merged counts.

        Family counts (``|pa(j)| ≥ 2``) are added only where both models have
        the same parents for ``j``; the rebuild may then reset some of them.
        Discretiser rules: see :mod:`stream_nb.seminaive.discretise`.
        """
        both_trained = self.n_learned > 0 and other.n_learned > 0
        super().merge(other)
        if both_trained:
            self.rebuild()
            self._schedule()
        return self

    def _merge_extra(
        self,
        other: _SemiNaive,
        factor: float,
        vmap: Mapping[Hashable, Mapping[Hashable, Hashable]],
    ) -> None:
        assert isinstance(other, _Dependence)  # (merge checks that the classes are equal)
        if self.n_learned == 0:  # untrained: adopt the other's structure and schedule
            self._parents = dict(other._parents)
            self._families = {j: {} for j in other._families}
            self._next_rebuild = other._next_rebuild
        self._weight_seen += other._weight_seen
        cmap = self._store.class_map(other._store)
        n_classes = len(self._store.classes)
        for j, fam in other._families.items():
            pa = self._parents.get(j)
            if pa != other._parents.get(j) or j not in self._families or pa is None:
                continue
            dst = self._families[j]
            maps = [vmap[p] for p in pa]
            for key, node in fam.items():
                new_key = tuple([m[v] for m, v in zip(maps, key, strict=True)])
                add_node(dst, new_key, node, cmap, vmap[j], factor, n_classes)

    def _extra_add_class(self) -> None:
        _nodes.add_class(self._families)

    def _rescale_extra(self, factor: float) -> None:
        _nodes.rescale(self._families, factor)

    # ------------------------------------------------------------------ state
    _FIELDS = (*_SemiNaive._FIELDS, "parents", "families", "next_rebuild", "weight_seen")

    def _extra_to_state(self) -> dict[str, Any]:
        return {
            "parents": [
                [encode_key(j), [encode_key(p) for p in pa]] for j, pa in self._parents.items()
            ],
            "families": [
                [
                    encode_key(j),
                    [[[encode_key(v) for v in k], c, pairs(v)] for k, (c, v) in fam.items()],
                ]
                for j, fam in self._families.items()
            ],
            "next_rebuild": self._next_rebuild,
            "weight_seen": self._weight_seen,
        }

    def _extra_from_state(self, stats: Mapping[str, Any]) -> None:
        store = self._store
        parents, families, next_rebuild, weight_seen = read_dependence_state(
            stats, store.categorical.counts, self.max_values_per_feature, len(store.classes)
        )
        self._parents = parents
        self._families = families
        self._next_rebuild = next_rebuild
        self._weight_seen = weight_seen

    def _extra_size(self) -> int:
        return sum(map(len, self._parents.values())) + _nodes.size(self._families)


def _uniform(block: DenseBlock, rows: Rows) -> Indices | None:
    """The batch's items as a ``(B, d)`` array when every event fills the same columns in
    the same order, else ``None``."""
    items = item_array(rows)
    if items is None:
        return None
    columns = block.col_of[items]
    if not (columns == columns[0]).all():
        return None
    return items
