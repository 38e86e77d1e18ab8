"""S3's background writes (lake_core.stores.s3, "Background writes"): a small commit's data
object and commit object are put concurrently and the commit waits for both once, before its
journal entry; the HEAD hint is put after the commit returns. Checked through the fault proxy,
whose timeline shows which requests were in flight together (delays make the overlap certain
when it exists and impossible to fake when it does not), on moto over HTTP."""

from __future__ import annotations

import re
from collections.abc import Iterator

import boto3
import pyarrow as pa
import pytest

from lake_core import Lake, LakeConfig
from lake_core.errors import CommitStateUnknownError, ObjectNotFoundError, ObjectStoreError
from lake_core.pool import Pool
from lake_core.stores import s3 as s3_module
from lake_core.stores.base import SyncBatch
from lake_core.stores.s3 import S3ObjectStore
from tests.faultproxy import FaultProxy, Rule, proxied
from tests.lakecheck import assert_journal_dense, assert_objects_intact

DATA = r"/data/[^/]+\.parquet$"
COMMIT = r"/commits/[^/]+\.json$"
ENTRY = r"/branches/\d+\.json$"
HEAD = r"/branches/HEAD$"


@pytest.fixture
def proxy(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    with proxied(s3_endpoint, monkeypatch, seed=3) as px:
        yield px


def _pool(bucket: str) -> Pool:
    lake = Lake.init(LakeConfig(uri=f"s3://{bucket}/lake", user="t"))
    lake.create_pool("p", "k:asc")
    pool = lake.pool("p")
    pool.load(_rows(0))
    pool.store.flush()
    return pool


def _rows(start: int, n: int = 3) -> pa.Table:
    return pa.table({"k": list(range(start, start + n)), "v": [f"r{i}" for i in range(n)]})


def _at(px: FaultProxy, what: str, method: str, pattern: str, since: int) -> int:
    """Index in the proxy's timeline of the first matching event after ``since``."""
    for i, (w, m, path) in enumerate(px.timeline[since:], since):
        if w == what and m == method and re.search(pattern, path):
            return i
    raise AssertionError(f"no {what} {method} {pattern} in {px.timeline[since:]}")


def _keys(pool: Pool) -> list[int]:
    return sorted(Lake.open(LakeConfig(uri=pool.store.uri)).pool("p").read()["k"].to_pylist())


def test_a_small_commit_puts_data_and_commit_together_and_head_after(
    s3_bucket: str, proxy: FaultProxy
) -> None:
    pool = _pool(s3_bucket)
    # Hold the data object's PUT and the HEAD hint's at the proxy for a second each.
    proxy.add(Rule("delay", method="PUT", key=DATA, delay=1.0))
    proxy.add(Rule("delay", method="PUT", key=HEAD, delay=1.0))
    since = len(proxy.timeline)
    pool.load(_rows(10))
    at_return = list(proxy.timeline)
    # The commit object was sent while the data object's PUT was still unanswered: one wait
    # for both instead of two in a row.
    data_answered = _at(proxy, "answered", "PUT", DATA, since)
    assert _at(proxy, "arrived", "PUT", COMMIT, since) < data_answered
    # The entry (the commit point) only after both were answered.
    entry_sent = _at(proxy, "arrived", "PUT", ENTRY, since)
    assert entry_sent > data_answered
    assert entry_sent > _at(proxy, "answered", "PUT", COMMIT, since)
    # The load returned before the HEAD hint was answered; flush waits for it.
    assert not any(w == "answered" and re.search(HEAD, p) for w, _, p in at_return[since:])
    pool.store.flush()
    assert _at(proxy, "answered", "PUT", HEAD, since) > entry_sent
    head = boto3.client("s3").get_object(Bucket=s3_bucket, Key=f"lake/{pool.layout.journal.head}")
    assert int(head["Body"].read()) == pool.journal.read_head().n
    assert _keys(pool) == [0, 1, 2, 10, 11, 12]
    assert_journal_dense(pool)
    assert_objects_intact(pool)


@pytest.mark.parametrize("which", ["data", "commit"])
def test_a_failed_background_put_fails_the_commit_and_changes_nothing(
    s3_bucket: str, proxy: FaultProxy, which: str
) -> None:
    """Every try of the data (or commit) object's PUT answered 503: the load fails with the
    store's error — not "unknown": the journal entry was never sent — and leaves the pool as
    it was, without the objects it wrote."""
    pool = _pool(s3_bucket)
    tip, entries = pool.tip(), pool.journal.read_head().n
    data_before = {i.key for i in pool.store.list(pool.layout.data_dir)}
    rule = proxy.add(
        Rule("error", method="PUT", key=DATA if which == "data" else COMMIT, times=None)
    )
    since = len(proxy.timeline)
    with pytest.raises(ObjectStoreError) as caught:
        pool.load(_rows(10))
    assert not isinstance(caught.value, CommitStateUnknownError)
    assert rule.fired >= 1
    assert not any(re.search(ENTRY, p) and m == "PUT" for _, m, p in proxy.timeline[since:])
    proxy.clear()
    pool.store.flush()
    assert pool.tip() == tip and pool.journal.read_head().n == entries
    assert {i.key for i in pool.store.list(pool.layout.data_dir)} == data_before
    assert _keys(pool) == [0, 1, 2]
    pool.load(_rows(20))  # and the pool takes the next load
    assert _keys(pool) == [0, 1, 2, 20, 21, 22]


def test_the_store_reads_what_it_put_in_the_background(
    s3_bucket: str, proxy: FaultProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A key put by a deferring view is read back (get, head, get_range) by the same store at
    once, its put awaited; a delete waits too (no PUT landing after the DELETE). A put larger
    than DEFER_MAX_OBJECT is made on the calling thread."""
    store = S3ObjectStore(s3_bucket, "x")
    proxy.add(Rule("delay", method="PUT", key=r"/x/slow$", delay=0.5, times=None))
    batch = SyncBatch()
    view = store.deferring(batch)
    view.put("slow", b"abc")
    assert [k for k, _ in batch.pending] == ["slow"]
    assert store.get("slow") == b"abc"
    assert store.head("slow").size == 3
    assert store.get_range("slow", 1, 2) == b"bc"
    view.put("slow", b"second")
    store.delete("slow")
    assert not store.exists("slow")
    store.settle(batch)
    assert not batch
    monkeypatch.setattr(s3_module, "DEFER_MAX_OBJECT", 4)
    view.put("big", b"12345")
    assert not batch.pending and store.get("big") == b"12345"
    store.close()


def test_hints_are_coalesced_per_key_and_reads_never_wait_for_them(
    s3_bucket: str, proxy: FaultProxy
) -> None:
    """Many hints for a few keys while the hint thread is held: at most the running one and
    one queued per key reach S3, each key ends with its newest value, and a read of a hint's
    key returns at once (what S3 holds now), never queued behind other keys' hints."""
    store = S3ObjectStore(s3_bucket, "h")
    proxy.add(Rule("delay", method="PUT", key=r"/h/hint-", delay=0.3, times=None))
    for i in range(30):
        for key in ("hint-a", "hint-b", "hint-c"):
            store.put_hint(key, str(i).encode())
    with pytest.raises(ObjectNotFoundError):
        store.get("hint-c")  # not written yet, and not waited for
    store.flush()
    puts = [p for w, m, p in proxy.timeline if w == "arrived" and m == "PUT" and "/h/hint-" in p]
    assert 3 <= len(puts) <= 6, puts
    assert [store.get(k) for k in ("hint-a", "hint-b", "hint-c")] == [b"29"] * 3
    store.close()


def test_a_group_member_whose_put_failed_fails_alone(s3_bucket: str, proxy: FaultProxy) -> None:
    """Group commit on S3: loads in flight together share one commit. The data PUT of one
    member fails on every try: that load fails with the store's error, the others commit
    (alone, after the group failed), and the pool holds exactly their rows."""
    import threading

    pool = _pool(s3_bucket)
    pool.store.flush()
    bad = proxy.add(_OneKey("error", method="PUT", key=DATA, times=None))
    results: dict[int, object] = {}
    start = threading.Barrier(4)

    def run(i: int) -> None:
        start.wait()
        try:
            results[i] = pool.load(_rows(100 * (i + 1)), group=True)
        except ObjectStoreError as e:
            results[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    failed = [i for i, r in results.items() if isinstance(r, ObjectStoreError)]
    assert bad.fired >= 1 and len(failed) >= 1
    assert not any(isinstance(r, CommitStateUnknownError) for r in results.values())
    ok = sorted(i for i in results if i not in failed)
    want = [0, 1, 2] + [k for i in ok for k in range(100 * (i + 1), 100 * (i + 1) + 3)]
    proxy.clear()
    assert _keys(pool) == sorted(want)
    assert_journal_dense(pool)
    assert_objects_intact(pool)


class _OneKey(Rule):
    """A rule that, once it fired, matches only the key it fired on (every try of one PUT)."""

    def matches(self, method: str, path: str) -> bool:
        if not super().matches(method, path):
            return False
        return not self.fired_on or self.fired_on[0] == f"{method} {path}"
