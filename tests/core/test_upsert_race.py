"""Racing OS processes upsert into one pool (issue 14): four processes each run a seeded plan
of upserts (some with ``delete_when``) and plain loads on overlapping key ranges while a fifth
compacts, on local disk and on moto S3; then through the fault proxy (lost answers, 5xx).

Afterwards the pool's rows must equal a serial replay, in commit order (the log), of the
acknowledged operations through the row model of :mod:`tests.upsert_model` — exactly, row for
row: an upsert that committed on stale objects (a replaced row surviving, a racing row lost)
shows up as a difference. An operation whose outcome was unknown is settled by the log: its
commit id there means it landed, and it is replayed at its place; otherwise it must have left
nothing."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from lake_core import Lake, LakeConfig
from lake_core.pool import Pool
from tests import processes
from tests.faultproxy import JOURNAL, FaultProxy, Rule, proxied
from tests.lakecheck import assert_journal_dense, assert_objects_intact
from tests.upsert_model import load_rows, upsert_rows
from tests.workers_upsert import DELETE_WHEN, SCHEMA, Row, compactor, plan, table_of, upserter

WORKERS = 4
ROOT = Path(__file__).resolve().parents[2]
KEYS = 40


def pool_rows(pool: Pool) -> Counter[Row]:
    t = pool.read("main")
    cols = [t[name].to_pylist() for name in ("k", "w", "i", "j", "op")]
    return Counter(zip(*cols, strict=True))


def race(
    uri: str, *, unique: bool, seed: int, ops: int
) -> tuple[dict[str, tuple[str, list[Row]]], dict[str, str], list[tuple[str, str, str]]]:
    """Run the workers and a compactor against pool ``u`` of ``uri``. Returns the
    operations by commit id (ok or unknown), the compactions' ids by status, and every
    (status, worker/op, commit id) outcome."""
    ctx = processes.context()
    parties = WORKERS + 1
    start, stop, out = ctx.Barrier(parties), ctx.Event(), ctx.Queue()
    procs = [
        ctx.Process(target=upserter, args=(uri, "u", seed, w, ops, KEYS, start, out))
        for w in range(WORKERS)
    ]
    procs.append(ctx.Process(target=compactor, args=(uri, "u", start, stop, out)))
    for p in procs:
        p.start()
    reports: dict[int, list[Any]] = {}
    compactions: list[tuple[str, str | None]] = []
    while len(reports) < WORKERS:
        kind, worker, got = out.get(timeout=300)
        reports[worker] = got
    stop.set()
    kind, _, compactions = out.get(timeout=120)
    assert kind == "compactions"
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    by_commit: dict[str, tuple[str, list[Row]]] = {}
    outcomes = []
    for w, got in reports.items():
        steps = plan(seed, w, ops, KEYS)
        for i, status, cid in got:
            outcomes.append((status, f"w{w}/{i}", cid))
            if cid is not None and status in ("ok", "unknown"):
                assert cid not in by_commit
                by_commit[cid] = steps[i]
    compacted = {cid: status for status, cid in compactions if cid is not None}
    return by_commit, compacted, outcomes


def replay(
    pool: Pool, by_commit: dict[str, tuple[str, list[Row]]], compacted: dict[str, str], unique: bool
) -> Counter[Row]:
    """The rows a serial replay of the log's commits gives (oldest first). Every commit in the
    log must be one we know: an acknowledged (or unknown) operation, or a compaction."""
    rows: Counter[Row] = Counter()
    for c in reversed(list(pool.log("main"))):
        if c.id in compacted:
            assert c.layout_only, c.id
            continue
        assert c.id in by_commit, f"commit {c.id} ({c.message}) is no operation we ran"
        kind, incoming = by_commit[c.id]
        if kind == "load" and not unique:
            rows = load_rows(rows, incoming)
        else:
            deletes = (lambda r: r[4] == "d") if kind == "upsert_delete" else None
            rows, counts = upsert_rows(rows, incoming, key=lambda r: r[0], is_delete=deletes)
            extra = c.extra.get("upsert")
            assert extra == {
                "inserted": counts.inserted,
                "updated": counts.updated,
                "deleted": counts.deleted,
            }, (c.id, kind)
    return rows


def check(uri: str, unique: bool, by_commit: Any, compacted: Any, outcomes: Any) -> None:
    pool = Lake.open(LakeConfig(uri=uri)).pool("u")
    in_log = {c.id for c in pool.log("main")}
    for status, what, cid in outcomes:
        if status == "ok" and cid is not None:
            assert cid in in_log, f"{what}: acknowledged commit {cid} is not in the log"
        if status == "failed":
            assert cid is None
    landed = {cid: op for cid, op in by_commit.items() if cid in in_log}
    assert pool_rows(pool) == replay(pool, landed, compacted, unique)
    assert_journal_dense(pool)
    assert_objects_intact(pool)


def setup(uri: str, unique: bool) -> None:
    lake = Lake.init(LakeConfig(uri=uri, user="setup"))
    # Small objects, so the upserts meet several and the compactor has work.
    lake.create_pool("u", "k:asc", target_size=2048, unique=unique)


def racing(uri: str, unique: bool, seed: int, ops: int) -> None:
    setup(uri, unique)
    by_commit, compacted, outcomes = race(uri, unique=unique, seed=seed, ops=ops)
    assert all(s == "ok" for s, _, _ in outcomes), outcomes
    assert sum(1 for s, _, c in outcomes if c is not None) >= WORKERS * ops // 2
    check(uri, unique, by_commit, compacted, outcomes)


@pytest.mark.parametrize("unique", [False, True], ids=["plain", "unique"])
def test_racing_upserts_equal_a_serial_replay_local(tmp_path: Any, unique: bool) -> None:
    racing(str(tmp_path / "lake"), unique, seed=1, ops=8)


@pytest.mark.slow
@pytest.mark.parametrize("unique", [False, True], ids=["plain", "unique"])
def test_racing_upserts_equal_a_serial_replay_s3(s3_bucket: str, unique: bool) -> None:
    racing(f"s3://{s3_bucket}/lake", unique, seed=2, ops=6)


@pytest.mark.slow
def test_racing_upserts_longer_plans(tmp_path: Any) -> None:
    """More operations per worker on local disk: more re-plans after racing commits."""
    racing(str(tmp_path / "lake"), False, seed=7, ops=25)


@pytest.fixture
def proxy(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    with proxied(s3_endpoint, monkeypatch, seed=14) as px:
        yield px


@pytest.mark.slow
@pytest.mark.parametrize("unique", [False, True], ids=["plain", "unique"])
def test_racing_upserts_through_faults_replay_exactly(
    s3_bucket: str, proxy: FaultProxy, unique: bool
) -> None:
    """Lost answers and 5xx on journal appends and data objects while four processes upsert
    and load (on a unique pool the loads upsert too) and a fifth compacts: every acknowledged
    operation is in the log and replayed exactly; every unknown one is settled by the log
    (landed whole, or left nothing); failed ones left nothing."""
    uri = f"s3://{s3_bucket}/lake-{uuid.uuid4().hex[:6]}"
    setup(uri, unique)
    rules = [
        proxy.add(Rule("lost", method="PUT", key=JOURNAL, times=None, probability=0.15)),
        proxy.add(Rule("lost_error", method="PUT", key=JOURNAL, times=None, probability=0.05)),
        proxy.add(Rule("error", method="GET", times=None, probability=0.03, status=503)),
        proxy.add(Rule("error", method="PUT", key=r"/data/", times=None, probability=0.05)),
        # S3 down for a while right after a journal append landed: unknown or failed outcomes.
        proxy.add(Rule("lost", method="PUT", key=JOURNAL, nth=6, times=2, then_outage=17)),
        # Every try of one data object refused: a failed upsert or load.
        proxy.add(Rule("error", method="PUT", key=r"/data/", nth=12, times=3, status=500)),
    ]
    by_commit, compacted, outcomes = race(uri, unique=unique, seed=3, ops=8)
    assert sum(r.fired for r in rules) > 0, "no fault fired: the test proved nothing"
    proxy.clear()
    assert any(s == "ok" for s, _, _ in outcomes)
    check(uri, unique, by_commit, compacted, outcomes)


@pytest.mark.parametrize("landed", [True, False], ids=["landed", "not-landed"])
def test_unknown_upsert_outcome_is_settled_by_the_log(
    s3_bucket: str,
    proxy: FaultProxy,
    landed: bool,
    tmp_path: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``lake upsert`` whose outcome is unknown: the journal append landed and its answer was
    lost, then the journal stayed unreachable (landed), or the append never got through
    (not landed). The CLI says so in one error line naming the commit and ``lake log``;
    the log settles it, and the rows are exactly the upsert applied, or untouched."""
    from lake_cli import main

    uri = f"s3://{s3_bucket}/lake"
    setup(uri, False)
    pool = Lake.open(LakeConfig(uri=uri, user="t")).pool("u")
    base: list[Row] = [(k, 0, 0, k, "u") for k in range(6)]
    pool.load(table_of(base))
    incoming: list[Row] = [(2, 1, 0, 0, "u"), (3, 1, 0, 1, "d"), (9, 1, 0, 2, "u")]
    (tmp_path / "in.ndjson").write_text(
        "".join(json.dumps(dict(zip(SCHEMA.names, r, strict=True))) + "\n" for r in incoming)
    )
    if landed:
        put = proxy.add(Rule("lost", method="PUT", key=JOURNAL))
        proxy.add(Rule("error", key=JOURNAL, times=None, after=put))
    else:
        put = proxy.add(Rule("error", method="PUT", key=JOURNAL, times=3))
    code = main(
        [
            "--lake",
            uri,
            "upsert",
            "-p",
            "u",
            str(tmp_path / "in.ndjson"),
            "--delete-when",
            DELETE_WHEN,
        ]
    )
    out, err = capsys.readouterr()
    assert put.fired, "the fault never fired"
    proxy.clear()
    (line,) = err.splitlines()
    assert code == 1 and out == "" and line.startswith("error: "), (code, out, err)
    assert "lake log -p u@main" in line, line
    cid = re.search(r"commit ([0-9A-Za-z]{27}) landed", line)
    assert cid, line
    assert main(["--lake", uri, "log", "-p", "u", "-f", "json"]) == 0
    log = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    assert (log[0]["id"] == cid.group(1)) is landed
    want = Counter(base)
    if landed:
        want, counts = upsert_rows(
            want, incoming, key=lambda r: r[0], is_delete=lambda r: r[4] == "d"
        )
        assert log[0]["upsert"] == {"inserted": 1, "updated": 1, "deleted": 1}
    else:
        assert len(log) == 1
    fresh = Lake.open(LakeConfig(uri=uri)).pool("u")
    assert pool_rows(fresh) == want
    assert_journal_dense(fresh)
    assert_objects_intact(fresh)


