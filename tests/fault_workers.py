"""Code that test_faults.py's subprocesses run (importable under ``spawn``). They reach S3
through the fault proxy (``AWS_ENDPOINT_URL`` inherited) and report every outcome, not just
the successes, so the test can hold unknown and failed operations to their promises."""

from __future__ import annotations

from typing import Any

from lake_core import Lake, LakeConfig
from lake_core.errors import CommitStateUnknownError, LakeError
from lake_core.loading import load
from lake_core.maintenance.compact import compact
from tests.workers import rows_for


def _open(uri: str, pool: str, user: str) -> Any:
    # Opening reads the catalog through the faults too: retry until it answers.
    for _ in range(50):
        try:
            return Lake.open(LakeConfig(uri=uri, user=user)).pool(pool)
        except LakeError:
            continue
    raise RuntimeError("could not open the lake through the fault proxy")


def faulty_loads(uri: str, pool: str, worker: int, loads: int, start: Any, out: Any) -> None:
    """``loads`` loads; put ("loads", [(worker, i, "ok"|"unknown"|"failed", commit id)])."""
    p = _open(uri, pool, f"w{worker}")
    start.wait()
    outcomes = []
    for i in range(loads):
        try:
            c = load(p, [rows_for(worker, i)], message=f"w{worker} load {i}")
            outcomes.append((worker, i, "ok", c.id))
        except CommitStateUnknownError as e:
            outcomes.append((worker, i, "unknown", e.commit_id))
        except LakeError:
            outcomes.append((worker, i, "failed", None))
    out.put(("loads", outcomes))


def compact_loop(uri: str, pool: str, start: Any, stop: Any, out: Any) -> None:
    """Compact whatever the policy picks until ``stop``; put ("compactions", [(status, id)])."""
    p = _open(uri, pool, "compactor")
    start.wait()
    outcomes = []
    while not stop.is_set():
        try:
            result = compact(p, "main")
            if result.commit is not None:
                outcomes.append(("ok", result.commit.id))
        except CommitStateUnknownError as e:
            outcomes.append(("unknown", e.commit_id))
        except LakeError:
            outcomes.append(("failed", None))
        stop.wait(0.2)
    out.put(("compactions", outcomes))
