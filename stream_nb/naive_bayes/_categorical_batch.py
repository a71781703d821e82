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

from stream_nb.naive_bayes._arrays import (
    BatchClasses,
    Learned,
    grouped_exclusive_cumsum,
    sum_of_logs,
)
from stream_nb.naive_bayes._categorical_stats import CategoricalStatistics

__all__ = ["CategoricalColumns"]

#: A feature's value -> code map starts afresh beyond this many values.
_MAX_CODES = 1 << 16


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

    __slots__ = ("bucketed", "coded", "codes_all", "columns", "features", "size", "stats")

    def __init__(
        self,
        stats: CategoricalStatistics,
        features: tuple[str, ...],
        columns: list[Sequence[Any]],
        b: int,
        bucketed: frozenset[Hashable],
    ) -> None:
        self.stats = stats
        self.features = features
        self.columns = columns
        self.size = b  # events
        self.bucketed = bucketed  # the full features, whose new values read as the bucket
        # per feature: (values by code, the code of every event, the codes in the batch)
        self.coded: list[tuple[list[Any], np.ndarray, list[int]]] = []
        # every event's global value code, feature after feature (log_likelihoods)
        self.codes_all: np.ndarray | None = None

    @classmethod
    def of(
        cls,
        stats: CategoricalStatistics,
        features: tuple[str, ...],
        columns: list[Sequence[Any]],
        b: int,
    ) -> CategoricalColumns | None:
        """The columns of ``features`` (each learned in ``stats``), ``b`` events each, with
        values new to a full feature read as its "other" bucket (None), as per event;
        ``None`` when a column has another length or a full feature a missing value."""
        if any(len(col) != b for col in columns):
            return None
        bucketed: frozenset[Hashable] = frozenset()
        if stats.max_values is not None:
            found = stats.bucket_columns(features, columns)
            if found is None:
                return None
            columns, bucketed = found
        return cls(stats, features, columns, b, bucketed)

    def encode(self) -> bool:
        """Code every value, before any statistic changes; ``False`` for a batch the
        per-event path must take (a missing or unhashable value).

        Codes come from a value -> code map kept with the statistics across batches
        (:attr:`CategoricalStatistics.codes`: not a statistic, never saved, and a stale
        code only names a value, whose counts are read afresh).
        """
        stats = self.stats
        vocabularies = stats.codes
        b = self.size
        bucketed = self.bucketed
        for f, col in zip(self.features, self.columns, strict=True):
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
                    return False  # unhashable value: the per-event path names it
                if f not in bucketed and any(value is None for value in fresh):
                    return False
                for value in fresh:
                    codes[value] = len(code_values)
                    code_values.append(value)
                code_arr = np.fromiter(operator.itemgetter(*col)(codes), dtype=np.intp, count=b)
            in_batch = np.flatnonzero(np.bincount(code_arr, minlength=len(code_values))).tolist()
            self.coded.append((code_values, code_arr, in_batch))
        return True

    def log_likelihoods(self, classes: BatchClasses, alpha: float) -> np.ndarray | None:
        """``Σ_f log((N_{y,f,v} + α) / (N_{y,f} + S_f α))`` of every class (row) and event
        (column), K × B, each with the statistics before the event (α in raw units);
        ``None`` (nothing changed) when a value new to the model cannot be learned as it
        is (past ``max_values``, or not a category).
        """
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
        sizes = [len(code_values) for code_values, _, _ in self.coded]
        offsets = np.cumsum([0, *sizes[:-1]]).tolist()
        codes_all = np.concatenate(
            [
                code_arr + offset
                for (_, code_arr, _), offset in zip(self.coded, offsets, strict=True)
            ]
        )
        seen_codes: list[int] = []  # global codes of learned values, and their counts
        seen_counts: list[float] = []
        pres0 = np.empty((n_classes, n_cat))
        smoothing = np.empty((1, n_cat, b))
        for j, (f, (code_values, code_arr, present_codes), offset) in enumerate(
            zip(self.features, self.coded, offsets, strict=True)
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
            if unseen and not stats.accepts_new_values(f, [code_values[c] for c in unseen]):
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
        before = grouped_exclusive_cumsum(codes_all, np.tile(classes.onehot, (1, n_cat)))
        count = (start.take(codes_all, axis=1) + before).reshape(n_classes, n_cat, b)
        count += alpha
        pres = pres0[:, :, None] + classes.before[:, None, :]
        pres += smoothing
        self.codes_all = codes_all
        terms: np.ndarray = sum_of_logs(count, axis=1) - sum_of_logs(pres, axis=1)
        return terms

    def learn(self, classes: BatchClasses, ys: Sequence[Hashable | None], learned: Learned) -> None:
        """Learn the batch (labels ``ys``, what it adds ``learned``) into the statistics'
        ``N_{y,f}`` and ``N_{y,f,v}``, after :meth:`log_likelihoods` (the class weights
        ``N_y`` are the kernel's to add). With unit weights the totals per value and
        class are exact integers, added at once; otherwise each event's weight is added
        in order, as the per-event path does."""
        codes_all = self.codes_all
        if codes_all is None:
            raise RuntimeError("CategoricalColumns.learn needs log_likelihoods first")
        stats = self.stats
        labels = classes.labels
        n_classes = len(labels)
        sizes = [len(code_values) for code_values, _, _ in self.coded]
        value_totals = None
        if classes.unit:
            # N_{y,f,v} learned in this batch, per global value code and class
            learned_codes = codes_all.reshape(len(self.features), self.size)
            if classes.n_labelled < self.size:
                learned_codes = learned_codes.take(classes.rows, axis=1)
            learned_codes = learned_codes * n_classes + classes.k
            value_totals = np.bincount(
                learned_codes.ravel(), minlength=sum(sizes) * n_classes
            ).reshape(-1, n_classes)
        offset = 0
        for f, col, (code_values, _, _) in zip(
            self.features, self.columns, self.coded, strict=True
        ):
            items: list[tuple[Any, Hashable, float]]
            if value_totals is not None:
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
                stats.add_batch(f, learned.class_weights, items)
            else:
                items = [
                    (value, y, wi)
                    for value, y, wi in zip(col, ys, learned.weights, strict=True)
                    if y is not None
                ]
                stats.add_batch(f, learned.event_weights, items)
            offset += len(code_values)
