"""``spark_upsert`` on a real ``local[2]`` Spark session, on local disk and on moto S3: the
same rows, counts and objects read as :func:`lake_core.upsert.upsert` on the same inputs; a
racing commit makes it re-plan; bad input changes nothing. The bucket planner
(:mod:`lake_spark.upsert_plan`) is tested directly, without Spark."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lake_core import Lake, LakeConfig
from lake_core.errors import EmptyTransactionError, LakeError, MalformedInputError
from lake_core.expr import ExpressionError
from lake_core.objects import ObjectMeta
from lake_core.pool import Pool
from lake_core.poolkey import PoolKey
from lake_core.stats import ColumnMeta
from lake_core.upsert import UpsertResult
from lake_spark import upsert as spark_upsert_module
from lake_spark.ranges import WEIGHT, assign_buckets
from lake_spark.upsert import spark_upsert
from lake_spark.upsert_plan import key_groups, plan_buckets

# -- the bucket planner (no Spark) ------------------------------------------------------------


def _obj(oid: str, lo: Any, hi: Any, size: int = 1000, t: str = "int64") -> ObjectMeta:
    col = ColumnMeta(t, lo, hi, 0)
    return ObjectMeta(oid, [lo], [hi], 10, size, {"k": col})


def test_groups_merge_overlapping_spans_in_pool_order() -> None:
    objs = [_obj("a", 0, 10), _obj("b", 5, 20), _obj("c", 30, 40), _obj("d", 20, 25)]
    asc = key_groups(objs, PoolKey(("k",), "asc"))
    assert asc is not None
    assert [(g.start, g.end, {o.id for o in g.objects}) for g in asc] == [
        ((0,), (25,), {"a", "b", "d"}),
        ((30,), (40,), {"c"}),
    ]
    desc = key_groups(objs, PoolKey(("k",), "desc"))
    assert desc is not None
    assert [(g.start, g.end) for g in desc] == [((40,), (30,)), ((25,), (0,))]
    # An object whose bounds are not exact (a binary key records none) stops any cut.
    binary = ObjectMeta("e", None, None, 10, 100, {"k": ColumnMeta("binary", None, None, 0)})
    assert key_groups([*objs, binary], PoolKey(("k",), "asc")) is None
    # An object of null keys only is never a target: it belongs to no group.
    nulls = ObjectMeta("f", None, None, 10, 100, {"k": ColumnMeta("int64", None, None, 10)})
    groups = key_groups([*objs, nulls], PoolKey(("k",), "asc"))
    assert groups is not None and "f" not in {o.id for g in groups for o in g.objects}


@pytest.mark.parametrize("order", ["asc", "desc"])
def test_buckets_never_split_a_group_and_spread_the_work(order: str) -> None:
    key = PoolKey(("k",), order)
    schema = pa.schema([("k", pa.int64())])
    # 20 objects of 100 keys each, every other one overlapping its neighbour.
    objs = [_obj(f"o{i:02d}", i * 100, i * 100 + (150 if i % 2 else 99)) for i in range(20)]
    keys = list(range(-500, 2500, 7))
    samples = pa.table({"k": keys, WEIGHT: [1.0] * len(keys)})
    plan = plan_buckets(objs, key, schema, samples, 50.0, 5000)
    assert plan.buckets > 3
    assert sorted(o.id for b in plan.objects for o in b) == sorted(o.id for o in objs)
    # Every object's keys fall in the bucket that owns it (both ends, and in between).
    for r, owned in enumerate(plan.objects):
        for o in owned:
            assert o.min is not None and o.max is not None
            ends = pa.table({"k": pa.array([o.min[0], o.max[0]], pa.int64())})
            assert set(assign_buckets(ends, plan.bounds, key).tolist()) == {r}
    groups = key_groups(objs, key)
    assert groups is not None
    for g in groups:
        owners = {r for r, owned in enumerate(plan.objects) for o in owned if o in g.objects}
        assert len(owners) == 1


def test_plan_falls_back_to_one_bucket_when_bounds_are_not_exact() -> None:
    key = PoolKey(("k",), "asc")
    schema = pa.schema([("k", pa.timestamp("ns", "UTC"))])
    objs = [_obj(f"o{i}", i * 10, i * 10 + 5, t="timestamp[ns, tz=UTC]") for i in range(10)]
    samples = pa.table({"k": pa.array(range(0, 100), pa.int64()).cast(schema.field("k").type)})
    samples = samples.append_column(WEIGHT, pa.array([1.0] * 100))
    plan = plan_buckets(objs, key, schema, samples, 1000.0, 100)
    assert plan.buckets == 1 and len(plan.objects[0]) == 10


def test_plan_of_keyless_samples_has_no_cut() -> None:
    """Input without the key field: every sampled key is null, so nothing to cut at (the
    rows are all inserted: null keys match nothing)."""
    key = PoolKey(("k",), "asc")
    schema = pa.schema([("k", pa.int64()), ("v", pa.int64())])
    samples = pa.table({"v": list(range(100)), WEIGHT: [1.0] * 100})
    plan = plan_buckets([_obj("a", 0, 10)], key, schema, samples, 1000.0, 100)
    assert plan.buckets == 1 and [o.id for o in plan.objects[0]] == ["a"]


def test_plan_of_an_empty_pool_cuts_at_sampled_keys() -> None:
    key = PoolKey(("k",), "asc")
    schema = pa.schema([("k", pa.string())])
    keys = [f"key{i:05d}" for i in range(1000)] + [None] * 10
    samples = pa.table({"k": keys, WEIGHT: [1.0] * len(keys)})
    plan = plan_buckets([], key, schema, samples, 100.0, 10_000)
    assert plan.buckets == 11  # about 101,000 bytes of input at 10,000 a bucket
    bounds = [str(b) for b in plan.bounds.column("k").to_pylist()]
    assert plan.bounds.column("k").null_count == 0 and bounds == sorted(bounds)


# -- Spark against the local path -------------------------------------------------------------


def _base_rows() -> list[dict[str, Any]]:
    return [{"k": i, "v": i, "s": "base" * (i % 5)} for i in range(0, 12000, 2)]


def _change_sources(folder: Path) -> list[Path]:
    """Updates spread over the key space, new keys (in gaps and past the end), duplicates
    within and across files (the last in input order wins), delete rows (of live keys and
    of absent ones, and a delete followed by a re-insert), null keys, and a new column."""
    folder.mkdir(parents=True, exist_ok=True)
    a = folder / "a.ndjson"
    with a.open("w") as f:
        for i in range(0, 4000, 14):
            f.write(json.dumps({"k": i, "v": -i, "op": "u"}) + "\n")  # updates
        for i in range(1, 600, 6):
            f.write(json.dumps({"k": i, "v": 10_000 + i, "op": "u"}) + "\n")  # inserts in gaps
        for i in range(0, 4000, 50):
            f.write(json.dumps({"k": i, "v": 20_000 + i, "op": "u"}) + "\n")  # duplicates
        f.write(json.dumps({"v": 7, "op": "u"}) + "\n")  # no key: inserted
        f.write(json.dumps({"k": None, "v": 8, "op": "d"}) + "\n")  # null-key delete: nothing
    b = folder / "b.csv"
    lines = ["k,v,op,note"]
    lines += [f"{i},0,d,gone" for i in range(100, 4000, 30)]  # deletes of live keys
    lines += [f"{i},0,d,absent" for i in range(3, 200, 40)]  # deletes of absent keys
    lines += ["600,1,d,", "600,2,u,back"]  # delete then re-insert: inserted/updated
    lines += ["5000,3,u,", "5001,4,d,"]  # a new key past the end; a delete of an absent one
    b.write_text("\n".join(lines) + "\n")
    c = folder / "c.parquet"
    pq.write_table(
        pa.table(
            {
                "k": pa.array([(i * 37) % 5000 for i in range(1200)], pa.int64()),
                "v": pa.array([30_000 + i for i in range(1200)], pa.int64()),
                "op": ["u" if i % 9 else "d" for i in range(1200)],
            }
        ),
        c,
        row_group_size=200,
    )
    return [a, b, c]


def _rows(pool: Pool) -> list[tuple[Any, ...]]:
    table = pool.read()
    names = sorted(table.schema.names)
    return sorted(
        (tuple(r[n] for n in names) for r in table.to_pylist()),
        key=lambda t: tuple((v is None, str(v)) for v in t),
    )


def _twin_pools(lake: Lake, key: str = "k:asc") -> tuple[Pool, Pool]:
    pools = []
    for name in ("local", "spark"):
        pool = lake.create_pool(name, key, target_size=6_000, seek_stride=2048)
        pool.load([pa.Table.from_pylist(_base_rows())])
        pools.append(pool)
    return pools[0], pools[1]


def _same_counts(got: UpsertResult, expected: UpsertResult) -> None:
    for name in ("inserted", "updated", "deleted", "objects_read", "objects_skipped"):
        assert getattr(got, name) == getattr(expected, name), name
    assert got.objects_rewritten == expected.objects_rewritten
    assert got.bytes_rewritten == expected.bytes_rewritten


@pytest.mark.slow
def test_spark_upsert_gives_the_local_rows_and_counts(
    spark: Any, lake: Lake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    local, remote = _twin_pools(lake)
    paths = _change_sources(tmp_path / "in")
    planned: list[int] = []

    def spy(*args: Any, **kwargs: Any) -> Any:
        plan = plan_buckets(*args, **kwargs)
        planned.append(plan.buckets)
        return plan

    monkeypatch.setattr(spark_upsert_module, "plan_buckets", spy)
    expected = local.upsert(paths, delete_when="op = 'd'")
    got = spark_upsert(spark, remote, paths, delete_when="op = 'd'", chunk_bytes=4_000)
    assert planned and planned[0] > 2  # the merge really was spread over key ranges
    assert got.commit is not None and expected.commit is not None
    log = [c.id for c in remote.log()]
    assert len(log) == 2 and log[0] == got.commit.id  # one commit on top of the load
    _same_counts(got, expected)
    assert got.objects_skipped > 0 and got.deleted > 0 and got.updated > 0
    assert got.attempts == 1
    assert (
        got.commit.extra["upsert"]
        == expected.commit.extra["upsert"]
        == {
            "inserted": got.inserted,
            "updated": got.updated,
            "deleted": got.deleted,
        }
    )
    assert got.commit.message == expected.commit.message
    assert remote.snapshot(remote.tip()).schema == local.snapshot(local.tip()).schema
    assert _rows(remote) == _rows(local)
    # A second upsert of the same change set: the deletes find nothing, the rest updates.
    # (The objects the two paths wrote differ in how they are cut, so only rows count now.)
    again_local = local.upsert(paths, delete_when="op = 'd'")
    again = spark_upsert(spark, remote, paths, delete_when="op = 'd'", chunk_bytes=4_000)
    assert (again.inserted, again.updated, again.deleted) == (
        again_local.inserted,
        again_local.updated,
        again_local.deleted,
    )
    assert again.deleted == 0 and again.inserted == 1  # the keyless row: it matches nothing
    assert _rows(remote) == _rows(local)


@pytest.mark.slow
def test_spark_upsert_of_a_descending_two_field_key(spark: Any, lake: Lake, tmp_path: Path) -> None:
    base = pa.table({"a": [i % 40 for i in range(3000)], "b": [i for i in range(3000)]})
    base = base.append_column("v", pa.array(["x" * (i % 13) for i in range(3000)]))
    change = tmp_path / "change.ndjson"
    with change.open("w") as f:
        for i in range(0, 3000, 11):
            f.write(json.dumps({"a": i % 40, "b": i, "v": "new", "del": i % 3 == 0}) + "\n")
        for i in range(3000, 3100):
            f.write(json.dumps({"a": i % 40, "b": i, "v": "ins", "del": False}) + "\n")
        f.write(json.dumps({"a": 1, "v": "half a key", "del": False}) + "\n")
    pools = []
    for name in ("local", "spark"):
        pool = lake.create_pool(name, "a,b:desc", target_size=4_000, seek_stride=1024)
        pool.load([base])
        pools.append(pool)
    local, remote = pools
    expected = local.upsert([change], delete_when="del")
    got = spark_upsert(spark, remote, [change], delete_when="del")
    _same_counts(got, expected)
    assert _rows(remote) == _rows(local)


@pytest.mark.slow
def test_spark_upsert_into_a_partitioned_pool(spark: Any, lake: Lake, tmp_path: Path) -> None:
    """Partitions by day of a non-key column: an upserted row whose day changed moves to its
    new partition (the old row, in another partition's object, is rewritten away)."""
    from datetime import UTC, datetime, timedelta

    def day(i: int) -> str:
        return (datetime(2026, 1, 1, tzinfo=UTC) + timedelta(hours=7 * i)).isoformat()

    base = [{"k": i, "ts": day(i % 40), "v": i} for i in range(0, 3000, 3)]
    change = tmp_path / "change.ndjson"
    with change.open("w") as f:
        for i in range(0, 3000, 9):
            f.write(json.dumps({"k": i, "ts": day(i % 13), "v": -i, "d": i % 5 == 0}) + "\n")
        for i in range(1, 500, 10):
            f.write(json.dumps({"k": i, "ts": day(i % 7), "v": 1, "d": False}) + "\n")
        f.write(json.dumps({"k": 3001, "v": 2, "d": False}) + "\n")  # no ts: partition null
    base_file = tmp_path / "base.ndjson"
    base_file.write_text("".join(json.dumps(r) + "\n" for r in base))
    pools = []
    for name in ("local", "spark"):
        pool = lake.create_pool(name, "k:asc", target_size=4_000, partition_by="day(ts)")
        pool.load([base_file])
        pools.append(pool)
    local, remote = pools
    expected = local.upsert([change], delete_when="d")
    got = spark_upsert(spark, remote, [change], delete_when="d")
    _same_counts(got, expected)
    assert _rows(remote) == _rows(local)
    spec = remote.partition_spec
    assert spec is not None
    for o in remote.snapshot(remote.tip()).objects.values():  # no object straddles days
        rows = pq.read_table(pa.BufferReader(remote.store.get(remote.layout.data(o.id))))
        assert set(spec.values(rows).to_pylist()) == {o.partition}


@pytest.mark.slow
def test_deletes_of_absent_keys_only_commit_nothing(spark: Any, lake: Lake, tmp_path: Path) -> None:
    _, remote = _twin_pools(lake)
    src = tmp_path / "absent.ndjson"
    src.write_text("".join(json.dumps({"k": i, "op": "d"}) + "\n" for i in range(1, 400, 2)))
    tip = remote.tip()
    files = {i.key for i in remote.store.list(f"pools/{remote.id}/data/")}
    got = spark_upsert(spark, remote, [src], delete_when="op = 'd'")
    assert got.commit is None and got.deleted == 0 and got.objects_rewritten == 0
    assert got.objects_read > 0  # the spans were read: the keys could have been there
    assert remote.tip() == tip
    assert {i.key for i in remote.store.list(f"pools/{remote.id}/data/")} == files


@pytest.mark.slow
def test_a_racing_commit_makes_it_replan_and_the_result_is_the_serial_one(
    spark: Any, lake: Lake, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A load lands after the Spark upsert planned and wrote, with rows of keys the upsert
    changes: the commit is refused, what it wrote is removed, it re-plans on the new tip, and
    the pool equals the load followed by the upsert (the serial order of the commits)."""
    local, remote = _twin_pools(lake)
    paths = _change_sources(tmp_path / "in")
    racing = pa.table({"k": [14, 15, 700, 3001], "v": [-1, -2, -3, -4]})
    real = spark_upsert_module._attempt  # noqa: SLF001 - the seam between planning and commit
    calls: list[Any] = []

    def race(*args: Any, **kwargs: Any) -> Any:
        out = real(*args, **kwargs)
        # The first time, a load lands between this attempt's plan and its commit.
        calls.append(None if calls else remote.load([racing]))
        return out

    monkeypatch.setattr(spark_upsert_module, "_attempt", race)
    before = {i.key for i in remote.store.list(f"pools/{remote.id}/data/")}
    got = spark_upsert(spark, remote, paths, delete_when="op = 'd'")
    assert got.attempts == 2 and len(calls) == 2
    local.load([racing])
    expected = local.upsert(paths, delete_when="op = 'd'")
    _same_counts(got, expected)
    assert _rows(remote) == _rows(local)
    # Only the objects of the commits that landed are in the store: the first attempt's
    # objects were removed.
    assert got.commit is not None
    landed = {remote.layout.data(o.id) for c in (calls[0], got.commit) for o in c.adds()}
    after = {i.key for i in remote.store.list(f"pools/{remote.id}/data/")}
    assert after - before == landed


@pytest.mark.slow
def test_a_dataframe_change_set_gives_the_local_result(spark: Any, lake: Lake) -> None:
    """Rows in DataFrame order (partition by partition) are the input order: the last
    duplicate wins across partitions too."""
    local, remote = _twin_pools(lake)
    rows: list[tuple[int | None, int, str]] = [
        (i, -i, "d" if i % 12 == 0 else "u") for i in range(0, 3000, 4)
    ]
    rows += [(i, 7, "u") for i in range(0, 3000, 40)]  # duplicates, later in the input
    rows += [(None, 1, "u"), (5001, 2, "u")]
    table = pa.table(
        {
            "k": pa.array([r[0] for r in rows], pa.int64()),
            "v": pa.array([r[1] for r in rows], pa.int64()),
            "op": [r[2] for r in rows],
        }
    )
    # A local list is sliced in order over the partitions (two here).
    frame = spark.createDataFrame(rows, "k long, v long, op string")
    assert frame.rdd.getNumPartitions() > 1
    expected = local.upsert([table], delete_when="op = 'd'")
    got = spark_upsert(spark, remote, frame, delete_when="op = 'd'")
    _same_counts(got, expected)
    assert _rows(remote) == _rows(local)


@pytest.mark.slow
def test_refusals_change_nothing(spark: Any, lake: Lake, tmp_path: Path) -> None:
    """A unique pool refuses spark_load (its loads are upserts); a pool keyed by the whole
    record refuses spark_upsert (the local path handles it)."""
    from lake_core.errors import UsageError
    from lake_spark import spark_load

    unique = lake.create_pool("u", "k:asc", unique=True)
    this = lake.create_pool("t", "this:asc")
    src = tmp_path / "x.ndjson"
    src.write_text(json.dumps({"k": 1}) + "\n")
    with pytest.raises(UsageError, match="spark_upsert"):
        spark_load(spark, unique, [src])
    with pytest.raises(UsageError, match="without --spark"):
        spark_upsert(spark, this, [src])
    assert unique.tip() is None and this.tip() is None
    # A unique pool upserts on Spark.
    assert spark_upsert(spark, unique, [src]).inserted == 1


@pytest.mark.slow
def test_bad_input_changes_nothing_and_raises_the_local_error(
    spark: Any, lake: Lake, tmp_path: Path
) -> None:
    local, remote = _twin_pools(lake)
    good = tmp_path / "good.ndjson"
    good.write_text(json.dumps({"k": 1, "op": "d"}) + "\n")
    bad = tmp_path / "bad.ndjson"
    bad.write_text('{"k": 1}\n{"k": \n')
    empty = tmp_path / "empty.ndjson"
    empty.write_text("")
    tip = remote.tip()
    files = {i.key for i in remote.store.list(f"pools/{remote.id}/data/")}
    cases: list[tuple[list[Path], str | None, type[LakeError]]] = [
        ([good, bad], None, MalformedInputError),
        ([good], "nope = 1", ExpressionError),  # a column the input lacks
        ([good], "op = ", ExpressionError),  # malformed
        ([empty], None, EmptyTransactionError),
    ]
    for sources, when, error in cases:
        with pytest.raises(error) as local_err:
            local.upsert(sources, delete_when=when)
        with pytest.raises(error) as spark_err:
            spark_upsert(spark, remote, sources, delete_when=when)
        assert str(spark_err.value) == str(local_err.value)
    assert remote.tip() == tip
    assert {i.key for i in remote.store.list(f"pools/{remote.id}/data/")} == files


@pytest.mark.slow
def test_an_upsert_on_a_branch_with_a_transaction(spark: Any, lake: Lake, tmp_path: Path) -> None:
    """On a branch only that branch moves; its application transaction is recorded, and the
    same transaction again is refused before any work (TxnCommittedError), nothing changed."""
    from lake_core.errors import TxnCommittedError
    from lake_core.txn import Txn

    _, pool = _twin_pools(lake)
    pool.create_branch("dev")
    main_tip = pool.tip()
    src = tmp_path / "dev.ndjson"
    src.write_text("".join(json.dumps({"k": i, "v": -1}) + "\n" for i in range(0, 100, 2)))
    got = spark_upsert(spark, pool, [src], "dev", txn=Txn("feed", 1))
    assert got.commit is not None and got.updated == 50 and got.inserted == 0
    assert pool.tip() == main_tip and pool.tip("dev") == got.commit.id
    assert pool.snapshot(got.commit.id).txns == {"feed": 1}
    with pytest.raises(TxnCommittedError):
        spark_upsert(spark, pool, [src], "dev", txn=Txn("feed", 1))
    assert pool.tip("dev") == got.commit.id
    dev = pool.read("dev").to_pylist()
    assert sorted(r["v"] for r in dev if r["k"] < 100) == [-1] * 50


@pytest.mark.slow
def test_strict_pools_refuse_as_the_local_path_does(spark: Any, lake: Lake, tmp_path: Path) -> None:
    """Under schema mode strict, input without the pool key (MissingKeyError: before any work
    when the field is missing, after the tasks ran when it is null in every row, their objects
    then removed) and a new column (SchemaModeError, before any work) are refused with the
    local path's errors, and nothing changes."""
    strict = []
    for name in ("local", "spark"):
        pool = lake.create_pool(name, "k:asc", schema_mode="strict")
        pool.load([pa.table({"k": [1, 2, 3], "v": [1, 2, 3]})])
        strict.append(pool)
    local, remote = strict
    keyless = tmp_path / "keyless.ndjson"
    keyless.write_text("".join(json.dumps({"v": i}) + "\n" for i in range(5)))
    nullkey = tmp_path / "nullkey.ndjson"  # the key field is there, null in every row
    nullkey.write_text("".join(json.dumps({"k": None, "v": i}) + "\n" for i in range(5)))
    wider = tmp_path / "wider.ndjson"
    wider.write_text(json.dumps({"k": 1, "v": 1, "extra": "x"}) + "\n")
    tip = remote.tip()
    files = {i.key for i in remote.store.list(f"pools/{remote.id}/data/")}
    for src in (keyless, nullkey, wider):
        with pytest.raises(LakeError) as local_err:
            local.upsert([src])
        with pytest.raises(LakeError) as spark_err:
            spark_upsert(spark, remote, [src])
        assert type(spark_err.value) is type(local_err.value)
        assert str(spark_err.value) == str(local_err.value).replace("pool local", "pool spark")
    assert remote.tip() == tip
    assert {i.key for i in remote.store.list(f"pools/{remote.id}/data/")} == files


# -- the CLI ----------------------------------------------------------------------------------


@pytest.mark.slow
def test_cli_upsert_with_spark_prints_what_the_local_command_prints(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """In-process (the test session's Spark): ``lake upsert --spark`` and ``lake load --spark``
    into a unique pool print the local commands' lines and errors."""
    from collections.abc import Iterator
    from contextlib import contextmanager

    from lake_cli import main
    from lake_cli.commands import spark as cli_spark

    @contextmanager
    def shared(master: str | None, what: str) -> Iterator[Any]:
        assert master is None and what in ("upsert", "load")
        yield spark

    monkeypatch.setattr(cli_spark, "spark_session_for", shared)
    uri = str(tmp_path / "lake")
    lake = Lake.init(LakeConfig(uri=uri))
    _twin_pools(lake)
    paths = [str(p) for p in _change_sources(tmp_path / "in")]
    runs = {}
    for name, flags in (("local", []), ("spark", ["--spark"])):
        code = main(
            ["--lake", uri, "upsert", *flags, "-p", name, *paths, "--delete-when", "op = 'd'"]
        )
        out = capsys.readouterr()
        runs[name] = (
            code,
            out.out.replace(Lake.open(LakeConfig(uri=uri)).pool(name).tip() or "", "ID"),
        )
    assert runs["spark"] == runs["local"]
    assert runs["spark"][0] == 0 and runs["spark"][1].strip().endswith("ID committed")
    assert "inserted" in runs["spark"][1] and "read " in runs["spark"][1]
    # Bad input: one error line, exit 1, nothing changed — the local command's.
    errors = []
    for name, flags in (("local", []), ("spark", ["--spark"])):
        tip = Lake.open(LakeConfig(uri=uri)).pool(name).tip()
        code = main(
            ["--lake", uri, "upsert", *flags, "-p", name, paths[0], "--delete-when", "nope = 1"]
        )
        err = capsys.readouterr().err
        assert Lake.open(LakeConfig(uri=uri)).pool(name).tip() == tip
        errors.append((code, err))
    assert errors[0] == errors[1] and errors[0][0] == 2  # a bad expression is a usage error
    assert errors[0][1].startswith("error: ") and len(errors[0][1].strip().splitlines()) == 1
    # A unique pool: lake load --spark upserts, and says so as lake load does.
    for name in ("ulocal", "uspark"):
        assert main(["--lake", uri, "create", name, "--orderby", "k:asc", "--unique"]) == 0
    capsys.readouterr()
    lines = []
    for name, flags in (("ulocal", []), ("uspark", ["--spark"])):
        for _ in range(2):  # the second load replaces every row
            assert main(["--lake", uri, "load", *flags, "-p", name, paths[1]]) == 0
        lines.append(capsys.readouterr().out.splitlines()[-2])
    assert lines[0] == lines[1] and "updated" in lines[1]


# -- racing OS processes ----------------------------------------------------------------------


@pytest.mark.slow
def test_spark_upserts_racing_processes_equal_a_serial_replay(
    spark: Any, lake_uri: str, tmp_path: Path
) -> None:
    """Three processes upsert and load on overlapping keys (tests/workers_upsert.py) and a
    fourth compacts until they are done, while this process runs Spark upserts on the same
    keys: afterwards the pool equals a serial replay of every acknowledged operation in commit
    order, row for row, with each commit's counts (tests/core/test_upsert_race.py's check).
    A Spark upsert that loses every one of its plans to racing commits fails with
    RetriesExhaustedError and must have committed nothing (the replay finds no commit of it)."""
    import threading

    from lake_core.errors import RetriesExhaustedError
    from tests import processes
    from tests.core.test_upsert_race import check, setup
    from tests.workers_upsert import DELETE_WHEN, compactor, plan, table_of, upserter

    workers, ops, keys, seed = 3, 16, 40, 7
    setup(lake_uri, unique=False)
    pool = Lake.open(LakeConfig(uri=lake_uri)).pool("u")
    mine = plan(seed, 99, 5, keys, kinds=("upsert", "upsert_delete"))
    files = []
    for i, (_, rows) in enumerate(mine):
        path = tmp_path / f"spark{i}.parquet"
        pq.write_table(table_of(rows), path)
        files.append(path)
    ctx = processes.context()
    start, stop, out = ctx.Barrier(workers + 2), ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=upserter, args=(lake_uri, "u", seed, w, ops, keys, start, out))
        for w in range(workers)
    ]
    procs.append(ctx.Process(target=compactor, args=(lake_uri, "u", start, stop, out)))
    reports: dict[int, Any] = {}
    compactions: list[Any] = []

    def collect() -> None:
        # The compactor stops once the upserting workers are done.
        while len(reports) < workers:
            _, worker, got = out.get(timeout=300)
            reports[worker] = got
        stop.set()
        kind, _, done = out.get(timeout=120)
        assert kind == "compactions"
        compactions.extend(done)

    collector = threading.Thread(target=collect, daemon=True)
    by_commit: dict[str, tuple[str, list[Any]]] = {}
    outcomes: list[tuple[str, str, str | None]] = []
    try:
        for p in procs:
            p.start()
        collector.start()
        start.wait()
        for i, ((kind, rows), path) in enumerate(zip(mine, files, strict=True)):
            when = DELETE_WHEN if kind == "upsert_delete" else None
            try:
                result = spark_upsert(spark, pool, [path], delete_when=when, message=f"spark {i}")
            except RetriesExhaustedError:
                outcomes.append(("failed", f"spark/{i}", None))
                continue
            if result.commit is not None:
                by_commit[result.commit.id] = (kind, rows)
            outcomes.append(("ok", f"spark/{i}", result.commit.id if result.commit else None))
        collector.join(420)
        for p in procs:
            p.join(60)
            assert p.exitcode == 0
    finally:
        stop.set()
        for p in procs:
            if p.is_alive():
                p.terminate()
    assert len(reports) == workers
    for w, got in reports.items():
        steps = plan(seed, w, ops, keys)
        for i, status, cid in got:
            outcomes.append((status, f"w{w}/{i}", cid))
            if cid is not None and status in ("ok", "unknown"):
                by_commit[cid] = steps[i]
    compacted = {cid: status for status, cid in compactions if cid is not None}
    assert all(s == "ok" for s, w, _ in outcomes if not w.startswith("spark")), outcomes
    assert any(s == "ok" and c for s, w, c in outcomes if w.startswith("spark")), outcomes
    check(lake_uri, False, by_commit, compacted, outcomes)
