"""Prequential (test-then-train) evaluation: cumulative, sliding-window and fading.

Every labelled event is scored with the prediction made *before* the model
learned it (Dawid's prequential principle). :class:`PrequentialEvaluator`
keeps three views of the same sequence of ``(truth, prediction, log P)``:

``cumulative``
    every event since the start, weight 1 each;
``window``
    the last ``window`` events (a ring buffer; the oldest is subtracted when a
    new one enters);
``fading``
    every event, the ``k``-th most recent one weighted ``λ^k``: Gama,
    Sebastião & Rodrigues (2013), "On evaluating stream learning algorithms",
    *Machine Learning* 90(3):317-346, fading sums ``S_i = loss_i + λ S_{i-1}``
    and ``N_i = 1 + λ N_{i-1}``; a metric is the ratio ``S_i / N_i``.

Metrics of each view (``n`` is the view's total weight)
-------------------------------------------------------
``accuracy``
    ``Σ [ŷ = y] / n``.
``log_loss``
    ``Σ -log max(P(y | x), LOG_LOSS_FLOOR) / n`` in nats; a label the model
    never saw (absent from ``log_proba``) or given probability 0 costs
    ``-log(LOG_LOSS_FLOOR) ≈ 34.54``.
``kappa``
    Cohen's kappa ``(p0 - pe) / (1 - pe)`` with ``p0`` the accuracy and
    ``pe = Σ_c n_{c·} n_{·c} / n²`` the agreement expected by chance from the
    confusion matrix's row (truth) and column (prediction) totals.
``kappa_m``
    ``(p0 - pm) / (1 - pm)``, ``pm`` the accuracy of the majority-class
    classifier (Bifet, Read, Žliobaitė, Pfahringer & Holmes, "Pitfalls in
    benchmarking data stream classification and how to avoid them", ECML PKDD
    2013; Bifet, de Francisci Morales, Read, Holmes & Pfahringer, "Efficient
    online evaluation of big data stream classifiers", KDD 2015).
``kappa_t``
    ``(p0 - pt) / (1 - pt)``, ``pt`` the accuracy of the no-change classifier
    that predicts the previous event's label (Žliobaitė, Bifet, Read,
    Pfahringer & Holmes, "Evaluation methods and decision theory for
    classification of streaming data with temporal dependence", *Machine
    Learning* 98(3):455-482, 2015).
``macro_f1``
    Mean over classes of ``F1_c = 2 TP_c / (2 TP_c + FP_c + FN_c)``, the
    classes being those that occur in the view as a truth or as a prediction
    (scikit-learn's ``f1_score(average="macro")`` default). Each such class has
    a positive denominator, so no 0/0 arises; a class that was predicted but
    never true, or true but never predicted, has ``F1_c = 0``. This is not
    MOA's "F1 Score", which is the harmonic mean of macro precision and macro
    recall.
``cost``
    (only with a loss matrix) ``Σ λ(ŷ, y) / n``, the mean misclassification
    cost.
``confusion``
    ``[[truth, prediction, weight], ...]``, JSON-able whatever the label types.

The baselines follow MOA's ``BasicClassificationPerformanceEvaluator``
(``WindowClassificationPerformanceEvaluator`` for the window): the
majority-class classifier predicts the most frequent *true* label of the view
counting the current event (MOA adds the event to its class counts before it
asks for the majority), ties going to the class seen first in the stream; its
hit indicator is fixed when the event is added and then summed, windowed or
faded like the accuracy. The no-change classifier predicts the label of the
previous labelled event of the stream (also across the window's edge); it has
no prediction, so it is wrong, for the very first event.

Undefined values
----------------
A metric whose denominator is 0 is ``None`` (JSON ``null``), never NaN or
±inf: every metric when ``n = 0``; ``kappa`` when ``pe = 1`` (every truth and
every prediction is the same single class); ``kappa_m`` when ``pm = 1`` (the
view holds one class only, so the majority classifier is always right);
``kappa_t`` when ``pt = 1`` (the label never changed). scikit-learn returns
NaN for the first case and MOA NaN or ±inf for all three.

A ``y_pred`` of ``None`` means "no prediction" (the model had learned nothing):
it is never correct, appears as ``None`` in the confusion matrix and is not a
class for the macro F1 (it counts as a false negative of the true class).
``None`` is therefore not supported as a label.

Cost
----
:meth:`~PrequentialEvaluator.update` costs O(1) amortised per view (dict
increments; the window rescans its class counts, O(K), only when the evicted
event's label was the majority class; fading statistics use raw units × a
global scale like the learners, see :mod:`stream_nb.base`, so no decay loop
runs per event). The window keeps its events in numpy arrays (one contiguous
slice) so that :meth:`~PrequentialEvaluator.update_arrays` and
:meth:`~PrequentialEvaluator.update_many` score a batch of ``B`` events with a
few dozen array operations on ``B`` (× ``K``) elements, with the same result
bit for bit: the majority baseline's hits come from prefix sums of class
counts, the window's evictions are a slice of those arrays, and every float
sum is added in the per-event order. :meth:`report` costs O(K log K)
plus O(cells log cells) for the confusion matrix (classes and cells are
sorted into the order the stream first showed them, which does not depend on
how the stream was fed).

Modules
-------
``prequential``  :class:`PrequentialEvaluator`, the public face
``scoreboard``   what it counts (label codes, views, window events, fading scale)
                 and the per-event update
``batch``        the vectorised update of a batch, bit for bit the per-event one
``kernels``      the numpy kernels of ``batch``
``views``        one view's statistics and metrics; the window's ring buffer
``state``        the scoreboard as plain data, and its validated load
``decision``     loss matrices and :func:`bayes_risk_decision`
"""

from stream_nb.evaluation.decision import LOG_LOSS_FLOOR, LossMatrix, bayes_risk_decision
from stream_nb.evaluation.kernels import MIN_BATCH
from stream_nb.evaluation.prequential import PrequentialEvaluator
from stream_nb.evaluation.state import STATE_FORMAT, STATE_VERSION

__all__ = [
    "LOG_LOSS_FLOOR",
    "MIN_BATCH",
    "STATE_FORMAT",
    "STATE_VERSION",
    "LossMatrix",
    "PrequentialEvaluator",
    "bayes_risk_decision",
]
