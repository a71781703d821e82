"""The models of the accuracy benchmark: a registry of named configurations.

A configuration is a name (for stream-nb, the constructor call it runs, e.g.
``"NaiveBayes(var_smoothing_mode='global')"``), how to run it prequentially on a
stream, which streams it applies to, and the tables of the results it
appears in. Adding one is one line in :data:`CONFIGS`, for example::

    snb(NaiveBayes, var_smoothing=1e-12, tables=(VAR_SMOOTHING,)),

Every run returns, for every event in order, the model's prediction made
*before* learning that event: ``log P(c | x)`` by class, ``{}`` when the model
predicts nothing. Scoring is the same for every model (see
:func:`benchmarks.bench_accuracy.score`).

* stream-nb: ``predict_log_proba_one(x)`` then ``learn_one(x, y)``.
* river: ``predict_proba_one(x)`` (logarithms taken here; a probability 0 is
  ``-inf``) then ``learn_one(x, y)``.
* MOA through capymoa: see :func:`run_moa`.
"""

from __future__ import annotations

import dataclasses
import math
import sys
import tempfile
import time
from collections.abc import Callable, Hashable, Mapping
from pathlib import Path
from typing import Any

from benchmarks.accuracy_streams import Stream
from stream_nb import (
    AODE,
    KDB,
    SPODE,
    TAN,
    BernoulliNB,
    CategoricalNB,
    ComplementNB,
    GaussianNB,
    Learner,
    MultinomialNB,
    NaiveBayes,
    WeightedNB,
)
from stream_nb.seminaive.discretise import Discretiser, equal_frequency_edges

__all__ = [
    "BIN_EDGES",
    "CONFIGS",
    "DEFAULT",
    "HALF_LIFE",
    "HALF_LIFE_EVENTS",
    "VAR_SMOOTHING",
    "Config",
    "PerStream",
    "Run",
    "moa_available",
    "snb",
]

#: Keys of the result tables (see ``bench_accuracy.TABLES``).
DEFAULT = "default"
VAR_SMOOTHING = "var_smoothing"
BIN_EDGES = "bin_edges"
HALF_LIFE = "half_life"

#: ``half_life`` of the forgetting variants, in events.
HALF_LIFE_EVENTS = 1000

Prediction = dict[Hashable, float]


@dataclasses.dataclass
class Run:
    """What one configuration did on one stream.

    Attributes
    ----------
    predictions
        ``log P(c | x)`` by class for every event, predicted before learning it
        (``{}``: no prediction).
    cpu_seconds, wall_seconds
        The prequential loop's process CPU time and wall-clock time.
    notes
        Anything else worth keeping (MOA: the JVM loop's figures).
    """

    predictions: list[Prediction]
    cpu_seconds: float
    wall_seconds: float
    notes: dict[str, Any] = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Config:
    """A named model configuration.

    Attributes
    ----------
    name
        Unique name, shown in the results.
    family
        ``"stream-nb"``, ``"river"`` or ``"MOA"``.
    learner
        The learner's name without parameters (``--model`` accepts it too).
    run
        Runs the prequential loop of a fresh model on a stream.
    applies
        Whether the configuration runs on a stream.
    tables
        Keys of the result tables it appears in.
    lookahead
        The configuration is built from events before they are predicted (e.g. bin
        edges from the stream): a measurement, not a model a user can run online,
        so it is left out of the comparisons with river and MOA.
    """

    name: str
    family: str
    learner: str
    run: Callable[[Stream], Run]
    applies: Callable[[Stream], bool]
    tables: tuple[str, ...]
    lookahead: bool = False


@dataclasses.dataclass(frozen=True)
class PerStream:
    """A parameter value computed from the stream (e.g. bin edges), shown as ``label``."""

    label: str
    value: Callable[[Stream], Any]


def always(stream: Stream) -> bool:
    return True


def numeric(stream: Stream) -> bool:
    return stream.numeric


def has_numeric(stream: Stream) -> bool:
    return stream.has_numeric


def counts(stream: Stream) -> bool:
    return stream.counts


def discrete(stream: Stream) -> bool:
    return stream.discrete


