"""The pair store in its two representations, for tests that compare them: a model kept
sparse, and states whose pair lists compare equal whatever the representation."""

from __future__ import annotations

import json
from typing import Any

from stream_nb import Learner


def sparse(model: Learner) -> Learner:
    """Force ``model`` (untrained or not) to keep its pair counts in dictionaries."""
    model._store.keep_sparse()  # type: ignore[attr-defined]
    return model


def canonical_state(model: Learner) -> Any:
    """The state with its pair list as a dict (the two representations order it differently)."""
    state = json.loads(json.dumps(model.to_state()))
    store = state["stats"]["store"]
    store["pairs"] = {
        json.dumps([i, vi]): {json.dumps(j): [c, sorted(map(json.dumps, v))] for j, c, v in sub}
        for i, vi, sub in store["pairs"]
    }
    return state
