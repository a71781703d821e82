"""The column path: a batch parsed into columns (or, for a learner with a row kernel,
per-event feature mappings), one kernel call, records written from arrays."""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
import orjson

from stream_nb.connectors.base import Block, Record, Sink
from stream_nb.engine._json import dumps_exact
from stream_nb.engine.events import EventDecoder
from stream_nb.engine.parse import _columns, _parse_uniform, scalar_fields
from stream_nb.engine.records import _last_timestamp, _top_rows, _true_label_log_probas
from stream_nb.engine.rows import rows_of
from stream_nb.engine.settings import (
    _COLUMNS_MAX_SKIP,
    _COLUMNS_MIN_BATCH,
    _EVALUATOR_MATRIX_CLASSES,
    _OPT_NON_STR,
    ErrorPolicy,
)
from stream_nb.engine.tally import BatchTally
from stream_nb.engine.template import LineTemplate

if TYPE_CHECKING:
    from stream_nb.engine.engine import Engine

#: What :meth:`Learner.predict_learn_columns` returns for a batch it takes:
#: ``(labels, log_proba, best)``.
KernelResult = tuple[list[Hashable], np.ndarray, np.ndarray]


class ColumnBatch(NamedTuple):
    """A batch the kernel took: where its lines came from and what they hold."""

    records: list[Record] | None  # (None: a block)
    block: Block | None
    ys: Sequence[Hashable | None]
    ids: Sequence[Any] | None
    n_before: int  # events the model had learned before the batch


