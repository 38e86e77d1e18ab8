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
    """A writer that starts up (reading only) and waits for "go" on stdin before loading."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.workers", uri, "crash", str(worker)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _check(
    uri: str, trial: int, acknowledged: dict[str, tuple[int, int]], intact: set[str]
) -> None:
    """After every kill: the lake opens, every acknowledged commit is in the log, the journal
    is dense, and the live data is exactly the rows of the logged commits."""
    pool = Lake.open(LakeConfig(uri=uri)).pool("crash")
    log = {c.id: c for c in pool.log()}
    missing = set(acknowledged) - set(log)
    assert not missing, f"trial {trial}: acknowledged commits lost: {missing}"
    assert_journal_dense(pool)
    assert_objects_intact(pool, checked=intact)
    table = read_all(pool)
    assert table.num_rows == 50 * len(log)
    if not log:
        return  # killed before its first commit (imports are lazy): nothing to compare
    got = sorted(zip(table["w"].to_pylist(), table["i"].to_pylist(), strict=True))
    want = sorted(
        (int(c.message.split()[1]), int(c.message.split()[2]))
        for c in log.values()
        for _ in range(50)
    )
    assert got == want


@pytest.mark.slow
def test_sigkill_during_loads_leaves_lake_consistent(lake: Lake, lake_uri: str) -> None:
    lake.create_pool("crash", "ts:asc")
    rng = random.Random(20261121)
    acknowledged: dict[str, tuple[int, int]] = {}
    intact: set[str] = set()  # objects checked already (immutable; all re-checked at the end)
    proc = _spawn_writer(lake_uri, 0)
    try:
        for trial in range(TRIALS):
            assert proc.stdin is not None and proc.stdout is not None
            ready = proc.stdout.readline().strip()
            assert ready == "ready", proc.stderr.read() if proc.stderr else ""
            proc.stdin.write("go\n")
            proc.stdin.flush()
            time.sleep(rng.uniform(0.0, 0.4))
            proc.send_signal(signal.SIGKILL)
            out, _ = proc.communicate(timeout=30)
            for line in out.splitlines():
                if line.startswith("committed "):
                    _, cid, i = line.split()
                    acknowledged[cid] = (trial, int(i))
            if trial + 1 < TRIALS:
                # The next writer starts up (imports, open, warm-up: reads only; it loads
                # only on "go") while this trial's checks run: nothing writes meanwhile.
                proc = _spawn_writer(lake_uri, trial + 1)
            _check(lake_uri, trial, acknowledged, intact)
    finally:
        if proc.poll() is None:  # a check failed: the next writer must not outlive the test
            proc.kill()
            proc.communicate(timeout=30)
    assert len(acknowledged) > 0, "the writer never got a commit in: the test proved nothing"
    # Every live object once more: none that an earlier check passed was damaged since.
    assert_objects_intact(Lake.open(LakeConfig(uri=lake_uri)).pool("crash"))
