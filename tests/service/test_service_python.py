"""``Lake.open("http://…", token=…)``: the Python read API over the service returns what the
lake returns, raises the lake's own errors; the server's logs and metrics; how it refuses to
start."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pyarrow as pa
import pytest

from lake_core import Lake, LakeConfig
from lake_core.errors import (
    BranchNotFoundError,
    EmptyTransactionError,
    InvalidNameError,
    LakeError,
    PoolNotFoundError,
    UsageError,
)
from lake_core.remote.lake import NotServedError, RemoteLake
from tests.conftest import S3_ENV
from tests.service.conftest import ROOT, Server


def test_python_reads_equal_the_lake(server: Server, served_lake: Lake, tmp_path: Path) -> None:
    lake = Lake.open(server.url, token=server.tokens["write"])
    assert isinstance(lake, RemoteLake)
    local = served_lake.pool("logs")
    pool = lake.pool("logs")
    assert pool.config == local.config
    assert pool.read().equals(local.read())
    assert pool.read(where="ts >= 2", columns=["msg"]).equals(
        local.read(where="ts >= 2", columns=["msg"])
    )
    assert [c.id for c in pool.log()] == [c.id for c in local.log()]
    assert pool.snapshot(pool.resolve()) == local.snapshot(local.resolve())
    assert pool.branches() == local.branches()
    scan = pool.scan(where="ts = 2")
    assert len(scan.objects) == 1 and scan.to_table().num_rows == 1
    assert scan.stats.to_json()["rows_read"] == 3 and scan.stats.objects_read == 1

    f = tmp_path / "b.ndjson"
    f.write_text('{"ts": 4, "msg": "d"}\n')
    commit = pool.load([str(f)], message="from python", meta={"k": 1})
    assert served_lake.pool("logs").read_commit(commit.id) == commit
    assert commit.author == "lake" and commit.meta == {"k": 1}
    assert local.read()["ts"].to_pylist() == [1, 2, 3, 4]

    with pytest.raises(PoolNotFoundError) as e:
        lake.pool("nope")
    assert str(e.value) == "nope: pool not found"
    with pytest.raises(InvalidNameError):
        lake.pool("../x")
    with pytest.raises(BranchNotFoundError):
        pool.read("nobranch")
    with pytest.raises(UsageError):
        pool.scan(where="ts >")
    with pytest.raises(UsageError, match="cannot merge a branch into itself"):
        pool.merge("main", "main")
    pool.create_branch("dev")
    with pytest.raises(EmptyTransactionError):
        pool.merge("dev", "main")
    with pytest.raises(NotServedError):
        pool.verify()
    assert issubclass(NotServedError, LakeError)


def test_large_results_stream_whole(server: Server, served_lake: Lake) -> None:
    """Batches of megabytes arrive in many network reads: the client reassembles them."""
    n = 300_000
    table = pa.table({"ts": pa.array(range(n), pa.int64()), "msg": [f"m{i:08d}" for i in range(n)]})
    served_lake.create_pool("big", "ts:asc").load(table)
    local = served_lake.pool("big").read()
    remote = Lake.open(server.url, token=server.tokens["read"]).pool("big")
    assert remote.read().equals(local)
    assert remote.read(where="ts >= 123456 AND ts < 200000").num_rows == 200000 - 123456


def test_arrow_and_ndjson_streams(server: Server) -> None:
    with server.client("read") as c, c.stream("GET", "/v1/pools/logs/query") as r:
        assert r.headers["content-type"] == "application/vnd.apache.arrow.stream"
        assert r.headers["lake-objects-total"] == "1"
        reader = pa.ipc.open_stream(r.read())
        assert reader.read_all()["ts"].to_pylist() == [1, 2, 3]
    with server.client("read") as c:
        r = c.get("/v1/pools/logs/query", params={"format": "ndjson", "order": "desc"})
        assert r.headers["content-type"].startswith("application/x-ndjson")
        assert r.text == ('{"ts": 3, "msg": "c"}\n{"ts": 2, "msg": "b"}\n{"ts": 1, "msg": "a"}\n')


def test_logs_hold_no_secrets_and_metrics_count(server: Server) -> None:
    secret = "hush-" + server.tokens["admin"]
    with server.client("write") as c:
        assert c.get("/v1/pools", params={"token": secret}).status_code == 200
        r = c.get(
            "/v1/pools/logs/log",
            params={"aws_secret_access_key": "AKIA-s3cr3t", "X-Amz-Signature": "sig123"},
        )
        assert r.status_code == 200
        c.post("/v1/pools/logs/load", files=[("file", ("a.json", b'{"ts": 8}\n'))])
        assert c.get("/v1/pools/nope").status_code == 404
    with httpx.Client(base_url=server.url, headers={"Authorization": "Bearer guess-me"}) as c:
        assert c.get("/v1/pools").status_code == 401
    metrics = httpx.get(server.url + "/metrics").text
    assert 'lake_commits_total{operation="load"} 1.0' in metrics
    assert 'lake_errors_total{route="/v1/pools/{pool:path}",status="404"} 1.0' in metrics
    assert 'lake_request_seconds_count{method="GET",route="/v1/pools"}' in metrics
    log = server.log_text()
    assert "GET /v1/pools?token=REDACTED" in log
    assert '"POST /v1/pools/logs/load HTTP/1.1" 200' in log
    for leaked in (
        *server.tokens.values(),
        "guess-me",
        "AKIA-s3cr3t",
        "sig123",
        S3_ENV["AWS_SECRET_ACCESS_KEY"],
    ):
        assert leaked not in log
        assert leaked not in metrics


def _serve(lake_uri: str, *args: str, via_cli: bool = False) -> subprocess.Popen[bytes]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = (
        [sys.executable, "-m", "lake_cli", "--lake", lake_uri, "serve"]
        if via_cli
        else [sys.executable, "-m", "lake_service", "--lake", lake_uri]
    )
    return subprocess.Popen([*cmd, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


@pytest.mark.parametrize("lake_uri", ["local"], indirect=True)
def test_refuses_to_serve_unsafely(served_lake: Lake, tmp_path: Path) -> None:
    uri = served_lake.config.uri
    for args, status, message in [
        (
            ["--listen", "0.0.0.0:0"],
            2,
            "error: refusing to serve the lake on 0.0.0.0 without --tokens",
        ),
        (["--listen", "nohost"], 2, "error: --listen must be HOST:PORT"),
        (["--listen", "127.0.0.1:0", "--workers", "0"], 2, "error: --workers must be 1 to 64"),
        (
            ["--listen", "127.0.0.1:0", "--tls-cert", "c.pem"],
            2,
            "error: --tls-cert and --tls-key go together",
        ),
        (
            ["--listen", "127.0.0.1:0", "--tokens", str(tmp_path / "none")],
            2,
            "error: cannot read tokens file",
        ),
    ]:
        for via_cli in (False, True):
            proc = _serve(uri, *args, via_cli=via_cli)
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == status, (args, err)
            assert err.decode().startswith(message), err
    bad = tmp_path / "tokens"
    bad.write_text("tok-1 read\ntok-2 root\n")
    proc = _serve(uri, "--tokens", str(bad))
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and "line 2" in err.decode() and "tok-2" not in err.decode()
    proc = _serve(str(tmp_path / "nolake"), "--listen", "127.0.0.1:0")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and "run `lake init` first" in err.decode()


@pytest.mark.parametrize("lake_uri", ["local"], indirect=True)
def test_lake_serve_runs_the_service(served_lake: Lake) -> None:
    """``lake serve`` (the CLI) on a non-loopback address with --insecure: serves."""
    proc = _serve(served_lake.config.uri, "--listen", "0.0.0.0:0", "--insecure", via_cli=True)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().decode()
        assert line.startswith(f"serving lake {served_lake.config.uri} at http://0.0.0.0:")
        port = line.rsplit(":", 1)[1].strip()
        lake = Lake.open(LakeConfig(uri=f"http://127.0.0.1:{port}"))
        assert lake.pool("logs").read().num_rows == 3
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


@pytest.mark.parametrize("lake_uri", ["local"], indirect=True)
def test_tls(served_lake: Lake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--tls-cert/--tls-key serve HTTPS; the client verifies the certificate (SSL_CERT_FILE
    trusts a private one) and refuses one it cannot verify."""
    from tests.service.conftest import start_server, stop_server

    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    _self_signed(cert, key)
    server = start_server(
        served_lake.config.uri, tmp_path, "--tls-cert", str(cert), "--tls-key", str(key)
    )
    try:
        assert server.url.startswith("https://127.0.0.1:")
        # Files it cannot use are refused before it says it is serving (nothing on stdout).
        for args, message in (
            (["--tls-cert", str(key), "--tls-key", str(cert)], f"error: --tls-cert {key} is not"),
            (["--tls-cert", str(cert), "--tls-key", str(cert)], f"error: --tls-key {cert} is not"),
            (["--tls-cert", str(cert), "--tls-key", "nokey.pem"], "error: --tls-key nokey.pem:"),
        ):
            proc = _serve(served_lake.config.uri, "--listen", "127.0.0.1:0", *args)
            out, err = proc.communicate(timeout=60)
            assert (proc.returncode, out) == (2, b""), err
            assert err.decode().startswith(message) and err.decode().count("\n") == 1, err
        token = server.tokens["read"]
        with pytest.raises(LakeError, match="CERTIFICATE_VERIFY_FAILED"):
            Lake.open(server.url, token=token).pool("logs")
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        assert Lake.open(server.url, token=token).pool("logs").read().num_rows == 3
    finally:
        stop_server(server)


