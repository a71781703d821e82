"""Shared pytest configuration: a stable hypothesis profile and the test markers.

Property tests run with ``deadline=None`` (the machine is shared, timings
vary) and ``derandomize=True`` so CI runs the same examples every time. Set
``HYPOTHESIS_PROFILE=dev`` for random exploration locally.

Two markers, registered in pyproject.toml, are applied here rather than in each
test file, so a test keeps them when it moves:

* ``kafka``: every test under a ``kafka`` test folder or in a ``test_kafka*.py``
  file, and every test that uses a broker fixture (:data:`KAFKA_FIXTURES`).
* ``slow``: the tests named in :data:`SLOW_TESTS` and the parametrisations
  matching :data:`SLOW_PARAMETRISATIONS` (found with ``--durations`` on a full
  run: each takes a second or more, most start daemons), and every test in a
  folder of :data:`SLOW_FOLDERS`.

``bash scripts/test.sh`` (CI) runs everything; the fast local suite is::

    python -m pytest -m "not kafka and not slow"
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci",
    deadline=None,
    derandomize=True,
    max_examples=50,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", deadline=None, max_examples=200)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

#: Fixtures that start or reach a Kafka broker (tests/connectors/kafka/conftest.py).
KAFKA_FIXTURES = frozenset({"kafka_bootstrap", "own_broker", "strict_broker"})

#: Folders of ``tests/`` whose every test is slow: the deployment tests start a real
#: Prometheus and need Debian packages; the benchmark tests run the benchmarks.
SLOW_FOLDERS = frozenset({"deploy", "benchmarks"})

#: Slow tests by function name (without parameters), so the marker follows a test
#: to another file; a name here covers every parametrisation of it. Each takes a
#: second or more: real daemons, crash loops, memory bounds, river's own checks.
SLOW_TESTS = frozenset(
    {
        "test_5000_classes_with_top_k_stay_in_bounded_memory",
        "test_a_new_feature_name_in_every_event_stays_bounded",
        "test_any_finite_input_keeps_statistics_finite_and_predictions_normalised",
        "test_batches_shrink_with_many_classes_and_top_k_keeps_k",
        "test_crash_loop_ends_as_the_uninterrupted_run",
        "test_every_number_of_the_statistics_is_checked",
        "test_fuzz_hostile_lines_never_kill_the_process",
        "test_generic_checks_on_mixed_events",
        "test_healthz_fails_while_the_loop_is_blocked_and_recovers",
        "test_kill_9_at_random_points_loses_and_duplicates_nothing",
        "test_merges_of_large_models_stay_finite",
        "test_new_features_and_restores_cost_linear_work",
        "test_one_feature_with_200k_unique_values_stays_bounded",
        "test_river_own_estimator_checks",
        "test_semantic_corruption_raises_only_model_state_error",
        "test_untrusted_states_raise_only_model_state_error",
        "test_uuid_feature_keeps_model_size_bounded_by_the_cap",
    }
)

#: Slow parametrisations, as ``fnmatch`` patterns of the test id: the generic
#: check with 10,000 features per event, for every learner and setting.
SLOW_PARAMETRISATIONS = ("test_learner_passes_check[[]*-wide_events[]]",)


def _is_kafka(item: pytest.Item, parts: tuple[str, ...]) -> bool:
    return (
        "kafka" in parts[:-1]
        or parts[-1].startswith("test_kafka")
        or not KAFKA_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))
    )


def _is_slow(item: pytest.Item, parts: tuple[str, ...]) -> bool:
    return (
        getattr(item, "originalname", item.name) in SLOW_TESTS
        or not SLOW_FOLDERS.isdisjoint(parts[:-1])
        or any(fnmatch.fnmatchcase(item.name, pattern) for pattern in SLOW_PARAMETRISATIONS)
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark Kafka and slow tests (see the module docstring)."""
    root = Path(__file__).parent
    for item in items:
        path = Path(item.path)
        if not path.is_relative_to(root):
            continue  # doctests of the package and the docs: fast, no broker
        parts = path.relative_to(root).parts
        if _is_kafka(item, parts):
            item.add_marker(pytest.mark.kafka)
        if _is_slow(item, parts):
            item.add_marker(pytest.mark.slow)
