"""A writer killed with SIGKILL at random moments never leaves a half commit, and every commit
it acknowledged is there. Real processes, real stores (local disk and moto S3). The pool has a
search-index rule, so every load also builds and writes an index object before its commit:
kills land there too, and every index entry must name a live object whose index file is
there (a killed build leaves only an orphan file)."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from lake_core import Lake, LakeConfig
from tests.core.test_indexes import check_index_invariant
from tests.lakecheck import assert_journal_dense, assert_objects_intact, read_all

TRIALS = 20  # about 2 s each on S3; kill times uniform over the first 0.4 s of a load
ROOT = Path(__file__).resolve().parents[2]


def _spawn_writer(uri: str, worker: int) -> subprocess.Popen[str]:
    """A writer that imports, then waits for "open" and "go" on stdin (see crash_writer)."""
    return subprocess.Popen(
        [sys.executable, "-m", "tests.workers", uri, "crash", str(worker)],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )


def _tell(proc: subprocess.Popen[str], line: str) -> None:
    assert proc.stdin is not None
    proc.stdin.write(line + "\n")
    proc.stdin.flush()


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
    check_index_invariant(pool)  # the rule predates every load: every object indexed
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
    # A lookup through the index finds exactly one writer's rows.
    worker = want[len(want) // 2][0]
    scan = pool.scan(where=f"w = {worker}")
    found = pa.Table.from_batches(list(scan.batches()), schema=scan.out_schema)
    assert sorted(found["i"].to_pylist()) == sorted(i for w, i in want if w == worker)


@pytest.mark.slow
def test_sigkill_during_loads_leaves_lake_consistent(lake: Lake, lake_uri: str) -> None:
    lake.create_pool("crash", "ts:asc")
    lake.create_index_rule("by_w", "w")  # exact: no DuckDB import shifts the kill times
    rng = random.Random(20261121)
    acknowledged: dict[str, tuple[int, int]] = {}
    intact: set[str] = set()  # objects checked already (immutable; all re-checked at the end)
    # Writer N+1 imports while writer N loads, and opens the lake (reads only) while the
    # test checks what writer N left; it loads only on "go". Nothing else writes meanwhile.
    proc = _spawn_writer(lake_uri, 0)
    _tell(proc, "open")
    following: subprocess.Popen[str] | None = None
    try:
        for trial in range(TRIALS):
            assert proc.stdout is not None
            ready = proc.stdout.readline().strip()
            assert ready == "ready", proc.stderr.read() if proc.stderr else ""
            _tell(proc, "go")
            kill_at = time.monotonic() + rng.uniform(0.0, 0.4)
            following = _spawn_writer(lake_uri, trial + 1) if trial + 1 < TRIALS else None
            time.sleep(max(0.0, kill_at - time.monotonic()))
            proc.send_signal(signal.SIGKILL)
            out, _ = proc.communicate(timeout=30)
            for line in out.splitlines():
                if line.startswith("committed "):
                    _, cid, i = line.split()
                    acknowledged[cid] = (trial, int(i))
            if following is not None:
                _tell(following, "open")
            _check(lake_uri, trial, acknowledged, intact)
            if following is not None:
                proc, following = following, None
    finally:
        for p in (proc, following):  # a check failed: no writer may outlive the test
            if p is not None and p.poll() is None:
                p.kill()
                p.communicate(timeout=30)
    assert len(acknowledged) > 0, "the writer never got a commit in: the test proved nothing"
    # Every live object once more: none that an earlier check passed was damaged since.
    assert_objects_intact(Lake.open(LakeConfig(uri=lake_uri)).pool("crash"))
