"""The reference prequential loop over a batch: predict each event, then learn it.

:meth:`stream_nb.base.Learner.predict_learn_many` is defined as this loop;
learners with a batch kernel override that method with an exact vectorised
version, and the tests compare every kernel with this loop.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any

from stream_nb._exceptions import InvalidEventError
from stream_nb._softmax import log_softmax_argmax
from stream_nb._state import check_mapping

__all__ = ["predict_learn_loop"]


def predict_learn_loop(
    joint_log_likelihood: Callable[[Mapping[str, Any]], dict[Hashable, float]],
    learn: Callable[[Mapping[str, Any], Hashable, float], None],
    xs: Sequence[Mapping[str, Any]],
    ys: Sequence[Hashable | None],
    ws: Sequence[float],
) -> tuple[list[dict[Hashable, float] | None], list[Hashable | None], dict[int, Exception]]:
    """For each event in order, score it with ``joint_log_likelihood`` (unnormalised,
    ``{}`` before learning), then ``learn`` it unless its label is ``None``; the result
    of :meth:`~stream_nb.base.Learner.predict_learn_many`.

    Examples
    --------
    >>> from stream_nb import CategoricalNB
    >>> model = CategoricalNB()
    >>> lps, preds, errors = predict_learn_loop(
    ...     model.joint_log_likelihood_one, model.learn_one,
    ...     [{"sky": "sun"}, {"sky": "sun"}], ["play", None], [1.0, 1.0])
    >>> lps, preds, errors
    ([{}, {'play': 0.0}], [None, 'play'], {})
    """
    log_probas: list[dict[Hashable, float] | None] = []
    predictions: list[Hashable | None] = []
    errors: dict[int, Exception] = {}
    add_lp = log_probas.append
    add_pred = predictions.append
    for i, (x, y, w) in enumerate(zip(xs, ys, ws, strict=True)):
        try:
            jll = joint_log_likelihood(x if x.__class__ is dict else check_mapping(x))
        except (InvalidEventError, TypeError, ValueError) as exc:
            errors[i] = exc
            add_lp(None)
            add_pred(None)
            continue
        if jll:
            lp, y_pred = log_softmax_argmax(jll)
            add_lp(lp)
            add_pred(y_pred)
        else:
            add_lp({})
            add_pred(None)
        if y is not None:
            try:
                learn(x, y, w)
            except (InvalidEventError, TypeError, ValueError) as exc:
                errors[i] = exc
    return log_probas, predictions, errors
