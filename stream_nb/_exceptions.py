"""The one exception hierarchy of stream-nb.

::

    StreamNBError
    ├── ConfigError            (also ValueError)  a parameter or flag is invalid
    ├── InvalidEventError      (also ValueError)  an event cannot be learned or predicted
    ├── ModelStateError        (also ValueError)  a state dict cannot be loaded
    │   └── IncompatibleModelError                merge() of models that differ
    ├── CheckpointError                           a snapshot cannot be written or read
    │   ├── CorruptCheckpointError                checksum/format mismatch
    │   └── NewerSnapshotError                    written by a newer stream-nb
    └── ConnectorError                            a source or sink failed
        ├── SourceError
        └── SinkError

Context is passed keyword-only and messages name the bad value, what was
expected, and the likely fix.
"""

from __future__ import annotations

__all__ = [
    "CheckpointError",
    "ConfigError",
    "ConnectorError",
    "CorruptCheckpointError",
    "IncompatibleModelError",
    "InvalidEventError",
    "ModelStateError",
    "SinkError",
    "SourceError",
    "StreamNBError",
]


class StreamNBError(Exception):
    """Base class of every error raised by stream-nb."""


class ConfigError(StreamNBError, ValueError):
    """A learner parameter, CLI flag or option is invalid."""


class InvalidEventError(StreamNBError, ValueError):
    """An event cannot be used.

    Parameters
    ----------
    message
        Human-readable explanation naming the bad value.
    reason
        A short, bounded machine code (``"invalid_json"``, ``"negative_count"`` …)
        used as a metric label and in dead letters.
    """

    def __init__(self, message: str, *, reason: str = "invalid_event") -> None:
        super().__init__(message)
        self.reason = reason


class ModelStateError(StreamNBError, ValueError):
    """A state dict (from ``to_state`` or a snapshot) is malformed."""


class IncompatibleModelError(ModelStateError):
    """``merge`` was given a model of another class or with other parameters."""


class CheckpointError(StreamNBError):
    """A snapshot could not be written or restored."""


class CorruptCheckpointError(CheckpointError):
    """A snapshot file failed its format or checksum validation."""


class NewerSnapshotError(CheckpointError):
    """A snapshot was written by a newer stream-nb (a format version this one cannot read).

    Not damage: the daemon stops instead of falling back to an older snapshot
    or starting over, so a downgrade never discards the newer state.
    """


class ConnectorError(StreamNBError):
    """A source or sink failed."""


class SourceError(ConnectorError):
    """Reading from a source failed."""


class SinkError(ConnectorError):
    """Writing to a sink failed."""
