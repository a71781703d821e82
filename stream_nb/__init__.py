"""stream-nb: online Naive Bayes and semi-naive Bayes, exact in log space.

The public surface is listed in ``__all__``; implementation lives in
submodules.
"""

from __future__ import annotations

from stream_nb._exceptions import (
    CheckpointError,
    ConfigError,
    ConnectorError,
    CorruptCheckpointError,
    IncompatibleModelError,
    InvalidEventError,
    ModelStateError,
    SinkError,
    SourceError,
    StreamNBError,
)
from stream_nb.base import Learner
from stream_nb.categorical import CategoricalNB

__version__ = "0.1.0"

__all__ = [
    "CategoricalNB",
    "CheckpointError",
    "ConfigError",
    "ConnectorError",
    "CorruptCheckpointError",
    "IncompatibleModelError",
    "InvalidEventError",
    "Learner",
    "ModelStateError",
    "SinkError",
    "SourceError",
    "StreamNBError",
    "__version__",
]
