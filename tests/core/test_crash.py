"""A writer killed with SIGKILL at random moments never leaves a half commit, and every commit
it acknowledged is there. Real processes, real stores (local disk and moto S3)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lake_core import Lake, LakeConfig
from tests.lakecheck import assert_journal_dense, assert_objects_intact, read_all

TRIALS = 30
ROOT = Path(__file__).resolve().parents[2]


def _spawn_writer(uri: str, worker: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.workers", uri, "crash", str(worker)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


@pytest.mark.slow
def test_sigkill_during_loads_leaves_lake_consistent(lake: Lake, lake_uri: str) -> None:
    lake.create_pool("crash", "ts:asc")
    rng = random.Random(20261121)
    acknowledged: dict[str, tuple[int, int]] = {}
    for trial in range(TRIALS):
        proc = _spawn_writer(lake_uri, trial)
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read() if proc.stderr else ""
        time.sleep(rng.uniform(0.0, 0.4))
        proc.send_signal(signal.SIGKILL)
        out, _ = proc.communicate(timeout=30)
        for line in out.splitlines():
            if line.startswith("committed "):
                _, cid, i = line.split()
                acknowledged[cid] = (trial, int(i))

        # After every kill: the lake opens, every acknowledged commit is in the log, the
        # journal is dense, and the live data is exactly the rows of the logged commits.
        pool = Lake.open(LakeConfig(uri=lake_uri)).pool("crash")
        log = {c.id: c for c in pool.log()}
        missing = set(acknowledged) - set(log)
        assert not missing, f"trial {trial}: acknowledged commits lost: {missing}"
        assert_journal_dense(pool)
        assert_objects_intact(pool)
        table = read_all(pool)
        assert table.num_rows == 50 * len(log)
        if not log:
            continue  # killed before its first commit (imports are lazy): nothing to compare
        got = sorted(zip(table["w"].to_pylist(), table["i"].to_pylist(), strict=True))
        want = sorted(
            (int(c.message.split()[1]), int(c.message.split()[2]))
            for c in log.values()
            for _ in range(50)
        )
        assert got == want
    assert len(acknowledged) > 0, "the writer never got a commit in: the test proved nothing"
