"""The OTree layout's pieces: cube ids (Qbeast's codec), the level-wise construction, revisions,
the pruning rule, and loads into OTree pools on local disk and S3 (issue 16)."""

from __future__ import annotations

import random
from datetime import UTC, date, datetime, timedelta

import numpy as np
import pyarrow as pa
import pytest

from lake_core import Lake
from lake_core.errors import UsageError
from lake_core.otree.blocks import blocks_of, revision_of
from lake_core.otree.build import assign_cubes, build_tree
from lake_core.otree.cubes import Cube, cube_of, depth_limit, lattice, morton
from lake_core.otree.revisions import (
    Revision,
    Transformation,
    bound_coordinates,
    coordinates,
    first_revision,
    next_revision,
)
from lake_core.otree.settings import OTreeLayout, parse_layout
from lake_core.otree.weights import MAX_WEIGHT, WEIGHT_COLUMN
from tests.otreecheck import brute_sample, check_otree_invariants, rows_of


def _path(point: tuple[float, ...], depth: int) -> list[str]:
    dims = len(point)
    q = np.stack([lattice(np.array([v]), dims) for v in point], axis=1)
    code = int(morton(q)[0])
    return [cube_of(code, level, dims).to_string() for level in range(1, depth + 1)]


def test_cube_ids_are_qbeasts() -> None:
    # The anchor's examples, checked there against Qbeast's CubeIdTest.
    assert _path((0.6, 0.3), 3) == ["g", "gQ", "gQA"]
    assert _path((0.9, 0.9), 2) == ["w", "ww"]
    assert _path((0.1, 0.2), 3) == ["A", "AA", "AAQ"]
    assert _path((0.3, 0.8), 2) == ["Q", "Qw"]
    assert _path((0.7, 0.2, 0.9), 2) == ["o", "oI"]
    assert _path((0.9,) * 7, 1) == ["/g"]
    assert Cube.from_string("", 2) == Cube(2, 0, 0)


def test_cube_codec_round_trips_and_orders_in_pre_order() -> None:
    rng = random.Random(3)
    for dims in (1, 2, 3, 6, 7):
        cubes = []
        for _ in range(200):
            depth = rng.randint(0, min(6, depth_limit(dims)))
            cube = Cube(dims, depth, rng.getrandbits(dims * depth) if depth else 0)
            assert Cube.from_string(cube.to_string(), dims) == cube
            if depth:
                assert cube.to_string().startswith(cube.parent().to_string())
            cubes.append(cube)
        # Pre-order: every ancestor sorts before its descendants.
        ordered = sorted(cubes, key=Cube.sort_key)
        for i, c in enumerate(ordered):
            for d in ordered[:i]:
                assert not (d.depth > c.depth and d.to_string().startswith(c.to_string()))
    with pytest.raises(ValueError):
        Cube.from_string("g!", 2)
    with pytest.raises(ValueError):
        Cube.from_string("B", 2)  # sets a bit of no dimension


def test_cube_boxes_hold_their_points() -> None:
    rng = np.random.default_rng(0)
    x = rng.random((500, 3))
    q = np.stack([lattice(x[:, i], 3) for i in range(3)], axis=1)
    codes = morton(q)
    for row in range(500):
        for depth in range(0, 6):
            box = cube_of(int(codes[row]), depth, 3).lattice_box()
            assert all(lo <= q[row, i] <= hi for i, (lo, hi) in enumerate(box))


