"""Upserts (lake_core.upsert): counts and exact rows, last-in-input wins, delete_when, null
keys, multi-field and descending keys, partitions, what is read, schema rules, branches, the
re-plan after a racing commit, unique pools; on local disk and moto S3."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import pyarrow as pa
import pytest

import lake_core.upsert as upsert_module
from lake_core import Lake
from lake_core.committing import CommitRequest, plan_commit
from lake_core.errors import (
    CommitConflictError,
    EmptyTransactionError,
    SchemaConflictError,
    SchemaModeError,
    TxnCommittedError,
    UsageError,
)
from lake_core.expr import ExpressionError
from lake_core.keyset import KeySet
from lake_core.objects import ObjectMeta
from lake_core.pool import Pool
from lake_core.snapshot import Snapshot
from lake_core.txn import Txn
from lake_core.upsert import UpsertResult, plan_targets

Row = dict[str, Any]


def rows(pool: Pool, ref: str | None = None) -> list[Row]:
    return pool.read(ref).to_pylist()  # type: ignore[no-any-return]


def model(
    start: Iterable[Row], batches: Iterable[tuple[list[Row], str | None]], key: tuple[str, ...]
) -> dict[Any, Row]:
    """Serial replay in pure Python: per batch, the last row per key wins; rows with
    ``op = 'd'`` (when the batch says so) delete their key."""
    state: dict[Any, Row] = {}
    for r in start:
        state[tuple(r[k] for k in key)] = r
    for batch, delete_op in batches:
        for r in batch:
            k = tuple(r.get(f) for f in key)
            if delete_op is not None and r.get("op") == delete_op:
                state.pop(k, None)
            else:
                state[k] = r
    return state


def by_key(table_rows: list[Row], key: tuple[str, ...]) -> dict[Any, Row]:
    out: dict[Any, Row] = {}
    for r in table_rows:
        k = tuple(r[f] for f in key)
        assert k not in out, f"key {k} twice"
        out[k] = r
    return out


def three_objects(lake: Lake, name: str = "p", **kwargs: Any) -> Pool:
    """A pool keyed id:asc with three disjoint objects: ids 0-9, 100-109, 200-209."""
    pool = lake.create_pool(name, "id:asc", **kwargs)
    for base in (0, 100, 200):
        ids = list(range(base, base + 10))
        pool.load(pa.table({"id": ids, "v": [f"v{i}" for i in ids]}))
    return pool


def test_counts_exact_rows_and_commit_extra(lake: Lake) -> None:
    pool = three_objects(lake)
    before = pool.tip()
    incoming = pa.table({"id": [5, 105, 150, 7], "v": ["new5", "new105", "ins150", "new7"]})
    result = pool.upsert(incoming, message="cdc 1")
    assert result.commit is not None
    assert (result.inserted, result.updated, result.deleted) == (1, 3, 0)
    assert (result.objects_read, result.objects_skipped, result.objects_rewritten) == (2, 1, 2)
    assert result.attempts == 1
    assert result.bytes_rewritten > 0 and result.bytes_written > 0
    got = by_key(rows(pool), ("id",))
    assert len(got) == 31
    assert got[(5,)]["v"] == "new5" and got[(7,)]["v"] == "new7" and got[(105,)]["v"] == "new105"
    assert got[(150,)]["v"] == "ins150" and got[(205,)]["v"] == "v205"
    commit = next(pool.log())
    assert commit.id == result.commit.id and commit.message == "cdc 1"
    assert commit.extra["upsert"] == {"inserted": 1, "updated": 3, "deleted": 0}
    assert commit.extra["rows"] == {"added": 21, "removed": 20}
    assert len(commit.deletes()) == 2
    # Time travel is unaffected.
    assert by_key(rows(pool, before), ("id",))[(5,)]["v"] == "v5"
    as_json = result.to_json()
    assert as_json["commit"] == result.commit.id and as_json["inserted"] == 1
    assert set(as_json) == {f.name for f in UpsertResult.__dataclass_fields__.values()}


def test_last_row_in_input_order_wins_and_delete_when(lake: Lake) -> None:
    pool = three_objects(lake)
    batch = [
        {"id": 1, "v": "a", "op": "u"},
        {"id": 1, "v": "b", "op": "u"},  # wins over the row before
        {"id": 2, "v": "x", "op": "u"},
        {"id": 2, "v": None, "op": "d"},  # insert-then-delete: deleted
        {"id": 300, "v": None, "op": "d"},
        {"id": 300, "v": "back", "op": "i"},  # delete-then-insert: inserted
        {"id": 3, "v": None, "op": "d"},
        {"id": 999, "v": None, "op": "d"},  # deleting an absent key: nothing
    ]
    start = rows(pool)
    result = pool.upsert(pa.Table.from_pylist(batch), delete_when="op = 'd'")
    assert (result.inserted, result.updated, result.deleted) == (1, 1, 2)
    expect = model(start, [(batch, "d")], ("id",))
    got = by_key(rows(pool), ("id",))
    assert set(got) == set(expect)
    assert got[(1,)]["v"] == "b" and got[(300,)]["v"] == "back"
    assert (2,) not in got and (3,) not in got


def test_only_deletes_of_absent_keys_commit_nothing(lake: Lake) -> None:
    pool = three_objects(lake)
    tip = pool.tip()
    result = pool.upsert(
        pa.table({"id": [50, 999], "op": ["d", "d"]}), delete_when="op = 'd'"
    )
    assert result.commit is None and pool.tip() == tip
    assert (result.inserted, result.updated, result.deleted) == (0, 0, 0)
    assert result.objects_rewritten == 0 and result.bytes_written == 0
    with pytest.raises(EmptyTransactionError):
        pool.upsert(pa.table({"id": pa.array([], pa.int64())}))
    assert pool.tip() == tip


def test_null_keys_are_inserted_and_never_match(lake: Lake) -> None:
    pool = lake.create_pool("p", "id:asc")
    pool.load(pa.table({"id": [1, None], "v": ["one", "null-a"]}))
    result = pool.upsert(
        pa.table({"id": [None, None, 1], "v": ["null-b", "null-c", "uno"], "op": ["x", "d", "x"]}),
        delete_when="op = 'd'",
    )
    # Two null-key rows: one inserted, the delete row deletes nothing (it matches nothing).
    assert (result.inserted, result.updated, result.deleted) == (1, 1, 0)
    got = sorted((r["id"] is None, r["v"]) for r in rows(pool))
    assert got == [(False, "uno"), (True, "null-a"), (True, "null-b")]


def test_multi_field_descending_key(lake: Lake) -> None:
    key = ("a", "b")
    pool = lake.create_pool("p", "a,b:desc", target_size=1)  # one object per key run
    start = [{"a": a, "b": b, "v": f"{a}.{b}"} for a in range(3) for b in ("x", "y")]
    pool.load(pa.Table.from_pylist(start))
    live = len(pool.snapshot(pool.tip()).objects)
    assert live > 1
    batch = [
        {"a": 1, "b": "y", "v": "upd", "op": "u"},
        {"a": 1, "b": "z", "v": "ins", "op": "u"},  # a new key between existing ones
        {"a": 2, "b": "x", "v": None, "op": "d"},
        {"a": 0, "b": None, "v": "half-null", "op": "u"},  # a null field: never matches
    ]
    result = pool.upsert(pa.Table.from_pylist(batch), delete_when="op = 'd'")
    assert (result.inserted, result.updated, result.deleted) == (2, 1, 1)
    assert result.objects_read < live  # (0, x) and (0, y)'s objects are not read
    table = pool.read()
    got = [(r["a"], r["b"], r["v"]) for r in table.to_pylist()]
    # (Compared as a set: the scan's order of a one-row object whose secondary key is null
    # among other one-row objects of a descending pool is the scan's business, not this test's.)
    assert set(got) == {
        (2, "y", "2.y"),
        (1, "z", "ins"),
        (1, "y", "upd"),
        (1, "x", "1.x"),
        (0, "y", "0.y"),
        (0, "x", "0.x"),
        (0, None, "half-null"),
    }
    assert len(got) == 7
    keyed = [k[:2] for k in got if k[1] is not None]
    assert keyed == sorted(keyed, reverse=True)  # descending pool-key order
    assert by_key([r for r in table.to_pylist() if r["b"] is not None], key)


def test_partitioned_pool_keeps_partitions(lake: Lake) -> None:
    pool = lake.create_pool("p", "id:asc", partition_by="day")
    pool.load(pa.table({"id": [1, 2, 3, 4], "day": ["d1", "d1", "d2", "d2"], "v": list("abcd")}))
    result = pool.upsert(
        pa.table({"id": [2, 5, 6], "day": ["d1", "d1", "d3"], "v": ["B", "e", "f"]})
    )
    assert (result.inserted, result.updated, result.deleted) == (2, 1, 0)
    assert result.objects_read == 1  # only d1's object spans id 2 (and 5, 6 meet no object)
    parts = {p.value: p.rows for p in pool.partitions()}
    assert parts == {"d1": 3, "d2": 2, "d3": 1}
    for obj in pool.snapshot(pool.tip()).objects.values():
        days = set(pool.read(where=f"id >= {obj.min[0]} AND id <= {obj.max[0]}")["day"].to_pylist())
        assert obj.partition in days
    got = by_key(rows(pool), ("id",))
    assert got[(2,)]["v"] == "B" and got[(5,)]["day"] == "d1" and got[(6,)]["day"] == "d3"


def _record_store_gets(pool: Pool, monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The keys ``pool``'s store (local or S3) reads from now on, in order."""
    reads: list[str] = []
    cls = type(pool.store)
    real_get = cls.get

    def get(self: Any, key: str, *args: Any, **kwargs: Any) -> bytes:
        reads.append(key)
        return real_get(self, key, *args, **kwargs)  # type: ignore[no-any-return]

    monkeypatch.setattr(cls, "get", get)
    return reads


