"""Weighted Naive Bayes: one weight per feature, learned online by stochastic gradient.

The counts are NaiveBayes's (categorical and Gaussian features); the weights
and their formulas are :mod:`stream_nb.naive_bayes._weights`.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import Any

from stream_nb._exceptions import ConfigError, ModelStateError
from stream_nb._params import check_nonneg
from stream_nb._state import (
    LABEL_TYPES,
    check_label,
    check_mapping,
    pairs,
    read_count,
    read_key,
    read_n_learned,
    read_pairs,
)
from stream_nb.base import Capabilities, Learner
from stream_nb.limits import check_weight
from stream_nb.naive_bayes._weights import (
    Terms,
    event_terms,
    gradient,
    merge_weights,
    weighted_scores,
)
from stream_nb.naive_bayes.mixed import NaiveBayes

__all__ = ["WeightedNB"]

#: Each component of a step's gradient is clipped to ±this many nats: early counts and
#: outlying Gaussian values give terms of any size, and one event must not throw a
#: weight across its range.
GRADIENT_CLIP = 2.0
#: Weights are projected onto [0, MAX_FEATURE_WEIGHT]: w × (a sum of terms, at most
#: ~1.7e300 by :mod:`stream_nb.limits`) stays finite.
MAX_FEATURE_WEIGHT = 1e6

_STATS = ("weights", "evidence", "steps")


class WeightedNB(NaiveBayes):
    """Naive Bayes with one weight per feature, learned prequentially (WANBIA-CLL online).

    The score is ``log P(y) + Σ_j w_j log P(x_j | y)``, every term as in
    :class:`~stream_nb.NaiveBayes` (categorical:
    ``(N_{y,j,v} + α) / (N_{y,j} + S_j α)``; numeric: the class's Gaussian with
    ``σ² = M2/n + ε``). Weights ``w_j ≥ 0`` start at 1 (plain NaiveBayes) and
    are learned as in WANBIA-CLL (Zaidi, Cerquides, Carman & Webb, JMLR 2013),
    which maximises the conditional log-likelihood, here by one stochastic
    gradient step per event. ``learn_one(x, y, ω)``:

    1. with the model exactly as it predicted ``x`` (weights and counts before
       ``x``, and before the decay ``x`` brings with ``half_life``), for each
       feature ``j`` of ``x`` with a term (learned before)::

           g_j = log P(x_j | y) − Σ_c P(c | x) log P(x_j | c) − λ (w_j − 1)

       the gradient of ``log P(y | x) − (λ/2) Σ_{j∈x} (w_j − 1)²``, each
       component clipped to ±``GRADIENT_CLIP`` (2 nats);
    2. ``w_j ← min(max(0, w_j + η_t · min(ω, 1) · g_j), MAX_FEATURE_WEIGHT)``
       with ``η_t = eta0 / (1 + t / tau)`` (``tau=None``: ``eta0`` always), ``t``
       the number of steps taken so far;
    3. the counts learn ``x`` as NaiveBayes's do.

    No step is taken for a class never seen before (it has no terms).
    Because a feature's counts do not include the event being stepped on,
    the gradient sees held-out evidence: a copy of a feature adds nothing
    the original does not already say, so the step lowers the weight of both
    when their double count makes the model overconfident; pure noise gets
    a gradient of mean ≈ 0 minus its overfitting, and moves toward 0.

    Defaults: ``eta0 = 0.02``, ``tau = 1000`` and the clip at 2 nats move a
    weight by at most 0.04 per event, so one event never decides a weight
    while a few hundred settle it; the step halves after 1,000 steps (the
    ``1/t`` decay lets SGD converge). Of the step sizes and clips tried on the
    accuracy benchmark's streams this is the one that never raised the log
    loss much above NaiveBayes's (docs/benchmarks.md). ``l2 = 0``: the
    gradient is computed on counts that do not hold the event yet (held-out
    evidence), which already keeps the weights from overfitting. Larger steps
    drive useless features to 0 faster, at a small cost on short streams.

    Forgetting (``half_life``): the counts decay as every learner's; the
    weights do not decay (they are a solution, not a statistic), but with
    ``tau=None`` the step stays ``eta0`` so they keep tracking a drifting
    stream. Merging: counts merge as NaiveBayes's; each feature's weight
    becomes the average of the two models' weights, weighted by the (decayed)
    weight of the events that stepped it in each model, its *evidence*
    (:func:`~stream_nb.naive_bayes._weights.merge_weights`); a feature one
    model never stepped takes the other's weight exactly. The step count
    becomes the larger of the two. Under model sync a delta starts from this
    model's weights and step count, with no evidence.

    Parameters
    ----------
    alpha, var_smoothing, var_smoothing_mode, schema, fit_prior, class_prior, max_values_per_feature
        As in :class:`~stream_nb.NaiveBayes`. There is no ``feature_weights``
        parameter: the weights are learned (fixed weights are NaiveBayes's).
    eta0
        First step size η₀ ≥ 0 (0: the weights stay 1 and the model is NaiveBayes).
    tau
        Steps after which the step size has halved (> 0), or ``None`` for a constant step.
    l2
        λ ≥ 0 of the penalty ``(λ/2) Σ (w_j − 1)²`` pulling weights toward 1.
    half_life, max_classes, max_features
        See :class:`stream_nb.base.Learner`.

    Attributes
    ----------
    weights
        ``{feature: w}`` of every feature stepped so far (read only); any other weighs 1.
    steps
        Gradient steps taken (``t`` of the schedule).

    Examples
    --------
    A copy of a feature adds nothing: the two share the evidence (weights ½);
    with larger steps than the default, noise is removed too.

    >>> import random
    >>> from stream_nb import WeightedNB
    >>> rng = random.Random(0)
    >>> model = WeightedNB(eta0=0.1)
    >>> for _ in range(2000):
    ...     y = rng.random() < 0.5
    ...     signal = "hi" if (rng.random() < 0.8) == y else "lo"
    ...     model.learn_one({"signal": signal, "copy": signal, "noise": rng.random()}, y)
    >>> {f: round(w, 1) for f, w in model.weights.items()}
    {'noise': 0.0, 'signal': 0.5, 'copy': 0.5}
    """

    capabilities = Capabilities(informative_features=True)
    # The weighted score has no batch kernel and no dense fast path: the protocol
    # methods are Learner's, over _joint_log_likelihood and learn_one.
    predict_log_proba_one = Learner.predict_log_proba_one
    predict_learn_many = Learner.predict_learn_many
    predict_learn_columns = Learner.predict_learn_columns
    _ALPHA_ZERO = False  # (its weighted terms have no maximum-likelihood rule: alpha > 0)

    def __init__(
        self,
        alpha: float = 1.0,
        *,
        eta0: float = 0.02,
        tau: float | None = 1000.0,
        l2: float = 0.0,
        var_smoothing: float | None = None,
        var_smoothing_mode: str = "feature",
        schema: Mapping[str, str] | None = None,
        fit_prior: bool = True,
        class_prior: Mapping[Hashable, float] | None = None,
        max_values_per_feature: int | None = None,
        half_life: float | None = None,
        max_classes: int | None = None,
        max_features: int | None = None,
    ) -> None:
        super().__init__(
            alpha,
            var_smoothing=var_smoothing,
            var_smoothing_mode=var_smoothing_mode,
            schema=schema,
            fit_prior=fit_prior,
            class_prior=class_prior,
            max_values_per_feature=max_values_per_feature,
            half_life=half_life,
            max_classes=max_classes,
            max_features=max_features,
        )
        self.eta0 = check_nonneg(eta0, "eta0")
        if tau is not None:
            tau = check_nonneg(tau, "tau")
            if tau == 0.0:
                raise ConfigError("tau must be > 0 (or None for a constant step size), got 0")
        self.tau = tau
        self.l2 = check_nonneg(l2, "l2")
        self.weights: dict[Hashable, float] = {}
        self._evidence: dict[Hashable, float] = {}  # raw units, see merge_weights
        self.steps = 0
        # (scale, items, terms) of the last event scored; None whenever the counts change
        self._last: tuple[float, tuple[tuple[Any, Any], ...], Terms | None] | None = None

    def _params(self) -> dict[str, Any]:
        return {**super()._params(), "eta0": self.eta0, "tau": self.tau, "l2": self.l2}

    def _weight_params(self) -> dict[str, Any]:
        return {}  # (the weights are learned: no fixed feature_weights)

    def _numeric_params(self) -> dict[str, Any]:
        return {}  # (numbers are Gaussian: no binning parameters)

    # ------------------------------------------------------------------ scoring
    def _terms(self, x: Mapping[str, Any]) -> Terms | None:
        """The terms of ``x`` (those of the last event scored when ``x`` equals it and
        the counts have not changed since: predicting then learning computes them once)."""
        items = tuple(x.items())
        last = self._last
        if last is not None and last[0] == self._scale:
            try:
                if last[1] == items:
                    return last[2]
            except (TypeError, ValueError):  # values that do not compare (numpy arrays)
                pass
        plan = self._plans.get(tuple(x))
        if plan is None:
            plan = self._plan(x, learning=False)
        terms = event_terms(
            self.gaussian,
            self.categorical,
            x,
            plan.gaussian,
            plan.categorical,
            self.alpha / self._scale,  # α in raw units, see Learner
            self._scale,
        )
        self._last = (self._scale, items, terms)
        return terms

    def _weights_of(self, terms: Terms) -> list[float]:
        get = self.weights.get
        return [get(f, 1.0) for f in terms.features]

    def _joint_log_likelihood(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        terms = self._terms(x)
        if terms is None:
            return {}
        return dict(zip(terms.labels, weighted_scores(terms, self._weights_of(terms)), strict=True))

    # ------------------------------------------------------------------ learning
    def _step_size(self) -> float:
        """``η_t = eta0 / (1 + t / tau)`` (``eta0`` with ``tau=None``)."""
        tau = self.tau
        return self.eta0 if tau is None else self.eta0 / (1.0 + self.steps / tau)

    def learn_one(self, x: Mapping[str, Any], y: Hashable, w: float = 1.0) -> None:
        """One gradient step on ``log P(y | x)`` with the model as it predicted ``x``,
        then learn the counts (:meth:`Learner.learn_one`); a rejected event changes
        nothing."""
        # the checks Learner.learn_one makes, before the terms are read
        if w != 1.0:
            check_weight(w)
        if x.__class__ is not dict:
            x = check_mapping(x)
        if y.__class__ not in LABEL_TYPES:
            y = check_label(y)
        step = self._step(x, y, w)
        super().learn_one(x, y, w)  # may reject the event: then nothing has changed
        self._last = None
        if step:
            weights, evidence = self.weights, self._evidence
            raw = w / self._scale  # evidence is kept in raw units, as the counts
            for f, wj in step:
                weights[f] = wj
                evidence[f] = evidence.get(f, 0.0) + raw
            self.steps += 1

    def _step(self, x: Mapping[str, Any], y: Hashable, w: float) -> list[tuple[Hashable, float]]:
        """The new weight of each feature of ``x`` with a term (``[]``: no step)."""
        terms = self._terms(x)  # (validates the values as predicting does)
        if terms is None or not terms.features or y not in terms.labels:
            return []
        current = self._weights_of(terms)
        rate = self._step_size() * min(w, 1.0)
        l2 = self.l2
        step = []
        for f, wj, g in zip(terms.features, current, gradient(terms, current, y), strict=True):
            if l2:
                g -= l2 * (wj - 1.0)
            g = max(-GRADIENT_CLIP, min(GRADIENT_CLIP, g))
            step.append((f, min(max(0.0, wj + rate * g), MAX_FEATURE_WEIGHT)))
        return step

    # ------------------------------------------------------------------ merge / scale / state
    def _merge(self, other: NaiveBayes, factor: float) -> None:
        super()._merge(other, factor)
        self._last = None
        assert isinstance(other, WeightedNB)  # (Learner.merge checks the class)
        keep = [f for f in other.weights if self._learned(f)]
        merge_weights(self.weights, self._evidence, other.weights, other._evidence, factor, keep)
        self.steps = max(self.steps, other.steps)

    def _learned(self, feature: Hashable) -> bool:
        """Whether this model holds statistics for ``feature``."""
        return feature in self.gaussian.feature_index or feature in self.categorical.present

    def _prepare_delta(self, delta: Learner) -> None:
        assert isinstance(delta, WeightedNB)
        delta.weights = dict(self.weights)
        delta.steps = self.steps

    def _rescale(self, factor: float) -> None:
        super()._rescale(factor)
        self._last = None
        evidence = self._evidence
        for f in evidence:
            evidence[f] *= factor

    def _stats_to_state(self) -> dict[str, Any]:
        return {
            **super()._stats_to_state(),
            "weights": pairs(self.weights),
            "evidence": pairs(self._evidence),
            "steps": self.steps,
        }

    def _stats_from_state(self, stats: Mapping[str, Any]) -> None:
        if not isinstance(stats, Mapping):
            super()._stats_from_state(stats)  # (raises: names what stats should be)
        missing = [k for k in _STATS if k not in stats]
        if missing:
            raise ModelStateError(f"stats: missing field {missing[0]!r}")
        super()._stats_from_state({k: v for k, v in stats.items() if k not in _STATS})
        self._last = None
        weights = read_pairs(stats["weights"], "stats.weights", _read_weight, key=read_key)
        evidence = read_pairs(stats["evidence"], "stats.evidence", read_count, key=read_key)
        cap = self.max_features
        if cap is not None and len(weights) > cap:  # (a delta's weights may name features
            # it has no statistics for: its model's, see _prepare_delta)
            raise ModelStateError(
                f"stats.weights: {len(weights)} features, more than max_features={cap}"
            )
        if evidence.keys() - weights.keys():
            f = next(iter(evidence.keys() - weights.keys()))
            raise ModelStateError(f"stats.evidence: feature {f!r} has no weight")
        self.weights = weights
        self._evidence = evidence
        self.steps = read_n_learned(stats["steps"], "stats.steps")

    def _size(self) -> tuple[int, int, int]:
        classes, features, stored = super()._size()
        return classes, features, stored + 2 * len(self.weights)

    # ------------------------------------------------------------------ introspection
    def _informative_entries(self, top: int | None) -> list[dict[str, Any]]:
        """NaiveBayes's entries with the evidence as the model weighs it: ``log_ratio``
        and ``score`` multiplied by the feature's weight, which ``weight`` gives."""
        entries = super()._informative_entries(None)
        get = self.weights.get
        for entry in entries:
            w = get(entry["feature"], 1.0)
            entry["weight"] = w
            entry["log_ratio"] *= w
            entry["score"] *= w
        return entries


def _read_weight(value: Any, where: str) -> float:
    w = read_count(value, where)
    if w > MAX_FEATURE_WEIGHT or math.isnan(w):
        raise ModelStateError(f"{where}: must be at most {MAX_FEATURE_WEIGHT:g}, got {w!r}")
    return w
