"""Naive Bayes learners: one short module per learner on :class:`stream_nb.base.Learner`.

``CategoricalNB`` (categories), ``GaussianNB`` (numbers), ``MultinomialNB``,
``BernoulliNB`` and ``ComplementNB`` (token counts) and the mixed-type
``NaiveBayes``. The semi-naive learners live in :mod:`stream_nb.seminaive`.
"""

from __future__ import annotations

from stream_nb.naive_bayes.bernoulli import BernoulliNB
from stream_nb.naive_bayes.categorical import CategoricalNB
from stream_nb.naive_bayes.complement import ComplementNB
from stream_nb.naive_bayes.gaussian import GaussianNB
from stream_nb.naive_bayes.mixed import NaiveBayes
from stream_nb.naive_bayes.multinomial import MultinomialNB

__all__ = [
    "BernoulliNB",
    "CategoricalNB",
    "ComplementNB",
    "GaussianNB",
    "MultinomialNB",
    "NaiveBayes",
]
