"""The categorical terms of an exact batch kernel, on a :class:`CategoricalStatistics`.

For the categorical features of a column batch, the kernel needs, before every
event ``i`` of the batch and for every class ``y``, the terms
``log((N_{y,f,v} + α) / (N_{y,f} + S_f α))`` of
:class:`~stream_nb.CategoricalNB` (which NaiveBayes adds to its Gaussian
scores). Each count is a prefix sum over the batch:

- ``N_{y,f,v}`` is the count at the batch start plus an exclusive cumulative
  sum of the class weights grouped by value (values coded per feature, the
  codes made global by feature offsets so all features go at once);
- ``N_{y,f}`` is the class weight at the batch start plus the weight of class
  ``y`` learned before ``i`` (:attr:`BatchClasses.before`);
- ``S_f`` grows by one at the first *learned* occurrence of a new value.

A missing value (``None``) adds no term and is not learned: its event gets
its own code, outside the feature's values, and the present weights of its
feature are a prefix sum of the class weights of the events where it is present.

:class:`CategoricalColumns` computes these terms for the whole batch, then
learns the batch into the statistics: a kernel that uses it decides, adds its
own terms (the class prior, Gaussian terms) and calls :meth:`~CategoricalColumns.learn`
last, once nothing can fail.
"""

from __future__ import annotations

import operator
from collections.abc import Hashable, Sequence
from typing import Any

import numpy as np

from stream_nb._exceptions import InvalidEventError
from stream_nb._state import check_categories
from stream_nb._stores import n_real
from stream_nb.naive_bayes._arrays import (
    BatchClasses,
    Learned,
    exclusive_cumsum,
    first_rows,
    grouped_exclusive_cumsum,
    sum_of_logs,
)
from stream_nb.naive_bayes._categorical_stats import CategoricalStatistics

__all__ = ["CategoricalColumns", "values_within_caps"]

#: A feature's value -> code map starts afresh beyond this many values.
_MAX_CODES = 1 << 16
#: Codes below this (and the code of a missing value, one more) fit in a byte.
_BYTE_CODES = 255

#: No counts yet for a value
_NO_COUNTS: dict[Hashable, float] = {}

#: ``(value, label, weight)`` added to ``N_{y,f,v}``, and ``(label, weight)`` to ``N_{y,f}``
Items = list[tuple[Any, Hashable, float]]
ClassWeights = list[tuple[Hashable, float]]


