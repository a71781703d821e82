"""Complement Naive Bayes over token counts (scikit-learn semantics), growing vocabulary."""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping
from typing import Any

import numpy as np

from stream_nb._mle import resolve_zero_terms_one
from stream_nb._params import check_bool
from stream_nb.base import Capabilities
from stream_nb.naive_bayes._text import _TokenLearner, check_counts

__all__ = ["ComplementNB"]

_log = math.log
_log1p = math.log1p
_fsum = math.fsum

#: With ``norm=True`` and no forgetting the per-class sums Σ_w log(C_{y,w} + α)
#: are updated by differences; they are recomputed exactly (math.fsum) once
#: the number of incremental updates since the last refresh exceeds
#: max(this, _REFRESH_RATIO × stored counts): float drift stays bounded (see
#: docs/text.md for measurements) at an amortised cost of 1/_REFRESH_RATIO.
_REFRESH_MIN_UPDATES = 1 << 16
_REFRESH_RATIO = 16


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
    vocabulary is never scanned. ``N_w = Σ_y N_{y,w}`` is the sum of the
    token's short per-class row. ``norm=True`` also needs
    ``Σ_{w∈V} |log θ_{y,w}| = V log(T − T_y + αV) − Σ_{w∈V} log(C_{y,w} + α)``;
    the last sum is kept per class as ``H − D_y`` with ``H = Σ_w log(N_w + α)``
    (the value for a class never seen, so a new class costs nothing) and
    ``D_y = Σ_{w: N_{y,w}>0} log((N_w + α) / (C_{y,w} + α))``. A learned
    token ``w`` of class ``k`` and weight ``d`` changes ``H`` and ``D_k`` by
    ``δ = log1p(d / (N_w + α))`` and, for every other class ``j`` with
    ``N_{j,w} > 0``, ``D_j`` by ``δ − log1p(d / (C_{j,w} + α))``: one
    logarithm per (token, class), O(tokens in x × classes). The sums are
    recomputed exactly every so often to bound float drift (amortised
    O(1)). With ``half_life`` the smoothing constant changes in raw units
    after every event and no such update exists, so ``norm=True`` recomputes
    the sums at the first prediction after a learn: **O(stored counts) once
    per learned event** (``norm=False`` stays O(tokens in x × classes)).

    Parameters
    ----------
    alpha
        Smoothing constant α ≥ 0. 0 is maximum likelihood, a token never seen
        outside a class being evidence for it (docs/learners.md, "Maximum
        likelihood").
    norm
        Normalise the weights of each class by their sum of absolute values.
    max_vocabulary
        Tokens kept before new ones share the overflow token, whose count is
        the sum of theirs (``None``: unbounded), see :mod:`stream_nb.naive_bayes._text`.
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
        When a count is negative, not a number or infinite, or a token name
        cannot be saved (see :class:`MultinomialNB`); the model is left
        unchanged.

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

    capabilities = Capabilities(
        nonnegative_counts=True,
        row_kernel=True,
        kernel_records_delta=True,
        informative_features=True,
    )

    _EXTRA = ("class_tokens",)  # T_y

    def _batch_kernel(self) -> Callable[..., tuple[list[Hashable], Any, Any] | None]:
        from stream_nb.naive_bayes._count_kernels import complement_kernel

        return complement_kernel

    def _informative_entries(self, top: int | None) -> list[dict[str, Any]]:
        from stream_nb.informative import complement_entries, state_stats

        if not self.alpha:
            return []  # maximum likelihood: a token seen in one class only has log-ratio inf
        stats, scale = state_stats(self)
        return complement_entries(stats, self.alpha / scale, scale, top)

    def __init__(
        self,
        alpha: float = 1.0,
        *,
        norm: bool = False,
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
        self.norm = check_bool(norm, "norm")
        self._log_alpha = math.log(self.alpha) if self.alpha else -math.inf
        # alpha=0, norm=True: per class the finite part of Σ_w |log θ_{y,w}| (None: stale)
        self._mle_norms: list[float] | None = None
        # Σ_w log(C_{k,w} + α) = H − D[k] (norm=True only), see the class docstring.
        self._sum_log_total = 0.0  # H
        self._sum_d: list[float] = []  # D by class index
        self._updates = 0  # incremental updates of H and D since the last exact refresh
        # α (raw units) the sums were computed for; NaN = stale
        self._sums_alpha = self.alpha if half_life is None else math.nan

    def _params(self) -> dict[str, Any]:
        return {"alpha": self.alpha, "norm": self.norm, **self._vocabulary_params()}

    # ------------------------------------------------------------------ learning
    def _learn(self, x: Mapping[str, Any], y: Hashable, w: float) -> None:
        if self._rows_stale:
            self._fresh_rows()
        self._batch_counts_valid = False
        x, total, k = self._start_learning(x, y, w, check_counts)
        self._class_extra["class_tokens"][y] += total * w
        counts = self._counts
        if not self.norm or self._gamma is not None or not self.alpha:
            self._sums_alpha = math.nan  # (forgetting) stale until the next prediction
            self._mle_norms = None
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
        alpha = self.alpha
        log_alpha = self._log_alpha
        log = _log
        log1p = _log1p
        sum_d = self._sum_d
        if len(sum_d) <= k:
            sum_d.extend([0.0] * (k + 1 - len(sum_d)))
        h = self._sum_log_total
        d_k = sum_d[k]
        updates = 0
        for token, c in x.items():
            if c > 0:
                d = c * w
                row = counts.get(token)
                if row is None:  # a new token: new terms log(d + α) in H, log((d+α)/α) in D_k
                    row = counts[token] = [0.0] * (k + 1)
                    row[k] = d
                    lw = log(d + alpha)
                    h += lw
                    d_k += lw - log_alpha
                    updates += 1
                    continue
                n_w = sum(row)  # before the update
                delta = log1p(d / (n_w + alpha))
                h += delta
                d_k += delta
                for j, n in enumerate(row):
                    if n and j != k:
                        sum_d[j] += delta - log1p(d / (n_w - n + alpha))
                updates += len(row)
                try:
                    row[k] += d
                except IndexError:
                    row.extend([0.0] * (k + 1 - len(row)))
                    row[k] = d
        sum_d[k] = d_k
        self._sum_log_total = h
        self._updates += updates
        if self._updates > _REFRESH_MIN_UPDATES and self._updates > _REFRESH_RATIO * (
            len(counts) * len(sum_d)
        ):
            self._refresh_sums()

    # ------------------------------------------------------------------ aggregates
    def _refresh_sums(self) -> None:
        """Recompute H and D exactly from the counts for the current α (raw units)
        (with ``alpha = 0`` nothing: the norms are computed when needed, see
        :meth:`_mle_scores`)."""
        if not self.alpha:
            self._mle_norms = None
            return
        alpha = self.alpha / self._scale
        # (one K × V array, whichever layout holds the counts: the same floats either way)
        counts = self._count_matrix()
        n_w = np.zeros(counts.shape[1])
        for row in counts:  # (added in class order, as sum(row) adds a token's counts)
            n_w += row
        shifted = n_w + alpha
        self._sum_log_total = _fsum(np.log(shifted).tolist())
        with np.errstate(divide="ignore"):
            self._sum_d = [
                _fsum(np.log(shifted[n > 0] / (n_w[n > 0] - n[n > 0] + alpha)).tolist())
                for n in counts
            ]
        self._updates = 0
        self._sums_alpha = alpha

    def _sums_stale(self) -> None:
        """A kernel learned a batch with forgetting: the sums are for another α (raw units)
        now, recomputed at the next prediction as after a :meth:`_learn`."""
        self._sums_alpha = math.nan

    def _batch_sums(self, h: float, sum_d: list[float], updates: int) -> None:
        """Set ``H`` and ``D`` (``norm=True``) after a batch the kernel learned with
        ``updates`` term updates; refreshed exactly on the per-event schedule."""
        self._sum_log_total = h
        self._sum_d = sum_d
        self._updates += updates
        if self._updates > _REFRESH_MIN_UPDATES and self._updates > _REFRESH_RATIO * (
            len(self._counts) * len(sum_d)
        ):
            self._refresh_sums()

    def _stats_to_state(self) -> dict[str, Any]:
        # Refresh the drifting sums first, as loading does, so that the copy
        # predicts bit-for-bit like this model (the sums are not in the state).
        if self.norm:
            self._refresh_sums()
        return super()._stats_to_state()

    def _rebuild(self) -> None:
        if self.norm:
            self._refresh_sums()

    # ------------------------------------------------------------------ prediction
    def _joint_log_likelihood(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        class_weight = self._class_weight
        if not class_weight:
            return {}
        check_counts(x)
        if self._rows_stale:
            self._fresh_rows()
        x = self._weighted(self._scored_tokens(x))
        counts = self._counts
        vocabulary = len(counts)
        if vocabulary <= 1:  # every θ is 1
            return dict.fromkeys(class_weight, 0.0)
        if not self.alpha:
            return self._mle_scores(x)
        alpha = self.alpha / self._scale  # α in raw units, see Learner
        log = _log
        # Σ_w x_w log θ_{y,w} = Σ_w x_w log(N_w + α) − Σ_w x_w d_{y,w} − X log(T − T_y + αV)
        # with d_{y,w} = log((N_w + α) / (C_{y,w} + α)), 0 when N_{y,w} = 0.
        acc = [0.0] * len(class_weight)
        big_x = base = 0.0
        for token, c in x.items():
            row = counts.get(token)
            if row is not None:
                n_w = sum(row)
                shifted = n_w + alpha
                big_x += c
                base += c * log(shifted)
                for j, n in enumerate(row):
                    if n:
                        acc[j] += c * log(shifted / (n_w - n + alpha))
        smoothing = alpha * vocabulary
        class_tokens = self._class_extra["class_tokens"]
        total = sum(class_tokens.values())  # T
        if not self.norm:
            return {
                y: acc[k] - base + big_x * log(total - class_tokens[y] + smoothing)
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
            out[y] = (acc[k] - base + big_x * log_denominator) / abs_sum
        return out

    # ------------------------------------------------------------------ alpha = 0
    def _complements(self, row: list[float], n_classes: int) -> list[float]:
        """``C_{y,w}`` of one token's count row for every class index: the sum of the
        other classes' counts, added in class order (so a token seen in one class only
        has complement count exactly 0 in it)."""
        padded = row + [0.0] * (n_classes - len(row))
        out = []
        for k in range(n_classes):
            total = 0.0
            for j, n in enumerate(padded):
                if j != k:
                    total += n
            out.append(total)
        return out

    def _complement_totals(self) -> list[float]:
        """``Σ_w C_{y,w} = Σ_{y'≠y} T_{y'}`` for every class index, in class order."""
        tokens = list(self._class_extra["class_tokens"].values())
        return self._complements(tokens, len(tokens))

    def _norms(self) -> list[float]:
        """``norm=True`` with ``alpha = 0``: per class ``Σ_{w∈V: C_{y,w}>0} |log θ_{y,w}|``
        (the zero-probability terms are left out of the norm); O(stored counts) at the
        first prediction after a change, cached until the next one."""
        norms = self._mle_norms
        if norms is not None:
            return norms
        n_classes = len(self._class_weight)
        totals = self._complement_totals()
        terms: list[list[float]] = [[] for _ in range(n_classes)]
        log = _log
        for row in self._counts.values():
            for k, comp in enumerate(self._complements(row, n_classes)):
                if comp > 0:
                    terms[k].append(log(totals[k] / comp))
        norms = self._mle_norms = [_fsum(t) for t in terms]
        return norms

    def _mle_scores(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        """The scores with ``alpha = 0``: ``θ_{y,w} = C_{y,w} / Σ_w C_{y,w}``.

        A token of ``x`` (positive count) never seen outside class ``y`` has
        ``θ_{y,w} = 0``: its term ``−x_w log θ_{y,w}`` is ``+inf``, evidence *for*
        ``y``. :mod:`stream_nb._mle`'s rule applies mirrored (the score is a negated
        log-likelihood): the classes with the *most* such terms stay possible,
        their finite terms decide (divided by the finite part of the norm with
        ``norm=True``), and the others get ``-inf``.
        """
        counts = self._counts
        n_classes = len(self._class_weight)
        finite = [0.0] * n_classes
        infinite = [0] * n_classes
        totals = self._complement_totals()
        log = _log
        for token, c in x.items():
            row = counts.get(token)
            if row is None or not c > 0:
                continue
            for k, comp in enumerate(self._complements(row, n_classes)):
                if comp > 0:
                    finite[k] -= c * log(comp / totals[k])
                else:
                    infinite[k] += 1
        if self.norm:
            finite = [f / n if n else f for f, n in zip(finite, self._norms(), strict=True)]
        labels = list(self._class_weight)
        return resolve_zero_terms_one(
            dict(zip(labels, finite, strict=True)),
            {y: -n for y, n in zip(labels, infinite, strict=True)},
        )
