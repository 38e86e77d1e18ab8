"""A real lake service for the tests: ``python -m lake_service`` (what ``lake serve`` runs) in
its own process on a free loopback port, over a real lake on local disk or moto S3, with a
tokens file of one token per scope. Its output (the access log) goes to a file tests read."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import httpx
import pytest

from lake_core import Lake, LakeConfig

ROOT = Path(__file__).resolve().parents[2]
TOKENS = {"read": "r-token-7f3a", "write": "w-token-91bc", "admin": "a-token-55de"}


@dataclass
class Server:
    """One running service: its URL, the lake it serves, its log file."""

    url: str
    lake_uri: str
    log: Path
    process: subprocess.Popen[bytes]
    tokens: dict[str, str] = field(default_factory=lambda: dict(TOKENS))

    def client(self, scope: str | None = "admin") -> httpx.Client:
        headers = {"Authorization": f"Bearer {self.tokens[scope]}"} if scope else {}
        return httpx.Client(base_url=self.url, headers=headers, timeout=60)

    def log_text(self) -> str:
        return self.log.read_text(errors="replace")


def remote(server: Server, scope: str = "admin") -> list[str]:
    """The CLI's global options that point it at ``server`` with a token of ``scope``."""
    return ["--lake", server.url, "--token", server.tokens[scope]]


def start_server(lake_uri: str, tmp: Path, *extra: str, tokens: bool = True) -> Server:
    """Start ``python -m lake_service`` and wait for its ``serving lake … at URL`` line."""
    log = tmp / f"server-{time.monotonic_ns()}.log"
    args = [sys.executable, "-m", "lake_service", "--lake", lake_uri, "--listen", "127.0.0.1:0"]
    if tokens:
        tokens_file = tmp / "tokens"
        tokens_file.write_text("".join(f"{t} {s}\n" for s, t in TOKENS.items()))
        args += ["--tokens", str(tokens_file)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1"}
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [*args, *extra], stdout=out, stderr=subprocess.STDOUT, env=env, cwd=tmp
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        for line in log.read_text(errors="replace").splitlines():
            if line.startswith("serving lake "):
                url = line.rsplit(" ", 1)[1]
                return Server(url, lake_uri, log, proc)
        if proc.poll() is not None:
            raise AssertionError(f"server exited {proc.returncode}: {log.read_text()}")
        time.sleep(0.05)
    proc.kill()
    raise AssertionError(f"server did not start: {log.read_text()}")


def stop_server(server: Server) -> None:
    server.process.terminate()
    try:
        server.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()


def seed_lake(uri: str) -> Lake:
    """A new lake at ``uri`` with pool ``logs`` (key ``ts:asc``) holding one commit."""
    import pyarrow as pa

    lake = Lake.init(LakeConfig(uri=uri, user="tester"))
    pool = lake.create_pool("logs", "ts:asc", target_size=64 * 1024)
    pool.load(pa.table({"ts": [1, 2, 3], "msg": ["a", "b", "c"]}), message="seed")
    return lake


@pytest.fixture
def served_lake(lake_uri: str) -> Lake:
    """A lake (local or S3) with pool ``logs`` (key ``ts:asc``) holding one commit."""
    return seed_lake(lake_uri)


@pytest.fixture(scope="module", params=["local", "s3"])
def shared_server(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Server]:
    """One server per module and store, for tests that change nothing (each checks so)."""
    import uuid

    import boto3

    tmp = tmp_path_factory.mktemp("served")
    if request.param == "local":
        uri = str(tmp / "lake")
    else:
        endpoint = request.getfixturevalue("s3_endpoint")
        bucket = f"t-{uuid.uuid4().hex[:20]}"
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
        uri = f"s3://{bucket}/lake"
    seed_lake(uri)
    srv = start_server(uri, tmp)
    yield srv
    stop_server(srv)


@pytest.fixture
def server(served_lake: Lake, tmp_path: Path) -> Iterator[Server]:
    srv = start_server(served_lake.config.uri, tmp_path)
    yield srv
    stop_server(srv)
