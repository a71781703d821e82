"""What several commands share: logging, learners from flags, decoders, reports, snapshots."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Hashable, Sequence
from pathlib import Path
from typing import Any

import orjson

from stream_nb._exceptions import (
    CheckpointError,
    ConfigError,
    ModelStateError,
    StreamNBError,
)
from stream_nb._state import STATE_ERRORS
from stream_nb.base import Learner
from stream_nb.engine import (
    EventDecoder,
)
from stream_nb.engine._json import dumps_exact
from stream_nb.engine.checkpoint import read_snapshot
from stream_nb.engine.settings import ENGINE_STATE_FORMAT
from stream_nb.evaluation.decision import check_loss_matrix

_log = logging.getLogger("stream_nb.cli")


# ---------------------------------------------------------------------- helpers
class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": record.created,
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        extra = getattr(record, "data", None)
        if extra is not None:
            out["data"] = extra
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return orjson.dumps(out, default=str, option=orjson.OPT_NON_STR_KEYS).decode()


def _setup_logging(level: str, fmt: str) -> None:
    handler = logging.StreamHandler(sys.stderr)
    if fmt == "json":
        handler.setFormatter(_JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger("stream_nb")
    root.handlers[:] = [handler]
    root.setLevel(level)
    root.propagate = False


def _learner_class(
    parser: argparse.ArgumentParser, name: str, flag: str = "--model"
) -> type[Learner]:
    cls = Learner.registered().get(name)
    failures: dict[str, Exception] = {}
    if cls is None:
        failures = _import_learner_modules()
        cls = Learner.registered().get(name)
    if cls is None:
        known = ", ".join(sorted(Learner.registered())) or "none"
        parser.error(
            f"{flag}: unknown learner {name!r}{_import_failures(failures)}; choose one of {known}"
        )
    return cls


def _import_learner_modules() -> dict[str, Exception]:
    """Import every module of the learner packages, so every learner registers.

    Returns the modules that failed to import, with their errors, so that a
    learner whose module is broken is reported with the real error instead of
    as unknown.
    """
    import importlib
    import pkgutil

    from stream_nb import naive_bayes, seminaive

    failures: dict[str, Exception] = {}
    for package in (naive_bayes, seminaive):
        for info in pkgutil.iter_modules(package.__path__, package.__name__ + "."):
            try:
                importlib.import_module(info.name)
            except Exception as exc:  # any error of the module: reported, not hidden
                failures[info.name] = exc
    return failures


def _import_failures(failures: dict[str, Exception]) -> str:
    """``failures`` of :func:`_import_learner_modules` as the tail of an error message."""
    return "".join(
        f"; learner module {module} failed to import: {type(exc).__name__}: {exc}"
        for module, exc in failures.items()
    )


def _check_fading_factor(parser: argparse.ArgumentParser, value: float) -> None:
    if not 0 < value <= 1:
        parser.error(f"--fading-factor must be in (0, 1], got {value}")


def _make_learner(
    parser: argparse.ArgumentParser,
    cls: type[Learner],
    params: dict[str, Any],
    flag: str = "--params",
) -> Learner:
    """``cls(**params)``; a bad parameter is a usage error naming ``flag``, where it was set."""
    try:
        return cls(**params)
    except TypeError as exc:
        parser.error(f"{flag}: invalid parameters for {cls.__name__}: {exc}")
    except ConfigError as exc:
        parser.error(f"{flag}: {exc}")
    raise AssertionError("unreachable")


def _loss_matrix(
    parser: argparse.ArgumentParser, value: Any
) -> dict[Hashable, dict[Hashable, float]] | None:
    """The ``--loss-matrix`` value as ``{predicted: {true: cost}}``, checked (a usage error,
    exit code 2, names the bad entry)."""
    if value is None:
        return None
    out: dict[Hashable, dict[Hashable, float]]
    if isinstance(value, dict) and all(isinstance(r, dict) for r in value.values()):
        out = value
    elif isinstance(value, list) and all(isinstance(t, list) and len(t) == 3 for t in value):
        out = {}
        for predicted, true, cost in value:
            if isinstance(predicted, (list, dict)) or isinstance(true, (list, dict)):
                parser.error("--loss-matrix: labels must be JSON scalars")
            out.setdefault(predicted, {})[true] = cost
    else:
        parser.error(
            "--loss-matrix must be {predicted: {true: cost}} or [[predicted, true, cost], ...], "
            f"got {str(value)[:80]!r}"
        )
    try:
        check_loss_matrix(out)  # (the costs as given are used: the check's copy is not)
    except ConfigError as exc:
        parser.error(f"--loss-matrix: {exc}")
    return out


def _decoder(args: argparse.Namespace, learners: Sequence[Learner]) -> EventDecoder:
    return EventDecoder(
        shape=args.shape,
        features_field=args.features_field,
        label_field=args.label_field,
        id_field=args.id_field or None,
        weight_field=args.weight_field or None,
        max_bytes=args.max_line_bytes,
        nonnegative=any(type(m).capabilities.nonnegative_counts for m in learners),
    )


def _emit_report(report: Any, target: str | None, default_stream: Any) -> None:
    data = dumps_exact(report, option=orjson.OPT_NON_STR_KEYS | orjson.OPT_INDENT_2)
    if target is None:
        stream = default_stream
    elif target == "-":
        stream = sys.stdout
    else:
        Path(target).write_bytes(data + b"\n")
        return
    stream.flush()
    stream.buffer.write(data + b"\n")
    stream.flush()


def _split_model_spec(parser: argparse.ArgumentParser, spec: str) -> tuple[str, dict[str, Any]]:
    """A ``--model NAME[:JSON]`` value as the learner name and its parameters."""
    name, sep, raw = spec.partition(":")
    params: Any = {}
    if sep:
        try:
            params = orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            parser.error(f"--model {spec!r}: parameters are not valid JSON ({exc})")
        if not isinstance(params, dict):
            parser.error(f"--model {spec!r}: parameters must be a JSON object")
    return name, params


def _parse_model_spec(parser: argparse.ArgumentParser, spec: str) -> tuple[str, Learner]:
    """A ``--model NAME[:JSON]`` value of ``eval`` and the learner it makes."""
    name, params = _split_model_spec(parser, spec)
    cls = _learner_class(parser, name)
    try:
        return spec, cls(**params)
    except (TypeError, ConfigError) as exc:
        parser.error(f"--model {spec!r}: {exc}")
    raise AssertionError("unreachable")


def _snapshot_model(path: str) -> tuple[dict[str, Any], Learner]:
    """A snapshot file's (or a checkpoint directory's newest valid) body and its model.

    Raises
    ------
    CheckpointError
        If it is not a readable stream-nb engine snapshot.
    ModelStateError
        If its model state is invalid.
    """
    body = read_snapshot(path)
    found = body.get("format")
    if found != ENGINE_STATE_FORMAT:
        raise CheckpointError(
            f"{path}: engine state format {found!r}, expected {ENGINE_STATE_FORMAT!r}; "
            "give a snapshot written by 'stream-nb run' or 'stream-nb merge'"
        )
    state = body.get("learner")
    if not isinstance(state, dict):
        raise CheckpointError(f"{path}: the snapshot has no 'learner' state object")
    name = state.get("learner")
    failures: dict[str, Exception] = {}
    if isinstance(name, str) and name not in Learner.registered():
        # a learner of a module not imported yet registers on import; if it is
        # still unknown, the modules that failed to import are named with their errors
        failures = _import_learner_modules()
        if name in Learner.registered():
            failures = {}
    try:
        return body, Learner.from_state(state)
    except ModelStateError as exc:
        raise ModelStateError(
            f"{path}: invalid learner state: {exc}{_import_failures(failures)}"
        ) from exc
    except STATE_ERRORS as exc:  # (reported as one line, never a traceback)
        raise ModelStateError(f"{path}: invalid learner state: {exc!r}") from exc


def _report_of(state: Any) -> Any:
    if state is None:
        return None
    from stream_nb.evaluation import PrequentialEvaluator

    try:
        return PrequentialEvaluator.from_state(state).report(confusion=False)
    except StreamNBError:
        return None
