"""Bernoulli Naive Bayes over binary features, without scanning the vocabulary."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping
from itertools import repeat
from operator import add, mul, sub, truediv
from typing import Any

from stream_nb._exceptions import ConfigError
from stream_nb._mle import resolve_zero_terms_one, split_terms_one
from stream_nb._params import check_bool, check_class_prior, log_prior
from stream_nb.base import Capabilities
from stream_nb.naive_bayes._text import _TokenLearner, binary_on, threshold_on

__all__ = ["BernoulliNB"]

_log = math.log
_log1p = math.log1p
_fsum = math.fsum
_INF = math.inf


def _check_binarize(value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(
            f"binarize must be a finite number (the threshold: a feature is on when its "
            f"value is > binarize) or None (values are already True/False or 1/0), got {value!r}"
        )
    return float(value)


class BernoulliNB(_TokenLearner):
    """Bernoulli Naive Bayes with Lidstone smoothing, learned one event at a time.

    A feature is *on* (``b_w = 1``) when its value is ``> binarize``; absent
    features are off. ``V`` is every feature name ever learned (on or off),
    ``N_{y,w}`` the weight of class-``y`` events in which ``w`` was on::

        p_{y,w}  = (N_{y,w} + α) / (N_y + 2α)
        score(y) = log P(y) + Σ_{w∈V} [b_w log p_{y,w} + (1 − b_w) log(1 − p_{y,w})]

    with ``log P(y) = log((N_y + α) / (N + Kα))`` as in :class:`CategoricalNB`.
    Features of ``x`` never learned are not in ``V`` and contribute nothing.

    How a prediction avoids the vocabulary: the score is split as ::

        Σ_{w∈V} log(1 − p_{y,w})  +  Σ_{w on in x} log(p_{y,w} / (1 − p_{y,w}))

    The second sum costs O(features in x × classes). The first one, ``A_y``,
    is kept per class. Words never on in class ``y`` share one term,
    ``(V − |S_y|) · log((N_y + α) / (N_y + 2α))``, O(1). The others depend
    on ``N_y`` (which changes with every class-``y`` event) and on their own
    count ``c`` only, so they are grouped by count: a histogram
    ``m_y[c]`` = number of words with ``N_{y,w} = c``, updated in
    O(features in x) per learned event, and
    ``Σ_c m_y[c] · log((N_y − c + α) / (N_y + 2α))`` is recomputed exactly
    (``math.fsum``, so it never drifts) for a class whose statistics changed
    since the last prediction.

    Cost, honestly: that recomputation is O(D_y), the number of *distinct*
    counts in class ``y`` — not the vocabulary. With unit weights counts are
    integers, so ``D_y ≤ min(|S_y|, N_y)`` and for text it grows like the
    square root of the data (a few hundred on a 20,000-word Zipf stream),
    and only the class just learned needs it, so a prequential step costs
    O(features in x × classes + D_y). We know of no exact update in
    O(features in x): after a class-``y`` event every word that was off in it
    changes its term. With
    arbitrary real weights, or with ``half_life`` (raw counts are then all
    distinct and α changes in raw units every event, so *every* class is
    recomputed), ``D_y`` becomes the number of words ever on in class ``y``:
    O(stored counts) per prediction after a learn.

    Parameters
    ----------
    alpha
        Smoothing constant α ≥ 0 (1 is Laplace). 0 is maximum likelihood: zero
        counts give probability 0, decided by the rule of :mod:`stream_nb._mle`
        (docs/learners.md, "Maximum likelihood").
    binarize
        Threshold: a value ``> binarize`` is on. ``None`` means values are
        already binary: ``True``/``1`` is on, ``False``/``0`` off, anything
        else is rejected.
    fit_prior
        Learn class priors; ``False`` gives the uniform prior ``1/K``.
    class_prior
        Fixed priors by label (ratios matter). Seen classes missing from it are
        not scored.
    max_vocabulary
        Features kept before new ones share the overflow feature (``None``:
        unbounded), which is on when any of them is on: ``b_other = max_t b_t``
        (their values' maximum is binarised); ``V ≤ max_vocabulary + 1``, see
        :mod:`stream_nb.naive_bayes._text`. Merging can only bound the overflow counts of
        the other model by its class weights (they are exact when at most one
        overflow feature is on per event).
    feature_weights
        ``{token: w >= 0}``: each token's terms are multiplied by its weight
        (tokens left out, and the overflow token: 1). A weight of 0 removes the
        token from prediction while its counts are still learned. Models merge
        only with equal weights; batches go to the per-event path while weights
        are set.
    half_life
        Optional forgetting, see :class:`stream_nb.base.Learner`.
    max_classes, max_features
        Memory bounds, see :class:`stream_nb.base.Learner`.

    Raises
    ------
    InvalidEventError
        When a value cannot be compared with ``binarize`` or is NaN
        (``reason="non_numeric"``), or with ``binarize=None`` is not 0/1
        (``"non_binary"``), or a feature name cannot be saved
        (``"invalid_features"``); the model is left unchanged.

    Examples
    --------
    >>> from stream_nb import BernoulliNB
    >>> model = BernoulliNB()
    >>> model.learn_one({"chinese": 2, "beijing": 1}, "china")
    >>> model.learn_one({"chinese": 1, "macao": 1}, "china")
    >>> model.learn_one({"tokyo": 1, "japan": 1, "chinese": 1}, "japan")
    >>> model.predict_one({"chinese": 3, "tokyo": 1, "japan": 1})
    'japan'
    >>> round(model.predict_proba_one({"chinese": 1})["china"], 4)
    0.8277
    """

    capabilities = Capabilities(
        row_kernel=True, kernel_records_delta=True, informative_features=True
    )

    def _batch_kernel(self) -> Callable[..., tuple[list[Hashable], Any, Any] | None]:
        from stream_nb.naive_bayes._bernoulli_batch import bernoulli_kernel

        return bernoulli_kernel

    def _informative_entries(self, top: int | None) -> list[dict[str, Any]]:
        from stream_nb.informative import bernoulli_entries, state_stats

        if not self.alpha:
            return []  # maximum likelihood: a token seen in one class only has log-ratio inf
        stats, scale = state_stats(self)
        return bernoulli_entries(stats, self.alpha / scale, self.class_prior, scale, top)

    def __init__(
        self,
        alpha: float = 1.0,
        *,
        binarize: float | None = 0.0,
        fit_prior: bool = True,
        class_prior: Mapping[Hashable, float] | None = None,
        max_vocabulary: int | None = None,
        feature_weights: Mapping[Hashable, float] | None = None,
        half_life: float | None = None,
        max_classes: int | None = None,
        max_features: int | None = None,
    ) -> None:
        super().__init__(
            alpha,
            max_vocabulary=max_vocabulary,
            half_life=half_life,
            max_classes=max_classes,
            max_features=max_features,
            feature_weights=feature_weights,
        )
        self.binarize = _check_binarize(binarize)
        self.fit_prior = check_bool(fit_prior, "fit_prior")
        self.class_prior = check_class_prior(class_prior)
        # By class index: histogram count -> number of words with that N_{y,w} > 0,
        # |S_y| (words with a positive count), cached aggregate or None when stale.
        self._hist: list[dict[float, int]] = []
        self._on_words: list[int] = []
        self._agg: list[float | None] = []
        self._agg_alpha = self.alpha  # α (raw units) the cached aggregates are for

    def _params(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "binarize": self.binarize,
            "fit_prior": self.fit_prior,
            "class_prior": self.class_prior,
            **self._vocabulary_params(),
        }

    _COMBINE = staticmethod(max)  # the overflow feature is on when any of its features is
    _LEARNS_ZEROS = True
    _COUNTS_BOUNDED_BY_CLASS = True

    def _overflow_counts(
        self, by_class: dict[Hashable, float], their_weights: Mapping[Hashable, float]
    ) -> dict[Hashable, float]:
        # Σ_t N_{y,t} counts an event once per overflow feature on in it; the
        # events with any of them on are at most N_y (exact with at most one).
        return {y: min(n, their_weights[y]) for y, n in by_class.items()}

    def _on(self, x: Mapping[str, Any]) -> list[str]:
        threshold = self.binarize
        return binary_on(x) if threshold is None else threshold_on(x, threshold)

    # ------------------------------------------------------------------ learning
    def _learn(self, x: Mapping[str, Any], y: Hashable, w: float) -> None:
        if self._rows_stale:
            self._fresh_rows()
        self._batch_counts_valid = False
        x, on, k = self._start_learning(x, y, w, self._on)
        if k == len(self._hist):
            self._hist.append({})
            self._on_words.append(0)
            self._agg.append(None)
        counts = self._counts
        for feature in x:
            if feature not in counts:
                counts[feature] = []
        hist = self._hist[k]
        new_words = 0
        for feature in on:
            row = counts[feature]
            if len(row) <= k:
                row.extend([0.0] * (k + 1 - len(row)))
            old = row[k]
            new = row[k] = old + w
            if old:
                m = hist[old] - 1
                if m:
                    hist[old] = m
                else:
                    del hist[old]
            else:
                new_words += 1
            hist[new] = hist.get(new, 0) + 1
        self._on_words[k] += new_words
        self._agg[k] = None

    # ------------------------------------------------------------------ aggregates
    def _aggregate(self, k: int, n_y: float, alpha: float) -> float:
        """``Σ_{w: N_{y,w}>0} log(1 − p_{y,w})`` for class index ``k``, exactly (with
        ``alpha = 0`` its finite part: the words on in every class-``y`` event, whose
        ``1 − p`` is 0, are left out and counted by :meth:`_mle_scores`)."""
        hist = self._hist[k]
        if alpha == 0:
            log = _log
            value = _fsum(m * log((n_y - c) / n_y) for c, m in hist.items() if c < n_y)
            self._agg[k] = value
            return value
        # Σ_c m_c · log((N_y − c + α) / (N_y + 2α)), the loop in C (map chain);
        # N_y − c first, then + α, so a tiny α is not lost when c ≈ N_y.
        value = _fsum(
            map(
                mul,
                hist.values(),
                map(
                    _log,
                    map(
                        truediv,
                        map(add, map(sub, repeat(n_y), hist), repeat(alpha)),
                        repeat(n_y + 2.0 * alpha),
                    ),
                ),
            )
        )
        self._agg[k] = value
        return value

    def _rebuild(self) -> None:
        self._fresh_rows()
        n_classes = len(self._class_weight)
        hist: list[dict[float, int]] = [{} for _ in range(n_classes)]
        for row in self._counts.values():
            for k, c in enumerate(row):
                if c:
                    h = hist[k]
                    h[c] = h.get(c, 0) + 1
        self._hist = hist
        self._on_words = [sum(h.values()) for h in hist]
        self._agg = [None] * n_classes

    # ------------------------------------------------------------------ prediction
    def _split_on_terms(
        self, on: list[str], n_y: list[float], ratio: list[float], alpha: float
    ) -> list[float]:
        """The on-word sums of :meth:`_joint_log_likelihood` with two logarithms per term,
        ``log((c + α) / (N_y − c + α)) + log((N_y + α) / α)``: each factor stays within
        the double range for every α of :mod:`stream_nb.limits`, their product may not."""
        acc = [0.0] * len(n_y)
        counts = self._counts
        log = _log
        for feature in on:
            row = counts.get(feature)
            if row is not None:
                for k, c in enumerate(row):
                    if c:
                        acc[k] += log((c + alpha) / (n_y[k] - c + alpha)) + log(ratio[k])
        return acc

    def _joint_log_likelihood(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        class_weight = self._class_weight
        if not class_weight:
            return {}
        on = self._on(x)
        if self._rows_stale:
            self._fresh_rows()
        features = self._scored_tokens(x)
        if features is not x:
            on = self._on(features)
        alpha = self.alpha / self._scale  # α in raw units, see Learner
        if alpha != self._agg_alpha:  # forgetting: every aggregate is stale
            self._agg = [None] * len(self._agg)
            self._agg_alpha = alpha
        if alpha == 0:
            finite, zeros = self._mle_scores(on)
            if self.feature_weights is not None:
                self._reweight(finite, zeros, on, 0.0)
            return resolve_zero_terms_one(finite, zeros)
        prior = log_prior(class_weight, self._total_weight, alpha, self.fit_prior, self.class_prior)
        n_y = list(class_weight.values())
        # Per on-word w and class with N_{y,w} = c > 0:
        #   log(p/(1−p)) − log(α/(N_y+α)) = log((c+α)/α · (N_y+α)/(N_y−c+α));
        # classes with c = 0 get log(α/(N_y+α)) from the n_on term below.
        ratio = [(n + alpha) / alpha for n in n_y]
        acc = [0.0] * len(n_y)
        n_on = 0
        counts = self._counts
        log = _log
        for feature in on:
            row = counts.get(feature)
            if row is not None:
                n_on += 1
                for k, c in enumerate(row):
                    if c:
                        acc[k] += log((c + alpha) * ratio[k] / (n_y[k] - c + alpha))
        if acc and max(acc) == _INF:  # a product past the double range (α < 1e-50)
            acc = self._split_on_terms(on, n_y, ratio, alpha)
        vocabulary = len(counts)
        on_words = self._on_words
        agg = self._agg
        index = self._index
        log1p = _log1p
        out = {}
        for y, p in prior.items():
            k = index[y]
            n = n_y[k]
            a = agg[k]
            if a is None:
                a = self._aggregate(k, n, alpha)
            shifted = n + alpha
            # words never on in class y: log(1 − p) = log((N_y+α)/(N_y+2α)) = −log1p(α/(N_y+α))
            out[y] = (
                p
                + a
                - (vocabulary - on_words[k]) * log1p(alpha / shifted)
                + n_on * log(alpha / shifted)
                + acc[k]
            )
        if self.feature_weights is not None:
            self._reweight(out, None, on, alpha)
        return out

    def _reweight(
        self,
        scores: dict[Hashable, float],
        zeros: dict[Hashable, int] | None,
        on: list[str],
        alpha: float,
    ) -> None:
        """Turn unweighted scores into weighted ones (``feature_weights``): add
        ``(w − 1)`` times the term of each weighted feature of the vocabulary, on or
        off, in place; O(weighted features × classes). With ``alpha = 0``
        (``zeros`` given) a zero-probability term of weight 0 stops counting.
        """
        weights = self.feature_weights
        if not weights:
            return
        counts: Mapping[Any, list[float]] = self._counts
        index = self._index
        n_y = list(self._class_weight.values())
        is_on = set(on)
        log = _log
        for feature, weight in weights.items():
            row = counts.get(feature)
            if row is None or weight == 1.0:
                continue
            width = len(row)
            switched_on = feature in is_on
            for y in scores:
                k = index[y]
                n = n_y[k]
                c = row[k] if k < width else 0.0
                if zeros is not None:  # maximum likelihood
                    p_zero = not c > 0 if switched_on else c >= n
                    if p_zero:
                        if weight == 0:
                            zeros[y] -= 1
                    elif switched_on:
                        scores[y] += (weight - 1.0) * log(c / n)
                    else:
                        scores[y] += (weight - 1.0) * log((n - c) / n)
                    continue
                numerator = c + alpha if switched_on else (n - c) + alpha
                scores[y] += (weight - 1.0) * log(numerator / (n + 2.0 * alpha))

    def _mle_scores(self, on: list[str]) -> tuple[dict[Hashable, float], dict[Hashable, int]]:
        """The scores with ``alpha = 0`` (``p_{y,w} = N_{y,w} / N_y``) of the words ``on``,
        as ``(finite, zeros)`` for :mod:`stream_nb._mle`'s rule.

        Zero-probability terms of :mod:`stream_nb._mle`'s rule: an on word never
        on in class ``y`` (``p = 0``) and an off word of the vocabulary on in
        every class-``y`` event (``1 − p = 0``). The off words are those of the
        cached aggregate (:meth:`_aggregate`), with the histogram's count of
        words at ``N_{y,w} = N_y``; each on word then trades its off term for
        its on term. O(features in x × classes + D_y), as with ``alpha > 0``.
        """
        finite, zeros = split_terms_one(
            log_prior(self._class_weight, self._total_weight, 0.0, self.fit_prior, self.class_prior)
        )
        n_y = list(self._class_weight.values())
        index = self._index
        agg = self._agg
        hist = self._hist
        for y in finite:
            k = index[y]
            n = n_y[k]
            if n > 0:
                a = agg[k]
                finite[y] += self._aggregate(k, n, 0.0) if a is None else a
                zeros[y] += sum(m for c, m in hist[k].items() if c >= n)
        counts = self._counts
        log = _log
        for feature in on:
            row = counts.get(feature)
            if row is None:
                continue
            width = len(row)
            for y in finite:
                k = index[y]
                c = row[k] if k < width else 0.0
                n = n_y[k]
                if not c > 0:
                    zeros[y] += 1  # p = 0 (its off term was log 1 = 0)
                elif c >= n:
                    zeros[y] -= 1  # 1 − p was 0; p = 1 adds log 1 = 0
                else:
                    finite[y] += log(c / n) - log((n - c) / n)
        return finite, zeros
