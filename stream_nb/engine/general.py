"""The general path: any batch the column path does not take, as decoded events.

:func:`process_general` decodes the batch in one pass (:func:`decode_batch`)
and cuts its ordinary events into segments at the rejected and label-only
events between them. A :class:`Predictor` predicts and learns each segment
(:class:`~stream_nb.engine.batched.PredictMany`: the learner's
``predict_learn_many``; :class:`~stream_nb.engine.per_event.PredictEach`: one
event at a time, with explanations, stopping at the first error under the
error policy ``raise``); then :class:`SegmentWriter` writes the segment's
prediction records, queues its evaluations, dead-letters the events the
learner rejected and caches the unlabelled ones for delayed labels, in event
order. Rejected and label-only events are handled where they stand, after
the segment before them, so every side effect keeps the order of the input.
Blank lines are counted and do not cut a segment.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

import orjson

from stream_nb._exceptions import InvalidEventError
from stream_nb.connectors.base import Record
from stream_nb.engine.events import Event, EventDecoder
from stream_nb.engine.records import _last_timestamp, _reason, _top
from stream_nb.engine.tally import BatchTally, EvaluationQueue, learn_label_only

if TYPE_CHECKING:
    from stream_nb.engine.engine import Engine

#: A segment's features, labels (``None``: unlabelled) and weights, one per event.
Features = Sequence[dict[str, Any]]
Labels = Sequence[Hashable | None]
Weights = Sequence[float]

#: A segment's predictions: each event's log posterior (``None``: predicting it
#: failed), its decision, the errors by event index (as
#: :meth:`~stream_nb.base.Learner.predict_learn_many` gives them) and each event's
#: explanation (``None``: no explanations). The lists may stop before the
#: segment's end: at the first error, under the error policy ``raise``.
Predicted = tuple[
    list[dict[Hashable, float] | None],
    list[Hashable | None],
    dict[int, Exception],
    list[Any] | None,
]


class Predictor(Protocol):
    """Predicts, then learns, the events of one segment, in order."""

    @property
    def learn_share(self) -> float:
        """Share of the predictor's time spent learning (the rest is predicting)."""

    def predict(self, xs: Features, ys: Labels, ws: Weights) -> Predicted:
        """Predict each event of the segment, then learn it (when labelled)."""


class DecodedBatch(NamedTuple):
    """A batch decoded by :func:`decode_batch`.

    Attributes
    ----------
    events
        One per record: its :class:`Event`, the :class:`InvalidEventError` it
        was rejected with, or ``None`` for a blank line.
    specials
        Indices of the rejected and label-only events, in order.
    blanks
        Blank lines.
    started
        ``time.perf_counter()`` when the decoding of each sampled event began,
        by index (the per-event latency histogram).
    """

    events: list[Event | InvalidEventError | None]
    specials: list[int]
    blanks: int
    started: dict[int, float]


def decode_batch(
    decoder: EventDecoder, records: list[Record], counter: int, every: int
) -> DecodedBatch:
    """Decode every record of a batch; ``every > 0`` samples record ``i`` when
    ``counter + i + 1`` is a multiple of it (``counter``: records consumed before).

    Examples
    --------
    >>> batch = decode_batch(EventDecoder(), [Record(b'{"a": 1}', {}), Record(b"", {})], 0, 0)
    >>> batch.events, batch.blanks
    ([Event(x={'a': 1}, y=None, id=None, w=1.0), None], 1)
    """
    decode, validate, exact = decoder.decode, decoder.validate, decoder.exact
    max_bytes = decoder.max_bytes
    loads, decode_error = orjson.loads, orjson.JSONDecodeError
    perf = time.perf_counter
    events: list[Event | InvalidEventError | None] = []
    add = events.append
    specials: list[int] = []
    started: dict[int, float] = {}
    blanks = 0
    for record in records:
        if every:
            counter += 1
            if counter % every == 0:
                started[len(events)] = perf()
        payload = record.payload
        try:
            if len(payload) <= max_bytes:
                try:
                    obj = loads(payload)
                except decode_error:
                    obj = decode(payload)  # raises InvalidEventError with the reason
                event = validate(obj, True)
                if type(event[1]) is float or type(event[2]) is float:  # maybe beyond 64 bits
                    event = exact(payload, event)
            else:
                event = decode(payload)  # raises (too_large)
        except InvalidEventError as exc:
            if payload.strip():
                specials.append(len(events))
                add(exc)
            else:
                blanks += 1
                add(None)
            continue
        if event[0] is None:  # label-only
            specials.append(len(events))
        add(event)
    return DecodedBatch(events, specials, blanks, started)


