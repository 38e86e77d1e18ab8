"""A store without conditional writes: journal appends are serialised by the pool's ZooKeeper
journal lock (Zed's lock-service strategy) instead of put-if-missing."""

from __future__ import annotations

import pytest

from lake_core import Lake, LakeConfig
from lake_core.stores.s3 import S3ObjectStore
from tests import processes
from tests.lakecheck import assert_journal_dense
from tests.workers import commit_loads_locked

WORKERS, LOADS = 6, 10


@pytest.mark.slow
def test_racing_commits_without_conditional_writes_use_the_journal_lock(
    s3_bucket: str, zookeeper: object
) -> None:
    uri = f"s3://{s3_bucket}/nocond"
    hosts = zookeeper.hosts  # type: ignore[attr-defined]
    config = LakeConfig(uri=uri, zookeeper=hosts, conditional_writes=False)
    lake = Lake.init(config)
    assert isinstance(lake.store, S3ObjectStore) and not lake.store.conditional_writes
    pool = lake.create_pool("nc", "ts:asc")
    assert pool.journal.append_lock is not None
    ctx = processes.context()
    start, out = ctx.Barrier(WORKERS), ctx.Queue()
    procs = [
        ctx.Process(target=commit_loads_locked, args=(uri, hosts, "nc", w, LOADS, start, out))
        for w in range(WORKERS)
    ]
    for p in procs:
        p.start()
    reported = dict(out.get(timeout=600) for _ in procs)
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    fresh = Lake.open(config).pool("nc")
    log = list(fresh.log())
    assert {c.id for c in log} == {c for ids in reported.values() for c in ids}
    assert assert_journal_dense(fresh) == WORKERS * LOADS + 1
    t = fresh.read()
    got = sorted(zip(t["w"].to_pylist(), t["i"].to_pylist(), t["j"].to_pylist(), strict=True))
    assert got == sorted((w, i, j) for w in range(WORKERS) for i in range(LOADS) for j in range(3))
