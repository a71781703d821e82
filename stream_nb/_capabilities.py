"""What a learner class declares about itself (scikit-learn's tags, for stream-nb)."""

from __future__ import annotations

import dataclasses

__all__ = ["Capabilities"]


@dataclasses.dataclass(frozen=True)
class Capabilities:
    """What a learner class can do or needs, declared on the class (``Learner.capabilities``).

    Tools read these instead of keeping lists of learner names. A subclass
    inherits its parent's declaration; one that changes what a declaration
    promises declares its own, e.g. a subclass of GaussianNB with other
    formulas than the batch kernel's sets
    ``capabilities = dataclasses.replace(GaussianNB.capabilities, column_kernel=False)``.

    Attributes
    ----------
    nonnegative_counts
        Feature values are counts: the event decoder rejects negative numbers
        before they reach the learner.
    numeric_only
        Every feature value must be a number (a string is rejected as
        ``invalid_features``).
    column_kernel
        The class has an exact batch kernel on columns
        (:meth:`~stream_nb.base.Learner.predict_learn_columns`, also used by
        :meth:`~stream_nb.base.Learner.predict_learn_many`) that implements exactly its
        formulas; see also :attr:`~stream_nb.base.Learner.columns_supported` for one instance.
    row_kernel
        The class has an exact batch kernel on events given as mappings
        (:meth:`~stream_nb.base.Learner.predict_learn_rows`), for batches whose
        events do not share one set of keys (token counts). The engine's row
        path hands it the decoder's feature dictionaries unchecked: a class
        that also declares ``nonnegative_counts`` returns ``None`` for a batch
        with a negative count (the per-event path then rejects it).
    kernel_records_delta
        Its batch kernels add what a batch learned to a tracked model-sync
        delta themselves (see :meth:`~stream_nb.base.Learner.track_delta`), so
        the kernels stay in use while a delta is tracked.
    informative_features
        :meth:`~stream_nb.base.Learner.informative_features` scores this learner's features
        (otherwise it returns ``[]``).
    structure
        :meth:`~stream_nb.base.Learner.structure` gives a dependence structure (otherwise ``None``).

    Examples
    --------
    >>> from stream_nb import CategoricalNB, MultinomialNB
    >>> MultinomialNB.capabilities.nonnegative_counts, CategoricalNB.capabilities.nonnegative_counts
    (True, False)
    """

    nonnegative_counts: bool = False
    numeric_only: bool = False
    column_kernel: bool = False
    row_kernel: bool = False
    kernel_records_delta: bool = False
    informative_features: bool = False
    structure: bool = False
