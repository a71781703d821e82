"""Reading the Gaussian statistics of a state (GaussianNB and NaiveBayes).

:func:`read_gaussian_stats` checks them with :func:`check_gaussian_stats`, which
raises :class:`~stream_nb.ModelStateError` naming the field for anything the
formulas could not use, and returns them as float tables for
:meth:`~stream_nb.naive_bayes._gaussian_stats.GaussianStatistics.from_state`.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Hashable
from typing import Any, NamedTuple

from stream_nb._exceptions import ModelStateError
from stream_nb._state import (
    check_at_most,
    check_consistent,
    read_count,
    read_finite,
    read_keys,
    read_label,
    read_list,
    read_mapping,
    read_pairs,
)

__all__ = ["GAUSSIAN_FIELDS", "GaussianTables", "check_gaussian_stats", "read_gaussian_stats"]

GAUSSIAN_FIELDS = ("classes", "total_weight", "features", "n", "mean", "m2", "global")

#: Largest |mean| read: for |x| and |μ| up to it, (x − μ)² stays a finite double,
#: so the model can still learn and score ordinary values.
MAX_MEAN = math.sqrt(sys.float_info.max) / 2.0


def _mean(value: Any, where: str) -> float:
    number = read_finite(value, where)
    if abs(number) > MAX_MEAN:
        raise ModelStateError(
            f"{where}: |mean| must be at most {MAX_MEAN:.3g} (beyond it squared deviations "
            f"overflow), got {number!r}"
        )
    return number


def _matrix(value: Any, where: str, rows: int, cols: int, read: Any) -> list[list[float]]:
    table = read_list(value, where, rows)
    return [
        [read(v, f"{where}[{k}][{j}]") for j, v in enumerate(read_list(row, f"{where}[{k}]", cols))]
        for k, row in enumerate(table)
    ]


def check_gaussian_stats(
    stats: Any, where: str, *, positive_classes: bool, max_features: int | None
) -> tuple[dict[Hashable, float], list[Hashable]]:
    """Check Gaussian statistics; return the class weights and the feature names.

    Checks: labels and feature names distinct and saveable; class weights
    finite and ≥ 0 (> 0 with ``positive_classes``: the prior ``log(N_y / N)``
    needs them); ``N = Σ_y N_y``; every table of the right shape; weights
    ``n ≥ 0`` with ``n[k][j] ≤ N_k``; ``M2 ≥ 0``; means finite and within
    :data:`MAX_MEAN`; the global
    weight of each feature the sum of its class weights; at most
    ``max_features`` features. O(classes × features).

    Examples
    --------
    >>> from stream_nb import GaussianNB
    >>> model = GaussianNB()
    >>> model.learn_one({"a": 1.0}, "x")
    >>> stats = model.to_state()["stats"]
    >>> check_gaussian_stats(stats, "stats", positive_classes=True, max_features=None)
    ({'x': 1.0}, ['a'])
    >>> stats["m2"] = [[-1.0]]
    >>> check_gaussian_stats(stats, "stats", positive_classes=True, max_features=None)
    Traceback (most recent call last):
    ...
    stream_nb._exceptions.ModelStateError: stats.m2[0][0]: must be finite and ≥ 0, got -1.0
    """
    stats = read_mapping(stats, where, GAUSSIAN_FIELDS)
    classes = read_pairs(
        stats["classes"],
        f"{where}.classes",
        lambda v, w: read_count(v, w, positive=positive_classes),
        key=read_label,
    )
    total = read_count(stats["total_weight"], f"{where}.total_weight")
    check_consistent(total, classes.values(), f"{where}.total_weight", "the class weights")
    features = read_keys(stats["features"], f"{where}.features")
    if max_features is not None and len(features) > max_features:
        raise ModelStateError(
            f"{where}.features: {len(features)} features, more than max_features={max_features}"
        )
    kk, ff = len(classes), len(features)
    n = _matrix(stats["n"], f"{where}.n", kk, ff, read_count)
    _matrix(stats["mean"], f"{where}.mean", kk, ff, _mean)
    _matrix(stats["m2"], f"{where}.m2", kk, ff, read_count)
    glob = read_list(stats["global"], f"{where}.global", 3)
    gn = _matrix([glob[0]], f"{where}.global", 1, ff, read_count)[0]  # weights
    _matrix([glob[1]], f"{where}.global[1:]", 1, ff, _mean)  # means
    _matrix([glob[2]], f"{where}.global[2:]", 1, ff, read_count)  # M2
    for k, (label, weight) in enumerate(classes.items()):
        for j in range(ff):
            check_at_most(n[k][j], weight, f"{where}.n[{k}][{j}]", f"the weight of class {label!r}")
    for j in range(ff):
        check_consistent(
            gn[j], [row[j] for row in n], f"{where}.global[0][{j}]", "its class weights"
        )
    return classes, features


class GaussianTables(NamedTuple):
    """Checked Gaussian statistics as floats, in the layout of
    :class:`~stream_nb.naive_bayes._gaussian_stats.GaussianStatistics`."""

    classes: dict[Hashable, float]
    features: list[Hashable]
    total_weight: float
    n: list[list[float]]
    mean: list[list[float]]
    m2: list[list[float]]
    all_n: list[float]
    all_mean: list[float]
    all_m2: list[float]


def read_gaussian_stats(stats: Any, where: str, *, max_features: int | None) -> GaussianTables:
    """Check Gaussian statistics (:func:`check_gaussian_stats`) and read them as floats.

    A class weight may have decayed to 0 (that class then scores nothing).

    Examples
    --------
    >>> from stream_nb import GaussianNB
    >>> model = GaussianNB()
    >>> model.learn_one({"a": 1.0}, "x")
    >>> read_gaussian_stats(model.to_state()["stats"], "stats", max_features=None).mean
    [[1.0]]
    """
    classes, features = check_gaussian_stats(
        stats, where, positive_classes=False, max_features=max_features
    )
    kk, ff = len(classes), len(features)
    all_n, all_mean, all_m2 = _floats(stats["global"], 3, ff)
    return GaussianTables(
        classes,
        features,
        _finite(stats["total_weight"]),
        _floats(stats["n"], kk, ff),
        _floats(stats["mean"], kk, ff),
        _floats(stats["m2"], kk, ff),
        all_n,
        all_mean,
        all_m2,
    )


def _finite(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(f"statistic must be a finite number, got {value!r}")
    return float(value)


def _floats(rows: Any, n_rows: int, n_cols: int) -> list[list[float]]:
    out = [[_finite(v) for v in row] for row in rows]
    if len(out) != n_rows or any(len(row) != n_cols for row in out):
        raise ValueError(f"expected a {n_rows}×{n_cols} table of statistics")
    return out
