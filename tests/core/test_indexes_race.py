"""Real OS processes race loads, ``index apply`` and compaction on one indexed pool, on local
disk and on moto S3: every row lands exactly once, every live object ends indexed exactly once
by the rule, no entry outlives its object, and a lookup by index returns exactly its rows."""

from __future__ import annotations

import pyarrow as pa
import pytest

from lake_core import Lake, LakeConfig
from lake_core.indexes.apply import apply_rule
from tests import processes
from tests.core.test_indexes import check_index_invariant
from tests.lakecheck import assert_objects_intact, read_all
from tests.workers_index import applier, compactor, loader

LOADERS = 3
LOADS = 8


@pytest.mark.slow
def test_loads_apply_and_compaction_race(lake: Lake, lake_uri: str) -> None:
    lake.create_pool("race", "ts:asc")
    # Objects from before the rule: the applier has work while loaders add indexed ones.
    early = lake.pool("race")
    for i in range(4):
        early.load(
            pa.table(
                {
                    "ts": pa.array([900_000 + i * 10 + j for j in range(5)], pa.int64()),
                    "user": [f"early-{i}"] * 5,
                    "w": pa.array([-1] * 5, pa.int64()),
                }
            )
        )
    lake.create_index_rule("by_user", "user")
    ctx = processes.context()
    start = ctx.Barrier(LOADERS + 2)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=loader, args=(lake_uri, "race", w, LOADS, start, out))
        for w in range(LOADERS)
    ]
    procs.append(ctx.Process(target=applier, args=(lake_uri, "race", "by_user", 6, start, out)))
    procs.append(ctx.Process(target=compactor, args=(lake_uri, "race", 6, start, out)))
    for p in procs:
        p.start()
    reports = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0

    lake2 = Lake.open(LakeConfig(uri=lake_uri))
    pool = lake2.pool("race")
    acknowledged = {c for kind, _, ids in reports if kind == "load" for c in ids}
    assert len(acknowledged) == LOADERS * LOADS
    table = read_all(pool)
    got = sorted(zip(table["ts"].to_pylist(), table["user"].to_pylist(), strict=True))
    want = sorted(
        [(w * 100_000 + i * 100 + j, f"w{w}-{i}-{j % 4}") for w in range(LOADERS) for i in range(LOADS) for j in range(20)]
        + [(900_000 + i * 10 + j, f"early-{i}") for i in range(4) for j in range(5)]
    )
    assert got == want  # every row exactly once
    assert_objects_intact(pool)
    apply_rule(pool, lake2.index_rule("by_user"))  # whatever the race left unindexed
    snap = check_index_invariant(pool)
    assert len(snap.indexes) == len(snap.objects)
    for user in ("w1-3-2", "early-2", "w2-7-0"):
        scan = pool.scan(where=f"user = '{user}'")
        rows = pa.Table.from_batches(list(scan.batches()), schema=scan.out_schema)
        assert sorted(rows["ts"].to_pylist()) == sorted(ts for ts, u in want if u == user)
