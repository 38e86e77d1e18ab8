"""``lake optimize`` (Pool.optimize): an OTree pool with appends, older revisions and unindexed
objects becomes one tree in its latest revision — same rows, same weights, so the same samples
— idempotently, and racing loads (real processes, local and S3) keep their rows."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest

from lake_core import Lake, LakeConfig
from lake_core.errors import CommitConflictError, RetriesExhaustedError, UsageError
from lake_core.otree.blocks import revision_of
from lake_core.otree.optimize import needs_optimize
from lake_core.otree.settings import parse_layout
from tests import processes
from tests.otreecheck import brute_sample, check_otree_invariants, rows_of


def _batch(n: int, seed: int, scale: float = 1.0, start: int = 0) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "id": pa.array(np.arange(start, start + n), pa.int64()),
            "x": rng.normal(0, scale, n),
            "y": rng.random(n) * scale,
        }
    )


def test_optimize_rewrites_into_one_tree_keeping_rows_and_samples(lake: Lake) -> None:
    pool = lake.create_pool("t", "id", otree=parse_layout("x,y", 300))
    pool.load(_batch(3_000, 1))
    pool.load(_batch(500, 2, start=3_000))  # appended into revision 1: split cubes
    pool.load(_batch(500, 3, scale=4.0, start=3_500))  # revision 2
    pool.delete("x > 2.5")  # rewrites into unindexed objects
    pool = lake.pool("t")
    layout = pool.config.otree
    assert layout is not None
    before = pool.read()
    samples = {f: pool.scan(sample=f).to_table() for f in (0.01, 0.1, 0.5)}
    assert needs_optimize(layout, list(pool.snapshot(pool.tip()).objects.values()))
    result = pool.optimize()
    assert result.commit is not None and result.rows == before.num_rows
    assert result.commit.layout_only
    pool = lake.pool("t")
    latest = pool.config.otree.latest  # type: ignore[union-attr]
    assert latest is not None and result.revision == latest.id
    objects = list(pool.snapshot(pool.tip()).objects.values())
    assert {revision_of(o) for o in objects} == {latest.id}
    counts = check_otree_invariants(pool)
    assert counts["unindexed"] == 0
    cols = before.schema.names
    after = pool.read()
    assert rows_of(after, cols) == rows_of(before, cols)  # rows and their weights
    for f, sample in samples.items():
        again = pool.scan(sample=f).to_table()
        assert (
            rows_of(again, cols) == rows_of(sample, cols) == rows_of(brute_sample(after, f), cols)
        )
    assert pool.optimize().commit is None  # idempotent
    # History sees no change of rows: reverting the optimize is refused as empty or a no-op.
    assert pool.read(result.commit.parent).num_rows == after.num_rows


def test_optimize_refuses_sorted_pools_and_has_nothing_to_do_on_fresh_trees(lake: Lake) -> None:
    plain = lake.create_pool("plain", "id")
    plain.load(pa.table({"id": [1]}))
    with pytest.raises(UsageError, match="OTree"):
        plain.optimize()
    pool = lake.create_pool("t", "id", otree=parse_layout("x,y", 300))
    assert pool.optimize().commit is None  # empty
    pool.load(_batch(2_000, 1))
    assert pool.optimize().commit is None  # one fresh build


def optimizer(uri: str, rounds: int, start: object, out: object) -> None:
    pool = Lake.open(LakeConfig(uri=uri, user="optimizer")).pool("race")
    start.wait()  # type: ignore[attr-defined]
    done = 0
    for _ in range(rounds):
        try:
            if pool.optimize().commit is not None:
                done += 1
        except (CommitConflictError, RetriesExhaustedError):
            pass
    out.put(("optimize", done))  # type: ignore[attr-defined]


def appender(uri: str, loads: int, start: object, out: object) -> None:
    pool = Lake.open(LakeConfig(uri=uri, user="loader")).pool("race")
    start.wait()  # type: ignore[attr-defined]
    for i in range(loads):
        pool.load(_batch(200, 100 + i, scale=1.0 + i, start=10_000 + i * 1_000))
    out.put(("load", loads))  # type: ignore[attr-defined]


@pytest.mark.slow
def test_optimize_races_loads(lake: Lake, lake_uri: str) -> None:
    pool = lake.create_pool("race", "id", otree=parse_layout("x,y", 100))
    pool.load(_batch(1_500, 1))
    ctx = processes.context()
    start = ctx.Barrier(2)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=appender, args=(lake_uri, 5, start, out)),
        ctx.Process(target=optimizer, args=(lake_uri, 5, start, out)),
    ]
    for p in procs:
        p.start()
    reports = dict(out.get(timeout=600) for _ in procs)
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert reports["load"] == 5
    pool = Lake.open(LakeConfig(uri=lake_uri)).pool("race")
    want = list(range(1_500)) + [10_000 + i * 1_000 + j for i in range(5) for j in range(200)]
    table = pool.read()
    assert sorted(table["id"].to_pylist()) == sorted(want)
    check_otree_invariants(pool)
    pool.optimize()
    pool = Lake.open(LakeConfig(uri=lake_uri)).pool("race")
    assert sorted(pool.read()["id"].to_pylist()) == sorted(want)
    got = pool.scan(sample=0.2).to_table()
    assert sorted(got["id"].to_pylist()) == sorted(brute_sample(table, 0.2)["id"].to_pylist())