def _format(value: Any) -> str:
    if isinstance(value, PerStream):
        return value.label
    if isinstance(value, float):
        return f"{value:g}"
    return repr(value)


def python_loop(
    predict: Callable[[dict[str, Any]], Prediction],
    learn: Callable[[dict[str, Any], Hashable], None],
    stream: Stream,
) -> Run:
    """Test then train on every event, in order, timed."""
    predictions: list[Prediction] = []
    append = predictions.append
    wall, cpu = time.perf_counter(), time.process_time()
    for x, y in stream.events:
        append(predict(x))
        learn(x, y)
    return Run(predictions, time.process_time() - cpu, time.perf_counter() - wall)


def snb(
    cls: type[Learner],
    *,
    applies: Callable[[Stream], bool] = always,
    tables: tuple[str, ...] = (DEFAULT,),
    **params: Any,
) -> Config:
    """A stream-nb configuration named by its constructor call.

    A parameter given as :class:`PerStream` is computed from each stream's events
    (the configuration is then marked ``lookahead``).
    """
    name = f"{cls.__name__}({', '.join(f'{k}={_format(v)}' for k, v in params.items())})"

    def run(stream: Stream) -> Run:
        values = {k: v.value(stream) if isinstance(v, PerStream) else v for k, v in params.items()}
        model = cls(**values)
        return python_loop(model.predict_log_proba_one, model.learn_one, stream)

    lookahead = any(isinstance(v, PerStream) for v in params.values())
    return Config(name, "stream-nb", cls.__name__, run, applies, tables, lookahead)


def _log_probabilities(proba: Mapping[Hashable, float]) -> Prediction:
    return {c: math.log(p) if p > 0.0 else -math.inf for c, p in proba.items()}


def river_gaussian_nb(tables: tuple[str, ...]) -> Config:
    """river's ``naive_bayes.GaussianNB()`` (numbers only)."""

    def run(stream: Stream) -> Run:
        from river import naive_bayes

        model = naive_bayes.GaussianNB()
        predict = model.predict_proba_one

        def log_proba(x: dict[str, Any]) -> Prediction:
            return _log_probabilities(predict(x))

        return python_loop(log_proba, model.learn_one, stream)

    return Config("river GaussianNB()", "river", "river GaussianNB", run, numeric, tables)


def moa_available() -> str | None:
    """``None`` when capymoa imports (and starts its JVM), else why not."""
    try:
        import capymoa.classifier  # noqa: F401
    except Exception as exc:  # ImportError, or the JVM failing to start
        return f"{type(exc).__name__}: {exc}"
    return None


def _arff_value(value: Any, nominal: bool) -> str:
    if value is None:
        return "?"
    if nominal:
        return "'" + str(value).replace("\\", "\\\\").replace("'", "\\'") + "'"
    return repr(float(value))


def write_arff(stream: Stream, path: Path) -> None:
    """The stream as an ARFF file: a feature is numeric when all its values are numbers,
    else nominal (its values as strings); the class is nominal, ``c<i>`` for the
    ``i``-th label of :attr:`Stream.labels`."""
    features = stream.features
    nominal = {
        f: not all(
            v.__class__ is not bool and isinstance(v, (int, float))
            for x, _y in stream.events
            if (v := x.get(f)) is not None
        )
        for f in features
    }
    index = {label: i for i, label in enumerate(stream.labels)}
    with path.open("w") as fh:
        fh.write("@relation stream\n")
        for i, f in enumerate(features):
            if nominal[f]:
                values = sorted({str(x[f]) for x, _y in stream.events if x.get(f) is not None})
                kind = "{" + ",".join(_arff_value(v, True) for v in values) + "}"
            else:
                kind = "numeric"
            fh.write(f"@attribute a{i} {kind}\n")
        fh.write("@attribute class {" + ",".join(f"c{i}" for i in index.values()) + "}\n@data\n")
        for x, y in stream.events:
            row = [_arff_value(x.get(f), nominal[f]) for f in features]
            fh.write(",".join([*row, f"c{index[y]}"]) + "\n")


