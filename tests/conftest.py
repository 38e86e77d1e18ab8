"""Shared fixtures: real object stores (a temp directory, and moto's S3 server over HTTP on a
free port), and lakes on both."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from lake_core import Lake, LakeConfig
from lake_core.stores import LocalObjectStore, ObjectStore
from lake_core.stores.s3 import S3ObjectStore

# Credentials for the local moto server only; real S3 settings never enter the test suite.
S3_ENV = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing-secret",
    "AWS_DEFAULT_REGION": "us-east-1",
    "AWS_REGION": "us-east-1",
}


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """A real S3 HTTP server (moto) on a free port, for the whole session, in a process of its
    own (``tests/motoserver.py``: in this one it shared the GIL with the tests). Sets the
    standard AWS_* variables so every process the tests start finds it the way users
    configure S3."""
    server = subprocess.Popen(
        [sys.executable, "-m", "tests.motoserver"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        cwd=str(Path(__file__).resolve().parent.parent),
        env={**os.environ, **S3_ENV},
        text=True,
    )
    assert server.stdout is not None and server.stdin is not None
    line = server.stdout.readline().split()
    if len(line) != 2:
        server.kill()
        raise RuntimeError(f"moto's server did not start (it said {line!r})")
    endpoint = f"http://{line[0]}:{line[1]}"
    saved = {k: os.environ.get(k) for k in [*S3_ENV, "AWS_ENDPOINT_URL"]}
    os.environ.update(S3_ENV)
    os.environ["AWS_ENDPOINT_URL"] = endpoint
    yield endpoint
    server.stdin.close()  # it stops when its input closes
    try:
        server.wait(timeout=10)
    except subprocess.TimeoutExpired:
        server.kill()
    for k, v in saved.items():
        if v is None:
            os.environ.pop(k, None)
        else:
            os.environ[k] = v


@pytest.fixture
def s3_bucket(s3_endpoint: str) -> str:
    """A fresh bucket per test."""
    name = f"t-{uuid.uuid4().hex[:20]}"
    boto3.client("s3", endpoint_url=s3_endpoint).create_bucket(Bucket=name)
    return name


@pytest.fixture(params=["local", "s3"])
def lake_uri(request: pytest.FixtureRequest, tmp_path: object) -> str:
    """A lake URI on local disk and on moto S3 (each test runs against both)."""
    if request.param == "local":
        return str(tmp_path) + "/lake"
    bucket = request.getfixturevalue("s3_bucket")
    return f"s3://{bucket}/lake"


@pytest.fixture
def store(lake_uri: str) -> ObjectStore:
    if lake_uri.startswith("s3://"):
        return S3ObjectStore.from_uri(lake_uri)
    return LocalObjectStore(lake_uri)


@pytest.fixture
def lake(lake_uri: str) -> Lake:
    return Lake.init(LakeConfig(uri=lake_uri, user="tester"))


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """A real ZooKeeper server (Debian's package) on a free port, for the whole session; see
    ``tests/zk.py``. Yields a :class:`tests.zk.ZooKeeperServer` (``.hosts`` is HOST:PORT)."""
    from tests.zk import ZooKeeperServer

    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    yield server
    server.stop()


#: The test modules that take longest (measured: the durations of a full run, 2026-11-28,
#: ``--durations=150`` summed per module), longest first. pytest-xdist's ``--dist loadfile``
#: hands whole modules to workers in collection order, so these are collected first: a long
#: module started last would keep one worker busy while the other idles (longest processing
#: time first; that run spent its last four and a half minutes on the last 2% of the tests,
#: with tests/spark/test_spark_sql.py, 67 s, and other long modules missing from this list).
LONGEST_FIRST = (
    "tests/core/test_faults.py",
    "tests/orchestration/test_orchestration_e2e.py",
    "tests/spark/test_spark.py",
    "tests/core/test_crash.py",
    "tests/spark/test_spark_cluster.py",
    "tests/core/test_maintenance_race.py",
    "tests/spark/test_spark_sql.py",
    "tests/spark/test_otree_spark_load.py",
    "tests/core/test_upsert_race.py",
    "tests/spark/test_spark_indexes.py",
    "tests/spark/test_spark_upsert.py",
    "tests/core/test_otree_model.py",
    "tests/core/test_derived.py",
    "tests/service/test_service_cli.py",
    "tests/core/test_catalog_concurrency.py",
    "tests/core/test_concurrency.py",
    "tests/core/test_history_model.py",
    "tests/orchestration/test_orchestration_deploy.py",
    "tests/service/test_service_errors.py",
    "tests/service/test_service_python.py",
    "tests/core/test_snapshot_format.py",
    "tests/cli/test_cli_errors.py",
    "tests/core/test_otree_layout.py",
    "tests/core/test_indexes_model.py",
    "tests/core/test_catalog_scale.py",
    "tests/core/test_expr.py",
    "tests/orchestration/test_orchestration_spark.py",
    "tests/spark/test_otree_weights_spark.py",
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Run :data:`LONGEST_FIRST` modules first; everything else keeps its order."""
    rank = {path: i for i, path in enumerate(LONGEST_FIRST)}
    root = Path(__file__).resolve().parent.parent

    def key(item: pytest.Item) -> int:
        try:
            path = item.path.resolve().relative_to(root).as_posix()
        except ValueError:
            return len(rank)
        return rank.get(path, len(rank))

    items.sort(key=key)  # stable: a module's tests keep their order
