"""``lake query "SQL"`` on local disk and moto S3: formats, ``--stats`` pruning counts (objects
and row groups), ``--as-of`` and refs, the errors (one ``error:`` line, exit 1, nothing in the
lake changed), and ``-p`` unchanged beside it."""

from __future__ import annotations

import contextlib
import io
import json
import uuid
from collections.abc import Callable
from pathlib import Path

import boto3
import pyarrow.parquet as pq
import pytest

from lake_cli import main
from lake_core import Lake, LakeConfig

DAY_ROWS = 1024  # the writer's smallest row group


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def build_lake(uri: str, folder: Path, cli: Callable[..., int]) -> list[str]:
    """Pool ``events`` keyed by day: one object of five days in five row groups (one day
    each), then three one-day objects, one commit each; pool ``names`` for joins. ``cli``
    runs one command and returns its exit code. Returns the ``--lake`` arguments."""
    L = ["--lake", uri]
    assert cli(*L, "init") == 0
    assert cli(*L, "create", "events", "--orderby", "day", "--seek-stride", "1") == 0
    first = folder / "first.ndjson"
    first.write_text(
        "".join(
            json.dumps({"day": d, "user": f"u{i % 7}", "n": i}) + "\n"
            for d in range(5)
            for i in range(DAY_ROWS)
        )
    )
    assert cli(*L, "load", "-p", "events", str(first), "-m", "five days") == 0
    for d in range(5, 8):
        one = folder / f"d{d}.ndjson"
        one.write_text(json.dumps({"day": d, "user": "late", "n": d}) + "\n")
        assert cli(*L, "load", "-p", "events", str(one), "-m", f"day {d}") == 0
    assert cli(*L, "create", "names") == 0
    names = folder / "names.ndjson"
    names.write_text(
        "".join(json.dumps({"user": f"u{i}", "name": f"N{i}"}) + "\n" for i in range(7))
    )
    assert cli(*L, "load", "-p", "names", str(names)) == 0
    return L


