"""Naive Bayes learners: one short module per learner on :class:`stream_nb.base.Learner`.

``CategoricalNB`` (categories), ``GaussianNB`` (numbers), ``MultinomialNB``,
``BernoulliNB`` and ``ComplementNB`` (token counts), the mixed-type
``NaiveBayes`` and ``WeightedNB`` (NaiveBayes with learned feature weights).
The semi-naive learners live in :mod:`stream_nb.seminaive`.

Shared parts: ``_text`` (the token learners' vocabulary and event checks),
``_gaussian_stats`` (the Gaussian statistics component of GaussianNB and
NaiveBayes), ``_gaussian_scores`` (how they score an event), ``_gaussian_state``
(reading them from a state), ``_categorical_stats`` (the categorical statistics
component of CategoricalNB, NaiveBayes and the semi-naive pair store),
``_categorical_batch`` (its terms in a batch kernel), ``_arrays`` (the batch
kernels' class layout, prefix sums and reductions) and ``_vectorised`` (the
batch kernel of GaussianNB and NaiveBayes); ``_weights`` (WeightedNB's per-feature
terms, gradient and merge rule).
"""

from __future__ import annotations

from stream_nb.naive_bayes.bernoulli import BernoulliNB
from stream_nb.naive_bayes.categorical import CategoricalNB
from stream_nb.naive_bayes.complement import ComplementNB
from stream_nb.naive_bayes.gaussian import GaussianNB
from stream_nb.naive_bayes.mixed import NaiveBayes
from stream_nb.naive_bayes.multinomial import MultinomialNB
from stream_nb.naive_bayes.weighted import WeightedNB

__all__ = [
    "BernoulliNB",
    "CategoricalNB",
    "ComplementNB",
    "GaussianNB",
    "MultinomialNB",
    "NaiveBayes",
    "WeightedNB",
]
