"""Shared pytest configuration: a stable hypothesis profile and the test markers.

Property tests run with ``deadline=None`` (the machine is shared, timings
vary) and ``derandomize=True`` so CI runs the same examples every time. Set
``HYPOTHESIS_PROFILE=dev`` for random exploration locally.

Two markers, registered in pyproject.toml, are applied here rather than in each
test file, so a test keeps them when it moves:

* ``kafka``: every test under a ``kafka`` test folder or in a ``test_kafka*.py``
  file, and every test that uses a broker fixture (:data:`KAFKA_FIXTURES`).
* ``slow``: the tests named in :data:`SLOW_TESTS` (found with ``--durations``
  on a full run: each takes seconds, most start daemons or brokers) and every
  test in a folder of :data:`SLOW_FOLDERS`.

``bash scripts/test.sh`` (CI) runs everything; the fast local suite is::

    python -m pytest -m "not kafka and not slow"
"""

from __future__ import annotations

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

#: Folders of ``tests/`` whose every test is slow.
SLOW_FOLDERS: frozenset[str] = frozenset()

#: Slow tests by function name (without parameters), so the marker follows a test
#: to another file; a name here covers every parametrisation of it.
SLOW_TESTS: frozenset[str] = frozenset()


def _is_kafka(item: pytest.Item, parts: tuple[str, ...]) -> bool:
    return (
        "kafka" in parts[:-1]
        or parts[-1].startswith("test_kafka")
        or not KAFKA_FIXTURES.isdisjoint(getattr(item, "fixturenames", ()))
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
        name = getattr(item, "originalname", item.name)
        if name in SLOW_TESTS or not SLOW_FOLDERS.isdisjoint(parts[:-1]):
            item.add_marker(pytest.mark.slow)
