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
