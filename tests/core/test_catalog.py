"""The catalog as the lake's pool registry, on local disk and on moto S3: settings round trip,
namespaces, time travel, rollback by roll-forward, export, conflicts and replay, distributed
transactions, hints, and the ``lake catalog`` CLI."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest

from lake_cli import main
from lake_core import Lake, LakeConfig
from lake_core.catalog import Catalog, CatalogPoolRegistry, table_def_of
from lake_core.catalog.btree import check
from lake_core.catalog.proto import objects_pb2
from lake_core.errors import (
    AlreadyExistsError,
    CatalogConflictError,
    EmptyTransactionError,
    NotEmptyError,
    NotFoundError,
    ObjectExistsError,
    PoolNotFoundError,
)
from lake_core.layout import CatalogLayout
from lake_core.loading import load
from lake_core.names import PoolName
from lake_core.poolkey import PoolKey
from lake_core.registry import PoolConfig
from lake_core.stores import ObjectStore
from lake_core.stores.base import ObjectInfo
from lake_core.stores.factory import open_store

T0 = datetime(2026, 1, 5, 10, 0, 0, tzinfo=UTC)


class StepClock:
    """Each ``now()`` is one second after the last; ``sleep`` does not wait."""

    def __init__(self, start: datetime = T0) -> None:
        self.t = start

    def now(self) -> datetime:
        self.t += timedelta(seconds=1)
        return self.t

    def sleep(self, seconds: float) -> None:
        pass


def _registry(lake: Lake) -> CatalogPoolRegistry:
    assert isinstance(lake.registry, CatalogPoolRegistry)
    return lake.registry


def _names(lake: Lake) -> list[str]:
    return [str(p.name) for p in lake.pools()]


def _config(name: str, **kw: Any) -> PoolConfig:
    return PoolConfig(id=kw.pop("id", f"id-{name}"), name=PoolName.parse(name), **kw)


def test_pool_settings_round_trip_exactly(lake: Lake) -> None:
    configs = [
        _config(
            "ns1.events",
            key=PoolKey(("user", "ts"), "asc"),
            target_size=64 << 20,
            seek_stride=1 << 20,
            partition_by="day(ts)",
            created=datetime(2026, 1, 5, 10, 0, 0, 123456, tzinfo=UTC),
        ),
        _config("logs", created=datetime(1969, 12, 31, 23, 59, 59, 999999, tzinfo=UTC)),
        _config("ns2.bare", created=None, partition_by=None),
        _config("ns1.a", key=PoolKey(("k",), "desc"), partition_by=""),
    ]
    registry = _registry(lake)
    for c in configs:
        registry.create(c)
    for c in configs:
        assert registry.get(c.name) == c
    assert registry.list() == sorted(configs, key=lambda c: c.name)
    fresh = Lake.open(LakeConfig(uri=lake.config.uri))  # another process's view
    assert fresh.pools() == registry.list()


def test_namespaces_are_created_on_first_use(lake: Lake) -> None:
    lake.create_pool("ns1.logs")
    lake.create_pool("logs")
    lake.create_pool("ns1.more")
    snap = lake.catalog.snapshot()
    assert snap.state.namespaces() == ["default", "ns1"]
    assert _names(lake) == ["logs", "ns1.logs", "ns1.more"]
    assert [r.display for r, _ in snap.state.pools("ns1")] == ["ns1.logs", "ns1.more"]
    with pytest.raises(AlreadyExistsError, match="pool 'ns1.logs' already exists"):
        lake.create_pool("ns1.logs")
    # The refused create left no definition file behind.
    assert len(list(lake.store.list("catalog/def/table/"))) == 3
    with pytest.raises(PoolNotFoundError, match="nope: pool not found"):
        lake.pool("nope")
    with pytest.raises(PoolNotFoundError):
        lake.drop_pool("ns1.nope")


def test_drop_then_rollback_restores_the_pool_and_its_data(lake: Lake) -> None:
    pool = lake.create_pool("keep", "ts:asc")
    load(pool, [pa.table({"ts": [1, 2, 3]})])
    before_drop = lake.catalog.latest_version()
    assert before_drop is not None
    lake.drop_pool("keep")
    with pytest.raises(PoolNotFoundError):
        lake.pool("keep")
    new_version = lake.catalog.rollback(before_drop)
    assert new_version == before_drop + 2
    restored = lake.pool("keep")
    assert restored.id == pool.id
    assert restored.read()["ts"].to_pylist() == [1, 2, 3]
    snap = lake.catalog.snapshot()
    assert snap.rollback_from == before_drop + 1
    assert snap.root.rollback_from_root == CatalogLayout.version_root(before_drop + 1)
    assert snap.root.tree.keys == lake.catalog.snapshot(before_drop).root.tree.keys
    actions = [a.action for a in snap.root.actions]
    assert [a.type for a in actions] == [2, 20]  # CATALOG_ROLLBACK, TABLE_CREATE
    assert actions[0].rollback_to_version == before_drop
    with pytest.raises(EmptyTransactionError):
        lake.catalog.rollback(new_version)
    with pytest.raises(NotFoundError, match="catalog version not found"):
        lake.catalog.rollback(999)


def test_time_travel_by_version_and_by_time(lake_uri: str) -> None:
    clock = StepClock()
    lake = Lake.init(LakeConfig(uri=lake_uri, clock=clock))
    lake.create_pool("a")  # v1
    lake.create_pool("b")  # v2
    lake.drop_pool("a")  # v3
    times = {s.version: s.created_at for s in lake.catalog.log()}
    assert sorted(times) == [0, 1, 2, 3]
    assert [times[v] for v in range(4)] == sorted(times.values())
    names = {
        v: sorted(str(p.name) for p in CatalogPoolRegistry.list_at(lake.catalog.snapshot(v)))
        for v in range(4)
    }
    assert names == {0: [], 1: ["a"], 2: ["a", "b"], 3: ["b"]}
    for v in range(4):
        at = lake.catalog.snapshot_as_of(times[v])
        assert at.version == v
        assert lake.catalog.snapshot_as_of(times[v] + timedelta(milliseconds=500)).version == v
    assert lake.catalog.snapshot_as_of(times[3] + timedelta(days=1)).version == 3
    with pytest.raises(NotFoundError, match="at or before"):
        lake.catalog.snapshot_as_of(times[0] - timedelta(seconds=1))
    with pytest.raises(NotFoundError):
        lake.catalog.snapshot(4)


def test_independent_transactions_are_replayed_not_lost(lake: Lake) -> None:
    lake.create_pool("hot")
    t1, t2, t3 = lake.catalog.begin(), lake.catalog.begin(), lake.catalog.begin()
    start = t1.base.version
    assert start == t2.base.version == t3.base.version
    t1.create_namespace("ns1", if_not_exists=True)
    t1.create_pool("ns1", "a", table_def_of(_config("ns1.a")))
    t2.create_namespace("ns1", if_not_exists=True)
    t2.create_pool("ns1", "b", table_def_of(_config("ns1.b")))
    t3.drop_pool("default", "hot")
    v1 = t1.commit()
    v2 = t2.commit()  # lost v1 to t1, replayed on it
    v3 = t3.commit()  # lost twice
    assert (v1, v2, v3) == (start + 1, start + 2, start + 3)
    assert _names(lake) == ["ns1.a", "ns1.b"]
    # t2's namespace creation became a no-op when replayed: only t1 created ns1.
    actions = {s.version: [a.action.type for a in s.root.actions] for s in lake.catalog.log(3)}
    assert actions == {v1: [10, 20], v2: [20], v3: [22]}


def test_conflicting_changes_are_reported_and_nothing_is_lost(lake: Lake) -> None:
    registry = _registry(lake)
    lake.create_pool("p")
    original = registry.get(PoolName.parse("p"))
    t1, t2 = lake.catalog.begin(), lake.catalog.begin()
    t1.alter_pool("default", "p", table_def_of(_replace(original, target_size=1)))
    t2.alter_pool("default", "p", table_def_of(_replace(original, target_size=2)))
    t1.commit()
    with pytest.raises(CatalogConflictError, match="pool p was changed by catalog version"):
        t2.commit()
    assert registry.get(PoolName.parse("p")).target_size == 1
    # Drop against a concurrent alter, and alter against a concurrent drop.
    t3, t4 = lake.catalog.begin(), lake.catalog.begin()
    t3.alter_pool("default", "p", table_def_of(_replace(original, target_size=3)))
    t4.drop_pool("default", "p")
    t3.commit()
    with pytest.raises(CatalogConflictError):
        t4.commit()
    t5, t6 = lake.catalog.begin(), lake.catalog.begin()
    t5.drop_pool("default", "p")
    t6.alter_pool("default", "p", table_def_of(_replace(original, target_size=4)))
    t5.commit()
    with pytest.raises(CatalogConflictError):
        t6.commit()
    assert _names(lake) == []
    # Two creators of one name: exactly one wins.
    t7, t8 = lake.catalog.begin(), lake.catalog.begin()
    for t, i in ((t7, "x1"), (t8, "x2")):
        t.create_namespace("default", if_not_exists=True)
        t.create_pool("default", "same", table_def_of(_config("same", id=i)))
    t7.commit()
    with pytest.raises(AlreadyExistsError):
        t8.commit()
    assert registry.get(PoolName.parse("same")).id == "x1"


def test_rollback_conflicts_with_a_commit_that_landed_meanwhile(lake: Lake) -> None:
    lake.create_pool("a")
    txn = lake.catalog.begin()
    txn.roll_back_to(lake.catalog.snapshot(0))
    lake.create_pool("b")
    with pytest.raises(CatalogConflictError, match="rolling back"):
        txn.commit()
    assert _names(lake) == ["a", "b"]


def test_namespace_drop_needs_an_empty_namespace_even_under_races(lake: Lake) -> None:
    lake.create_pool("ns1.a")
    with pytest.raises(NotEmptyError, match="namespace 'ns1' is not empty"):
        txn = lake.catalog.begin()
        txn.drop_namespace("ns1")
    lake.drop_pool("ns1.a")
    dropper, creator = lake.catalog.begin(), lake.catalog.begin()
    dropper.drop_namespace("ns1")
    creator.create_pool("ns1", "b", table_def_of(_config("ns1.b")))
    creator.commit()
    with pytest.raises(NotEmptyError):
        dropper.commit()  # replayed on a namespace that is no longer empty
    assert _names(lake) == ["ns1.b"]


def test_a_namespace_dropped_meanwhile_is_created_again_on_replay(lake: Lake) -> None:
    lake.create_pool("ns1.a")
    lake.drop_pool("ns1.a")
    creator = lake.catalog.begin()
    creator.create_namespace("ns1", if_not_exists=True)  # exists now: nothing written yet
    creator.create_pool("ns1", "b", table_def_of(_config("ns1.b")))
    dropper = lake.catalog.begin()
    dropper.drop_namespace("ns1")
    dropper.commit()
    assert lake.catalog.snapshot().state.namespaces() == []
    creator.commit()
    state = lake.catalog.snapshot().state
    assert state.namespaces() == ["ns1"]
    assert state.namespace("ns1") is not None
    assert _names(lake) == ["ns1.b"]


def test_views_and_index_rules_live_in_namespaces(lake: Lake) -> None:
    lake.create_pool("ns1.logs")
    txn = lake.catalog.begin()
    txn.create_view("ns1", "recent", objects_pb2.ViewDef(id="v", pool="ns1.logs", where="ts > 5"))
    txn.create_index_rule("ns1", "by_user", objects_pb2.IndexRuleDef(kind="field", fields=["u"]))
    txn.commit()
    state = lake.catalog.snapshot().state
    assert [(r.display, d.where) for r, d in state.views()] == [("ns1.recent", "ts > 5")]
    assert [(r.name, list(d.fields)) for r, d in state.index_rules("ns1")] == [("by_user", ["u"])]
    txn = lake.catalog.begin()
    txn.replace_view("ns1", "recent", objects_pb2.ViewDef(id="v", pool="ns1.logs", where="ts>9"))
    txn.drop_index_rule("ns1", "by_user")
    txn.commit()
    state = lake.catalog.snapshot().state
    assert [d.where for _, d in state.views("ns1")] == ["ts>9"]
    assert state.index_rules() == []
    assert _names(lake) == ["ns1.logs"]


class LostResponseStore(ObjectStore):
    """Delegates to ``inner``, but the first root put lands and then reports a lost race, as
    an S3 put whose response was lost and whose SDK retry got 412 would."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner = inner
        self.uri = inner.uri
        self.tripped = False

    def get(self, key: str) -> bytes:
        return self.inner.get(key)

    def get_range(self, key: str, start: int, length: int) -> bytes:
        return self.inner.get_range(key, start, length)

    def put(self, key: str, data: bytes) -> None:
        self.inner.put(key, data)

    def put_if_missing(self, key: str, data: bytes) -> None:
        self.inner.put_if_missing(key, data)
        if "/vn/" in key and not self.tripped:
            self.tripped = True
            raise ObjectExistsError(key)

    def head(self, key: str) -> ObjectInfo:
        return self.inner.head(key)

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        return self.inner.list(prefix)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def arrow_location(self, key: str) -> tuple[Any, str]:
        return self.inner.arrow_location(key)