class ColumnPath:
    """One engine's column path: whether it is tried, its routing after misses, its caches.

    A batch the path does not take (:meth:`take` returns ``False``) is a
    miss; after ``m`` misses in a row the next ``min(64, 2**m - 1)``
    batches skip it.

    Parameters
    ----------
    enabled
        ``False``: never tried (decisions from a loss matrix need one
        dictionary per event, or the engine was built with
        ``column_path=False``).

    Attributes
    ----------
    misses
        Batches in a row the path did not take.
    skip
        Batches left before the path is tried again.

    Examples
    --------
    >>> path = ColumnPath(enabled=True)
    >>> path.restore(2, 3)
    >>> path.state()
    [2, 3]
    """

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled
        self.misses = 0
        self.skip = 0
        # (labels, their JSON object keys): see json_keys
        self._label_keys: tuple[list[Hashable], list[Hashable]] | None = None
        self._template = LineTemplate()

    def state(self) -> list[int]:
        """``[misses, skip]``, as a snapshot stores them."""
        return [self.misses, self.skip]

    def restore(self, misses: int, skip: int) -> None:
        """Route the next batches as the engine that wrote ``[misses, skip]`` would."""
        self.misses = misses
        self.skip = skip

    def wanted(self, engine: Engine) -> bool:
        """Whether this batch should try the column path (counts down :attr:`skip`)."""
        if not self.enabled or engine.explain or engine.error_policy is ErrorPolicy.RAISE:
            return False
        if not engine.learner.columns_supported:
            return False
        if engine.decoder.nonnegative and not type(engine.learner).capabilities.row_kernel:
            return False  # the decoder's check of the counts needs one dictionary per event
        if self.skip:
            self.skip -= 1
            return False
        return True

    def take(self, engine: Engine, batch: list[Record] | Block) -> bool:
        """Process a batch (records, or a source's :class:`~stream_nb.connectors.base.Block`)
        on the column path, or return ``False`` having changed nothing (a miss)."""
        if isinstance(batch, list):
            done = self._process(engine, [r.payload for r in batch], batch, None)
        else:
            done = self._process(engine, batch.payloads, None, batch)
        if done:
            self.misses = 0
            return True
        self.misses += 1
        self.skip = min(_COLUMNS_MAX_SKIP, 2 ** min(self.misses, 8) - 1)
        return False

    def _process(
        self,
        engine: Engine,
        payloads: list[bytes],
        records: list[Record] | None,
        block: Block | None,
    ) -> bool:
        """The column path: a whole batch of uniform events through the learner's array kernel.

        Taken when every record of the batch is a valid JSON object with the
        same keys in the same order (flat, or nested with uniform feature
        objects), every id and label is a scalar, and
        :meth:`Learner.predict_learn_columns` accepts the batch (it checks
        the feature values). For a learner with a row kernel
        (``capabilities.row_kernel``) the events may have any features: they
        become the decoder's feature dictionaries (:func:`~stream_nb.engine.rows.rows_of`)
        and go to :meth:`Learner.predict_learn_rows`, which checks the values
        (non-negative counts included). The records, evaluation and model are
        those of the batched path (:mod:`~stream_nb.engine.batched`); no
        per-event dictionary is built for the evaluator (nor, on columns, for
        the learner).
        """
        decoder = engine.decoder
        if len(payloads) < _COLUMNS_MIN_BATCH or max(map(len, payloads)) > decoder.max_bytes:
            return False
        perf = time.perf_counter
        batch_start = perf()
        try:
            parsed = _parse_uniform(payloads)
        except orjson.JSONDecodeError:
            return False
        if parsed is None:
            return False
        learner = engine.learner
        capabilities = type(learner).capabilities
        b = len(payloads)
        if capabilities.row_kernel:
            rows = rows_of(
                decoder,
                *parsed,
                check_nonnegative=decoder.nonnegative and not capabilities.nonnegative_counts,
            )
            del parsed
            if rows is None:
                return False
            xs, ys, ids, ws = rows
        elif decoder.nonnegative:
            return False  # (see wanted)
        else:
            decoded = columns_of(decoder, *parsed)
            del parsed  # the columns hold the values
            if decoded is None:
                return False
            x_names, x_columns, ys, ids, ws = decoded
        n_labelled = b - ys.count(None) if None in ys else b
        if n_labelled < b and engine.delayed is not None and ids is not None:
            return False  # unlabelled events with ids go to the delayed-label cache
        batch = ColumnBatch(records, block, ys, ids, learner.n_learned)
        t_model = perf()
        if capabilities.row_kernel:
            result = learner.predict_learn_rows(xs, ys, ws)
        else:
            result = learner.predict_learn_columns(x_names, x_columns, ys, ws)
        if result is None:
            return False
        t_emit = perf()
        labels, log_proba, best = result
        engine.output.classes = len(labels)
        top_k = engine.top_k
        lines = None
        if block is not None and n_labelled == b and (top_k is None or top_k >= len(labels)):
            # a labelled block: the records from one template, no dict per event
            lines = self.block_lines(batch, result)
        log_probas: list[dict[Hashable, float]] | None = None
        if lines is not None:
            assert block is not None
            write_block(engine.sink, lines, block, ids)
        else:
            log_probas = self.emit_records(engine, batch, result)
        t_evaluate = perf()
        evaluator = engine.evaluator
        if evaluator is not None and n_labelled:
            if n_labelled < b:
                mask = [y is not None for y in ys]
                ys_l = [y for y in ys if y is not None]
                log_proba, best = log_proba[mask], best[mask]
                log_probas = None
            else:
                ys_l = list(ys)
            update_arrays = getattr(evaluator, "update_arrays", None)
            if update_arrays is not None and len(labels) <= _EVALUATOR_MATRIX_CLASSES:
                update_arrays(ys_l, labels, log_proba, best)
            else:
                predictions = list(map(labels.__getitem__, best.tolist()))
                if log_probas is None:
                    if len(labels) > _EVALUATOR_MATRIX_CLASSES:
                        log_probas = _true_label_log_probas(labels, log_proba, ys_l)
                    else:
                        rows = log_proba.tolist()
                        log_probas = [dict(zip(labels, row, strict=True)) for row in rows]
                evaluator.update_many(ys_l, predictions, log_probas)
        t_end = perf()
        last_timestamp = block.last_timestamp() if block is not None else None
        if records is not None:
            last_timestamp = _last_timestamp(records)
        latencies: list[float] = []
        if engine.metrics is not None:
            # Every event of a batch waits for the whole batch: its latency is the
            # batch's, sampled one event in latency_every as on the other paths.
            every = engine.latency_every
            sampled = (engine.consumed + b) // every - engine.consumed // every
            latencies = [t_end - batch_start] * sampled
        engine.finish_batch(
            BatchTally(
                consumed=b,
                batch_start=batch_start,
                last_timestamp=last_timestamp,
                predicted=b,
                only=b - n_labelled,
                learned=n_labelled,
                stage_seconds={
                    "decode": t_model - batch_start,
                    "predict": t_emit - t_model,
                    "emit": t_evaluate - t_emit,
                    "evaluate": t_end - t_evaluate,
                    "learn": 0.0,
                },
                latencies=latencies,
            )
        )
        return True

    def emit_records(
        self, engine: Engine, batch: ColumnBatch, result: KernelResult
    ) -> list[dict[Hashable, float]] | None:
        """Write a column batch's prediction records built as dicts (any batch);
        returns the log-probability dicts when it built them."""
        labels, log_proba, best = result
        records, block, ys, ids, n_before = batch
        predictions = list(map(labels.__getitem__, best.tolist()))
        top_k = engine.top_k
        output = engine.output
        log_probas: list[dict[Hashable, float]] | None = None
        b = len(ys)
        n_labelled = b - ys.count(None) if None in ys else b
        out: list[dict[str, Any]]
        if records is not None:
            positions = [r[1] for r in records]
        else:
            assert block is not None
            positions = block.positions()
        if ids is None and n_labelled == b and (top_k is None or top_k >= len(labels)):
            # The common case in one comprehension: no id, every event labelled.
            learned = range(n_before, n_before + b)
            keys = self.json_keys(labels)  # the text JSON gives the labels as keys
            if len(keys) == 2:
                first, second = keys
                us, vs = log_proba.T.tolist()  # two columns: no list per event
                out = [
                    {
                        "position": p,
                        "y_pred": yp,
                        "y_true": y,
                        "log_proba": {first: u, second: v},
                        "n_learned": n,
                    }
                    for p, yp, y, u, v, n in zip(positions, predictions, ys, us, vs, learned)  # noqa: B905
                ]
            else:
                rows = log_proba.tolist()
                out = [
                    {
                        "position": p,
                        "y_pred": yp,
                        "y_true": y,
                        "log_proba": dict(zip(keys, row)),  # noqa: B905
                        "n_learned": n,
                    }
                    for p, yp, y, row, n in zip(positions, predictions, ys, rows, learned)  # noqa: B905
                ]
        else:
            if top_k is not None and top_k < len(labels):
                # only the k shown classes of each event become Python objects
                shown = _top_rows(labels, log_proba, top_k)
            else:
                rows = log_proba.tolist()
                log_probas = shown = [dict(zip(labels, row, strict=True)) for row in rows]
            out = []
            n = n_before
            for i, y in enumerate(ys):
                record_out: dict[str, Any] = {} if ids is None or ids[i] is None else {"id": ids[i]}
                record_out["position"] = positions[i]
                record_out["y_pred"] = predictions[i]
                if y is not None:
                    record_out["y_true"] = y
                record_out["log_proba"] = shown[i]
                record_out["n_learned"] = n
                if y is not None:
                    n += 1
                out.append(record_out)
        sink = engine.sink
        keyed = getattr(sink, "uses_keys", True)
        if not keyed:
            # One dumps call for the whole batch, cut into lines: each record is an
            # object starting with a key, so every boundary reads '},{"'; inside a
            # string '"' is escaped, so the cut is exact unless a record holds an
            # array of objects (a custom position), which the line count catches.
            try:
                blob = orjson.dumps(out, option=0 if log_probas is None else output.option)
            except TypeError:  # non-string class labels as keys
                blob = output.widen(out)
            text = blob[1:-1].replace(b'},{"', b'}\n{"')
            if text.count(b"\n") == b - 1:
                sink.write_lines(text)
            else:
                keyed = True
        if keyed:
            dumps = orjson.dumps
            option = output.option
            try:
                lines = [dumps(o, option=option) for o in out]
            except TypeError:  # non-string class labels as keys
                lines = [output.widen(o) for o in out]
            if not getattr(sink, "uses_keys", True):
                sink.write_many(lines)
            elif records is not None:
                message_keys = [r.key for r in records]
                carried = [list(r.headers) if r.headers else None for r in records]
                sink.write_keyed(lines, record_keys(message_keys, ids), carried)
            else:
                assert block is not None
                sink.write_keyed(lines, record_keys(block.keys(), ids), block.headers())
        return log_probas

    def block_lines(self, batch: ColumnBatch, result: KernelResult) -> list[bytes] | None:
        """The prediction records of a labelled block from the line template
        (:class:`~stream_nb.engine.template.LineTemplate`), or ``None``."""
        assert batch.block is not None
        return self._template.lines(batch.block, batch.ys, batch.ids, batch.n_before, result)

    def json_keys(self, labels: list[Hashable]) -> list[Hashable]:
        """The labels as the strings JSON shows as object keys (``OPT_NON_STR_KEYS``'s text),
        or the labels themselves if two would show the same (then orjson converts)."""
        cached = self._label_keys
        if cached is not None and cached[0] == labels:
            return cached[1]
        shown = list(orjson.loads(dumps_exact(dict.fromkeys(labels, 0), option=_OPT_NON_STR)))
        keys: list[Hashable] = shown if len(shown) == len(labels) else list(labels)
        self._label_keys = (list(labels), keys)
        return keys


