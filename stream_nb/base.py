"""The learner protocol and the work every learner shares.

A learner subclasses :class:`Learner` and implements the hooks below;
everything else (weights, forgetting, normalisation in log space, the batch
loop of :mod:`stream_nb._batch`, merging, model deltas, state) is done once here.

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
label can be saved (:func:`stream_nb._state.check_label`), and enforces the
memory bounds (``max_classes``, ``max_features``: see :class:`Learner`);
learners check feature names and values new to them before changing anything.
:meth:`Learner.from_state` reads the envelope (:mod:`stream_nb._envelope`);
each learner's ``_stats_from_state`` validates its statistics with
:mod:`stream_nb._state`, so a state either loads into a model whose every
formula is defined, or raises :class:`~stream_nb.ModelStateError` naming the
field.

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
import math
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from typing import Any, ClassVar

from stream_nb._batch import predict_learn_loop
from stream_nb._bulk import collector_paused
from stream_nb._capabilities import Capabilities
from stream_nb._decay import BatchDecay
from stream_nb._envelope import (
    STATE_FORMAT,
    STATE_VERSION,
    malformed_state,
    read_class,
    read_params,
    read_scale,
)
from stream_nb._exceptions import ConfigError, IncompatibleModelError, InvalidEventError
from stream_nb._params import check_cap
from stream_nb._softmax import ABSORB, log_softmax, log_softmax_argmax
from stream_nb._state import (
    LABEL_TYPES,
    check_feature_names,
    check_label,
    check_mapping,
    encode_value,
    field,
    read_n_learned,
)
from stream_nb.limits import RENORMALISE_BELOW, check_half_life, check_weight

__all__ = [
    "ABSORB",
    "STATE_FORMAT",
    "STATE_VERSION",
    "Capabilities",
    "Learner",
    "log_softmax",
    "log_softmax_argmax",
]

#: Renormalise raw statistics when the global scale drops below this: raw values
#: stay below 1e30 × (true weight), the headroom the numeric range of
#: :mod:`stream_nb.limits` is computed with, at one O(model) step every ~100
#: half-lives.
_RENORMALISE_BELOW = RENORMALISE_BELOW

_exp = math.exp


def _negative_score(entry: Mapping[str, Any]) -> float:
    return -float(entry["score"])


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

    @classmethod
    def registered(cls) -> dict[str, type[Learner]]:
        """The registered learner classes that are ``cls`` or subclass it, by name (a copy).

        A subclass of :class:`Learner` whose name does not start with ``_``
        registers itself when its module is imported: the name a state, the
        CLI's ``--model`` and ``inspect`` use. (The learners of stream-nb
        register when :mod:`stream_nb` is imported.)

        Examples
        --------
        >>> from stream_nb import CategoricalNB, Learner
        >>> Learner.registered()["CategoricalNB"] is CategoricalNB
        True
        >>> "GaussianNB" in CategoricalNB.registered()
        False
        """
        return {name: c for name, c in Learner._registry.items() if issubclass(c, cls)}

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
        # memory bounds (see the class docstring)
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
            check_weight(w)  # before anything changes
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

        Defined as exactly this loop (:func:`stream_nb._batch.predict_learn_loop`):
        the log posterior and the decision of event ``i`` are those of the model
        that learned events ``0..i-1`` of the batch (and everything before it);
        then event ``i`` is learned, unless its label is ``None`` (predicted only).
        The engine calls it once per batch; learners may override it with an
        exact vectorised version (same predictions to rounding, same state after
        the batch).

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
        return predict_learn_loop(self._joint_log_likelihood, self.learn_one, xs, ys, ws)

    @property
    def columns_supported(self) -> bool:
        """Whether a batch kernel may be tried for the next batch.

        ``False`` when the class has neither a column nor a row kernel, or
        while a delta is tracked (:meth:`track_delta`) by a class whose
        kernels do not record it (``capabilities.kernel_records_delta``):
        model sync then records every learned event through
        :meth:`learn_one`. The engine skips building columns when this is
        ``False``.
        """
        capabilities = type(self).capabilities
        if not (capabilities.column_kernel or capabilities.row_kernel):
            return False
        return self._delta is None or capabilities.kernel_records_delta

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

    def predict_learn_rows(
        self,
        xs: Sequence[Mapping[str, Any]],
        ys: Sequence[Hashable | None],
        ws: Sequence[float] | None = None,
    ) -> tuple[list[Hashable], Any, Any] | None:
        """:meth:`predict_learn_columns` for events given as mappings, or ``None``.

        For learners whose events do not share one set of keys (token
        counts): event ``i`` is ``xs[i]``, with label ``ys[i]`` and weight
        ``ws[i]``; the result is that of :meth:`predict_learn_columns`.
        ``None`` means "not this batch" (nothing was changed). Only classes
        that declare ``capabilities.row_kernel`` implement it.
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
    # Model sync (stream_nb.engine.sync) exchanges deltas: a model of the same class
    # that learns every event this one learns while tracked. Decaying a copy of the
    # model as it was by the delta's weight, then merging the delta (apply_delta),
    # gives this model again up to rounding.
    def track_delta(self, delta: Learner | None = None, weight: float = 0.0) -> None:
        """Record every event learned from now on into ``delta`` (default: a fresh
        :meth:`clone` that bins like this model) that already learned ``weight``.

        While a delta is tracked, :attr:`columns_supported` is ``False`` unless the
        class's batch kernels record into it (``capabilities.kernel_records_delta``).

        Examples
        --------
        >>> from stream_nb import CategoricalNB
        >>> model = CategoricalNB(half_life=3)
        >>> model.track_delta()
        >>> rebuilt = model.clone()
        >>> for x, y in [({"a": 1}, "p"), ({"a": 2}, "q")]:
        ...     model.learn_one(x, y)
        >>> rebuilt.apply_delta(*model.cut_delta())
        >>> p, q = rebuilt.predict_proba_one({"a": 1}), model.predict_proba_one({"a": 1})
        >>> abs(p["p"] - q["p"]) < 1e-12
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

        Raises :class:`~stream_nb.ConfigError` if no delta is tracked.
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
        """:meth:`decay` by ``weight``, then :meth:`merge` ``delta`` (in place)."""
        self.decay(weight)
        self.merge(delta)

    def defer_binning(self) -> None:
        """Never derive numeric cut points from this model's own sample (learners that
        bin numbers: under model sync only the shared base model fixes them)."""
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
        """Learn a batch's labelled, accepted events into the tracked delta, if any
        (for batch kernels, which bypass :meth:`learn_one`)."""
        delta = self._delta
        if delta is None:
            return
        learn = delta.learn_one
        for i, (x, y, w) in enumerate(zip(xs, ys, ws, strict=True)):
            if y is not None and i not in errors:
                learn(x, y, w)
                self._delta_weight += w

    def _kernel_decay(
        self, ys: Sequence[Hashable | None], ws: Sequence[float] | None
    ) -> tuple[bool, BatchDecay | None]:
        """For a batch kernel: ``(True, None)`` when this model does not forget,
        ``(True, decay)`` with the forgetting of the batch (labels ``ys``, weights
        ``ws``; see :mod:`stream_nb._decay`; the kernel sets ``_scale`` to
        ``decay.end`` once it learned the batch), ``(False, None)`` when the batch must
        take the per-event path: the scale would renormalise within it, or a delta is
        tracked (it forgets on its own scale, as ``learn_one`` records it)."""
        if self._gamma is None:
            return True, None
        if self._delta is not None:
            return False, None
        decay = BatchDecay.of(self._scale, self._gamma, ys, ws)
        return decay is not None, decay

    def _delta_recorded(
        self, ys: Sequence[Hashable | None], ws: Sequence[float] | None = None
    ) -> None:
        """A batch kernel added what a batch with labels ``ys`` (``None``: not learned)
        and weights ``ws`` (``None``: all 1) taught the model to the tracked
        :attr:`delta` itself: count its learned events as :meth:`learn_one` counts
        each event it records."""
        delta = self._delta
        if delta is None:
            return
        total = self._delta_weight
        n = 0
        for i, y in enumerate(ys):
            if y is not None:
                n += 1
                total += 1.0 if ws is None else ws[i]
        delta.n_learned += n
        self._delta_weight = total

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
        target = read_class(state, Learner._registry, cls)
        with malformed_state(state["learner"]):
            model = target(**target._state_params(read_params(state)))
            model.n_learned = read_n_learned(field(state, "n_learned", "state"))
            model._scale = read_scale(state, model.half_life)
            model._stats_from_state(field(state, "stats", "state"))
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
    @classmethod
    def _state_params(cls, params: dict[str, Any]) -> dict[str, Any]:
        """Hook: the constructor arguments for the params of a state, e.g. an older
        state's default made explicit (by default ``params`` unchanged)."""
        return params

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
