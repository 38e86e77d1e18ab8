"""A handle appends right after the journal head it saw lately, reading nothing first
(``Journal.fresh_head``): the put-if-missing of the next entry is the check. These tests hold the
two ways that could go wrong — another writer appended meanwhile, and history was vacated and
cleaned up meanwhile — on local disk and moto S3, with the exact rows afterwards."""

from __future__ import annotations

from datetime import timedelta

import pytest

from lake_core import Lake, LakeConfig
from lake_core.inflight import MIN_ORPHAN_AGE
from lake_core.maintenance.cleanup import cleanup
from lake_core.maintenance.vacate import vacate
from lake_core.pool import Pool
from tests.clocks import FakeClock
from tests.lakecheck import assert_journal_dense, journal_numbers
from tests.workers import rows_for

H = timedelta(hours=1)


def rows(pool: Pool) -> list[tuple[int, int, int]]:
    t = pool.read()
    return sorted(zip(t["w"].to_pylist(), t["i"].to_pylist(), t["j"].to_pylist(), strict=True))


def want(*loads: tuple[int, int]) -> list[tuple[int, int, int]]:
    return sorted((w, i, j) for w, i in loads for j in range(3))


def test_a_handle_behind_other_writers_lands_after_them(lake_uri: str) -> None:
    a = Lake.init(LakeConfig(uri=lake_uri, user="a")).create_pool("p", "ts:asc")
    a.load(rows_for(0, 0))
    seen = a.journal.fresh_head()
    assert seen is not None
    b = Lake.open(LakeConfig(uri=lake_uri, user="b")).pool("p")
    for i in range(3):
        b.load(rows_for(1, i))
    assert a.journal.fresh_head() == seen  # a knows nothing of b's entries
    landed = a.load(rows_for(0, 1))
    head = a.journal.read_head()
    assert head.n == seen.n + 4 and head.state["main"] == landed.id
    assert landed.retries == 1  # its first put of the entry was refused, then it re-planned
    check = Lake.open(LakeConfig(uri=lake_uri)).pool("p")
    assert rows(check) == want((0, 0), (1, 0), (1, 1), (1, 2), (0, 1))
    assert assert_journal_dense(check) == 6  # five commits and the pool's creation


def test_vacated_entries_outlive_any_head_a_handle_still_trusts(lake_uri: str) -> None:
    """Another handle loads, vacates and cleans up while ``a`` holds an old head: the vacated
    entries stay (they are younger than the minimum orphan age), so ``a``'s put of the entry
    after its head is refused and it lands on the real tip. Once they are old enough to go,
    ``a`` no longer trusts a head it saw that long ago and reads the journal first."""
    clock = FakeClock()
    a = Lake.init(LakeConfig(uri=lake_uri, user="a", clock=clock)).create_pool("p", "ts:asc")
    a.load(rows_for(0, 0))
    first = a.journal.fresh_head()
    assert first is not None
    b = Lake.open(LakeConfig(uri=lake_uri, user="b", clock=clock)).pool("p")
    for i in range(4):
        clock.advance(H)
        b.load(rows_for(1, i))
    clock.advance(H)
    vacate(b, clock.now() - 2 * H)  # the history up to b's second load is cut
    tail = b.journal.read_tail()
    assert tail > first.n + 2  # a's head and the entry after it are below TAIL-1
    assert cleanup(b, timedelta(0)).journal_entries == 0  # young: kept
    assert journal_numbers(b)[0] == 1

    a.load(rows_for(0, 1))
    assert rows(Lake.open(LakeConfig(uri=lake_uri)).pool("p")) == want(
        (0, 0), (1, 0), (1, 1), (1, 2), (1, 3), (0, 1)
    )

    # A day on, cleanup removes the vacated entries; the writers land on the tip (a handle
    # idle that long reads the journal first: the next test).
    clock.advance(MIN_ORPHAN_AGE + H)
    gone = cleanup(b, timedelta(0))
    assert gone.journal_entries == tail - 2
    assert journal_numbers(b)[0] == tail - 1
    c = Lake.open(LakeConfig(uri=lake_uri, user="c", clock=clock)).pool("p")
    c.load(rows_for(2, 0))
    b.load(rows_for(1, 4))
    assert rows(Lake.open(LakeConfig(uri=lake_uri)).pool("p")) == want(
        (0, 0), (1, 0), (1, 1), (1, 2), (1, 3), (0, 1), (2, 0), (1, 4)
    )


def test_a_head_seen_too_long_ago_is_read_again(
    lake_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    pool = Lake.init(LakeConfig(uri=lake_uri, user="a")).create_pool("p", "ts:asc")
    pool.load(rows_for(0, 0))
    assert pool.journal.fresh_head() is not None
    monkeypatch.setattr("lake_core.journal.TRUST_HEAD_FOR", 0.0)
    assert pool.journal.fresh_head() is None
    other = Lake.open(LakeConfig(uri=lake_uri, user="b")).pool("p")
    other.load(rows_for(1, 0))
    landed = pool.load(rows_for(0, 1))
    assert landed.retries == 0  # it read the journal first: no refused put
    assert rows(pool) == want((0, 0), (1, 0), (0, 1))


def test_a_head_is_not_trusted_across_a_sleep_or_from_the_hint_alone(
    lake_uri: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The monotonic clock stops while the machine sleeps: the wall clock must agree that the
    head was seen lately. And a head found through the HEAD hint (TAIL read before the
    probe) is not trusted until a commit has read the journal the careful way."""
    import time

    pool = Lake.init(LakeConfig(uri=lake_uri, user="a")).create_pool("p", "ts:asc")
    pool.load(rows_for(0, 0))
    assert pool.journal.fresh_head() is not None
    woke = time.time() + 3600  # an hour asleep: no monotonic time passed
    monkeypatch.setattr("lake_core.journal.time.time", lambda: woke)
    assert pool.journal.fresh_head() is None
    monkeypatch.undo()

    cold = Lake.open(LakeConfig(uri=lake_uri, user="b")).pool("p")
    assert cold.journal.read_head().n == pool.journal.read_head().n
    assert cold.journal.fresh_head() is None  # seen through the hint only
    cold.load(rows_for(1, 0))
    assert cold.journal.fresh_head() is not None
    assert rows(cold) == want((0, 0), (1, 0))
