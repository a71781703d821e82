"""The semi-naive constructors: one shared parameter list, shown in full on every learner.

The shared parameters are written once (``_SemiNaive.__init__``); SPODE, TAN
and KDB forward them as ``**options``. Their signatures must still read as
if written out: ``help()`` shows them and the CLI reads the default bounds
from ``inspect.signature``.
"""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from stream_nb import AODE, KDB, SPODE, TAN, Learner
from stream_nb.cli.flags import daemon_params
from stream_nb.seminaive._base import SemiNaiveOptions, _SemiNaive

POSITIONAL = inspect.Parameter.POSITIONAL_OR_KEYWORD
KEYWORD = inspect.Parameter.KEYWORD_ONLY

#: The keyword-only parameters every semi-naive learner takes, with their defaults.
SHARED = [
    ("min_parent_count", 1.0),
    ("max_values_per_feature", 100),
    ("n_bins", 10),
    ("warmup", 100),
    ("bin_edges", None),
    ("strategy", "frequency"),
    ("warmup_terms", "gaussian"),
    ("schema", None),
    ("max_pair_features", 200),
    ("feature_weights", None),
    ("half_life", None),
    ("max_classes", None),
    ("max_features", None),
]

#: Each learner's own parameters, in front of the shared ones.
OWN: dict[type[Learner], list[tuple[str, Any, Any]]] = {
    AODE: [("alpha", POSITIONAL, 1.0), ("weighting", KEYWORD, "uniform")],
    SPODE: [("parent", POSITIONAL, None), ("alpha", KEYWORD, 1.0)],
    TAN: [("alpha", POSITIONAL, 1.0), ("rebuild_every", KEYWORD, 1000)],
    KDB: [("k", POSITIONAL, 2), ("alpha", KEYWORD, 1.0), ("rebuild_every", KEYWORD, 1000)],
}

#: A value other than the default for every shared parameter.
OTHER_VALUES = {
    "min_parent_count": 2.0,
    "max_values_per_feature": 7,
    "n_bins": 3,
    "warmup": 9,
    "bin_edges": {"t": [0.5]},
    "strategy": "width",
    "warmup_terms": "none",
    "schema": {"t": "numeric"},
    "max_pair_features": 4,
    "feature_weights": {"t": 0.5, "c": 0.0},
    "half_life": 50.0,
    "max_classes": 5,
    "max_features": 6,
}


@pytest.mark.parametrize("cls", list(OWN), ids=lambda c: c.__name__)
def test_signature_lists_every_parameter_keyword_only_after_the_first(cls: type) -> None:
    params = list(inspect.signature(cls).parameters.values())
    got = [(p.name, p.kind, p.default) for p in params]
    assert got == OWN[cls] + [(name, KEYWORD, default) for name, default in SHARED]
    assert inspect.signature(cls).return_annotation in (None, "None")


def test_the_options_type_names_the_shared_parameters() -> None:
    kinds = inspect.signature(_SemiNaive.__init__).parameters.values()
    shared = [p.name for p in kinds if p.kind is KEYWORD]
    assert list(SemiNaiveOptions.__annotations__) == shared == [name for name, _ in SHARED]


@pytest.mark.parametrize("cls", list(OWN), ids=lambda c: c.__name__)
def test_every_parameter_reaches_the_model(cls: type[Learner]) -> None:
    own = {
        "parent": "c",
        "alpha": 0.5,
        "rebuild_every": 10,
        "k": 3,
        "weighting": "mutual_information",
    }
    params = {name: own[name] for name, _, _ in OWN[cls]} | OTHER_VALUES
    model = cls(**params)
    assert model.get_params() == params
    assert model.clone().get_params() == params
    with pytest.raises(TypeError, match="unexpected keyword argument 'n_bin'"):
        cls(n_bin=3)
    if cls is not AODE:  # alpha is keyword-only after the learner's own first parameter
        with pytest.raises(TypeError, match="positional argument"):
            cls(None if cls is SPODE else 2, 0.5)


@pytest.mark.parametrize("cls", list(OWN), ids=lambda c: c.__name__)
def test_the_daemon_reads_the_default_bounds(cls: type[Learner]) -> None:
    bounds = {"max_values_per_feature": 10_000, "max_classes": 1_000, "max_features": 500}
    # the learner's own value cap (100) is tighter than the daemon's: it stays
    assert daemon_params(cls, bounds=bounds) == {"max_classes": 1_000, "max_features": 500}
