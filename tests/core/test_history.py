"""Commits, journal, snapshots and branches: behaviour on both backends, and the pure parts
without I/O."""

from __future__ import annotations

from datetime import UTC, datetime

import pyarrow as pa
import pytest

from lake_core import Lake, LakeConfig
from lake_core.commit import SNAPSHOT_INTERVAL, Add, Commit, Delete
from lake_core.errors import (
    AlreadyExistsError,
    BranchNotFoundError,
    CommitConflictError,
    EmptyTransactionError,
    InvalidNameError,
    NoCommitAtTimeError,
    NotFoundError,
    PoolNotFoundError,
    SchemaConflictError,
)
from lake_core.journal import Journal
from lake_core.layout import JournalLayout
from lake_core.loading import load
from lake_core.objects import ObjectMeta
from lake_core.snapshot import Snapshot, apply_commit
from lake_core.stores.base import ObjectInfo, ObjectStore
from tests.lakecheck import assert_journal_dense, journal_numbers, read_all


def _obj(i: str) -> ObjectMeta:
    return ObjectMeta(id=i, min=[1], max=[2], count=1, size=10)


def _commit(cid: str, parent: str | None, depth: int, actions: tuple[Add | Delete, ...]) -> Commit:
    return Commit(cid, parent, depth, "a", datetime(2026, 1, 1, tzinfo=UTC), "m", None, actions)


def test_apply_is_pure_and_checks_actions() -> None:
    s0 = Snapshot()
    s1 = apply_commit(s0, _commit("c1", None, 1, (Add(_obj("o1")), Add(_obj("o2")))))
    s2 = apply_commit(s1, _commit("c2", "c1", 2, (Delete("o1"),)))
    assert list(s0.objects) == []
    assert list(s1.objects) == ["o1", "o2"]
    assert list(s2.objects) == ["o2"]
    with pytest.raises(CommitConflictError, match="o1"):
        apply_commit(s2, _commit("c3", "c2", 3, (Delete("o1"),)))
    with pytest.raises(CommitConflictError, match="twice"):
        apply_commit(s2, _commit("c3", "c2", 3, (Add(_obj("o2")),)))


def test_init_twice_fails_and_open_needs_a_lake(lake_uri: str) -> None:
    Lake.init(lake_uri)
    with pytest.raises(AlreadyExistsError, match="lake"):
        Lake.init(lake_uri)
    with pytest.raises(NotFoundError, match="lake init"):
        Lake.open(lake_uri + "-elsewhere")


def test_pools_names_and_namespaces(lake: Lake) -> None:
    lake.create_pool("logs")
    lake.create_pool("ns1.events", "user,ts:asc")
    assert [str(p.name) for p in lake.pools()] == ["logs", "ns1.events"]
    assert lake.pool("default.logs").config.key.order == "desc"
    assert lake.pool("ns1.events").config.key.fields == ("user", "ts")
    with pytest.raises(AlreadyExistsError):
        lake.create_pool("logs")
    for bad in ["", "a b", "a/b", "a@b", "x.y.z", "tab\there", "del\x7f", "é" * 40]:
        with pytest.raises(InvalidNameError):
            lake.create_pool(bad)
    with pytest.raises(PoolNotFoundError, match="nope"):
        lake.pool("nope")
    lake.drop_pool("logs")
    with pytest.raises(PoolNotFoundError):
        lake.pool("logs")


def test_load_log_time_travel_and_branches(lake: Lake) -> None:
    pool = lake.create_pool("t", "ts:asc")
    c1 = load(pool, [pa.table({"ts": [3, 1, 2]})], message="one", meta={"k": 1})
    c2 = load(pool, [pa.table({"ts": [5, 4]})], author="bob")
    assert [c.id for c in pool.log()] == [c2.id, c1.id]
    assert (c2.parent, c2.author, c1.meta) == (c1.id, "bob", {"k": 1})
    assert read_all(pool)["ts"].to_pylist() == [1, 2, 3, 4, 5]
    assert read_all(pool, c1.id)["ts"].to_pylist() == [1, 2, 3]
    # As of a time between the two commits: the first.
    as_of = pool.journal.read_entry(2).ts
    assert pool.resolve("main", as_of) == c1.id
    # The pool did not exist yet: no commit on main then (issue 19), not "branch not found".
    with pytest.raises(NoCommitAtTimeError, match="no commit on main at or before 2000-01-01"):
        pool.resolve("main", datetime(2000, 1, 1, tzinfo=UTC))
    # Branch from the first commit, load there; main is untouched.
    pool.create_branch("dev", c1.id)
    c3 = load(pool, [pa.table({"ts": [10]})], "dev")
    assert read_all(pool, "dev")["ts"].to_pylist() == [1, 2, 3, 10]
    assert read_all(pool)["ts"].to_pylist() == [1, 2, 3, 4, 5]
    assert c3.parent == c1.id
    with pytest.raises(BranchNotFoundError, match="nope"):
        load(pool, [pa.table({"ts": [1]})], "nope")
    with pytest.raises(NotFoundError, match="0ujtsYcgvSTl8PAuAdqWYSMnLOv"):
        pool.resolve("0ujtsYcgvSTl8PAuAdqWYSMnLOv")
    pool.delete_branch("dev")
    assert set(pool.branches()) == {"main"}
    assert_journal_dense(pool)


