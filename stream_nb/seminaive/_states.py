"""Reading the semi-naive learners' states: a
:class:`~stream_nb.seminaive._store.PairStore`'s counts, every one checked against the
categorical statistics it extends, and TAN's and KDB's structure and family counts
(O(size)). Each returns what it read; the learner assigns it."""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any, NamedTuple

from stream_nb._exceptions import ModelStateError
from stream_nb._state import (
    check_at_most,
    check_consistent,
    read_count,
    read_key,
    read_keys,
    read_list,
    read_mapping,
    read_pairs,
)
from stream_nb._stores import tree_from_pairs
from stream_nb.naive_bayes._categorical_stats import CategoricalStatistics
from stream_nb.seminaive._nodes import Node, load_node

__all__ = ["DependenceState", "StoreState", "read_dependence_state", "read_store_state"]

Item = tuple[Hashable, Hashable]


class StoreState(NamedTuple):
    """A pair store's counts besides the categorical statistics, as read from a state."""

    feature_weight: dict[Hashable, float]
    value_weight: dict[Hashable, dict[Hashable, float]]
    pair_features: dict[Hashable, None]
    pairs: dict[Item, dict[Hashable, Node]]


def read_store_state(
    state: Any,
    where: str,
    categorical: CategoricalStatistics,
    max_pair_features: int | None,
) -> StoreState:
    """Load ``state["nb"]`` into ``categorical`` and read the rest of a pair store's state
    (:meth:`~stream_nb.seminaive._store.PairStore.load_state` documents the checks);
    :class:`~stream_nb._exceptions.ModelStateError` names the first entry that fails one."""
    state = read_mapping(
        state, where, ("nb", "pair_features", "feature_weight", "value_weight", "pairs")
    )
    categorical.load_state(state["nb"], f"{where}.nb")
    cap = categorical.max_values
    present = categorical.present
    counts = categorical.counts
    feature_weight = read_pairs(state["feature_weight"], f"{where}.feature_weight", read_count)

    def value(v: Any, w: str) -> Any:
        return read_key(v, w, allow_none=cap is not None)

    value_weight = tree_from_pairs(
        state["value_weight"], 2, f"{where}.value_weight", keys=(read_key, value)
    )
    if feature_weight.keys() != present.keys() or value_weight.keys() != present.keys():
        raise ModelStateError(
            f"{where}: feature_weight and value_weight must name the learned features"
        )
    for f, by_class in present.items():
        check_consistent(
            feature_weight[f], by_class.values(), f"{where}.feature_weight[{f!r}]",
            "its class weights",
        )  # fmt: skip
        vw = value_weight[f]
        if vw.keys() != counts[f].keys():
            raise ModelStateError(
                f"{where}.value_weight[{f!r}]: must name the feature's learned values"
            )
        for v, by_class_v in counts[f].items():
            check_consistent(
                vw[v], by_class_v.values(), f"{where}.value_weight[{f!r}][{v!r}]",
                "its class weights",
            )  # fmt: skip
    pair_features = dict.fromkeys(read_keys(state["pair_features"], f"{where}.pair_features"))
    if not pair_features.keys() <= present.keys():
        raise ModelStateError(f"{where}.pair_features: must be learned features")
    if max_pair_features is not None and len(pair_features) > max_pair_features:
        raise ModelStateError(
            f"{where}.pair_features: {len(pair_features)} features, more than "
            f"max_pair_features={max_pair_features}"
        )
    labels = list(categorical.class_weight)
    n_classes = len(labels)
    store: dict[Item, dict[Hashable, Node]] = {}
    for e, entry in enumerate(read_list(state["pairs"], f"{where}.pairs")):
        at = f"{where}.pairs[{e}]"
        i, vi, sub = read_list(entry, at, 3)
        i = read_key(i, f"{at}[0]")
        vi = value(vi, f"{at}[1]")
        if i not in pair_features or vi not in counts[i]:
            raise ModelStateError(f"{at}: ({i!r}, {vi!r}) is not a learned value of a pair feature")
        if (i, vi) in store:
            raise ModelStateError(f"{at}: ({i!r}, {vi!r}) listed twice")
        parent = counts[i][vi]
        node_map: dict[Hashable, Node] = {}
        for n, node in enumerate(read_list(sub, f"{at}[2]")):
            nat = f"{at}[2][{n}]"
            j, ctx, values = read_list(node, nat, 3)
            j = read_key(j, f"{nat}[0]")
            if j == i or j not in pair_features or j in node_map:
                raise ModelStateError(f"{nat}: feature {j!r} is not a new pair feature here")
            ctx, rows = load_node(ctx, values, n_classes, nat, value)
            if not rows.keys() <= counts[j].keys():
                raise ModelStateError(f"{nat}[2]: values that feature {j!r} never learned")
            for k, y in enumerate(labels):
                check_consistent(
                    ctx[k], [row[k] for row in rows.values()], f"{nat}[1][{k}]",
                    "the pair counts of its values",
                )  # fmt: skip
                check_at_most(ctx[k], parent.get(y, 0.0), f"{nat}[1][{k}]", "N(y, x_i)")
            node_map[j] = [ctx, rows]
        store[(i, vi)] = node_map
    return StoreState(feature_weight, value_weight, pair_features, store)


