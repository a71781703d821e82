"""Complement Naive Bayes over token counts (scikit-learn semantics), growing vocabulary."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from itertools import zip_longest
from typing import Any

from stream_nb._params import check_alpha, check_bool
from stream_nb._text import _TokenLearner, check_counts

__all__ = ["ComplementNB"]

_log = math.log
_fsum = math.fsum

#: Without forgetting the per-class sums Σ_w log(C_{y,w} + α) are updated by
#: differences; they are recomputed exactly (math.fsum) once the number of
#: incremental updates since the last refresh exceeds max(this, cached terms),
#: which bounds float drift while costing O(1) amortised per update.
_REFRESH_MIN_UPDATES = 1 << 16


class ComplementNB(_TokenLearner):
    """Complement Naive Bayes (Rennie et al. 2003), learned one event at a time.

    With ``N_{y,w}`` the (weighted) count of token ``w`` in class ``y`` and
    ``V`` the number of distinct tokens learned with a positive count, the
    complement counts are ``C_{y,w} = Σ_{y'≠y} N_{y',w}`` and::

        θ_{y,w}      = (C_{y,w} + α) / (Σ_w C_{y,w} + αV)
        weight_{y,w} = log θ_{y,w}     (divided by Σ_{w∈V} |log θ_{y,w}| when norm=True)
        score(y)     = −Σ_{w in x, w in vocabulary} x_w · weight_{y,w}

    as in scikit-learn's ``ComplementNB`` (no prior term: with a single class
    scikit-learn adds its log prior, log 1 = 0, and the class gets probability
    1 either way). Tokens never learned contribute nothing. With ``V ≤ 1``
    every ``θ`` is 1 and every class scores 0.

    Cost: O(tokens in x × classes) per prediction and per learned event; the
    vocabulary is never scanned. Without forgetting, ``log(N_w + α)`` and
    ``log((N_w + α) / (C_{y,w} + α))`` are cached per token and refreshed by
    ``learn_one`` for the tokens it touches, together with the per-class sums
    ``Σ_w log(C_{y,w} + α)`` that ``norm=True`` needs (a new class starts from
    the sum over all tokens, ``Σ_w log(N_w + α)``); they are recomputed
    exactly every so often to bound float drift (amortised O(1)). With
    ``half_life`` the smoothing constant changes in raw units after every
    event, so ``norm=True`` must recompute those sums at the first prediction
    after a learn: **O(stored counts) once per learned event** (the
    ``norm=False`` path stays O(tokens in x × classes)).

    Parameters
    ----------
    alpha
        Smoothing constant α > 0.
    norm
        Normalise the weights of each class by their sum of absolute values.
    half_life
        Optional forgetting, see :class:`stream_nb.base.Learner`.

    Raises
    ------
    InvalidEventError
        When a count is negative, not a number or infinite (see
        :class:`MultinomialNB`); the model is left unchanged.

    Examples
    --------
    >>> from stream_nb import ComplementNB
    >>> model = ComplementNB()
    >>> model.learn_one({"chinese": 2, "beijing": 1}, "china")
    >>> model.learn_one({"chinese": 1, "macao": 1}, "china")
    >>> model.learn_one({"tokyo": 1, "japan": 1, "chinese": 1}, "japan")
    >>> model.predict_one({"tokyo": 1, "japan": 1})
    'japan'
    >>> round(model.predict_proba_one({"chinese": 3, "tokyo": 1, "japan": 1})["china"], 4)
    0.3959
    """

    _EXTRA = ("class_tokens",)  # T_y

    def __init__(
        self, alpha: float = 1.0, norm: bool = False, *, half_life: float | None = None
    ) -> None:
        super().__init__(half_life=half_life)
        self.alpha = check_alpha(alpha)
        self.norm = check_bool(norm, "norm")
        # Without forgetting: token -> [1.0, log(N_w + α), d_0, d_1, ...] with
        # d_k = log((N_w + α) / (C_{k,w} + α)) (0 when N_{k,w} = 0).
        self._cache: dict[str, list[float]] | None = {} if half_life is None else None
        # Σ_w log(C_{k,w} + α) = H − D[k], H = Σ_w log(N_w + α), D[k] = Σ_w d_k.
        self._sum_log_total = 0.0  # H
        self._sum_d: list[float] = []  # D by class index
        self._updates = 0  # incremental updates of H and D since the last exact refresh
        # α (raw units) the sums were computed for; NaN = stale
        self._sums_alpha = self.alpha if half_life is None else math.nan

    def _params(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "norm": self.norm}

    # ------------------------------------------------------------------ learning
    def _learn(self, x: Mapping[str, Any], y: Hashable, w: float) -> None:
        total = check_counts(x) * w
        k = self._add_weight(y, w)
        self._class_extra["class_tokens"][y] += total
        # N_w = Σ_y N_{y,w} is always recomputed as sum(row), never kept as a running
        # sum, so that a model rebuilt from its state is bit-for-bit the same.
        counts = self._counts
        cache = self._cache
        if cache is None:
            self._sums_alpha = math.nan  # stale: recomputed at the next norm=True prediction
            for token, c in x.items():
                if c > 0:
                    row = counts.get(token)
                    if row is None:
                        row = counts[token] = [0.0] * (k + 1)
                    elif len(row) <= k:
                        row.extend([0.0] * (k + 1 - len(row)))
                    row[k] += c * w
            return
        alpha = self.alpha
        log = _log
        sum_d = self._sum_d
        if len(sum_d) <= k:
            sum_d.extend([0.0] * (k + 1 - len(sum_d)))
        h = self._sum_log_total
        updates = 0
        for token, c in x.items():
            if c > 0:
                d = c * w
                row = counts.get(token)
                if row is None:
                    row = counts[token] = [0.0] * (k + 1)
                    row[k] = d
                    lw = log(d + alpha)
                    entry = cache[token] = [0.0] * (k + 3)
                    entry[0] = 1.0
                    entry[1] = lw
                    dk = entry[k + 2] = log((d + alpha) / alpha)
                    h += lw
                    sum_d[k] += dk
                    updates += 2
                    continue
                if len(row) <= k:
                    row.extend([0.0] * (k + 1 - len(row)))
                    cache[token].extend([0.0] * (k + 3 - len(cache[token])))
                row[k] += d
                nw = sum(row)
                entry = cache[token]
                lw = log(nw + alpha)
                h += lw - entry[1]
                entry[1] = lw
                # N_w changed, so every class's C_{j,w} except class k's changed.
                shifted = nw + alpha
                for j, n in enumerate(row, 2):
                    if n:
                        dj = log(shifted / (nw - n + alpha))
                        sum_d[j - 2] += dj - entry[j]
                        entry[j] = dj
                updates += 1 + len(row)
        self._sum_log_total = h
        self._updates += updates
        if self._updates > max(_REFRESH_MIN_UPDATES, len(cache) * (len(sum_d) + 1)):
            self._refresh_sums()

    # ------------------------------------------------------------------ aggregates
    def _refresh_sums(self) -> None:
        """Recompute H and D exactly from the counts for the current α (raw units)."""
        alpha = self.alpha / self._scale
        log = _log
        n_classes = len(self._class_weight)
        lw = []
        terms: list[list[float]] = [[] for _ in range(n_classes)]
        for row in self._counts.values():
            nw = sum(row)
            shifted = nw + alpha
            lw.append(log(shifted))
            for k, n in enumerate(row):
                if n:
                    terms[k].append(log(shifted / (nw - n + alpha)))
        self._sum_log_total = _fsum(lw)
        self._sum_d = [_fsum(t) for t in terms]
        self._updates = 0
        self._sums_alpha = alpha

    def _stats_to_state(self) -> dict[str, Any]:
        # Refresh the drifting sums first, as loading does, so that the copy
        # predicts bit-for-bit like this model (the sums are not in the state).
        self._refresh_sums()
        return super()._stats_to_state()

    def _rebuild(self) -> None:
        if self._cache is not None:
            alpha = self.alpha
            log = _log
            cache = {}
            for token, row in self._counts.items():
                nw = sum(row)
                shifted = nw + alpha
                cache[token] = [
                    1.0,
                    log(shifted),
                    *(log(shifted / (nw - n + alpha)) if n else 0.0 for n in row),
                ]
            self._cache = cache
        self._refresh_sums()

    # ------------------------------------------------------------------ prediction
    def _joint_log_likelihood(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        class_weight = self._class_weight
        if not class_weight:
            return {}
        check_counts(x)
        n_classes = len(class_weight)
        vocabulary = len(self._counts)
        if vocabulary <= 1:  # every θ is 1
            return dict.fromkeys(class_weight, 0.0)
        alpha = self.alpha / self._scale  # α in raw units, see Learner
        log = _log
        # Σ_w x_w log θ_{y,w} = Σ_w x_w log(N_w + α) − Σ_w x_w d_{y,w} − X log(T − T_y + αV)
        cache = self._cache
        if cache is not None:
            get = cache.get
            rows: list[list[float]] = []
            append = rows.append
            for token, c in x.items():
                row = get(token)
                if row is not None:
                    append(row if c == 1 else [c * v for v in row])
            acc: list[float] = (
                list(map(sum, zip_longest(*rows, fillvalue=0.0))) if rows else [0.0, 0.0]
            )
        else:
            counts = self._counts
            acc = [0.0] * (n_classes + 2)
            for token, c in x.items():
                row = counts.get(token)
                if row is not None:
                    nw = sum(row)
                    shifted = nw + alpha
                    acc[0] += c
                    acc[1] += c * log(shifted)
                    for j, n in enumerate(row, 2):
                        if n:
                            acc[j] += c * log(shifted / (nw - n + alpha))
        if len(acc) < n_classes + 2:
            acc.extend([0.0] * (n_classes + 2 - len(acc)))
        big_x, base = acc[0], acc[1]
        smoothing = alpha * vocabulary
        class_tokens = self._class_extra["class_tokens"]
        total = sum(class_tokens.values())  # T
        if not self.norm:
            return {
                y: acc[k + 2] - base + big_x * log(total - class_tokens[y] + smoothing)
                for k, y in enumerate(class_weight)
            }
        if self._sums_alpha != alpha:
            self._refresh_sums()
        h = self._sum_log_total
        sum_d = self._sum_d
        out = {}
        for k, y in enumerate(class_weight):
            log_denominator = log(total - class_tokens[y] + smoothing)
            # Σ_w |log θ_{y,w}| = V log(T − T_y + αV) − Σ_w log(C_{y,w} + α)
            d = sum_d[k] if k < len(sum_d) else 0.0
            abs_sum = vocabulary * log_denominator - (h - d)
            out[y] = (acc[k + 2] - base + big_x * log_denominator) / abs_sum
        return out
