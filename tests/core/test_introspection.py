"""Metadata tables (lake_core.introspection) agree with what the CLI prints: ``$commits`` with
``lake log -f json``, ``$objects`` with ``lake objects -f json`` (and its stats with the
commits' recorded column stats), ``$branches`` with ``lake branch``, ``$partitions`` with
``lake partitions``, ``lake$pools`` with ``lake ls``; refs, commit ids and ``as_of`` apply.
On local disk and on moto S3."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lake_cli import main
from lake_core import Lake, LakeConfig
from lake_core.clock import to_iso
from lake_core.errors import PoolNotFoundError, UsageError
from lake_core.introspection import (
    BRANCHES_SCHEMA,
    COMMITS_SCHEMA,
    OBJECTS_COLUMNS,
    PARTITIONS_SCHEMA,
    POOLS_SCHEMA,
    commits_table,
    objects_table,
)

DAY = datetime(2026, 1, 5, tzinfo=UTC)


def cli(capsys: pytest.CaptureFixture[str], uri: str, *args: str) -> list[Any]:
    """Run ``lake --lake uri ARGS -f json``-style and return the NDJSON rows."""
    assert main(["--lake", uri, *args]) == 0
    out = capsys.readouterr().out
    return [json.loads(line) for line in out.splitlines()]


def rows(n: int, start: int, carrier: str) -> pa.Table:
    return pa.table(
        {
            "ts": pa.array(
                [DAY + timedelta(hours=6 * (start + i)) for i in range(n)],
                pa.timestamp("us", "UTC"),
            ),
            "carrier": [carrier] * n,
            "delay": [None if i % 3 == 0 else i for i in range(n)],
        }
    )


@pytest.fixture
def flights(lake_uri: str) -> Lake:
    """Pool ``flights`` (key ts:desc, partitioned by day): three loads on main (one with
    meta), a delete by predicate, a branch ``dev`` with one more load."""
    lake = Lake.init(LakeConfig(uri=lake_uri, user="tester"))
    pool = lake.create_pool("flights", "ts:desc", partition_by="day(ts)")
    pool.load(rows(4, 0, "AA"), message="first", meta={"job": 7, "tags": ["a"]})
    pool.load(rows(4, 4, "BA"), message="second")
    pool.delete("carrier = 'AA' AND delay = 1", message="drop one")
    pool.create_branch("dev")
    pool.load(rows(2, 8, "CX"), branch="dev", message="on dev")
    return lake


def test_commits_agree_with_lake_log(flights: Lake, capsys: pytest.CaptureFixture[str]) -> None:
    uri = flights.config.uri
    pool = flights.pool("flights")
    for ref in ("main", "dev"):
        table = flights.metadata("flights", "commits", ref)
        assert table.schema == COMMITS_SCHEMA
        got = table.to_pylist()
        log = cli(capsys, uri, "log", "-p", f"flights@{ref}", "-f", "json")
        assert [c["id"] for c in got] == [c["id"] for c in log]
        for c, want in zip(got, log, strict=True):
            assert c["parent"] == want["parent"]
            assert c["author"] == want["author"] == "tester"
            assert to_iso(c["date"]) == want["date"]
            assert c["message"] == want["message"]
            assert (None if c["meta"] is None else json.loads(c["meta"])) == want["meta"]
            adds = [a["object"]["id"] for a in want["actions"] if a["op"] == "add"]
            deletes = [a["id"] for a in want["actions"] if a["op"] == "delete"]
            assert (c["adds"], c["added"]) == (len(adds), adds)
            assert (c["deletes"], c["deleted"]) == (len(deletes), deletes)
            assert c["rows_added"] == want["rows"]["added"]
            assert c["rows_removed"] == want["rows"]["removed"]
        assert [c["distance"] for c in got] == list(range(len(got)))
        assert [c["depth"] for c in got] == list(range(len(got), 0, -1))
    main_log = flights.metadata("flights", "commits").to_pylist()
    assert [c["message"] for c in main_log] == ["drop one", "second", "first"]
    assert json.loads(main_log[-1]["meta"]) == {"job": 7, "tags": ["a"]}
    assert main_log[0]["tip_of"] == ["main"]
    dev_log = flights.metadata("flights", "commits", "dev").to_pylist()
    assert dev_log[0]["tip_of"] == ["dev"] and dev_log[1]["tip_of"] == ["main"]
    # A commit id starts the walk there; as_of takes the branch as it was.
    second = main_log[1]
    from_id = commits_table(pool, second["id"]).column("id").to_pylist()
    assert from_id == [second["id"], main_log[2]["id"]]
    then = commits_table(pool, "main", as_of=second["date"]).column("id").to_pylist()
    assert then == from_id


def _json_bound(value: Any) -> Any:
    if isinstance(value, datetime):
        return to_iso(value)
    if isinstance(value, dict):
        return [_json_bound(v) for v in value.values()]
    return value


def test_objects_agree_with_lake_objects(flights: Lake, capsys: pytest.CaptureFixture[str]) -> None:
    uri = flights.config.uri
    pool = flights.pool("flights")
    tip_main = pool.tip("main")
    assert tip_main is not None
    for ref in ("main", "dev", tip_main):
        table = flights.metadata("flights", "objects", ref)
        assert tuple(table.schema.names) == OBJECTS_COLUMNS
        assert table.schema.field("min").type == pa.timestamp("us", "UTC")
        got = table.to_pylist()
        listed = cli(capsys, uri, "objects", "-p", f"flights@{ref}", "-f", "json")
        assert [
            {k: _json_bound(o[k]) for k in ("id", "min", "max", "count", "size")} for o in got
        ] == listed
        assert all(o["min"] <= o["max"] for o in got)
        assert all(o["partition"] == to_iso(o["min"])[:10] for o in got)
    # Per-column stats are the ones the adding commits recorded (lake log's decoded form).
    recorded: dict[str, dict[str, Any]] = {}
    for c in cli(capsys, uri, "log", "-p", "flights@dev", "-f", "json"):
        for a in c["actions"]:
            if a["op"] == "add":
                recorded[a["object"]["id"]] = a["object"]["columns"]
    dev = flights.metadata("flights", "objects", "dev").to_pylist()
    assert dev
    for o in dev:
        for name, st in recorded[o["id"]].items():
            mine = o["stats"][name]
            assert (_json_bound(mine["min"]), _json_bound(mine["max"]), mine["nulls"]) == (
                st["min"],
                st["max"],
                st["nulls"],
            ), (o["id"], name)
    # As of a time before the delete: the objects then.
    commits = flights.metadata("flights", "commits").to_pylist()
    before = objects_table(pool, "main", as_of=commits[1]["date"]).column("id").to_pylist()
    assert before == sorted(pool.snapshot(commits[1]["id"]).objects)
    assert before != objects_table(pool, "main").column("id").to_pylist()


def test_branches_partitions_and_pools_agree_with_the_cli(
    flights: Lake, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = flights.config.uri
    branches = flights.metadata("flights", "branches")
    assert branches.schema == BRANCHES_SCHEMA
    listed = cli(capsys, uri, "branch", "-p", "flights", "-f", "json")
    assert [{"name": b["name"], "commit": b["tip"]} for b in branches.to_pylist()] == listed
    dev = branches.to_pylist()[0]
    assert dev["name"] == "dev" and dev["message"] == "on dev" and dev["depth"] == 4

    for ref in ("main", "dev"):
        parts = flights.metadata("flights", "partitions", ref)
        assert parts.schema == PARTITIONS_SCHEMA
        want = cli(capsys, uri, "partitions", "-p", f"flights@{ref}", "-f", "json")
        assert parts.to_pylist() == want
        assert len(want) >= 2

    flights.create_pool("ops.logs", "host,ts:asc")
    pools = flights.metadata("lake", "pools")
    assert pools.schema == POOLS_SCHEMA
    ls = cli(capsys, uri, "ls", "-f", "json")
    got = pools.to_pylist()
    assert [
        {
            "name": p["name"],
            "id": p["id"],
            "key": ",".join(p["key"]),
            "order": p["order"],
            "target_size": p["target_size"],
            "created": to_iso(p["created"]),
            "schema_mode": p["schema_mode"],
            "unique": p["unique"],
            "txn_retention_seconds": p["txn_retention_seconds"],
        }
        for p in got
    ] == ls
    assert [(p["namespace"], p["pool"], p["partition_by"]) for p in got] == [
        ("default", "flights", "day(ts)"),
        ("ops", "logs", None),
    ]
    latest = flights.catalog.latest_version()
    assert {p["catalog_version"] for p in got} == {latest}
    # A catalog version as the ref, or a time: the pools then.
    assert flights.metadata("lake", "pools", "1").column("name").to_pylist() == ["flights"]
    then = flights.catalog.snapshot(1).created_at
    assert flights.metadata("lake", "pools", as_of=then).column("name").to_pylist() == ["flights"]


def test_a_composite_key_bound_is_a_struct(
    lake_uri: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lake = Lake.init(LakeConfig(uri=lake_uri, user="tester"))
    pool = lake.create_pool("ops.logs", "host,n:asc")
    pool.load(pa.table({"host": ["b", "a", "a"], "n": [1, 5, 2], "msg": ["x", None, "z"]}))
    got = lake.metadata("ops.logs", "objects").to_pylist()
    listed = cli(capsys, lake_uri, "objects", "-p", "ops.logs", "-f", "json")
    assert [[_json_bound(o["min"]), _json_bound(o["max"])] for o in got] == [
        [o["min"], o["max"]] for o in listed
    ]
    assert got[0]["min"] == {"host": "a", "n": 2} and got[0]["max"] == {"host": "b", "n": 1}
    assert got[0]["stats"]["msg"] == {"min": "x", "max": "z", "nulls": 1}
    # Unpartitioned: one null partition (lake partitions -f json prints it as "").
    parts = lake.metadata("ops.logs", "partitions").to_pylist()
    listed_parts = cli(capsys, lake_uri, "partitions", "-p", "ops.logs", "-f", "json")
    assert [{**p, "partition": p["partition"] or ""} for p in parts] == listed_parts
    assert parts[0]["partition"] is None


def test_empty_pool_and_errors(tmp_path: Path) -> None:
    lake = Lake.init(LakeConfig(uri=str(tmp_path / "lake"), user="tester"))
    lake.create_pool("empty")
    for table in ("commits", "objects", "partitions"):
        assert lake.metadata("empty", table).num_rows == 0
    assert lake.metadata("empty", "branches").to_pylist()[0]["tip"] is None
    version = lake.catalog.latest_version()
    with pytest.raises(UsageError, match=r"empty\$bogus: no such metadata table"):
        lake.metadata("empty", "bogus")
    with pytest.raises(PoolNotFoundError, match="nope: pool not found"):
        lake.metadata("nope", "objects")
    with pytest.raises(UsageError, match="branches belong to the pool"):
        lake.metadata("empty", "branches", "main")
    with pytest.raises(UsageError, match="catalog version"):
        lake.metadata("lake", "pools", "dev")
    assert lake.catalog.latest_version() == version


def test_objects_come_from_the_snapshot_arrays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Listing the objects of a cached (columnar) snapshot builds no ObjectMeta."""
    import lake_core.live

    uri = str(tmp_path / "lake")
    lake = Lake.init(LakeConfig(uri=uri, user="tester"))
    pool = lake.create_pool("p", "k:asc")
    for i in range(33):  # past SNAPSHOT_INTERVAL: the tip's snapshot is cached
        pool.load(pa.table({"k": [i, i + 100]}))
    fresh = Lake.open(LakeConfig(uri=uri, user="tester"))

    def refuse(*_: object) -> None:
        raise AssertionError("ObjectMeta decoded")

    monkeypatch.setattr(lake_core.live, "decode_objects", refuse)
    got = fresh.metadata("p", "objects")
    assert got.num_rows == 33
    assert sorted(got.column("min").to_pylist()) == list(range(33))
    assert sum(got.column("count").to_pylist()) == 66


