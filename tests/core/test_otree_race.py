"""Loads into one OTree pool race from real OS processes, each batch wider than the last, so
the racing writers open revisions at once (catalog transactions replayed on conflict) — on local
disk and on moto S3; and S3 faults (tests/faultproxy.py) hit the revision's catalog commit, the
objects and the journal. Afterwards: every acknowledged row exactly once, the revisions
numbered 1..n with each object's revision known, the layout invariants hold, and samples equal
the brute-force filter."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pytest

from lake_core import Lake, LakeConfig
from lake_core.errors import CommitStateUnknownError, LakeError
from lake_core.otree.blocks import revision_of
from lake_core.otree.settings import parse_layout
from tests import processes
from tests.faultproxy import JOURNAL, FaultProxy, Rule, proxied
from tests.lakecheck import assert_journal_dense, assert_objects_intact
from tests.otreecheck import brute_sample, check_otree_invariants

WRITERS = 3
LOADS = 4
CATALOG_ROOT = r"/catalog/vn/[01]{64}$"
DATA = r"/data/[0-9A-Za-z]+\.parquet$"
TRIES = 3


def batch(worker: int, i: int, n: int = 150) -> pa.Table:
    """Worker ``worker``'s ``i``-th batch: its x range grows with ``i`` (new revisions)."""
    rng = np.random.default_rng(worker * 100 + i)
    scale = float((i + 1) * (worker + 1))
    return pa.table(
        {
            "id": pa.array(np.arange(n) + worker * 10_000 + i * 1_000, pa.int64()),
            "x": rng.normal(0, scale, n),
            "y": rng.random(n) * scale,
            "w": pa.array([worker] * n, pa.int64()),
        }
    )


def racing_loader(uri: str, worker: int, start: Any, out: Any) -> None:
    pool = Lake.open(LakeConfig(uri=uri, user=f"w{worker}")).pool("race")
    start.wait()
    for i in range(LOADS):
        pool.load(batch(worker, i))
    out.put(worker)


def _check(pool_uri: str, want_ids: list[int]) -> None:
    pool = Lake.open(LakeConfig(uri=pool_uri)).pool("race")
    table = pool.read()
    assert sorted(table["id"].to_pylist()) == sorted(want_ids)
    layout = pool.config.otree
    assert layout is not None
    assert [r.id for r in layout.revisions] == list(range(1, len(layout.revisions) + 1))
    known = {r.id for r in layout.revisions}
    assert all(revision_of(o) in known for o in pool.snapshot(pool.tip()).objects.values())
    check_otree_invariants(pool)
    assert_objects_intact(pool)
    for f in (0.05, 0.3):
        got = pool.scan(sample=f).to_table()
        assert sorted(got["id"].to_pylist()) == sorted(brute_sample(table, f)["id"].to_pylist())


@pytest.mark.slow
def test_racing_loads_open_revisions(lake: Lake, lake_uri: str) -> None:
    lake.create_pool("race", "id", otree=parse_layout("x,y", 30))
    ctx = processes.context()
    start = ctx.Barrier(WRITERS)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=racing_loader, args=(lake_uri, w, start, out)) for w in range(WRITERS)
    ]
    for p in procs:
        p.start()
    done = sorted(out.get(timeout=600) for _ in procs)
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert done == list(range(WRITERS))
    want = [
        int(i) for w in range(WRITERS) for i in range(LOADS) for i in batch(w, i)["id"].to_pylist()
    ]
    _check(lake_uri, want)
    pool = Lake.open(LakeConfig(uri=lake_uri)).pool("race")
    assert len(pool.config.otree.revisions) >= LOADS  # type: ignore[union-attr]


@pytest.fixture
def proxy(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    with proxied(s3_endpoint, monkeypatch, seed=16, tries=TRIES) as px:
        yield px


CASES = {
    # fault rules, expected outcome, whether the load lands when its outcome is unknown
    "revision-commit-answer-lost": (
        lambda: [Rule("lost", method="PUT", key=CATALOG_ROOT)],
        "ok",
        None,
    ),
    # A revision commit whose outcome is unknown is decided again on the newest version.
    "revision-commit-fails-once": (
        lambda: [Rule("error", method="PUT", key=CATALOG_ROOT, times=TRIES, status=500)],
        "ok",
        None,
    ),
    # The catalog cannot be written: the load fails before any data is written, nothing lands.
    "catalog-down": (
        lambda: [Rule("error", method="PUT", key=CATALOG_ROOT, times=None, status=503)],
        "failed",
        None,
    ),
    "object-put-answer-lost": (lambda: [Rule("lost", method="PUT", key=DATA)], "ok", None),
    "object-put-fails": (
        lambda: [Rule("error", method="PUT", key=DATA, times=TRIES, status=500)],
        "failed",
        None,
    ),
    "journal-lost-then-down": (
        lambda: [
            put := Rule("lost", method="PUT", key=JOURNAL),
            Rule("error", key=JOURNAL, times=None, after=put),
        ],
        "unknown",
        True,
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_otree_load_under_faults(proxy: FaultProxy, s3_bucket: str, case: str) -> None:
    rules, expect, lands = CASES[case]
    uri = f"s3://{s3_bucket}/lake"
    lake = Lake.init(LakeConfig(uri=uri, user="t"))
    pool = lake.create_pool("race", "id", otree=parse_layout("x,y", 30))
    pool.load(batch(0, 0))
    pool = Lake.open(LakeConfig(uri=uri, user="op")).pool("race")
    before = pool.read()["id"].to_pylist()
    log_before = [c.id for c in pool.log()]
    fired = [proxy.add(r) for r in rules()]
    try:
        pool.load(batch(1, 3))  # wider: it opens revision 2 first
        outcome, commit_id = "ok", None
    except CommitStateUnknownError as e:
        outcome, commit_id = "unknown", e.commit_id
    except LakeError:
        outcome, commit_id = "failed", None
    proxy.clear()
    assert fired[0].fired
    assert outcome == expect
    check = Lake.open(LakeConfig(uri=uri)).pool("race")
    log = [c.id for c in check.log()]
    if outcome == "failed" or (outcome == "unknown" and not lands):
        assert log == log_before
        want = before
    else:
        if commit_id is not None:
            assert log[0] == commit_id
        assert len(log) == len(log_before) + 1
        want = before + batch(1, 3)["id"].to_pylist()
    assert_journal_dense(check)
    _check(uri, want)
