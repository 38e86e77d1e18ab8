"""The cached snapshot formats (lake_core.snapshot, lake_core.live): version 2 (Arrow IPC, one
row per live object) round-trips every ObjectMeta exactly, is decoded lazily, and prunes by key
range with the same result as testing each object; pools whose cached snapshots are version-1
JSON still open, and keep working as new (Arrow) snapshots are written on top."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pytest

from lake_core import Lake
from lake_core import live as live_mod
from lake_core.changes import delete_objects
from lake_core.commit import SNAPSHOT_INTERVAL, Add, Commit, Delete
from lake_core.errors import CommitConflictError, CorruptObjectError
from lake_core.live import LiveObjects, encode_objects
from lake_core.objects import ObjectMeta
from lake_core.poolkey import PoolKey
from lake_core.scan import Scan
from lake_core.snapshot import Snapshot, apply_commit
from lake_core.stats import ColumnMeta
from tests.lakecheck import assert_objects_intact, read_all

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _odd_objects() -> list[ObjectMeta]:
    """Objects whose metadata exercises every encoding path: typed and mixed-type values, ints
    beyond int64, bools, null and missing bounds, multi-field keys, partitions, tags."""
    return [
        ObjectMeta(
            "o1",
            [1, "a"],
            [9, "z"],
            10,
            1000,
            {"k": ColumnMeta("int64", 1, 9, 0), "s": ColumnMeta("string", "a", "z", 2)},
            checksum="crc32:0badf00d",
        ),
        ObjectMeta(
            "o2",
            None,
            None,
            3,
            50,
            {"k": ColumnMeta("double", 1.5, 2.25, 3), "b": ColumnMeta("bool", False, True, 0)},
            partition="day=2026-01-01",
            tags={"source": "x.csv", "ünï": "cödé"},
        ),
        ObjectMeta(
            "o3", [2**70, None], [2**70, None], 1, 7, {"k": ColumnMeta("int64", 2**70, 2**70, 0)}
        ),
        ObjectMeta("o4", [True], [3], 2, 8, {"n": ColumnMeta("struct<a: int64>", None, None, 1)}),
        ObjectMeta("o5", [], [], 0, 0),
    ]


def _snapshot(objects: list[ObjectMeta]) -> Snapshot:
    schema = pa.schema([("k", pa.int64()), ("s", pa.string())])
    return Snapshot(
        "c9",
        9,
        LiveObjects.from_objects(objects),
        schema,
        txns={"etl": 4},
        txn_dates={"etl": T0},
    )


def test_arrow_snapshot_round_trips_every_object_exactly() -> None:
    objects = _odd_objects()
    snap = _snapshot(objects)
    data = snap.encode()
    assert data.startswith(b"ARROW1")
    back = Snapshot.decode("k", data)
    assert back == snap
    assert list(back.objects) == [o.id for o in objects]  # order kept
    got = list(back.objects.values())
    assert got == objects
    # Exactly: an int stays an int (JSON would write 1, not 1.0), a bool a bool.
    assert [type(v) for v in got[0].min or []] == [int, str]
    assert type(got[3].min[0]) is bool and type(got[3].max[0]) is int  # type: ignore[index]
    assert got[2].columns["k"].min == 2**70
    assert back.count == 16 and back.size == 1065
    assert dict(back.txns) == {"etl": 4} and back.txn_dates["etl"] == T0
    assert back.schema == snap.schema
    # The old JSON form of the same snapshot decodes to the same thing.
    assert Snapshot.decode("k", snap.encode_json()) == snap


def test_damaged_or_newer_arrow_snapshots_are_refused() -> None:
    data = _snapshot(_odd_objects()).encode()
    with pytest.raises(CorruptObjectError, match="malformed snapshot"):
        Snapshot.decode("k", data[: len(data) // 2])
    table = encode_objects(_odd_objects()).replace_schema_metadata(
        {b"lakepool.snapshot": b'{"format": "lakepool.snapshot", "version": 4, "depth": 1}'}
    )
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, table.schema) as w:
        w.write_table(table)
    with pytest.raises(CorruptObjectError, match="version 4 is newer"):
        Snapshot.decode("k", bytes(sink.getvalue()))
    dup = encode_objects([*_odd_objects(), _odd_objects()[0]]).replace_schema_metadata(
        {b"lakepool.snapshot": b'{"format": "lakepool.snapshot", "version": 2, "depth": 1}'}
    )
    sink = pa.BufferOutputStream()
    with pa.ipc.new_file(sink, dup.schema) as w:
        w.write_table(dup)
    with pytest.raises(CorruptObjectError, match="malformed"):
        Snapshot.decode("k", bytes(sink.getvalue()))


def test_decoding_builds_no_object_until_values_are_asked_for(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    objects = [ObjectMeta(f"id{i:04}", [i], [i + 1], 10, 100 + i) for i in range(200)]
    data = _snapshot(objects).encode()
    decoded: list[int] = []
    real = live_mod.decode_objects

    def counting(table: pa.Table) -> list[ObjectMeta]:
        decoded.append(table.num_rows)
        return real(table)

    monkeypatch.setattr(live_mod, "decode_objects", counting)
    snap = Snapshot.decode("k", data)
    assert len(snap.objects) == 200 and "id0007" in snap.objects and "nope" not in snap.objects
    assert list(snap.objects)[:2] == ["id0000", "id0001"]
    assert snap.count == 2000 and snap.size == sum(100 + i for i in range(200))
    assert decoded == []  # the hot paths read the arrays only
    assert snap.objects["id0003"].min == [3]
    assert decoded == [1]  # one row
    assert [o.id for o in snap.objects.values()] == [o.id for o in objects]
    assert decoded == [1, 200]  # then every row, once
    list(snap.objects.values())
    assert decoded == [1, 200]


def _commit(cid: str, parent: Snapshot, actions: list[Any], snap: bool = False) -> Commit:
    return Commit(
        id=cid,
        parent=parent.commit_id,
        depth=parent.depth + 1,
        author="t",
        date=T0,
        message="",
        meta=None,
        actions=tuple(actions),
        has_snapshot=snap,
    )


def test_commits_apply_over_a_decoded_snapshot_as_over_a_dict() -> None:
    """apply_commit on the lazy set (a table plus an overlay) matches a plain dict replay,
    through cached snapshots (which fold the overlay) and a re-encode."""
    rng = random.Random(7)
    snap = Snapshot.decode("k", _snapshot(_odd_objects()).encode())
    model = {o.id: o for o in _odd_objects()}
    for n in range(80):
        live = list(model)
        dels = rng.sample(live, min(len(live), rng.randint(0, 2)))
        adds = [
            ObjectMeta(
                f"n{n}-{j}", [n], [n + j], j + 1, 10, {"k": ColumnMeta("int64", n, n + j, 0)}
            )
            for j in range(rng.randint(0, 3))
        ]
        if not dels and not adds:
            continue
        # A delete and re-add of one id in one commit moves it to the end, as in a dict.
        readd = [model[dels[0]]] if dels and rng.random() < 0.2 else []
        actions = [*(Delete(i) for i in dels), *(Add(o) for o in [*adds, *readd])]
        snap = apply_commit(snap, _commit(f"c{n}", snap, actions, snap=n % 7 == 0))
        for i in dels:
            del model[i]
        model.update({o.id: o for o in [*adds, *readd]})
        assert list(snap.objects) == list(model)
        assert len(snap.objects) == len(model)
        assert snap.count == sum(o.count for o in model.values())
        if n % 5 == 0:
            assert dict(snap.objects.items()) == model
            snap = Snapshot.decode("k", snap.encode())
            assert list(snap.objects.values()) == list(model.values())
    with pytest.raises(CommitConflictError, match="not live"):
        apply_commit(snap, _commit("bad", snap, [Delete("never")]))
    first = next(iter(model))
    with pytest.raises(CommitConflictError, match="twice"):
        apply_commit(snap, _commit("bad", snap, [Add(model[first])]))
    with pytest.raises(CommitConflictError, match="not live"):
        apply_commit(snap, _commit("bad", snap, [Delete(first), Delete(first)]))


def test_checkpoints_encode_only_the_commits_since_the_last(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A process committing many times writes a snapshot every SNAPSHOT_INTERVAL commits; once
    one is encoded, the next encodes only the objects added since (the folded base keeps its
    table), and every snapshot still encodes exactly the live set, in order."""
    encoded: list[int] = []
    real = live_mod.encode_objects

    def counting(objects: Any) -> pa.Table:
        objs = list(objects)
        encoded.append(len(objs))
        return real(objs)

    monkeypatch.setattr(live_mod, "encode_objects", counting)
    monkeypatch.setattr(live_mod, "_MAX_CHUNKS", 3)  # so the test also combines chunks
    rng = random.Random(11)
    snap = _snapshot([])
    model: dict[str, ObjectMeta] = {}
    checkpoints = 0
    for n in range(200):
        dels = rng.sample(list(model), min(len(model), rng.randint(0, 1)))
        adds = [
            ObjectMeta(f"n{n}-{j}", [n], [n + j], 1, 10, {"k": ColumnMeta("int64", n, n + j, 0)})
            for j in range(rng.randint(1, 2))
        ]
        cached = n % 10 == 9
        snap = apply_commit(
            snap, _commit(f"c{n}", snap, [*map(Delete, dels), *map(Add, adds)], cached)
        )
        for i in dels:
            del model[i]
        model.update({o.id: o for o in adds})
        if cached:
            checkpoints += 1
            encoded.clear()
            table = LiveObjects.of(snap.objects).table()
            assert table.equals(real(model.values()))
            assert Snapshot.decode("k", snap.encode()).objects.keys() == model.keys()
            assert list(snap.objects.values()) == list(model.values())
            if checkpoints > 1:  # the first checkpoint of the process encodes everything
                assert max(encoded, default=0) <= 2 * 10, encoded
            assert table.column(0).num_chunks <= 4


