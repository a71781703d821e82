"""stream-nb: online Naive Bayes and semi-naive Bayes, exact in log space.

The public surface is listed in ``__all__``; implementation lives in
submodules.
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING, Any

if os.path.basename((getattr(sys, "argv", None) or [""])[0]) == "stream-nb":  # the CLI
    # The daemon calls no BLAS routine; OpenBLAS's thread pool would only spin up
    # at import. Library users' programs are left alone.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from stream_nb._exceptions import (
    CheckpointError,
    ConfigError,
    ConnectorError,
    CorruptCheckpointError,
    IncompatibleModelError,
    InvalidEventError,
    ModelStateError,
    NewerSnapshotError,
    SinkError,
    SourceError,
    StreamNBError,
)
from stream_nb.base import Learner
from stream_nb.engine import (
    Checkpointer,
    DelayedLabelCache,
    Engine,
    ErrorPolicy,
    EventDecoder,
    RunSummary,
)
from stream_nb.evaluation import LOG_LOSS_FLOOR, PrequentialEvaluator, bayes_risk_decision
from stream_nb.naive_bayes.bernoulli import BernoulliNB
from stream_nb.naive_bayes.categorical import CategoricalNB
from stream_nb.naive_bayes.complement import ComplementNB
from stream_nb.naive_bayes.gaussian import GaussianNB
from stream_nb.naive_bayes.mixed import NaiveBayes
from stream_nb.naive_bayes.multinomial import MultinomialNB
from stream_nb.naive_bayes.weighted import WeightedNB
from stream_nb.seminaive import AODE, KDB, SPODE, TAN

if TYPE_CHECKING:
    from stream_nb.engine.server import MetricsServer, serve_metrics
    from stream_nb.engine.telemetry import EngineMetrics

__version__ = "0.1.0"

#: Imported on first use: prometheus-client and http.server add to the start-up
#: which a daemon without --metrics-address does not need.
_LAZY = {
    "EngineMetrics": "stream_nb.engine.telemetry",
    "MetricsServer": "stream_nb.engine.server",
    "serve_metrics": "stream_nb.engine.server",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'stream_nb' has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


__all__ = [
    "AODE",
    "KDB",
    "LOG_LOSS_FLOOR",
    "SPODE",
    "TAN",
    "BernoulliNB",
    "CategoricalNB",
    "CheckpointError",
    "Checkpointer",
    "ComplementNB",
    "ConfigError",
    "ConnectorError",
    "CorruptCheckpointError",
    "DelayedLabelCache",
    "Engine",
    "EngineMetrics",
    "ErrorPolicy",
    "EventDecoder",
    "GaussianNB",
    "IncompatibleModelError",
    "InvalidEventError",
    "Learner",
    "MetricsServer",
    "ModelStateError",
    "MultinomialNB",
    "NaiveBayes",
    "NewerSnapshotError",
    "PrequentialEvaluator",
    "RunSummary",
    "SinkError",
    "SourceError",
    "StreamNBError",
    "WeightedNB",
    "__version__",
    "bayes_risk_decision",
    "serve_metrics",
]
