"""Several real OS processes commit to one pool at once, on local disk and on moto S3."""

from __future__ import annotations

import pytest

from lake_core import Lake, LakeConfig
from tests import processes
from tests.lakecheck import assert_journal_dense, assert_objects_intact, read_all
from tests.workers import commit_loads

WORKERS = 8
LOADS = 25


@pytest.mark.slow
def test_eight_processes_commit_twenty_five_loads_each(lake: Lake, lake_uri: str) -> None:
    lake.create_pool("race", "ts:asc")
    ctx = processes.context()
    start = ctx.Barrier(WORKERS)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=commit_loads, args=(lake_uri, "race", w, LOADS, start, out))
        for w in range(WORKERS)
    ]
    for p in procs:
        p.start()
    reported = dict(out.get(timeout=600) for _ in procs)
    for p in procs:
        p.join(60)
        assert p.exitcode == 0

    pool = Lake.open(LakeConfig(uri=lake_uri)).pool("race")
    log = list(pool.log())
    assert len(log) == WORKERS * LOADS
    acknowledged = {c for ids in reported.values() for c in ids}
    assert {c.id for c in log} == acknowledged
    # Journal: entry 1 created main, then exactly one entry per commit, no gaps.
    assert assert_journal_dense(pool) == WORKERS * LOADS + 1
    # Parent chain is linear and each commit's depth is its position.
    assert [c.depth for c in log] == list(range(WORKERS * LOADS, 0, -1))

    table = read_all(pool)
    got = sorted(
        zip(table["w"].to_pylist(), table["i"].to_pylist(), table["j"].to_pylist(), strict=True)
    )
    want = sorted((w, i, j) for w in range(WORKERS) for i in range(LOADS) for j in range(3))
    assert got == want  # every record exactly once
    assert table["ts"].to_pylist() == sorted(table["ts"].to_pylist())
    assert_objects_intact(pool)
