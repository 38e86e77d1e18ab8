"""The service's 5xx answers, against a real server process (local disk and moto S3 behind it):

- a lock that is not available is 503: the pool's maintenance lock held by another process,
  or a ZooKeeper nobody answers at;
- an unknown commit outcome (the journal append landed, its answer was lost) is 500, and it
  resolves through the service as the message says;
- the store failing for now (S3 answering 503) is 503; failing until someone acts (S3
  answering AccessDenied, a full disk) is 500;
- anything unexpected is 500 ``internal error (TypeName); see the server log``, its details
  in the server log only.

Through the service the CLI prints the same one ``error:`` line and exits with the same status
as against the lake itself; a failure changes nothing, and the server keeps serving.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import pyarrow as pa
import pytest

from lake_core import Lake, LakeConfig
from lake_core.remote.wire import RemoteError, error_from_body
from tests.faultproxy import JOURNAL, Rule, proxied
from tests.lakecheck import journal_numbers
from tests.service.conftest import (
    ROOT,
    Server,
    remote,
    seed_lake,
    start_server,
    stop_server,
)
from tests.zk import free_port

COMPACT = ["compact", "-p", "logs", "--lock-timeout", "0.5"]
INTERNAL = "internal error (RuntimeError); see the server log"


def start_cli(*args: str) -> subprocess.Popen[str]:
    """``python -m lake_cli ARGS`` started, not awaited (see :func:`finish`)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for name in ("LAKE_ROOT", "LAKE_ZOOKEEPER", "LAKE_TOKEN"):
        env.pop(name, None)
    return subprocess.Popen(
        [sys.executable, "-m", "lake_cli", *args],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def finish(proc: subprocess.Popen[str]) -> subprocess.CompletedProcess[str]:
    out, err = proc.communicate(timeout=120)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def lake_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return finish(start_cli(*args))


def error_line(res: subprocess.CompletedProcess[str]) -> str:
    """The one ``error:`` line a failed command prints (nothing on stdout, no traceback)."""
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    assert res.stdout == ""
    return lines[0]


def state(uri: str) -> tuple[list[str], list[int], list[dict[str, Any]]]:
    """Pool ``logs`` as a fresh handle sees it: its log, its journal entries, its rows."""
    pool = Lake.open(LakeConfig(uri=uri)).pool("logs")
    rows = sorted(pool.read("main").to_pylist(), key=lambda r: (r["ts"], r["msg"]))
    return [c.id for c in pool.log("main")], journal_numbers(pool), rows


def shape(line: str, commit_id: str) -> str:
    """An unknown-outcome error line without what differs between two loads: the commit id
    and the journal entry number."""
    line = re.sub(r"/\d+\.json\b", "/N.json", line.replace(commit_id, "ID"))
    return re.sub(r"\bentry \d+\b", "entry N", line)


def served_rows(server: Server) -> list[dict[str, Any]]:
    """Pool ``logs`` queried through the service."""
    with server.client("read") as c:
        r = c.get("/v1/pools/logs/query", params={"format": "ndjson"})
    assert r.status_code == 200, r.text
    return sorted((json.loads(line) for line in r.text.splitlines()), key=lambda d: d["ts"])


def test_a_held_maintenance_lock_is_503_with_the_lakes_error_line(
    served_lake: Lake, server: Server
) -> None:
    """While this process holds the pool's maintenance lock, ``lake compact`` through the
    service fails with the same exit status and ``error:`` line as against the lake, the raw
    route answers 503 ``LockTimeoutError``, and nothing changes; once the lock is released a
    compact through the same server commits."""
    uri = served_lake.config.uri
    pool = served_lake.pool("logs")
    for ts in (4, 5):  # small objects, so a compact has work to do
        pool.load(pa.table({"ts": [ts], "msg": [f"m{ts}"]}), message=f"load {ts}")
    before = state(uri)
    with Lake.open(LakeConfig(uri=uri)).pool("logs").maintenance_lock():
        # Both at once: each waits out its 0.5 s lock timeout.
        procs = [start_cli(*remote(server), *COMPACT), start_cli("--lake", uri, *COMPACT)]
        there, here = map(finish, procs)
        with server.client("admin") as c:
            raw = c.post("/v1/pools/logs/compact", json={"lock_timeout": 0.5})
    line = error_line(there)
    assert (there.returncode, line) == (here.returncode, error_line(here))
    assert there.returncode == 1
    assert line.startswith("error: lock error: maintenance lock of pool "), line
    assert line.endswith(
        f" not acquired within 0.5s (held by lake@{socket.gethostname()}:{os.getpid()})"
    )
    assert raw.status_code == 503
    body = raw.json()
    assert body["type"] == "LockTimeoutError" and f"error: {body['error']}" == line
    assert state(uri) == before
    # Released: the same server compacts.
    done = lake_cli(*remote(server), *COMPACT)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    log, _, rows = state(uri)
    assert log[1:] == before[0] and rows == before[2]


@pytest.fixture
def zk_server(tmp_path: Path) -> Iterator[tuple[Server, str]]:
    """A server over a local lake whose locks are in a ZooKeeper nobody listens at."""
    uri = str(tmp_path / "lake")
    seed_lake(uri)
    zk = f"127.0.0.1:{free_port()}"
    srv = start_server(uri, tmp_path, "--zk", zk)
    yield srv, zk
    stop_server(srv)


def test_an_unreachable_zookeeper_is_503_and_loads_still_work(
    zk_server: tuple[Server, str], tmp_path: Path
) -> None:
    """A compact through a server configured with an unreachable ZooKeeper answers 503
    ``LockServiceUnavailableError``; the CLI through it prints the same line and status as the
    direct CLI with the same ``--zk``. Loads take no lock: one through the service commits."""
    server, zk = zk_server
    uri = server.lake_uri
    before = state(uri)
    # The lock provider tries for its connect timeout (10 s, no setting changes it): all three
    # at once, so the test waits for it once.
    procs = [start_cli(*remote(server), *COMPACT), start_cli("--lake", uri, "--zk", zk, *COMPACT)]
    with server.client("admin") as c:
        raw = c.post("/v1/pools/logs/compact", json={"lock_timeout": 0.5})
    there, here = map(finish, procs)
    line = error_line(there)
    assert (there.returncode, line) == (here.returncode, error_line(here))
    assert there.returncode == 1
    assert line.startswith(f"error: lock error: ZooKeeper at {zk} cannot be reached: "), line
    assert raw.status_code == 503
    body = raw.json()
    assert body["type"] == "LockServiceUnavailableError" and f"error: {body['error']}" == line
    assert state(uri) == before
    src = tmp_path / "more.ndjson"
    src.write_text('{"ts": 7, "msg": "z"}\n')
    loaded = lake_cli(*remote(server), "load", "-p", "logs", str(src))
    assert loaded.returncode == 0, loaded.stderr
    assert [r["ts"] for r in served_rows(server)] == [1, 2, 3, 7]


def test_an_unknown_commit_outcome_is_500_and_resolves_through_the_service(
    s3_endpoint: str, s3_bucket: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """S3 loses the answer to the journal append (which landed), then is down for 17
    requests. ``lake load`` through the service then exits 1 with the direct CLI's one
    ``error: state of commit … unknown`` line and its hint; resolving it as the hint says
    through the service finds the commit and its rows once. A raw load under the same fault
    answers 500 ``CommitStateUnknownError``."""
    uri = f"s3://{s3_bucket}/lake"
    seed_lake(uri)
    with proxied(s3_endpoint, monkeypatch, seed=10, tries=3) as proxy:
        server = start_server(uri, tmp_path)
        try:
            results = []
            for ts, where in ((999, remote(server)), (998, ["--lake", uri])):
                src = tmp_path / f"in-{ts}.ndjson"
                src.write_text(f'{{"ts": {ts}, "msg": "m{ts}"}}\n')
                rule = proxy.add(Rule("lost", method="PUT", key=JOURNAL, then_outage=17))
                results.append(lake_cli(*where, "load", "-p", "logs", str(src)))
                proxy.clear()
                assert rule.fired == 1
            ids, shapes = [], []
            for res in results:
                line = error_line(res)
                assert res.returncode == 1
                assert line.startswith("error: state of commit "), line
                commit_id = line.split()[4]
                hint = f"run `lake log -p logs@main` to see whether commit {commit_id} landed"
                assert hint in line
                ids.append(commit_id)
                shapes.append(shape(line, commit_id))
            # The same line through the service as direct, but for the commit id and the
            # journal entry (the second load's is the next one).
            assert shapes[0] == shapes[1]
            # Resolved as the message says, through the service: both landed, rows once.
            log = lake_cli(*remote(server), "log", "-p", "logs@main", "-f", "json")
            assert log.returncode == 0, log.stderr
            assert {ids[0], ids[1]} <= {json.loads(x)["id"] for x in log.stdout.splitlines()}
            assert [r["ts"] for r in served_rows(server)] == [1, 2, 3, 998, 999]

            rule = proxy.add(Rule("lost", method="PUT", key=JOURNAL, then_outage=17))
            with server.client("write") as c:
                upload = [("file", ("in.ndjson", b'{"ts": 1000, "msg": "raw"}\n'))]
                raw = c.post("/v1/pools/logs/load", files=upload)
            proxy.clear()
            assert rule.fired == 1
            assert raw.status_code == 500, raw.text
            body = raw.json()
            assert body["type"] == "CommitStateUnknownError"
            assert body["error"].startswith("state of commit ")
            assert body["attrs"]["pool"] == "logs" and body["attrs"]["branch"] == "main"
            with server.client("read") as c:
                commits = c.get("/v1/pools/logs/log").json()["commits"]
            assert body["attrs"]["commit_id"] in [c["id"] for c in commits]
            assert [r["ts"] for r in served_rows(server)] == [1, 2, 3, 998, 999, 1000]
        finally:
            stop_server(server)


def _boom(*args: Any, **kwargs: Any) -> Any:
    raise RuntimeError("secret detail xyz")


def test_an_unexpected_error_is_a_bare_500_and_the_server_keeps_serving(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A bug in the server answers 500 ``internal error (RuntimeError); see the server log``,
    without its details, and logs the traceback; the next request is served and the lake is
    unchanged. No request provokes a real bug, so the app runs in-process (``create_app``
    through httpx's ASGI transport) with ``Pool.log``, which the log route calls, patched to
    raise: the stand-in for any bug below a route."""
    from lake_core.pool import Pool
    from lake_service.app import create_app

    uri = str(tmp_path / "lake")
    lake = seed_lake(uri)
    before = state(uri)
    # The app answers and raises nothing further (a raise would surface here).
    transport = httpx.ASGITransport(app=create_app(lake))

    async def requests() -> tuple[httpx.Response, httpx.Response]:
        async with httpx.AsyncClient(transport=transport, base_url="http://lake") as c:
            monkeypatch.setattr(Pool, "log", _boom)
            with caplog.at_level(logging.ERROR, logger="lake_service"):
                failed = await c.get("/v1/pools/logs/log")
            monkeypatch.undo()
            return failed, await c.get("/v1/pools/logs/log")

    failed, next_one = asyncio.run(requests())
    assert failed.status_code == 500
    assert failed.json() == {"error": INTERNAL}
    assert "secret detail" not in failed.text
    logged = [rec for rec in caplog.records if rec.name == "lake_service"]
    assert len(logged) == 1 and logged[0].levelno == logging.ERROR
    assert logged[0].getMessage() == "unexpected RuntimeError serving /v1/pools/logs/log"
    assert logged[0].exc_info is not None and "secret detail xyz" in caplog.text
    assert next_one.status_code == 200
    assert [c["id"] for c in next_one.json()["commits"]] == before[0]
    assert state(uri) == before


@contextmanager
def serving_in_thread(app: Any) -> Iterator[str]:
    """``app`` under uvicorn on a free loopback port, in a thread of this process."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(16)
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


def test_the_cli_reports_an_internal_error_as_one_line_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The client turns the bare 500 into a ``RemoteError`` with the server's message, and the
    CLI prints it as one ``error:`` line with exit status 1. The bug is the same stand-in as
    above (``Pool.log`` patched to raise), the app served by uvicorn in this process."""
    from lake_cli import main
    from lake_core.pool import Pool
    from lake_service.app import create_app

    error = error_from_body(500, {"error": INTERNAL})
    assert type(error) is RemoteError and str(error) == INTERNAL and error.status == 500

    lake = seed_lake(str(tmp_path / "lake"))
    monkeypatch.setattr(Pool, "log", _boom)
    with serving_in_thread(create_app(lake)) as url:
        code = main(["--lake", url, "log", "-p", "logs"])
        with httpx.Client(base_url=url) as c:
            assert c.get("/health").status_code == 200
    assert (code, *capsys.readouterr()) == (1, "", f"error: {INTERNAL}\n")


def test_an_unexpected_error_keeps_the_connection(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After the bare 500 the keep-alive connection still serves the client's next request
    (uvicorn closes the connection of a request whose app raised; a client that had sent its
    next request on it saw a reset: lake_service.app.UnexpectedErrorMiddleware). One raw
    socket, two requests on it; the bug is the same stand-in as above."""
    import time

    from lake_core.pool import Pool
    from lake_service.app import create_app

    lake = seed_lake(str(tmp_path / "lake"))
    monkeypatch.setattr(Pool, "log", _boom)
    with serving_in_thread(create_app(lake)) as url:
        host, port = url.removeprefix("http://").split(":")
        with socket.create_connection((host, int(port)), timeout=30) as conn:
            reader = conn.makefile("rb")

            def ask(path: str) -> tuple[int, bytes]:
                conn.sendall(f"GET {path} HTTP/1.1\r\nHost: lake\r\n\r\n".encode())
                status = int(reader.readline().split()[1])
                length = 0
                while (line := reader.readline()) not in (b"\r\n", b""):
                    name, _, value = line.decode().partition(":")
                    if name.lower() == "content-length":
                        length = int(value)
                return status, reader.read(length)

            status, body = ask("/v1/pools/logs/log")
            assert (status, json.loads(body)) == (500, {"error": INTERNAL})
            time.sleep(0.3)  # a close after the answer would have reached us by now
            assert ask("/health") == (200, b'{"status":"ok"}')


def test_a_password_in_the_service_url_never_shows_in_errors() -> None:
    """``--lake http://user:pw@host`` is what the user typed, but errors end up in logs."""
    from lake_core.remote.client import RemoteError, ServiceClient

    client = ServiceClient("http://alice:Pa55-secret@127.0.0.1:9/")
    try:
        with pytest.raises(RemoteError, match=r"http://alice:\*\*\*@127\.0\.0\.1:9") as err:
            client.get_json("/lake")
    finally:
        client.close()
    assert client.shown_url == "http://alice:***@127.0.0.1:9"
    assert "Pa55-secret" not in str(err.value)


@pytest.mark.parametrize(
    ("s3_status", "s3_code", "served"),
    [(503, "ServiceUnavailable", 503), (403, "AccessDenied", 500)],
    ids=["outage-503", "access-denied-500"],
)
def test_a_failing_store_behind_the_service_is_5xx_and_it_recovers(
    s3_endpoint: str,
    s3_bucket: str,
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    s3_status: int,
    s3_code: str,
    served: int,
) -> None:
    """S3 failing every request behind the service is the store's failure, not the client's
    mistake: an outage (503) answers 503 ``ObjectStoreError`` (retryable), not 422; access
    denied (403: the server's credentials or a bucket policy) fails the same way until
    someone acts, so it answers 500 and clients do not retry it. The CLI through the service
    says it in one line naming S3's code, exit 1; once S3 answers again the same request
    succeeds."""
    uri = f"s3://{s3_bucket}/lake"
    seed_lake(uri)
    with proxied(s3_endpoint, monkeypatch, seed=11, tries=2) as proxy:
        server = start_server(uri, tmp_path)
        try:
            proxy.add(Rule("error", times=None, status=s3_status))
            with server.client("read") as c:
                raw = c.get("/v1/pools/logs/log")
            assert raw.status_code == served, raw.text
            assert raw.json()["type"] == "ObjectStoreError"
            assert s3_code in raw.json()["error"]
            res = lake_cli(*remote(server), "log", "-p", "logs")
            assert res.returncode == 1 and error_line(res).startswith("error: "), res.stderr
            assert s3_code in error_line(res) and "Traceback" not in res.stderr
            proxy.clear()
            with server.client("read") as c:
                assert c.get("/v1/pools/logs/log").status_code == 200
            assert [r["ts"] for r in served_rows(server)] == [1, 2, 3]
        finally:
            stop_server(server)


def test_lasting_store_failures_are_not_transient() -> None:
    """Which store failures are worth retrying (unit level: a full disk cannot be made here,
    and root ignores file permissions, so the errors are built as the stores build them)."""
    import errno

    from botocore.exceptions import ClientError

    from lake_core.remote.wire import status_of
    from lake_core.stores import S3Config
    from lake_core.stores.local import LocalObjectStore
    from lake_core.stores.s3 import S3ObjectStore

    local = LocalObjectStore("/tmp")
    full = local._failed("k", OSError(errno.ENOSPC, "No space left on device"))
    flaky = local._failed("k", OSError(errno.EIO, "Input/output error"))
    assert (full.transient, flaky.transient) == (False, True)
    assert (status_of(full), status_of(flaky)) == (500, 503)
    s3 = S3ObjectStore.from_uri(
        "s3://bucket/lake",
        config=S3Config(
            endpoint_url="http://127.0.0.1:1", access_key_id="x", secret_access_key="y"
        ),
    )
    denied = ClientError(
        {"Error": {"Code": "AccessDenied"}, "ResponseMetadata": {"HTTPStatusCode": 403}},
        "GetObject",
    )
    slow = ClientError(
        {"Error": {"Code": "SlowDown"}, "ResponseMetadata": {"HTTPStatusCode": 503}}, "GetObject"
    )
    assert (s3._error("k", denied).transient, s3._error("k", slow).transient) == (False, True)
