"""Flags and their environment variables (``STREAM_NB_*``); the flag groups commands share."""

from __future__ import annotations

import argparse
import math
import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from stream_nb.base import Learner

DEFAULT_MODEL = "NaiveBayes"


_ENV_PREFIX = "STREAM_NB_"


_TRUE = {"1", "true", "yes", "on"}


_FALSE = {"0", "false", "no", "off", ""}


# ---------------------------------------------------------------------- flags + env
class _EnvError(Exception):
    pass


def _env_name(flag: str) -> str:
    return _ENV_PREFIX + flag.lstrip("-").upper().replace("-", "_")


def split_env_list(raw: str) -> list[str]:
    """Split a repeatable flag's environment value into its items.

    Items are separated by whitespace outside JSON brackets and strings, so an
    item may carry JSON with spaces, as the command line would take it.

    Examples
    --------
    >>> split_env_list('CategoricalNB:{"alpha": 0.5} GaussianNB')
    ['CategoricalNB:{"alpha": 0.5}', 'GaussianNB']
    >>> split_env_list('alpha=0.5  schema={"a b": "numeric"}')
    ['alpha=0.5', 'schema={"a b": "numeric"}']
    """
    items: list[str] = []
    current: list[str] = []
    depth = 0
    in_string = escaped = False
    for char in raw:
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth = max(0, depth - 1)
        elif char.isspace() and depth == 0:
            if current:
                items.append("".join(current))
                current = []
            continue
        current.append(char)
    if current:
        items.append("".join(current))
    return items


class _Repeat(argparse.Action):
    """Collect a repeatable flag; its first use on the command line replaces the
    default (the environment variable's items) instead of adding to it."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: Any,
        option_string: str | None = None,
    ) -> None:
        current = getattr(namespace, self.dest, None)
        items = [] if current is None or current is self.default else list(current)
        items.append(values)
        setattr(namespace, self.dest, items)


def _flag(
    parser: argparse._ActionsContainer,
    *names: str,
    type: Callable[[str], Any] = str,
    default: Any = None,
    help: str,
    choices: Sequence[str] | None = None,
    metavar: str | None = None,
    repeat: bool = False,
) -> None:
    """Add the flag ``names`` (``"--name"``, or ``"-n", "--name"``) with its
    ``STREAM_NB_*`` variable, named after the long name; the variable overrides
    ``default``. A ``repeat`` flag collects a list (the variable: items split by
    :func:`split_env_list`), which its first use on the command line replaces."""
    flag = max(names, key=len)
    env = _env_name(flag)
    raw = os.environ.get(env)
    value = default
    if raw is not None:
        try:
            value = [type(v) for v in split_env_list(raw)] if repeat else type(raw)
        except (ValueError, argparse.ArgumentTypeError) as exc:
            raise _EnvError(f"{env}={raw!r} (for {flag}): {exc}") from exc
        if choices is not None and (value not in choices):
            raise _EnvError(f"{env}={raw!r} (for {flag}) must be one of {', '.join(choices)}")
    shown = "none" if default is None else default
    parser.add_argument(
        *names,
        type=type,
        default=value,
        choices=choices,
        metavar=metavar,
        action=_Repeat if repeat else "store",
        help=f"{help} [env {env}; default: {shown}]",
    )


def _switch(parser: argparse._ActionsContainer, flag: str, *, help: str) -> None:
    """Add the on/off ``flag`` (off: ``None``) with its ``STREAM_NB_*`` variable
    (1/0, true/false, yes/no, on/off)."""
    env = _env_name(flag)
    raw = os.environ.get(env)
    value = None
    if raw is not None:
        lowered = raw.strip().lower()
        if lowered not in _TRUE | _FALSE:
            raise _EnvError(f"{env}={raw!r} (for {flag}) must be one of 1/0, true/false, yes/no")
        value = lowered in _TRUE
    parser.add_argument(
        flag,
        action="store_true",
        default=value,
        help=f"{help} [env {env}=1; default: off]",
    )


def _integer_type(minimum: int, expected: str) -> Callable[[str], int]:
    """An argparse ``type``: an integer ≥ ``minimum``; errors say ``expected {expected}``."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value

    return parse


