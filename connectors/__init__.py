"""Sources and sinks for stream-nb: stdin/stdout, files, in-memory test doubles, Kafka.

Core connectors need no extra dependency; the Kafka connector needs the
``kafka`` extra (``pip install '.[kafka]' in a clone``).
"""

from __future__ import annotations

from stream_nb.connectors.base import Record, Sink, Source

__all__ = ["Record", "Sink", "Source"]
