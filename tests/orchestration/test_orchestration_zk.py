"""Maintenance under a real ZooKeeper: two compaction runs of the shipped code location,
launched together as separate `dagster job execute` processes, contend for the pool's
maintenance lock; exactly one commits, the other plans afresh and finds nothing to do."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from kazoo.client import KazooClient

from lake_core import Lake, LakeConfig
from lake_core.loading import load

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
DAGSTER = str(Path(sys.executable).parent / "dagster")
POOLS = """
pools:
  - name: events
    key: [ts]
    order: asc
    maintenance: {lock_timeout: 5m}
"""


def test_two_compaction_runs_never_both_commit(zookeeper: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "lake")
    Lake.init(uri)
    lake = Lake.open(LakeConfig(uri=uri, zookeeper=zookeeper.hosts, user="test"))
    pool = lake.create_pool("events", "ts:asc")
    for i in range(6):  # six overlapping loads: one compaction run of six objects
        load(pool, [pa.table({"ts": list(range(i, 600, 6))})])
    (tmp_path / "pools.yaml").write_text(POOLS)
    env = {
        **os.environ,
        "LAKE_ROOT": uri,
        "LAKE_ZOOKEEPER": zookeeper.hosts,
        "LAKE_POOLS_CONFIG": str(tmp_path / "pools.yaml"),
    }
    lock_path = f"/lakepool/{lake.id}/pools/{pool.id}/maintenance"
    procs: list[subprocess.Popen[str]] = []
    zk = KazooClient(hosts=zookeeper.hosts)
    zk.start(timeout=15)
    try:
        with lake.locks() as locks, locks.maintenance_lock(pool.id, timeout=10):
            # While we hold the lock, both runs start and queue behind us: when we let go,
            # they really are contending, not merely running one after the other.
            for n in range(2):
                home = tmp_path / f"home{n}"
                home.mkdir()
                (home / "dagster.yaml").write_text("telemetry: {enabled: false}\n")
                procs.append(
                    subprocess.Popen(
                        [DAGSTER, "job", "execute", "-m", "lake_orchestration.definitions"]
                        + ["-j", "compact_events"],
                        cwd=ROOT,
                        env={**env, "DAGSTER_HOME": str(home)},
                        stdout=subprocess.PIPE,
                        stderr=subprocess.STDOUT,
                        text=True,
                        start_new_session=True,
                    )
                )
            deadline = time.monotonic() + 180
            while len(zk.get_children(lock_path)) < 3:
                assert time.monotonic() < deadline, "the runs never queued for the lock"
                assert all(p.poll() is None for p in procs), "a run ended before the lock"
                time.sleep(0.2)
        outputs = [p.communicate(timeout=300)[0] for p in procs]
        assert [p.returncode for p in procs] == [0, 0], "\n".join(o[-3000:] for o in outputs)
    finally:
        zk.stop()
        zk.close()
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()

    compactions = [c for c in pool.log() if c.extra.get("kind") == "compaction"]
    assert len(compactions) == 1
    assert sum("nothing to compact" in o for o in outputs) == 1
    assert sum(f"{compactions[0].id} committed" in o for o in outputs) == 1
    ts = pool.read().column("ts").to_pylist()
    assert sorted(ts) == list(range(600))  # every row exactly once
