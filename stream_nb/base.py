"""The learner protocol and the work every learner shares.

A learner subclasses :class:`Learner` and implements five hooks; everything
else (weights, forgetting, normalisation in log space, merging, state) is done
once here.

Hooks
-----
``_learn(x, y, w)``
    Add one event with weight ``w`` *in raw units* (see forgetting below).
``_joint_log_likelihood(x) -> dict``
    Unnormalised ``log P(y) + log P(x | y)`` for every class that can be scored;
    ``{}`` when nothing was learned.
``_merge(other, factor)``
    Add ``other``'s raw statistics multiplied by ``factor`` to ours.
``_rescale(factor)``
    Multiply every raw weight-like statistic by ``factor`` (counts, Welford
    ``n`` and ``M2``; never means).
``_stats_to_state() -> dict`` / ``_stats_from_state(dict)``
    Plain JSON-able statistics (dicts with non-string keys as ``[key, value]``
    pair lists, see :func:`stream_nb._state.pairs`).
``_size() -> tuple[int, int, int]``
    ``(classes, features, stored numbers)`` for :meth:`Learner.model_size`.
``_class_labels() -> Collection``
    The labels learned so far (a dict or set: O(1) membership), for
    ``max_classes``; needed only by learners that accept that parameter.

Events and states
-----------------
:meth:`Learner.learn_one` checks in O(1) that ``x`` is a mapping and that the
label can be saved (see :func:`stream_nb._state.check_label`), and enforces
``max_classes``; learners check feature names and values that are new to them
before changing anything. :meth:`Learner.from_state` checks the envelope
(format, version, learner, parameters, ``n_learned``, ``scale``); each
learner's ``_stats_from_state`` validates its statistics with the helpers of
:mod:`stream_nb._state`, so that a state either loads into a model whose
every formula is defined, or raises :class:`~stream_nb.ModelStateError`
naming the field.

Memory bounds
-------------
Every learner of stream-nb takes ``max_classes`` (an event of a new class
beyond it raises ``InvalidEventError(reason="too_many_classes")``, the model
unchanged) and ``max_features`` (features first met once the model holds that
many are not learned, and contribute nothing to predictions, exactly as a
feature never seen). ``None`` (the default) means unbounded.

Forgetting
----------
With ``half_life=h`` every statistic decays by ``γ^w`` with ``γ = 2^(-1/h)``
each time an event of weight ``w`` is learned, so an event's influence halves
after ``h`` further units of weight. Decaying every count per event would cost
O(model); instead statistics are stored in *raw units*: ``true = raw × scale``.
Learning multiplies the single global ``scale`` by ``γ^w`` and adds ``w / scale``
raw units. When ``scale`` falls below ``_RENORMALISE_BELOW`` the raw
statistics are multiplied by ``scale`` once and ``scale`` is reset to 1, an
O(model) step taken once every ``h × log2(1/_RENORMALISE_BELOW)`` units of
weight. Smoothing constants enter formulas as ``α / scale`` raw units, so
``(N·scale + α) / (M·scale + Sα) = (N + α/scale) / (M + Sα/scale)`` and the hot
loops never multiply by the scale. Ratios of weights (means, variances, priors
without smoothing) do not depend on the scale at all.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

from stream_nb._bulk import collector_paused
from stream_nb._exceptions import (
    ConfigError,
    IncompatibleModelError,
    InvalidEventError,
    ModelStateError,
)
from stream_nb._params import check_cap
from stream_nb._state import (
    LABEL_TYPES,
    check_feature_names,
    check_label,
    check_mapping,
    decode_value,
    encode_value,
    field,
    read_count,
    read_n_learned,
)
from stream_nb.limits import RENORMALISE_BELOW, check_half_life, check_weight

__all__ = ["ABSORB", "Capabilities", "Learner", "log_softmax", "log_softmax_argmax"]

#: Renormalise raw statistics when the global scale drops below this: raw values
#: stay below 1e30 × (true weight), the headroom the numeric range of
#: :mod:`stream_nb.limits` is computed with, at one O(model) step every ~100
#: half-lives.
_RENORMALISE_BELOW = RENORMALISE_BELOW

STATE_FORMAT = "stream-nb/learner"
STATE_VERSION = 1

_exp = math.exp
_log = math.log
_NEG_INF = -math.inf

#: Past this magnitude of the top score ``m``, ``m + log Σ exp(v − m)`` would lose
#: digits of the log-sum (all of it once ``|m| > 2**53 × log K``: every class would
#: get log-probability 0), so the log-probabilities are computed as
#: ``(v − m) − log Σ`` instead. Below it the two agree to 2**-32, and the
#: first form (one subtraction per class) is kept.
ABSORB = 2.0**20


def log_softmax(jll: Mapping[Hashable, float]) -> dict[Hashable, float]:
    """Normalise joint log-likelihoods into log-probabilities (max-shifted log-sum-exp).

    Parameters
    ----------
    jll
        Unnormalised log scores by class.

    Returns
    -------
    dict
        ``jll[c] - log Σ_c' exp(jll[c'])``; ``{}`` for an empty input. Classes
        whose score is ``-inf`` are left out (their probability is 0).

    Examples
    --------
    >>> lp = log_softmax({"a": 0.0, "b": 0.0})
    >>> round(math.exp(lp["a"]), 6)
    0.5
    """
    if not jll:
        return {}
    m = max(jll.values())
    if m == -math.inf:
        return {}
    total = 0.0
    for v in jll.values():
        total += _exp(v - m)
    if -ABSORB < m < ABSORB:
        lse = m + _log(total)
        return {c: v - lse for c, v in jll.items() if v != -math.inf}
    log_total = _log(total)
    return {c: (v - m) - log_total for c, v in jll.items() if v != -math.inf}


def log_softmax_argmax(jll: Mapping[Hashable, float]) -> tuple[dict[Hashable, float], Hashable]:
    """``(log_softmax(jll), first argmax of jll)`` in one pass over the scores.

    Bit-identical to :func:`log_softmax` and to :meth:`Learner.predict_one`
    (same max shift, same left-to-right sum, first maximum wins ties).
    ``jll`` must not be empty.

    Examples
    --------
    >>> lp, best = log_softmax_argmax({"a": 0.0, "b": 1.0})
    >>> best, round(math.exp(lp["b"]), 6)
    ('b', 0.731059)
    """
    values = list(jll.values())
    m = max(values)
    y_pred = list(jll)[values.index(m)]
    if m == _NEG_INF:
        return {}, y_pred
    total = 0.0
    for v in values:
        total += _exp(v - m)
    if -ABSORB < m < ABSORB:
        lse = m + _log(total)
        return {c: v - lse for c, v in jll.items() if v != _NEG_INF}, y_pred
    log_total = _log(total)
    return {c: (v - m) - log_total for c, v in jll.items() if v != _NEG_INF}, y_pred


def _negative_score(entry: Mapping[str, Any]) -> float:
    return -float(entry["score"])


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """What a learner class can do or needs, declared on the class (``Learner.capabilities``).

    Tools read these instead of keeping lists of learner names.

    Attributes
    ----------
    nonnegative_counts
        Feature values are counts: the event decoder rejects negative numbers
        before they reach the learner.
    numeric_only
        Every feature value must be a number (a string is rejected as
        ``invalid_features``).
    column_kernel
        The class has an exact batch kernel on columns
        (:meth:`Learner.predict_learn_columns`); see also
        :attr:`Learner.columns_supported` for one instance.
    informative_features
        :meth:`Learner.informative_features` scores this learner's features
        (otherwise it returns ``[]``).
    structure
        :meth:`Learner.structure` gives a dependence structure (otherwise ``None``).

    Examples
    --------
    >>> from stream_nb import CategoricalNB, MultinomialNB
    >>> MultinomialNB.capabilities.nonnegative_counts, CategoricalNB.capabilities.nonnegative_counts
    (True, False)
    """

    nonnegative_counts: bool = False
    numeric_only: bool = False
    column_kernel: bool = False
    informative_features: bool = False
    structure: bool = False


class Learner(abc.ABC):
    """Base class of every stream-nb learner.

    Parameters
    ----------
    half_life
        ``None`` (default) keeps every event forever. A number in
        [0.02, 1e12] (:func:`stream_nb.limits.check_half_life` says why) makes
        statistics decay exponentially: an event's weight halves after
        ``half_life`` further units of learned weight.
    max_classes
        Most classes the model learns (``None``: unbounded). An event whose
        label would be one more raises ``InvalidEventError`` with
        ``reason="too_many_classes"`` and is not learned. (A merge keeps
        the classes of both models, see :meth:`merge`.)
    max_features
        Most features the model keeps statistics for (``None``: unbounded).
        Features met once the model holds that many are not learned and, like
        any feature never learned, contribute nothing to predictions.

    Attributes
    ----------
    n_learned
        Number of ``learn_one`` calls so far (not weighted, not decayed), plus
        those of merged models.
    """

    _registry: ClassVar[dict[str, type[Learner]]] = {}

    #: What this learner class can do or needs (see :class:`Capabilities`).
    capabilities: ClassVar[Capabilities] = Capabilities()

    # what this model learned since the last cut_delta (see track_delta)
    _delta: Learner | None = None
    _delta_weight: float = 0.0

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if not cls.__name__.startswith("_"):
            Learner._registry[cls.__name__] = cls

    def __init__(
        self,
        *,
        half_life: float | None = None,
        max_classes: int | None = None,
        max_features: int | None = None,
    ) -> None:
        half_life = check_half_life(half_life)  # the range where forgetting is computable
        self.half_life = half_life
        self._gamma: float | None = None if half_life is None else 0.5 ** (1.0 / half_life)
        self._scale = 1.0
        self.n_learned = 0
        # memory bounds (see "Memory bounds" in the module docstring)
        self.max_classes = check_cap(max_classes, "max_classes")
        self.max_features = check_cap(max_features, "max_features")

    # ------------------------------------------------------------------ protocol
    def learn_one(self, x: Mapping[str, Any], y: Hashable, w: float = 1.0) -> None:
        """Update the statistics with one event.

        Parameters
        ----------
        x
            Features by name. Never mutated.
        y
            The label: a ``str``, an ``int`` (any size), a ``bool`` or a
            finite ``float``.
        w
            Sample weight, a positive finite number within
            :data:`~stream_nb.limits.MIN_WEIGHT` … :data:`~stream_nb.limits.MAX_WEIGHT`
            (1e-50 … 1e50).

        Raises
        ------
        InvalidEventError
            With ``reason="invalid_label"`` (``None``, NaN, a tuple…),
            ``"invalid_features"`` (``x`` not a mapping, a feature name or
            value that a saved state could not hold), ``"too_many_classes"``
            (a new class beyond ``max_classes``), ``"out_of_range"`` (``w`` or
            a number beyond the bounds of :mod:`stream_nb.limits`) or a
            learner-specific reason. The model is left unchanged.
        """
        if w != 1.0:
            if (
                isinstance(w, bool)
                or not isinstance(w, (int, float))
                or not (w > 0.0 and w != math.inf)
            ):
                raise ConfigError(
                    f"sample weight w must be positive and finite, got {w!r}; "
                    "pass a number such as 1.0 (the default)"
                )
            check_weight(w)  # out_of_range, before anything changes
        # the event: O(1) checks here, feature names and values in the learner
        if x.__class__ is not dict:
            x = check_mapping(x)
        if y.__class__ not in LABEL_TYPES:
            y = check_label(y)
        if self.max_classes is not None:
            self._check_new_class(y)
        gamma = self._gamma
        if gamma is None:
            self._learn(x, y, w)
        else:
            before = self._scale
            scale = before * (gamma if w == 1.0 else gamma**w)
            if scale < _RENORMALISE_BELOW:
                self._rescale(scale)
                before = scale = 1.0
            self._scale = scale
            try:
                self._learn(x, y, w / scale)
            except BaseException:
                # a rejected event does not decay the model (unless it came with a
                # renormalisation, which folded the decay into the raw statistics)
                self._scale = before
                raise
        self.n_learned += 1
        delta = self._delta
        if delta is not None:
            delta.learn_one(x, y, w)
            self._delta_weight += w

    def _check_new_class(self, y: Hashable) -> None:
        """Raise ``too_many_classes`` if ``y`` would be one class more than ``max_classes``."""
        labels = self._class_labels()
        cap = self.max_classes
        if cap is not None and y not in labels and len(labels) >= cap:
            raise InvalidEventError(
                f"label {y!r} would be class {len(labels) + 1} of a model with "
                f"max_classes={cap}; the event is not learned (raise max_classes, or map "
                "rare labels to one label upstream)",
                reason="too_many_classes",
            )

    def predict_log_proba_one(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        """Normalised log posterior ``log P(y | x)`` of every class; ``{}`` before learning."""
        if x.__class__ is not dict:
            x = check_mapping(x)
        return log_softmax(self._joint_log_likelihood(x))

    def predict_proba_one(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        """Posterior ``P(y | x)`` of every class; ``{}`` before learning."""
        return {c: _exp(v) for c, v in self.predict_log_proba_one(x).items()}

    def predict_one(self, x: Mapping[str, Any]) -> Hashable | None:
        """The most probable class (first learned wins ties); ``None`` before learning."""
        if x.__class__ is not dict:
            x = check_mapping(x)
        jll = self._joint_log_likelihood(x)
        if not jll:
            return None
        return max(jll, key=jll.__getitem__)

    def predict_learn_many(
        self,
        xs: Sequence[Mapping[str, Any]],
        ys: Sequence[Hashable | None],
        ws: Sequence[float],
    ) -> tuple[list[dict[Hashable, float] | None], list[Hashable | None], dict[int, Exception]]:
        """Prequential over a batch: for each event in order, predict it, then learn it.

        Defined as exactly this loop: the log posterior and the decision of
        event ``i`` are those of the model that learned events ``0..i-1`` of
        the batch (and everything before it); then event ``i`` is learned,
        unless its label is ``None`` (predicted only). The engine calls it
        once per batch; learners may override it with an exact vectorised
        version (same predictions to rounding, same state after the batch).

        Parameters
        ----------
        xs, ys, ws
            Features, labels (``None``: unlabelled) and weights, one per event.

        Returns
        -------
        log_probas, predictions, errors
            ``log_probas[i]`` is :meth:`predict_log_proba_one` of event ``i``
            before learning it (``{}`` before anything was learned) and
            ``predictions[i]`` its :meth:`predict_one`. ``errors[i]`` holds
            the :class:`~stream_nb.InvalidEventError`, ``TypeError`` or
            ``ValueError`` event ``i`` raised: when predicting,
            ``log_probas[i]`` is ``None`` and the event is not learned; when
            learning, the event keeps its prediction but is not learned
            (learners leave the model unchanged when they reject an event).

        Examples
        --------
        >>> from stream_nb import CategoricalNB
        >>> model = CategoricalNB()
        >>> lps, preds, errors = model.predict_learn_many(
        ...     [{"sky": "sun"}, {"sky": "sun"}, {"sky": "rain"}], ["play", None, "stay"], [1.0] * 3
        ... )
        >>> lps[0], preds, errors, model.n_learned
        ({}, [None, 'play', 'play'], {}, 2)
        """
        jll_of = self._joint_log_likelihood
        learn = self.learn_one
        log_probas: list[dict[Hashable, float] | None] = []
        predictions: list[Hashable | None] = []
        errors: dict[int, Exception] = {}
        add_lp = log_probas.append
        add_pred = predictions.append
        for i, (x, y, w) in enumerate(zip(xs, ys, ws, strict=True)):
            try:
                jll = jll_of(x if x.__class__ is dict else check_mapping(x))
            except (InvalidEventError, TypeError, ValueError) as exc:
                errors[i] = exc
                add_lp(None)
                add_pred(None)
                continue
            if jll:
                lp, y_pred = log_softmax_argmax(jll)
                add_lp(lp)
                add_pred(y_pred)
            else:
                add_lp({})
                add_pred(None)
            if y is not None:
                try:
                    learn(x, y, w)
                except (InvalidEventError, TypeError, ValueError) as exc:
                    errors[i] = exc
        return log_probas, predictions, errors

    @property
    def columns_supported(self) -> bool:
        """Whether :meth:`predict_learn_columns` may be tried for the next batch.

        ``False`` when the class has no column kernel, or while a delta is
        tracked (:meth:`track_delta`: model sync records every learned event
        through :meth:`learn_one`). The engine skips building columns when
        this is ``False``.
        """
        return type(self).capabilities.column_kernel and self._delta is None

    def predict_learn_columns(
        self,
        names: tuple[str, ...],
        columns: Sequence[Sequence[Any]],
        ys: Sequence[Hashable | None],
        ws: Sequence[float] | None = None,
    ) -> tuple[list[Hashable], Any, Any] | None:
        """:meth:`predict_learn_many` on column-wise events, or ``None`` if not supported.

        Event ``i`` has features ``{names[j]: columns[j][i]}``, label ``ys[i]``
        (``None``: predicted only) and weight ``ws[i]`` (``ws=None``: all 1).
        A learner with an array kernel returns ``(labels, log_proba, best)``:
        row ``i`` of the ``B × K`` numpy array ``log_proba`` is event ``i``'s
        log posterior over ``labels`` before learning it, and
        ``labels[best[i]]`` its decision. ``None`` means "not this batch"
        (nothing was changed); the caller then uses :meth:`predict_learn_many`.
        The engine uses this to skip building one dictionary per event.

        Examples
        --------
        >>> from stream_nb import CategoricalNB
        >>> CategoricalNB().predict_learn_columns(("sky",), [["sun", "rain"]], ["a", "b"]) is None
        True
        """
        return None

    # ------------------------------------------------------------------ introspection
    def joint_log_likelihood_one(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        """Unnormalised ``log P(y) + log P(x | y)`` of every class the model scores.

        :meth:`predict_log_proba_one` is its normalisation; explanations
        compare these scores with and without a feature.

        Examples
        --------
        >>> from stream_nb import CategoricalNB
        >>> model = CategoricalNB()
        >>> model.learn_one({"sky": "sun"}, "play")
        >>> model.joint_log_likelihood_one({"sky": "sun"})
        {'play': 0.0}
        """
        if x.__class__ is not dict:
            x = check_mapping(x)
        return self._joint_log_likelihood(x)

    def class_weights(self) -> dict[Hashable, float]:
        """The weight learned for each class, in learning order (decayed with ``half_life``).

        Examples
        --------
        >>> from stream_nb import CategoricalNB
        >>> model = CategoricalNB(half_life=1)
        >>> model.learn_one({"sky": "sun"}, "play")
        >>> model.learn_one({"sky": "rain"}, "stay")
        >>> model.class_weights()
        {'play': 0.5, 'stay': 1.0}
        """
        scale = self._scale
        return {y: w * scale for y, w in self._raw_class_weights()}

    def _raw_class_weights(self) -> Iterable[tuple[Hashable, float]]:
        """Hook: ``(label, weight in raw units)`` of every class, in learning order."""
        return ()

    def feature_names(self) -> list[Hashable]:
        """The features the model holds statistics for (or knows the kind of).

        Examples
        --------
        >>> from stream_nb import GaussianNB
        >>> model = GaussianNB()
        >>> model.learn_one({"height": 1.8, "weight": 80.0}, "m")
        >>> model.feature_names()
        ['height', 'weight']
        """
        return []

    def informative_features(self, top: int | None = 10) -> list[dict[str, Any]]:
        """The ``top`` most informative features of this model, best first.

        Computed from the model's own statistics: see :mod:`stream_nb.informative`
        for the score of each kind of entry. A learner class provides its
        entries through the ``_informative_entries(top)`` hook
        (``Capabilities.informative_features``); the others give ``[]``.

        Parameters
        ----------
        top
            How many entries to return; ``None`` for all.

        Raises
        ------
        ConfigError
            If ``top`` is not an integer ≥ 0 or ``None``.

        Examples
        --------
        >>> from stream_nb import CategoricalNB
        >>> model = CategoricalNB()
        >>> for sky, y in [("sun", "play"), ("sun", "play"), ("rain", "stay")]:
        ...     model.learn_one({"sky": sky}, y)
        >>> [(e["feature"], e["value"], e["favours"]) for e in model.informative_features(1)]
        [('sky', 'rain', 'stay')]
        """
        if top is not None and (isinstance(top, bool) or not isinstance(top, int) or top < 0):
            raise ConfigError(f"top must be an integer >= 0 or None, got {top!r}")
        if top == 0:
            return []
        with collector_paused():  # (the state of a large model is millions of small lists)
            entries = self._informative_entries(top)
        entries.sort(key=_negative_score)  # stable: ties in learning order
        return entries if top is None else entries[:top]

    def _informative_entries(self, top: int | None) -> list[dict[str, Any]]:
        """Hook: unsorted entries of :meth:`informative_features` (may be cut to ``top``)."""
        return []

    def structure(self) -> dict[str, Any] | None:
        """The dependence structure of a semi-naive learner (TAN, KDB, SPODE), else ``None``.

        See :func:`stream_nb.informative.structure` for the format.

        Examples
        --------
        >>> from stream_nb import CategoricalNB
        >>> CategoricalNB().structure() is None
        True
        """
        return None

    # ------------------------------------------------------------------ model deltas
    def track_delta(self, delta: Learner | None = None, weight: float = 0.0) -> None:
        """Record what this model learns from now on into a delta model.

        Every event this model learns afterwards (through :meth:`learn_one`
        or the batch methods) is learned by the delta too, and its weight is
        added to :attr:`delta_weight`. Adding the delta to a copy of the
        model as it was (:meth:`apply_delta`) gives this model again, exactly
        up to rounding: model sync exchanges such deltas between workers.
        While a delta is tracked, :attr:`columns_supported` is ``False``.

        Parameters
        ----------
        delta
            The delta to record into. ``None`` (default) starts an empty one
            (a :meth:`clone` that bins like this model, see
            :meth:`_prepare_delta`) of weight 0.
        weight
            The weight ``delta`` learned already.

        Examples
        --------
        >>> from stream_nb import CategoricalNB
        >>> model = CategoricalNB(half_life=3)
        >>> model.track_delta()
        >>> rebuilt = model.clone()
        >>> for i, (x, y) in enumerate([({"a": 1}, "p"), ({"a": 2}, "q"), ({"a": 1}, "p")]):
        ...     model.learn_one(x, y)
        ...     if i != 1:
        ...         rebuilt.apply_delta(*model.cut_delta())
        >>> x = {"a": 1}
        >>> abs(rebuilt.predict_proba_one(x)["p"] - model.predict_proba_one(x)["p"]) < 1e-12
        True
        """
        if delta is None:
            delta = self.clone()
            self._prepare_delta(delta)
            weight = 0.0
        elif type(delta) is not type(self):
            raise IncompatibleModelError(
                f"a {type(self).__name__} cannot record into a {type(delta).__name__} delta"
            )
        self._delta = delta
        self._delta_weight = weight

    @property
    def delta(self) -> Learner | None:
        """The delta being recorded (see :meth:`track_delta`), or ``None``."""
        return self._delta

    @property
    def delta_weight(self) -> float:
        """Total weight learned into :attr:`delta` so far."""
        return self._delta_weight

    def cut_delta(self) -> tuple[Learner, float]:
        """Return ``(delta, weight)`` recorded since the last cut and start a new delta.

        Raises
        ------
        ConfigError
            If no delta is tracked (call :meth:`track_delta` first).
        """
        delta, weight = self._delta, self._delta_weight
        if delta is None:
            raise ConfigError("no delta is tracked on this model; call track_delta() first")
        self.track_delta()
        return delta, weight

    def stop_delta(self) -> None:
        """Stop recording deltas (the current one is dropped)."""
        self._delta = None
        self._delta_weight = 0.0

    def decay(self, weight: float) -> None:
        """Forget as learning events of total weight ``weight`` would (``half_life`` only).

        Statistics are multiplied by ``γ^weight`` with ``γ = 2^(-1/half_life)``;
        without ``half_life`` nothing changes.

        Examples
        --------
        >>> from stream_nb import CategoricalNB
        >>> model = CategoricalNB(half_life=1)
        >>> model.learn_one({"a": "x"}, "p")
        >>> model.decay(2.0)
        >>> model.to_state()["scale"]
        0.125
        """
        half_life = self.half_life
        if half_life is not None and weight > 0:
            # true = raw × scale, so learning weight W multiplies scale by γ^W
            scale = self._scale * 0.5 ** (weight / half_life)
            if scale < _RENORMALISE_BELOW:
                self._rescale(scale)
                scale = 1.0
            self._scale = scale

    def apply_delta(self, delta: Learner, weight: float) -> None:
        """Add a delta that learned total weight ``weight`` to this model, in place.

        The model first decays as learning that weight would have made it
        (:meth:`decay`), then merges the delta (:meth:`merge`: TAN and KDB
        rebuild their structure there), so replaying one model's deltas in
        order rebuilds it.
        """
        self.decay(weight)
        self.merge(delta)

    def defer_binning(self) -> None:
        """Never derive numeric cut points from this model's own sample.

        For learners that discretise numbers (the semi-naive ones): under
        model sync the cut points freeze only in the shared base model, so
        every worker bins alike. Other learners: nothing to do.
        """
        return None

    def _prepare_delta(self, delta: Learner) -> None:
        """Hook: make a fresh delta (a clone) record like this model, e.g. with its bins."""
        return None

    def _record_batch(
        self,
        xs: Sequence[Mapping[str, Any]],
        ys: Sequence[Hashable | None],
        ws: Sequence[float],
        errors: Mapping[int, Exception],
    ) -> None:
        """Learn a batch's labelled, accepted events into the tracked delta.

        For batch kernels that bypass :meth:`learn_one`; call it after the
        batch when :attr:`delta` is not ``None``.
        """
        delta = self._delta
        if delta is None:
            return
        learn = delta.learn_one
        for i, (x, y, w) in enumerate(zip(xs, ys, ws, strict=True)):
            if y is not None and i not in errors:
                learn(x, y, w)
                self._delta_weight += w

    # ------------------------------------------------------------------ merging
    def merge(self, other: Learner) -> Learner:
        """Add ``other``'s statistics to this model, in place, and return ``self``.

        Learning events A then merging a model of events B equals learning A
        and B in one model. With forgetting, ``other``'s statistics are added
        as they stand now (already decayed in ``other``).

        Memory bounds: ``other``'s features beyond ``max_features`` (in the
        order ``other`` learned them) are dropped, values beyond a per-feature
        cap go to the "other"/overflow bucket. Every class of ``other`` is
        kept, even past ``max_classes`` (dropping one would need its events):
        the bound applies to learning, so merging ``m`` models holds at most
        ``m × max_classes`` classes, and a merge never fails for it (a daemon
        folding the deltas of several workers must not stop).

        Raises
        ------
        IncompatibleModelError
            If ``other`` is of another class or has other parameters.
        """
        if type(other) is not type(self):
            raise IncompatibleModelError(
                f"cannot merge a {type(other).__name__} into a {type(self).__name__}; "
                "merge models of the same class only"
            )
        mine, theirs = self.get_params(), other.get_params()
        if mine != theirs:
            diff = sorted(k for k in mine if mine.get(k) != theirs.get(k))
            raise IncompatibleModelError(
                f"cannot merge {type(self).__name__} models whose parameters differ: {diff}; "
                "create both with the same parameters"
            )
        self._merge(other, other._scale / self._scale)
        self.n_learned += other.n_learned
        return self

    # ------------------------------------------------------------------ state
    def get_params(self) -> dict[str, Any]:
        """Constructor arguments of this learner (``half_life`` included)."""
        params = self._params()
        params["half_life"] = self.half_life
        return params

    def _cap_params(self) -> dict[str, Any]:
        """``max_classes`` and ``max_features``, for ``_params`` of learners that take them."""
        return {"max_classes": self.max_classes, "max_features": self.max_features}

    def _admit(self, n_known: int, new: int = 1) -> int:
        """How many of ``new`` features first met may be learned next to ``n_known`` ones."""
        cap = self.max_features
        if cap is None:
            return new
        return max(0, min(new, cap - n_known))

    def _new_features(self, names: list[Any], n_known: int) -> list[Any]:
        """Of ``names`` first met (in event order), those that may be learned.

        Each is checked (see :func:`stream_nb._state.check_feature_names`);
        at most ``max_features - n_known`` are kept.
        """
        check_feature_names(names)
        room = self._admit(n_known, len(names))
        return names if room == len(names) else names[:room]

    def clone(self) -> Learner:
        """A new, untrained learner with the same parameters."""
        return type(self)(**self.get_params())

    def to_state(self) -> dict[str, Any]:
        """The model as plain JSON-able data (no pickle).

        Examples
        --------
        >>> from stream_nb import CategoricalNB
        >>> model = CategoricalNB()
        >>> model.learn_one({"colour": "red"}, "apple")
        >>> copy = Learner.from_state(model.to_state())
        >>> copy.predict_proba_one({"colour": "red"}) == model.predict_proba_one({"colour": "red"})
        True
        """
        return {
            "format": STATE_FORMAT,
            "version": STATE_VERSION,
            "learner": type(self).__name__,
            "params": {k: encode_value(v) for k, v in self.get_params().items()},
            "n_learned": self.n_learned,
            "scale": self._scale,
            "stats": self._stats_to_state(),
        }

    @classmethod
    def from_state(cls, state: Any) -> Learner:
        """Rebuild a learner from :meth:`to_state` output.

        Called on :class:`Learner` it builds whichever learner the state names;
        called on a subclass it also checks the state is of that class.

        Raises
        ------
        ModelStateError
            If the state is malformed, of an unknown version, or names another
            learner class.
        """
        if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT:
            raise ModelStateError(
                f"not a stream-nb learner state (expected format {STATE_FORMAT!r})"
            )
        if state.get("version") != STATE_VERSION:
            raise ModelStateError(
                f"unsupported learner state version {state.get('version')!r}; "
                f"this stream-nb reads version {STATE_VERSION}"
            )
        name = state.get("learner")
        target = Learner._registry.get(name) if isinstance(name, str) else None
        if target is None:
            raise ModelStateError(f"unknown learner {name!r} in state")
        if cls is not Learner and not issubclass(target, cls):
            raise ModelStateError(f"state holds a {name}, not a {cls.__name__}")
        try:
            raw = field(state, "params", "state")
            if not isinstance(raw, Mapping):
                raise ModelStateError(f"params: must be a JSON object, got {raw!r:.80}")
            params = {k: decode_value(v) for k, v in raw.items()}
            model = target(**params)
            model.n_learned = read_n_learned(field(state, "n_learned", "state"))
            scale = read_count(field(state, "scale", "state"), "scale", positive=True)
            if scale > 1.0 or (model.half_life is None and scale != 1.0):
                raise ModelStateError(
                    f"scale: must be in (0, 1] with half_life and exactly 1 without, got {scale!r}"
                )
            model._scale = scale
            model._stats_from_state(field(state, "stats", "state"))
        except ModelStateError as exc:
            if str(exc).startswith(f"malformed {name} state"):
                raise
            raise ModelStateError(f"malformed {name} state: {exc}") from exc
        except (
            KeyError,
            TypeError,
            ValueError,
            AttributeError,
            IndexError,
            ArithmeticError,
            RecursionError,
        ) as exc:
            raise ModelStateError(f"malformed {name} state: {exc!r}") from exc
        if model._scale < _RENORMALISE_BELOW:  # (a state written with a lower threshold)
            model._rescale(model._scale)
            model._scale = 1.0
        return model

    def model_size(self) -> dict[str, int]:
        """Size of the model, for monitoring.

        Returns
        -------
        dict
            ``classes``, ``features``, ``stored_counts`` (numbers held in
            statistics) and ``bytes``, an estimate of memory at
            ``_BYTES_PER_NUMBER`` bytes per stored number (a float in a dict
            entry costs about that in CPython).
        """
        classes, features, stored = self._size()
        return {
            "classes": classes,
            "features": features,
            "stored_counts": stored,
            "bytes": stored * self._BYTES_PER_NUMBER,
        }

    _BYTES_PER_NUMBER: ClassVar[int] = 100

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({args})"

    # ------------------------------------------------------------------ hooks
    @abc.abstractmethod
    def _params(self) -> dict[str, Any]:
        """Constructor arguments except ``half_life``."""

    @abc.abstractmethod
    def _learn(self, x: Mapping[str, Any], y: Hashable, w: float) -> None:
        """Add one event of raw weight ``w``."""

    @abc.abstractmethod
    def _joint_log_likelihood(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        """Unnormalised log scores of every class; ``{}`` before learning."""

    @abc.abstractmethod
    def _merge(self, other: Any, factor: float) -> None:
        """Add ``other``'s raw statistics × ``factor``."""

    @abc.abstractmethod
    def _rescale(self, factor: float) -> None:
        """Multiply every raw weight-like statistic by ``factor``."""

    @abc.abstractmethod
    def _stats_to_state(self) -> Any:
        """Statistics as JSON-able data."""

    @abc.abstractmethod
    def _stats_from_state(self, stats: Any) -> None:
        """Load statistics from :meth:`_stats_to_state` output."""

    @abc.abstractmethod
    def _size(self) -> tuple[int, int, int]:
        """``(classes, features, stored numbers)``."""

    def _class_labels(self) -> Collection[Hashable]:
        """The classes learned so far (O(1) membership); needed for ``max_classes``."""
        raise NotImplementedError(
            f"{type(self).__name__} sets max_classes but does not implement _class_labels"
        )
