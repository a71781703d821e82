"""The categorical statistics component: category counts and their Naive Bayes terms.

One :class:`CategoricalStatistics` holds the counts of
:class:`~stream_nb.CategoricalNB`, the categorical part of
:class:`~stream_nb.NaiveBayes` and the single counts of the semi-naive pair
store (:mod:`stream_nb.seminaive`). It learns one event at a time, scores,
merges, rescales, saves and reads its state, and offers what the exact batch
kernels need (:mod:`stream_nb.naive_bayes._categorical_batch`): value codes
per feature, the "other" bucket applied to a column, and learning a batch's
totals.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Container, Hashable, Iterable, Mapping, Sequence
from typing import Any

from stream_nb._exceptions import InvalidEventError, ModelStateError
from stream_nb._mle import resolve_zero_terms_one, split_terms_one
from stream_nb._params import log_prior
from stream_nb._state import (
    check_at_most,
    check_categories,
    check_consistent,
    field,
    pairs,
    read_count,
    read_key,
    read_label,
    read_mapping,
    read_pairs,
)
from stream_nb._stores import (
    FEATURE_CLASS,
    FEATURE_VALUE_CLASS,
    OTHER,
    add_scaled,
    capped,
    count_leaves,
    n_real,
    rescale,
    tree_from_pairs,
    tree_to_pairs,
    value_map,
)

__all__ = ["CategoricalStatistics"]

_log = math.log
_EMPTY: dict[Hashable, float] = {}

#: The fields of a state of :class:`CategoricalStatistics` (``classes=False``: the last two).
_FIELDS = ("class_weight", "total_weight", "present", "counts")


class CategoricalStatistics:
    """Category counts and their Naive Bayes scores, in raw units.

    ``N_y`` (``class_weight``), ``N = Σ_y N_y`` (``total_weight``),
    ``N_{y,i}`` (``present``: feature -> class -> weight of the class-``y``
    events in which feature ``i`` was present) and ``N_{y,i,v}``
    (``counts``: feature -> value -> class -> weight), every dict in
    learning order. Their owner reads these attributes freely, changes them
    only through the methods, keeps the forgetting scale and passes weights
    and α in raw units (see :class:`~stream_nb.base.Learner`). An owner that
    counts its events elsewhere (NaiveBayes, in its Gaussian part) learns with
    ``event=False``, leaves ``class_weight`` empty and saves only ``present``
    and ``counts`` (``to_state(classes=False)``).

    Scores: ``log P(y) = log((N_y + α) / (N + Kα))`` (``1/K`` without
    ``fit_prior``, ``class_prior`` when given, see
    :func:`stream_nb._params.log_prior`) and
    ``log P(x_i = v | y) = log((N_{y,i,v} + α) / (N_{y,i} + S_i α))`` with
    ``S_i`` the number of values of feature ``i``. A feature holding
    ``max_values`` values reads a new value as the "other" bucket
    :data:`~stream_nb._stores.OTHER`, when learning and when scoring.

    Parameters
    ----------
    max_values
        Distinct values kept per feature before the "other" bucket (``None``: unbounded).
    admit
        Called when a feature is first learned: whether one more feature may
        be (the owner's ``max_features``); ``None``: every feature is. A
        feature not admitted is not learned.
    fit_prior, class_prior
        As in :class:`~stream_nb.CategoricalNB`.
    missing
        The value that marks a missing feature in the items learned: ``None``,
        as in events. The semi-naive pair store learns encoded items, in which
        ``None`` is the "other" bucket, and passes a marker no value equals.

    Attributes
    ----------
    codes
        The batch kernels' value -> code map per feature, and the values by
        code (not a statistic: never saved, and a stale code only names a value).

    Examples
    --------
    >>> stats = CategoricalStatistics(max_values=1)
    >>> stats.learn([("sky", "sun"), ("wind", None)], "play", 1.0)
    >>> stats.learn([("sky", "rain")], "stay", 2.0)
    >>> stats.class_weight, stats.total_weight, stats.counts
    ({'play': 1.0, 'stay': 2.0}, 3.0, {'sky': {'sun': {'play': 1.0}, None: {'stay': 2.0}}})
    >>> {y: round(s, 4) for y, s in stats.joint_log_likelihood({"sky": "sun"}, 1.0).items()}
    {'play': -1.3218, 'stay': -1.8971}

    The terms alone, added to scores computed elsewhere (as NaiveBayes adds them
    to its Gaussian scores):

    >>> jll = {"play": 0.0, "stay": 0.0}
    >>> stats.add_terms(jll, {"sky": "sun", "wind": "calm"}, ["sky"], 1.0)
    >>> {y: round(s, 4) for y, s in jll.items()}
    {'play': -0.4055, 'stay': -1.3863}
    """

    # Slots keep attribute access on the hot path a fixed offset.
    __slots__ = (
        "admit",
        "class_prior",
        "class_weight",
        "codes",
        "counts",
        "fit_prior",
        "max_values",
        "missing",
        "present",
        "total_weight",
    )

    def __init__(
        self,
        max_values: int | None = None,
        *,
        admit: Callable[[], bool] | None = None,
        fit_prior: bool = True,
        class_prior: Mapping[Hashable, float] | None = None,
        missing: object = None,
    ) -> None:
        self.max_values = max_values
        self.admit = admit
        self.missing = missing
        self.fit_prior = fit_prior
        self.class_prior = class_prior
        self.class_weight: dict[Hashable, float] = {}
        self.total_weight = 0.0
        self.present: dict[Hashable, dict[Hashable, float]] = {}
        self.counts: dict[Hashable, dict[Hashable, dict[Hashable, float]]] = {}
        self.codes: dict[Hashable, tuple[dict[Any, int], list[Any]]] = {}

    # ------------------------------------------------------------------ learning
    def learn(
        self, items: Iterable[tuple[Hashable, Any]], y: Hashable, w: float, event: bool = True
    ) -> None:
        """Count an event of class ``y`` and weight ``w`` with its ``(feature, value)`` items.

        ``N_y`` and ``N`` grow by ``w`` (with ``event=False`` they do not: the
        items complete an event counted before, as in the semi-naive learners'
        warm-up replay, or the owner counts events itself), then ``N_{y,i}``
        and ``N_{y,i,v}`` of each item. Items whose value is ``missing`` are
        left out; a value new to a feature holding ``max_values`` values goes
        to the "other" bucket; a feature first met that ``admit`` refuses is
        not learned. Names and values are not checked here: the learner
        checks them first.
        """
        if event:
            class_weight = self.class_weight
            class_weight[y] = class_weight.get(y, 0.0) + w
            self.total_weight += w
        present = self.present
        counts = self.counts
        missing = self.missing
        for feature, value in items:
            if value is missing:
                continue
            by_class = present.get(feature)
            if by_class is None:
                admit = self.admit
                if admit is not None and not admit():
                    continue  # max_features reached: not learned
                by_class = present[feature] = {}
                counts[feature] = {}
            by_class[y] = by_class.get(y, 0.0) + w
            values = counts[feature]
            value_counts = values.get(value)
            if value_counts is None:
                cap = self.max_values
                if cap is not None and n_real(values) >= cap:
                    value_counts = values.get(OTHER)
                    value = OTHER
                if value_counts is None:
                    values[value] = {y: w}
                    continue
            value_counts[y] = value_counts.get(y, 0.0) + w

    def capped(self, feature: Hashable, value: Hashable) -> Hashable:
        """``value``, or the "other" bucket if it is new to a feature holding ``max_values``
        values (:func:`stream_nb._stores.capped`)."""
        return capped(self.counts.get(feature), value, self.max_values)

    # ------------------------------------------------------------------ scoring
    def joint_log_likelihood(self, x: Mapping[Any, Any], alpha: float) -> dict[Hashable, float]:
        """``log P(y) + Σ_i log P(x_i | y)`` of every scored class; ``{}`` before learning.

        ``alpha`` is α in raw units. Features never learned, and ``None``
        values, contribute nothing; a value never seen has count 0.
        """
        if not self.class_weight:
            return {}
        if alpha == 0:
            return self._mle_joint_log_likelihood(x)
        jll = log_prior(
            self.class_weight, self.total_weight, alpha, self.fit_prior, self.class_prior
        )
        # The terms of add_terms over every feature of x, in one loop over its items: no
        # method call and no lookup of x per feature on CategoricalNB's prediction path.
        present = self.present
        counts = self.counts
        cap = self.max_values
        log = _log
        for feature, value in x.items():
            values = counts.get(feature)
            if values is None or value is None:
                continue
            by_class = present[feature]
            smoothing = len(values) * alpha
            value_counts = values.get(value, _EMPTY)
            if value_counts is _EMPTY and cap is not None and n_real(values) >= cap:
                value_counts = values.get(OTHER, _EMPTY)
            for y in jll:
                jll[y] += log(
                    (value_counts.get(y, 0.0) + alpha) / (by_class.get(y, 0.0) + smoothing)
                )
        return jll

    def weighted_joint_log_likelihood(
        self, x: Mapping[Any, Any], alpha: float, weights: Mapping[Hashable, float]
    ) -> dict[Hashable, float]:
        """``log P(y) + Σ_i w_i log P(x_i | y)`` with ``w_i = weights.get(i, 1)``; ``{}``
        before learning (α in raw units).

        A feature of weight 0 adds nothing, not even a zero-probability term with
        ``alpha = 0`` (whose other terms are resolved by :mod:`stream_nb._mle`'s rule).

        Examples
        --------
        >>> stats = CategoricalStatistics()
        >>> stats.learn([("sky", "sun"), ("id", 1)], "play", 1.0)
        >>> stats.learn([("sky", "rain"), ("id", 2)], "stay", 1.0)
        >>> stats.weighted_joint_log_likelihood({"sky": "sun", "id": 2}, 0.0, {"id": 0})
        {'play': -0.6931471805599453, 'stay': -inf}
        """
        if not self.class_weight:
            return {}
        finite = log_prior(
            self.class_weight, self.total_weight, alpha, self.fit_prior, self.class_prior
        )
        zeros = None
        if alpha == 0:
            finite, zeros = split_terms_one(finite)
        present = self.present
        counts = self.counts
        cap = self.max_values
        log = _log
        for feature, value in x.items():
            values = counts.get(feature)
            if values is None or value is None:
                continue
            weight = weights.get(feature, 1.0)
            if weight == 0:
                continue
            by_class = present[feature]
            smoothing = len(values) * alpha
            value_counts = values.get(value, _EMPTY)
            if value_counts is _EMPTY and cap is not None and n_real(values) >= cap:
                value_counts = values.get(OTHER, _EMPTY)
            for y in finite:
                n = value_counts.get(y, 0.0)
                if zeros is None:
                    finite[y] += weight * log((n + alpha) / (by_class.get(y, 0.0) + smoothing))
                elif n > 0:
                    finite[y] += weight * log(n / by_class[y])
                else:
                    zeros[y] += 1
        return finite if zeros is None else resolve_zero_terms_one(finite, zeros)

    def _mle_joint_log_likelihood(self, x: Mapping[Any, Any]) -> dict[Hashable, float]:
        """:meth:`joint_log_likelihood` with ``alpha = 0``: maximum-likelihood terms, the
        zero-probability ones resolved by :mod:`stream_nb._mle`'s rule."""
        finite, zeros = split_terms_one(
            log_prior(self.class_weight, self.total_weight, 0.0, self.fit_prior, self.class_prior)
        )
        self.add_terms_mle(finite, zeros, x, x)
        return resolve_zero_terms_one(finite, zeros)

    def add_terms_mle(
        self,
        finite: dict[Hashable, float],
        zeros: dict[Hashable, int],
        x: Mapping[Any, Any],
        features: Iterable[Any],
        weights: Mapping[Hashable, float] | None = None,
    ) -> None:
        """:meth:`add_terms` with ``alpha = 0``, for :mod:`stream_nb._mle`'s rule: a term
        ``log(N_{y,i,v} / N_{y,i})`` with ``N_{y,i,v} > 0`` is added to ``finite[y]``, a
        zero count (probability 0) adds one to ``zeros[y]`` instead, for every class of
        ``finite``, in place. ``weights``: as :meth:`add_terms` (a feature of weight 0
        adds no zero either).

        Examples
        --------
        >>> stats = CategoricalStatistics()
        >>> stats.learn([("sky", "sun")], "play", 1.0)
        >>> stats.learn([("sky", "rain")], "stay", 1.0)
        >>> finite, zeros = {"play": 0.0, "stay": 0.0}, {"play": 0, "stay": 0}
        >>> stats.add_terms_mle(finite, zeros, {"sky": "sun"}, ["sky"])
        >>> finite, zeros
        ({'play': 0.0, 'stay': 0.0}, {'play': 0, 'stay': 1})
        """
        present = self.present
        counts = self.counts
        cap = self.max_values
        log = _log
        for feature in features:
            value = x[feature]
            values = counts.get(feature)
            if values is None or value is None:
                continue
            weight = 1.0 if weights is None else weights.get(feature, 1.0)
            if weight == 0.0:
                continue
            by_class = present[feature]
            value_counts = values.get(value, _EMPTY)
            if value_counts is _EMPTY and cap is not None and n_real(values) >= cap:
                value_counts = values.get(OTHER, _EMPTY)
            for y in finite:
                n = value_counts.get(y, 0.0)
                if n <= 0:
                    zeros[y] += 1
                elif weight == 1.0:
                    finite[y] += log(n / by_class[y])
                else:
                    finite[y] += weight * log(n / by_class[y])

    def add_terms(
        self,
        jll: dict[Hashable, float],
        x: Mapping[Any, Any],
        features: Iterable[Any],
        alpha: float,
        weights: Mapping[Hashable, float] | None = None,
    ) -> None:
        """Add ``log P(x_i = v | y)`` of each of ``features`` (keys of ``x``) to the score
        of every class of ``jll``, in place (α in raw units); with ``weights`` (fixed
        ``feature_weights``), ``weights.get(i, 1) × log P(x_i = v | y)``, and a feature of
        weight 0 adds nothing.

        Features never learned, and ``None`` values, add nothing; a value new
        to a full feature reads as the "other" bucket. An unhashable value
        raises ``TypeError`` (see :meth:`check_hashable`).
        """
        present = self.present
        counts = self.counts
        cap = self.max_values
        log = _log
        for feature in features:
            value = x[feature]
            values = counts.get(feature)
            if values is None or value is None:
                continue
            weight = 1.0 if weights is None else weights.get(feature, 1.0)
            if weight == 0.0:
                continue
            by_class = present[feature]
            smoothing = len(values) * alpha
            value_counts = values.get(value, _EMPTY)
            if value_counts is _EMPTY and cap is not None and n_real(values) >= cap:
                value_counts = values.get(OTHER, _EMPTY)
            for y in jll:
                term = log((value_counts.get(y, 0.0) + alpha) / (by_class.get(y, 0.0) + smoothing))
                jll[y] += term if weight == 1.0 else weight * term

    def check_hashable(self, x: Mapping[Any, Any], features: Iterable[Hashable]) -> None:
        """Raise :class:`~stream_nb.InvalidEventError` (reason ``"invalid_features"``)
        naming the first of ``features`` learned here whose value in ``x`` is unhashable
        (the one :meth:`add_terms` met); nothing when there is none."""
        counts = self.counts
        for feature in features:
            value = x[feature]
            if feature not in counts or value is None:
                continue
            try:
                hash(value)
            except TypeError:
                raise InvalidEventError(
                    f"categorical feature {feature!r} has unhashable value {value!r} "
                    f"({type(value).__name__}); send a scalar (str, int, bool…)",
                    reason="invalid_features",
                ) from None

    def log_likelihoods(
        self, feature: Hashable, value: Hashable, classes: Iterable[Hashable], alpha: float
    ) -> list[float]:
        """``log P(x_i = v | y)`` for each of ``classes``, of a learned feature.

        ``value`` is read as it is (already capped, see :meth:`capped`); α in raw units.
        """
        values = self.counts[feature]
        by_class = self.present[feature].get
        by_value = values.get(value, _EMPTY).get
        smoothing = alpha * len(values)
        log = _log
        return [log((by_value(y, 0.0) + alpha) / (by_class(y, 0.0) + smoothing)) for y in classes]

    # ------------------------------------------------------------------ merging
    def admitted(self, other: CategoricalStatistics, room: int | None) -> set[Hashable] | None:
        """``other``'s features that a merge learns: those known here, and new ones in
        ``other``'s order while ``room`` lasts (``None``: all of them)."""
        if room is None:
            return None
        known = self.counts
        new = [f for f in other.counts if f not in known]
        return {f for f in other.counts if f in known}.union(new[:room])

    def value_map(
        self, other: CategoricalStatistics, keep: Container[Hashable] | None = None
    ) -> dict[Hashable, dict[Hashable, Hashable]]:
        """Where each value of ``other`` lands here: itself, or the "other" bucket past
        ``max_values`` (:func:`stream_nb._stores.value_map`), for its features in
        ``keep`` (all by default)."""
        theirs: Mapping[Hashable, Mapping[Hashable, Any]] = other.counts
        if keep is not None:
            theirs = {f: v for f, v in theirs.items() if f in keep}
        return value_map(self.counts, theirs, self.max_values)

    def merge(
        self,
        other: CategoricalStatistics,
        factor: float,
        vmap: Mapping[Hashable, Mapping[Hashable, Hashable]] | None,
    ) -> None:
        """Add ``factor ×`` ``other``'s counts, values relabelled through ``vmap``
        (:meth:`value_map`); ``other``'s features missing from ``vmap`` are left out.
        ``vmap=None`` takes every feature and value as it is (no bound here)."""
        add_scaled(self.class_weight, other.class_weight, factor)
        self.total_weight += other.total_weight * factor
        if vmap is None:
            add_scaled(self.present, other.present, factor)
            add_scaled(self.counts, other.counts, factor)
            return
        present = self.present
        counts = self.counts
        for f, values in other.counts.items():
            mapping = vmap.get(f)
            if mapping is None:
                continue
            by_class = present.get(f)
            if by_class is None:
                by_class = present[f] = {}
                counts[f] = {}
            add_scaled(by_class, other.present[f], factor)
            dst = counts[f]
            for v, row in values.items():
                target = mapping[v]
                branch = dst.get(target)
                if branch is None:
                    branch = dst[target] = {}
                add_scaled(branch, row, factor)

    def rescale(self, factor: float) -> None:
        """Multiply every weight by ``factor``."""
        rescale(self.class_weight, factor)
        self.total_weight *= factor
        rescale(self.present, factor)
        rescale(self.counts, factor)

    # ------------------------------------------------------------------ state
    def to_state(self, *, classes: bool = True) -> dict[str, Any]:
        """JSON-able statistics: ``class_weight``, ``total_weight``, ``present``, ``counts``
        (``classes=False``: the last two, for an owner that counts events itself)."""
        state: dict[str, Any] = {}
        if classes:
            state["class_weight"] = pairs(self.class_weight)
            state["total_weight"] = self.total_weight
        state["present"] = tree_to_pairs(self.present)
        state["counts"] = tree_to_pairs(self.counts)
        return state

    def load_state(
        self,
        stats: Any,
        where: str,
        *,
        max_features: int | None = None,
        class_weight: dict[Hashable, float] | None = None,
    ) -> None:
        """Replace the statistics by :meth:`to_state` output, validated (errors name the
        field under ``where``).

        With ``class_weight`` (the owner's class weights, for an owner that counts
        events itself) only ``present`` and ``counts`` are read from ``stats``,
        whose fields the owner has checked, and the class weights stay empty.
        Checks, each naming the field: weights finite and ≥ 0,
        ``N = Σ_y N_y``, ``N_{y,i} = Σ_v N_{y,i,v} ≤ N_y``, classes known,
        ``present`` and ``counts`` naming the same features (at most
        ``max_features``), each with at least one value, the "other" bucket
        (``null``) only with a cap, and the caps respected. O(size of the
        statistics).
        """
        total = 0.0
        classes = class_weight
        if classes is None:
            stats = read_mapping(stats, where, _FIELDS)
            classes = read_pairs(
                field(stats, "class_weight", where),
                f"{where}.class_weight",
                read_count,
                key=read_label,
            )
            total = read_count(field(stats, "total_weight", where), f"{where}.total_weight")
            check_consistent(total, classes.values(), f"{where}.total_weight", "the class weights")
        present, counts = _read_counts(stats, where, self.max_values, max_features, classes)
        self.class_weight = classes if class_weight is None else {}
        self.total_weight = total
        self.present = present
        self.counts = counts
        self.codes = {}

    def size(self) -> int:
        """Stored numbers: ``N_y``, ``N_{y,i}`` and ``N_{y,i,v}`` (not ``N``)."""
        return len(self.class_weight) + count_leaves(self.present) + count_leaves(self.counts)

    # ------------------------------------------------------------------ batch kernels
    def bucket_columns(
        self, features: Sequence[Hashable], columns: list[Sequence[Any]]
    ) -> tuple[list[Sequence[Any]], frozenset[Hashable]] | None:
        """A batch kernel's columns of learned ``features`` with the values new to a full
        feature replaced by the "other" bucket, and the features so mapped (in which
        a ``None`` is then either a missing value, kept, or the bucket: the kernel
        tells them apart from the columns as given); ``None`` when a value so replaced
        is not a category (the per-event path rejects its event)."""
        cap = self.max_values
        counts = self.counts
        out = []
        mapped = []
        for f, col in zip(features, columns, strict=True):
            values = counts[f]
            if cap is None or n_real(values) < cap:
                out.append(col)
                continue
            try:
                new = {v for v in col if v not in values}
                check_categories(dict(enumerate(new)))
            except (TypeError, InvalidEventError):
                return None
            out.append([OTHER if v in new and v is not None else v for v in col])
            mapped.append(f)
        return out, frozenset(mapped)

    def accepts_new_values(self, feature: Hashable, values: list[Any]) -> bool:
        """Whether a batch kernel may learn these never-learned values of ``feature``
        as they are; otherwise the per-event path applies the cap or rejects them."""
        cap = self.max_values
        new = sum(v is not OTHER for v in values)
        if cap is not None and n_real(self.counts[feature]) + new > cap:
            return False
        try:
            check_categories(dict(enumerate(values)))
        except InvalidEventError:
            return False
        return True

    def add_batch(
        self,
        feature: Hashable,
        class_weights: Iterable[tuple[Hashable, float]],
        items: Iterable[tuple[Any, Hashable, float]],
    ) -> None:
        """Learn a batch into learned ``feature``: ``class_weights`` adds to ``N_{y,i}``,
        each ``(value, y, weight)`` of ``items`` to ``N_{y,i,v}``, in order (the class
        weights ``N_y`` are the kernel's to add, with :meth:`add_classes`)."""
        by_class = self.present[feature]
        for y, c in class_weights:
            by_class[y] = by_class.get(y, 0.0) + c
        values = self.counts[feature]
        for value, y, weight in items:
            value_counts = values.get(value)
            if value_counts is None:
                values[value] = {y: weight}
            else:
                value_counts[y] = value_counts.get(y, 0.0) + weight

    def set_batch(
        self,
        features: Sequence[Hashable],
        class_counts: Iterable[tuple[int, Hashable, float]],
        value_counts: Iterable[tuple[int, Any, Hashable, float]],
    ) -> None:
        """Set the counts a batch kernel summed in event order: each ``(j, y, n)`` of
        ``class_counts`` is ``N_{y,f}`` and each ``(j, value, y, n)`` of ``value_counts``
        ``N_{y,f,value}``, with ``f = features[j]``, in the order of their first learned
        event (so new values and classes enter the stores in learning order); a feature
        not held is skipped (the class weights ``N_y`` are the kernel's to add, with
        :meth:`add_classes`)."""
        present, counts = self.present, self.counts
        for j, y, n in class_counts:
            by_class = present.get(features[j])
            if by_class is not None:
                by_class[y] = n
        for j, value, y, n in value_counts:
            values = counts.get(features[j])
            if values is None:
                continue
            value_counts_ = values.get(value)
            if value_counts_ is None:
                values[value] = {y: n}
            else:
                value_counts_[y] = n

    def knows(
        self,
        feature: Hashable,
        class_weights: Iterable[tuple[Hashable, float]],
        items: Iterable[tuple[Any, Hashable, float]],
    ) -> bool:
        """Whether :meth:`add_batch` of these would only add to counts that exist (no
        feature, value or class new to them): the order of the items then does not
        change the order of any store."""
        by_class = self.present.get(feature)
        if by_class is None or not all(y in by_class for y, _ in class_weights):
            return False
        values = self.counts[feature]
        return all(y in values.get(value, _EMPTY) for value, y, _ in items)

    def add_features(self, features: Iterable[Hashable]) -> None:
        """Give the features not learned yet of ``features`` empty counts, in order, as
        far as ``admit`` lets them (a batch kernel recording into a model-sync delta, for
        the features it meets first)."""
        present = self.present
        counts = self.counts
        admit = self.admit
        for feature in features:
            if feature in present or (admit is not None and not admit()):
                continue
            present[feature] = {}
            counts[feature] = {}

    def add_classes(self, class_weights: Iterable[tuple[Hashable, float]]) -> None:
        """Add a batch's weight of each class to ``N_y`` and ``N``, in order, as
        learning its events one by one would."""
        class_weight = self.class_weight
        for y, w in class_weights:
            class_weight[y] = class_weight.get(y, 0.0) + w
            self.total_weight += w


def _read_counts(
    stats: Mapping[str, Any],
    where: str,
    max_values: int | None,
    max_features: int | None,
    class_weight: Mapping[Hashable, float],
) -> tuple[dict[Any, Any], dict[Any, Any]]:
    """``present`` and ``counts`` of a state, checked (see
    :meth:`CategoricalStatistics.load_state`)."""
    present = tree_from_pairs(
        field(stats, "present", where), 2, f"{where}.present", keys=FEATURE_CLASS
    )
    value_key = FEATURE_VALUE_CLASS if max_values is not None else (read_key, read_key, read_label)
    counts = tree_from_pairs(field(stats, "counts", where), 3, f"{where}.counts", keys=value_key)
    if present.keys() != counts.keys():
        missing = next(iter(present.keys() ^ counts.keys()))
        raise _error(
            f"{where}.counts", f"present and counts must name the same features ({missing!r})"
        )
    if max_features is not None and len(present) > max_features:
        raise _error(
            f"{where}.present", f"{len(present)} features, more than max_features={max_features}"
        )
    for f, by_class in present.items():
        values = counts[f]
        if not values:
            raise _error(f"{where}.counts[{f!r}]", "a learned feature needs at least one value")
        if max_values is not None and n_real(values) > max_values:
            raise _error(
                f"{where}.counts[{f!r}]",
                f"{n_real(values)} values, more than max_values_per_feature={max_values}",
            )
        sums: dict[Hashable, list[float]] = {}
        for by_value in values.values():
            for y, n in by_value.items():
                sums.setdefault(y, []).append(n)
        if sums.keys() != by_class.keys():
            extra = next(iter(sums.keys() ^ by_class.keys()))
            raise _error(f"{where}.counts[{f!r}]", f"class {extra!r} disagrees with present")
        for y, n in by_class.items():
            if y not in class_weight:
                raise _error(f"{where}.present[{f!r}]", f"unknown class {y!r}")
            check_consistent(n, sums[y], f"{where}.present[{f!r}][{y!r}]", "its value counts")
            check_at_most(n, class_weight[y], f"{where}.present[{f!r}][{y!r}]", "the class weight")
    return present, counts


def _error(where: str, message: str) -> ModelStateError:
    return ModelStateError(f"{where}: {message}")
