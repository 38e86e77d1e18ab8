"""The commit protocol's pure half: a frozen request planned against a parent snapshot, with no
I/O (conflicts, schema rules, snapshot caching); and the one discard-on-failure rule."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType

import pyarrow as pa
import pytest

from lake_core import Lake
from lake_core.commit import SNAPSHOT_INTERVAL, Add, Commit
from lake_core.committing import CommitRequest, discarding_on_failure, plan_commit
from lake_core.errors import (
    CommitConflictError,
    CommitStateUnknownError,
    EmptyTransactionError,
    SchemaModeError,
)
from lake_core.objects import ObjectMeta
from lake_core.snapshot import Snapshot, apply_commit
from lake_core.stats import ColumnMeta

WHEN = datetime(2026, 1, 5, tzinfo=UTC)
SCHEMA = pa.schema([("k", pa.int64()), ("v", pa.string())])


def obj(oid: str, count: int, *columns: str) -> ObjectMeta:
    cols = {c: ColumnMeta("int64", None, None, 0) for c in columns}
    return ObjectMeta(oid, None, None, count, 100, cols)


def plan(request: CommitRequest, parent: Snapshot, parent_commit: Commit | None = None,
         mode: str = "merge", cid: str = "c-new") -> Commit:
    return plan_commit(
        request, parent, parent_commit, commit_id=cid, date=WHEN, attempt=2,
        schema_mode=mode, pool_name="p",
    )


def test_first_commit_on_an_empty_branch() -> None:
    request = CommitRequest("main", (obj("a", 3, "k", "v"),), author="ann", message="m",
                            incoming_schema=SCHEMA, extra=MappingProxyType({"kind": "load"}))
    c = plan(request, Snapshot())
    assert (c.id, c.parent, c.depth, c.author, c.date, c.retries) == ("c-new", None, 1, "ann",
                                                                      WHEN, 2)
    assert c.schema == SCHEMA and c.extra == {"kind": "load", "rows": {"added": 3, "removed": 0}}
    assert [type(a) for a in c.actions] == [Add]
    assert (c.snapshot_base, c.chain, c.has_snapshot) == (None, (), False)
    with pytest.raises(dataclasses.FrozenInstanceError):
        request.branch = "dev"  # type: ignore[misc]


def test_conflicts_are_decided_against_the_parent() -> None:
    first = plan(CommitRequest("main", (obj("a", 3, "k"),)), Snapshot(), cid="c1")
    parent = apply_commit(Snapshot(), first)
    with pytest.raises(CommitConflictError, match="no longer live"):
        plan(CommitRequest("main", (), ("gone",)), parent, first)
    with pytest.raises(CommitConflictError, match="already live"):
        plan(CommitRequest("main", (obj("a", 3, "k"),)), parent, first)
    deleted = plan(CommitRequest("main", (), ("a",)), parent, first)
    assert deleted.parent == "c1" and deleted.extra["rows"] == {"added": 0, "removed": 3}
    assert deleted.schema is None  # no incoming schema: the pool's stays


def test_strict_pools_refuse_new_columns_at_planning() -> None:
    parent = Snapshot("c1", 1, MappingProxyType({}), pa.schema([("k", pa.int64())]))
    request = CommitRequest("main", (obj("b", 1, "k", "v"),), incoming_schema=SCHEMA)
    with pytest.raises(SchemaModeError):
        plan(request, parent, mode="strict")
    assert plan(request, parent).schema == SCHEMA


def test_prune_columns_drops_what_no_live_object_carries() -> None:
    live = {"a": obj("a", 1, "k"), "b": obj("b", 1, "k", "v")}
    parent = Snapshot("c1", 1, MappingProxyType(live), SCHEMA)
    pruned = plan(CommitRequest("main", (), ("b",), prune_columns=True), parent)
    assert pruned.schema == pa.schema([("k", pa.int64())])
    kept = plan(CommitRequest("main", (), ("b",)), parent)
    assert kept.schema is None


def test_every_snapshot_interval_a_commit_caches_its_snapshot() -> None:
    snap, parent = Snapshot(), None
    flags = []
    for i in range(2 * SNAPSHOT_INTERVAL):
        c = plan(CommitRequest("main", (obj(f"o{i}", 1, "k"),)), snap, parent, cid=f"c{i}")
        flags.append(c.has_snapshot)
        # Opening any commit takes one cached snapshot plus at most INTERVAL-1 commits.
        assert len(c.chain) < SNAPSHOT_INTERVAL
        snap, parent = apply_commit(snap, c), c
    assert [i for i, f in enumerate(flags) if f] == [SNAPSHOT_INTERVAL - 1, 2 * SNAPSHOT_INTERVAL - 1]


def test_an_empty_request_commits_nothing(lake: Lake) -> None:
    pool = lake.create_pool("p", "k:asc")
    with pytest.raises(EmptyTransactionError):
        pool.commit("main", [], [])
    assert pool.tip() is None


def test_discarding_on_failure_keeps_objects_while_the_outcome_is_unknown(lake: Lake) -> None:
    pool = lake.create_pool("p", "k:asc")
    pool.load(pa.table({"k": [1]}))
    written = list(pool.snapshot(pool.tip()).objects.values())
    key = pool.layout.data(written[0].id)
    with pytest.raises(CommitStateUnknownError), discarding_on_failure(pool, written):
        raise CommitStateUnknownError("c", "lost answer", pool="p", branch="main")
    assert pool.store.exists(key)
    with pytest.raises(KeyboardInterrupt), discarding_on_failure(pool, written):
        raise KeyboardInterrupt
    assert not pool.store.exists(key)


def test_backoff_sleeps_between_attempts_and_not_after_the_last(tmp_path: Path) -> None:
    """A lost race sleeps before the next attempt; after the last one nothing follows but
    RetriesExhaustedError, so it does not sleep."""
    from lake_core.config import LakeConfig, RetryPolicy
    from tests.clocks import FakeClock

    clock = FakeClock()
    retry = RetryPolicy(max_attempts=3, base_delay=1.0, max_delay=1.0)
    pool = Lake.init(LakeConfig(uri=str(tmp_path / "lake"), clock=clock, retry=retry)).create_pool(
        "p", "ts:asc"
    )
    slept: list[float] = []
    clock.sleep = slept.append  # type: ignore[method-assign,assignment]
    for attempt in range(retry.max_attempts):
        pool.backoff(attempt)
    assert len(slept) == retry.max_attempts - 1
    assert all(0.0 <= s <= 1.0 for s in slept)
    # A caller with a budget of its own (the Spark upsert's eight plans) says so.
    slept.clear()
    for attempt in range(8):
        pool.backoff(attempt, 8)
    assert len(slept) == 7
