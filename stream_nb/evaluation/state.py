"""The evaluator's state: save and validated load."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from stream_nb._exceptions import ConfigError, ModelStateError
from stream_nb._state import (
    decode_key,
    encode_key,
    read_finite,
    read_list,
    read_n_learned,
)
from stream_nb.evaluation.views import (
    _add_entry,
    _counts,
    _label,
    _Ring,
    _View,
)

if TYPE_CHECKING:
    from stream_nb.evaluation.prequential import PrequentialEvaluator


#: The ``format`` and ``version`` of :meth:`PrequentialEvaluator.to_state` output.
STATE_FORMAT = "stream-nb/prequential"
STATE_VERSION = 1


def evaluator_to_state(ev: PrequentialEvaluator) -> dict[str, Any]:
    """:meth:`PrequentialEvaluator.to_state` of ``ev``."""
    ev._flush()
    matrix = ev.loss_matrix
    return {
        "format": STATE_FORMAT,
        "version": STATE_VERSION,
        "window_size": encode_key(ev.window),
        "fading_factor": ev.fading_factor,
        "loss_matrix": None
        if matrix is None
        else [
            [encode_key(i), [[encode_key(j), c] for j, c in row.items()]]
            for i, row in matrix.items()
        ],
        "classes": [encode_key(c) for c in ev._order],
        "last_label": [encode_key(ev._last)] if ev._has_last else [],
        "cumulative": ev._cumulative.to_state(ev._order, ev._pcode),
        "window": ev._window.to_state(ev._order, ev._pcode),
        "window_entries": ev._ring.entries(ev._tlabels, ev._plabels),
        "window_evictions": ev._evictions,
        "fading": ev._fading.to_state(ev._order, ev._pcode),
        "fading_scale": ev._scale,
    }


def evaluator_from_state(
    cls: type[PrequentialEvaluator], state: Mapping[str, Any]
) -> PrequentialEvaluator:
    """:meth:`PrequentialEvaluator.from_state`: an evaluator of class ``cls`` from ``state``."""
    if not isinstance(state, Mapping) or state.get("format") != STATE_FORMAT:
        raise ModelStateError(f"not a stream-nb evaluator state (expected format {STATE_FORMAT!r})")
    if state.get("version") != STATE_VERSION:
        raise ModelStateError(
            f"unsupported evaluator state version {state.get('version')!r}; "
            f"this stream-nb reads version {STATE_VERSION}"
        )
    try:
        raw_matrix = state["loss_matrix"]
        matrix = (
            None
            if raw_matrix is None
            else {
                _label(i, "loss_matrix"): {_label(j, "loss_matrix"): c for j, c in row}
                for i, row in raw_matrix
            }
        )
        ev = cls(
            window=decode_key(state["window_size"]),
            fading_factor=state["fading_factor"],
            loss_matrix=matrix,
        )
        order = ev._order
        for i, c in enumerate(read_list(state["classes"], "classes")):
            c = _label(c, f"classes[{i}]", False)
            if c in order:
                raise ModelStateError(f"classes[{i}]: class {c!r} listed twice")
            order[c] = len(ev._tlabels)
            ev._tlabels.append(c)
        last = state["last_label"]
        if last:
            (ev._last,) = last
            ev._last = _label(ev._last, "last_label[0]", False)
            ev._has_last = True
        ev._cumulative = _View.from_state(state["cumulative"], order, "cumulative")
        # the window view as it was (dict order and running float sums
        # included), so a restored evaluator continues bit for bit; its
        # counts must agree with the entries
        ev._window = _View.from_state(state["window"], order, "window")
        ev._fading = _View.from_state(state["fading"], order, "fading")
        pcode, plabels = ev._pcode, ev._plabels
        for view in (ev._cumulative, ev._window, ev._fading):
            for p in view.pred:  # the cumulative view's: in the order first emitted
                if p not in pcode:
                    pcode[p] = len(plabels)
                    plabels.append(p)
        check = _View()
        entries = state["window_entries"]
        if len(entries) > ev.window:
            raise ValueError(f"{len(entries)} window entries for a window of {ev.window}")
        ring = ev._ring = _Ring(max(64, 2 * len(entries)))
        r_t, r_p, r_correct, r_loss, r_cost, r_nochange, r_majority = ring.views
        for e, item in enumerate(read_list(entries, "window_entries")):
            at = f"window_entries[{e}]"
            t, p, correct, loss, cost, nochange_ok, majority_ok = read_list(item, at, 7)
            if not all(isinstance(v, bool) for v in (correct, nochange_ok, majority_ok)):
                raise ModelStateError(f"{at}: hits must be true or false")
            entry = (
                _label(t, f"{at}[0]", False), _label(p, f"{at}[1]"), correct,
                read_finite(loss, f"{at}[3]"), read_finite(cost, f"{at}[4]"),
                nochange_ok, majority_ok,
            )  # fmt: skip
            _add_entry(check, entry)
            code = pcode.get(entry[1])
            if code is None:
                code = pcode[entry[1]] = len(plabels)
                plabels.append(entry[1])
            r_t[e] = order[entry[0]]
            r_p[e] = code
            r_correct[e], r_loss[e], r_cost[e] = entry[2:5]
            r_nochange[e], r_majority[e] = entry[5:]
        ring.end = len(entries)
        if _counts(check) != _counts(ev._window):
            raise ValueError("window entries disagree with the window counts")
        ev._evictions = read_n_learned(state["window_evictions"], "window_evictions")
        scale = read_finite(state["fading_scale"], "fading_scale")
        if not 0.0 < scale <= 1.0:
            raise ModelStateError(f"fading_scale: must be in (0, 1], got {scale!r}")
        ev._scale = scale
    except ModelStateError as exc:
        raise ModelStateError(f"malformed evaluator state: {exc}") from exc
    except ConfigError as exc:
        raise ModelStateError(f"malformed evaluator state: {exc}") from exc
    except KeyError as exc:
        raise ModelStateError(f"malformed evaluator state: missing field {exc}") from exc
    except (
        TypeError,
        ValueError,
        AttributeError,
        IndexError,
        ArithmeticError,
        RecursionError,
    ) as exc:
        raise ModelStateError(f"malformed evaluator state: {exc!r}") from exc
    return ev
