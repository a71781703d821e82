"""The batched path: a learner's predict_learn_many over a batch of decoded events."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import orjson

from stream_nb._exceptions import (
    InvalidEventError,
)
from stream_nb.connectors.base import Record
from stream_nb.engine._json import dumps_exact
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


def process_batched(engine: Engine, records: list[Record]) -> None:
    """The batch path: runs of ordinary events go through ``predict_learn_many``.

    Same records, dead letters, evaluation and model as the per-event path
    (:func:`~stream_nb.engine.per_event.process_each`): a run ("segment") of decoded events is
    predicted and learned by one :meth:`Learner.predict_learn_many` call,
    then emitted in order. A rejected or label-only event first finishes
    the segment before it, so every side effect keeps its order.
    """
    learner = engine.learner
    decoder = engine.decoder
    decode = decoder.decode
    validate = decoder._validate
    exact = decoder.exact
    max_bytes = decoder.max_bytes
    loads = orjson.loads
    decode_error = orjson.JSONDecodeError
    dumps = orjson.dumps
    queue = EvaluationQueue(engine.evaluator)
    update, update_many = queue.update, queue.update_many
    eval_true, eval_pred, eval_lp = queue.true, queue.predicted, queue.log_proba
    delayed = engine.delayed
    decide = engine._decide
    top_k = engine.top_k
    metrics = engine.metrics
    perf = time.perf_counter
    sample_every = engine.latency_every
    tally = BatchTally(consumed=len(records), batch_start=0.0)
    stage = dict.fromkeys(("decode", "predict", "emit"), 0.0)
    latencies: list[float] = []
    batch_start = perf()
    counter = engine.consumed
    sampling = metrics is not None
    keyed = getattr(engine.sink, "uses_keys", True)
    lines: list[bytes] = []
    # the current segment: decoded ordinary events not yet predicted
    # (x, y, w, id, record, sampled start time) per event
    segment: list[tuple[dict[str, Any], Any, float, Any, Record, float | None]] = []
    add = segment.append

    # no decisions, truncation, keys, sampling or per-event evaluator calls
    plain = (
        decide is None
        and top_k is None
        and not keyed
        and not sampling
        and (update is None or update_many is not None)
    )

    def run_segment() -> None:
        n_learned = learner.n_learned  # before the segment
        t_model = perf()
        seg_x, seg_y, seg_w, seg_id, seg_rec, seg_t0 = zip(*segment)  # noqa: B905
        segment.clear()
        log_probas, predictions, errors = learner.predict_learn_many(seg_x, seg_y, seg_w)
        t_emit = perf()
        if log_probas[-1] is not None:
            engine._classes = len(log_probas[-1])
        option = engine._dump_option
        if plain and not errors and None not in seg_y:
            # The common case, every event labelled and learned: the same records
            # with fewer branches, the evaluation queued by three C-level extends.
            append = lines.append
            for record, y, eid, lp, y_pred in zip(  # noqa: B905 (same length)
                seg_rec, seg_y, seg_id, log_probas, predictions
            ):
                if eid is None:
                    out: dict[str, Any] = {
                        "position": record.position,
                        "y_pred": y_pred,
                        "y_true": y,
                        "log_proba": lp,
                        "n_learned": n_learned,
                    }
                else:
                    out = {
                        "id": eid,
                        "position": record.position,
                        "y_pred": y_pred,
                        "y_true": y,
                        "log_proba": lp,
                        "n_learned": n_learned,
                    }
                n_learned += 1
                try:
                    line = dumps(out, option=option)
                except TypeError:  # non-string class labels as keys: switch for good
                    option = engine._dump_option = _OPT_NON_STR
                    line = dumps_exact(out, option=option)
                append(line)
            n = len(seg_y)
            tally.predicted += n
            tally.learned += n
            if update is not None:
                eval_true.extend(seg_y)
                eval_pred.extend(predictions)
                eval_lp.extend(log_probas)
            stage["predict"] += t_emit - t_model
            stage["emit"] += perf() - t_emit
            return
        n_pred = n_learn = n_only = n_delayed = 0
        for i, lp in enumerate(log_probas):
            record = seg_rec[i]
            if lp is None:
                exc = errors[i]
                tally.rejected += 1
                engine._reject(record, _reason(exc, "predict_error"), str(exc))
                continue
            y_pred = predictions[i]
            if decide is not None and y_pred is not None:
                y_pred = decide(lp)
            shown = lp if top_k is None else _top(lp, top_k)
            y = seg_y[i]
            eid = seg_id[i]
            # Key order: id, position, y_pred, y_true, log_proba, n_learned.
            if eid is None:
                if y is None:
                    out = {
                        "position": record.position,
                        "y_pred": y_pred,
                        "log_proba": shown,
                        "n_learned": n_learned,
                    }
                else:
                    out = {
                        "position": record.position,
                        "y_pred": y_pred,
                        "y_true": y,
                        "log_proba": shown,
                        "n_learned": n_learned,
                    }
            elif y is None:
                out = {
                    "id": eid,
                    "position": record.position,
                    "y_pred": y_pred,
                    "log_proba": shown,
                    "n_learned": n_learned,
                }
            else:
                out = {
                    "id": eid,
                    "position": record.position,
                    "y_pred": y_pred,
                    "y_true": y,
                    "log_proba": shown,
                    "n_learned": n_learned,
                }
            try:
                line = dumps(out, option=option)
            except TypeError:  # non-string class labels as log_proba keys: switch for good
                option = engine._dump_option = _OPT_NON_STR
                line = dumps_exact(out, option=option)
            if keyed:
                key = record.key
                if key is None and eid is not None:
                    key = str(eid).encode()
                engine.sink.write(
                    line, key=key, headers=list(record.headers) if record.headers else None
                )
            else:
                lines.append(line)
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
                    engine._reject(record, _reason(exc, "learn_error"), str(exc))
                    continue
                n_learned += 1
                n_learn += 1
            elif delayed is not None and eid is not None:
                delayed.put(eid, seg_x[i], seg_w[i], y_pred, lp)
                n_delayed += 1
            else:
                n_only += 1
            if sampling:
                t0 = seg_t0[i]
                if t0 is not None:
                    latencies.append(perf() - t0)
        tally.predicted += n_pred
        tally.learned += n_learn
        tally.only += n_only
        tally.delayed += n_delayed
        stage["predict"] += t_emit - t_model
        stage["emit"] += perf() - t_emit

    evaluate_seconds = 0.0
    try:
        t_start = perf()
        for record in records:
            t0: float | None = None
            if sampling:
                counter += 1
                if counter % sample_every == 0:
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
                    tally.blank += 1
                    continue
                stage["decode"] += perf() - t_start
                if segment:
                    run_segment()
                t_start = perf()
                tally.rejected += 1
                engine._reject(record, exc.reason, str(exc))
                continue
            if x is not None:
                add((x, y, w, eid, record, t0))
                continue
            # Label-only event: score the earlier prediction and learn its features.
            stage["decode"] += perf() - t_start
            if segment:
                run_segment()
            t_start = perf()
            learn_label_only(engine, record, y, eid, tally, queue)
        stage["decode"] += perf() - t_start
        if segment:
            run_segment()
    finally:
        if lines:
            engine.sink.write_many(lines)
        evaluate_seconds = queue.flush()
    tally.batch_start = batch_start
    tally.last_timestamp = _last_timestamp(records)
    tally.stage_seconds = {
        "decode": stage["decode"],
        # the learner's batched predict + learn, one call per segment
        "predict": stage["predict"],
        "emit": stage["emit"],
        "evaluate": evaluate_seconds,
        "learn": 0.0,
    }
    tally.latencies = latencies
    engine.finish_batch(tally)
