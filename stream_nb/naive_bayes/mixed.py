"""Naive Bayes over mixed categorical and numeric features, the default for real events."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from numbers import Real
from typing import Any, NamedTuple

from stream_nb._exceptions import (
    ConfigError,
    IncompatibleModelError,
    InvalidEventError,
    ModelStateError,
)
from stream_nb._mle import resolve_zero_terms_one, split_terms_one
from stream_nb._params import check_alpha, check_bool, check_cap, check_class_prior
from stream_nb._state import (
    CATEGORY_TYPES,
    check_categories,
    check_feature_names,
    pairs,
    read_key,
    read_mapping,
    read_pairs,
)
from stream_nb.base import Capabilities, Learner
from stream_nb.limits import check_number
from stream_nb.naive_bayes._categorical_stats import CategoricalStatistics
from stream_nb.naive_bayes._gaussian_scores import joint_log_likelihood
from stream_nb.naive_bayes._gaussian_stats import FEATURE, check_var_smoothing
from stream_nb.naive_bayes._numeric_bins import NumericBins, binned_column, check_bin_params
from stream_nb.naive_bayes.gaussian import _GaussianLearner

__all__ = ["NaiveBayes"]

CATEGORICAL = "categorical"
GAUSSIAN = "gaussian"
NUMERIC = "numeric"  # the schema word the semi-naive learners use; modelled as GAUSSIAN
BINS = "bins"
_KINDS = (CATEGORICAL, NUMERIC, GAUSSIAN, BINS)
#: The values of ``numeric``: how a feature inferred numeric is modelled.
_NUMERIC_MODES = (GAUSSIAN, BINS)

#: Plans (how an event's keys split into kinds) are cached by key tuple; the
#: cache is emptied when it reaches this size (sparse events have many key sets).
_MAX_PLANS = 512


class _Plan(NamedTuple):
    all_gaussian: bool
    gaussian: tuple[str, ...]  # (with the binned features still warming up)
    categorical: tuple[str, ...]
    warming: tuple[str, ...] = ()  # binned features still warming up
    binned: tuple[str, ...] = ()  # binned features with cut points


def _kind_of(value: Any) -> str:
    """Gaussian for int/float (not bool), categorical for everything else."""
    if value.__class__ is not bool and isinstance(value, Real):
        return GAUSSIAN
    return CATEGORICAL


class NaiveBayes(_GaussianLearner):
    """Naive Bayes for events with both categorical and numeric features.

    Each feature is *categorical*, *Gaussian* or *binned*. ``schema`` fixes the
    kind of the features it names, and a feature of ``bin_edges`` is binned; any
    other feature takes the kind of the first non-``None`` value learned for it:
    ``int``/``float`` (not ``bool``) makes it numeric, Gaussian or binned by
    ``numeric``, anything else (``str``, ``bool``, …) categorical. The kind
    never changes afterwards. A later value of the other type is handled
    by the kind: a categorical feature takes any hashable value as one more
    category (``3`` and ``"3"`` are different categories), while a Gaussian
    feature given a non-number raises :class:`~stream_nb.InvalidEventError`
    (reason ``"non_numeric"``, model unchanged) whose message names the
    ``schema`` fix.

    The score sums the terms of :class:`~stream_nb.CategoricalNB` and
    :class:`~stream_nb.GaussianNB`, unchanged, under one prior:

    - ``log P(y) = log((N_y + α) / (N + Kα))`` (Laplace/Lidstone, as
      :func:`stream_nb._params.log_prior`; ``fit_prior=False`` gives ``1/K``,
      ``class_prior`` fixes it);
    - categorical: ``log((N_{y,i,v} + α) / (N_{y,i} + S_i α))``;
    - binned: the categorical term of the value's bin ``bisect_right(edges, x_f)``
      (the recipe ``pd.cut`` + CategoricalNB, online); until a feature's cut
      points are known it is modelled by its Gaussian, see below;
    - Gaussian: ``-½ (log(2π σ²_yf) + (x_f - μ_yf)² / σ²_yf)`` with
      ``σ² = M2/n + ε_f``, ``ε_f = var_smoothing × V_f`` (``var_smoothing_mode=
      "feature"``) or ``var_smoothing × max_f V_f`` over the Gaussian features
      (``"global"``), as in :class:`~stream_nb.GaussianNB`.

    With ``feature_weights``, each feature's term (categorical, binned or
    Gaussian) is times its weight ``w_f``: ``log P(y) + Σ_f w_f log P(x_f | y)``.

    Parameters
    ----------
    alpha
        Smoothing constant α ≥ 0 of the prior and the categorical terms (0: maximum
        likelihood, see :class:`~stream_nb.CategoricalNB`).
    var_smoothing
        As in :class:`~stream_nb.GaussianNB` (over the Gaussian features).
    var_smoothing_mode
        ``"feature"`` or ``"global"``, as in :class:`~stream_nb.GaussianNB`.
    schema
        Optional ``{feature: "categorical" | "numeric" | "bins"}`` overriding type
        inference. A ``"numeric"`` feature is modelled by one Gaussian per class
        (``"gaussian"`` is accepted as an alias; the parameter keeps the word
        given), a ``"bins"`` feature is binned.
    numeric
        How a feature inferred numeric is modelled: ``"gaussian"`` (default) or
        ``"bins"``.
    bin_edges
        ``{feature: cut points}`` fixed from the start (strictly increasing,
        finite); those features are binned whatever ``numeric`` says. The bin of
        ``x`` is ``bisect_right(edges, x)``: ``edges = numpy.linspace(lo, hi,
        6)[1:-1]`` reproduces scikit-learn's ``KBinsDiscretizer(n_bins=5,
        strategy="uniform")``.
    n_bins, warmup, strategy
        For a binned feature without ``bin_edges``: its first values, up to a
        total weight ``warmup``, place at most ``n_bins − 1`` cut points
        (``strategy="frequency"``: equal frequency, ``"width"``: equal width over
        their range; see :class:`~stream_nb.seminaive.discretise.Discretiser`),
        then frozen. Until then the feature is Gaussian (learned and scored as
        one); when they freeze its Gaussian statistics are dropped and its
        values so far are replayed, in order, as bins: the model is then
        exactly the one given those cut points as ``bin_edges`` from the start.
        A binned model has no batch kernel (its batches take the per-event path).
    fit_prior
        Learn class priors; ``False`` gives the uniform prior ``1/K``.
    class_prior
        Fixed priors by label (ratios matter). Seen classes missing from it are
        not scored.
    max_values_per_feature
        Distinct values kept per categorical feature before the shared "other"
        bucket (``None``: unbounded), exactly as in
        :class:`~stream_nb.CategoricalNB`.
    feature_weights
        ``{feature: w >= 0}``, weights of the terms (features left out: ``w = 1``).
        A weight of 0 removes the feature from prediction while its statistics are
        still learned; with ``alpha = 0`` a weight-0 term of probability 0 is not a
        zero term. Models merge only with equal weights; the batch kernel
        weighs every term as the per-event path does.
    half_life
        Optional forgetting, see :class:`stream_nb.base.Learner`.
    max_classes, max_features
        Memory bounds, see :class:`stream_nb.base.Learner`. ``max_features``
        counts both kinds; the new numeric features of an event are admitted
        before its new categorical ones. A feature not learned gets no kind.

    Examples
    --------
    >>> from stream_nb import NaiveBayes
    >>> model = NaiveBayes()
    >>> for x, y in [({"plan": "pro", "paid": True, "spend": 120.0}, "stay"),
    ...              ({"plan": "free", "paid": False, "spend": 3.5}, "churn"),
    ...              ({"plan": "pro", "paid": True, "spend": 95.0}, "stay"),
    ...              ({"plan": "free", "paid": True, "spend": 8.0}, "churn")]:
    ...     model.learn_one(x, y)
    >>> model.predict_one({"plan": "pro", "spend": 100.0})
    'stay'
    >>> model.kinds()
    {'paid': 'categorical', 'plan': 'categorical', 'spend': 'gaussian'}
    """

    _NUMERIC_HINT = (
        "NaiveBayes fixed {feature!r} as numeric (Gaussian or binned) from its first value: send "
        "numbers, or pass schema={{{feature!r}: 'categorical'}} to treat it as categorical"
    )

    capabilities = Capabilities(
        column_kernel=True, kernel_records_delta=True, informative_features=True
    )
    #: Whether ``alpha=0`` (maximum likelihood, scored by stream_nb._mle's rule) is accepted.
    _ALPHA_ZERO = True

    def feature_names(self) -> list[Hashable]:
        return list(self._kinds)  # every feature met, and the schema's

    def _informative_entries(self, top: int | None) -> list[dict[str, Any]]:
        from stream_nb.informative import categorical_entries, gaussian_entries

        labels, present, counts = self._categorical_stats()
        alpha = self.alpha / self._scale
        entries = []  # (alpha=0: no categorical entry, see CategoricalNB.informative_features)
        if alpha:
            entries = categorical_entries(labels, present, counts, alpha, self.class_prior, top)
        entries += gaussian_entries(
            self.gaussian.to_state(),
            self.var_smoothing,
            self.class_prior,
            per_feature=self.gaussian.per_feature,
        )
        return entries

    def __init__(
        self,
        alpha: float = 1.0,
        *,
        var_smoothing: float | None = None,
        var_smoothing_mode: str = FEATURE,
        schema: Mapping[str, str] | None = None,
        numeric: str = GAUSSIAN,
        bin_edges: Mapping[Hashable, Sequence[float]] | None = None,
        n_bins: int = 10,
        warmup: int = 100,
        strategy: str = "frequency",
        fit_prior: bool = True,
        class_prior: Mapping[Hashable, float] | None = None,
        max_values_per_feature: int | None = None,
        feature_weights: Mapping[Hashable, float] | None = None,
        half_life: float | None = None,
        max_classes: int | None = None,
        max_features: int | None = None,
    ) -> None:
        super().__init__(half_life=half_life, max_classes=max_classes, max_features=max_features)
        self.max_values_per_feature = check_cap(max_values_per_feature, "max_values_per_feature")
        self._set_feature_weights(feature_weights)
        self.alpha = check_alpha(alpha, allow_zero=self._ALPHA_ZERO)
        self.var_smoothing, self.var_smoothing_mode = check_var_smoothing(
            var_smoothing, var_smoothing_mode
        )
        self.schema = _check_schema(schema)
        if numeric not in _NUMERIC_MODES:
            raise ConfigError(f"numeric must be 'gaussian' or 'bins', got {numeric!r}")
        self.numeric = numeric
        self.bin_edges, self.n_bins, self.warmup, self.strategy = check_bin_params(
            bin_edges, n_bins, warmup, strategy
        )
        for f in self.bin_edges or {}:
            if _schema_kinds(self.schema).get(f, BINS) != BINS:
                raise ConfigError(
                    f"bin_edges[{f!r}]: schema makes {f!r} {_schema_kinds(self.schema)[f]!r}; "
                    "bin_edges are for binned features: drop one of the two"
                )
        self.bins = NumericBins(
            n_bins=self.n_bins, warmup=self.warmup, bin_edges=self.bin_edges, strategy=self.strategy
        )
        #: Whether any feature may be binned (then there is no batch kernel).
        self._binning = (
            numeric == BINS or bool(self.bin_edges) or BINS in (self.schema or {}).values()
        )
        self.fit_prior = check_bool(fit_prior, "fit_prior")
        self.class_prior = check_class_prior(class_prior)
        self.gaussian = self._new_gaussian(prior_alpha=self.alpha, fit_prior=self.fit_prior)
        # the kind of every feature met so far (and of every schema feature)
        self._kinds: dict[Hashable, str] = {}
        self._kinds.update(_schema_kinds(self.schema))
        self._kinds.update(dict.fromkeys(self.bin_edges or {}, BINS))
        self._plans: dict[tuple[str, ...], _Plan] = {}
        #: The categorical statistics, as CategoricalNB's (the classes are counted in the
        #: Gaussian part, so they learn with event=False and keep no class weights).
        self.categorical = CategoricalStatistics(
            self.max_values_per_feature,
            admit=None if self.max_features is None else self._admit_category,
        )

    def _params(self) -> dict[str, Any]:
        return {
            "alpha": self.alpha,
            "var_smoothing": self.var_smoothing,
            "var_smoothing_mode": self.var_smoothing_mode,
            "schema": self.schema,
            "fit_prior": self.fit_prior,
            "class_prior": self.class_prior,
            "max_values_per_feature": self.max_values_per_feature,
            **self._weight_params(),
            **self._numeric_params(),
            **self._cap_params(),
        }

    def _weight_params(self) -> dict[str, Any]:
        """The ``feature_weights`` parameter (a subclass without it returns ``{}``)."""
        return {"feature_weights": self.feature_weights}

    def _numeric_params(self) -> dict[str, Any]:
        """The parameters of binned numbers (a subclass without them returns ``{}``)."""
        return {
            "numeric": self.numeric,
            "bin_edges": self.bin_edges,
            "n_bins": self.n_bins,
            "warmup": self.warmup,
            "strategy": self.strategy,
        }

    def _n_features(self) -> int:
        return len(self.gaussian.feature_index) + len(self.categorical.present)

    def _categorical_part(self) -> tuple[CategoricalStatistics, float]:
        return self.categorical, self.alpha

    def _admit_category(self) -> bool:
        """Whether one more categorical feature may be learned (``max_features``)."""
        return bool(self._admit(self._n_features()))

    @property
    def columns_supported(self) -> bool:
        """:attr:`Learner.columns_supported`, ``False`` while a binned feature warms up
        (its values are recorded one by one until its cut points freeze: the engine then
        builds no columns)."""
        return not self.bins.records and super().columns_supported

    def _kernel_plan(self, names: tuple[str, ...]) -> _Plan | None:
        """The plan of a column batch with keys ``names``, if every kind is known."""
        plan = self._plans.get(names)
        if plan is None and self._kinds.keys() >= set(names):
            # every kind is known: the plan is determined (and cached) whether or not an
            # earlier event built it, so the result does not depend on the cache's history
            # (e.g. a model just restored from its state)
            plan = self._plan(dict.fromkeys(names), False)
        return plan

    def _column_split(self, names: tuple[str, ...]) -> tuple[str, ...] | None:
        plan = self._kernel_plan(names)
        if plan is None or plan.warming or plan.gaussian != self.gaussian.order:
            return None  # (a binned feature warming up: the per-event path records it)
        # (a feature with statistics has its kind already: the kernel fixes none)
        categorical = plan.categorical + plan.binned
        if any(f not in self.categorical.counts for f in categorical):
            return None
        return categorical

    def _kernel_columns(
        self, names: tuple[str, ...], columns: Sequence[Sequence[Any]]
    ) -> Sequence[Sequence[Any]] | None:
        plan = self._kernel_plan(names)
        if plan is None or not plan.binned:
            return columns
        out = list(columns)
        for f in plan.binned:
            j = names.index(f)
            bins = binned_column(self.bins.edges(f), columns[j])
            if bins is None:
                return None  # a value that is not a number in range: the per-event path
            out[j] = bins
        return out

    def _categorical_stats(self) -> tuple[list[Hashable], dict[Any, Any], dict[Any, Any]]:
        """The labels and the categorical stores as held (raw units, not copies: read
        only), for :mod:`stream_nb.informative`, as :class:`~stream_nb.CategoricalNB`."""
        return list(self.gaussian.labels), self.categorical.present, self.categorical.counts

    def kinds(self) -> dict[Hashable, str]:
        """The kind (``"categorical"``, ``"gaussian"`` or ``"bins"``) of every feature known
        so far, by name."""
        return dict(sorted(self._kinds.items(), key=lambda item: repr(item[0])))

    # ------------------------------------------------------------------ plans
    def _plan(self, x: Mapping[str, Any], learning: bool) -> _Plan:
        """Split ``x``'s features by kind; while learning, fix the kind of new ones."""
        kinds = self._kinds
        gaussian: list[str] = []
        categorical: list[str] = []
        warming: list[str] = []
        binned: list[str] = []
        complete = True
        for f, value in x.items():
            kind = kinds.get(f)
            if kind is None:
                complete = False  # kind not known yet: the plan cannot be reused
                if value is None:
                    continue
                if not learning:
                    if _kind_of(value) == GAUSSIAN:  # a number it could not learn is
                        check_number(f, value, self._NUMERIC_HINT)  # rejected here too
                    continue  # unknown at prediction time: contributes nothing
                check_feature_names((f,))
                kind = _kind_of(value)
                if kind == GAUSSIAN:
                    kind = self.numeric
            if kind == BINS:
                if self.bins.frozen(f):
                    binned.append(f)
                    continue
                warming.append(f)
                kind = GAUSSIAN  # (modelled by its Gaussian until its cut points freeze)
            (gaussian if kind == GAUSSIAN else categorical).append(f)
        # all_gaussian: x itself can go to the Gaussian part (no feature to drop)
        plan = _Plan(
            len(gaussian) == len(x) and not warming,
            tuple(gaussian),
            tuple(categorical),
            tuple(warming),
            tuple(binned),
        )
        if complete:
            if len(self._plans) >= _MAX_PLANS:
                self._plans.clear()
            self._plans[tuple(x)] = plan
        return plan

    # ------------------------------------------------------------------ learning
    def _learn(self, x: Mapping[str, Any], y: Hashable, w: float) -> None:
        plan = self._plans.get(tuple(x))
        fresh = plan is None  # a cached plan has only features of known kind
        if plan is None:
            plan = self._plan(x, learning=True)
        if plan.all_gaussian:
            self.gaussian.learn(x, y, w)  # validates before changing anything
            if fresh:
                self._fix_kinds(plan.gaussian, GAUSSIAN)
            return
        cat = [(f, x[f]) for f in plan.categorical if x[f] is not None]
        for f, value in cat:
            if value.__class__ not in CATEGORY_TYPES:
                check_categories(x, (f,))
        hint = self._NUMERIC_HINT
        bins = self.bins
        cat += [
            (f, bins.bin(f, check_number(f, x[f], hint))) for f in plan.binned if x[f] is not None
        ]
        self.gaussian.learn({f: x[f] for f in plan.gaussian}, y, w)
        self.categorical.learn(cat, y, w, False)  # (event=False: counted in the Gaussian part)
        if fresh:
            self._fix_kinds([*plan.warming, *plan.binned], BINS)
            self._fix_kinds(plan.gaussian, GAUSSIAN)
            self._fix_kinds([f for f, _ in cat], CATEGORICAL)
        for f in plan.warming:
            value = x[f]
            if (
                value is not None
                and f in self.gaussian.feature_index
                and bins.warm(f, value, y, w, w * self._scale)
            ):
                self._freeze(f)

    def defer_binning(self) -> None:
        """Cut points freeze only from a merge, never from this model's own sample: under
        model sync the shared base model decides them (features warming up stay Gaussian)."""
        self.bins.discretiser.defer()

    def _prepare_delta(self, delta: Learner) -> None:
        assert isinstance(delta, NaiveBayes)
        delta.bins.discretiser.bin_like(self.bins.discretiser)  # the same cut points

    def _freeze(self, feature: Hashable) -> None:
        """``feature``'s cut points are known: drop its Gaussian statistics and learn its
        recorded values, in order, as bins (see ``bin_edges``)."""
        self.gaussian.drop_feature(feature)
        bins = self.bins
        learn = self.categorical.learn
        for value, y, w in bins.take(feature):
            learn([(feature, bins.bin(feature, value))], y, w, False)
        self._plans = {}

    def _recorded_kinds(self, names: tuple[str, ...], model: _GaussianLearner) -> None:
        assert isinstance(model, NaiveBayes)
        kinds = model._kinds  # (every feature of a kernel batch has its kind there)
        for kind in (GAUSSIAN, CATEGORICAL, BINS):
            self._fix_kinds([f for f in names if kinds.get(f) == kind], kind)

    def _fix_kinds(self, features: Iterable[Hashable], kind: str) -> None:
        """Record the kind of the features that now have statistics."""
        kinds = self._kinds
        gaussian = self.gaussian.feature_index
        categorical = self.categorical.present
        for f in features:
            if f in (categorical if kind == CATEGORICAL else gaussian) or (
                kind == BINS and f in categorical
            ):
                kinds.setdefault(f, kind)

    # ------------------------------------------------------------------ scoring
    def _joint_log_likelihood(self, x: Mapping[str, Any]) -> dict[Hashable, float]:
        plan = self._plans.get(tuple(x))
        if plan is None:
            plan = self._plan(x, learning=False)
        weights = self._score_weights
        if plan.all_gaussian:
            return joint_log_likelihood(self.gaussian, x, self._scale, weights)
        jll = joint_log_likelihood(
            self.gaussian, {f: x[f] for f in plan.gaussian}, self._scale, weights
        )
        if not jll:
            return jll
        alpha = self.alpha / self._scale  # α in raw units, see Learner
        features = plan.categorical
        binned: dict[str, Any] = {}
        if plan.binned:
            hint = self._NUMERIC_HINT
            bins = self.bins
            binned = {
                f: bins.bin(f, check_number(f, x[f], hint)) for f in plan.binned if x[f] is not None
            }
        try:
            if alpha == 0:  # maximum likelihood: zero counts resolved by stream_nb._mle's rule
                finite, zeros = split_terms_one(jll)
                self.categorical.add_terms_mle(finite, zeros, x, features, weights)
                if binned:
                    self.categorical.add_terms_mle(finite, zeros, binned, binned, weights)
                return resolve_zero_terms_one(finite, zeros)
            self.categorical.add_terms(jll, x, features, alpha, weights)
        except TypeError:
            self.categorical.check_hashable(x, features)  # names an unhashable value
            raise
        if binned:
            self.categorical.add_terms(jll, binned, binned, alpha, weights)
        return jll

    # ------------------------------------------------------------------ merge / scale / state
    def _merge(self, other: NaiveBayes, factor: float) -> None:
        clash = [f for f, kind in other._kinds.items() if self._kinds.get(f, kind) != kind]
        if clash:
            raise IncompatibleModelError(
                f"cannot merge NaiveBayes models that gave features different kinds: {clash}; "
                "fix the kinds with the same schema in both"
            )
        bins, their_bins = self.bins, other.bins
        bins.check_merge(their_bins)
        # a feature the other model froze first: freeze it here with its cut points
        for f, edges in their_bins.discretiser.edges.items():
            if not bins.frozen(f):
                bins.freeze(f, edges)
                if f in self.gaussian.feature_index:
                    self._freeze(f)
        # a feature still warming up there but binned here: bin its records
        binned_here = [f for f in their_bins.records if bins.frozen(f)]
        self.gaussian.merge(other.gaussian, factor, exclude=set(binned_here))
        mine, theirs = self.categorical, other.categorical
        room = None  # new categorical features that may be learned (None: no bound)
        if self.max_features is not None:
            room = self._admit(self._n_features(), len(theirs.present))
        keep = mine.admitted(theirs, room)
        unbounded = keep is None and self.max_values_per_feature is None
        mine.merge(theirs, factor, None if unbounded else mine.value_map(theirs, keep))
        for f in binned_here:
            for value, y, w in their_bins.records[f]:
                mine.learn([(f, bins.bin(f, value))], y, w * factor, False)
        # a feature warming up in both: the records add up; the samples merge (and may
        # freeze the cut points, as one model learning both streams would)
        for f, records in their_bins.records.items():
            if not bins.frozen(f) and f in self.gaussian.feature_index:
                bins.records.setdefault(f, []).extend((v, y, w * factor) for v, y, w in records)
        bins.discretiser.merge(their_bins.discretiser, self.gaussian.feature_index)
        for f in list(bins.records):
            if bins.frozen(f):
                self._freeze(f)
        self._plans = {}
        if self.max_values_per_feature is None and self.max_features is None:
            self._kinds.update(other._kinds)
            return
        schema = self.schema or {}
        for f, kind in other._kinds.items():
            if f in schema or f in (
                self.gaussian.feature_index if kind == GAUSSIAN else self.categorical.present
            ):
                self._kinds.setdefault(f, kind)

    def _rescale(self, factor: float) -> None:
        self.gaussian.rescale(factor)
        self.categorical.rescale(factor)
        self.bins.rescale(factor)

    def _stats_to_state(self) -> dict[str, Any]:
        state = {
            "gaussian": self.gaussian.to_state(),
            "kinds": pairs(self._kinds),
            **self.categorical.to_state(classes=False),
        }
        if self._binning:
            state["bins"] = self.bins.to_state()
        return state

    def _stats_from_state(self, stats: Mapping[str, Any]) -> None:
        fields = ("gaussian", "kinds", "present", "counts")
        stats = read_mapping(stats, "stats", (*fields, "bins") if self._binning else fields)
        self.gaussian.from_state(stats["gaussian"], "stats.gaussian", self.max_features)
        bins = self.bins
        if self._binning:
            bins.load_state(stats["bins"], "stats.bins")
            for f, edges in (self.bin_edges or {}).items():
                if not bins.frozen(f) or bins.edges(f) != edges:
                    raise ModelStateError(f"stats.bins: the cut points of {f!r} are not bin_edges'")

        def kind_of(value: Any, where: str) -> str:
            if value not in _KINDS:
                raise ModelStateError(
                    f"{where}: feature kinds must be one of {_KINDS}, got {value!r}"
                )
            return str(value)

        kinds = read_pairs(stats["kinds"], "stats.kinds", kind_of, key=read_key)
        categorical = self.categorical
        categorical.load_state(
            stats,
            "stats",
            class_weight=dict(zip(self.gaussian.labels, self.gaussian.class_weight, strict=True)),
        )
        present = categorical.present
        if any(
            kinds.get(f) != (BINS if f in bins.records else GAUSSIAN)
            for f in self.gaussian.features
        ) or any(kinds.get(f) != (BINS if bins.frozen(f) else CATEGORICAL) for f in present):
            raise ModelStateError("stats.kinds: feature statistics do not match the feature kinds")
        if any(f not in self.gaussian.feature_index for f in bins.records):
            raise ModelStateError("stats.bins.records: a feature warming up has no statistics")
        for f, kind in kinds.items():
            if _schema_kinds(self.schema).get(f, kind) != kind:
                raise ModelStateError(f"stats.kinds[{f!r}]: {kind!r} contradicts the schema")
        n_features = len(self.gaussian.features) + len(present)
        if self.max_features is not None and n_features > self.max_features:
            raise ModelStateError(
                f"stats: {n_features} features, more than max_features={self.max_features}"
            )
        if len(kinds) > n_features + len(self.schema or {}):
            raise ModelStateError("stats.kinds: names features that have no statistics")
        self._kinds = kinds
        self._plans = {}

    def _size(self) -> tuple[int, int, int]:
        classes, features, stored = self.gaussian.size()
        stored += self.categorical.size() + self.bins.size()
        return classes, features + len(self.categorical.present), stored


def _schema_kinds(schema: Mapping[str, str] | None) -> dict[Hashable, str]:
    """The feature kinds a schema fixes, with ``"numeric"`` spelled as the model's Gaussian kind."""
    return {f: GAUSSIAN if k == NUMERIC else k for f, k in (schema or {}).items()}


def _check_schema(schema: Any) -> dict[str, str] | None:
    if schema is None:
        return None
    if not isinstance(schema, Mapping):
        raise ConfigError(
            f"schema must be a mapping feature -> 'categorical' | 'numeric', got {schema!r}"
        )
    out: dict[str, str] = {}
    for feature, kind in schema.items():
        try:
            check_feature_names((feature,))
        except InvalidEventError as exc:
            raise ConfigError(f"schema: {exc}") from None
        if kind not in _KINDS:
            raise ConfigError(
                f"schema[{feature!r}] must be 'categorical', 'numeric' (alias 'gaussian') or "
                f"'bins', got {kind!r}"
            )
        out[feature] = kind
    return out