def run_moa(stream: Stream) -> Run:
    """MOA's ``bayes.NaiveBayes`` through capymoa, on the stream written as ARFF.

    Two loops over the same instances, each on a fresh learner:

    * the **JVM loop**, ``capymoa.evaluation.prequential_evaluation(..., optimise=True)``
      (MOA's ``EfficientEvaluationLoops``: test then train inside the JVM, MOA's
      own evaluator), whose accuracy, times and predicted classes go to the notes;
    * capymoa's **Python loop**, ``predict_proba(instance)`` then
      ``train(instance)``, whose votes (normalised to sum to 1; none, all zero or
      not finite: no prediction) are the predictions scored like every other
      model's: MOA's evaluator computes no log loss.

    The notes count the events whose predicted class differs between the loops
    where the Python loop predicts (the JVM loop counts "no prediction" as class 0).
    """
    import numpy as np
    from capymoa.classifier import NaiveBayes as MOANaiveBayes
    from capymoa.evaluation import prequential_evaluation
    from capymoa.stream import ARFFStream

    labels = stream.labels
    with tempfile.TemporaryDirectory(prefix="bench-accuracy-") as tmp:
        path = Path(tmp) / f"{stream.name}.arff"
        write_arff(stream, path)
        arff = ARFFStream(str(path))
        schema = arff.get_schema()
        result = prequential_evaluation(
            arff, MOANaiveBayes(schema=schema), store_predictions=True, optimise=True
        )
        jvm_predictions = [None if p is None else int(p) for p in result.predictions()]
        arff.restart()
        learner = MOANaiveBayes(schema=schema)
        predictions: list[Prediction] = []
        wall, cpu = time.perf_counter(), time.process_time()
        while arff.has_more_instances():
            instance = arff.next_instance()
            votes = learner.predict_proba(instance)
            prediction: Prediction = {}
            if votes is not None:
                total = float(np.sum(votes))
                if total > 0.0 and math.isfinite(total):
                    prediction = _log_probabilities(
                        {labels[i]: float(v) / total for i, v in enumerate(votes)}
                    )
            predictions.append(prediction)
            learner.train(instance)
        run = Run(predictions, time.process_time() - cpu, time.perf_counter() - wall)
    if len(predictions) != len(stream.events):
        raise RuntimeError(f"MOA read {len(predictions)} of {len(stream.events)} events")
    index = {label: i for i, label in enumerate(labels)}
    disagree = sum(
        1
        for p, j in zip(predictions, jvm_predictions, strict=True)
        if p and index[max(p, key=p.__getitem__)] != j
    )
    run.notes = {
        "loop": "capymoa Python loop (predict_proba, train) scored; JVM loop checked",
        "jvm_accuracy": float(result.cumulative.accuracy()) / 100.0,
        "jvm_cpu_seconds": float(result.cpu_time()),
        "jvm_wall_seconds": float(result.wallclock()),
        "jvm_python_disagreements": disagree,
    }
    return run


def moa_naive_bayes(tables: tuple[str, ...]) -> Config:
    return Config("MOA NaiveBayes", "MOA", "MOA NaiveBayes", run_moa, always, tables)


def _edges(samples: Mapping[str, list[float]], n_bins: int) -> dict[str, list[float]]:
    edges = {f: equal_frequency_edges(values, n_bins) for f, values in samples.items()}
    # A feature whose sample holds one value has no cut point; AODE then keeps it in
    # one bin, as a cut point above every finite value does.
    return {f: e or [sys.float_info.max] for f, e in edges.items()}


def _numeric_samples(stream: Stream, limit: int | None) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {}
    for x, _y in stream.events:
        for f, v in x.items():
            if v.__class__ is not bool and isinstance(v, (int, float)):
                sample = samples.setdefault(f, [])
                if limit is None or len(sample) < limit:
                    sample.append(v)
    return samples


def warmup_edges(stream: Stream) -> dict[str, list[float]]:
    """The cut points a default AODE freezes after its warm-up, given up front: the
    equal-frequency edges of each numeric feature's first ``warmup`` values
    (what :class:`~stream_nb.seminaive.discretise.Discretiser` computes)."""
    model = AODE()
    discretiser = Discretiser(model.n_bins, model.warmup)
    for f, values in _numeric_samples(stream, model.warmup).items():
        for v in values:
            discretiser.learn_value(f, v)
    return {str(f): e or [sys.float_info.max] for f, e in discretiser.edges.items()}