_positive_int = _integer_type(1, "a positive integer")


_nonneg_int = _integer_type(0, "an integer >= 0")


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _json_value(text: str) -> Any:
    """JSON, or ``@FILE`` to read the JSON from a file."""
    data: str | bytes = text
    if text.startswith("@"):
        try:
            data = Path(text[1:]).read_bytes()
        except OSError as exc:
            raise argparse.ArgumentTypeError(f"cannot read {text[1:]!r}: {exc}") from None
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON ({exc}): {text[:80]!r}") from None


def _key_value(text: str) -> tuple[str, Any]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    try:
        return key, orjson.loads(value)
    except orjson.JSONDecodeError:
        return key, value  # a bare string


# ---------------------------------------------------------------------- parser
def _command_parser(
    sub: Any,
    name: str,
    formatter: type[argparse.HelpFormatter],
    *,
    help: str,
    description: str,
    epilog: str | None = None,
) -> argparse.ArgumentParser:
    """The subparser of command ``name``; it is ``args.subparser`` when that command runs,
    so the command reports errors with its own usage line."""
    parser: argparse.ArgumentParser = sub.add_parser(
        name, help=help, description=description, epilog=epilog, formatter_class=formatter
    )
    parser.set_defaults(subparser=parser)
    return parser


def _add_event_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("events")
    _flag(
        g,
        "--shape",
        default="auto",
        choices=("auto", "nested", "flat"),
        help="event shape: nested {x: {...}, y} or flat (label removed, other keys are "
        "features); auto picks nested when the features field holds an object",
    )
    _flag(g, "--features-field", default="x", help="features field of nested events")
    _flag(g, "--label-field", default="y", help="label field")
    _flag(g, "--id-field", default="id", help="event id field ('' to disable ids)")
    _flag(g, "--weight-field", default="w", help="sample weight field ('' to disable weights)")
    _flag(
        g,
        "--max-line-bytes",
        type=_positive_int,
        default=1 << 20,
        help="longest accepted event in bytes; longer ones are dead letters (too_large)",
    )


def _add_model_flags(p: argparse.ArgumentParser, *, multi: bool = False) -> None:
    g = p.add_argument_group("model")
    if multi:
        _flag(
            g,
            "--model",
            repeat=True,
            metavar="NAME[:JSON]",
            help="learner to evaluate (NaiveBayes when none is given), repeatable, optionally "
            "with parameters as JSON "
            "(e.g. 'CategoricalNB:{\"alpha\": 0.5}'); the env variable takes a "
            "space-separated list (spaces inside JSON are kept); the command line replaces it",
        )
    else:
        _flag(
            g,
            "--model",
            default=DEFAULT_MODEL,
            metavar="NAME[:JSON]",
            help="learner class (the list is below), optionally with parameters as JSON "
            "(e.g. 'CategoricalNB:{\"alpha\": 0.5}'), set on top of the memory bounds as "
            "--params/--param are; a parameter set both here and there is an error",
        )
        _flag(
            g,
            "--params",
            type=_json_value,
            metavar="JSON",
            help="learner parameters as a JSON object (or @file.json)",
        )
        _flag(
            g,
            "--param",
            type=_key_value,
            repeat=True,
            metavar="KEY=VALUE",
            help="one learner parameter, repeatable; VALUE is JSON or a bare string; the "
            "env variable takes a space-separated list; the command line replaces it",
        )
    _flag(
        g,
        "--loss-matrix",
        type=_json_value,
        metavar="JSON",
        help="cost-sensitive decisions: {predicted: {true: cost}} or [[predicted, true, "
        "cost], ...] (keeps non-string labels), or @file.json",
    )
    _flag(g, "--window", type=_positive_int, default=1000, help="prequential window (events)")
    _flag(g, "--fading-factor", type=float, default=0.999, help="prequential fading factor")


