"""Sources and sinks for stream-nb: stdin/stdout, files, in-memory test doubles, Kafka.

Installed as ``stream_nb.connectors`` (the repository's ``connectors/`` folder).
Core connectors need no extra dependency; the Kafka connector needs the ``kafka``
extra (``pip install '.[kafka]'`` in a clone).

Modules and their public names:

* :mod:`stream_nb.connectors.base`: the interfaces, :class:`Source`, :class:`Sink`,
  :class:`Record` (re-exported here), ``LineBlock``, ``Headers``, ``EngineHooks``
  (what a connector may use of the engine) and ``whole_number``;
* :mod:`stream_nb.connectors.registry`: connector URLs, ``open_source``,
  ``open_sink``, ``register``, ``scheme_of`` (the table of schemes is there);
* :mod:`stream_nb.connectors.files`: ``FileSource``, ``StdinSource``, ``FileSink``,
  ``StreamSink``;
* :mod:`stream_nb.connectors.memory`: test doubles that ship for users' tests too,
  ``ListSource``, ``MemorySink``, ``DemoSource``, ``demo_generators``;
* :mod:`stream_nb.connectors.kafka`: ``KafkaSource``, ``KafkaSink``,
  ``KafkaDeadLetterSink``, ``KafkaSync`` and the ``kafka://`` URLs (imported when a
  ``kafka://`` URL is first opened).
"""

from __future__ import annotations

from stream_nb.connectors.base import Record, Sink, Source

__all__ = ["Record", "Sink", "Source"]