@pytest.mark.parametrize("lake_uri", ["local"], indirect=True)
def test_workers_share_the_address_and_the_metrics(served_lake: Lake, tmp_path: Path) -> None:
    """--workers 2: two processes on one socket, each with its own lake handle; every load
    lands once, /metrics counts the requests of both, their access logs stay redacted."""
    from concurrent.futures import ThreadPoolExecutor

    from tests.service.conftest import start_server, stop_server

    server = start_server(served_lake.config.uri, tmp_path, "--workers", "2")
    try:
        pool = Lake.open(server.url, token=server.tokens["write"]).pool("logs")

        def load(i: int) -> str:
            f = tmp_path / f"w{i}.ndjson"
            f.write_text(f'{{"ts": {100 + i}, "msg": "w"}}\n')
            return (
                Lake.open(server.url, token=server.tokens["write"]).pool("logs").load([str(f)]).id
            )

        with ThreadPoolExecutor(4) as ex:
            ids = list(ex.map(load, range(12)))
        assert len(set(ids)) == 12
        assert pool.read()["ts"].to_pylist() == [1, 2, 3, *range(100, 112)]
        with server.client("read") as c:
            assert c.get("/v1/pools", params={"token": "leak-me"}).status_code == 200
        metrics = httpx.get(server.url + "/metrics").text
        assert 'lake_commits_total{operation="load"} 12.0' in metrics
        log = server.log_text()
        assert "leak-me" not in log and "token=REDACTED" in log
    finally:
        stop_server(server)
    assert server.process.returncode is not None