#: Consecutive ordinary events of a batch (blank lines left out): their records,
#: features, labels, ids and weights, and ``time.perf_counter()`` when each sampled
#: one's decoding began, by index.
Segment = tuple[
    Sequence[Record], Features, Labels, Sequence[Hashable | None], Weights, dict[int, float]
]


class SegmentWriter:
    """One batch's segments, predicted and written; its tally, evaluations and output lines.

    Unkeyed sinks get the batch's lines in one ``write_many`` call at :meth:`close`.
    """

    def __init__(
        self, engine: Engine, records: list[Record], batch: DecodedBatch, predictor: Predictor
    ) -> None:
        self.engine = engine
        self.records = records
        self.batch = batch
        self.predict = predictor.predict
        self.tally = BatchTally(consumed=len(records), batch_start=0.0)
        self.queue = EvaluationQueue(engine.evaluator)
        self.lines: list[bytes] = []
        self.latencies: list[float] = []
        self.predict_seconds = 0.0
        self.emit_seconds = 0.0
        self.keyed = bool(getattr(engine.sink, "uses_keys", True))
        # no truncation, keys, sampling or per-event evaluator calls (see _write_learned)
        self.plain = (
            engine.top_k is None
            and not self.keyed
            and engine.metrics is None
            and (self.queue.update is None or self.queue.update_many is not None)
        )

    def run(self, start: int, stop: int) -> None:
        """Predict, learn and write the ordinary events ``start:stop`` of the batch."""
        batch = self.batch
        events = batch.events[start:stop]
        records = self.records[start:stop]
        started = batch.started
        if started:
            started = {i - start: t for i, t in started.items() if start <= i < stop}
        if batch.blanks and None in events:
            kept = [i for i, event in enumerate(events) if event is not None]
            events = [events[i] for i in kept]
            records = [records[i] for i in kept]
            started = {j: started[i] for j, i in enumerate(kept) if i in started}
            if not events:
                return
        xs, ys, ids, ws = zip(*events)  # noqa: B905 (events are 4-tuples)
        perf = time.perf_counter
        n_learned = self.engine.learner.n_learned
        t_model = perf()
        predicted = self.predict(xs, ys, ws)
        t_emit = perf()
        self.predict_seconds += t_emit - t_model
        self._write((records, xs, ys, ids, ws, started), predicted, n_learned)
        self.emit_seconds += perf() - t_emit

    def _write(self, segment: Segment, predicted: Predicted, n_learned: int) -> None:
        """The segment's prediction records, evaluations, learn errors and delayed events."""
        records, xs, ys, ids, ws, started = segment
        log_probas, predictions, errors, explanations = predicted
        if (
            self.plain
            and not errors
            and explanations is None
            and None not in ys
            and self._write_learned(segment, predicted, n_learned)
        ):
            return
        engine, tally, queue = self.engine, self.tally, self.queue
        output = engine.output
        option, dumps = output.option, orjson.dumps
        top_k, delayed, reject = engine.top_k, engine.delayed, engine.reject
        write = engine.sink.write if self.keyed else None
        add_line = self.lines.append
        update, update_many = queue.update, queue.update_many
        eval_true, eval_pred, eval_lp = queue.true, queue.predicted, queue.log_proba
        latencies, perf = self.latencies, time.perf_counter
        n_pred = n_learn = n_only = n_delayed = 0
        for i, lp in enumerate(log_probas):
            record = records[i]
            if lp is None:
                exc = errors[i]
                tally.rejected += 1
                reject(record, _reason(exc, "predict_error"), str(exc))
                continue
            y_pred = predictions[i]
            y = ys[i]
            eid = ids[i]
            # The source position rides along so consumers can drop at-least-once
            # duplicates. Key order: id, position, y_pred, y_true, log_proba, n_learned.
            if eid is None:
                out: dict[str, Any] = {"position": record.position, "y_pred": y_pred}
            else:
                out = {"id": eid, "position": record.position, "y_pred": y_pred}
            if y is not None:
                out["y_true"] = y
            out["log_proba"] = lp if top_k is None else _top(lp, top_k)
            out["n_learned"] = n_learned
            if explanations is not None and explanations[i] is not None:
                out["explain"] = explanations[i]
            try:
                line = dumps(out, option=option)
            except TypeError:  # non-string class labels as keys
                line = output.widen(out)
                option = output.option
            if write is not None:
                # Keyed by the source record's key, else the event id (Kafka partitioning).
                key = record.key
                if key is None and eid is not None:
                    key = str(eid).encode()
                write(line, key=key, headers=list(record.headers) if record.headers else None)
            else:
                add_line(line)
            n_pred += 1
            if y is not None:
                if update is not None:
                    if update_many is not None:
                        eval_true.append(y)
                        eval_pred.append(y_pred)
                        eval_lp.append(lp)
                    else:
                        update(y, y_pred, lp)
                if errors and i in errors:
                    exc = errors[i]
                    tally.rejected += 1
                    reject(record, _reason(exc, "learn_error"), str(exc))
                    continue
                n_learned += 1
                n_learn += 1
            elif delayed is not None and eid is not None:
                delayed.put(eid, xs[i], ws[i], y_pred, lp)
                n_delayed += 1
            else:
                n_only += 1
            if started and i in started:
                latencies.append(perf() - started[i])
        tally.predicted += n_pred
        tally.learned += n_learn
        tally.only += n_only
        tally.delayed += n_delayed

    def _write_learned(self, segment: Segment, predicted: Predicted, n_learned: int) -> bool:
        """:meth:`_write` of the common segment (every event labelled and learned, an
        unkeyed sink, no top-k, no sampling): the same lines from one comprehension,
        the evaluations queued by three C-level extends. ``False``, having written
        nothing, when ``orjson`` refuses a record with the current option."""
        records, _, ys, ids, _, _ = segment
        log_probas, predictions, _, _ = predicted
        option = self.engine.output.option
        dumps = orjson.dumps
        rows = zip(ids, records, predictions, ys, log_probas, range(n_learned, n_learned + len(ys)))  # noqa: B905
        try:
            lines = [
                dumps(
                    {
                        "position": r.position,
                        "y_pred": p,
                        "y_true": y,
                        "log_proba": lp,
                        "n_learned": n,
                    }
                    if eid is None
                    else {
                        "id": eid,
                        "position": r.position,
                        "y_pred": p,
                        "y_true": y,
                        "log_proba": lp,
                        "n_learned": n,
                    },
                    option=option,
                )
                for eid, r, p, y, lp, n in rows
            ]
        except TypeError:  # non-string class labels as keys: see _write
            return False
        self.lines.extend(lines)
        self.tally.predicted += len(ys)
        self.tally.learned += len(ys)
        queue = self.queue
        if queue.update is not None:
            queue.true.extend(ys)
            queue.predicted.extend(predictions)
            queue.log_proba.extend(log_probas)
        return True

    def close(self) -> float:
        """Write the unkeyed lines and hand the queued evaluations over; the seconds
        the evaluations took."""
        if self.lines:
            self.engine.sink.write_many(self.lines)
        return self.queue.flush()


