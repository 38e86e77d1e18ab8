"""The ``lake`` command against a real service (local disk and moto S3 behind it): the same
stdout, stderr and exit status as against the lake itself, for every command the service
serves; a refused command changes nothing."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lake_cli import main
from tests.service.conftest import ROOT, Server, remote

KSUID = re.compile(r"\b[0-9A-Za-z]{27}\b")


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def same(
    capsys: pytest.CaptureFixture[str], server: Server, *args: str, scope: str = "admin"
) -> tuple[int, str, str]:
    """Run ``args`` on the service and on the lake directly: identical results."""
    there = run(capsys, *remote(server, scope), *args)
    here = run(capsys, "--lake", server.lake_uri, *args)
    assert there == here, args
    return there


def test_reads_print_what_the_lake_prints(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    for args in (
        ("ls",),
        ("ls", "-f", "json"),
        ("query", "-p", "logs"),
        ("query", "-p", "logs", "-f", "json", "--where", "ts >= 2", "--columns", "msg"),
        ("query", "-p", "logs", "-f", "csv", "--order", "desc", "--limit", "2"),
        ("log", "-p", "logs"),
        ("log", "-p", "logs", "-f", "json"),
        ("objects", "-p", "logs"),
        ("objects", "-p", "logs", "-f", "json"),
        ("branch", "-p", "logs"),
        ("schema", "-p", "logs"),
        ("schema", "-p", "logs", "-f", "json"),
        ("catalog", "log"),
        ("catalog", "log", "-f", "json"),
        ("cleanup", "-p", "logs", "--dry-run", "--grace", "0"),
    ):
        code, out, _ = same(
            capsys, server, *args, scope="admin" if args[0] == "cleanup" else "read"
        )
        assert code == 0 and out, args
    code, _, err = same(capsys, server, "query", "-p", "logs", "--stats", "-f", "json")
    assert json.loads(err)["rows_read"] == 3
    for args in (
        ("query", "SELECT msg, ts * 2 AS t FROM logs ORDER BY ts DESC", "-f", "json"),
        ("query", "SELECT count(*) AS n FROM logs WHERE ts >= 2", "--stats", "--explain"),
        ("query", 'SELECT id, message FROM "logs$commits"', "-f", "csv"),
        ("query", "SELECT * FROM logs", "--no-derived", "--explain", "-f", "json"),
    ):
        code, out, err = same(capsys, server, *args, scope="read")
        assert code == 0 and out, (args, err)
    tip = run(capsys, "--lake", server.lake_uri, "log", "-p", "logs", "-f", "json")[1]
    date = json.loads(tip.splitlines()[0])["date"]
    assert same(capsys, server, "query", "-p", "logs", "--as-of", date, "-f", "csv")[0] == 0
    code, _, err = same(capsys, server, "query", "-p", "logs", "--as-of", "2001-01-01T00:00:00Z")
    assert code == 1 and err.startswith("error: no commit on main at or before")


def test_parquet_output_and_create(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import pyarrow.parquet as pq

    there, here = tmp_path / "there.parquet", tmp_path / "here.parquet"
    assert (
        run(
            capsys,
            *remote(server, "read"),
            "query",
            "-p",
            "logs",
            "-f",
            "parquet",
            "-o",
            str(there),
        )[0]
        == 0
    )
    assert (
        run(
            capsys,
            "--lake",
            server.lake_uri,
            "query",
            "-p",
            "logs",
            "-f",
            "parquet",
            "-o",
            str(here),
        )[0]
        == 0
    )
    assert pq.read_table(there).equals(pq.read_table(here))
    args = ("create", "ns1.events", "--orderby", "user,ts:asc", "--target-size", "64MB")
    assert run(capsys, *remote(server, "write"), *args) == (0, "pool ns1.events created\n", "")
    assert (
        run(capsys, "--lake", server.lake_uri, *args)[2]
        == "error: pool 'ns1.events' already exists\n"
    )
    code, out, _ = same(capsys, server, "ls", "-f", "json")
    events = [json.loads(line) for line in out.splitlines() if "events" in line][0]
    assert (
        events["key"] == "user,ts"
        and events["order"] == "asc"
        and events["target_size"] == 64 * 1024**2
    )
    code, _, err = run(
        capsys, *remote(server, "write"), "create", "t", "--layout", "otree", "--index", "a,b"
    )
    assert code == 1 and "an OTree pool layout is not available through the lake service" in err


def test_errors_print_what_the_lake_prints(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    cases = [
        (("query", "-p", "nope"), 1, "error: nope: pool not found\n"),
        (("log", "-p", "logs@nobranch"), 1, None),
        (("log", "-p", "logs@0ujtsYcgvSTl8PAuAdqWYSMnLOv"), 1, None),
        (
            ("query", "-p", "logs", "--where", "zz > 1"),
            2,
            "error: unknown column 'zz' in --where\n",
        ),
        (("query", "-p", "../etc"), 2, None),
        (("query", "SELECT nope FROM logs"), 1, None),
        (("query", "SELECT FROM WHERE"), 1, None),
        (("query", "DELETE FROM logs"), 1, None),
        (("query", "SELECT * FROM missing"), 1, None),
        (("query", "SELECT CAST(msg AS INTEGER) FROM logs"), 1, None),
        (("revert", "-p", "logs", "0ujtsYcgvSTl8PAuAdqWYSMnLOv"), 1, None),
        (("merge", "-p", "logs", "main", "--into", "main"), 2, None),
        (("branch", "-p", "logs", "-d", "main"), None, None),
        (("delete", "-p", "logs", "0ujtsYcgvSTl8PAuAdqWYSMnLOv"), 1, None),
    ]
    before = run(capsys, "--lake", server.lake_uri, "log", "-p", "logs", "-f", "json")
    for args, status, line in cases:
        code, out, err = same(capsys, server, *args)
        assert code != 0 and err.startswith("error: ") and err.count("\n") == 1, (args, err)
        if status is not None:
            assert code == status, args
        if line is not None:
            assert err == line
    assert run(capsys, "--lake", server.lake_uri, "log", "-p", "logs", "-f", "json") == before


def test_writes_through_the_service(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "more.ndjson"
    data.write_text('{"ts": 10, "msg": "x"}\n{"ts": 11, "msg": "y"}\n')
    r = remote(server, "write")
    code, out, err = run(
        capsys, *r, "load", "-p", "logs", str(data), "-m", "remote", "--user", "ann"
    )
    assert code == 0, err
    assert out.splitlines()[0] == "loaded 2 rows in 1 object"
    loaded = out.split()[-2]
    code, out, _ = run(capsys, "--lake", server.lake_uri, "log", "-p", "logs", "-f", "json")
    first = json.loads(out.splitlines()[0])
    assert first["id"] == loaded and first["author"] == "ann" and first["message"] == "remote"

    assert run(capsys, *r, "branch", "-p", "logs", "dev")[1] == f"branch dev created at {loaded}\n"
    assert run(capsys, *r, "load", "-p", "logs@dev", str(data))[0] == 0
    code, out, _ = run(capsys, *r, "merge", "-p", "logs", "dev", "--into", "main")
    assert code == 0 and out.startswith("merged dev into main: added 2 rows in 1 object")
    merged = out.split()[-2]
    code, out, _ = run(capsys, *r, "revert", "-p", "logs", merged)
    assert code == 0 and out.startswith(f"reverted {merged}: added 0 rows")
    code, out, _ = run(capsys, *r, "delete", "-p", "logs", "--where", "ts = 10")
    assert code == 0 and out.startswith("deleted 1 row in 1 object")
    assert run(capsys, *r, "delete", "-p", "logs", "--where", "ts = 999")[1] == "no rows matched\n"
    code, _, err = run(capsys, *r, "delete", "-p", "logs", "--where", "ts = 999", "--strict")
    assert code == 1 and "empty transaction" in err
    assert run(capsys, *r, "branch", "-p", "logs", "-d", "dev")[1] == "branch dev deleted\n"
    code, out, _ = run(capsys, *remote(server, "admin"), "compact", "-p", "logs")
    assert code == 0 and out.splitlines()[-1].endswith(" committed")
    assert (
        run(capsys, *remote(server, "admin"), "compact", "-p", "logs")[1] == "nothing to compact\n"
    )
    # The rows are what the same commands would have left locally: 1, 2, 3 and 11.
    code, out, _ = run(capsys, "--lake", server.lake_uri, "query", "-p", "logs", "-f", "json")
    assert [json.loads(line)["ts"] for line in out.splitlines()] == [1, 2, 3, 11]


def test_load_from_stdin_and_bad_input(server: Server, tmp_path: Path) -> None:
    env = {"PYTHONPATH": str(ROOT), "LAKE_TOKEN": server.tokens["write"]}
    import os

    env = {**os.environ, **env}
    cmd = [sys.executable, "-m", "lake_cli", "--lake", server.url, "load", "-p", "logs", "-"]
    done = subprocess.run(cmd, input=b'{"ts": 50}\n', capture_output=True, env=env)
    assert done.returncode == 0, done.stderr
    assert done.stdout.decode().endswith(" committed\n")
    bad = tmp_path / "bad.json"
    bad.write_text('{"ts": 1}\n{"ts": \n')
    cmd[-1] = str(bad)
    done = subprocess.run(cmd, capture_output=True, env=env)
    assert done.returncode == 1
    err = done.stderr.decode()
    assert err.startswith("error: ") and str(bad) in err and "line 2" in err, err
    cmd[-1] = str(tmp_path / "missing.json")
    done = subprocess.run(cmd, capture_output=True, env=env)
    assert done.returncode == 2 and done.stderr.decode().startswith("error: cannot read ")


def test_scopes_refuse_and_change_nothing(
    server: Server, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "a.json"
    data.write_text('{"ts": 7}\n')
    before = run(capsys, "--lake", server.lake_uri, "log", "-p", "logs", "-f", "json")
    code, _, err = run(capsys, *remote(server, "read"), "load", "-p", "logs", str(data))
    assert (code, err) == (1, "error: this token's scope is read; write needed\n")
    code, _, err = run(capsys, *remote(server, "write"), "compact", "-p", "logs")
    assert (code, err) == (1, "error: this token's scope is write; admin needed\n")
    code, _, err = run(capsys, "--lake", server.url, "--token", "wrong", "ls")
    assert (code, err) == (1, "error: invalid token\n")
    code, _, err = run(capsys, "--lake", server.url, "ls")
    assert code == 1 and err.startswith("error: missing bearer token")
    assert "wrong" not in server.log_text()
    assert run(capsys, "--lake", server.lake_uri, "log", "-p", "logs", "-f", "json") == before


def test_what_the_service_does_not_serve_fails_clearly(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = run(capsys, *remote(server), "verify", "-p", "logs")
    assert code == 1
    assert err == (
        "error: lake verify is not available through the lake service; run it with --lake set "
        "to the lake's own location (docs/service.md lists what the service serves)\n"
    )
    # A command of a group is named whole, never by the Python method the service lacks.
    code, _, err = run(capsys, *remote(server), "index", "apply", "-p", "logs", "by_user")
    assert code == 1
    assert err.startswith("error: lake index apply is not available through the lake service")


@pytest.mark.parametrize("lake_uri", ["local"], indirect=True)
def test_a_read_failing_mid_stream_is_the_lakes_error(
    server: Server, capsys: pytest.CaptureFixture[str]
) -> None:
    """An object found damaged while the records stream (the response has started) ends the
    Arrow stream with the error: the CLI prints the lake's own line, never a short result."""
    import pyarrow as pa

    from lake_core import Lake

    pool = Lake.open(server.lake_uri).pool("logs")
    (obj,) = pool.snapshot(pool.resolve()).objects.values()
    path = Path(server.lake_uri) / pool.layout.data(obj.id)
    path.write_bytes(path.read_bytes() + b"\0")  # a size its commit did not record
    code, out, err = same(capsys, server, "query", "-p", "logs", "-f", "json")
    assert code == 1 and out == "" and err.startswith(f"error: data object {obj.id} of pool logs")
    with server.client("read") as c, c.stream("GET", "/v1/pools/logs/query") as r:
        assert r.status_code == 200  # the error came after the response started
        reader = pa.ipc.open_stream(r.read())
        _, meta = reader.read_next_batch_with_custom_metadata()
        assert json.loads(meta[b"lake.error"])["type"] == "CorruptDataObjectError"
