"""The exact batch kernel of :class:`~stream_nb.CategoricalNB` (numpy).

:meth:`stream_nb.base.Learner.predict_learn_many` is defined as the loop
"predict event ``i`` with the model that learned events ``0..i-1``, then learn
it". Every count event ``i`` sees is a prefix sum over the batch: the
category terms ``log((N_{y,f,v} + α) / (N_{y,f} + S_f α))`` are those of
:class:`~stream_nb.naive_bayes._categorical_batch.CategoricalColumns` (which
NaiveBayes uses for its categorical part too), and the prior
``log((N_y + α) / (N + Kα))`` takes ``N_y`` and ``N`` before event ``i``
from :class:`~stream_nb.naive_bayes._arrays.BatchClasses`. The statistics
after the batch are the prefix at ``i = B``.

Missing values (``None``, or a feature absent from some events of
:func:`columns_of_events`) add no term and are not learned, as per event. The
per-event path takes (``None`` is returned, nothing changed): short batches,
a model that has learned no class yet, a label it has not learned, a weight
or a value the per-event path would reject, a value past
``max_values_per_feature`` that the bucket does not take, and a feature the
model does not hold but would learn (it is not full and the feature has a
value). With forgetting (``half_life``) the batch is learned with its raw
weights and each event smoothed with ``α / scale`` before it
(:class:`stream_nb._decay.BatchDecay`). Fixed class priors (``class_prior``)
add ``log class_prior[y]``; a batch of a model with a class missing from them
goes to the per-event path (whose answers leave that class out).

With ``α = 0`` (maximum likelihood) the terms are split into their finite sum
and their count of zero counts
(:meth:`~stream_nb.naive_bayes._categorical_batch.CategoricalColumns.mle_log_likelihoods`)
and decided by :mod:`stream_nb._mle`'s rule, as per event; a batch in which the
rule gives some class probability 0 goes to the per-event path (its records
leave such classes out).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np

from stream_nb._decay import BatchDecay
from stream_nb._exceptions import InvalidEventError
from stream_nb._mle import resolve_zero_terms
from stream_nb._state import CATEGORY_TYPES, check_categories, check_feature_names
from stream_nb.naive_bayes._arrays import (
    MIN_BATCH,
    BatchClasses,
    exclusive_cumsum,
    fixed_log_priors,
    posteriors,
)
from stream_nb.naive_bayes._categorical_batch import CategoricalColumns
from stream_nb.naive_bayes._categorical_stats import CategoricalStatistics

__all__ = ["categorical_predict_learn_columns", "columns_of_events"]

#: ``(labels, log_proba, best, learned)``: the classes, the B × K log posteriors, the
#: decisions' columns and the number of events learned
KernelResult = tuple[list[Hashable], np.ndarray, np.ndarray, int]


def columns_of_events(
    xs: Sequence[Mapping[str, Any]],
) -> tuple[tuple[str, ...], list[Sequence[Any]]] | None:
    """The features of events given as dicts, as columns: ``(names, columns)``, with
    ``None`` where an event lacks a feature; ``None`` unless every event is a dict.

    Examples
    --------
    >>> columns_of_events([{"a": 1, "b": 2}, {"b": 3, "c": 4}])
    (('a', 'b', 'c'), [[1, None], [2, 3], [None, 4]])
    """
    if not xs or set(map(type, xs)) != {dict}:
        return None
    names = tuple(xs[0])
    if all(map(names.__eq__, map(tuple, xs))):
        return names, [list(col) for col in zip(*[x.values() for x in xs])] if names else []  # noqa: B905
    names = tuple(dict.fromkeys(itertools.chain.from_iterable(xs)))
    return names, [[x.get(f) for x in xs] for f in names]


def _categories(columns: Sequence[Sequence[Any]]) -> bool:
    """Whether every value is one the per-event path accepts as a category."""
    for col in columns:
        if not CATEGORY_TYPES.issuperset(map(type, col)):
            try:
                check_categories(dict(enumerate(col)))
            except InvalidEventError:
                return False
    return True


def categorical_predict_learn_columns(
    stats: CategoricalStatistics,
    names: tuple[str, ...],
    columns: Sequence[Sequence[Any]],
    ys: Sequence[Hashable | None],
    ws: Sequence[float] | None,
    *,
    alpha: float,
    full: bool,
    delta: CategoricalStatistics | None = None,
    decay: BatchDecay | None = None,
    feature_weights: Mapping[Hashable, float] | None = None,
) -> KernelResult | None:
    """Predict then learn a batch of column-wise events into CategoricalNB's statistics:
    feature ``names[j]`` of event ``i`` is ``columns[j][i]``.

    ``alpha`` is α; ``full``: the model holds ``max_features`` features, so
    features it does not hold are not learned. ``delta``: the statistics of a
    tracked model-sync delta, which get the batch's counts too. ``decay``: the
    forgetting of a learner with ``half_life`` over this batch (the events are
    learned with its raw weights and predicted with ``α / scale``; the caller
    sets the scale after the batch). ``feature_weights``: fixed weights by feature
    (1 for the others), each term times its feature's weight.

    Returns ``(labels, log_proba, best, learned)``: row ``i`` of the ``B × K``
    array ``log_proba`` holds ``log P(labels[k] | x_i)`` before event ``i`` is
    learned, ``labels[best[i]]`` is its decision (the first most probable
    class) and ``learned`` the number of labelled events; ``None`` and nothing
    changed when the batch is not one the kernel handles. ``ws=None`` means
    every weight is 1.

    Examples
    --------
    >>> stats = CategoricalStatistics()
    >>> stats.learn([("sky", "sun")], "play", 1.0)
    >>> stats.learn([("sky", "rain")], "stay", 1.0)
    >>> ys = ["play", "stay"] * 40
    >>> labels, log_proba, best, learned = categorical_predict_learn_columns(
    ...     stats, ("sky",), [["sun", "rain"] * 40], ys, None, alpha=1.0, full=False
    ... )
    >>> labels, log_proba.shape, [labels[k] for k in best[:2]], learned, stats.class_weight
    (['play', 'stay'], (80, 2), ['play', 'stay'], 80, {'play': 41.0, 'stay': 41.0})
    """
    b = len(ys)
    labels = list(stats.class_weight)
    if b < MIN_BATCH or not labels or len(columns) != len(names):
        return None
    if any(len(col) != b for col in columns):
        return None
    present = stats.present
    features = tuple(f for f in names if f in present)
    if len(features) < len(names):
        # features the model does not hold: they must be ones it would not learn either,
        # with names and values the per-event path accepts (it names the others)
        unknown = [col for f, col in zip(names, columns, strict=True) if f not in present]
        try:
            check_feature_names(names)
        except InvalidEventError:
            return None
        if not _categories(unknown):
            return None
        if not full and any(any(v is not None for v in col) for col in unknown):
            return None  # a feature to learn: the per-event path adds it
    if not features:
        return None
    where = {f: j for j, f in enumerate(names)}
    batch = CategoricalColumns.of(stats, features, [columns[where[f]] for f in features], b)
    if batch is None:
        return None  # (a value new to a full feature is not a category)
    classes = BatchClasses.of(labels, {y: k for k, y in enumerate(labels)}, ys, ws)
    if classes is None or not batch.encode():
        return None
    a: float | np.ndarray = alpha
    if decay is not None:  # raw weights, and α in raw units before each event
        classes = classes.reweighted(decay.raw)
        if alpha:
            a = decay.smoothing(alpha)
    zeros = None
    weights = None
    if feature_weights is not None:
        weights = [feature_weights.get(f, 1.0) for f in features]
    if alpha == 0:
        found = batch.mle_log_likelihoods(classes, weights)
        if found is None:
            return None
        jll, zeros = found
    else:
        terms = batch.log_likelihoods(classes, a, weights)
        if terms is None:
            return None
        jll = terms
    n_classes = len(labels)
    if stats.class_prior is not None:  # log class_prior[y]
        fixed = fixed_log_priors(labels, stats.class_prior)
        if fixed is None:
            return None  # a class without a prior: left out of the per-event path's answers
        jll += fixed
    elif stats.fit_prior:  # log((N_y + α) / (N + Kα)), each before the event
        learned_before = exclusive_cumsum(np.where(classes.labelled, classes.w, 0.0))
        weights0 = np.fromiter(stats.class_weight.values(), np.float64, n_classes)
        jll += np.log(weights0[:, None] + classes.before + a)
        jll -= np.log(stats.total_weight + learned_before + n_classes * a)[None, :]
    else:
        jll -= math.log(n_classes)
    if zeros is not None:
        jll = resolve_zero_terms(jll.T, zeros.T).T
        if not np.isfinite(jll).all():
            return None  # a class of probability 0: the per-event path's records leave it out
    normalised = posteriors(jll)
    if normalised is None:
        return None  # (a score beyond the double range: the per-event path)
    log_proba, best = normalised

    # --- learn: nothing fails from here on
    learned = classes.learned(ys)
    batch.learn(classes, ys, learned, delta)
    whole = classes.unit and float(stats.total_weight).is_integer()
    whole = whole and all(float(c).is_integer() for c in stats.class_weight.values())
    stats.add_classes(learned.class_weights if whole else learned.event_weights)
    if delta is not None:
        if classes.unit:  # (new classes in the order of their first event)
            totals = dict(learned.class_weights)
            delta.add_classes([(labels[k], totals[labels[k]]) for k in classes.first_order()])
        else:
            delta.add_classes(learned.event_weights)
    return labels, log_proba, best, classes.n_labelled