def _ranged(rng: random.Random, i: int, kind: str) -> ObjectMeta:
    if kind == "int":
        lo = rng.randint(-50, 50)
        a, b = lo, lo + rng.randint(0, 20)
        t = "int64"
    elif kind == "ts":
        a = rng.randint(0, 10**6)
        b = a + rng.randint(0, 10**5)
        t = "timestamp[us, tz=UTC]"
    else:
        a, b = sorted("".join(rng.choice("abcdé") for _ in range(3)) for _ in range(2))  # type: ignore[assignment]
        t = "string"
    if rng.random() < 0.1:  # keys all null: no bounds
        return ObjectMeta(f"o{i:03}", None, None, 5, 10, {"k": ColumnMeta(t, None, None, 5)})
    if rng.random() < 0.05:  # an object from before the column existed
        return ObjectMeta(f"o{i:03}", None, None, 5, 10, {})
    return ObjectMeta(f"o{i:03}", [a], [b], 5, 10, {"k": ColumnMeta(t, a, b, rng.randint(0, 2))})


@pytest.mark.parametrize("kind", ["int", "ts", "str"])
def test_vectorised_key_pruning_picks_what_testing_each_object_picks(kind: str) -> None:
    rng = random.Random(kind)
    types = {"int": pa.int64(), "ts": pa.timestamp("us", tz="UTC"), "str": pa.string()}
    schema = pa.schema([("k", types[kind]), ("v", pa.int64())])
    objects = [_ranged(rng, i, kind) for i in range(150)]
    columnar = Snapshot("c", 1, LiveObjects.from_table(encode_objects(objects)), schema)
    per_object = Snapshot("c", 1, LiveObjects.from_objects(objects), schema)
    # An overlay on top of the table: deleted rows must stay out, added ones be tested.
    extra = [_ranged(rng, 900 + i, kind) for i in range(4)]
    actions = [Delete(objects[3].id), Delete(objects[40].id), *(Add(o) for o in extra)]
    overlaid = apply_commit(columnar, _commit("d", columnar, actions))
    plain = apply_commit(per_object, _commit("d", per_object, actions))

    def lit(v: Any) -> str:
        if kind == "int":
            return str(v)
        if kind == "ts":
            return (
                "TIMESTAMP '"
                + (T0.replace(year=1970) + timedelta(microseconds=v)).strftime(
                    "%Y-%m-%d %H:%M:%S.%f"
                )
                + "'"
            )
        return "'" + str(v) + "'"

    def value() -> Any:
        o = rng.choice(objects)
        if o.min is None:
            return 0 if kind != "str" else "c"
        return rng.choice([o.min[0], o.max[0]])  # type: ignore[index]

    wheres = []
    for _ in range(40):
        a, b = lit(value()), lit(value())
        wheres += [
            f"k = {a}",
            f"k >= {a} AND k < {b}",
            f"k > {a}",
            f"k <= {b} AND v = 1",
            f"k BETWEEN {a} AND {b}",
            f"NOT (k < {a}) OR k = {b}",
        ]
    key = PoolKey(("k",), "asc")
    # The table-backed sets take the vectorised path; the list-backed ones cannot.
    assert isinstance(overlaid.objects, LiveObjects) and isinstance(plain.objects, LiveObjects)
    assert overlaid.objects.within("k", None, False, None, False) is not None
    assert plain.objects.within("k", None, False, None, False) is None
    # Float stats leave NaN out (a NaN row matches NOT (k < 5)): never pruned by the arrays.
    floats = [ObjectMeta("f", [1.0], [2.0], 2, 1, {"k": ColumnMeta("double", 1.0, 2.0, 0)})]
    assert (
        LiveObjects.from_table(encode_objects(floats)).within("k", 5.0, True, None, False) is None
    )
    pruned_some = 0
    for where in wheres:
        for fast, slow in ((columnar, per_object), (overlaid, plain)):
            got = [o.id for o in Scan(None, "p", key, fast, where).objects]  # type: ignore[arg-type]
            want = [o.id for o in Scan(None, "p", key, slow, where).objects]  # type: ignore[arg-type]
            assert got == want, where
            pruned_some += len(want) < len(slow.objects)
    assert pruned_some > len(wheres)  # the predicates did prune


