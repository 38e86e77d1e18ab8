"""Group commit (lake_core/grouping.py): concurrent loads of one process share one journal entry
when they ask to, and every caller still learns its own outcome. Threads and real OS
processes, on local disk and moto S3; exact rows checked afterwards."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any

import pyarrow as pa
import pytest

from lake_core import Lake, LakeConfig
from lake_core import loading as loading_module
from lake_core.commit import Commit
from lake_core.errors import CommitStateUnknownError, SchemaConflictError, TxnCommittedError
from lake_core.pool import Pool
from lake_core.txn import Txn
from tests import processes
from tests.faultproxy import FaultProxy, Rule, proxied
from tests.lakecheck import assert_journal_dense, assert_objects_intact, journal_numbers
from tests.workers import commit_loads_grouped, rows_for

Row = tuple[int, int, int]


def rows(pool: Pool) -> list[Row]:
    t = pool.read()
    if t.num_rows == 0:
        return []
    return sorted(zip(t["w"].to_pylist(), t["i"].to_pylist(), t["j"].to_pylist(), strict=True))


def data_ids(pool: Pool) -> set[str]:
    found = (pool.layout.parse_data(i.key) for i in pool.store.list(pool.layout.data_dir))
    return {i for i in found if i is not None}


class Outcome:
    """What one load in a thread got: its commit (and the objects it wrote) or its error."""

    def __init__(self) -> None:
        self.commit: Commit | None = None
        self.error: BaseException | None = None
        self.objects: list[str] = []


def wait_leading(pool: Pool) -> None:
    """Until a load holds the lead (the gated one waits at its commit point)."""
    committer = pool.group_committer()
    while True:
        with committer._lock:  # noqa: SLF001 - the test waits on the committer's state
            if committer._leading:  # noqa: SLF001
                return
        threading.Event().wait(0.005)


def start_load(pool: Pool, table: pa.Table, **kwargs: Any) -> tuple[threading.Thread, Outcome]:
    out = Outcome()

    def run() -> None:
        try:
            out.commit = pool.load(
                table, group=True, on_object=lambda o: out.objects.append(o.id), **kwargs
            )
        except BaseException as e:  # noqa: BLE001 - the test looks at it
            out.error = e

    t = threading.Thread(target=run)
    t.start()
    return t, out


@pytest.fixture
def gate(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Pool, int], None]]:
    """``gate(pool, k)``: the next load to reach its commit point waits there until ``k``
    other requests queue behind it — so the next round is exactly those ``k`` (deterministic
    grouping, no timing). Works through the load's own commit guard."""
    armed: list[tuple[Pool, int]] = []
    real = loading_module.write_window_guard

    def guard_factory(clock: Any, started: Any) -> Callable[[], None]:
        inner = real(clock, started)
        if not armed:
            return inner
        pool, k = armed.pop()

        def guard() -> None:
            committer = pool.group_committer()
            for _ in range(6000):  # 30 s at most: a test that miscounts fails, not hangs
                with committer._lock:  # noqa: SLF001 - the test waits on the queue's length
                    if len(committer._queues.get("main", [])) >= k:  # noqa: SLF001
                        break
                threading.Event().wait(0.005)
            inner()

        return guard

    monkeypatch.setattr(loading_module, "write_window_guard", guard_factory)
    yield lambda pool, k: armed.append((pool, k))


def test_loads_queued_during_a_commit_land_as_one_entry(
    lake: Lake, gate: Callable[[Pool, int], None]
) -> None:
    lake.create_pool("g", "ts:asc")
    pool = lake.pool("g")
    entries_before = len(journal_numbers(pool))
    gate(pool, 7)
    first, first_out = start_load(pool, rows_for(0, 0))
    wait_leading(pool)
    others = [start_load(pool, rows_for(w, 0)) for w in range(1, 8)]
    for t, _ in [(first, first_out), *others]:
        t.join(60)
    outs = [first_out, *(o for _, o in others)]
    assert all(o.error is None and o.commit is not None for o in outs), [o.error for o in outs]
    # The gated load went alone; the seven queued behind it share one commit and one entry.
    grouped = {o.commit.id for o in outs[1:] if o.commit is not None}
    assert len(grouped) == 1 and first_out.commit is not None
    assert first_out.commit.id not in grouped
    assert len(journal_numbers(pool)) == entries_before + 2
    shared = outs[1].commit
    assert shared is not None
    assert {o.id for o in shared.adds()} == {i for o in outs[1:] for i in o.objects}
    assert shared.meta == {"group": [None] * 7} and shared.message.startswith("7 grouped loads")
    assert [c.id for c in pool.log()] == [shared.id, first_out.commit.id]
    assert rows(pool) == sorted((w, 0, j) for w in range(8) for j in range(3))
    assert_journal_dense(pool)
    assert_objects_intact(pool)
    committer = pool.group_committer()
    assert (committer.rounds, committer.grouped) == (2, 8)


