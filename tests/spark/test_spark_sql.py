"""``lake query --spark "SQL"`` / :func:`lake_spark.sql.spark_sql`: the same SQL text gives the
same rows on Spark as on DuckDB (:func:`lake_core.sql.run_sql`), on local disk and on moto
S3 — aggregation, a join of two pools (one namespaced), a branch, a commit, ``as_of``, a diff
of two snapshots, CTEs — prunes as the DuckDB path does, and refuses and fails the same way.

One real ``local[2]`` session for the whole run (tests/spark/conftest.py); one lake per store,
built once per module.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lake_core import Lake, LakeConfig
from lake_core.errors import BranchNotFoundError, PoolNotFoundError
from lake_core.loading import load
from lake_core.sql import SqlError, SqlRefusedError, SqlSyntaxError, run_sql
from lake_spark.sql import rewrite, spark_sql

pytestmark = pytest.mark.slow

T0 = datetime(2026, 1, 1, tzinfo=UTC)
CARRIERS = ["AA", "UA", "DL", "B6"]


def _flights(day: int, n: int = 250) -> pa.Table:
    ids = range(day * 1000, day * 1000 + n)
    return pa.table(
        {
            "id": list(ids),
            "ts": pa.array([T0 + timedelta(days=day, minutes=5 * i) for i in range(n)],
                           pa.timestamp("us", tz="UTC")),
            "carrier": [CARRIERS[(i * 7) % 4] for i in ids],
            "origin": ["JFK" if i % 3 == 0 else "LGA" for i in ids],
            "delay": [None if i % 11 == 0 else float((i * 13) % 60) - 10 for i in ids],
        }
    )  # fmt: skip


class World:
    """One lake: ``flights`` (four loads on main, one more on ``dev``) and ``ns.carriers``."""

    def __init__(self, uri: str) -> None:
        self.lake = Lake.init(LakeConfig(uri=uri))
        self.flights = self.lake.create_pool("flights", "id:asc")
        for day in range(3):
            load(self.flights, [_flights(day)])
        self.first = self.flights.resolve()  # three loads
        time.sleep(0.02)
        self.between = datetime.now(UTC)
        time.sleep(0.02)
        load(self.flights, [_flights(3)])
        self.flights.create_branch("dev")
        load(self.flights, [_flights(7, 40)], branch="dev")
        carriers = self.lake.create_pool("ns.carriers", "code")
        load(
            carriers,
            [pa.table({"code": CARRIERS, "name": ["American", "United", "Delta", "JetBlue"]})],
        )


@pytest.fixture(scope="module")
def worlds(tmp_path_factory: pytest.TempPathFactory, s3_endpoint: str) -> dict[str, World]:
    import boto3

    bucket = "spark-sql-tests"
    boto3.client("s3").create_bucket(Bucket=bucket)
    local = tmp_path_factory.mktemp("sparksql") / "lake"
    return {"local": World(str(local)), "s3": World(f"s3://{bucket}/lake")}


@pytest.fixture(params=["local", "s3"])
def world(request: pytest.FixtureRequest, worlds: dict[str, World]) -> World:
    return worlds[request.param]


def _norm(rows: list[Any]) -> list[tuple[Any, ...]]:
    def value(v: Any) -> Any:
        if isinstance(v, float):
            return round(v, 6)
        if isinstance(v, Decimal):
            return round(float(v), 6)
        if isinstance(v, datetime) and v.tzinfo is None:
            return v.replace(tzinfo=UTC)
        return v

    return [tuple(value(v) for v in (r.values() if isinstance(r, dict) else r)) for r in rows]


def _both(spark: Any, w: World, sql: str, as_of: datetime | None = None) -> list[tuple[Any, ...]]:
    """Run ``sql`` on DuckDB and on Spark; assert the same rows; return them."""
    duck = run_sql(sql, w.lake.pool, w.lake, as_of=as_of)
    expected = _norm(duck.relation.fetchall())
    query = spark_sql(spark, sql, w.lake.pool, w.lake, as_of=as_of)
    try:
        got = _norm(query.to_arrow().to_pylist())
    finally:
        query.close()
    if "ORDER BY" not in sql.upper():
        expected, got = sorted(expected, key=repr), sorted(got, key=repr)
    assert got == expected, sql
    return got


def test_same_rows_as_duckdb(spark: Any, world: World) -> None:
    w = world
    rows = _both(
        spark,
        w,
        "SELECT carrier, count(*) AS n, avg(delay) AS d, sum(delay) AS s FROM flights "
        "WHERE origin = 'JFK' GROUP BY carrier ORDER BY n DESC, carrier",
    )
    assert sum(r[1] for r in rows) == sum(1 for d in range(4) for i in range(250)
                                          if (d * 1000 + i) % 3 == 0)  # fmt: skip
    # a join of two pools, one namespaced, qualified and double-quoted columns
    joined = _both(
        spark,
        w,
        'SELECT c."name", count(*) AS n FROM flights f JOIN ns.carriers c ON f.carrier = c.code '
        "WHERE f.id BETWEEN 1000 AND 1999 AND f.delay IS NOT NULL GROUP BY c.name ORDER BY 1",
    )
    assert [r[0] for r in joined] == ["American", "Delta", "JetBlue", "United"]
    # a branch, a commit, the same pool twice (what dev has that main has not), a CTE
    assert _both(spark, w, 'SELECT count(*), max(id) FROM "flights@dev"') == [(1040, 7039)]
    assert _both(spark, w, f'SELECT count(*) FROM "flights@{w.first}"') == [(750,)]
    diff = _both(
        spark,
        w,
        'SELECT id FROM "flights@dev" EXCEPT SELECT id FROM flights ORDER BY id LIMIT 3',
    )
    assert diff == [(7000,), (7001,), (7002,)]
    _both(
        spark,
        w,
        "WITH late AS (SELECT carrier, delay FROM flights WHERE delay > 40) "
        "SELECT carrier, count(*) FROM late GROUP BY carrier ORDER BY carrier",
    )
    # timestamps (UTC instants on both engines), an empty pool
    _both(spark, w, "SELECT carrier, min(ts), max(ts) FROM flights GROUP BY carrier")
    if "empty" not in [str(p.name) for p in w.lake.pools()]:
        w.lake.create_pool("empty", "k")
    assert _both(spark, w, "SELECT count(*) FROM empty") == [(0,)]
    # --as-of applies to every pool of the query
    assert _both(spark, w, "SELECT count(*) FROM flights", as_of=w.between) == [(750,)]


def test_metadata_tables_and_views(spark: Any, world: World) -> None:
    w = world
    objects = _both(spark, w, "SELECT count(*), sum(count) FROM flights$objects")
    assert objects == [(4, 1000)]
    commits = _both(spark, w, 'SELECT message, adds FROM "flights@dev$commits" ORDER BY date')
    assert len(commits) == 5  # three loads, one more, then one on dev
    _both(spark, w, "SELECT name FROM flights$branches ORDER BY name")
    _both(spark, w, "SELECT name FROM lake$pools ORDER BY name")
    # a metadata table joined with the pool it describes
    _both(
        spark,
        w,
        "SELECT o.id, count(*) FROM flights$objects o JOIN flights f "
        "ON f.id BETWEEN o.min AND o.max GROUP BY o.id ORDER BY o.id",
    )
    if not any(v.name == "jfk" for v in w.lake.views()):
        w.lake.create_view(
            "jfk",
            "SELECT carrier, count(*) AS n FROM flights WHERE origin = 'JFK' GROUP BY carrier",
        )
        w.lake.create_view("ns.busy", "SELECT carrier FROM jfk WHERE n > 80")
    assert len(_both(spark, w, "SELECT * FROM jfk ORDER BY carrier")) == 4
    _both(spark, w, "SELECT count(*) FROM ns.busy")


def test_pruning_matches_the_duckdb_plan(spark: Any, world: World) -> None:
    w = world
    sql = "SELECT count(*) FROM flights WHERE id >= 2000 AND id < 2100"
    duck = run_sql(sql, w.lake.pool, w.lake)
    assert duck.relation.fetchall() == [(100,)]
    query = spark_sql(spark, sql, w.lake.pool, w.lake)
    try:
        assert query.to_arrow().to_pylist()[0] == {"count(1)": 100}
        stats = query.stats()["flights"]
    finally:
        query.close()
    planned = duck.stats()["flights"]
    assert stats["objects_total"] == planned["objects_total"] == 4
    assert stats["objects_read"] == planned["objects_read"] == 1
    assert stats["row_groups_read"] == planned["row_groups_read"]
    assert stats["rows_read"] == 250
    assert 0 < stats["bytes_read"] <= planned["bytes_read"] * 2


def test_refusals_and_errors_are_the_duckdb_paths(spark: Any, world: World) -> None:
    w = world
    before = w.flights.resolve()
    cases: list[tuple[str, type[Exception], str]] = [
        ("DELETE FROM flights", SqlRefusedError, "DELETE"),
        ("CREATE TABLE x AS SELECT 1", SqlRefusedError, "read-only"),
        ("SELECT * FROM read_parquet('/etc/passwd')", SqlRefusedError, "read_parquet"),
        ("SELEC 1", SqlSyntaxError, "position 1"),
        ("SELECT * FROM nope", PoolNotFoundError, "pool not found"),
        ('SELECT * FROM "flights@nobranch"', BranchNotFoundError, "nobranch"),
    ]
    for sql, kind, text in cases:
        with pytest.raises(kind, match=text) as duck:
            run_sql(sql, w.lake.pool, w.lake)
        with pytest.raises(kind, match=text) as on_spark:
            spark_sql(spark, sql, w.lake.pool, w.lake)
        assert str(on_spark.value) == str(duck.value)
    with pytest.raises(SqlError, match="nope_column") as err:
        spark_sql(spark, "SELECT nope_column FROM flights", w.lake.pool, w.lake)
    assert "\n" not in str(err.value)
    assert w.flights.resolve() == before
    assert not [t for t in spark.catalog.listTables() if t.name.startswith("lake_sql_")]


def test_progress_only_on_a_terminal_and_never_for_json() -> None:
    from lake_cli.commands.spark import progress_conf

    key = "spark.ui.showConsoleProgress"
    assert progress_conf("table", True)[key] == "true"
    assert progress_conf("csv", True)[key] == "true"
    assert progress_conf("json", True)[key] == "false"
    assert progress_conf("table", False)[key] == "false"


def test_rewrite_keeps_bindings_and_text() -> None:
    """Table references become the temporary views under the names the query binds them by;
    everything else (string literals, non-ASCII text, CTE names) stays as written."""
    import duckdb

    sql = (
        "WITH c AS (SELECT 1 AS x) SELECT 'é ns.flights', f.id, \"flights@dev\".id "
        'FROM ns.flights AS f, "flights@dev", c, flights$objects o(a, b)'
    )
    tree = json.loads(duckdb.execute("SELECT json_serialize_sql(?)", [sql]).fetchall()[0][0])
    views = {"ns.flights": "v1", "flights@dev": "v2", "flights$objects": "v3", "c": "v4"}
    out = rewrite(sql, tree["statements"][0], views, frozenset({"c"}))
    assert out == (
        "WITH c AS (SELECT 1 AS x) SELECT 'é ns.flights', f.id, \"flights@dev\".id "
        "FROM `v1` AS `f`, `v2` AS `flights@dev`, c, `v3` AS `o`(`a`, `b`)"
    )


def test_cli_query_spark_prints_what_the_duckdb_path_prints(
    spark: Any,
    worlds: dict[str, World],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    """In-process (the test session's Spark): same JSON records, --stats per pool, and one
    ``error:`` line with exit 1 for a refused statement or an unknown column."""
    from collections.abc import Iterator
    from contextlib import contextmanager

    from lake_cli import main
    from lake_cli.commands import spark as cli_spark

    @contextmanager
    def shared(master: str | None, what: str, conf: dict[str, str]) -> Iterator[Any]:
        assert master in (None, "spark://nowhere:7077") and what == "query"
        assert conf == {"spark.ui.showConsoleProgress": "false"}  # stderr is no terminal here
        yield spark

    monkeypatch.setattr(cli_spark, "spark_session_for", shared)
    uri = worlds["local"].lake.config.uri
    sql = ("SELECT carrier, count(*) AS n FROM flights WHERE id < 1100 "
           "GROUP BY carrier ORDER BY carrier")  # fmt: skip
    assert main(["--lake", uri, "query", sql, "-f", "json", "--stats"]) == 0
    duck = capsys.readouterr()
    assert main(["--lake", uri, "query", "--spark", sql, "-f", "json", "--stats"]) == 0
    on_spark = capsys.readouterr()
    assert on_spark.out == duck.out and len(on_spark.out.splitlines()) == 4
    duck_stats, spark_stats = json.loads(duck.err), json.loads(on_spark.err)
    assert spark_stats["flights"]["objects_read"] == duck_stats["flights"]["objects_read"] == 2
    out = tmp_path / "r.csv"
    args = ["query", "--spark-master", "spark://nowhere:7077", sql, "-f", "csv", "-o", str(out)]
    assert main(["--lake", uri, *args]) == 0
    assert out.read_text().splitlines()[0] == "carrier,n"
    with pytest.raises(SystemExit) as usage:  # a usage error, as argparse raised them
        main(["--lake", uri, "query", "--spark", "-p", "flights"])
    assert usage.value.code == 2
    assert capsys.readouterr().err.startswith("error: --spark runs SQL")
    for bad, text in [("DROP TABLE flights", "refused"), ("SELECT zzz FROM flights", "zzz")]:
        assert main(["--lake", uri, "query", "--spark", bad]) == 1
        err = capsys.readouterr().err
        assert err.startswith("error: ") and text in err and len(err.splitlines()) == 1
