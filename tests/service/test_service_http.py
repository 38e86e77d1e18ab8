"""The service's HTTP surface against bad input, on a real server over local disk and moto S3:
each refusal is a clean 4xx JSON ``{"error": …}``, the lake is byte for byte unchanged (every
key and size), and the server keeps serving. Since nothing here may change the lake, the tests
share one server per store (``shared_server``), which also shows it keeps serving after each."""

from __future__ import annotations

import http.client
import json
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from lake_core import Lake
from lake_core.stores.factory import open_store
from tests.service.conftest import Server, start_server, stop_server


@pytest.fixture
def server(shared_server: Server) -> Server:
    return shared_server


def lake_files(uri: str) -> dict[str, int]:
    """Every key of the lake and its size: what "unchanged" means here."""
    return {o.key: o.size for o in open_store(uri).list("")}


def raw(
    server: Server, method: str, path: str, body: bytes = b"", headers: dict[str, str] | None = None
) -> tuple[int, dict[str, str]]:
    """A request with ``path`` sent exactly as written (no client normalises it)."""
    parts = urlsplit(server.url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
    hdrs = {"Authorization": f"Bearer {server.tokens['admin']}", **(headers or {})}
    conn.request(method, path, body=body, headers=hdrs)
    response = conn.getresponse()
    status, data = response.status, response.read()
    conn.close()
    assert response.getheader("content-type", "").startswith("application/json"), data
    return status, json.loads(data)


def assert_serving(server: Server) -> None:
    with server.client("read") as c:
        assert c.get("/health").json() == {"status": "ok"}
        assert c.get("/v1/pools/logs/query", params={"format": "ndjson"}).text.count("\n") == 3


@pytest.mark.parametrize(
    "method, path, status",
    [
        ("GET", "/nothing", 404),
        ("GET", "/v1/pools/logs/nothing/here", 400),  # "logs/nothing" is no pool name
        ("DELETE", "/v1/pools", 405),
        ("GET", "/v1/pools/nope/log", 404),
        ("GET", "/v1/pools/logs/log?ref=0ujtsYcgvSTl8PAuAdqWYSMnLOv", 404),
        ("GET", "/v1/pools/logs/log?ref=nobranch", 404),
        ("GET", "/v1/pools/%2e%2e/log", 400),
        ("GET", "/v1/pools/%2e%2e%2f%2e%2e%2fetc/log", 400),
        ("GET", "/v1/pools/..%2F..%2Fetc%2Fpasswd/query", 400),
        ("GET", "/v1/pools/%2Fetc%2Fpasswd/log", 400),
        ("GET", "/v1/pools/logs/query?where=ts%20%3E", 400),
        ("GET", "/v1/pools/logs/query?format=xml", 400),
        ("GET", "/v1/pools/logs/resolve?as_of=yesterday", 400),
        ("GET", "/v1/catalog/log?limit=x", 400),
    ],
)
def test_bad_reads(server: Server, method: str, path: str, status: int) -> None:
    before = lake_files(server.lake_uri)
    got, body = raw(server, method, path)
    assert got == status and isinstance(body["error"], str) and body["error"], body
    assert lake_files(server.lake_uri) == before
    assert_serving(server)


@pytest.mark.parametrize(
    "path, body, content_type, status",
    [
        ("/v1/pools/logs/merge", b"{not json", "application/json", 400),
        ("/v1/pools/logs/merge", b'{"source": 5}', "application/json", 400),
        ("/v1/pools/logs/merge", b"[]", "application/json", 400),
        ("/v1/pools/logs/merge", b'{"source": "dev"}', "text/plain", 415),
        ("/v1/pools/logs/merge", b"", "", 415),
        ("/v1/pools/logs/branches", b'{"name": "../x"}', "application/json", 400),
        ("/v1/pools/logs/branches", b'{"name": "/etc"}', "application/json", 400),
        (
            "/v1/pools/logs/branches",
            b'{"name": "dev", "from": "0ujtsYcgvSTl8PAuAdqWYSMnLOv"}',
            "application/json",
            404,
        ),
        ("/v1/pools", b'{"name": "../../x"}', "application/json", 400),
        ("/v1/pools", b'{"name": "logs"}', "application/json", 409),
        (
            "/v1/pools/logs/revert",
            b'{"commit": "0ujtsYcgvSTl8PAuAdqWYSMnLOv"}',
            "application/json",
            404,
        ),
        ("/v1/pools/logs/delete", b'{"where": "ts >"}', "application/json", 400),
        ("/v1/pools/logs/load", b'{"ts": 1}', "application/json", 415),
        ("/v1/pools/logs/load", b"--x\r\nbroken", "multipart/form-data; boundary=x", 400),
        ("/v1/pools/logs/load?meta=%7Bbad", b"", "multipart/form-data; boundary=x", 400),
        ("/v1/pools/logs/cleanup", b'{"grace_seconds": -1}', "application/json", 400),
    ],
)
def test_bad_writes(server: Server, path: str, body: bytes, content_type: str, status: int) -> None:
    before = lake_files(server.lake_uri)
    headers = {"Content-Type": content_type} if content_type else {}
    got, answer = raw(server, "POST", path, body, headers)
    assert got == status and answer["error"], answer
    assert lake_files(server.lake_uri) == before
    assert_serving(server)


def test_upload_with_a_bad_file_commits_nothing(server: Server) -> None:
    before = lake_files(server.lake_uri)
    with server.client("write") as c:
        r = c.post(
            "/v1/pools/logs/load",
            files=[
                ("file", ("good.json", b'{"ts": 9}\n')),
                ("file", ("../../bad.json", b'{"ts": "x"\n')),
            ],
        )
    assert r.status_code == 422 or r.status_code == 400, r.text
    assert "../../bad.json" in r.json()["error"]
    assert lake_files(server.lake_uri) == before
    with server.client("write") as c:
        r = c.post("/v1/pools/logs/load", files=[("file", ("t.json", b'{"ts": "text"}\n'))])
    assert r.status_code == 422 and "ts" in r.json()["error"], r.text  # a type conflict
    assert lake_files(server.lake_uri) == before


def test_auth_refusals_change_nothing(server: Server) -> None:
    before = lake_files(server.lake_uri)
    upload = [("file", ("a.json", b'{"ts": 5}\n'))]
    for scope, status in ((None, 401), ("read", 403)):
        with server.client(scope) as c:
            r = c.post("/v1/pools/logs/load", files=upload)
            assert r.status_code == status and r.json()["error"]
            if status == 401:
                assert r.headers["www-authenticate"] == "Bearer"
    with httpx.Client(base_url=server.url, headers={"Authorization": "Bearer nope"}) as c:
        assert c.get("/v1/pools").status_code == 401
        assert c.post("/v1/pools/logs/load", files=upload).status_code == 401
    with server.client("write") as c:
        r = c.post("/v1/pools/logs/compact", json={})
        assert r.status_code == 403 and r.json() == {
            "error": "this token's scope is write; admin needed"
        }
    assert lake_files(server.lake_uri) == before
    with server.client("read") as c:  # health and metrics need no token; docs neither
        assert httpx.get(server.url + "/health").status_code == 200
        assert c.get("/docs").status_code == 200
        assert "/v1/pools/{pool}/load" in httpx.get(server.url + "/openapi.json").text


def test_disconnect_mid_upload_commits_nothing(server: Server) -> None:
    before = lake_files(server.lake_uri)
    parts = urlsplit(server.url)
    head = (
        "POST /v1/pools/logs/load HTTP/1.1\r\n"
        f"Host: {parts.netloc}\r\n"
        f"Authorization: Bearer {server.tokens['write']}\r\n"
        "Content-Type: multipart/form-data; boundary=b0undary\r\n"
        "Content-Length: 1000000\r\n\r\n"
    )
    part = '--b0undary\r\nContent-Disposition: form-data; name="file"; filename="a.json"\r\n\r\n'
    with socket.create_connection((parts.hostname, parts.port)) as s:
        s.sendall(head.encode() + part.encode() + b'{"ts": 100}\n' * 2000)
        time.sleep(0.5)
    time.sleep(0.5)
    assert lake_files(server.lake_uri) == before
    assert_serving(server)


def test_slow_client_does_not_stop_the_others(server: Server) -> None:
    parts = urlsplit(server.url)
    before = lake_files(server.lake_uri)
    with socket.create_connection((parts.hostname, parts.port)) as s:
        s.sendall(b"POST /v1/pools/logs/load HTTP/1.1\r\nHost: x\r\nContent-Le")  # and stalls
        t0 = time.monotonic()
        assert_serving(server)
        assert time.monotonic() - t0 < 10
    assert lake_files(server.lake_uri) == before
    assert_serving(server)


@pytest.mark.parametrize("lake_uri", ["local"], indirect=True)
def test_oversize_bodies_are_refused(served_lake: Lake, tmp_path: Path) -> None:
    server = start_server(served_lake.config.uri, tmp_path, "--max-body", "4KB")
    try:
        before = lake_files(server.lake_uri)
        big = b'{"ts": 1, "msg": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"}\n' * 200
        with server.client("write") as c:
            r = c.post("/v1/pools/logs/load", files=[("file", ("big.json", big))])
            assert r.status_code == 413 and "limit of 4096 bytes" in r.json()["error"]

            def chunks():  # no Content-Length: counted as it arrives
                for _ in range(100):
                    yield b"x" * 1000

            r = c.post(
                "/v1/pools/logs/merge",
                content=chunks(),
                headers={"Content-Type": "application/json"},
            )
            assert r.status_code == 413, r.text
        # The CLI through the service: a failed operation (exit 1), not a usage error.
        f = tmp_path / "big.ndjson"
        f.write_bytes(big)
        res = subprocess.run(
            [sys.executable, "-m", "lake_cli", "--lake", server.url, "--token",
             server.tokens["write"], "load", "-p", "logs", str(f)],
            capture_output=True, text=True, timeout=120,
        )
        assert (res.returncode, res.stdout) == (1, ""), res.stderr
        assert res.stderr.startswith("error: request body larger than the service's limit")
        assert res.stderr.count("\n") == 1, res.stderr
        assert lake_files(server.lake_uri) == before
        assert_serving(server)
        with server.client("write") as c:  # under the bound, loads as ever
            r = c.post("/v1/pools/logs/load", files=[("file", ("small.json", b'{"ts": 4}\n'))])
            assert r.status_code == 200, r.text
    finally:
        stop_server(server)