def test_each_member_learns_its_own_outcome(lake: Lake, gate: Callable[[Pool, int], None]) -> None:
    """Five loads queue behind a gated one that records transaction app2. Two of them add
    column x with different types (they cannot share a commit: the later goes alone), one
    records app2 too (passes its early check, since the gated load has not landed yet). The
    group commit then fails having committed nothing (app2 is in), so every member goes
    alone and learns its own outcome: app2's is TxnCommittedError, one of the x loads gets
    SchemaConflictError, the rest commit; the failed ones' objects are discarded."""
    lake.create_pool("g", "ts:asc")
    pool = lake.pool("g")
    pool.load(rows_for(9, 0))
    gate(pool, 5)
    first, first_out = start_load(pool, rows_for(9, 1), txn=Txn("app2", 1))
    wait_leading(pool)
    x_int = rows_for(1, 0).append_column("x", pa.array([1, 2, 3], pa.int64()))
    x_str = rows_for(2, 0).append_column("x", pa.array(["a", "b", "c"]))
    members = [
        start_load(pool, x_int),
        start_load(pool, x_str),
        start_load(pool, rows_for(3, 0), txn=Txn("app2", 1)),
        start_load(pool, rows_for(4, 0)),
        start_load(pool, rows_for(5, 0), txn=Txn("app3", 1)),
    ]
    for t, _ in [(first, first_out), *members]:
        t.join(60)
        assert not t.is_alive()
    a, b, c, d, e = (o for _, o in members)
    assert first_out.error is None
    assert isinstance(c.error, TxnCommittedError)
    assert d.error is None and e.error is None
    x_errors = [o.error for o in (a, b)]
    assert sum(isinstance(x, SchemaConflictError) for x in x_errors) == 1
    assert x_errors.count(None) == 1
    landed_x = 1 if a.error is None else 2
    failed = [o for o in (a, b, c) if o.error is not None]
    assert not {i for o in failed for i in o.objects} & data_ids(pool)  # discarded
    assert rows(pool) == sorted(
        (w, i, j) for w, i in [(9, 0), (9, 1), (landed_x, 0), (4, 0), (5, 0)] for j in range(3)
    )
    assert (pool.last_txn("app2"), pool.last_txn("app3")) == (1, 1)
    assert_journal_dense(pool)


