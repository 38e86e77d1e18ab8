"""The whole record as the pool key (``--orderby this``): resolution against the pool schema,
sorting, recorded bounds, pruning, compaction and schema evolution, on both stores."""

from __future__ import annotations

import functools
import random
from typing import Any

import pyarrow as pa
import pytest

from lake_core import Lake
from lake_core.errors import KeyTypeError, UsageError
from lake_core.integrity import read_verified
from lake_core.maintenance.policy import TOP, key_lt, span
from lake_core.objects import ObjectMeta
from lake_core.poolkey import PoolKey
from lake_core.stats import ColumnMeta
from lake_core.writer import write_objects


def _sort_key(row: dict[str, Any], names: list[str], desc: bool) -> Any:
    """Python's model of the order: column by column, nulls last in both directions."""

    def cmp(x: dict[str, Any], y: dict[str, Any]) -> int:
        for n in names:
            a, b = x.get(n), y.get(n)
            if a == b:
                continue
            if a is None or b is None:
                return 1 if a is None else -1
            return (1 if a > b else -1) * (-1 if desc else 1)
        return 0

    return functools.cmp_to_key(cmp)(row)


def _batches(seed: int) -> list[pa.Table]:
    """Three loads: (a, b); then columns in another order plus a new column c; then records
    lacking a (the first key column) and lacking b."""
    rng = random.Random(seed)
    first = pa.table(
        {
            "a": [rng.randrange(6) for _ in range(300)],
            "b": [rng.choice(["x", "y", None]) for _ in range(300)],
        }
    )
    second = pa.table(
        {
            "c": [rng.randrange(3) for _ in range(200)],
            "b": [rng.choice(["x", "y"]) for _ in range(200)],
            "a": [rng.randrange(6) for _ in range(200)],
        }
    )
    third = pa.Table.from_pylist(
        [{"b": "z", "c": i % 2} for i in range(40)] + [{"a": i % 6} for i in range(60)]
    )
    return [first, second, third]


def _all_rows(batches: list[pa.Table]) -> list[dict[str, Any]]:
    rows = []
    for t in batches:
        for r in t.to_pylist():
            rows.append({n: r.get(n) for n in ("a", "b", "c")})
    return rows


@pytest.mark.parametrize("order", ["asc", "desc"])
def test_this_pool_loads_sorts_evolves_and_compacts(lake_uri: str, order: str) -> None:
    lake = Lake.init(lake_uri)
    pool = lake.create_pool("t", f"this:{order}", target_size=500, seek_stride=1024)
    assert pool.config.key.is_this and str(pool.config.key) == f"this:{order}"
    batches = _batches(1)
    for t in batches:
        pool.load([t])
    schema = pool.schema()
    assert schema is not None and schema.names == ["a", "b", "c"]  # new columns last
    desc = order == "desc"
    expected = sorted(_all_rows(batches), key=lambda r: _sort_key(r, ["a", "b", "c"], desc))

    # A sorted read merges every overlapping object into the whole-record order.
    assert pool.read().to_pylist() == expected

    snap = pool.snapshot(pool.tip())
    objs = list(snap.objects.values())
    assert len(objs) >= 4  # small target: every load wrote several objects
    # Bounds are one value per pool column of the object's day: the first load's are a
    # prefix (two values), later ones three.
    widths = {len(o.min) for o in objs if o.min is not None}
    assert widths == {2, 3}
    # Every object is sorted by the resolved key, and its span holds all its keys.
    names = pool.config.key.names(snap.schema)
    for o in objs:
        rows = read_verified(pool.store, pool.id, o, pool.name).to_pylist()
        keyed = [{n: r.get(n) for n in names} for r in rows]
        assert keyed == sorted(keyed, key=lambda r: _sort_key(r, list(names), desc))
        _assert_span_holds(o, keyed, names, desc)

    # Pruning by a key column is sound: the same rows as a filter of everything.
    scan = pool.scan(where="a = 2 AND b = 'x'")
    got = scan.to_table().to_pylist()
    assert got == [r for r in expected if r["a"] == 2 and r["b"] == "x"]
    assert scan.stats.objects_read < len(objs)

    result = pool.compact()
    assert result.commit is not None and result.duplicates_removed == 0
    assert pool.read().to_pylist() == expected  # compaction moves rows, never changes them
    written = result.commit.adds()
    assert {len(o.min) for o in written if o.min is not None} == {3}  # today's columns
    for o in pool.snapshot(pool.tip()).objects.values():
        rows = read_verified(pool.store, pool.id, o, pool.name).to_pylist()
        keyed = [{n: r.get(n) for n in names} for r in rows]
        assert keyed == sorted(keyed, key=lambda r: _sort_key(r, list(names), desc))
        _assert_span_holds(o, keyed, names, desc)
    assert pool.compact().commit is None  # a fixpoint