def record_keys(
    keys: Sequence[bytes | None] | None, ids: Sequence[Any] | None
) -> Sequence[bytes | None] | None:
    """Each record's message key: its source record's, else its id's text (so that a
    Kafka sink partitions by it); ``None`` when no record has either.

    Examples
    --------
    >>> record_keys([b"k", None, None], [1, 2, None])
    [b'k', b'2', None]
    >>> record_keys(None, None) is None
    True
    """
    if ids is None or (keys is not None and None not in keys):
        return keys
    if keys is None:
        return [None if i is None else str(i).encode() for i in ids]
    return [
        str(i).encode() if k is None and i is not None else k
        for k, i in zip(keys, ids)  # noqa: B905 (same length)
    ]


def write_block(sink: Sink, lines: list[bytes], block: Block, ids: Sequence[Any] | None) -> None:
    """Write a block's prediction records: to a keyed sink with each record's key
    (:func:`record_keys`) and headers, else as one block of lines."""
    if getattr(sink, "uses_keys", True):
        sink.write_keyed(lines, record_keys(block.keys(), ids), block.headers())
    else:
        sink.write_lines(b"\n".join(lines))


def columns_of(
    decoder: EventDecoder,
    objs: list[dict[str, Any]],
    transposed: tuple[dict[str, Any], list[Sequence[Any]]] | None = None,
) -> (
    tuple[
        tuple[str, ...],
        list[Sequence[Any]],
        Sequence[Any],
        Sequence[Any] | None,
        Sequence[float] | None,
    ]
    | None
):
    """``(feature names, feature columns, labels, ids, weights)`` of uniform events.

    ``None`` unless every event validates as :class:`EventDecoder` would
    accept it and all have the same features in the same order. Uniform
    objects (the same keys throughout) are split into columns in one
    C-level transpose; flat events that differ only in the label, id or
    weight fields (e.g. some unlabelled) have those fields popped first.
    ``transposed``: ``(first object, columns)`` when the caller has already
    transposed uniform objects (``objs`` is then not read).
    """
    label_field, id_field, weight_field = (
        decoder.label_field,
        decoder.id_field,
        decoder.weight_field,
    )
    features_field = decoder.features_field
    columns: list[Sequence[Any]] | None
    if transposed is None:
        first = objs[0]
        names = tuple(first)
        columns = _columns(objs, names)
    else:
        first, columns = transposed
        names = tuple(first)
    nested = features_field in first and (
        decoder.shape == "nested"
        or (decoder.shape == "auto" and type(first[features_field]) is dict)
    )
    b = len(objs) if columns is None else len(columns[0])
    ys: Sequence[Any]
    ids: Sequence[Any] | None = None
    raw_ws: Sequence[Any] | None = None
    x_columns: list[Sequence[Any]]
    xs: Sequence[Any] = objs
    if columns is not None:
        where = {name: j for j, name in enumerate(names)}
        ys = columns[where[label_field]] if label_field in where else (None,) * b
        if id_field in where:
            ids = columns[where[id_field]]
        if weight_field in where:
            raw_ws = columns[where[weight_field]]
        special = {label_field, id_field, weight_field}
        if nested:
            if len(names) - len(special & where.keys()) != 1:
                return None  # other top-level keys beside the features object
            xs = columns[where[features_field]]
        else:
            if decoder.shape == "nested":
                return None
            x_names = tuple(n for n in names if n not in special)
            x_columns = [columns[where[n]] for n in x_names]
    elif nested or decoder.shape == "nested":
        return None
    else:
        # the objects are ours (parsed for this batch): pop as EventDecoder does
        ys = [o.pop(label_field, None) for o in objs]
        if id_field is not None:
            ids = [o.pop(id_field, None) for o in objs]
        if weight_field is not None:
            raw_ws = [o.pop(weight_field, None) for o in objs]
        nested = True  # the features are now whole objects, as when nested
    if nested:
        if set(map(type, xs)) != {dict}:
            return None
        x_names = tuple(xs[0])
        x_cols = _columns(xs, x_names)
        if x_cols is None:
            return None
        x_columns = x_cols
    if not x_names:
        return None
    fields = scalar_fields(ys, ids, raw_ws, b)
    if fields is None:
        return None
    ids, ws = fields
    return x_names, x_columns, ys, ids, ws
