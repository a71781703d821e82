"""Every semi-naive test runs with at most ~2 GiB of extra address space.

Pair statistics grow as O(d²): a bug in a cap (``max_pair_features``,
``max_values_per_feature``, the dense block's byte cap) could otherwise eat
the machine's memory until the OOM killer stops the whole test session. With
this limit such a test fails with ``MemoryError`` instead. The soft limit is
lowered for the test only and restored afterwards.
"""

from __future__ import annotations

import resource
from collections.abc import Iterator

import pytest

#: Address space a test may add to what the process already maps.
TEST_MEMORY_BUDGET = 2 * 2**30


def _mapped_bytes() -> int:
    with open("/proc/self/statm") as fh:
        pages = int(fh.read().split()[0])
    return pages * resource.getpagesize()


@pytest.fixture(autouse=True)
def _memory_budget() -> Iterator[None]:
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _mapped_bytes() + TEST_MEMORY_BUDGET
    if hard != resource.RLIM_INFINITY:
        limit = min(limit, hard)
    if soft != resource.RLIM_INFINITY:
        limit = min(limit, soft)
    resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