def _self_signed(cert: Path, key: Path) -> None:
    """A two-day certificate for 127.0.0.1 and its key, as PEM files (``cryptography``, which
    moto needs anyway, so no ``openssl`` binary is assumed)."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.x509.oid import NameOID

    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=2))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(private, hashes.SHA256())
    )
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    key.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )


def test_the_access_log_redacts_credential_parameters_but_not_the_author() -> None:
    from lake_service.logs import redact

    line = (
        "POST /v1/pools/f/load?author=ann&token=t1&X-Amz-Credential=c2&oauth_code=o3"
        "&my_secret=s4&auth=a5&authorization=Bearer.a6&coauthor=a7&message=m HTTP/1.1"
    )
    assert redact(line) == (
        "POST /v1/pools/f/load?author=ann&token=REDACTED&X-Amz-Credential=REDACTED"
        "&oauth_code=REDACTED&my_secret=REDACTED&auth=REDACTED&authorization=REDACTED"
        "&coauthor=REDACTED&message=m HTTP/1.1"
    )


@pytest.mark.parametrize("lake_uri", ["local"], indirect=True)
def test_a_service_url_with_its_api_prefix_works_and_another_path_says_so(
    served_lake: Lake, tmp_path: Path
) -> None:
    """``http://host:port/v1`` (the prefix the routes show) is the service itself; any other
    path finds no route, and the error says the URL is not the service's address rather
    than a bare ``not found``."""
    from tests.service.conftest import start_server, stop_server

    server = start_server(served_lake.config.uri, tmp_path)
    try:
        token = server.tokens["read"]
        assert Lake.open(server.url + "/v1/", token=token).pool("logs").read().num_rows == 3
        with pytest.raises(LakeError) as e:
            Lake.open(server.url + "/lake", token=token).pool("logs")
        assert str(e.value).startswith(
            f"no lake service route /lake/v1/pools/logs at {server.url}/lake (HTTP 404)"
        )
    finally:
        stop_server(server)
