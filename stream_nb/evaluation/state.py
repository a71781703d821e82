"""The evaluator's state: save and validated load."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from stream_nb._exceptions import ConfigError, ModelStateError
from stream_nb._state import (
    STATE_ERRORS,
    decode_key,
    encode_key,
    read_finite,
    read_list,
    read_n_learned,
)
from stream_nb.evaluation.scoreboard import Scoreboard
from stream_nb.evaluation.views import Ring, View, add_entry, counts_of, state_label

#: The ``format`` and ``version`` of :meth:`PrequentialEvaluator.to_state` output.
STATE_FORMAT = "stream-nb/prequential"
STATE_VERSION = 1


def scoreboard_to_state(board: Scoreboard) -> dict[str, Any]:
    """:meth:`PrequentialEvaluator.to_state
    <stream_nb.evaluation.PrequentialEvaluator.to_state>`: ``board`` as plain data."""
    matrix = board.loss_matrix
    order, pcode = board.true_codes, board.pred_codes
    return {
        "format": STATE_FORMAT,
        "version": STATE_VERSION,
        "window_size": encode_key(board.window_size),
        "fading_factor": board.fading_factor,
        "loss_matrix": None
        if matrix is None
        else [
            [encode_key(i), [[encode_key(j), c] for j, c in row.items()]]
            for i, row in matrix.items()
        ],
        "classes": [encode_key(c) for c in order],
        "last_label": [encode_key(board.last)] if board.has_last else [],
        "cumulative": board.cumulative.to_state(order, pcode),
        "window": board.window.to_state(order, pcode),
        "window_entries": board.ring.entries(board.true_labels, board.pred_labels),
        "window_evictions": board.evictions,
        "fading": board.fading.to_state(order, pcode),
        "fading_scale": board.scale,
    }


def scoreboard_from_state(state: Mapping[str, Any]) -> Scoreboard:
    """A scoreboard from :func:`scoreboard_to_state` output, checked.

    Raises
    ------
    ModelStateError
        If the state is malformed or of an unknown format or version.
    """
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
                state_label(i, "loss_matrix"): {state_label(j, "loss_matrix"): c for j, c in row}
                for i, row in raw_matrix
            }
        )
        board = Scoreboard(decode_key(state["window_size"]), state["fading_factor"], matrix)
        order, tlabels = board.true_codes, board.true_labels
        for i, c in enumerate(read_list(state["classes"], "classes")):
            c = state_label(c, f"classes[{i}]", False)
            if c in order:
                raise ModelStateError(f"classes[{i}]: class {c!r} listed twice")
            order[c] = len(tlabels)
            tlabels.append(c)
        last = state["last_label"]
        if last:
            (label,) = last
            board.last = state_label(label, "last_label[0]", False)
            board.has_last = True
        board.cumulative = View.from_state(state["cumulative"], order, "cumulative")
        # the window view as it was (dict order and running float sums
        # included), so a restored evaluator continues bit for bit; its
        # counts must agree with the entries
        board.window = View.from_state(state["window"], order, "window")
        board.fading = View.from_state(state["fading"], order, "fading")
        pcode, plabels = board.pred_codes, board.pred_labels
        for view in (board.cumulative, board.window, board.fading):
            for p in view.pred:  # the cumulative view's: in the order first emitted
                if p not in pcode:
                    pcode[p] = len(plabels)
                    plabels.append(p)
        board.ring = _read_window(board, state["window_entries"])
        board.evictions = read_n_learned(state["window_evictions"], "window_evictions")
        scale = read_finite(state["fading_scale"], "fading_scale")
        if not 0.0 < scale <= 1.0:
            raise ModelStateError(f"fading_scale: must be in (0, 1], got {scale!r}")
        board.scale = scale
    except ModelStateError as exc:
        raise ModelStateError(f"malformed evaluator state: {exc}") from exc
    except ConfigError as exc:
        raise ModelStateError(f"malformed evaluator state: {exc}") from exc
    except KeyError as exc:
        raise ModelStateError(f"malformed evaluator state: missing field {exc}") from exc
    except STATE_ERRORS as exc:
        raise ModelStateError(f"malformed evaluator state: {exc!r}") from exc
    return board


def _read_window(board: Scoreboard, entries: Any) -> Ring:
    """The window's events from the state's ``window_entries``, checked against the
    window view's counts; predictions not coded yet get codes."""
    if len(entries) > board.window_size:
        raise ValueError(f"{len(entries)} window entries for a window of {board.window_size}")
    order, pcode, plabels = board.true_codes, board.pred_codes, board.pred_labels
    check = View()
    ring = Ring(max(64, 2 * len(entries)))
    r_t, r_p, r_correct, r_loss, r_cost, r_nochange, r_majority = ring.views
    for e, item in enumerate(read_list(entries, "window_entries")):
        at = f"window_entries[{e}]"
        t, p, correct, loss, cost, nochange_ok, majority_ok = read_list(item, at, 7)
        if not all(isinstance(v, bool) for v in (correct, nochange_ok, majority_ok)):
            raise ModelStateError(f"{at}: hits must be true or false")
        entry = (
            state_label(t, f"{at}[0]", False), state_label(p, f"{at}[1]"), correct,
            read_finite(loss, f"{at}[3]"), read_finite(cost, f"{at}[4]"),
            nochange_ok, majority_ok,
        )  # fmt: skip
        add_entry(check, entry)
        code = pcode.get(entry[1])
        if code is None:
            code = pcode[entry[1]] = len(plabels)
            plabels.append(entry[1])
        r_t[e] = order[entry[0]]
        r_p[e] = code
        r_correct[e], r_loss[e], r_cost[e] = entry[2:5]
        r_nochange[e], r_majority[e] = entry[5:]
    ring.end = len(entries)
    if counts_of(check) != counts_of(board.window):
        raise ValueError("window entries disagree with the window counts")
    return ring
