"""Code that the transaction race tests' subprocesses run (importable under ``spawn``).

Each worker opens the lake itself, as a separate program would, waits at a barrier so all
commit at once, and reports what happened on a queue.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from lake_core import Lake, LakeConfig
from lake_core.commit import Commit
from lake_core.errors import TxnCommittedError
from lake_core.landing import LandingZone, ingest_once
from lake_core.loading import load
from lake_core.stores import open_store
from lake_core.txn import Txn
from tests.workers import rows_for


def load_txn(uri: str, pool: str, worker: int, app: str, version: int, start: Any, out: Any) -> None:
    """Load rows unique to (worker, version) as ``Txn(app, version)``; report
    ("committed", worker, commit id) or ("skipped", worker, recorded version)."""
    p = Lake.open(LakeConfig(uri=uri, user=f"worker-{worker}")).pool(pool)
    start.wait()
    try:
        c = load(p, [rows_for(worker, version)], txn=Txn(app, version))
        out.put(("committed", worker, c.id))
    except TxnCommittedError as e:
        out.put(("skipped", worker, e.recorded))


def ingest_zone(
    uri: str, pool: str, worker: int, landing: str, paths: list[str], start: Any, out: Any
) -> None:
    """Ingest ``paths`` of the landing zone exactly once; report (worker, [(commit, files)],
    skipped files)."""
    p = Lake.open(LakeConfig(uri=uri, user=f"worker-{worker}")).pool(pool)
    zone = LandingZone(landing, open_store(landing), ["ndjson"])

    def loader(files: Sequence[str], txns: Sequence[Txn]) -> Commit:
        return load(p, [zone.source(f) for f in files], txn=txns, meta={"landing": zone.meta(files)})

    start.wait()
    done = ingest_once(p, zone, paths, loader)
    out.put((worker, [(c.id, fs) for c, fs in done.commits], done.skipped))