@pytest.mark.parametrize("dims", [1, 2, 3])
def test_construction_invariants(dims: int) -> None:
    rng = np.random.default_rng(dims)
    n, size = 20_000, 300
    q = np.stack([lattice(rng.beta(2, 5, n), dims) for _ in range(dims)], axis=1)
    w = rng.integers(-(2**31), 2**31 - 1, n).astype(np.int32)
    depth_of, codes, thresholds = assign_cubes(q, w, size)
    assert (depth_of >= 0).all()
    limit = depth_limit(dims)
    counts: dict[tuple[int, int], int] = {}
    for row in range(n):
        d = int(depth_of[row])
        prefix = int(codes[row]) >> (dims * (limit - d))
        counts[(d, prefix)] = counts.get((d, prefix), 0) + 1
        # Every ancestor is an inner cube whose threshold the row's weight exceeds.
        for a in range(d):
            anc = (a, int(codes[row]) >> (dims * (limit - a)))
            assert anc in thresholds and w[row] > thresholds[anc]
        if (d, prefix) in thresholds:
            assert w[row] <= thresholds[(d, prefix)]
    for cube in thresholds:
        assert counts[cube] == size  # distinct weights: exactly C rows in an inner cube
    for cube, count in counts.items():
        if cube not in thresholds:
            assert count <= size
    tree = build_tree(q, w, size, rollup=size * 4)
    rows = np.concatenate([b.rows for b in tree.blocks])
    assert sorted(rows.tolist()) == list(range(n))  # every row exactly once
    for obj in tree.objects:
        keys = [b.cube.sort_key() for b in obj]
        assert keys == sorted(keys)
        for b in obj:
            assert b.max_weight == thresholds.get((b.cube.depth, b.cube.prefix), MAX_WEIGHT)


def test_equal_weights_stay_together() -> None:
    # Repeated values hash alike: a cube takes every tie of its threshold (more than C rows).
    q = np.zeros((1000, 2), dtype=np.int64)
    w = np.full(1000, 7, dtype=np.int32)
    depth_of, _, thresholds = assign_cubes(q, w, 10)
    assert (depth_of == 0).all() and thresholds == {(0, 0): 7}


def test_revisions_widen_by_union_and_map_bounds_monotonically() -> None:
    rng = random.Random(1)
    t = pa.table(
        {
            "x": pa.array([1.0, 5.0, None]),
            "d": pa.array([date(2020, 1, 1), date(2020, 3, 1), None]),
            "s": ["a", "b", None],
        }
    )
    r1 = first_revision(t, ["x", "d", "s"], 100, 0, rng)
    assert [k.kind for k in r1.transformations] == ["linear", "linear", "hash"]
    assert r1.transformations[0].minimum == 1.0 and r1.transformations[0].maximum == 5.0
    assert Revision.from_json(r1.to_json()) == r1
    assert next_revision(r1, t.slice(0, 2), 1, rng) is None  # inside: no new revision
    r2 = next_revision(r1, pa.table({"x": [7.0], "d": [date(2019, 1, 1)], "s": ["z"]}), 2, rng)
    assert r2 is not None and r2.id == 2
    assert (r2.transformations[0].minimum, r2.transformations[0].maximum) == (1.0, 7.0)
    assert r2.transformations[1].minimum < r1.transformations[1].minimum
    # A bound maps to a lattice range that brackets every row inside it.
    values = pa.table({"x": pa.array(np.linspace(1, 7, 1001))})
    rev = Revision(3, ("x",), 10, (Transformation("linear", 1.0, 7.0, 4.0),))
    q = coordinates(values, rev)[:, 0]
    for lo, hi in [(2.5, 3.5), (1.0, 1.0), (6.9, 7.0), (3.0, 3.0000001)]:
        b = bound_coordinates(rev, 0, (lo, True, hi, True), pa.float64())
        assert b is not None
        inside = (values["x"].to_numpy() >= lo) & (values["x"].to_numpy() <= hi)
        assert (q[inside] >= b[0]).all() and (q[inside] <= b[1]).all()


def test_identity_column_becomes_linear_when_values_differ() -> None:
    rng = random.Random(2)
    r1 = first_revision(pa.table({"x": [3, 3]}), ["x"], 10, 0, rng)
    assert r1.transformations[0].kind == "identity"
    r2 = next_revision(r1, pa.table({"x": [1, 9]}), 0, rng)
    assert r2 is not None and r2.transformations[0].kind == "linear"
    assert (r2.transformations[0].minimum, r2.transformations[0].maximum) == (1.0, 9.0)


def test_layout_settings_are_checked() -> None:
    assert parse_layout("a, b", 10).columns == ("a", "b")
    for bad in ["", "a,,b", "a,a", ",".join("abcdefg"), "_lake_weight"]:
        with pytest.raises(UsageError):
            parse_layout(bad)
    with pytest.raises(UsageError):
        parse_layout("a", 0)
    with pytest.raises(UsageError):
        parse_layout("a", weight="random")
    layout = OTreeLayout(("a",), 5)
    assert OTreeLayout.from_options(layout.to_options()) == layout