def test_a_commit_whose_response_was_lost_is_recognised(lake: Lake, store: ObjectStore) -> None:
    lake.create_pool("base")
    flaky = Catalog(LostResponseStore(store))
    txn = flaky.begin()
    txn.alter_pool("default", "base", table_def_of(_config("base", target_size=7)))
    version = txn.commit()
    assert flaky.files.store.tripped  # type: ignore[attr-defined]
    assert version == txn.base.version + 1
    assert lake.catalog.latest_version() == version
    assert _registry(lake).get(PoolName.parse("base")).target_size == 7


def test_latest_version_survives_stale_missing_and_wrong_hints(lake: Lake) -> None:
    for i in range(5):
        lake.create_pool(f"p{i}")
    cat = lake.catalog
    files = cat.files
    assert cat.latest_version() == 5
    files.store.delete(files.key(CatalogLayout.LATEST_HINT))
    assert cat.latest_version() == 5
    files.store.put(files.key(CatalogLayout.LATEST_HINT), b"1")
    assert cat.latest_version() == 5
    files.store.put(files.key(CatalogLayout.LATEST_HINT), b"garbage")
    assert cat.latest_version() == 5
    files.store.put(files.key(CatalogLayout.LATEST_HINT), b"40")  # ahead of every root
    assert cat.latest_version() == 5
    lake.create_pool("p5")
    assert cat.latest_version() == 6
    assert files.read_hint(CatalogLayout.LATEST_HINT) == 6