def test_untouched_objects_are_not_read(lake: Lake, monkeypatch: pytest.MonkeyPatch) -> None:
    pool = three_objects(lake)
    objects = list(pool.snapshot(pool.tip()).objects.values())
    middle = next(o for o in objects if o.min == [100])
    reads = _record_store_gets(pool, monkeypatch)
    result = pool.upsert(pa.table({"id": [104, 150], "v": ["x", "y"]}))
    data = [k for k in reads if "/data/" in k]
    assert data == [pool.layout.data(middle.id)]  # the one object whose span meets a key
    assert (result.objects_read, result.objects_skipped) == (1, 2)
    # A key inside no object's span reads nothing.
    reads.clear()
    result = pool.upsert(pa.table({"id": [50], "v": ["gap"]}))
    assert [k for k in reads if "/data/" in k] == []
    assert (result.objects_read, result.inserted) == (0, 1)


def test_plan_targets_and_keyset() -> None:
    def o(oid: str, lo: list[Any] | None, hi: list[Any] | None) -> ObjectMeta:
        return ObjectMeta(oid, lo, hi, 1, 1)

    from lake_core.live import LiveObjects
    from lake_core.poolkey import PoolKey

    snap = Snapshot(
        "c",
        1,
        LiveObjects.from_objects(
            [o("a", [0], [9]), o("b", [10], [19]), o("c", None, None), o("d", [5], [15])]
        ),
    )
    key = PoolKey(("id",), "asc")
    found = plan_targets(snap, key, pa.table({"id": [12, None]}))
    assert [x.id for x in found] == ["b", "d"]
    assert plan_targets(snap, key, pa.table({"id": [20]})) == []
    assert plan_targets(snap, key, pa.table({"v": [1]})) == []  # no key field: no key
    ks = KeySet.of_columns([pa.chunked_array([[3, 3, None, 1]])])
    assert ks.keys == ((1,), (3,)) and len(ks) == 2
    assert ks.spans([2], [3]) and not ks.spans([4], [9]) and not ks.spans(None, None)
    assert KeySet.of_columns([pa.chunked_array([["x"]])]).spans([1], [2])  # incomparable: read


