"""Metadata tables and views through SQL (``Lake.sql``, ``lake query "SQL"``): the same rows
as lake_core.introspection and the CLI listings; refs, ``--as-of``, views (nested, across a
catalog rollback, with ``--as-of``), cycles refused. Local disk and moto S3."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pyarrow as pa
import pytest

from lake_cli import main
from lake_core import Lake, LakeConfig
from lake_core.catalog.proto import objects_pb2
from lake_core.errors import LakeError

DAY = datetime(2026, 1, 5, tzinfo=UTC)


def rows(n: int, start: int, carrier: str) -> pa.Table:
    return pa.table(
        {
            "ts": pa.array(
                [DAY + timedelta(hours=6 * (start + i)) for i in range(n)],
                pa.timestamp("us", "UTC"),
            ),
            "carrier": [carrier] * n,
            "delay": list(range(n)),
        }
    )


@pytest.fixture
def lake(lake_uri: str) -> Lake:
    lake = Lake.init(LakeConfig(uri=lake_uri, user="tester"))
    pool = lake.create_pool("flights", "ts:desc", partition_by="day(ts)")
    pool.load(rows(4, 0, "AA"), message="first")
    pool.load(rows(4, 4, "BA"), message="second")
    pool.create_branch("dev")
    pool.load(rows(2, 8, "CX"), branch="dev", message="on dev")
    lake.create_pool("ops.logs", "host")
    return lake


def cli(capsys: pytest.CaptureFixture[str], lake: Lake, *args: str) -> list[dict[str, object]]:
    assert main(["--lake", lake.config.uri, *args]) == 0, capsys.readouterr().err
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


def test_metadata_tables_in_sql(lake: Lake, capsys: pytest.CaptureFixture[str]) -> None:
    objects = lake.metadata("flights", "objects")
    got = lake.sql("SELECT count(*) AS n, sum(size) AS bytes FROM flights$objects").fetchall()
    assert got == [(objects.num_rows, sum(objects.column("size").to_pylist()))]
    dev = lake.sql('SELECT id, message, distance FROM "flights@dev$commits" ORDER BY distance')
    assert [r[1] for r in dev.fetchall()] == ["on dev", "second", "first"]
    listed = cli(capsys, lake, "log", "-p", "flights@dev", "-f", "json")
    assert [r[0] for r in dev.fetchall()] == [c["id"] for c in listed]
    # Struct stats are queryable; a timestamp bound compares with a timestamp literal.
    late = lake.sql(
        "SELECT id FROM flights$objects WHERE max >= TIMESTAMP '2026-01-06 00:00:00' "
        "AND stats.delay.max >= 0 ORDER BY id"
    ).fetchall()
    assert [r[0] for r in late] == sorted(
        o["id"] for o in objects.to_pylist() if o["max"] >= DAY + timedelta(days=1)
    )
    pools = cli(
        capsys, lake, "query", "SELECT name, key, catalog_version FROM lake$pools", "-f", "json"
    )
    assert [p["name"] for p in pools] == ["flights", "ops.logs"]
    assert pools[0]["key"] == ["ts"]
    parts = cli(capsys, lake, "query", "SELECT * FROM flights$partitions", "-f", "json")
    assert parts == cli(capsys, lake, "partitions", "-p", "flights", "-f", "json")
    branches = lake.sql("SELECT name, tip FROM flights$branches").fetchall()
    assert [{"name": n, "commit": t} for n, t in branches] == cli(
        capsys, lake, "branch", "-p", "flights", "-f", "json"
    )
    # A join of a pool and its objects table.
    joined = lake.sql(
        "SELECT count(*) FROM flights f JOIN flights$objects o ON f.ts BETWEEN o.min AND o.max"
    ).fetchall()
    assert joined == [(8,)]


def test_as_of_applies_to_metadata_tables(lake: Lake, capsys: pytest.CaptureFixture[str]) -> None:
    first = lake.metadata("flights", "commits").to_pylist()[-1]
    when = first["date"].isoformat()
    got = cli(
        capsys, lake, "query", "SELECT id FROM flights$commits", "--as-of", when, "-f", "json"
    )
    assert [r["id"] for r in got] == [first["id"]]
    pools = lake.sql("SELECT name FROM lake$pools", as_of=lake.catalog.snapshot(1).created_at)
    assert pools.fetchall() == [("flights",)]


def test_views_in_sql(lake: Lake, capsys: pytest.CaptureFixture[str]) -> None:
    lake.create_view("per_carrier", "SELECT carrier, count(*) AS n FROM flights GROUP BY carrier")
    lake.create_view("ops.big", "SELECT * FROM per_carrier WHERE n > 3")
    version = lake.catalog.latest_version()
    assert version is not None
    got = lake.sql("SELECT * FROM per_carrier ORDER BY carrier").fetchall()
    assert got == [("AA", 4), ("BA", 4)]
    assert sorted(lake.sql("SELECT carrier FROM ops.big").fetchall()) == [("AA",), ("BA",)]
    # --as-of applies to the pools inside the view.
    first = lake.metadata("flights", "commits").to_pylist()[-1]
    then = lake.sql("SELECT * FROM per_carrier", as_of=first["date"]).fetchall()
    assert then == [("AA", 4)]
    listed = cli(capsys, lake, "query", "SELECT name, sql FROM lake$views", "-f", "json")
    assert [v["name"] for v in listed] == ["per_carrier", "ops.big"]  # by namespace, name
    # Dropped, the view is gone; a catalog rollback brings it back.
    assert main(["--lake", lake.config.uri, "view", "drop", "per_carrier"]) == 0
    capsys.readouterr()
    assert main(["--lake", lake.config.uri, "query", "SELECT * FROM per_carrier"]) == 1
    assert "per_carrier: pool not found" in capsys.readouterr().err
    assert main(["--lake", lake.config.uri, "catalog", "rollback", str(version)]) == 0
    capsys.readouterr()
    got2 = cli(capsys, lake, "query", "SELECT * FROM per_carrier ORDER BY carrier", "-f", "json")
    assert got2 == [{"carrier": "AA", "n": 4}, {"carrier": "BA", "n": 4}]


def test_a_view_cycle_is_refused_at_query_time(lake: Lake) -> None:
    """Written past create's checks (as an older or foreign writer could)."""
    with lake.catalog.begin() as txn:
        for name, reads in (("a", "b"), ("b", "a")):
            txn.create_view(
                "default",
                name,
                objects_pb2.ViewDef(
                    id=name,
                    view_format=objects_pb2.SQL,
                    sql=f"SELECT * FROM {reads}",
                    referenced_object_full_names=[
                        objects_pb2.NamespaceObjectFullName(namespace_name="default", name=reads)
                    ],
                ),
            )
        txn.commit()
    with pytest.raises(LakeError, match="view a reaches itself: a -> b -> a"):
        lake.sql("SELECT * FROM a").fetchall()


def test_pool_sql_reads_the_pool_s_metadata_tables(lake: Lake) -> None:
    pool = lake.pool("flights")
    got = pool.sql("SELECT count(*) FROM flights$commits").fetchall()
    assert got == [(lake.metadata("flights", "commits").num_rows,)]
    with pytest.raises(LakeError, match=r"lake\$pools: the lake's tables need a lake"):
        pool.sql("SELECT * FROM lake$pools").fetchall()