@pytest.fixture
def lake_args(lake_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """A fresh lake of :func:`build_lake` per test."""
    return build_lake(lake_uri, tmp_path, lambda *args: run(capsys, *args)[0])


@pytest.fixture(scope="module", params=["local", "s3"])
def refusing_lake(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> str:
    """One lake of :func:`build_lake` per store for the module's error cases, which change
    nothing in it (each checks its own before and after; a case that did change it fails)."""
    folder = tmp_path_factory.mktemp("query-errors")
    if request.param == "local":
        uri = str(folder / "lake")
    else:
        endpoint = request.getfixturevalue("s3_endpoint")
        bucket = f"t-{uuid.uuid4().hex[:20]}"
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
        uri = f"s3://{bucket}/lake"

    def quiet(*args: str) -> int:  # no capsys at module scope: keep the output out of tests'
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
            return main(list(args))

    build_lake(uri, folder, quiet)
    return uri


def test_aggregate_as_json_and_csv(
    lake_args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    sql = "SELECT day, count(*) AS n FROM events GROUP BY day ORDER BY day"
    code, out, err = run(capsys, *lake_args, "query", sql, "-f", "json")
    assert (code, err) == (0, "")
    got = [json.loads(line) for line in out.splitlines()]
    assert got == [{"day": d, "n": DAY_ROWS if d < 5 else 1} for d in range(8)]
    code, out, _ = run(capsys, *lake_args, "query", sql, "-f", "csv")
    assert out.splitlines()[:2] == ["day,n", f"0,{DAY_ROWS}"]
    code, out, _ = run(capsys, *lake_args, "query", sql)
    assert out.split()[:2] == ["day", "n"]


def test_stats_show_object_and_row_group_pruning(
    lake_args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys,
        *lake_args,
        "query",
        "SELECT count(*) AS c FROM events WHERE day = 3",
        "--stats",
        "-f",
        "json",
    )
    assert code == 0 and json.loads(out) == {"c": DAY_ROWS}
    stats = json.loads(err)["events"]
    assert stats["objects_total"] == 4
    assert stats["objects_read"] == 1
    assert stats["row_groups_read"] == 1
    assert stats["rows_read"] == DAY_ROWS
    code, out, err = run(
        capsys,
        *lake_args,
        "query",
        "SELECT count(*) AS c FROM events WHERE day >= 6",
        "--stats",
        "-f",
        "json",
    )
    assert json.loads(out) == {"c": 2}
    assert json.loads(err)["events"] == {
        **json.loads(err)["events"],
        "objects_read": 2,
        "row_groups_read": 2,
        "rows_read": 2,
    }
    code, _, err = run(capsys, *lake_args, "query", "SELECT count(*) FROM events", "--stats")
    assert json.loads(err)["events"]["row_groups_read"] == 5 + 3


def test_join_across_pools_and_snapshots(
    lake_args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    sql = (
        "SELECT name, count(*) AS c FROM events e JOIN names USING (user) "
        "WHERE day = 1 GROUP BY name ORDER BY name"
    )
    code, out, err = run(capsys, *lake_args, "query", sql, "-f", "json", "--stats")
    assert code == 0
    assert [json.loads(x)["name"] for x in out.splitlines()] == [f"N{i}" for i in range(7)]
    stats = json.loads(err)
    assert set(stats) == {"events", "names", "answered_from"}  # per table, then the pools read
    assert stats["answered_from"] == ["events", "names"]
    code, out, _ = run(capsys, *lake_args, "log", "-p", "events", "-f", "json")
    commits = [json.loads(x)["id"] for x in out.splitlines()]
    older = commits[2]  # after "day 5": days 0..5
    diff = f'SELECT day FROM events EXCEPT SELECT day FROM "events@{older}" ORDER BY day'
    code, out, _ = run(capsys, *lake_args, "query", diff, "-f", "csv")
    assert (code, out.splitlines()) == (0, ["day", "6", "7"])


def test_as_of_applies_to_every_pool(
    lake_args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(capsys, *lake_args, "log", "-p", "events", "-f", "json")
    dates = [json.loads(x)["date"] for x in out.splitlines()]
    code, out, err = run(
        capsys,
        *lake_args,
        "query",
        "SELECT max(day) AS m FROM events",
        "--as-of",
        dates[-1],
        "-f",
        "json",
    )
    assert (code, json.loads(out)) == (0, {"m": 4})
    code, out, err = run(
        capsys, *lake_args, "query", "SELECT count(*) FROM names", "--as-of", dates[-1]
    )
    assert code == 1 and err.startswith("error: ")  # names had no commit then


def test_parquet_output(
    lake_args: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out_file = tmp_path / "out.parquet"
    code, out, err = run(
        capsys,
        *lake_args,
        "query",
        "SELECT user, sum(n) AS s FROM events GROUP BY user",
        "-f",
        "parquet",
        "-o",
        str(out_file),
    )
    assert (code, out, err) == (0, "", "")
    assert pq.read_table(out_file).num_rows == 8


def _listing(uri: str) -> list[tuple[str, int]]:
    lake = Lake.open(LakeConfig(uri=uri))
    return sorted((o.key, o.size) for o in lake.store.list(""))


@pytest.mark.parametrize(
    ("sql", "message"),
    [
        (
            "SELECT * FROM events WHER day = 1",
            'error: SQL syntax error at or near "day" at position 27',
        ),
        ("SELECT * FROM nope", "error: nope: pool not found"),
        ("SELECT nosuch FROM events", 'error: Binder Error: Referenced column "nosuch" not found'),
        ("DELETE FROM events", "error: DELETE statements are refused"),
        ("INSERT INTO events VALUES (1, 'x', 2)", "error: INSERT statements are refused"),
        ("CREATE TABLE x AS SELECT 1", "error: CREATE statements are refused"),
        ("COPY (SELECT 1) TO 'x.csv'", "error: COPY statements are refused"),
        ("ATTACH 'x.db'", "error: ATTACH statements are refused"),
        ("PRAGMA version", "error: PRAGMA statements are refused"),
        ("INSTALL httpfs", "error: INSTALL and LOAD statements are refused"),
        ("SET threads = 1", "error: SET statements are refused"),
        ("SELECT * FROM read_csv('/etc/passwd')", "error: table function read_csv() is refused"),
        (
            "SELECT * FROM read_parquet('x.parquet')",
            "error: table function read_parquet() is refused",
        ),
        ('SELECT * FROM "events@nobranch"', "error: nobranch: branch not found"),
    ],
)
def test_errors_are_one_line_exit_1_and_change_nothing(
    refusing_lake: str, capsys: pytest.CaptureFixture[str], sql: str, message: str
) -> None:
    before = _listing(refusing_lake)
    code, out, err = run(capsys, "--lake", refusing_lake, "query", sql)
    assert (code, out) == (1, "")
    assert err.startswith(message) and err.count("\n") == 1, err
    assert _listing(refusing_lake) == before


def test_the_engine_reader_makes_a_late_stream_error_one_line() -> None:
    """A stream that fails after its first batch, as DuckDB's Arrow stream does (an
    ``OSError`` carrying DuckDB's multi-line message): the batches before it pass through,
    then the error is the engine's one-line SqlError."""
    import pyarrow as pa

    from lake_cli.sqlquery import _engine_reader
    from lake_core.sql import SqlError

    schema = pa.schema([("k", pa.int64())])

    def batches():  # type: ignore[no-untyped-def]
        yield pa.record_batch([pa.array([1, 2])], schema=schema)
        raise OSError("Conversion Error: Could not convert string 'x' to INT32\n\nLINE 1: …")

    reader = _engine_reader(pa.RecordBatchReader.from_batches(schema, batches()))
    assert reader.read_next_batch().num_rows == 2
    with pytest.raises(SqlError) as e:
        reader.read_next_batch()
    assert str(e.value) == "Conversion Error: Could not convert string 'x' to INT32"


LATE_FAILURE = "SELECT k, CASE WHEN k >= 150000 THEN CAST('x' AS INT) END AS e FROM big"


def test_an_engine_error_in_a_late_batch_is_one_line_and_leaves_no_output(
    lake: Lake, lake_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """DuckDB raises through Arrow's stream (not as ``duckdb.Error``) when a batch after the
    first fails: still one ``error:`` line, exit 1; ``-o FILE`` is written to a temporary
    name and renamed only on success, so a failed query leaves an existing file as it was
    and creates none. (Whether the failing batch comes after printed ones depends on DuckDB's
    threads: on a busy machine another thread may fail first; the error is one line either
    way, and :func:`test_the_engine_reader_makes_a_late_stream_error_one_line` pins the
    late case.)"""
    import pyarrow as pa

    lake.create_pool("big", "k:asc").load(
        pa.table({"k": list(range(200_000)), "s": ["x"] * 200_000})
    )
    L = ["--lake", lake_uri]
    code, out, err = run(capsys, *L, "query", LATE_FAILURE, "-f", "csv")
    assert code == 1
    assert err == "error: Conversion Error: Could not convert string 'x' to INT32\n"
    kept = tmp_path / "kept.csv"
    kept.write_text("earlier result\n")
    new = tmp_path / "new.json"
    for fmt, target in (("csv", kept), ("json", new), ("parquet", tmp_path / "new.parquet")):
        code, out, err = run(capsys, *L, "query", LATE_FAILURE, "-f", fmt, "-o", str(target))
        assert (code, out) == (1, ""), err
        assert err.startswith("error: Conversion Error") and err.count("\n") == 1, err
    assert kept.read_text() == "earlier result\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name != "lake") == ["kept.csv"]
    # Success replaces the file and keeps its mode.
    kept.chmod(0o640)
    code, _, err = run(
        capsys, *L, "query", "SELECT count(*) AS n FROM big", "-f", "csv", "-o", str(kept)
    )
    assert (code, err) == (0, "")
    assert kept.read_text() == "n\n200000\n"
    assert kept.stat().st_mode & 0o777 == 0o640


def test_pool_mode_is_unchanged(lake_args: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(
        capsys, *lake_args, "query", "-p", "events", "--where", "day = 6", "-f", "json", "--stats"
    )
    assert code == 0
    assert [json.loads(x) for x in out.splitlines()] == [{"day": 6, "user": "late", "n": 6}]
    assert json.loads(err) == {
        "objects_total": 4,
        "objects_read": 1,
        "row_groups_read": 1,
        "rows_read": 1,
        "bytes_read": json.loads(err)["bytes_read"],
    }
    with pytest.raises(SystemExit) as usage:
        main([*lake_args, "query", "SELECT 1", "--where", "day = 1"])
    assert usage.value.code == 2
    assert "--where goes with -p POOL" in capsys.readouterr().err


def test_help_shows_sql_examples(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["query", "--help"])
    out = capsys.readouterr().out
    assert 'lake query "SELECT' in out and "lake query -p logs" in out


def test_progress_goes_to_stderr_and_duckdb_prints_none(
    lake_args: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import io
    import sys
    import time

    from lake_cli.progress import engine_progress
    from lake_core.sql import run_sql

    err = io.StringIO()
    monkeypatch.setattr(sys, "stderr", err)
    with engine_progress(lambda: 42.0, True):
        time.sleep(1.5)  # the bar waits a second before it draws
    assert "query" in err.getvalue() and "42%" in err.getvalue()
    lake = Lake.open(LakeConfig(uri=lake_args[1]))
    run = run_sql("SELECT count(*) FROM events", lake.pool, lake, progress=True)
    settings = run.connection.execute(
        "SELECT current_setting('enable_progress_bar'), current_setting('enable_progress_bar_print')"
    ).fetchall()
    assert settings == [(True, False)]  # tracked for the poller, never printed on stdout
    quiet = run_sql("SELECT 1", lake.pool, lake)
    assert quiet.connection.execute("SELECT current_setting('enable_progress_bar')").fetchall() == [
        (False,)
    ]