def test_check_unread_refuses_an_unread_object_meeting_the_keys() -> None:
    from lake_core.live import LiveObjects

    live = ObjectMeta("o1", [0], [9], 10, 100)
    late = ObjectMeta("o2", [5], [6], 2, 100)
    parent = Snapshot("c1", 1, LiveObjects.from_objects([live, late]))
    keys = KeySet.of_columns([pa.chunked_array([[5]])])

    def plan(read: Iterable[str]) -> None:
        request = CommitRequest("main", (), ("o1",), keys=keys, read_ids=frozenset(read))
        plan_commit(
            request,
            parent,
            None,
            commit_id="c2",
            date=parent_date(),
            attempt=0,
            schema_mode="merge",
            pool_name="p",
        )

    with pytest.raises(CommitConflictError, match="o2"):
        plan(["o1"])
    plan(["o1", "o2"])  # both read: applies
    far = KeySet.of_columns([pa.chunked_array([[50]])])
    request = CommitRequest("main", (), ("o1",), keys=far, read_ids=frozenset(["o1"]))
    plan_commit(
        request, parent, None, commit_id="c2", date=parent_date(), attempt=0,
        schema_mode="merge", pool_name="p",
    )


def parent_date() -> Any:
    from datetime import UTC, datetime

    return datetime(2026, 1, 5, tzinfo=UTC)


