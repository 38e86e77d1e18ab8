"""SQL views in the catalog (lake_core.views): create, list, drop; what is refused changes
nothing; versioned with the catalog (time travel, rollback); views written before SQL views
read as their SELECT; cycles refused."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lake_core import Lake, LakeConfig
from lake_core.catalog.proto import objects_pb2
from lake_core.errors import (
    AlreadyExistsError,
    InvalidNameError,
    NotFoundError,
    PoolNotFoundError,
    UsageError,
)
from lake_core.sql import SqlError, SqlRefusedError, SqlSyntaxError
from lake_core.sql.metadata import view_tables
from lake_core.views import expansion_order, list_views, parse_view_name


@pytest.fixture
def lake(lake_uri: str) -> Lake:
    lake = Lake.init(LakeConfig(uri=lake_uri, user="tester"))
    flights = lake.create_pool("flights")
    flights.load(pa.table({"ts": [1, 2], "origin": ["JFK", "SFO"]}))
    flights.create_branch("dev")
    lake.create_pool("ops.logs")
    return lake


def test_create_list_drop_and_catalog_versions(lake: Lake) -> None:
    before = lake.catalog.latest_version()
    assert before is not None
    v1 = lake.create_view("jfk", "SELECT * FROM flights WHERE origin = 'JFK';")
    v2 = lake.create_view(
        "ops.both", 'SELECT * FROM jfk, ops.logs, "flights@dev$objects", lake$pools'
    )
    assert (v1, v2) == (before + 1, before + 2)
    views = lake.views()
    assert [str(v.name) for v in views] == ["jfk", "ops.both"]
    assert views[0].sql == "SELECT * FROM flights WHERE origin = 'JFK'"
    assert views[1].references == ("jfk", "ops.logs", "flights@dev$objects", "lake$pools")
    assert [str(v.name) for v in expansion_order(lake.catalog.snapshot().state, views[1].name)] == [
        "jfk",
        "ops.both",
    ]
    assert lake.drop_view("jfk") == before + 3
    assert [str(v.name) for v in lake.views()] == ["ops.both"]
    # Versioned with the catalog: version v2 still has both; a rollback restores them.
    assert [str(v.name) for v in list_views(lake.catalog.snapshot(v2))] == ["jfk", "ops.both"]
    assert [str(v.name) for v in list_views(lake.catalog.snapshot(before))] == []
    lake.catalog.rollback(v1)
    assert [str(v.name) for v in lake.views()] == ["jfk"]
    lake.catalog.rollback(v2)
    assert [v.sql for v in lake.views()][0] == "SELECT * FROM flights WHERE origin = 'JFK'"


#: (name, SQL, error, message): every create refused, each leaving the catalog as it was.
REFUSED: list[tuple[str, str, type[Exception], str]] = [
    ("v", "DELETE FROM flights", SqlRefusedError, "DELETE statements are refused"),
    ("v", "CREATE TABLE x AS SELECT 1", SqlRefusedError, "CREATE statements are refused"),
    ("v", "SELECT 1; SELECT 2", SqlRefusedError, "one SQL statement at a time, not 2"),
    ("v", "SELEC 1", SqlSyntaxError, 'syntax error at or near "SELEC" at position 1'),
    ("v", "SELECT * FROM read_csv('/etc/passwd')", SqlRefusedError, r"read_csv\(\) is refused"),
    ("v", "SELECT nosuch FROM flights", SqlError, "nosuch"),
    ("v", "SELECT * FROM nope", PoolNotFoundError, "nope: pool not found"),
    ("v", "SELECT * FROM ns9.flights", PoolNotFoundError, "ns9.flights: pool not found"),
    ("v", "SELECT * FROM flights$bogus", UsageError, "no such metadata table"),
    ("v", "SELECT * FROM a.b.c", SqlRefusedError, "a table is POOL or NAMESPACE.POOL"),
    ("v", "   ", UsageError, "a view needs a SELECT"),
    ("flights", "SELECT 1", AlreadyExistsError, "pool 'flights' already exists"),
    ("bad name", "SELECT 1", InvalidNameError, "invalid name 'bad name'"),
    ("a.b.c", "SELECT 1", InvalidNameError, "a view is NAME or NAMESPACE.NAME"),
    ("x@y", "SELECT 1", InvalidNameError, "must not contain '@'"),
    ("x$objects", "SELECT 1", InvalidNameError, "must not contain '\\$'"),
]


def test_refused_creates_change_nothing(lake: Lake) -> None:
    """One lake per store for the whole table (a lake on S3 costs a second to make). Nothing
    is left behind: no catalog version, no view definition file."""

    def files() -> list[str]:
        return sorted(info.key for info in lake.store.list("catalog/"))

    version, before = lake.catalog.latest_version(), files()
    for name, sql, error, match in REFUSED:
        with pytest.raises(error, match=match):
            lake.create_view(name, sql)
        assert lake.catalog.latest_version() == version, sql
    assert lake.views() == []
    assert files() == before


def test_duplicates_and_unknown_drops_are_refused(lake: Lake) -> None:
    lake.create_view("v", "SELECT 1")
    version = lake.catalog.latest_version()
    with pytest.raises(AlreadyExistsError, match="view 'v' already exists"):
        lake.create_view("v", "SELECT 2")
    with pytest.raises(NotFoundError, match="w: view not found"):
        lake.drop_view("w")
    assert lake.catalog.latest_version() == version
    assert [v.sql for v in lake.views()] == ["SELECT 1"]


def test_a_pool_is_refused_a_view_s_name(lake: Lake) -> None:
    lake.create_view("ops.v", "SELECT 1")
    version = lake.catalog.latest_version()
    with pytest.raises(AlreadyExistsError, match="view 'ops.v' already exists"):
        lake.create_pool("ops.v")
    assert lake.catalog.latest_version() == version
    assert [str(p.name) for p in lake.pools()] == ["flights", "ops.logs"]


def test_a_cycle_through_a_dropped_view_is_refused(lake: Lake) -> None:
    lake.create_view("a", "SELECT * FROM flights")
    lake.create_view("b", "SELECT * FROM a")
    lake.drop_view("a")
    version = lake.catalog.latest_version()
    with pytest.raises(UsageError, match="view a reaches itself: a -> b -> a"):
        lake.create_view("a", "SELECT * FROM b")
    assert lake.catalog.latest_version() == version


def test_ctes_are_not_tables() -> None:
    sql = "WITH flights AS (SELECT 1 AS x) SELECT * FROM flights, ns.logs WHERE x IN (SELECT 1 FROM t)"
    assert view_tables(sql) == ["ns.logs", "t"]


def test_a_lake_query_view_reads_as_its_select(lake: Lake) -> None:
    """A view written before SQL views (format LAKE_QUERY: pool, where, columns)."""
    with lake.catalog.begin() as txn:
        txn.create_view(
            "default",
            "old",
            objects_pb2.ViewDef(id="v", pool="ops.logs", where="ts > 5", columns=["ts", "msg"]),
        )
        txn.commit()
    (view,) = lake.views()
    assert view.sql == 'SELECT "ts", "msg" FROM "ops"."logs" WHERE ts > 5'
    assert view.references == ("ops.logs",)


def test_view_names_follow_the_pool_rules() -> None:
    assert str(parse_view_name("ops.v")) == "ops.v"
    assert parse_view_name("v").namespace == "default"
    with pytest.raises(InvalidNameError, match="must not be empty"):
        parse_view_name(".v")


def test_a_refused_pool_create_leaves_no_pool_directory(tmp_path: object) -> None:
    from pathlib import Path

    root = Path(str(tmp_path)) / "lake"
    lake = Lake.init(LakeConfig(uri=str(root), user="tester"))
    lake.create_view("v", "SELECT 1")
    before = sorted(p.name for p in (root / "pools").iterdir()) if (root / "pools").exists() else []
    with pytest.raises(AlreadyExistsError, match="view 'v' already exists"):
        lake.create_pool("v")
    after = sorted(p.name for p in (root / "pools").iterdir()) if (root / "pools").exists() else []
    assert after == before


def test_view_references_parse_as_sql_names_them() -> None:
    """lake_core.views repeats the SQL name grammar (it cannot import it): both agree."""
    from lake_core.sql.names import parse_table_name
    from lake_core.views import TableName

    for text in ["flights", "ns.flights", "flights@dev", "ns.f@dev$objects", "a$b$commits"]:
        mine, sql = TableName.parse(text), parse_table_name(text)
        assert (mine.namespace, mine.name, mine.ref, mine.meta) == (
            sql.namespace or "default",
            sql.pool,
            sql.ref,
            sql.meta,
        ), text
        bare = text.partition(".")[2] if "." in text.split("@")[0] else text
        assert mine.bare == bare, text


def test_a_pool_and_a_view_racing_for_one_name_cannot_both_win(lake: Lake) -> None:
    """Two catalog transactions on the same version: the one that commits second is replayed
    on the first's version and refused there."""
    from lake_core.catalog.pools import table_def_of
    from lake_core.ids import new_id
    from lake_core.names import PoolName
    from lake_core.registry import PoolConfig

    pool_txn, view_txn = lake.catalog.begin(), lake.catalog.begin()
    config = PoolConfig(id=new_id(lake.config.clock), name=PoolName("ops", "x"))
    pool_txn.create_pool("ops", "x", table_def_of(config))
    view_txn.create_view(
        "ops", "x", objects_pb2.ViewDef(id="v", view_format=objects_pb2.SQL, sql="SELECT 1")
    )
    pool_txn.commit()
    with pytest.raises(AlreadyExistsError, match="pool 'ops.x' already exists"):
        view_txn.commit()
    assert [str(v.name) for v in lake.views()] == []
    # And the other way round.
    lake.drop_pool("ops.x")
    view_txn, pool_txn = lake.catalog.begin(), lake.catalog.begin()
    view_txn.create_view(
        "ops", "y", objects_pb2.ViewDef(id="v", view_format=objects_pb2.SQL, sql="SELECT 1")
    )
    pool_txn.create_pool("ops", "y", table_def_of(config))
    view_txn.commit()
    with pytest.raises(AlreadyExistsError, match="view 'ops.y' already exists"):
        pool_txn.commit()
    assert "ops.y" not in [str(p.name) for p in lake.pools()]