def test_schema_conflict_commits_nothing_and_names_column(lake: Lake) -> None:
    pool = lake.create_pool("s", "ts:asc")
    load(pool, [pa.table({"ts": [1], "user_id": [7]})])
    before = pool.tip()
    files_before = {i.key for i in lake.store.list(f"pools/{pool.id}/")}
    with pytest.raises(SchemaConflictError) as info:
        load(pool, [pa.table({"ts": [2], "user_id": ["seven"]})])
    assert "user_id" in str(info.value)
    assert "int64" in str(info.value) and "string" in str(info.value)
    assert pool.tip() == before
    assert {i.key for i in lake.store.list(f"pools/{pool.id}/")} == files_before


def test_empty_load_is_an_empty_transaction(lake: Lake) -> None:
    pool = lake.create_pool("e")
    with pytest.raises(EmptyTransactionError):
        load(pool, [pa.table({"ts": pa.array([], pa.int64())})])
    assert pool.tip() is None


def test_deleting_a_gone_object_conflicts_and_leaves_nothing(lake: Lake) -> None:
    pool = lake.create_pool("d", "ts:asc")
    c = load(pool, [pa.table({"ts": [1]})])
    obj = c.adds()[0].id
    pool.commit("main", [], [obj], message="delete")
    with pytest.raises(CommitConflictError, match=obj):
        pool.commit("main", [], [obj], message="delete again")
    assert len(list(pool.log())) == 2


class CountingStore(ObjectStore):
    """Wraps a store and counts reads, to prove opening a tip is bounded."""

    def __init__(self, inner: ObjectStore) -> None:
        self.inner, self.uri, self.gets = inner, inner.uri, 0

    def get(self, key: str) -> bytes:
        self.gets += 1
        return self.inner.get(key)

    def get_range(self, key: str, start: int, length: int) -> bytes:
        self.gets += 1
        return self.inner.get_range(key, start, length)

    def put(self, key: str, data: bytes) -> None:
        self.inner.put(key, data)

    def put_if_missing(self, key: str, data: bytes) -> None:
        self.inner.put_if_missing(key, data)

    def head(self, key: str) -> ObjectInfo:
        return self.inner.head(key)

    def list(self, prefix: str):  # type: ignore[no-untyped-def]
        return self.inner.list(prefix)

    def delete(self, key: str) -> None:
        self.inner.delete(key)

    def arrow_location(self, key: str):  # type: ignore[no-untyped-def]
        return self.inner.arrow_location(key)


def _opening_cost(lake_uri: str) -> int:
    counting = CountingStore(Lake.open(lake_uri).store)
    pool = Lake.open(LakeConfig(uri=lake_uri), counting).pool("b")
    before = counting.gets
    pool.snapshot(pool.tip())
    return counting.gets - before


def test_opening_the_tip_reads_a_bounded_number_of_objects(lake: Lake, lake_uri: str) -> None:
    pool = lake.create_pool("b", "ts:asc")
    costs = []
    for i in range(3 * SNAPSHOT_INTERVAL + 5):
        load(pool, [pa.table({"ts": [i]})])
        if i + 1 in (SNAPSHOT_INTERVAL - 1, 2 * SNAPSHOT_INTERVAL + 10, 3 * SNAPSHOT_INTERVAL + 5):
            costs.append(_opening_cost(lake_uri))
    # journal HEAD + entry + probe, tip commit, <= INTERVAL chain commits, one snapshot
    bound = 3 + 1 + SNAPSHOT_INTERVAL + 1
    assert all(c <= bound for c in costs), costs
    assert len(read_all(pool)) == 3 * SNAPSHOT_INTERVAL + 5


def test_damaged_cached_snapshot_falls_back_to_replay(lake: Lake, lake_uri: str) -> None:
    pool = lake.create_pool("b", "ts:asc")
    for i in range(SNAPSHOT_INTERVAL + 2):
        load(pool, [pa.table({"ts": [i]})])
    snaps = [i.key for i in lake.store.list(f"pools/{pool.id}/commits/") if i.key.endswith(".snap")]
    assert snaps, "expected a cached snapshot"
    for key in snaps:
        lake.store.put(key, b"{garbage")
    fresh = Lake.open(lake_uri).pool("b")
    assert read_all(fresh)["ts"].to_pylist() == list(range(SNAPSHOT_INTERVAL + 2))
    assert pool.layout.snapshot("x").endswith(".snap")


def test_stale_head_hint_is_probed_past(lake: Lake, lake_uri: str) -> None:
    pool = lake.create_pool("h", "ts:asc")
    for i in range(5):
        load(pool, [pa.table({"ts": [i]})])
    # A writer that died after its append but before updating HEAD, or a racing writer that
    # wrote an older HEAD last: the hint lags.
    lake.store.put(f"pools/{pool.id}/branches/HEAD", b"2")
    fresh = Lake.open(lake_uri).pool("h")
    assert fresh.journal.read_head().n == 6
    c = load(fresh, [pa.table({"ts": [99]})])
    assert fresh.tip() == c.id
    assert journal_numbers(fresh) == list(range(1, 8))
    lake.store.put(f"pools/{pool.id}/branches/HEAD", b"garbage")
    assert Lake.open(lake_uri).pool("h").journal.read_head().n == 7


def test_journal_as_of_binary_search(lake: Lake) -> None:
    j = Journal(lake.store, JournalLayout("scratch/j"))
    entries = [j.read_head()]
    for i in range(20):
        entries.append(j.append(entries[-1], [{"op": "set", "name": "x", "value": i}]))
    for e in entries[1:]:
        assert e.ts is not None
        assert j.entry_as_of(e.ts).state["x"] == e.state["x"]
