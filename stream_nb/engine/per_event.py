"""The per-event path: predict, emit and learn one event at a time."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

import orjson

from stream_nb._exceptions import (
    InvalidEventError,
)
from stream_nb.base import log_softmax_argmax as _log_softmax_argmax
from stream_nb.connectors.base import Record
from stream_nb.engine._json import dumps_exact
from stream_nb.engine.explain import explain as explain_event
from stream_nb.engine.records import (
    _last_timestamp,
    _reason,
    _top,
)
from stream_nb.engine.settings import (
    _OPT_NON_STR,
)
from stream_nb.engine.tally import BatchTally, EvaluationQueue, learn_label_only

if TYPE_CHECKING:
    from stream_nb.engine.engine import Engine


def process_each(engine: Engine, records: list[Record]) -> None:
    """The per-event path (explanations, error policy ``raise``)."""
    learner = engine.learner
    decoder = engine.decoder
    decode = decoder.decode
    validate = decoder._validate
    exact = decoder.exact
    max_bytes = decoder.max_bytes
    loads = orjson.loads
    decode_error = orjson.JSONDecodeError
    dumps = orjson.dumps
    dump_option = engine._dump_option
    # Evaluations are queued in order and handed over once per batch (update_many).
    queue = EvaluationQueue(engine.evaluator)
    update, update_many = queue.update, queue.update_many
    eval_true, eval_pred, eval_lp = queue.true, queue.predicted, queue.log_proba
    delayed = engine.delayed
    decide = engine._decide
    top_k = engine.top_k
    want_explain = engine.explain
    jll_of = learner.joint_log_likelihood_one
    learn = learner.learn_one
    metrics = engine.metrics
    perf = time.perf_counter
    sample_every = engine.latency_every
    n_pred = n_only = n_learn = n_delayed = n_rejected = n_blank = 0
    # label-only events count in the tally directly (they are rare)
    tally = BatchTally(consumed=len(records), batch_start=0.0)
    n_classes = engine._classes
    t_decode = t_predict = t_emit = t_learn = t_evaluate = 0.0
    sampled = 0
    batch_start = perf()
    counter = engine.consumed
    sampling = metrics is not None
    keyed = getattr(engine.sink, "uses_keys", True)
    # Unkeyed sinks get the batch's lines in one write_many call.
    lines: list[bytes] = []
    emit = lines.append
    if keyed:
        write = engine.sink.write
    timed = False
    evaluate_seconds = 0.0  # measured for the whole batch when update_many is used
    try:
        for record in records:
            if sampling:
                counter += 1
                timed = counter % sample_every == 0
                if timed:
                    t0 = perf()
            payload = record.payload
            try:
                if len(payload) <= max_bytes:
                    try:
                        obj = loads(payload)
                    except decode_error:
                        obj = decode(payload)  # raises InvalidEventError with the reason
                    x, y, eid, w = validate(obj, True)
                    if type(y) is float or type(eid) is float:  # maybe beyond 64 bits
                        x, y, eid, w = exact(payload, (x, y, eid, w))
                else:
                    x, y, eid, w = decode(payload)  # raises (too_large)
            except InvalidEventError as exc:
                if not payload.strip():
                    n_blank += 1
                    continue
                n_rejected += 1
                engine._reject(record, exc.reason, str(exc))
                continue
            if x is None:
                learn_label_only(engine, record, y, eid, tally, queue)
                continue
            if timed:
                t1 = perf()
            n_before = learner.n_learned
            try:
                jll = jll_of(x)
            except (InvalidEventError, TypeError, ValueError) as exc:
                n_rejected += 1
                engine._reject(record, _reason(exc, "predict_error"), str(exc))
                continue
            if jll:
                lp, y_pred = _log_softmax_argmax(jll)
                if decide is not None:
                    y_pred = decide(lp)
            else:
                lp = {}
                y_pred = None
            n_classes = len(lp)
            shown = lp if top_k is None else _top(lp, top_k)
            # The source position rides along so consumers can drop at-least-once
            # duplicates. Key order: id, position, y_pred, y_true, log_proba, n_learned.
            if eid is None:
                if y is None:
                    out = {
                        "position": record.position,
                        "y_pred": y_pred,
                        "log_proba": shown,
                        "n_learned": n_before,
                    }
                else:
                    out = {
                        "position": record.position,
                        "y_pred": y_pred,
                        "y_true": y,
                        "log_proba": shown,
                        "n_learned": n_before,
                    }
            elif y is None:
                out = {
                    "id": eid,
                    "position": record.position,
                    "y_pred": y_pred,
                    "log_proba": shown,
                    "n_learned": n_before,
                }
            else:
                out = {
                    "id": eid,
                    "position": record.position,
                    "y_pred": y_pred,
                    "y_true": y,
                    "log_proba": shown,
                    "n_learned": n_before,
                }
            if want_explain and jll:
                out["explain"] = explain_event(learner, x, jll, predicted=y_pred)
            if timed:
                t2 = perf()
            try:
                line = dumps(out, option=dump_option)
            except TypeError:  # non-string class labels as log_proba keys: switch for good
                dump_option = engine._dump_option = _OPT_NON_STR
                line = dumps_exact(out, option=dump_option)
            if keyed:
                # Keyed by the source record's key, else the event id (Kafka partitioning).
                key = record.key
                if key is None and eid is not None:
                    key = str(eid).encode()
                write(line, key=key, headers=list(record.headers) if record.headers else None)
            else:
                emit(line)
            n_pred += 1
            if timed:
                t3 = perf()
            if y is not None:
                if update is not None:
                    if update_many is not None:
                        eval_true.append(y)
                        eval_pred.append(y_pred)
                        eval_lp.append(lp)
                    else:
                        update(y, y_pred, lp)
                if timed:
                    t_evaluate += perf() - t3
                try:
                    learn(x, y, w)
                except (InvalidEventError, TypeError, ValueError) as exc:
                    n_rejected += 1
                    engine._reject(record, _reason(exc, "learn_error"), str(exc))
                    continue
                n_learn += 1
            elif delayed is not None and eid is not None:
                delayed.put(eid, x, w, y_pred, lp)
                n_delayed += 1
            else:
                n_only += 1
            if timed:
                t4 = perf()
                sampled += 1
                t_decode += t1 - t0
                t_predict += t2 - t1
                t_emit += t3 - t2
                t_learn += t4 - t3  # evaluate time is subtracted below
                metrics.record_event_latency(t4 - t0)  # type: ignore[union-attr]
    finally:
        # Also on an error-policy stop mid-batch: what was done before it is kept.
        if lines:
            engine.sink.write_many(lines)
        evaluate_seconds = queue.flush()
    engine._classes = n_classes
    if metrics is not None:
        # Stage seconds are estimated from the sampled events, scaled to the batch.
        scale = len(records) / sampled if sampled else 0.0
        stage_seconds = {
            "decode": t_decode * scale,
            "predict": t_predict * scale,
            "emit": t_emit * scale,
            "evaluate": t_evaluate * scale + evaluate_seconds,
            "learn": max(0.0, t_learn - t_evaluate) * scale,
        }
    else:
        stage_seconds = {}
    tally.batch_start = batch_start
    tally.last_timestamp = _last_timestamp(records)
    tally.predicted, tally.only, tally.learned = n_pred, n_only, n_learn
    tally.delayed = n_delayed
    tally.rejected += n_rejected
    tally.blank = n_blank
    tally.stage_seconds = stage_seconds
    engine.finish_batch(tally)