def _assert_span_holds(
    o: ObjectMeta, keyed: list[dict[str, Any]], names: tuple[str, ...], desc: bool
) -> None:
    """Every key of ``o`` lies in its span (both in ascending terms; a one-row object's span
    start is that row's key placed as the span places values and nulls)."""
    lo, hi = span(o, names, desc)
    for r in keyed:
        if r["a"] is None:
            assert hi is TOP  # a null first field: the top
            continue
        row = [r[n] for n in names]
        k = span(ObjectMeta("row", row, row, 1, 1, o.columns), names, desc)[0]
        assert not key_lt(k, lo) and not key_lt(hi, k), (o.min, o.max, row)


def test_this_key_parsing_and_resolution() -> None:
    key = PoolKey.parse("this:asc")
    assert key.is_this and key.fields == ("this",) and not key.descending
    schema = pa.schema([("x", pa.int64()), ("y", pa.string())])
    resolved = key.resolve(schema)
    assert resolved.fields == ("x", "y") and resolved.whole and not resolved.is_this
    assert key.names(schema) == ("x", "y") and key.names(None) == ("this",)
    assert PoolKey.parse("ts").resolve(schema) == PoolKey.parse("ts")  # named: as it is
    with pytest.raises(UsageError, match="cannot be combined"):
        PoolKey.parse("this,ts")
    with pytest.raises(UsageError, match="cannot be combined"):
        PoolKey(("ts", "this"))
    # The writer lays a table out in the key's (the pool's) column order.
    table = pa.table({"y": ["a"], "x": [1]})
    assert resolved.layout(table).schema.names == ["x", "y"]


def test_writer_refuses_an_unresolved_this_key(tmp_path: Any) -> None:
    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("t", "this")
    with pytest.raises(ValueError, match="resolved"):
        write_objects(pool.store, pool.id, pa.table({"x": [1]}), pool.config.key)


def test_key_equality_nulls_and_structs() -> None:
    table = pa.table(
        {
            "a": [1, 1, 2, 2, None, None],
            "s": pa.array([{"x": 1}, {"x": 1}, {"x": 2}, None, None, None]),
        }
    )
    # this: nulls are values, structs compare field by field.
    assert PoolKey(("this",)).same_as_next(table).tolist() == [True, False, False, False, True]
    # A named key with a null equals nothing; a key field the table lacks is null.
    assert PoolKey(("a",)).same_as_next(table).tolist() == [True, False, True, False, False]
    assert not PoolKey(("a", "zz")).same_as_next(table).any()


def _obj(oid: str, lo: list[Any], hi: list[Any]) -> ObjectMeta:
    return ObjectMeta(oid, lo, hi, 2, 10, {"a": ColumnMeta("int64", lo[0], hi[0], 0)})


def test_span_is_sound_for_prefix_bounds_and_nulls() -> None:
    names = ("a", "b", "c")
    old = _obj("old", [1, 2], [1, 2])  # written before c existed: its rows are (1, 2, null)
    new = _obj("new", [1, 2, 3], [1, 2, 5])
    lo_old, hi_old = span(old, names)
    lo_new, hi_new = span(new, names)
    # (1, 2, null) may sort after (1, 2, 5) (asc) or before (1, 2, 3) (desc): they overlap.
    assert not key_lt(hi_old, lo_new) and not key_lt(hi_new, lo_old)
    # A null secondary value cuts the bound: the span widens instead of failing to compare.
    holed = _obj("holed", [4, None, 1], [4, None, 9])
    lo, hi = span(holed, names)
    assert lo == (4,) and key_lt((3, 9, 9), lo) and key_lt((4, 100, 100), hi)
    assert key_lt(hi, (5,))  # and still ends before the next first value


def test_this_pool_refuses_unorderable_columns(lake_uri: str) -> None:
    lake = Lake.init(lake_uri)
    pool = lake.create_pool("t", "this")
    pool.load([pa.table({"a": [1]})])
    tip = pool.tip()
    with pytest.raises(KeyTypeError):
        pool.load([pa.table({"a": [2], "tags": pa.array([["x", "y"]])})])
    assert pool.tip() == tip  # nothing changed


def test_unique_this_pool_upserts_identical_records_once(lake_uri: str) -> None:
    lake = Lake.init(lake_uri)
    pool = lake.create_pool("u", "this:asc", unique=True)
    pool.load([pa.table({"a": [1, 2, 2], "b": ["x", "y", "y"]})])  # a duplicate inside
    pool.load([pa.table({"b": ["y", "z"], "a": [2, 3]})])  # columns in another order
    pool.load([pa.table({"a": [1], "b": ["x"], "c": [True]})])  # a new column: a new record
    assert sorted(map(str, pool.read().to_pylist())) == sorted(
        map(
            str,
            [
                {"a": 1, "b": "x", "c": None},
                {"a": 1, "b": "x", "c": True},
                {"a": 2, "b": "y", "c": None},
                {"a": 3, "b": "z", "c": None},
            ],
        )
    )
    assert pool.dedupe().commit is None  # the upserts left no duplicate