class CategoricalColumns:
    """The categorical columns of a batch, coded against a :class:`CategoricalStatistics`.

    Use in this order, each step returning ``None``/``False`` (nothing
    changed) when the per-event path must take the batch: :meth:`of` (columns
    checked, values new to a full feature put in the "other" bucket),
    :meth:`encode` (value codes), :meth:`log_likelihoods` (the terms of
    every event) and, once the kernel cannot fail any more, :meth:`learn`.

    Examples
    --------
    >>> from stream_nb.naive_bayes._arrays import BatchClasses
    >>> stats = CategoricalStatistics()
    >>> stats.learn([("sky", "sun")], "play", 1.0)
    >>> stats.learn([("sky", "rain")], "stay", 1.0)
    >>> ys = ["play", "play", "stay"]
    >>> batch = CategoricalColumns.of(stats, ("sky",), [["sun", "fog", "sun"]], len(ys))
    >>> batch.encode()
    True
    >>> classes = BatchClasses.of(["play", "stay"], {"play": 0, "stay": 1}, ys, None)
    >>> terms = batch.log_likelihoods(classes, 1.0)  # K × B, each event before it is learned
    >>> round(float(terms[0, 2]), 4)  # log((1 + 1 + α) / (1 + 2 + 3α)): "sun" learned once more
    -0.6931
    >>> batch.learn(classes, ys, classes.learned(ys))
    >>> stats.counts["sky"]
    {'sun': {'play': 2.0, 'stay': 1.0}, 'rain': {'stay': 1.0}, 'fog': {'play': 1.0}}
    """

    __slots__ = (
        "bucketed",
        "coded",
        "codes_all",
        "columns",
        "features",
        "integral",
        "missing",
        "size",
        "stats",
    )

    def __init__(
        self,
        stats: CategoricalStatistics,
        features: tuple[Hashable, ...],
        columns: list[Sequence[Any]],
        b: int,
        bucketed: frozenset[Hashable],
        missing: list[np.ndarray | None],
    ) -> None:
        self.stats = stats
        self.features = features
        self.columns = columns
        self.size = b  # events
        self.bucketed = bucketed  # the full features, whose new values read as the bucket
        # per feature: the rows of its missing values (None: none)
        self.missing = missing
        # per feature: (values by code, the code of every event, the codes of the values
        # in the batch, the code of a missing value or -1)
        self.coded: list[tuple[list[Any], np.ndarray, list[int], int]] = []
        # every event's global value code, feature after feature (log_likelihoods)
        self.codes_all: np.ndarray | None = None
        # unit weights and whole start counts: a batch's totals add exactly at once
        self.integral = False

    @classmethod
    def of(
        cls,
        stats: CategoricalStatistics,
        features: tuple[Hashable, ...],
        columns: list[Sequence[Any]],
        b: int,
    ) -> CategoricalColumns | None:
        """The columns of ``features`` (each learned in ``stats``), ``b`` events each, with
        values new to a full feature read as its "other" bucket (None), as per event;
        ``None`` when a column has another length, or a value new to a full feature
        is not a category."""
        if any(len(col) != b for col in columns):
            return None
        bucketed: frozenset[Hashable] = frozenset()
        missing: list[np.ndarray | None] = [None] * len(features)
        if stats.max_values is not None:
            found = stats.bucket_columns(features, columns)
            if found is None:
                return None
            mapped, bucketed = found
            for j, (f, col) in enumerate(zip(features, columns, strict=True)):
                if f in bucketed and None in col:
                    # (the bucket is None too: the missing values are read from the column)
                    missing[j] = np.flatnonzero([v is None for v in col])
            columns = mapped
        return cls(stats, features, columns, b, bucketed, missing)

    def encode(self) -> bool:
        """Code every value, before any statistic changes; ``False`` for a batch the
        per-event path must take (a value that is not a category: unhashable, NaN…).

        Codes come from a value -> code map kept with the statistics across batches
        (:attr:`CategoricalStatistics.codes`: not a statistic, never saved, and a stale
        code only names a value, whose counts are read afresh).
        """
        stats = self.stats
        vocabularies = stats.codes
        b = self.size
        bucketed = self.bucketed
        for j, (f, col) in enumerate(zip(self.features, self.columns, strict=True)):
            vocabulary = vocabularies.get(f)
            if vocabulary is None or len(vocabulary[1]) > _MAX_CODES:
                vocabulary = vocabularies[f] = ({}, [])
            codes, code_values = vocabulary
            try:
                coded = operator.itemgetter(*col)(codes)
            except (KeyError, TypeError):
                try:
                    fresh = [value for value in dict.fromkeys(col) if value not in codes]
                except TypeError:
                    return False  # unhashable value: the per-event path names it
                try:  # (so every value with a code is a category, or None)
                    check_categories(dict(enumerate(fresh)))
                except InvalidEventError:
                    return False  # the per-event path names it
                for value in fresh:
                    codes[value] = len(code_values)
                    code_values.append(value)
                coded = operator.itemgetter(*col)(codes)
            if len(code_values) < _BYTE_CODES:  # (bytes() of small ints: a C loop, no objects)
                code_arr = np.frombuffer(bytes(coded), dtype=np.uint8).astype(np.intp)
            else:
                code_arr = np.fromiter(coded, dtype=np.intp, count=b)
            n_values = len(code_values)
            rows = self.missing[j]
            if f not in bucketed:  # a None is a missing value
                none = codes.get(None)
                if none is not None:
                    hits = np.flatnonzero(code_arr == none)
                    rows = self.missing[j] = hits if len(hits) else None
            slot = -1
            if rows is not None:
                slot = n_values  # the code of a missing value: no value's
                code_arr[rows] = slot
            counted = np.bincount(code_arr, minlength=n_values)[:n_values]
            self.coded.append((code_values, code_arr, np.flatnonzero(counted).tolist(), slot))
        return True

    def log_likelihoods(
        self,
        classes: BatchClasses,
        alpha: float | np.ndarray,
        weights: Sequence[float] | None = None,
    ) -> np.ndarray | None:
        """``Σ_f log((N_{y,f,v} + α) / (N_{y,f} + S_f α))`` of every class (row) and event
        (column), K × B, each with the statistics before the event (α in raw units: a
        number, or one per event for a forgetting learner, see
        :class:`stream_nb._decay.BatchDecay`); ``None`` (nothing changed) when a value new
        to the model cannot be learned as it is (past ``max_values``, or not a category),
        and for ``alpha = 0`` (see :meth:`mle_log_likelihoods`). ``weights``: fixed
        feature weights, one per feature of the batch (each term times its weight).
        """
        if np.ndim(alpha) == 0 and alpha == 0:
            return None
        found = self._counts(classes, alpha)
        if found is None:
            return None
        count, pres = found
        if weights is not None:
            return _weighted_terms(count, pres, weights)
        terms: np.ndarray = sum_of_logs(count, axis=1) - sum_of_logs(pres, axis=1)
        return terms

    def mle_log_likelihoods(
        self, classes: BatchClasses, weights: Sequence[float] | None = None
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """:meth:`log_likelihoods` with ``alpha = 0``, for :mod:`stream_nb._mle`'s rule:
        ``(finite, zeros)``, both K × B: the sum of the terms ``log(N_{y,f,v} / N_{y,f})``
        with ``N_{y,f,v} > 0`` and the number of zero counts (probability 0), as the
        per-event path counts them; ``None`` as :meth:`log_likelihoods`. With ``weights``
        a feature of weight 0 adds nothing, not even a zero count.
        """
        found = self._counts(classes, 0.0)
        if found is None:
            return None
        count, pres = found
        if weights is not None:
            count[:, np.asarray(weights) == 0.0, :] = 1.0  # (no term: log(1 / 1))
            pres[:, np.asarray(weights) == 0.0, :] = 1.0
        zero = count == 0.0
        zeros = zero.sum(axis=1)
        count[zero] = 1.0  # (log 1 = 0: the finite part leaves them out)
        pres[zero] = 1.0
        if weights is not None:
            return _weighted_terms(count, pres, weights), zeros
        finite: np.ndarray = sum_of_logs(count, axis=1) - sum_of_logs(pres, axis=1)
        return finite, zeros

    def _counts(
        self, classes: BatchClasses, alpha: float | np.ndarray
    ) -> tuple[np.ndarray, np.ndarray] | None:
        """``N_{y,f,v} + α`` and ``N_{y,f} + S_f α`` before every event, K × F × B (1 and 1
        where the feature is missing); ``None`` as :meth:`log_likelihoods`. ``alpha``: a
        number, or one per event (``B``)."""
        per_event = np.ndim(alpha) > 0
        a: Any = 0.0 if per_event else alpha  # (α per event is added at the end)
        stats = self.stats
        labels = classes.labels
        labelled = classes.labelled
        n_classes = len(labels)
        b = self.size
        present = stats.present
        counts = stats.counts
        n_cat = len(self.features)
        # All features at once: value codes made global (feature offsets), the events'
        # one-hot class weights repeated once per feature, and N_{y,f,v} before every
        # event as the start count plus a grouped exclusive cumsum over the batch.
        sizes = [len(code_values) + (slot >= 0) for code_values, _, _, slot in self.coded]
        offsets = np.cumsum([0, *sizes[:-1]]).tolist()
        codes_all = np.concatenate(
            [
                code_arr + offset
                for (_, code_arr, _, _), offset in zip(self.coded, offsets, strict=True)
            ]
        )
        seen_codes: list[int] = []  # global codes of learned values, and their counts
        seen_counts: list[float] = []
        pres0 = np.empty((n_classes, n_cat))  # N_{y,f} at the batch start
        smoothing = np.empty(n_cat)  # S_f α at the batch start (S_f with α per event)
        grows: list[tuple[int, np.ndarray]] = []  # (f, S_f α growth before every event)
        for j, (f, (code_values, code_arr, present_codes, _), offset, size) in enumerate(
            zip(self.features, self.coded, offsets, sizes, strict=True)
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
            smoothing[j] = len(values) * (1.0 if per_event else a)
            if unseen and not stats.accepts_new_values(f, [code_values[c] for c in unseen]):
                return None  # a value past max_values_per_feature, or not a category
            if unseen:
                # S_f grows by one at each new value's first *learned* occurrence
                is_new = np.zeros(size, dtype=bool)
                is_new[unseen] = True
                learned_new = np.flatnonzero(labelled & is_new[code_arr])
                _, first = np.unique(code_arr[learned_new], return_index=True)
                new_first = np.sort(learned_new[first])
                grows.append((j, np.searchsorted(new_first, np.arange(b), side="left") * alpha))
        seen = np.array(seen_counts).reshape(-1, n_classes).T
        start = np.full((n_classes, sum(sizes)), a)  # K × global code: N_{y,f,v} + α
        if seen_codes:
            start[:, seen_codes] += seen
        count = grouped_exclusive_cumsum(codes_all, classes.onehot)
        count += start.take(codes_all, axis=1)
        count = count.reshape(n_classes, n_cat, b)
        if per_event:
            count += alpha
            base = pres0  # N_{y,f} at the batch start; S_f α per event below
        else:
            base = pres0 + smoothing  # N_{y,f} + S_f α at the batch start
        pres = base[:, :, None] + classes.before[:, None, :]
        for j, rows in enumerate(self.missing):
            if rows is not None:  # N_{y,f} grows only where f is present
                onehot = classes.onehot.copy()
                onehot[:, rows] = 0.0
                pres[:, j, :] = base[:, j, None] + exclusive_cumsum(onehot, axis=-1)
        if per_event:
            pres += smoothing[None, :, None] * alpha
        for j, grow in grows:
            pres[:, j, :] += grow
        for j, rows in enumerate(self.missing):
            if rows is not None:  # no term where f is missing: log(1 / 1)
                count[:, j, rows] = 1.0
                pres[:, j, rows] = 1.0
        self.codes_all = codes_all
        if classes.unit:
            self.integral = bool(
                (seen == np.floor(seen)).all() and (pres0 == np.floor(pres0)).all()
            )
        return count, pres

    def learn(
        self,
        classes: BatchClasses,
        ys: Sequence[Hashable | None],
        learned: Learned,
        delta: CategoricalStatistics | None = None,
    ) -> None:
        """Learn the batch (labels ``ys``, what it adds ``learned``) into the statistics'
        ``N_{y,f}`` and ``N_{y,f,v}``, after :meth:`log_likelihoods` (the class weights
        ``N_y`` are the kernel's to add), and into ``delta`` (a model-sync delta's
        statistics) too.

        With unit weights and whole counts, the totals per value and class are exact
        integers, added at once; otherwise each event's weight is added in order, as the
        per-event path does (:meth:`_learn_in_order`). Values, classes and features new
        to a store are added in the order of their first learned event, as learning
        event by event does.
        """
        codes_all = self.codes_all
        if codes_all is None:
            raise RuntimeError("CategoricalColumns.learn needs log_likelihoods first")
        targets = [self.stats] if delta is None else [self.stats, delta]
        if delta is not None:
            delta.add_features(self.first_learned(classes, delta))
        if not (classes.unit and self.integral):
            self._learn_in_order(classes, targets)
            return
        labels = classes.labels
        n_classes = len(labels)
        b = self.size
        sizes = [len(code_values) + (slot >= 0) for code_values, _, _, slot in self.coded]
        offsets = np.cumsum([0, *sizes[:-1]]).tolist()
        # N_{y,f,v} learned in this batch, per global value code and class, for all
        # features at once: the non-zero totals in code order, cut at the features
        learned_codes = codes_all.reshape(len(self.features), b)
        if classes.n_labelled < b:
            learned_codes = learned_codes.take(classes.rows, axis=1)
        keys = learned_codes * n_classes + classes.k
        value_totals = np.bincount(keys.ravel(), minlength=sum(sizes) * n_classes).reshape(
            -1, n_classes
        )
        slots = [o + len(cv) for (cv, _, _, slot), o in zip(self.coded, offsets) if slot >= 0]  # noqa: B905
        value_totals[slots] = 0  # (missing values are not learned)
        nz_codes, nz_classes = np.nonzero(value_totals)
        nz_totals = value_totals[nz_codes, nz_classes].astype(np.float64).tolist()
        bounds = np.searchsorted(nz_codes, [*offsets, len(value_totals)]).tolist()
        by_feature = np.add.reduceat(value_totals, offsets, axis=0).astype(np.float64).tolist()
        nz_codes_l, nz_classes_l = nz_codes.tolist(), nz_classes.tolist()
        for j, (f, (code_values, _, _, _), offset) in enumerate(
            zip(self.features, self.coded, offsets, strict=True)
        ):
            lo, hi = bounds[j], bounds[j + 1]
            items: Items = [
                (code_values[c - offset], labels[k], t)
                for c, k, t in zip(
                    nz_codes_l[lo:hi], nz_classes_l[lo:hi], nz_totals[lo:hi], strict=True
                )
            ]
            class_weights: ClassWeights = [(labels[k], c) for k, c in enumerate(by_feature[j]) if c]
            if not all(target.knows(f, class_weights, items) for target in targets):
                items, class_weights = _first_order(
                    keys[j], offset, len(code_values), labels, items, class_weights
                )
            for target in targets:
                if f in target.present:
                    target.add_batch(f, class_weights, items)

    def _learn_in_order(self, classes: BatchClasses, targets: list[CategoricalStatistics]) -> None:
        """:meth:`learn` with real-valued weights or counts: each count after the batch is
        its count before plus the weights of its events added one after the other, in
        event order (``numpy.add.at`` adds a repeated index in order), so it is the
        per-event path's to the bit; the counts are then set in the order of their first
        learned event."""
        codes_all = self.codes_all
        assert codes_all is not None  # (learn checked)
        labels = classes.labels
        n_classes = len(labels)
        n_features = len(self.features)
        rows = classes.rows
        learned_codes = codes_all.reshape(n_features, self.size)
        if classes.n_labelled < self.size:
            learned_codes = learned_codes.take(rows, axis=1)
        weights = np.tile(classes.w.take(rows), n_features)
        sizes = [len(code_values) + (slot >= 0) for code_values, _, _, slot in self.coded]
        offsets = np.cumsum([0, *sizes[:-1]])
        # the feature of every global code, and which codes are missing values (not learned)
        feature_of = np.repeat(np.arange(n_features), sizes)
        learnable = np.ones(sum(sizes), dtype=bool)
        for (code_values, _, _, slot), offset in zip(self.coded, offsets.tolist(), strict=True):
            if slot >= 0:
                learnable[offset + len(code_values)] = False
        codes = learned_codes.ravel()  # feature after feature, events in order
        keep = learnable.take(codes)
        codes, weights = codes[keep], weights[keep]
        k = np.tile(classes.k, n_features)[keep]
        # N_{y,f,v}: one key per (global code, class); N_{y,f}: one per (feature, class)
        value_keys, value_first, value_of = np.unique(
            codes * n_classes + k, return_index=True, return_inverse=True
        )
        class_keys, class_first, class_of = np.unique(
            feature_of.take(codes) * n_classes + k, return_index=True, return_inverse=True
        )
        value_order = np.argsort(value_first, kind="stable")  # first learned first
        class_order = np.argsort(class_first, kind="stable")
        value_keys, value_of = value_keys[value_order], np.argsort(value_order).take(value_of)
        class_keys, class_of = class_keys[class_order], np.argsort(class_order).take(class_of)
        code_l = (value_keys // n_classes).tolist()
        value_features = feature_of.take(value_keys // n_classes).tolist()
        pairs = [
            (j, self.coded[j][0][c - offsets[j]], labels[kk])
            for j, c, kk in zip(
                value_features, code_l, (value_keys % n_classes).tolist(), strict=True
            )
        ]
        class_pairs = [
            (j, labels[kk])
            for j, kk in zip(
                (class_keys // n_classes).tolist(), (class_keys % n_classes).tolist(), strict=True
            )
        ]
        for target in targets:
            # (a feature a delta does not hold, past its max_features, is not learned)
            tables = [target.counts.get(f) for f in self.features]
            by_class = [target.present.get(f) for f in self.features]
            start = np.array(
                [
                    0.0 if (t := tables[j]) is None else t.get(v, _NO_COUNTS).get(y, 0.0)
                    for j, v, y in pairs
                ],
                dtype=np.float64,
            )
            np.add.at(start, value_of, weights)
            class_start = np.array(
                [0.0 if (c := by_class[j]) is None else c.get(y, 0.0) for j, y in class_pairs],
                dtype=np.float64,
            )
            np.add.at(class_start, class_of, weights)
            target.set_batch(
                self.features,
                [(j, y, n) for (j, y), n in zip(class_pairs, class_start.tolist(), strict=True)],
                [(j, v, y, n) for (j, v, y), n in zip(pairs, start.tolist(), strict=True)],
            )

    def first_learned(self, classes: BatchClasses, stats: CategoricalStatistics) -> list[Hashable]:
        """The batch's features that ``stats`` has not learned and the batch learns, in
        the order learning its events one by one would meet them."""
        rows = classes.rows
        met = []
        for j, f in enumerate(self.features):
            if f in stats.present:
                continue
            missing = self.missing[j]
            here = rows if missing is None else np.setdiff1d(rows, missing, assume_unique=True)
            if len(here):
                met.append((int(here[0]), j, f))
        met.sort(key=operator.itemgetter(0, 1))
        return [f for _, _, f in met]


def _weighted_terms(count: np.ndarray, pres: np.ndarray, weights: Sequence[float]) -> np.ndarray:
    """``Σ_f w_f log(count / pres)`` over the features (axis 1 of the K × F × B arrays),
    as the per-event path weights each term; a feature of weight 0 adds nothing."""
    w = np.asarray(weights, dtype=np.float64)
    terms = np.log(count / pres)
    terms[:, w == 0.0, :] = 0.0  # (before the product: 0 × inf would be NaN)
    terms *= w[None, :, None]
    out: np.ndarray = terms.sum(axis=1)
    return out


def values_within_caps(
    stats: Sequence[CategoricalStatistics],
    features: Sequence[Hashable],
    columns: Sequence[Sequence[Any]],
) -> bool:
    """Whether learning these columns (one per feature) meets no ``max_values`` of
    ``stats`` (a model and its tracked delta): in each, every feature's learned values
    plus its column's distinct values stay within the cap, so every value is learned as
    it is, as ``learn_one`` would learn it. A column shorter than a cap's room needs no
    count of its distinct values. ``False`` for an unhashable value that had to be
    counted (the per-event path names it).

    Examples
    --------
    >>> stats = CategoricalStatistics(max_values=3)
    >>> stats.learn([("sky", "sun")], "play", 1.0)
    >>> values_within_caps([stats], ["sky"], [["sun", "rain", "fog"]])
    True
    >>> values_within_caps([stats], ["sky"], [["snow", "rain", "fog"]])
    False
    >>> values_within_caps([CategoricalStatistics(max_values=10)], ["sky"], [[["a list"]]])
    True
    """
    capped = [(s.counts, s.max_values) for s in stats if s.max_values is not None]
    if not capped:
        return True
    for feature, column in zip(features, columns, strict=True):
        new: set[Any] | None = None
        for counts, cap in capped:
            values = counts.get(feature)
            known = 0 if values is None else n_real(values)
            if known + len(column) <= cap:
                continue  # (even if every value were new)
            if new is None:
                try:
                    new = set(column)
                except TypeError:
                    return False
            if known + len(new if values is None else new - values.keys()) > cap:
                return False
    return True


def _first_order(
    keys: np.ndarray,
    offset: int,
    n_values: int,
    labels: list[Hashable],
    items: Items,
    class_weights: ClassWeights,
) -> tuple[Items, ClassWeights]:
    """``items`` and ``class_weights`` of one feature (whose learned events have the
    global keys ``code × K + k``, in order) sorted by their first learned event."""
    n_classes = len(labels)
    low, high = offset * n_classes, (offset + n_values) * n_classes
    class_first: dict[Hashable, int] = {}
    item_first = []
    for key, row in first_rows(keys).items():
        if low <= key < high:  # (not a missing value)
            y = labels[key % n_classes]
            class_first[y] = min(row, class_first.get(y, row))
            item_first.append(row)
    # the items are in key order (np.nonzero), as are the keys of first_rows
    order = sorted(range(len(items)), key=item_first.__getitem__)
    ranked = sorted(class_weights, key=lambda cw: class_first[cw[0]])
    return [items[i] for i in order], ranked
