"""Subprocess bodies for maintenance race tests (importable under ``spawn``)."""

from __future__ import annotations

from typing import Any

from lake_core import Lake, LakeConfig
from lake_core.errors import CommitConflictError
from lake_core.loading import load
from lake_core.maintenance import compact
from tests.workers import rows_for


def compact_loop(
    uri: str, zk: str | None, pool: str, stop: Any, out: Any, pause: float = 0.0
) -> None:
    """Compact under the maintenance lock until ``stop`` is set; report commits made.
    ``pause`` seconds between runs let other lock holders in (the file lock is unfair)."""
    import time

    lake = Lake.open(LakeConfig(uri=uri, zookeeper=zk, user="compactor"))
    p = lake.pool(pool)
    made = []
    conflicts = 0
    with lake.locks() as locks:
        while not stop.is_set():
            with locks.maintenance_lock(p.id, timeout=60) as held:
                try:
                    r = compact(p, guard=held.check)
                except CommitConflictError:
                    conflicts += 1
                    continue
                if r.commit is not None:
                    made.append(r.commit.id)
            time.sleep(pause)
    out.put(("compactor", made, conflicts))


def load_n(uri: str, pool: str, worker: int, n: int, out: Any) -> None:
    lake = Lake.open(LakeConfig(uri=uri, user=f"loader-{worker}"))
    p = lake.pool(pool)
    ids = [load(p, [rows_for(worker, i)]).id for i in range(n)]
    out.put(("loader", worker, ids))


def compact_once_at_barrier(uri: str, zk: str | None, pool: str, start: Any, out: Any) -> None:
    """Wait at the barrier, then compact once under the lock; report the commit or None."""
    lake = Lake.open(LakeConfig(uri=uri, zookeeper=zk, user="racer"))
    p = lake.pool(pool)
    start.wait()
    with lake.locks() as locks, locks.maintenance_lock(p.id, timeout=120) as held:
        r = compact(p, guard=held.check)
    out.put(r.commit.id if r.commit is not None else None)


# -- maintenance racing writers (tests/core/test_maintenance_race.py) ---------------------------------


def race_loader(uri: str, pool: str, worker: int, n: int, start: Any, out: Any) -> None:
    """Make ``n`` loads; report which were acknowledged (load returned), which failed with a
    lake error (nothing committed) and which had an unknown outcome."""
    from lake_core.errors import CommitStateUnknownError, LakeError

    p = Lake.open(LakeConfig(uri=uri, user=f"loader-{worker}")).pool(pool)
    start.wait()
    acked: list[int] = []
    failed: list[str] = []
    unknown: list[int] = []
    for i in range(n):
        try:
            load(p, [rows_for(worker, i)], message=f"race load {worker}/{i}")
        except CommitStateUnknownError:
            unknown.append(i)
            continue
        except LakeError as e:  # e.g. a snapshot whose metadata a grace-0 cleanup just cut
            failed.append(f"{type(e).__name__}: {e}")
            continue
        acked.append(i)
    out.put(("loader", worker, acked, failed[:3], unknown))


def race_deleter(
    uri: str, pool: str, workers: int, stop: Any, out: Any, progress: Any = None
) -> None:
    """Delete one row (``j = 1``) of each load in turn, by predicate on the pool key, until
    ``stop``; report the rows of acknowledged deletes. A delete only matches rows already
    committed, so an acknowledged delete removed a row of a load that had landed. A delete by
    predicate re-plans when a compaction removed an object it rewrites: a commit conflict
    reaching here is a failure of that (reported as ``conflict: …``)."""
    import time

    from lake_core.changes import delete_where
    from lake_core.errors import (
        CommitConflictError,
        CommitStateUnknownError,
        LakeError,
        NoRowsMatchedError,
        RetriesExhaustedError,
    )

    p = Lake.open(LakeConfig(uri=uri, user="deleter")).pool(pool)
    acked: list[tuple[int, int, int]] = []
    unknown: list[tuple[int, int, int]] = []
    failed: list[str] = []
    target, misses = 0, 0
    while not stop.is_set():
        w, i = target % workers, target // workers
        row = (w, i, 1)
        try:
            delete_where(p, f"ts = {w * 100_000 + i * 100 + 1}", message=f"race delete {row}")
        except NoRowsMatchedError:
            misses += 1
            if misses < 200:  # not loaded yet: wait for it (or give up on a failed load)
                time.sleep(0.02)
                continue
        except CommitStateUnknownError:
            unknown.append(row)
        except CommitConflictError as e:
            kind = "retries" if isinstance(e, RetriesExhaustedError) else "conflict"
            failed.append(f"{kind}: {e}")
            time.sleep(0.05)
            continue
        except LakeError as e:  # objects cleaned from under it
            failed.append(f"{type(e).__name__}: {e}")
            time.sleep(0.05)
            continue
        else:
            acked.append(row)
            if progress is not None:
                with progress.get_lock():
                    progress.value += 1
            time.sleep(0.1)  # leave the (shared, single-threaded) S3 test server to the loaders
        target, misses = target + 1, 0
    conflicts = [f for f in failed if f.startswith("conflict: ")]
    out.put(("deleter", acked, unknown, conflicts[:3] + failed[:3] + [f"{len(failed)} failures"]))


def race_cleaner(
    uri: str, pool: str, stop: Any, out: Any, removed: Any = None, start: Any = None
) -> None:
    """Until ``stop``: ``lake vacate --before <now - 1s>`` then ``lake cleanup --grace 0``,
    through the CLI (each takes the maintenance lock); report the cleanup totals."""
    import contextlib
    import io
    import json
    import time
    from datetime import UTC, datetime, timedelta

    from lake_cli import main
    from lake_core.clock import to_iso

    L = ["--lake", uri]
    runs = tombstoned = orphans = files = 0
    errors: list[str] = []
    while not stop.is_set():
        before = to_iso(datetime.now(UTC) - timedelta(seconds=1))
        out_text, err_text = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out_text), contextlib.redirect_stderr(err_text):
            code = main([*L, "vacate", "-p", pool, "--before", before])
            if code == 0:
                code = main([*L, "cleanup", "-p", pool, "--grace", "0", "-f", "json"])
        if code != 0:
            errors.append(err_text.getvalue().strip())
            continue
        report = json.loads(out_text.getvalue().splitlines()[-1])
        if start is not None and runs == 0:
            start.wait()  # loads begin only once cleanup is warmed up and running
        time.sleep(0.2)
        runs += 1
        tombstoned += report["tombstoned"]
        if removed is not None:
            with removed.get_lock():
                removed.value += report["tombstoned"]
        orphans += report["orphans"]
        files += report["files"]
    out.put(("cleaner", runs, tombstoned, orphans, files, errors[:3]))


def race_compactor(uri: str, pool: str, stop: Any, out: Any) -> None:
    """compact_loop with local locks, pausing between runs so the cleaner gets the lock."""
    compact_loop(uri, None, pool, stop, out, pause=0.5)
