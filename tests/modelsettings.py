"""Hypothesis settings shared by the model (property) tests: ``LAKE_MODEL_EXAMPLES`` scales
how many histories each runs; ``LAKE_MODEL_RANDOM=1`` draws new ones instead of the fixed,
derandomized set CI runs."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings


def model_settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        deadline=None,
        derandomize=os.environ.get("LAKE_MODEL_RANDOM") != "1",
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
