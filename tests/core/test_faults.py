"""S3 faults through a proxy of our own (tests/faultproxy.py) between boto3 and moto's server.

Each matrix row sets up a pool without faults, runs one operation (load, compact, delete
--where, merge, cleanup) while the proxy injects a fault, then checks with the faults off:

- every acknowledged commit is in the log exactly once, and the journal is dense;
- a failed operation left no rows and no commit;
- an operation that reported "unknown" landed fully (its commit in the log, exactly the rows
  it meant) or not at all (log and rows as before);
- every branch is readable and every live object intact — also after a cleanup that deletes
  every orphan and tombstone it can (grace 0, a clock a day ahead), and a later load works.

boto3 makes 3 tries per request here (``AWS_MAX_ATTEMPTS``) so faults bite in a few requests.
Issue 10's reproductions are the rows ``journal-lost-then-down`` and ``journal-lost-outage*``
(the journal PUT lands, its answer is lost, then S3 is unavailable) and ``journal-readback-*`` (the retried PUT gets 412
and reading it back fails).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import pytest

from lake_core import Lake, LakeConfig
from lake_core.commit import Commit
from lake_core.errors import CommitStateUnknownError, LakeError, ObjectExistsError
from lake_core.loading import load, write_sources
from lake_core.maintenance.cleanup import cleanup
from lake_core.maintenance.compact import compact
from lake_core.pool import Pool
from lake_core.stores import LocalObjectStore
from lake_core.stores.base import SyncBatch
from lake_core.stores.s3 import S3ObjectStore
from tests import processes
from tests.faultproxy import JOURNAL, FaultProxy, Rule, proxied
from tests.lakecheck import assert_journal_dense, assert_objects_intact
from tests.workers import rows_for

COMMIT_OBJ = r"/commits/[0-9A-Za-z]{27}\.json$"
DATA = r"/data/.*\.parquet$"
TRIES = "3"  # boto3 tries per request in these tests

Row = tuple[int, int, int]


@pytest.fixture
def proxy(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    """The proxy in front of moto; every S3 client made during the test goes through it."""
    with proxied(s3_endpoint, monkeypatch, seed=10, tries=int(TRIES)) as px:
        yield px


def rows(pool: Pool, ref: str) -> list[Row]:
    t = pool.read(ref)
    return sorted(zip(t["w"].to_pylist(), t["i"].to_pylist(), t["j"].to_pylist(), strict=True))


def load_rows(w: int, i: int, n: int = 3) -> list[Row]:
    return [(w, i, j) for j in range(n)]


def log_ids(pool: Pool, branch: str) -> list[str]:
    return [c.id for c in pool.log(branch)]


def setup_pool(uri: str) -> Pool:
    """main: loads (0, 0..3); dev (from main after load 1): load (1, 0)."""
    lake = Lake.init(LakeConfig(uri=uri, user="t"))
    lake.create_pool("p", "ts:asc")
    pool = lake.pool("p")
    for i in range(2):
        load(pool, [rows_for(0, i)])
    pool.create_branch("dev")
    load(pool, [rows_for(1, 0)], branch="dev")
    for i in range(2, 4):
        load(pool, [rows_for(0, i)])
    return pool


# -- operations: (run it, rows of main if it lands) ------------------------------------------


@dataclass
class Op:
    name: str
    run: Callable[[Pool], Commit | None]
    after: Callable[[list[Row], Pool], list[Row]]  # main's rows if it lands, from before
    writes_data: bool = True
    commits: bool = True
    prepare: Callable[[Pool], None] | None = None  # before the faults are switched on


def _compact(pool: Pool) -> Commit | None:
    ids = list(pool.snapshot(pool.tip("main")).objects)
    return compact(pool, "main", ids).commit


def _merge(pool: Pool) -> Commit:
    from lake_core.changes import merge

    return merge(pool, "dev", "main")


def _delete(pool: Pool) -> Commit:
    from lake_core.changes import delete_where

    return delete_where(pool, "i = 1 and j = 0")


def _compact_main(pool: Pool) -> None:
    compact(pool, "main", list(pool.snapshot(pool.tip("main")).objects))


def _revert_by_rows(pool: Pool) -> Commit:
    """Revert load (0, 1) after compaction rewrote its object: the row-level path, which
    writes new objects."""
    from lake_core.changes import revert

    load_1 = [c for c in pool.log("main") if not c.layout_only][-2]
    return revert(pool, load_1.id)


def _delete_on_dev_then_compact_main(pool: Pool) -> None:
    from lake_core.changes import delete_where

    delete_where(pool, "i = 1 and j = 0", "dev")
    _compact_main(pool)


def _cleanup(pool: Pool) -> None:
    cleanup(pool, timedelta(0), now=pool.clock.now() + timedelta(days=1))
    return None


OPS = {
    "load": Op(
        "load", lambda p: load(p, [rows_for(7, 0)]), lambda r, p: sorted(r + load_rows(7, 0))
    ),
    "compact": Op("compact", _compact, lambda r, p: r),
    "delete": Op("delete", _delete, lambda r, p: [x for x in r if not (x[1] == 1 and x[2] == 0)]),
    "merge": Op("merge", _merge, lambda r, p: sorted(r + load_rows(1, 0)), writes_data=False),
    "cleanup": Op("cleanup", _cleanup, lambda r, p: r, writes_data=False, commits=False),
    # History through maintenance: revert and merge by rows write new objects too.
    "revert-by-rows": Op(
        "revert-by-rows",
        _revert_by_rows,
        lambda r, p: [x for x in r if x[:2] != (0, 1)],
        prepare=_compact_main,
    ),
    "merge-by-rows": Op(
        "merge-by-rows",
        _merge,
        lambda r, p: sorted([x for x in r if x != (0, 1, 0)] + load_rows(1, 0)),
        prepare=_delete_on_dev_then_compact_main,
    ),
}


# -- faults ---------------------------------------------------------------------------------


@dataclass
class Fault:
    rules: Callable[[], list[Rule]]
    ops: tuple[str, ...] = ("load", "compact", "delete", "merge")
    expect: str | None = None  # "ok", "failed", "unknown" when the outcome is certain
    landed: bool | None = None  # for "unknown": whether the write certainly happened
    fired: list[Rule] = field(default_factory=list)


def _lost_then_down() -> list[Rule]:
    put = Rule("lost", method="PUT", key=JOURNAL)
    return [put, Rule("error", key=JOURNAL, times=None, after=put)]


def _readback(times: int) -> list[Rule]:
    put = Rule("lost", method="PUT", key=JOURNAL)
    return [put, Rule("error", method="GET", key=JOURNAL, times=times, after=put)]


FAULTS: dict[str, Fault] = {
    # The first try lands, its answer is lost; boto3's retry gets 412: our own entry.
    "journal-lost": Fault(lambda: [Rule("lost", method="PUT", key=JOURNAL)], expect="ok"),
    "journal-lost-500": Fault(lambda: [Rule("lost_error", method="PUT", key=JOURNAL)], expect="ok"),
    # Issue 10 item 1a: the PUT lands, the answer is lost, then the journal is unreachable
    # until the operation gives up (the retries and every read-back fail) while the rest of
    # S3 answers — deleting the data objects would succeed. The outcome is unknown, and it
    # landed: the commit is the tip and all its data must still be there.
    "journal-lost-then-down": Fault(lambda: _lost_then_down(), expect="unknown", landed=True),
    # The same with all of S3 down for N requests: 5 may or may not outlast the read-backs
    # (2 retries, then 3 + 3 reads); 17 does.
    "journal-lost-outage5": Fault(
        lambda: [Rule("lost", method="PUT", key=JOURNAL, then_outage=5)], landed=True
    ),
    "journal-lost-outage17": Fault(
        lambda: [Rule("lost", method="PUT", key=JOURNAL, then_outage=17)],
        expect="unknown",
        landed=True,
    ),
    # Issue 10 item 1b: the retried PUT gets 412 and reading the entry back fails: once
    # (the second read-back settles it) or for good (unknown, landed).
    "journal-readback-transient": Fault(lambda: _readback(int(TRIES)), expect="ok"),
    "journal-readback-fails": Fault(
        lambda: _readback(2 * int(TRIES) + 5), expect="unknown", landed=True
    ),
    # Never forwarded: nothing landed, but the writer cannot know that.
    "journal-unreachable": Fault(
        lambda: [Rule("error", method="PUT", key=JOURNAL, times=int(TRIES))],
        expect="unknown",
        landed=False,
    ),
    "journal-dropped": Fault(
        lambda: [Rule("drop", method="PUT", key=JOURNAL, times=int(TRIES))],
        expect="unknown",
        landed=False,
    ),
    # Issue 10 item 4: a lost answer on the commit object's PUT: 412 on our own key.
    "commit-object-lost": Fault(lambda: [Rule("lost", method="PUT", key=COMMIT_OBJ)], expect="ok"),
    "data-put-fails": Fault(
        lambda: [Rule("error", method="PUT", key=DATA, times=int(TRIES), status=500)],
        ops=("load", "compact", "delete"),
        expect="failed",
    ),
    "data-put-lost": Fault(
        lambda: [Rule("lost", method="PUT", key=DATA, times=int(TRIES))],
        ops=("load", "compact", "delete"),
        expect="failed",
    ),
    # S3 goes away for a while somewhere in the middle, whatever the request is.
    "outage-midway": Fault(
        lambda: [Rule("error", nth=4, then_outage=2 * int(TRIES))],
        ops=("load", "compact", "delete", "merge", "cleanup"),
    ),
    "drops-midway": Fault(
        lambda: [Rule("drop", nth=4, then_outage=int(TRIES), outage_action="drop")],
        ops=("load", "compact", "delete", "merge", "cleanup"),
    ),
    "slow-journal": Fault(
        lambda: [Rule("delay", method="PUT", key=JOURNAL, delay=0.3)], expect="ok"
    ),
    "cleanup-deletes-lost": Fault(
        lambda: [Rule("lost", method="POST", key=r"\?delete", times=None)],
        ops=("cleanup",),
    ),
    "cleanup-listing-fails": Fault(
        lambda: [Rule("error", method="GET", key=r"list-type=2", times=int(TRIES))],
        ops=("cleanup",),
        expect="failed",
    ),
}

# The reproductions of issue 10 run in every test run; the rest of the matrix is marked slow
# (it still runs in `make test`).
FAST = {
    ("load", "journal-lost-then-down"),
    ("compact", "journal-lost-then-down"),
    ("delete", "journal-lost-then-down"),
    ("merge", "journal-readback-fails"),
    ("load", "journal-readback-fails"),
    ("compact", "journal-readback-fails"),
    ("load", "commit-object-lost"),
    ("cleanup", "outage-midway"),
}
#: Revert and merge by rows, under the faults that decide "unknown" and item 4.
BY_ROWS = [
    (op, f)
    for op in ("revert-by-rows", "merge-by-rows")
    for f in (
        "journal-lost-then-down",
        "journal-readback-fails",
        "commit-object-lost",
        "data-put-fails",  # fails only if the op really writes objects: proof it went by rows
    )
]
MATRIX = [
    pytest.param(op, f, id=f"{op}-{f}", marks=() if (op, f) in FAST else pytest.mark.slow)
    for f, fault in FAULTS.items()
    for op in fault.ops
] + [pytest.param(op, f, id=f"{op}-{f}") for op, f in BY_ROWS]


def make_cleanup_work(pool: Pool) -> None:
    """Give cleanup something to delete: tombstones (a compaction) and an orphan object."""
    compact(pool, "main", list(pool.snapshot(pool.tip("main")).objects))
    write_sources(pool, [rows_for(8, 0)], "main")  # written, never committed


def run(op: Op, pool: Pool) -> tuple[str, str | None, str]:
    try:
        c = op.run(pool)
    except CommitStateUnknownError as e:
        return "unknown", e.commit_id, str(e)
    except LakeError as e:
        return "failed", None, str(e)
    return "ok", (c.id if c is not None else None), ""


def check_lake(uri: str, expect_rows: dict[str, list[Row]]) -> Pool:
    """Fresh process-like view (new client, empty caches): every branch readable with exactly
    the expected rows, objects intact, journal dense, no commit twice in any log."""
    pool = Lake.open(LakeConfig(uri=uri, user="checker")).pool("p")
    assert set(pool.branches()) == set(expect_rows)
    for branch, want in expect_rows.items():
        assert rows(pool, branch) == want, branch
        assert_objects_intact(pool, branch)
        ids = log_ids(pool, branch)
        assert len(ids) == len(set(ids)), f"a commit twice in {branch}'s log"
    assert_journal_dense(pool)
    return pool


@contextmanager
def direct(monkeypatch: pytest.MonkeyPatch, s3_endpoint: str) -> Iterator[None]:
    """S3 clients made inside talk to moto straight, not through the proxy: a matrix case's
    setup and checks meet no faults anyway, and skipping the proxy (a thread of this process)
    halves their time."""
    with monkeypatch.context() as m:
        m.setenv("AWS_ENDPOINT_URL", s3_endpoint)
        yield


@pytest.mark.parametrize(("op_name", "fault_name"), MATRIX)
def test_fault_matrix(
    proxy: FaultProxy,
    s3_bucket: str,
    s3_endpoint: str,
    monkeypatch: pytest.MonkeyPatch,
    op_name: str,
    fault_name: str,
) -> None:
    uri = f"s3://{s3_bucket}/lake"
    op, fault = OPS[op_name], FAULTS[fault_name]
    with direct(monkeypatch, s3_endpoint):
        pool = setup_pool(uri)
        if op_name == "cleanup":
            make_cleanup_work(pool)
        if op.prepare is not None:
            op.prepare(pool)
        before = {b: rows(pool, b) for b in pool.branches()}
        logs_before = {b: log_ids(pool, b) for b in pool.branches()}
    pool = Lake.open(LakeConfig(uri=uri, user="op")).pool("p")  # nothing cached
    pool.snapshot(pool.tip("main"))

    rules = [proxy.add(r) for r in fault.rules()]
    outcome, commit_id, message = run(op, pool)
    proxy.clear()
    assert rules[0].fired, f"the fault never fired: {proxy.events[-5:]}"
    if fault.expect is not None:
        assert outcome == fault.expect, message

    landed_rows = {**before, "main": op.after(before["main"], pool)}
    with direct(monkeypatch, s3_endpoint):
        check_outcome(uri, op, fault, outcome, commit_id, message, before, logs_before, landed_rows)


def check_outcome(
    uri: str,
    op: Op,
    fault: Fault,
    outcome: str,
    commit_id: str | None,
    message: str,
    before: dict[str, list[Row]],
    logs_before: dict[str, list[str]],
    landed_rows: dict[str, list[Row]],
) -> None:
    """The lake after the operation: what the outcome says landed, and nothing else."""
    check = Lake.open(LakeConfig(uri=uri)).pool("p")
    main_log = log_ids(check, "main")
    for b, ids in logs_before.items():
        assert set(ids) <= set(log_ids(check, b)), f"an acknowledged commit left {b}'s log"
    if outcome == "ok":
        if op.commits:
            assert main_log.count(commit_id) == 1  # type: ignore[arg-type]
            assert main_log[0] == commit_id
        want = landed_rows
    elif outcome == "failed":
        assert main_log == logs_before["main"], "a failed operation committed"
        want = before
    else:
        assert commit_id is not None and commit_id in message
        landed = commit_id in main_log
        if fault.landed is not None:
            assert landed == fault.landed
        if landed:
            assert main_log[0] == commit_id and main_log.count(commit_id) == 1
            want = landed_rows
        else:
            assert main_log == logs_before["main"]
            want = before
    check_lake(uri, want)

    # Cleanup takes everything it may (orphans of the unknown commit included); the branches
    # must not notice. Then the pool still takes a load.
    _cleanup(Lake.open(LakeConfig(uri=uri)).pool("p"))
    pool = check_lake(uri, want)
    load(pool, [rows_for(9, 0)])
    assert rows(pool, "main") == sorted(want["main"] + load_rows(9, 0))


# -- unit level: a 412 on our own key --------------------------------------------------------


@pytest.mark.parametrize("kind", ["local", "s3"])
def test_put_if_missing_idempotent_on_both_stores(
    kind: str, tmp_path: Any, proxy: FaultProxy, s3_bucket: str
) -> None:
    store = (
        LocalObjectStore(tmp_path / "lake")
        if kind == "local"
        else S3ObjectStore.from_uri(f"s3://{s3_bucket}/lake")
    )
    store.put_if_missing_idempotent("a/k1", b"mine")
    store.put_if_missing_idempotent("a/k1", b"mine")  # our own bytes there: success
    with pytest.raises(ObjectExistsError):
        store.put_if_missing_idempotent("a/k1", b"theirs")
    with pytest.raises(ObjectExistsError):
        store.put_if_missing("a/k1", b"mine")  # the plain primitive still says "exists"
    assert store.get("a/k1") == b"mine"
    if kind == "s3":
        # The real case: the first try lands, the answer is lost, boto3 retries and gets 412.
        lost = proxy.add(Rule("lost", method="PUT", key=r"/a/k2$"))
        store.put_if_missing_idempotent("a/k2", b"once")
        assert lost.fired == 1
        assert proxy.count("pass") >= 2  # the retry (412) and the read-back went through
        assert store.get("a/k2") == b"once"
        lost = proxy.add(Rule("lost", method="PUT", key=r"/a/k3$"))
        with pytest.raises(ObjectExistsError):
            store.put_if_missing("a/k3", b"once")  # what the bare primitive reports
        assert lost.fired == 1


def test_branch_create_and_delete_survive_lost_answers(proxy: FaultProxy, s3_bucket: str) -> None:
    uri = f"s3://{s3_bucket}/lake"
    pool = setup_pool(uri)
    lost = proxy.add(Rule("lost", method="PUT", key=JOURNAL))
    pool.create_branch("b2")
    assert lost.fired == 1
    lost = proxy.add(Rule("lost_error", method="PUT", key=JOURNAL))
    pool.delete_branch("dev")
    assert lost.fired == 1
    # Every try answers 500 (the first one landed): boto3 gives up, the read-back settles it.
    lost = proxy.add(Rule("lost_error", method="PUT", key=JOURNAL, times=int(TRIES)))
    pool.create_branch("b3")
    assert lost.fired == int(TRIES)
    proxy.clear()
    check = Lake.open(LakeConfig(uri=uri)).pool("p")
    assert set(check.branches()) == {"main", "b2", "b3"}
    assert_journal_dense(check)


def test_staged_add_survives_a_lost_answer(proxy: FaultProxy, s3_bucket: str) -> None:
    from lake_core.loading import commit_staged, stage

    uri = f"s3://{s3_bucket}/lake"
    pool = setup_pool(uri)
    lost = proxy.add(Rule("lost", method="PUT", key=r"/staging/.*\.json$"))
    staged = stage(pool, [rows_for(5, 0)])
    assert lost.fired == 1
    proxy.clear()
    commit_staged(pool, [staged.id])
    assert rows(pool, "main") == sorted(
        [r for i in range(4) for r in load_rows(0, i)] + load_rows(5, 0)
    )


# -- the CLI on an unknown outcome -----------------------------------------------------------


def lake_cli(uri: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lake_cli", "--lake", uri, *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ.copy(),
    )


def test_cli_reports_unknown_outcome_and_how_to_resolve_it(
    proxy: FaultProxy, s3_bucket: str, tmp_path: Any
) -> None:
    uri = f"s3://{s3_bucket}/lake"
    setup_pool(uri)
    src = tmp_path / "in.ndjson"
    src.write_text('{"ts": 999, "w": 6, "i": 0, "j": 0}\n')
    proxy.add(Rule("lost", method="PUT", key=JOURNAL, then_outage=17))
    res = lake_cli(uri, "load", "-p", "p", str(src))
    proxy.clear()
    assert res.returncode == 1, res.stderr
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: state of commit "), res.stderr
    commit_id = lines[0].split()[4]
    assert f"run `lake log -p p@main` to see whether commit {commit_id} landed" in lines[0]
    # Resolving it as the message says: it landed, and its rows are readable.
    log = lake_cli(uri, "log", "-p", "p@main", "-f", "json")
    assert log.returncode == 0 and commit_id in log.stdout
    got = lake_cli(uri, "query", "-p", "p", "--where", "w = 6", "-f", "json")
    assert got.returncode == 0
    assert [json.loads(line) for line in got.stdout.splitlines()] == [
        {"ts": 999, "w": 6, "i": 0, "j": 0}
    ]


# -- several processes under random faults ---------------------------------------------------

LOADERS = 3
LOADS = 10


@pytest.mark.slow
def test_processes_load_and_compact_under_random_faults(
    proxy: FaultProxy, s3_bucket: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """3 loader processes and a compactor, racing through a proxy that loses answers after
    the write, fails and drops requests at random (seeded). Afterwards every acknowledged load
    is there exactly once, no failed load left a row, each unknown one is all or nothing (and
    in the log exactly when its rows are there), and cleanup changes nothing visible."""
    from tests.fault_workers import compact_loop, faulty_loads

    uri = f"s3://{s3_bucket}/lake"
    lake = Lake.init(LakeConfig(uri=uri, user="t"))
    lake.create_pool("p", "ts:asc")
    # Two tries per request: enough faults get through boto3 for failed and unknown loads.
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", "2")
    # The journal PUT fails on both tries now and then: unknown outcomes (nothing landed).
    proxy.add(Rule("error", method="PUT", key=JOURNAL, probability=0.3, times=None))
    lost = proxy.add(Rule("lost", method="PUT", probability=0.10, times=None))
    proxy.add(Rule("error", probability=0.10, times=None))
    proxy.add(Rule("drop", probability=0.05, times=None))
    proxy.add(Rule("delay", probability=0.05, times=None, delay=0.05))
    ctx = processes.context()
    start = ctx.Barrier(LOADERS + 1)
    stop = ctx.Event()
    out = ctx.Queue()
    loaders = [
        ctx.Process(target=faulty_loads, args=(uri, "p", w, LOADS, start, out))
        for w in range(LOADERS)
    ]
    compactor = ctx.Process(target=compact_loop, args=(uri, "p", start, stop, out))
    for p in [*loaders, compactor]:
        p.start()
    results: list[tuple[str, Any]] = []
    for _ in loaders:
        results.append(out.get(timeout=600))
    stop.set()
    results.append(out.get(timeout=600))
    for p in [*loaders, compactor]:
        p.join(60)
        assert p.exitcode == 0
    proxy.clear()
    assert lost.fired > 0 and proxy.count("error") > 0 and proxy.count("drop") > 0

    outcomes = [o for kind, outs in results if kind == "loads" for o in outs]
    compactions = next(outs for kind, outs in results if kind == "compactions")
    pool = Lake.open(LakeConfig(uri=uri)).pool("p")
    log = log_ids(pool, "main")
    assert len(log) == len(set(log))
    got = rows(pool, "main")
    want: list[Row] = []
    for w, i, status, cid in outcomes:
        if status == "ok":
            assert log.count(cid) == 1, (w, i)
            want += load_rows(w, i)
        elif status == "unknown":
            present = [r for r in got if r[0] == w and r[1] == i]
            assert present in ([], load_rows(w, i)), (w, i, present)  # all or nothing
            assert (cid in log) == bool(present), (w, i)
            want += present
    assert got == sorted(want)  # no failed load left rows, nothing twice
    for status, cid in compactions:
        if status == "ok":
            assert log.count(cid) == 1
    assert sum(1 for o in outcomes if o[2] == "ok") > 0
    print(  # shown with -s: how hard the faults bit
        "loads:",
        {k: sum(1 for o in outcomes if o[2] == k) for k in ("ok", "unknown", "failed")},
        "compactions:",
        {k: sum(1 for c in compactions if c[0] == k) for k in ("ok", "unknown", "failed")},
        "faults:",
        {k: proxy.count(k) for k in ("lost", "error", "drop", "delay", "pass")},
    )
    check_lake(uri, {"main": got})
    _cleanup(pool)
    check_lake(uri, {"main": got})


# -- Ctrl-C around the commit point (local store, interrupt injected by a store wrapper) ------


class InterruptingStore(LocalObjectStore):
    """A local store that raises KeyboardInterrupt on the first put-if-missing of a key
    matching ``pattern``, after writing it (``land``) or before. Every way a put-if-missing
    reaches the disk is cut: the plain one, the unsynced one of a commit's deferred view (the
    commit object) and the one that syncs a batch first (the journal append of a load)."""

    def __init__(self, root: Any, pattern: str, land: bool) -> None:
        super().__init__(root)
        self.pattern, self.land, self.fired = pattern, land, False

    def _cut(self, key: str, put: Callable[[], None]) -> None:
        import re

        if not self.fired and re.search(self.pattern, key):
            self.fired = True
            if self.land:
                put()
            raise KeyboardInterrupt
        put()

    def put_if_missing(self, key: str, data: bytes) -> None:
        self._cut(key, lambda: super(InterruptingStore, self).put_if_missing(key, data))

    def put_if_missing_after(self, key: str, data: bytes, after: SyncBatch) -> None:
        self._cut(
            key, lambda: super(InterruptingStore, self).put_if_missing_after(key, data, after)
        )

    def put_unsynced(self, key: str, data: bytes, batch: SyncBatch, exclusive: bool) -> None:
        def put() -> None:
            super(InterruptingStore, self).put_unsynced(key, data, batch, exclusive)

        if exclusive:
            self._cut(key, put)
        else:
            put()


def _data_objects(store: LocalObjectStore, pool: Pool) -> set[str]:
    return {i.key for i in store.list(f"pools/{pool.id}/data/")}


@pytest.mark.parametrize("land", [True, False], ids=["landed", "not-landed"])
def test_ctrl_c_during_the_append_is_unknown_and_discards_nothing(
    tmp_path: Any, land: bool
) -> None:
    uri = str(tmp_path / "lake")
    setup_pool(uri)
    store = InterruptingStore(uri, JOURNAL, land)  # journal entries
    pool = Lake.open(LakeConfig(uri=uri), store=store).pool("p")
    before = rows(pool, "main")
    objects_before = _data_objects(store, pool)
    with pytest.raises(CommitStateUnknownError) as info:
        load(pool, [rows_for(7, 0)])
    assert store.fired and isinstance(info.value.__cause__, KeyboardInterrupt)
    assert (info.value.pool, info.value.branch) == ("p", "main")
    assert len(_data_objects(store, pool)) == len(objects_before) + 1  # nothing discarded
    check = Lake.open(LakeConfig(uri=uri)).pool("p")
    assert (info.value.commit_id in log_ids(check, "main")) == land
    assert rows(check, "main") == (sorted(before + load_rows(7, 0)) if land else before)
    assert_objects_intact(check)


def test_ctrl_c_before_the_commit_point_discards_the_objects(tmp_path: Any) -> None:
    uri = str(tmp_path / "lake")
    setup_pool(uri)
    store = InterruptingStore(uri, r"/commits/.*\.json$", land=False)  # the commit object
    pool = Lake.open(LakeConfig(uri=uri), store=store).pool("p")
    objects_before = _data_objects(store, pool)
    logs = log_ids(pool, "main")
    with pytest.raises(KeyboardInterrupt):
        load(pool, [rows_for(7, 0)])
    assert store.fired
    assert _data_objects(store, pool) == objects_before  # known to have committed nothing
    assert log_ids(Lake.open(LakeConfig(uri=uri)).pool("p"), "main") == logs


# -- the catalog: the same rule for its version roots -----------------------------------------


def test_catalog_commit_with_unknown_outcome_deletes_nothing(
    proxy: FaultProxy, s3_bucket: str
) -> None:
    """The catalog root PUT lands, its answer is lost, S3 is down: the transaction must not
    delete the definition and node files the landed root names (that would make every pool
    unreachable)."""
    uri = f"s3://{s3_bucket}/lake"
    setup_pool(uri)
    lake = Lake.open(LakeConfig(uri=uri))
    lost = proxy.add(Rule("lost", method="PUT", key=r"/catalog/vn/", then_outage=5))
    with pytest.raises(CommitStateUnknownError):
        lake.create_pool("q", "ts:asc")
    proxy.clear()
    assert lost.fired == 1
    check = Lake.open(LakeConfig(uri=uri))
    assert sorted(str(c.name) for c in check.pools()) == ["p", "q"]  # it landed, whole
    load(check.pool("q"), [rows_for(3, 0)])
    assert rows(check.pool("q"), "main") == load_rows(3, 0)
    assert rows(check.pool("p"), "main") == sorted([r for i in range(4) for r in load_rows(0, i)])