def test_unique_this_pool_matches_records_whatever_they_lack(lake_uri: str) -> None:
    lake = Lake.init(lake_uri)
    pool = lake.create_pool("u", "this:asc", unique=True)
    pool.load([pa.table({"a": [1, 2, None], "b": ["x", None, "w"]})])
    pool.load([pa.table({"a": [5], "b": ["v"], "s": pa.array([{"f": 1}])})])  # adds s
    # The same records again, now lacking s (null there, as in the first load's objects),
    # a struct record again, and a new one.
    commit = pool.load(
        [
            pa.table({"b": [None, "w", "x"], "a": [2, None, 1]}),
            pa.table({"a": [5, 6], "b": ["v", "u"], "s": pa.array([{"f": 1}, None])}),
        ]
    )
    assert commit.extra["upsert"] == {"inserted": 1, "updated": 4, "deleted": 0}
    got = pool.read().to_pylist()
    assert len(got) == 5
    assert pool.dedupe().commit is None


def test_spark_upsert_refuses_this_pools(tmp_path: Any) -> None:
    from lake_spark import spark_upsert

    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("t", "this")
    f = tmp_path / "rows.ndjson"
    f.write_text('{"a": 1}\n')
    # Refused before Spark is touched (no session needed) and before anything is written.
    with pytest.raises(UsageError, match="whole record"):
        spark_upsert(None, pool, [str(f)])  # type: ignore[arg-type]
    assert pool.tip() is None


def test_this_pool_history_through_compaction(tmp_path: Any) -> None:
    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("h", "this:asc", target_size=600, seek_stride=1024)
    first, second, third = _batches(2)
    undo = pool.load([first]).id
    pool.create_branch("dev")
    pool.load([second])
    pool.load([third], "dev")
    pool.compact()  # revert and merge see through the compaction, by rows
    pool.revert(undo)
    pool.merge("dev", "main")
    want = sorted(_all_rows([second, third]), key=lambda r: _sort_key(r, ["a", "b", "c"], False))
    assert pool.read().to_pylist() == want
    pool.delete("a = 1 OR b = 'z'")  # rewrites the objects holding them, in key order
    assert pool.read().to_pylist() == [r for r in want if r["a"] != 1 and r["b"] != "z"]


def test_whole_record_keyset_keeps_keys_with_nulls_as_prefixes() -> None:
    from lake_core.keyset import KeySet

    keys = KeySet.of_whole(
        [pa.array([1, 2, None, 4]), pa.array(["x", None, "z", None])], ["a", "b"]
    )
    assert keys.keys == ((1, "x"),) and keys.prefixes == ((1, ((2,), (4,))),)
    assert keys.null_first == "a" and keys.bounds is None

    def obj(lo: list[Any], hi: list[Any], nulls: int = 0) -> ObjectMeta:
        return ObjectMeta("o", lo, hi, 2, 1, {"a": ColumnMeta("int64", lo[0], hi[0], nulls)})

    assert keys.meets(obj([1, "x"], [1, "x"]))  # a whole key
    assert keys.meets(obj([2, "a"], [2, "b"]))  # the prefix (2,) of (2, null)
    assert not keys.meets(obj([3, "a"], [3, "z"]))  # neither
    assert keys.meets(obj([5, "a"], [6, "b"], nulls=1))  # holds null first fields: (null, z)


def test_unique_this_upsert_of_a_record_with_nulls_reads_only_its_objects(
    lake_uri: str,
) -> None:
    lake = Lake.init(lake_uri)
    pool = lake.create_pool("u", "this:asc", unique=True)
    for lo in (0, 100, 200):
        pool.load(
            [pa.table({"a": list(range(lo, lo + 100)), "b": [None, "x"] * 50})]
        )  # one object per load, disjoint ranges of a
    result = pool.upsert([pa.table({"a": [150, 151], "b": pa.array([None, "x"])})])
    assert (result.inserted, result.updated) == (0, 2)  # both equal live records
    assert (result.objects_read, result.objects_skipped) == (1, 2)
    assert pool.read().num_rows == 300


def test_merge_of_the_same_record_with_nulls_keeps_it_once(tmp_path: Any) -> None:
    from lake_core.errors import EmptyTransactionError

    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("u", "this:asc", unique=True)
    pool.load([pa.table({"a": [1, 2], "b": ["x", "y"]})])
    pool.create_branch("dev")
    same = pa.table({"a": [3], "b": pa.array([None], pa.string())})
    pool.load([same])
    pool.load([same], "dev")  # both sides insert the same record, which holds a null
    with pytest.raises(EmptyTransactionError):  # the same change on both sides: nothing new
        pool.merge("dev", "main")
    assert pool.read().to_pylist().count({"a": 3, "b": None}) == 1