def test_distributed_transaction_resumes_in_another_catalog_object(lake: Lake) -> None:
    txn = lake.catalog.begin()
    txn.create_namespace("ns9", if_not_exists=True)
    txn.create_pool("ns9", "dist", table_def_of(_config("ns9.dist")))
    tid = txn.save()
    assert lake.catalog.files.exists(f"dtxn/{tid}.binpb")
    lake.create_pool("meanwhile")
    other = Catalog(open_store(lake.config.uri))
    resumed = other.resume(tid)
    assert resumed.state.pool("ns9", "dist") is not None
    resumed.commit()
    assert _names(lake) == ["meanwhile", "ns9.dist"]
    assert not lake.catalog.files.exists(f"dtxn/{tid}.binpb")
    with pytest.raises(NotFoundError):
        other.resume(tid)


def _export_dest(lake: Lake, name: str) -> str:
    base = lake.config.uri.rsplit("/", 1)[0]
    return f"{base}/exports/{name}"


def test_full_and_minimal_exports(lake: Lake) -> None:
    for name in ("a", "ns1.b", "ns2.c"):
        lake.create_pool(name)
    version = lake.catalog.latest_version()
    full_uri, minimal_uri = _export_dest(lake, "full"), _export_dest(lake, "minimal")
    full = lake.catalog.export(open_store(full_uri), full=True)
    minimal = lake.catalog.export(open_store(minimal_uri), name="nightly")
    assert (full.version, minimal.version) == (version, version + 1)
    assert minimal.files == 1 and full.files > 5
    exported = lake.catalog.snapshot().state.catalog_def.exported_snapshots
    assert exported == {
        full.destination: CatalogLayout.version_root(version),
        "nightly": CatalogLayout.version_root(version + 1),
    }
    assert lake.catalog.resolve("nightly").version == version + 1
    want = _names(lake)
    for uri in (full_uri, minimal_uri):
        snap = Catalog(open_store(uri), prefix="").snapshot()
        assert [str(p.name) for p in CatalogPoolRegistry.list_at(snap)] == want
    minimal_keys = {i.key for i in open_store(minimal_uri).list("")}
    assert minimal_keys == {CatalogLayout.version_root(version + 1), "vn/latest", "vn/oldest"}
    # The full export stands alone; the minimal one needs the source's files.
    source = lake.store
    for info in list(source.list("catalog/node/")) + list(source.list("catalog/def/")):
        source.delete(info.key)
    snap = Catalog(open_store(full_uri), prefix="").snapshot()
    assert [str(p.name) for p in CatalogPoolRegistry.list_at(snap)] == want
    check(snap.root.tree, snap.state.order, snap.state.files.read_node)
    with pytest.raises(FileNotFoundError):
        CatalogPoolRegistry.list_at(Catalog(open_store(minimal_uri), prefix="").snapshot())


