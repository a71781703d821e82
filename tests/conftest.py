"""Shared pytest configuration: a stable hypothesis profile.

Property tests run with ``deadline=None`` (the machine is shared, timings
vary) and ``derandomize=True`` so CI runs the same examples every time. Set
``HYPOTHESIS_PROFILE=dev`` for random exploration locally.
"""

from __future__ import annotations

import os

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