# ---------------------------------------------------------------------- memory bounds
#: The daemon's bound on each learner parameter that takes one, applied when the
#: learner's own default is unbounded and neither --params nor --param sets it.
#: (A learner that takes ``max_vocabulary`` gets no default ``max_features``: its
#: vocabulary is its features, bounded with an overflow token instead.)
DAEMON_BOUNDS: dict[str, int] = {
    "max_classes": 10_000,
    "max_features": 10_000,
    "max_values_per_feature": 10_000,
    "max_vocabulary": 100_000,
}


def _add_bound_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group(
        "memory bounds",
        "Upper bounds on the learner parameters of the same names, for learners that take "
        "them, unless --params/--param sets the parameter; 0 lifts the bound. A learner's "
        "own tighter default is kept (the semi-naive max_values_per_feature=100).",
    )
    for name, value in DAEMON_BOUNDS.items():
        _flag(
            g,
            "--" + name.replace("_", "-"),
            type=_nonneg_int,
            default=value,
            metavar="N",
            help=f"bound on the learner's {name}",
        )


def daemon_params(
    cls: type[Learner],
    params: Mapping[str, Any] | None = None,
    bounds: Mapping[str, int | None] | None = None,
) -> dict[str, Any]:
    """``params`` completed with the daemon's memory bounds, as ``stream-nb run`` builds a learner.

    Each bound of ``bounds`` (default :data:`DAEMON_BOUNDS`; ``None``:
    unbounded) is set for the parameters ``cls`` takes and ``params`` leaves
    out, unless the learner's own default is tighter.

    Examples
    --------
    >>> from stream_nb import CategoricalNB, SPODE
    >>> daemon_params(CategoricalNB, {"alpha": 0.5})["max_values_per_feature"]
    10000
    >>> "max_values_per_feature" in daemon_params(SPODE)  # its own default, 100, is tighter
    False
    >>> from stream_nb import MultinomialNB
    >>> sorted(daemon_params(MultinomialNB))  # the vocabulary bounds its features
    ['max_classes', 'max_vocabulary']
    """
    import inspect

    out = dict(params or {})
    accepted = inspect.signature(cls).parameters
    for name, bound in (DAEMON_BOUNDS if bounds is None else bounds).items():
        if name not in accepted or name in out:
            continue
        if name == "max_features" and "max_vocabulary" in accepted:
            continue  # the vocabulary bound applies (overflow token)
        own = accepted[name].default
        if own is None or (bound is not None and bound < own):
            out[name] = bound
    return out


def _add_log_flags(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("logging")
    _flag(
        g,
        "--log-level",
        default="INFO",
        choices=("DEBUG", "INFO", "WARNING", "ERROR"),
        help="log level",
    )
    _flag(
        g,
        "--log-format",
        default="text",
        choices=("text", "json"),
        help="log line format (json: one object per line)",
    )


def parse_metrics_address(text: str) -> tuple[str, int]:
    """Parse ``--metrics-address``: ``HOST:PORT``, ``:PORT`` or a bare ``PORT``.

    Without a host the endpoint binds the loopback interface; all interfaces need an
    explicit ``0.0.0.0:PORT``.

    Examples
    --------
    >>> parse_metrics_address("9108")
    ('127.0.0.1', 9108)
    >>> parse_metrics_address("0.0.0.0:9108")
    ('0.0.0.0', 9108)
    >>> parse_metrics_address("[::1]:9108")
    ('::1', 9108)
    """
    host, _, port = text.rpartition(":")
    if not port.isdigit() or int(port) > 65535:
        raise ValueError(
            f"--metrics-address must be [HOST:]PORT (e.g. 127.0.0.1:9108 or 9108), got {text!r}"
        )
    return (host.strip("[]") or "127.0.0.1"), int(port)


def _parse_address(parser: argparse.ArgumentParser, text: str) -> tuple[str, int]:
    try:
        return parse_metrics_address(text)
    except ValueError as exc:
        parser.error(str(exc))