def test_schema_union_and_conflict(lake: Lake) -> None:
    pool = three_objects(lake)
    result = pool.upsert(pa.table({"id": [5, 500], "extra": [1.5, 2.5]}))
    assert (result.inserted, result.updated) == (1, 1)
    schema = pool.schema()
    assert schema is not None and schema.names == ["id", "v", "extra"]
    got = by_key(rows(pool), ("id",))
    # The incoming row replaces the whole row: columns it lacks read as null.
    assert got[(5,)] == {"id": 5, "v": None, "extra": 1.5}
    assert got[(6,)] == {"id": 6, "v": "v6", "extra": None}
    tip, data_before = pool.tip(), _data_files(pool)
    with pytest.raises(SchemaConflictError):
        pool.upsert(pa.table({"id": [6], "v": [123]}))  # v is a string column
    with pytest.raises(ExpressionError):
        pool.upsert(pa.table({"id": [6], "v": ["x"]}), delete_when="nope = 1")
    assert pool.tip() == tip and _data_files(pool) == data_before


def test_strict_pool_refuses_a_new_column(lake: Lake) -> None:
    pool = lake.create_pool("s", "id:asc", schema_mode="strict")
    pool.load(pa.table({"id": [1], "v": ["a"]}))
    tip = pool.tip()
    with pytest.raises(SchemaModeError):
        pool.upsert(pa.table({"id": [1], "w": ["b"]}))
    assert pool.tip() == tip


def _data_files(pool: Pool) -> list[str]:
    return sorted(i.key for i in pool.store.list(f"pools/{pool.id}/data/"))


def test_branch_isolation(lake: Lake) -> None:
    pool = three_objects(lake)
    pool.create_branch("dev")
    main_before = rows(pool)
    result = pool.upsert(pa.table({"id": [1, 1000], "v": ["dev1", "dev1000"]}), "dev")
    assert (result.inserted, result.updated) == (1, 1)
    assert rows(pool) == main_before
    dev = by_key(rows(pool, "dev"), ("id",))
    assert dev[(1,)]["v"] == "dev1" and dev[(1000,)]["v"] == "dev1000"


def test_txn_makes_an_upsert_idempotent(lake: Lake) -> None:
    pool = three_objects(lake)
    pool.upsert(pa.table({"id": [1], "v": ["t"]}), txn=Txn("feed", 1))
    tip = pool.tip()
    with pytest.raises(TxnCommittedError):
        pool.upsert(pa.table({"id": [1], "v": ["t2"]}), txn=Txn("feed", 1))
    assert pool.tip() == tip


def _racing(
    monkeypatch: pytest.MonkeyPatch, race: Callable[[], None]
) -> list[int]:
    """Run ``race`` once, between the upsert's plan and its commit (its objects written)."""
    real = upsert_module.write_plan
    calls: list[int] = []

    def write_plan(*args: Any, **kwargs: Any) -> None:
        real(*args, **kwargs)
        calls.append(1)
        if len(calls) == 1:
            race()

    monkeypatch.setattr(upsert_module, "write_plan", write_plan)
    return calls


