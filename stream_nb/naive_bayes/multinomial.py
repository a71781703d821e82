"""Multinomial Naive Bayes over token counts, with a growing vocabulary."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from itertools import zip_longest
from typing import Any

import numpy as np

from stream_nb._mle import resolve_zero_terms_one, split_terms_one
from stream_nb._params import check_bool, check_class_prior, log_prior
from stream_nb._stores import rescale
from stream_nb.base import Capabilities
from stream_nb.naive_bayes._text import _TokenLearner, check_counts, count_stats

__all__ = ["MultinomialNB"]

_log = math.log
_log1p = math.log1p


class MultinomialNB(_TokenLearner):
    """Multinomial Naive Bayes with Lidstone smoothing, learned one event at a time.

    ``x`` maps token -> non-negative count. With ``N_{y,w}`` the (weighted)
    count of token ``w`` in class ``y``, ``T_y = Σ_w N_{y,w}`` and ``V`` the
    number of distinct tokens learned with a positive count so far::

        log P(w | y) = log((N_{y,w} + α) / (T_y + αV))
        score(y)     = log P(y) + Σ_{w in x, w in vocabulary} x_w log P(w | y)

    ``log P(y) = log((N_y + α) / (N + Kα))`` as in :class:`CategoricalNB`.
    Tokens never learned (and zero counts) contribute nothing. Prediction and
    learning cost O(tokens in x × classes); the vocabulary is never scanned.

    Without forgetting, ``log1p(N_{y,w}/α)`` is cached next to each count
    (one list per token, so learning does one lookup and one logarithm per
    token) and a prediction sums the cached columns of the tokens of ``x``
    in C: no logarithm per token, one per class. With ``half_life`` the
    smoothing constant changes in raw units every event (see
    :class:`stream_nb.base.Learner`), so the logarithms are computed at
    prediction time instead (one per token and class); the cost stays
    O(tokens in x × classes).

    Parameters
    ----------
    alpha
        Smoothing constant α ≥ 0 (1 is Laplace). 0 is maximum likelihood: zero
        counts give probability 0, decided by the rule of :mod:`stream_nb._mle`
        (docs/learners.md, "Maximum likelihood").
    fit_prior
        Learn class priors; ``False`` gives the uniform prior ``1/K``.
    class_prior
        Fixed priors by label (ratios matter). Seen classes missing from it are
        not scored.
    max_vocabulary
        Tokens kept before new ones share the overflow token (``None``:
        unbounded). The overflow token's count is the sum of theirs,
        ``x_other = Σ x_t``, so its terms are those of one more token and
        ``V ≤ max_vocabulary + 1``; see :mod:`stream_nb.naive_bayes._text`.
    feature_weights
        ``{token: w >= 0}``: each token's terms are multiplied by its weight
        (tokens left out, and the overflow token: 1). A weight of 0 removes the
        token from prediction while its counts are still learned. Models merge
        only with equal weights; batches go to the per-event path while weights
        are set.
    half_life
        Optional forgetting, see :class:`stream_nb.base.Learner`.
    max_classes, max_features
        Memory bounds, see :class:`stream_nb.base.Learner` (new tokens past
        ``max_features`` are not learned).

    Raises
    ------
    InvalidEventError
        From ``learn_one`` and the predict methods when a count is negative
        (``reason="negative_count"``), not a number (``"non_numeric"``) or
        infinite (``"non_finite"``), and from ``learn_one`` when a token name
        cannot be saved (``"invalid_features"``); the model is left unchanged.

    Examples
    --------
    >>> from stream_nb import MultinomialNB
    >>> model = MultinomialNB()
    >>> model.learn_one({"chinese": 2, "beijing": 1}, "china")
    >>> model.learn_one({"chinese": 1, "macao": 1}, "china")
    >>> model.learn_one({"tokyo": 1, "japan": 1, "chinese": 1}, "japan")
    >>> model.predict_one({"chinese": 3, "tokyo": 1, "japan": 1})
    'japan'
    >>> round(model.predict_proba_one({"chinese": 3, "tokyo": 1, "japan": 1})["china"], 4)
    0.4957
    """

    capabilities = Capabilities(
        nonnegative_counts=True,
        row_kernel=True,
        kernel_records_delta=True,
        informative_features=True,
    )

    _EXTRA = ("class_tokens",)  # T_y
    _ROW_LAYOUT = (2, 2)  # (see __init__)
    _KERNEL_MLE = True  # (see _count_kernels.multinomial_kernel)

    def _batch_kernel(self) -> Callable[..., tuple[list[Hashable], Any, Any] | None]:
        from stream_nb.naive_bayes._count_kernels import multinomial_kernel

        return multinomial_kernel

    def _informative_entries(self, top: int | None) -> list[dict[str, Any]]:
        from stream_nb.informative import multinomial_entries, state_stats

        if not self.alpha:
            return []  # maximum likelihood: a token seen in one class only has log-ratio inf
        stats, scale = state_stats(self)
        return multinomial_entries(stats, self.alpha / scale, self.class_prior, scale, top)

    def __init__(
        self,
        alpha: float = 1.0,
        *,
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
        self.fit_prior = check_bool(fit_prior, "fit_prior")
        self.class_prior = check_class_prior(class_prior)
        self._inv_alpha = 1.0 / self.alpha if self.alpha else 0.0
        # One row per token, interleaved so that learning touches one list:
        #   [1.0, log1p(N_{0,w}/α), N_{0,w}, log1p(N_{1,w}/α), N_{1,w}, ...]
        # The leading 1 counts the token into X at prediction; a row is as long
        # as the highest class index that touched it (missing entries are 0).
        # With forgetting the log slots stay 0 (α changes in raw units).
        # With alpha=0 there is nothing to cache (maximum likelihood: see _mle_scores).
        self._cache_logs = half_life is None and self.alpha > 0

    def _params(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "fit_prior": self.fit_prior,
            "class_prior": self.class_prior,
            **self._vocabulary_params(),
        }

    # ------------------------------------------------------------------ learning
    def _learn(self, x: Mapping[str, Any], y: Hashable, w: float) -> None:
        if self._rows_stale:
            self._fresh_rows()
        self._batch_counts_valid = False
        x, (total, smallest), k = self._start_learning(x, y, w, count_stats)
        self._class_extra["class_tokens"][y] += total * w
        rows = self._counts
        i_count = 2 * k + 2  # N_{k,w}; its log1p(N/α) sits just before
        size = i_count + 1
        cache = self._cache_logs
        inv_alpha = self._inv_alpha
        log1p = _log1p
        i_log = i_count - 1
        get = rows.get
        if cache and w == 1.0 and smallest > 0:  # the common case: no zero test, no product
            for token, c in x.items():
                row = get(token)
                if row is None:
                    row = rows[token] = [0.0] * size
                    row[0] = 1.0
                try:
                    n = row[i_count] = row[i_count] + c
                except IndexError:  # first count of class k for this token
                    row.extend([0.0] * (size - len(row)))
                    n = row[i_count] = c + 0.0  # stored as float, like the state
                row[i_log] = log1p(n * inv_alpha)
            return
        for token, c in x.items():
            if c > 0:
                row = rows.get(token)
                if row is None:
                    row = rows[token] = [0.0] * size
                    row[0] = 1.0
                try:
                    n = row[i_count] = row[i_count] + c * w
                except IndexError:  # first count of class k for this token
                    row.extend([0.0] * (size - len(row)))
                    n = row[i_count] = c * w
                if cache:
                    row[i_log] = log1p(n * inv_alpha)

    # ------------------------------------------------------------------ prediction
    def _joint_log_likelihood(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        class_weight = self._class_weight
        if not class_weight:
            return {}
        check_counts(x)
        if self._rows_stale:
            self._fresh_rows()
        x = self._weighted(self._scored_tokens(x))
        if self.alpha == 0:
            return self._mle_scores(x)
        alpha = self.alpha / self._scale  # α in raw units, see Learner
        prior = log_prior(class_weight, self._total_weight, alpha, self.fit_prior, self.class_prior)
        # Σ_w x_w log((N_{y,w}+α)/(T_y+αV))
        #   = Σ_w x_w log1p(N_{y,w}/α) + X (log α − log(T_y + αV)),
        # X = Σ_{w in x ∩ vocabulary} x_w; terms with N_{y,w} = 0 vanish.
        get = self._counts.get
        if self._cache_logs:
            # Columns of the rows summed in C: acc[0] = X, acc[2k + 1] = Σ x_w log1p(N_{k,w}/α)
            # (the count columns are summed too and ignored).
            rows: list[list[float]] = []
            append = rows.append
            for token, c in x.items():
                row = get(token)
                if row is not None:
                    append(row if c == 1 else [c * v for v in row])
            if not rows:
                return prior
            acc: list[float] = list(map(sum, zip_longest(*rows, fillvalue=0.0)))
        else:
            inv_alpha = 1.0 / alpha
            log1p = _log1p
            acc = [0.0] * (2 * len(class_weight) + 1)
            for token, c in x.items():
                row = get(token)
                if row is not None:
                    acc[0] += c
                    for i in range(2, len(row), 2):
                        n = row[i]
                        if n:
                            acc[i - 1] += c * log1p(n * inv_alpha)
        big_x = acc[0]
        if not big_x:
            return prior
        log = _log
        log_alpha = log(alpha)
        smoothing = alpha * len(self._counts)
        class_tokens = self._class_extra["class_tokens"]
        index = self._index
        width = len(acc)
        out = {}
        for y, p in prior.items():
            i = 2 * index[y] + 1
            out[y] = (
                p
                + (acc[i] if i < width else 0.0)
                + big_x * (log_alpha - log(class_tokens[y] + smoothing))
            )
        return out

    def _mle_scores(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        """The scores with ``alpha = 0``: ``x_w log(N_{y,w} / T_y)`` per token of ``x``
        (checked, bounded) with a positive count, a zero ``N_{y,w}`` being one
        zero-probability term of :mod:`stream_nb._mle`'s rule."""
        finite, zeros = split_terms_one(
            log_prior(self._class_weight, self._total_weight, 0.0, self.fit_prior, self.class_prior)
        )
        get = self._counts.get
        class_tokens = self._class_extra["class_tokens"]
        index = self._index
        log = _log
        for token, c in x.items():
            row = get(token)
            if row is None or not c > 0:
                continue
            width = len(row)
            for y in finite:
                i = 2 * index[y] + 2
                n = row[i] if i < width else 0.0
                if n > 0:
                    finite[y] += c * log(n / class_tokens[y])
                else:
                    zeros[y] += 1
        return resolve_zero_terms_one(finite, zeros)

    # ------------------------------------------------------------------ row layout
    def _sparse_counts(self) -> dict[str, dict[Hashable, float]]:
        self._fresh_rows()
        labels = list(self._class_weight)
        return {
            token: {labels[i // 2 - 1]: row[i] for i in range(2, len(row), 2) if row[i]}
            for token, row in self._counts.items()
        }

    def _set_rows(self, dense: dict[str, list[float]]) -> None:
        rows = {}
        for token, counts in dense.items():
            row = [0.0] * (2 * len(counts) + 1)
            row[0] = 1.0
            row[2::2] = counts
            rows[token] = row
        self._counts = rows

    def _rows_from_columns(self, tokens: Sequence[Any], columns: Any) -> None:
        # the rows' layout, log1p(N/α) with math.log1p as _learn computes it
        n_classes, n = columns.shape
        full = np.zeros((n, 2 * n_classes + 1))
        full[:, 0] = 1.0
        counts = columns.T
        full[:, 2::2] = counts
        if self._cache_logs:
            scaled = (counts * self._inv_alpha).ravel().tolist()
            full[:, 1::2] = np.fromiter(map(_log1p, scaled), np.float64, len(scaled)).reshape(
                n, n_classes
            )
        nonzero = counts != 0
        classes = (n_classes - np.argmax(nonzero[:, ::-1], axis=1)) * nonzero.any(axis=1)
        rows = self._counts
        for token, row, k in zip(tokens, full.tolist(), classes.tolist(), strict=True):
            rows[token] = row if k == n_classes else row[: 2 * k + 1]

    def _rebuild(self) -> None:
        if not self._cache_logs:
            return
        inv_alpha = self._inv_alpha
        for row in self._counts.values():
            for i in range(2, len(row), 2):
                row[i - 1] = _log1p(row[i] * inv_alpha)

    def _rescale(self, factor: float) -> None:
        self._fresh_rows()
        self._batch_counts_valid = False
        rescale(self._class_weight, factor)
        self._total_weight *= factor
        rescale(self._class_extra["class_tokens"], factor)
        for row in self._counts.values():
            row[2::2] = [n * factor for n in row[2::2]]
        self._rebuild()

    def _size(self) -> tuple[int, int, int]:
        self._fresh_rows()
        classes = len(self._class_weight)
        stored = 2 * classes + sum(map(len, self._counts.values()))
        return classes, len(self._counts), stored