def run_cli_plan(uri: str, seed: int, worker: int, ops: int, where: Path) -> list[Any]:
    """Worker ``worker``'s plan through the ``lake`` command, one process per operation:
    [(i, status, commit id)] read from what each command printed."""
    got = []
    for i, (kind, rows) in enumerate(plan(seed, worker, ops, KEYS)):
        f = where / f"w{worker}-{i}.ndjson"
        f.write_text(
            "".join(json.dumps(dict(zip(SCHEMA.names, r, strict=True))) + "\n" for r in rows)
        )
        args = ["load", "-p", "u", str(f)] if kind == "load" else ["upsert", "-p", "u", str(f)]
        if kind == "upsert_delete":
            args += ["--delete-when", DELETE_WHEN]
        done = subprocess.run(
            [sys.executable, "-m", "lake_cli", "--lake", uri, *args, "-m", f"w{worker} {i}"],
            capture_output=True,
            text=True,
            timeout=300,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert done.returncode == 0, done.stderr
        last = done.stdout.splitlines()[-1]
        got.append((i, "ok", None if last == "no rows changed" else last.split(" ")[0]))
    return got


@pytest.mark.slow
def test_racing_lake_upsert_commands_equal_a_serial_replay(tmp_path: Path) -> None:
    """The CLI face under contention: four workers each run their plan as ``lake upsert`` /
    ``lake load`` commands (one OS process per operation, four at a time); the ids the
    commands printed, replayed in log order, give the pool's rows exactly."""
    uri = str(tmp_path / "lake")
    setup(uri, False)
    ops = 4
    with ThreadPoolExecutor(WORKERS) as pool:
        reports = list(pool.map(lambda w: run_cli_plan(uri, 5, w, ops, tmp_path), range(WORKERS)))
    by_commit: dict[str, tuple[str, list[Row]]] = {}
    outcomes = []
    for w, got in enumerate(reports):
        steps = plan(5, w, ops, KEYS)
        for i, status, cid in got:
            outcomes.append((status, f"w{w}/{i}", cid))
            if cid is not None:
                by_commit[cid] = steps[i]
    check(uri, False, by_commit, {}, outcomes)