@pytest.fixture
def proxy(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    with proxied(s3_endpoint, monkeypatch, seed=12) as px:
        yield px


def test_an_unknown_group_outcome_is_every_members_and_discards_nothing(
    proxy: FaultProxy,
    s3_bucket: str,
    s3_endpoint: str,
    gate: Callable[[Pool, int], None],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The group's journal PUT lands, its answer is lost, then the journal is unreachable:
    every member hears 'unknown' naming the same commit, nothing is deleted, and the commit
    is the tip with every member's rows."""
    uri = f"s3://{s3_bucket}/lake"
    lake = Lake.init(LakeConfig(uri=uri, user="t"))
    lake.create_pool("g", "ts:asc")
    pool = lake.pool("g")
    pool.load(rows_for(0, 0))
    gate(pool, 3)
    first, first_out = start_load(pool, rows_for(0, 1))
    wait_leading(pool)
    members = [start_load(pool, rows_for(w, 0)) for w in (1, 2, 3)]
    first.join(60)
    assert first_out.error is None
    put = proxy.add(Rule("lost", method="PUT", key=r"/branches/\d+\.json$"))
    proxy.add(Rule("error", key=r"/branches/\d+\.json$", times=None, after=put))
    for t, _ in members:
        t.join(120)
    outs = [o for _, o in members]
    errors = [o.error for o in outs]
    assert all(isinstance(e, CommitStateUnknownError) for e in errors), errors
    ids = {e.commit_id for e in errors if isinstance(e, CommitStateUnknownError)}
    assert len(ids) == 1
    monkeypatch.setenv("AWS_ENDPOINT_URL", s3_endpoint)  # past the proxy, straight to S3
    check = Lake.open(LakeConfig(uri=uri)).pool("g")
    assert check.tip() in ids  # it landed
    assert rows(check) == sorted(
        (w, i, j) for w, i in [(0, 0), (0, 1), (1, 0), (2, 0), (3, 0)] for j in range(3)
    )
    assert {i for o in outs for i in o.objects} <= data_ids(check)
    assert_objects_intact(check)


@pytest.mark.slow
def test_processes_with_threads_group_commit_race(lake: Lake, lake_uri: str) -> None:
    """4 processes × 4 threads × 6 grouped loads race on one pool: every acknowledged load's
    objects are in the commit it was told, every row exactly once, one journal entry per
    distinct commit, the journal dense."""
    procs_n, threads, loads = 4, 4, 6
    lake.create_pool("race", "ts:asc")
    ctx = processes.context()
    start = ctx.Barrier(procs_n)
    out = ctx.Queue()
    procs = [
        ctx.Process(
            target=commit_loads_grouped, args=(lake_uri, "race", w, threads, loads, start, out)
        )
        for w in range(procs_n)
    ]
    for p in procs:
        p.start()
    reported = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    pool = Lake.open(LakeConfig(uri=lake_uri)).pool("race")
    log = {c.id: c for c in pool.log()}
    acks = [a for _, got in reported for a in got]
    assert len(acks) == procs_n * threads * loads
    for _w, _i, commit_id, objects in acks:
        assert commit_id in log
        assert set(objects) <= {o.id for o in log[commit_id].adds()}
    assert set(log) == {a[2] for a in acks}
    assert assert_journal_dense(pool) == len(log) + 1
    writers = procs_n * threads
    want = sorted((w, i, j) for w in range(writers) for i in range(loads) for j in range(3))
    assert rows(pool) == want
    assert_objects_intact(pool)


def test_s3_round_trips_of_a_small_commit(s3_bucket: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """What one small load costs in S3 requests, counted by the store: the data object, the
    commit object, the journal entry and the HEAD hint, all PUTs — the handle appends right
    after the head it saw lately, with no read first (lake_core.journal, ``fresh_head``). A
    group of k loads shares the last three. After another writer appended, the handle's put of
    the entry is refused: it reads the entry back (ours? no), reads the journal, re-plans and
    commits on the new tip. The HEAD hint is written in the background after the load
    returns (test_s3_background.py): each count waits for it (``flush``)."""
    uri = f"s3://{s3_bucket}/lake"
    lake = Lake.init(LakeConfig(uri=uri, user="t"))
    lake.create_pool("g", "ts:asc")
    pool = lake.pool("g")
    pool.load(rows_for(0, 0))
    store = pool.store
    store.flush()
    before = store.requests  # type: ignore[attr-defined]
    pool.load(rows_for(0, 1))
    store.flush()
    assert store.requests - before == 4  # type: ignore[attr-defined]
    other = Lake.open(LakeConfig(uri=uri, user="u")).pool("g")
    other.load(rows_for(1, 0))
    other.store.flush()
    before = store.requests  # type: ignore[attr-defined]
    pool.load(rows_for(0, 2))
    store.flush()
    assert store.requests - before > 4  # type: ignore[attr-defined]  # the lost race's reads
    assert rows(Lake.open(LakeConfig(uri=uri)).pool("g")) == sorted(
        (w, i, j) for w, i in [(0, 0), (0, 1), (1, 0), (0, 2)] for j in range(3)
    )  # the fifth and sixth loads are checked by the tests of test_fresh_head.py
    # For a while after losing to another writer the handle reads first: TAIL and the probe
    # of the entry after the one it landed (a first try would mostly lose again).
    before = store.requests  # type: ignore[attr-defined]
    pool.load(rows_for(0, 3))
    store.flush()
    assert store.requests - before == 6  # type: ignore[attr-defined]
    monkeypatch.setattr("lake_core.journal.CONTENDED_FOR", 0.0)
    before = store.requests  # type: ignore[attr-defined]
    pool.load(rows_for(0, 4))
    store.flush()
    assert store.requests - before == 4  # type: ignore[attr-defined]  # the new head is known
