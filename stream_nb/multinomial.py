"""Multinomial Naive Bayes over token counts, with a growing vocabulary."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from itertools import zip_longest
from typing import Any

from stream_nb._params import check_alpha, check_bool, check_class_prior, log_prior
from stream_nb._text import _TokenLearner, check_counts

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

    Without forgetting, ``log(1 + N_{y,w}/α)`` is cached per (token, class)
    and refreshed by ``learn_one`` for the entries it touches, so a prediction
    computes one logarithm per class, none per token. With ``half_life`` the
    smoothing constant changes in raw units every event (see
    :class:`stream_nb.base.Learner`), so the logarithms are computed at
    prediction time instead (one per token and class); the cost stays
    O(tokens in x × classes).

    Parameters
    ----------
    alpha
        Smoothing constant α > 0 (1 is Laplace).
    fit_prior
        Learn class priors; ``False`` gives the uniform prior ``1/K``.
    class_prior
        Fixed priors by label (ratios matter). Seen classes missing from it are
        not scored.
    half_life
        Optional forgetting, see :class:`stream_nb.base.Learner`.

    Raises
    ------
    InvalidEventError
        From ``learn_one`` and the predict methods when a count is negative
        (``reason="negative_count"``), not a number (``"non_numeric"``) or
        infinite (``"non_finite"``); the model is left unchanged.

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

    _EXTRA = ("class_tokens",)  # T_y

    def __init__(
        self,
        alpha: float = 1.0,
        fit_prior: bool = True,
        class_prior: Mapping[Hashable, float] | None = None,
        *,
        half_life: float | None = None,
    ) -> None:
        super().__init__(half_life=half_life)
        self.alpha = check_alpha(alpha)
        self.fit_prior = check_bool(fit_prior, "fit_prior")
        self.class_prior = check_class_prior(class_prior)
        self._inv_alpha = 1.0 / self.alpha
        # Without forgetting: token -> [1.0, log1p(N_{0,w}/α), log1p(N_{1,w}/α), ...]
        # (the leading 1 counts the token into X at prediction, see below).
        self._logs: dict[str, list[float]] | None = {} if half_life is None else None

    def _params(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "fit_prior": self.fit_prior, "class_prior": self.class_prior}

    # ------------------------------------------------------------------ learning
    def _learn(self, x: Mapping[str, Any], y: Hashable, w: float) -> None:
        total = check_counts(x)
        k = self._add_weight(y, w)
        self._class_extra["class_tokens"][y] += total * w
        counts = self._counts
        logs = self._logs
        if logs is None:
            for token, c in x.items():
                if c > 0:
                    row = counts.get(token)
                    if row is None:
                        row = counts[token] = [0.0] * (k + 1)
                    try:
                        row[k] += c * w
                    except IndexError:
                        row.extend([0.0] * (k + 1 - len(row)))
                        row[k] = c * w
            return
        inv_alpha = self._inv_alpha
        log1p = _log1p
        j = k + 1  # class k's column in the log rows
        for token, c in x.items():
            if c > 0:
                row = counts.get(token)
                if row is None:
                    row = counts[token] = [0.0] * j
                    log_row = logs[token] = [0.0] * (j + 1)
                    log_row[0] = 1.0
                else:
                    log_row = logs[token]
                try:
                    n = row[k] = row[k] + c * w
                    log_row[j] = log1p(n * inv_alpha)
                except IndexError:  # first count of class k for this token
                    row.extend([0.0] * (j - len(row)))
                    log_row.extend([0.0] * (j + 1 - len(log_row)))
                    n = row[k] = c * w
                    log_row[j] = log1p(n * inv_alpha)

    # ------------------------------------------------------------------ prediction
    def _joint_log_likelihood(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        class_weight = self._class_weight
        if not class_weight:
            return {}
        check_counts(x)
        alpha = self.alpha / self._scale  # α in raw units, see Learner
        prior = log_prior(class_weight, self._total_weight, alpha, self.fit_prior, self.class_prior)
        # Σ_w x_w log((N_{y,w}+α)/(T_y+αV))
        #   = Σ_w x_w log1p(N_{y,w}/α) + X (log α − log(T_y + αV)),
        # X = Σ_{w in x ∩ vocabulary} x_w; terms with N_{y,w} = 0 vanish.
        n_classes = len(class_weight)
        logs = self._logs
        if logs is not None:
            # Columns of the cached rows summed in C: acc[0] = X, acc[k + 1] = class k
            # (rows are as long as the highest class index that touched the token).
            get = logs.get
            rows: list[list[float]] = []
            append = rows.append
            for token, c in x.items():
                row = get(token)
                if row is not None:
                    append(row if c == 1 else [c * v for v in row])
            if not rows:
                return prior
            acc: list[float] = list(map(sum, zip_longest(*rows, fillvalue=0.0)))
            big_x = acc[0]
        else:
            counts = self._counts
            inv_alpha = 1.0 / alpha
            log1p = _log1p
            acc = [0.0] * (n_classes + 1)
            big_x = 0.0
            for token, c in x.items():
                row = counts.get(token)
                if row is not None:
                    big_x += c
                    for k, n in enumerate(row, 1):
                        if n:
                            acc[k] += c * log1p(n * inv_alpha)
        if not big_x:
            return prior
        if len(acc) <= n_classes:
            acc.extend([0.0] * (n_classes + 1 - len(acc)))
        log = _log
        log_alpha = log(alpha)
        smoothing = alpha * len(self._counts)
        class_tokens = self._class_extra["class_tokens"]
        index = self._index
        return {
            y: p + acc[index[y] + 1] + big_x * (log_alpha - log(class_tokens[y] + smoothing))
            for y, p in prior.items()
        }

    # ------------------------------------------------------------------ caches
    def _rebuild(self) -> None:
        if self._logs is not None:
            inv_alpha = self._inv_alpha
            self._logs = {
                token: [1.0, *(_log1p(n * inv_alpha) for n in row)]
                for token, row in self._counts.items()
            }

    def _size(self) -> tuple[int, int, int]:
        classes, features, stored = super()._size()
        if self._logs is not None:
            stored += sum(map(len, self._logs.values()))
        return classes, features, stored
