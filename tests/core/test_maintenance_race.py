"""Maintenance racing writers, with real processes on local disk and on moto S3.

Two loaders, a delete-by-predicate loop, a compaction loop and a loop of ``lake vacate
--before <1 s ago>`` + ``lake cleanup --grace 0`` all run at once on one pool. Afterwards the
rows are checked exactly: every acknowledged load's rows are present exactly once, except the
rows acknowledged deletes removed; nothing a failed operation wrote is visible; the pool and
every retained commit read in full. A grace of 0 is the worst case for in-flight loads: cleanup
sees their objects before their commits land (see lake_core/maintenance/cleanup.py).
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import timedelta
from typing import Any

import pytest

from lake_core import Lake, LakeConfig
from lake_core.maintenance.cleanup import cleanup
from tests import processes
from tests.lakecheck import assert_objects_intact
from tests.workers_maintenance import race_cleaner, race_compactor, race_deleter, race_loader

LOADERS = 2
LOADS_EACH = 52  # 104 loads in all; the bar is 100 acknowledged


def _rows(pool: Any, ref: str | None = None) -> Counter[tuple[int, int, int]]:
    t = pool.read(ref)
    return Counter(zip(t["w"].to_pylist(), t["i"].to_pylist(), t["j"].to_pylist(), strict=True))


@pytest.mark.slow
def test_maintenance_racing_writers_keeps_exactly_the_acknowledged_rows(lake_uri: str) -> None:
    lake = Lake.init(LakeConfig(uri=lake_uri, user="tester"))
    lake.create_pool("race", "ts:asc", target_size=32 * 1024)
    ctx = processes.context()
    out, stop, start = ctx.Queue(), ctx.Event(), ctx.Barrier(LOADERS + 1)
    deletes_done = ctx.Value("i", 0)
    tombstones_removed = ctx.Value("i", 0)
    loaders = [
        ctx.Process(target=race_loader, args=(lake_uri, "race", w, LOADS_EACH, start, out))
        for w in range(LOADERS)
    ]
    others = [
        ctx.Process(target=race_deleter, args=(lake_uri, "race", LOADERS, stop, out, deletes_done)),
        ctx.Process(target=race_compactor, args=(lake_uri, "race", stop, out)),
        ctx.Process(
            target=race_cleaner,
            args=(lake_uri, "race", stop, out, tombstones_removed, start),
        ),
    ]
    for proc in [*others, *loaders]:
        proc.start()
    # Reports are read before joining: a process exits only once its queue data is taken.
    reports: list[tuple[Any, ...]] = []
    try:
        reports += [out.get(timeout=240) for _ in loaders]
        # Loads can finish before the deleter got going, or before a vacate had cut a
        # compaction or delete (a loaded machine, or fast loads): let maintenance go on until
        # a few deletes were acknowledged and cleanup removed tombstoned files (bounded wait).
        waited = 0.0
        while (deletes_done.value < 5 or tombstones_removed.value == 0) and waited < 90:
            time.sleep(0.2)
            waited += 0.2
        stop.set()
        reports += [out.get(timeout=120) for _ in others]
        for proc in [*loaders, *others]:
            proc.join(60)
    finally:
        stop.set()
        for proc in [*loaders, *others]:
            if proc.is_alive():
                proc.terminate()
    assert [p.exitcode for p in [*loaders, *others]] == [0] * (LOADERS + 3)
    by_kind: dict[str, list[tuple[Any, ...]]] = {}
    for r in reports:
        by_kind.setdefault(r[0], []).append(r[1:])

    acked_loads = {(w, i) for w, acked, _, _ in by_kind["loader"] for i in acked}
    unknown_loads = {(w, i) for w, _, _, unknown in by_kind["loader"] for i in unknown}
    load_failures = [f for _, _, failed, _ in by_kind["loader"] for f in failed]
    ((deleted, unknown_deletes, delete_failures),) = by_kind["deleter"]
    ((compactions, conflicts),) = by_kind["compactor"]
    ((runs, tombstoned, _orphans, _files, clean_errors),) = by_kind["cleaner"]

    # The race really happened: enough acknowledged loads, deletes, compactions and cleanups
    # that deleted tombstoned files while loads were in flight.
    assert len(acked_loads) >= 100, load_failures[:3]
    assert len(deleted) >= 5, delete_failures[:3]
    assert compactions and runs >= 3 and tombstoned > 0, clean_errors[:3]
    assert not unknown_loads and not unknown_deletes  # no faults injected: outcomes are known
    # Deletes by predicate re-plan when a compaction lands first: no conflict reaches them.
    assert not [f for f in delete_failures if f.startswith("conflict: ")], delete_failures

    # Exactly the acknowledged rows, once each, minus the acknowledged deletes.
    expected = Counter((w, i, j) for w, i in acked_loads for j in range(3))
    expected.subtract(Counter(deleted))
    pool = Lake.open(LakeConfig(uri=lake_uri)).pool("race")
    assert _rows(pool) == +expected
    assert_objects_intact(pool)
    # Every retained commit opens, and every object it names is still in the store (reading
    # each in full would cost a quadratic number of requests).
    stored = {i.key for i in pool.store.list(f"pools/{pool.id}/data/")}
    named = {pool.layout.data(o) for c in pool.log() for o in pool.snapshot(c.id).objects}
    assert named <= stored

    # A last cleanup with grace 0, nothing running: the live data is all kept.
    cleanup(pool, timedelta(0))
    fresh = Lake.open(LakeConfig(uri=lake_uri)).pool("race")
    assert _rows(fresh) == +expected
    assert_objects_intact(fresh)