class DependenceState(NamedTuple):
    """TAN's and KDB's structure and family counts, as read from a state."""

    parents: dict[Hashable, tuple[Hashable, ...]]
    families: dict[Hashable, dict[tuple[Hashable, ...], Node]]
    next_rebuild: float
    weight_seen: float


def read_dependence_state(
    stats: Mapping[str, Any],
    counts: Mapping[Hashable, Any],
    max_values: int | None,
    n_classes: int,
) -> DependenceState:
    """Read TAN's and KDB's ``parents``, ``families``, ``next_rebuild`` and ``weight_seen``
    (``counts``: the learned features' values; ``max_values``: the learner's
    ``max_values_per_feature``): parents are learned features other than their child,
    families exist exactly for the features of two or more parents, one value per
    parent in each key."""

    def parent_list(value: Any, where: str) -> tuple[Hashable, ...]:
        pa = tuple(read_keys(value, where))
        if any(p not in counts for p in pa):
            raise ModelStateError(f"{where}: parents must be learned features")
        return pa

    parents = read_pairs(stats["parents"], "stats.parents", parent_list)
    for j, pa in parents.items():
        if j not in counts or j in pa:
            raise ModelStateError(f"stats.parents[{j!r}]: not a learned feature, or its own parent")

    def value(v: Any, where: str) -> Hashable:
        return read_key(v, where, allow_none=max_values is not None)

    def family(value_: Any, where: str) -> dict[tuple[Hashable, ...], Node]:
        out: dict[tuple[Hashable, ...], Node] = {}
        for n, node in enumerate(read_list(value_, where)):
            key, c, rows = read_list(node, f"{where}[{n}]", 3)
            key = tuple(
                value(v, f"{where}[{n}][0][{i}]")
                for i, v in enumerate(read_list(key, f"{where}[{n}][0]"))
            )
            if key in out:
                raise ModelStateError(f"{where}[{n}][0]: parent values {key!r} listed twice")
            out[key] = list(load_node(c, rows, n_classes, f"{where}[{n}]", value))
        return out

    families = read_pairs(stats["families"], "stats.families", family)
    if set(families) != {j for j, pa in parents.items() if len(pa) >= 2}:
        raise ModelStateError(
            "stats.families: families must exist exactly for features with two or more parents"
        )
    for j, fam in families.items():
        if any(len(key) != len(parents[j]) for key in fam):
            raise ModelStateError(f"stats.families[{j!r}]: one value per parent expected")
    return DependenceState(
        parents,
        families,
        read_count(stats["next_rebuild"], "stats.next_rebuild"),
        read_count(stats["weight_seen"], "stats.weight_seen"),
    )