def whole_stream_edges(stream: Stream) -> dict[str, list[float]]:
    """Equal-frequency cut points of every value of each numeric feature (the whole
    stream: a reference that knows the future)."""
    return _edges(_numeric_samples(stream, None), AODE().n_bins)


WARMUP_EDGES = PerStream("warm-up", warmup_edges)
WHOLE_STREAM_EDGES = PerStream("whole stream", whole_stream_edges)

_BASELINE_TABLES = (DEFAULT, VAR_SMOOTHING, HALF_LIFE)

#: Every configuration, in the order of the results' columns.
CONFIGS: list[Config] = [
    snb(CategoricalNB, applies=discrete, tables=(DEFAULT, HALF_LIFE)),
    snb(GaussianNB, applies=numeric, tables=(DEFAULT, VAR_SMOOTHING, HALF_LIFE)),
    snb(GaussianNB, var_smoothing=1e-3, applies=numeric, tables=(VAR_SMOOTHING,)),
    snb(GaussianNB, var_smoothing=1e-9, applies=numeric, tables=(VAR_SMOOTHING,)),
    snb(GaussianNB, var_smoothing=0.0, applies=numeric, tables=(VAR_SMOOTHING,)),
    snb(GaussianNB, var_smoothing_mode="global", applies=numeric, tables=(VAR_SMOOTHING,)),
    snb(
        GaussianNB,
        var_smoothing=1e-12,
        var_smoothing_mode="global",
        applies=numeric,
        tables=(VAR_SMOOTHING,),
    ),
    snb(NaiveBayes, tables=(DEFAULT, VAR_SMOOTHING, HALF_LIFE)),
    snb(NaiveBayes, var_smoothing_mode="global", applies=has_numeric, tables=(VAR_SMOOTHING,)),
    snb(NaiveBayes, numeric="bins", applies=has_numeric, tables=(DEFAULT, BIN_EDGES)),
    snb(
        NaiveBayes,
        numeric="bins",
        bin_edges=WARMUP_EDGES,
        applies=has_numeric,
        tables=(BIN_EDGES,),
    ),
    snb(WeightedNB, tables=(DEFAULT, HALF_LIFE)),
    snb(MultinomialNB, applies=counts, tables=(DEFAULT, HALF_LIFE)),
    snb(BernoulliNB, applies=counts, tables=(DEFAULT, HALF_LIFE)),
    snb(ComplementNB, applies=counts, tables=(DEFAULT, HALF_LIFE)),
    snb(SPODE, tables=(DEFAULT, HALF_LIFE)),
    snb(AODE, tables=(DEFAULT, BIN_EDGES, HALF_LIFE)),
    snb(AODE, weighting="mutual_information"),
    snb(AODE, bin_edges=WARMUP_EDGES, applies=has_numeric, tables=(BIN_EDGES,)),
    snb(AODE, bin_edges=WHOLE_STREAM_EDGES, applies=has_numeric, tables=(BIN_EDGES,)),
    snb(TAN, tables=(DEFAULT, HALF_LIFE)),
    snb(KDB, tables=(DEFAULT, HALF_LIFE)),
    river_gaussian_nb(_BASELINE_TABLES),
    moa_naive_bayes(_BASELINE_TABLES),
]


def _on_drift(applies: Callable[[Stream], bool]) -> Callable[[Stream], bool]:
    return lambda stream: stream.drift and applies(stream)


#: The forgetting variant of every default stream-nb configuration, on the drift streams.
CONFIGS += [
    snb(
        Learner.registered()[c.learner],
        applies=_on_drift(c.applies),
        tables=(HALF_LIFE,),
        half_life=HALF_LIFE_EVENTS,
    )
    for c in list(CONFIGS)
    if c.family == "stream-nb" and c.name == f"{c.learner}()"
]

_names = [c.name for c in CONFIGS]
if len(set(_names)) != len(_names):  # pragma: no cover - a registry mistake
    raise RuntimeError(f"configuration names must be unique: {_names}")