def process_general(engine: Engine, records: list[Record], predictor: Predictor) -> None:
    """Process one batch on the general path (see the module docstring)."""
    perf = time.perf_counter
    batch_start = perf()
    every = engine.latency_every if engine.metrics is not None else 0
    batch = decode_batch(engine.decoder, records, engine.consumed, every)
    decode_seconds = perf() - batch_start
    writer = SegmentWriter(engine, records, batch, predictor)
    tally = writer.tally
    events = batch.events
    try:
        start = 0
        for i in batch.specials:
            if start < i:
                writer.run(start, i)
            start = i + 1
            event = events[i]
            if isinstance(event, InvalidEventError):
                tally.rejected += 1
                engine.reject(records[i], event.reason, str(event))
            elif event is not None:
                # Label-only: score the earlier prediction and learn its features.
                learn_label_only(engine, records[i], event.y, event.id, tally, writer.queue)
        if start < len(events):
            writer.run(start, len(events))
    finally:
        # Also on an error-policy stop mid-batch: what was done before it is kept.
        evaluate_seconds = writer.close()
    learn_seconds = writer.predict_seconds * predictor.learn_share
    tally.batch_start = batch_start
    tally.last_timestamp = _last_timestamp(records)
    tally.blank = batch.blanks
    tally.stage_seconds = {
        "decode": decode_seconds,
        "predict": writer.predict_seconds - learn_seconds,
        "emit": writer.emit_seconds,
        "evaluate": evaluate_seconds,
        "learn": learn_seconds,
    }
    tally.latencies = writer.latencies
    engine.finish_batch(tally)