def _rewrite_snapshots_as_json(lake: Lake, pool_name: str) -> int:
    """Turn every cached snapshot of the pool into the version-1 JSON form, as a pool written
    before the Arrow format has them. Returns how many there were."""
    pool = lake.pool(pool_name)
    keys = [i.key for i in pool.store.list(pool.layout.commits_dir) if i.key.endswith(".snap")]
    for key in keys:
        snap = Snapshot.decode(key, pool.store.get(key))
        old = snap.encode_json()
        assert old.startswith(b"{")
        pool.store.put(key, old)
    return len(keys)


def test_a_pool_with_json_snapshots_opens_and_moves_on(lake: Lake) -> None:
    pool = lake.create_pool("old", "k:asc")
    tables = [
        pa.table({"k": pa.array([i * 3, i * 3 + 1], pa.int64())})
        for i in range(SNAPSHOT_INTERVAL + 5)
    ]
    for i, t in enumerate(tables):
        pool.load(t)
        if i % 9 == 8:
            first = pool.snapshot(pool.tip("main"))
            delete_objects(pool, [next(iter(first.objects))], "main")
    want_objects = dict(pool.snapshot(pool.tip("main")).objects)
    want_rows = read_all(pool).sort_by("k")
    assert _rewrite_snapshots_as_json(lake, "old") >= 1

    reopened = Lake.open(lake.config).pool("old")
    snap = reopened.snapshot(reopened.tip("main"))
    assert dict(snap.objects) == want_objects
    assert read_all(reopened).sort_by("k").equals(want_rows)
    assert reopened.count().rows == want_rows.num_rows
    assert_objects_intact(reopened)
    # New commits on top: the next cached snapshot is written in the new format, and the
    # pool reads the same through either.
    for i in range(SNAPSHOT_INTERVAL):
        reopened.load(pa.table({"k": pa.array([10_000 + i], pa.int64())}))
    formats = {
        reopened.store.get(i.key)[:1]
        for i in reopened.store.list(reopened.layout.commits_dir)
        if i.key.endswith(".snap")
    }
    assert formats == {b"{", b"A"}
    fresh = Lake.open(lake.config).pool("old")
    assert fresh.count().rows == want_rows.num_rows + SNAPSHOT_INTERVAL
    got = fresh.scan(where="k >= 9 AND k < 20").to_table()
    assert sorted(got.column("k").to_pylist()) == [
        v for v in want_rows.column("k").to_pylist() if 9 <= v < 20
    ]
    assert_objects_intact(fresh)