def test_otree_pool_refuses_unique_and_partitions(lake: Lake) -> None:
    with pytest.raises(UsageError):
        lake.create_pool("u", "id", unique=True, otree=parse_layout("x"))
    with pytest.raises(UsageError):
        lake.create_pool("p", "id", partition_by="x", otree=parse_layout("x"))
    assert [p.name.name for p in lake.pools()] == []


def _trips(n: int, seed: int, scale: float = 1.0, start: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    base = datetime(2024, 1, 1, tzinfo=UTC)
    return pa.table(
        {
            "id": np.arange(start, start + n),
            "lon": rng.normal(0, scale, n),
            "lat": rng.random(n) * scale,
            "fare": rng.integers(0, 100, n),
            "ts": pa.array([base + timedelta(minutes=int(m)) for m in rng.integers(0, 10**5, n)]),
            "kind": pa.array(rng.choice(["a", "b", "c", None], n).tolist(), pa.string()),
        }
    )


def test_load_sample_and_box_queries_equal_brute_force(lake: Lake) -> None:
    pool = lake.create_pool("trips", "id", otree=parse_layout("lon,lat,ts", 500))
    pool.load(_trips(20_000, 1))
    pool.load(_trips(3_000, 2, scale=3.0, start=20_000))  # outside: a second revision
    inside = _trips(2_000, 3, scale=0.5, start=23_000)
    ts = pa.array([datetime(2024, 1, 2, tzinfo=UTC)] * 2_000)
    pool.load(inside.set_column(inside.schema.get_field_index("ts"), "ts", ts))  # inside rev 2
    pool = lake.pool("trips")
    assert [r.id for r in pool.config.otree.revisions] == [1, 2]  # type: ignore[union-attr]
    revs = sorted(revision_of(o) for o in pool.snapshot(pool.tip()).objects.values())
    assert set(revs) == {1, 2}
    counts = check_otree_invariants(pool)
    assert counts["unindexed"] == 0 and counts["blocks"] > 20
    full = pool.read()
    assert full.num_rows == 25_000 and full.schema.field(WEIGHT_COLUMN).type == pa.int32()
    columns = [c for c in full.schema.names]
    for f in (0.001, 0.01, 0.05, 0.1, 0.37, 0.5, 0.99, 1.0):
        scan = pool.scan(sample=f)
        got = scan.to_table()
        assert rows_of(got, columns) == rows_of(brute_sample(full, f), columns), f
        if f <= 0.1:
            assert scan.stats.rows_read < full.num_rows * (3 * f + 0.05), (f, scan.stats)
    queries = [
        "lon BETWEEN -0.5 AND 0.2 AND lat > 0.3 AND lat <= 0.4",
        "lon > 2.5",
        "lat < 0.01 OR lat > 2.99",
        "ts >= TIMESTAMP '2024-01-10 00:00:00' AND ts < TIMESTAMP '2024-01-12 00:00:00'",
        "lon = 0.0",
        "lat IN (0.5, 0.25)",
        "kind = 'b' AND lon < -1",
        "fare = 7",
    ]

    from lake_core.expr import parse_predicate, to_arrow_expression

    for where in queries:
        scan = pool.scan(where=where)
        got = scan.to_table()
        want = full.filter(to_arrow_expression(parse_predicate(where), full.schema))
        assert rows_of(got, columns) == rows_of(want, columns), where
        sampled = pool.scan(where=where, sample=0.2).to_table()
        assert rows_of(sampled, columns) == rows_of(brute_sample(want, 0.2), columns), where
    box = pool.scan(where="lon BETWEEN -0.2 AND 0.0 AND lat BETWEEN 0.1 AND 0.2")
    box.to_table()
    stats = box.stats.to_json()
    assert stats["otree_row_groups_pruned"] + stats["otree_objects_pruned"] > 0
    assert stats["rows_read"] < full.num_rows / 4


def test_sample_needs_an_otree_pool_and_a_fraction(lake: Lake) -> None:
    plain = lake.create_pool("plain", "id")
    plain.load(pa.table({"id": [1, 2]}))
    with pytest.raises(UsageError, match="OTree"):
        plain.scan(sample=0.1)
    pool = lake.create_pool("t", "id", otree=parse_layout("x", 10))
    pool.load(pa.table({"id": [1, 2, 3], "x": [1.0, 2.0, 3.0]}))
    for bad in (0.0, -0.1, 1.5, float("nan")):
        with pytest.raises(UsageError):
            pool.scan(sample=bad)


def test_blocks_tags_are_qbeasts(lake: Lake) -> None:
    pool = lake.create_pool("t", "id", otree=parse_layout("lon,lat", 100))
    pool.load(_trips(2_000, 4))
    obj = next(iter(pool.snapshot(pool.tip()).objects.values()))
    import json

    items = json.loads(obj.tags["blocks"])
    assert obj.tags["revision"] == "1"
    assert set(items[0]) == {"cubeId", "minWeight", "maxWeight", "elementCount"}
    assert items[0]["cubeId"] == ""  # the root comes first
    blocks = blocks_of(obj, 2)
    assert blocks is not None and sum(b.count for b in blocks) == obj.count


def test_all_null_and_constant_columns_still_load(lake: Lake) -> None:
    pool = lake.create_pool("t", "id", otree=parse_layout("x,s", 10))
    pool.load(
        pa.table({"id": list(range(100)), "x": pa.nulls(100, pa.float64()), "s": ["k"] * 100})
    )
    pool.load(
        pa.table({"id": list(range(100, 150)), "x": [float(i) for i in range(50)], "s": ["z"] * 50})
    )
    pool = lake.pool("t")
    check_otree_invariants(pool)
    full = pool.read()
    assert full.num_rows == 150
    assert rows_of(pool.scan(sample=0.3).to_table(), ["id"]) == rows_of(
        brute_sample(full, 0.3), ["id"]
    )


def test_revision_forgotten_by_a_catalog_rollback_is_never_misread(lake: Lake) -> None:
    """A catalog rollback forgets revision 2; the next wide load makes another revision 2. The
    first one's objects keep their tag: they must be read whole, not mapped by the newcomer."""
    from lake_core.expr import parse_predicate, to_arrow_expression

    pool = lake.create_pool("t", "id", otree=parse_layout("lon,lat", 200))
    pool.load(_trips(3_000, 1))
    before_wide = lake.catalog.latest_version()
    assert before_wide is not None
    pool.load(_trips(3_000, 2, scale=5.0, start=3_000))  # revision 2: x in about ±20
    lake.catalog.rollback(before_wide)
    pool = lake.pool("t")
    assert [r.id for r in pool.config.otree.revisions] == [1]  # type: ignore[union-attr]
    shifted = _trips(3_000, 3, start=6_000)
    shifted = shifted.set_column(1, "lon", pa.array(np.linspace(100, 200, 3_000)))
    pool.load(shifted)  # another revision 2, of lon 100..200
    pool = lake.pool("t")
    layout = pool.config.otree
    assert layout is not None and [r.id for r in layout.revisions] == [1, 2]
    counts = check_otree_invariants(pool, forgotten_ok=True)
    assert counts["forgotten"] >= 1
    full = pool.read()
    cols = full.schema.names
    for where in ("lon > 3 AND lon < 12", "lon < -4", "lat > 4", "lon > 150"):
        want = full.filter(to_arrow_expression(parse_predicate(where), full.schema))
        assert rows_of(pool.scan(where=where).to_table(), cols) == rows_of(want, cols), where
        assert want.num_rows > 0, where


def test_key_order_merges_are_refused_and_change_nothing(lake: Lake) -> None:
    pool = lake.create_pool("t", "id", otree=parse_layout("lon,lat", 100))
    pool.load(_trips(1_000, 1))
    pool.load(_trips(1_000, 2, start=1_000))
    tip = pool.tip()
    for op in (
        lambda: pool.compact(),
        lambda: pool.dedupe(),
        lambda: pool.upsert([_trips(10, 3)]),
    ):
        with pytest.raises(UsageError, match="OTree"):
            op()
    assert pool.tip() == tip
    assert lake.pool("t").read().num_rows == 2_000