def test_a_racing_load_of_changed_keys_makes_it_replan(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = three_objects(lake)
    other = Lake.open(lake.config).pool("p")  # another handle: no shared caches
    racing = [{"id": 105, "v": "racer"}, {"id": 150, "v": "racer"}, {"id": 7, "v": "racer"}]
    start = rows(pool)
    calls = _racing(monkeypatch, lambda: other.load(pa.Table.from_pylist(racing)))
    mine = [{"id": 105, "v": "mine"}, {"id": 150, "v": "mine"}, {"id": 151, "v": "mine"}]
    before = _data_files(pool)
    result = pool.upsert(pa.Table.from_pylist(mine))
    assert result.attempts == 2 and len(calls) == 2
    # Serial replay in commit order: the racing load (a plain load: duplicates stay), then us.
    assert (result.inserted, result.updated) == (1, 3)
    got = rows(pool)
    assert sorted((r["id"], r["v"]) for r in got) == sorted(
        [(r["id"], r["v"]) for r in start if r["id"] not in (105,)]
        + [(7, "racer"), (105, "mine"), (150, "mine"), (151, "mine")]
    )
    # The first attempt's objects were removed: only the racing load's and ours were added.
    log = list(pool.log())
    added = {o.id for c in log[:2] for o in c.adds()}
    assert {pool.layout.data(i) for i in added} == set(_data_files(pool)) - set(before)


def test_a_racing_delete_of_a_rewritten_object_makes_it_replan(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = three_objects(lake)
    other = Lake.open(lake.config).pool("p")
    _racing(monkeypatch, lambda: other.delete(where="id = 3"))
    result = pool.upsert(pa.table({"id": [4, 205], "v": ["four", "x"]}))
    assert result.attempts == 2
    got = by_key(rows(pool), ("id",))
    assert (3,) not in got and got[(4,)]["v"] == "four" and len(got) == 29


def test_a_racing_commit_elsewhere_does_not_replan(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = three_objects(lake)
    other = Lake.open(lake.config).pool("p")
    _racing(monkeypatch, lambda: other.load(pa.table({"id": [500], "v": ["far"]})))
    result = pool.upsert(pa.table({"id": [4], "v": ["four"]}))
    assert result.attempts == 1
    assert len(rows(pool)) == 31


def test_unique_pool_loads_upsert(lake: Lake) -> None:
    pool = lake.create_pool("u", "id:asc", unique=True)
    assert pool.config.unique
    assert Lake.open(lake.config).pool("u").config.unique  # recorded in the catalog
    assert not lake.create_pool("plain", "id:asc").config.unique
    pool.load(pa.table({"id": [1, 2, 2], "v": ["a", "b", "B"]}))
    commit = pool.load(pa.table({"id": [2, 3], "v": ["bb", "c"]}))
    assert commit.extra["upsert"] == {"inserted": 1, "updated": 1, "deleted": 0}
    assert [(r["id"], r["v"]) for r in rows(pool)] == [(1, "a"), (2, "bb"), (3, "c")]
    # The module function other callers use (Dagster's engine) upserts too.
    from lake_core.loading import load

    again = load(pool, [pa.table({"id": [3], "v": ["cc"]})])
    assert again.extra["upsert"] == {"inserted": 0, "updated": 1, "deleted": 0}
    assert [(r["id"], r["v"]) for r in rows(pool)] == [(1, "a"), (2, "bb"), (3, "cc")]
    with pytest.raises(UsageError, match="unique"):
        pool.add(pa.table({"id": [9]}))
    assert pool.staged() == []


def _check_recorded_stats(pool: Pool) -> None:
    """Every live object's recorded count, key bounds and column stats are what the writer
    records for its rows (so copied row groups carry exact metadata), and verify passes."""
    from lake_core.integrity import read_verified
    from lake_core.stats import table_meta

    pool.verify()
    key = pool.config.key
    for obj in pool.snapshot(pool.tip()).objects.values():
        table = read_verified(pool.store, pool.id, obj, pool.name)
        assert table.num_rows == obj.count
        assert table_meta(table) == obj.columns, obj.id
        first = table.column(key.fields[0])
        valid = table.num_rows - first.null_count
        if valid == 0:
            assert obj.min is None and obj.max is None
            continue
        cols = key.key_columns(table)
        from lake_core.stats import encode_value

        a = [encode_value(c.type, c[0].as_py()) for c in cols]
        b = [encode_value(c.type, c[valid - 1].as_py()) for c in cols]
        assert (obj.min, obj.max) == ((b, a) if key.descending else (a, b)), obj.id


@pytest.mark.parametrize("order", ["asc", "desc"])
def test_row_groups_without_incoming_keys_are_copied(lake: Lake, order: str) -> None:
    from datetime import UTC, date, datetime, timedelta

    pool = lake.create_pool("p", f"id:{order}", seek_stride=1000)
    n = 6000
    ids: list[int | None] = list(range(n))
    ids[-3:] = [None, None, None]  # null keys sort last, in the last group
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    table = pa.table(
        {
            "id": ids,
            "s": [None if i % 7 == 0 else f"s{i:05d}" for i in range(n)],
            "f": [i / 3 if i % 5 else None for i in range(n)],
            "b": [i % 2 == 0 for i in range(n)],
            "ts": [t0 + timedelta(seconds=i) for i in range(n)],
            "d": [date(2026, 1, 1) + timedelta(days=i % 300) for i in range(n)],
            "st": [{"x": i} for i in range(n)],
        }
    )
    (original,) = pool.load(table).adds()
    import pyarrow.parquet as pq

    path = pool.store.get(pool.layout.data(original.id))
    groups = pq.ParquetFile(pa.BufferReader(path)).metadata.num_row_groups
    assert groups >= 4
    start = rows(pool)
    batch = [
        {"id": 3000, "s": "upd", "op": "u"},
        {"id": 3001, "op": "d"},
        {"id": 100000, "s": "far", "op": "u"},
    ]
    result = pool.upsert(pa.Table.from_pylist(batch), delete_when="op = 'd'")
    assert (result.inserted, result.updated, result.deleted) == (1, 1, 1)
    assert result.objects_rewritten == 1
    live = list(pool.snapshot(pool.tip()).objects.values())
    # The groups before and after the one holding 3000/3001 are copied into objects of
    # their own (written whole, the rows would make one object at this target size); the
    # group holding the keys is written again, with the new row.
    assert len(live) == 3
    assert sum(o.count for o in live) == n - 1 + 1
    _check_recorded_stats(pool)
    expect = model(
        [r for r in start if r["id"] is not None], [(batch, "d")], ("id",)
    )
    got = rows(pool)
    assert len([r for r in got if r["id"] is None]) == 3
    got_keyed = by_key([r for r in got if r["id"] is not None], ("id",))
    assert set(got_keyed) == set(expect)
    assert got_keyed[(3000,)]["s"] == "upd" and got_keyed[(3000,)]["f"] is None
    for k in (0, 2999, 3002, 5990):  # rows from copied and rewritten groups, as they were
        assert {**got_keyed[(k,)], "op": None} == {**expect[(k,)], "op": None}


def test_merge_into_a_unique_pool_refuses_a_key_both_sides_wrote(lake: Lake) -> None:
    from lake_core.errors import DuplicateKeyError

    pool = lake.create_pool("u", "id:asc", unique=True)
    pool.load(pa.table({"id": [1, 2, 3], "v": ["a", "b", "c"]}))
    pool.create_branch("dev")
    pool.load(pa.table({"id": [2, 10], "v": ["main2", "main10"]}))
    pool.load(pa.table({"id": [2, 20], "v": ["dev2", "dev20"]}), "dev")
    tip = pool.tip()
    with pytest.raises(DuplicateKeyError, match="id=2") as caught:
        pool.merge("dev")
    assert isinstance(caught.value, CommitConflictError)
    assert "settles rows" not in str(caught.value)
    assert pool.tip() == tip
    # --theirs/--ours settle rows both sides changed; two versions of a key are two rows, so
    # they are refused the same way, and the message says so rather than ignoring the flag.
    for side in ("theirs", "ours"):
        with pytest.raises(DuplicateKeyError, match="id=2") as caught:
            pool.merge("dev", resolve=side)
        assert str(caught.value) == (
            "commit conflict: pool u is unique by id:asc: merged dev into main would leave two "
            "rows with key id=2; nothing committed (remove one of them on either side first); "
            f"--{side} settles rows both branches changed, not two versions of one key in a "
            "unique pool (or upsert the winning side's rows into the other)"
        )
        assert pool.tip() == tip
    # Without a key both sides wrote, the merge applies and keys stay unique.
    pool.create_branch("dev2")
    pool.load(pa.table({"id": [30], "v": ["dev30"]}), "dev2")
    pool.load(pa.table({"id": [40], "v": ["main40"]}))
    pool.merge("dev2")
    got = by_key(rows(pool), ("id",))
    assert set(got) == {(1,), (2,), (3,), (10,), (30,), (40,)}


def test_revert_on_a_unique_pool_refuses_to_bring_back_a_replaced_key(lake: Lake) -> None:
    from lake_core.errors import DuplicateKeyError

    pool = lake.create_pool("u", "id:asc", unique=True)
    pool.load(pa.table({"id": [1, 2], "v": ["a", "b"]}))
    first = pool.load(pa.table({"id": [1], "v": ["A"]}))
    pool.load(pa.table({"id": [1], "v": ["AA"]}))
    tip = pool.tip()
    with pytest.raises(DuplicateKeyError, match="id=1"):
        pool.revert(first.id)  # would bring back (1, a) beside (1, AA)
    assert pool.tip() == tip
    last = pool.load(pa.table({"id": [3], "v": ["c"]}))
    pool.revert(last.id)  # removes key 3: fine
    assert [r["id"] for r in rows(pool)] == [1, 2]


def test_partition_rewrite_of_a_unique_pool_keeps_keys_unique(lake: Lake) -> None:
    from lake_core.errors import DuplicateKeyError

    pool = lake.create_pool("u", "id:asc", partition_by="day", unique=True)
    pool.load(pa.table({"id": [1, 2, 3], "day": ["d1", "d1", "d2"], "v": ["a", "b", "c"]}))
    # Last row per key in input order, as a load keeps them.
    pool.rewrite_partition(
        "d1", pa.table({"id": [1, 1, 4], "day": ["d1"] * 3, "v": ["x", "y", "z"]}), guard=lambda: None
    )
    assert [(r["id"], r["v"]) for r in rows(pool)] == [(1, "y"), (3, "c"), (4, "z")]
    tip = pool.tip()
    with pytest.raises(DuplicateKeyError, match="id=3"):  # 3 lives in partition d2
        pool.rewrite_partition(
            "d1", pa.table({"id": [3], "day": ["d1"], "v": ["dup"]}), guard=lambda: None
        )
    assert pool.tip() == tip


def test_copy_row_groups_is_the_groups_as_they_are() -> None:
    import io

    import pyarrow.parquet as pq

    from lake_core.stitch import StitchError, copy_row_groups, read_footer

    table = pa.table({"k": list(range(5000)), "s": [f"s{i}" for i in range(5000)]})
    sink = io.BytesIO()
    pq.write_table(table, sink, row_group_size=1000, write_page_index=False)
    data = sink.getvalue()
    footer = read_footer(data)
    for first, stop in [(0, 1), (1, 3), (4, 5), (0, 5)]:
        out = b"".join(copy_row_groups(data, first, stop, footer))
        copied = pq.ParquetFile(pa.BufferReader(out))
        assert copied.metadata.num_row_groups == stop - first
        assert copied.read().equals(table.slice(first * 1000, (stop - first) * 1000))
    with pytest.raises(StitchError):
        copy_row_groups(data, 3, 3)
    # Page indexes move with the groups: the copy is the file a writer writes of them alone.
    indexed = io.BytesIO()
    pq.write_table(table, indexed, row_group_size=1000, write_page_index=True)
    alone = io.BytesIO()
    pq.write_table(table.slice(1000, 2000), alone, row_group_size=1000, write_page_index=True)
    assert b"".join(copy_row_groups(indexed.getvalue(), 1, 3)) == alone.getvalue()


def test_groups_it_cannot_copy_are_written_again(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lake_core.stitch import StitchError

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise StitchError("row groups with page indexes or bloom filters")

    monkeypatch.setattr(upsert_module, "copy_row_groups", refuse)
    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("p", "id:asc", seek_stride=1000)
    pool.load(pa.table({"id": list(range(6000)), "s": [f"s{i}" for i in range(6000)]}))
    result = pool.upsert(pa.table({"id": [3000], "s": ["upd"]}))
    assert result.updated == 1 and result.objects_rewritten == 1
    live = list(pool.snapshot(pool.tip()).objects.values())
    assert len(live) == 1 and live[0].count == 6000  # written again whole: nothing copied
    _check_recorded_stats(pool)
    assert by_key(rows(pool), ("id",))[(3000,)]["s"] == "upd"


def test_a_merge_into_a_unique_pool_fails_on_a_racing_writer_of_its_keys(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = lake.create_pool("u", "id:asc", unique=True)
    pool.load(pa.table({"id": [1, 2], "v": ["a", "b"]}))
    pool.create_branch("dev")
    pool.load(pa.table({"id": [50], "v": ["dev"]}), "dev")
    other = Lake.open(lake.config).pool("u")
    real_commit = pool.commit
    raced: list[Any] = []

    def commit(*args: Any, **kwargs: Any) -> Any:
        if not raced:  # after the merge checked its keys, before its commit point
            raced.append(other.load(pa.table({"id": [50], "v": ["main"]})))
        return real_commit(*args, **kwargs)

    monkeypatch.setattr(pool, "commit", commit)
    with pytest.raises(CommitConflictError, match="holds keys"):
        pool.merge("dev")
    assert pool.tip() == raced[0].id  # the racing load is the tip: the merge committed nothing
    assert [(r["id"], r["v"]) for r in rows(pool)] == [(1, "a"), (2, "b"), (50, "main")]