def _replace(config: PoolConfig, **changes: Any) -> PoolConfig:
    from dataclasses import replace

    return replace(config, **changes)


# -- CLI --------------------------------------------------------------------------------------


def _lake_cli(uri: str, *args: str) -> list[str]:
    return ["--lake", uri, *args]


def _exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as e:  # argparse's usage errors
        return int(e.code or 0)


def test_cli_catalog_commands(lake_uri: str, capsys: pytest.CaptureFixture[str]) -> None:
    import json

    assert main(_lake_cli(lake_uri, "init")) == 0
    assert main(_lake_cli(lake_uri, "create", "logs")) == 0
    assert main(_lake_cli(lake_uri, "create", "ns1.logs", "--orderby", "u,ts:asc")) == 0
    assert main(_lake_cli(lake_uri, "drop", "logs", "--force")) == 0
    capsys.readouterr()
    assert main(_lake_cli(lake_uri, "catalog", "log", "-f", "json")) == 0
    log = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [e["version"] for e in log] == [3, 2, 1, 0]
    assert log[0]["actions"] == [{"action": "drop", "object": "pool", "name": "logs"}]
    assert log[1]["actions"][1] == {"action": "create", "object": "pool", "name": "ns1.logs"}
    assert all(e["time"].endswith("Z") for e in log)

    assert main(_lake_cli(lake_uri, "ls", "--at-version", "2", "-f", "json")) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["name"] for r in rows] == ["logs", "ns1.logs"]
    assert list(rows[0]) == [
        "name",
        "id",
        "key",
        "order",
        "target_size",
        "created",
        "schema_mode",
        "unique",
        "txn_retention_seconds",
    ]
    assert main(_lake_cli(lake_uri, "ls", "--as-of", log[0]["time"], "-f", "json")) == 0
    assert [json.loads(x)["name"] for x in capsys.readouterr().out.splitlines()] == ["ns1.logs"]

    assert main(_lake_cli(lake_uri, "catalog", "rollback", "2")) == 0
    assert capsys.readouterr().out == "4\n"
    assert main(_lake_cli(lake_uri, "ls")) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].split() == [
        "name", "id", "key", "order", "target_size", "created", "schema_mode", "unique"
    ]
    assert [line.split()[0] for line in out[1:]] == ["logs", "ns1.logs"]

    dest = lake_uri.rsplit("/", 1)[0] + "/cli-export"
    assert main(_lake_cli(lake_uri, "catalog", "export", dest, "--full")) == 0
    assert "exported catalog version 4" in capsys.readouterr().out

    for argv, code, message in [
        (["catalog", "rollback", "99"], 1, "error: 99: catalog version not found"),
        (["catalog", "rollback", "x"], 2, "error: argument N: invalid int value"),
        (["ls", "--at-version", "7"], 1, "error: 7: catalog version not found"),
        (["ls", "--as-of", "yesterday"], 2, "error: invalid time 'yesterday'"),
        (["ls", "--as-of", "2000-01-01"], 1, "error: at or before 2000-01-01"),
        (["ls", "--at-version", "1", "--as-of", "2000-01-01"], 2, "error: argument --as-of"),
        (["catalog"], 2, "error: the following arguments are required"),
    ]:
        assert _exit_code(_lake_cli(lake_uri, *argv)) == code, argv
        err = capsys.readouterr().err
        assert err.startswith(message) or message in err, (argv, err)
        assert len(err.strip().splitlines()) == 1
