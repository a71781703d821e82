"""The Bayes decision under a loss matrix, and the log-loss floor."""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from typing import Any

from stream_nb._exceptions import ConfigError

#: Probability floor of the log loss: ``P(y | x)`` below it (including a label
#: the model never saw, probability 0) counts as ``LOG_LOSS_FLOOR``, so one
#: event costs at most ``-log(1e-15) ≈ 34.54`` nats instead of +inf. 1e-15 is
#: the clipping constant of river's ``metrics.CrossEntropy`` and of
#: scikit-learn's ``log_loss`` (``eps=1e-15`` up to version 1.2; later versions
#: clip at float64's machine epsilon, 2.2e-16, which changes only terms below
#: 1e-15).
LOG_LOSS_FLOOR = 1e-15


#: ``loss_matrix[predicted][true] -> cost``. Keys are typed ``Any`` because
#: ``Mapping`` is invariant in its key: ``dict[str, ...]`` would not be a
#: ``Mapping[Hashable, ...]`` for mypy.
LossMatrix = Mapping[Any, Mapping[Any, float]]


def check_loss_matrix(
    loss_matrix: Any,
) -> dict[Hashable, dict[Hashable, float]] | None:
    """Validate ``loss_matrix[predicted][true] -> finite cost`` and copy it."""
    if loss_matrix is None:
        return None
    if not isinstance(loss_matrix, Mapping):
        raise ConfigError(
            "loss_matrix must be a mapping predicted label -> {true label: cost}, "
            f"got {type(loss_matrix).__name__}"
        )
    out: dict[Hashable, dict[Hashable, float]] = {}
    for predicted, row in loss_matrix.items():
        if not isinstance(row, Mapping):
            raise ConfigError(
                f"loss_matrix[{predicted!r}] must be a mapping true label -> cost, got {row!r}"
            )
        clean: dict[Hashable, float] = {}
        for true, cost in row.items():
            if (
                isinstance(cost, bool)
                or not isinstance(cost, (int, float))
                or not math.isfinite(cost)
            ):
                raise ConfigError(
                    f"loss_matrix[{predicted!r}][{true!r}] must be a finite number, got "
                    f"{cost!r}; leave the entry out to use the 0-1 default"
                )
            clean[true] = float(cost)
        out[predicted] = clean
    return out


def decision_cost(loss_matrix: LossMatrix, i: Any, j: Any) -> float:
    """``λ(i, j)``; an entry missing from the matrix defaults to the 0-1 loss."""
    row = loss_matrix.get(i)
    if row is not None:
        cost = row.get(j)
        if cost is not None:
            return cost
    return 0.0 if i == j else 1.0


def bayes_risk_decision(
    log_proba: Mapping[Any, float],
    loss_matrix: LossMatrix,
) -> Hashable | None:
    """The decision of least expected cost: ``argmin_i Σ_j λ(i, j) P(j | x)``.

    Parameters
    ----------
    log_proba
        ``log P(j | x)`` by class, as returned by ``predict_log_proba_one``.
    loss_matrix
        ``loss_matrix[i][j]`` is the cost of deciding ``i`` when the truth is
        ``j``. Entries left out default to the 0-1 loss (0 on the diagonal, 1
        elsewhere), so ``{}`` gives the most probable class. Rows for labels
        absent from ``log_proba`` are candidate decisions too (for instance
        an ``"abstain"`` action with a fixed cost).

    Returns
    -------
    Hashable or None
        The decision; ties go to the first candidate (classes in
        ``log_proba`` order, then the extra rows). ``None`` when
        ``log_proba`` is empty (nothing learned yet).

    Examples
    --------
    A missed fraud costs 10, a false alarm 1: with ``P(fraud) = 0.2`` the
    expected costs are 0.8 for "fraud" and 2.0 for "ok".

    >>> lp = {"ok": math.log(0.8), "fraud": math.log(0.2)}
    >>> bayes_risk_decision(lp, {"ok": {"fraud": 10.0}, "fraud": {"ok": 1.0}})
    'fraud'
    >>> bayes_risk_decision(lp, {})
    'ok'
    """
    if not log_proba:
        return None
    proba = [(j, math.exp(v)) for j, v in log_proba.items()]
    candidates = list(log_proba)
    candidates.extend(i for i in loss_matrix if i not in log_proba)
    best: Hashable | None = None
    best_risk = math.inf
    for i in candidates:
        risk = 0.0
        for j, p in proba:
            risk += decision_cost(loss_matrix, i, j) * p
        if risk < best_risk:
            best, best_risk = i, risk
    return best
