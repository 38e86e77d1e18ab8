"""The Spark session every test module under tests/spark shares: one real ``local[2]``
session per test run (a process holds one SparkContext, and starting one costs seconds).

It starts after the moto server, so its executors get the ``AWS_*`` settings the way users
configure them (``spark.executorEnv.*``) and reach moto through ``AWS_ENDPOINT_URL``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest


@pytest.fixture(scope="session")
def spark(s3_endpoint: str) -> Iterator[Any]:
    from lake_spark.session import SparkSettings, spark_session

    session = spark_session(SparkSettings.resolve("local[2]", app_name="lakepool-tests"))
    yield session
    session.stop()