def test_stats_of_mixed_types_are_typed_where_they_fit(tmp_path: Path) -> None:
    """A column whose recorded stats hold values of several types (stored as JSON in the
    snapshot's arrays) reads typed as the pool column when the values fit it, else as JSON
    text."""
    from lake_core.ids import new_id
    from lake_core.objects import ObjectMeta
    from lake_core.stats import ColumnMeta

    lake = Lake.init(LakeConfig(uri=str(tmp_path / "lake"), user="tester"))
    pool = lake.create_pool("p", "k:asc")
    schema = pa.schema([("k", pa.int64()), ("v", pa.float64()), ("s", pa.string())])
    stats = [
        {"v": ColumnMeta("int64", 1, 5, 0), "s": ColumnMeta("string", "a", "b", 0)},
        {"v": ColumnMeta("double", 0.5, 2.5, 1), "s": ColumnMeta("int64", 3, 4, 0)},
    ]
    objs = [
        ObjectMeta(
            new_id(lake.config.clock), [i], [i], 1, 10, {"k": ColumnMeta("int64", i, i, 0), **st}
        )
        for i, st in enumerate(stats)
    ]
    # Metadata only: the objects' files are never read by the metadata tables.
    pool.commit("main", objs, [], incoming_schema=schema)
    got = {o["id"]: o["stats"] for o in lake.metadata("p", "objects").to_pylist()}
    first, second = (got[o.id] for o in objs)
    assert (first["v"]["min"], second["v"]["max"]) == (1.0, 2.5)
    assert isinstance(first["v"]["min"], float)
    assert (first["s"]["min"], second["s"]["min"]) == ('"a"', "3")  # JSON text: no one type


def test_vacated_history_ends_the_commits_and_names_the_tails(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    uri = str(tmp_path / "lake")
    lake = Lake.init(LakeConfig(uri=uri, user="tester"))
    pool = lake.create_pool("p", "k:asc")
    for i in range(3):
        pool.load(pa.table({"k": [i]}), message=f"load {i}")
    second = pool.log().__next__().parent
    assert second is not None
    pool.vacate(pool.read_commit(second).date)
    got = lake.metadata("p", "commits").to_pylist()
    assert [c["message"] for c in got] == ["load 2", "load 1"]
    assert [c["id"] for c in got] == [
        c["id"] for c in cli(capsys, uri, "log", "-p", "p", "-f", "json")
    ]
    assert lake.metadata("p", "branches").to_pylist()[0]["tail"] == second
