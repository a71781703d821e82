"""Per-feature contributions to a decision, by ablation (works for every learner).

For the predicted class ``a`` and the runner-up ``b``, the contribution of
feature ``f`` is how much it moves the log-odds between them:

    c_f = [jll_a(x) − jll_b(x)] − [jll_a(x ∖ f) − jll_b(x ∖ f)]

where ``jll`` is the learner's joint log-likelihood and ``x ∖ f`` the event
without ``f``. For Naive Bayes this is exactly the log-likelihood ratio
``log P(x_f | a) − log P(x_f | b)``; for semi-naive models (SPODE, TAN, …)
it also carries the feature's interactions. Cost: one extra joint
log-likelihood per feature.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

from stream_nb.base import Learner

__all__ = ["explain"]


def explain(
    learner: Learner,
    x: Mapping[str, Any],
    jll: Mapping[Hashable, float] | None = None,
    *,
    predicted: Hashable | None = None,
) -> dict[str, Any]:
    """Contributions of each feature to ``predicted`` against ``runner_up``.

    Parameters
    ----------
    learner
        Any stream-nb learner.
    x
        The event's features.
    jll
        ``learner.joint_log_likelihood_one(x)`` if already computed.
    predicted
        The emitted decision when it is not the most probable class (a loss
        matrix); the runner-up is then the most probable other class.

    Returns
    -------
    dict
        ``{"predicted": a, "runner_up": b, "contributions": {feature: c_f}}``;
        ``{}`` when fewer than two classes can be scored.

    Examples
    --------
    >>> from stream_nb import CategoricalNB
    >>> m = CategoricalNB()
    >>> m.learn_one({"sky": "sun", "wind": "calm"}, "play")
    >>> m.learn_one({"sky": "rain", "wind": "calm"}, "stay")
    >>> e = explain(m, {"sky": "sun", "wind": "calm"})
    >>> e["predicted"], e["runner_up"]
    ('play', 'stay')
    >>> round(e["contributions"]["sky"], 4), e["contributions"]["wind"]
    (0.6931, 0.0)
    """
    scores = learner.joint_log_likelihood_one(x) if jll is None else jll
    finite = [(v, c) for c, v in scores.items() if v != float("-inf")]
    if len(finite) < 2:
        return {}
    # Stable sort: ties go to the class learned first, as in predict_one.
    ranked = [c for _, c in sorted(finite, key=lambda vc: -vc[0])]
    a = ranked[0] if predicted is None or predicted not in scores else predicted
    b = next(c for c in ranked if c != a)
    margin = scores[a] - scores[b]
    contributions: dict[str, float] = {}
    reduced = dict(x)
    for name in x:
        value = reduced.pop(name)
        without = learner.joint_log_likelihood_one(reduced)
        reduced[name] = value
        contributions[name] = margin - (without.get(a, 0.0) - without.get(b, 0.0))
    return {"predicted": a, "runner_up": b, "contributions": contributions}
