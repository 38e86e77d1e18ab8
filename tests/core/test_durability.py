"""The small-commit path on local disk: which fsyncs a load makes, in which order, and what it
reads (docs/architecture.md, "Which fsync protects what"). Crashes themselves: test_crash.py."""

from __future__ import annotations

import os
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from lake_core import Lake
from lake_core.errors import ObjectStoreError
from lake_core.journal import LOCAL_HEAD_EVERY, WALK_LIMIT
from lake_core.stores import local
from lake_core.stores.base import SyncBatch
from lake_core.stores.local import LocalObjectStore
from tests.workers import rows_for


class Recorder:
    """Every fsync (by path), link and rename the local store makes, in order, from any
    thread (round 1 runs on the fsync pool)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.events: list[tuple[str, str]] = []
        self.lock = threading.Lock()
        real_fsync, real_link, real_replace = os.fsync, os.link, os.replace

        def fsync(fd: int) -> None:
            path = os.readlink(f"/proc/self/fd/{fd}")
            real_fsync(fd)
            self.add("fsync", path)

        def link(src: Any, dst: Any) -> None:
            real_link(src, dst)
            self.add("link", str(dst))

        def replace(src: Any, dst: Any) -> None:
            real_replace(src, dst)
            self.add("rename", str(dst))

        monkeypatch.setattr(local.os, "fsync", fsync)
        monkeypatch.setattr(local.os, "link", link)
        monkeypatch.setattr(local.os, "replace", replace)

    def add(self, what: str, path: str) -> None:
        with self.lock:
            self.events.append((what, path))

    def clear(self) -> None:
        with self.lock:
            self.events.clear()


def record_gets(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The keys the local store reads from now on, in order."""
    reads: list[str] = []
    real_get = LocalObjectStore.get

    def get(self: LocalObjectStore, key: str) -> bytes:
        reads.append(key)
        return real_get(self, key)

    monkeypatch.setattr(LocalObjectStore, "get", get)
    return reads


def _load(pool: Any, i: int) -> Any:
    return pool.load(rows_for(0, i, n=10))


def test_a_small_commit_syncs_what_the_entry_names_before_linking_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("p", "ts:asc")
    _load(pool, 0)
    rec = Recorder(monkeypatch)
    commit = _load(pool, 1)
    root = tmp_path / "lake" / "pools" / pool.id
    data = str(root / "data" / f"{commit.adds()[0].id}.parquet")
    commit_file = str(root / "commits" / f"{commit.id}.json")
    branches = str(root / "branches")
    entry = str(root / "branches" / "3.json")  # 1: main created, 2: the first load
    events = rec.events
    fsyncs = [p for what, p in events if what == "fsync"]
    # Six fsyncs: data object, commit object, entry temp file, their three directories.
    assert len(fsyncs) == 6, events
    link_at = events.index(("link", entry))
    before = {p for what, p in events[:link_at] if what == "fsync"}
    assert {data, commit_file, str(root / "data"), str(root / "commits")} <= before
    assert any(Path(p).parent == root / "branches" and ".tmp-" in p for p in before)
    # After the commit point: only the entry's directory (HEAD waits for entry 8).
    after = events[link_at + 1 :]
    assert after == [("fsync", branches)]
    assert pool.read(columns=["i"]).num_rows == 20


def test_head_is_a_hint_renamed_every_eighth_entry_without_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("p", "ts:asc")
    head = tmp_path / "lake" / "pools" / pool.id / "branches" / "HEAD"
    rec = Recorder(monkeypatch)
    for i in range(1, 17):  # entries 2..17
        _load(pool, i)
        n = i + 1
        renamed = [e for e in rec.events if e == ("rename", str(head))]
        assert len(renamed) == (1 if n % 8 == 0 else 0), (n, rec.events)
        assert ("fsync", str(head)) not in rec.events
        rec.clear()
    assert head.read_text() == "16"
    fresh = Lake.open(str(tmp_path / "lake")).pool("p")
    assert fresh.journal.read_head().n == 17  # probed past the hint


def test_a_second_commit_rereads_nothing_this_process_wrote(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("p", "ts:asc")
    for i in range(3):
        _load(pool, i)
    reads = record_gets(monkeypatch)
    for i in range(3, 40):  # across a cached snapshot (every 32nd commit)
        reads.clear()
        _load(pool, i)
        # Nothing: the handle appends after the entry it wrote last (lake_core.journal).
        assert reads == [], reads


def test_an_entry_is_not_linked_when_syncing_its_batch_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = LocalObjectStore(tmp_path)
    batch = SyncBatch()
    store.deferring(batch).put("a/x", b"x")
    assert batch.files and (tmp_path / "a" / "x").read_bytes() == b"x"

    def broken(paths: list[str]) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(local, "fsync_all", broken)
    with pytest.raises(ObjectStoreError):
        store.put_if_missing_after("b/1.json", b"entry", batch)
    assert not (tmp_path / "b" / "1.json").exists()
    assert not [p for p in (tmp_path / "b").iterdir()]  # no temp file left behind
    assert batch.files  # still owed


def test_a_handle_whose_last_seen_tip_was_vacated_and_cleaned_up_still_loads(
    tmp_path: Path,
) -> None:
    """The tip a handle saw long ago is not read back for the load's schema checks: it may
    be gone (review of 5f93e8a: NotFoundError on a notebook's long-lived handle)."""
    lake = Lake.init(str(tmp_path / "lake"))
    writer = lake.create_pool("p", "ts:asc")
    commits = [_load(writer, i) for i in range(2)]
    stale = Lake.open(str(tmp_path / "lake")).pool("p")
    stale.branches()  # sees the tip of now
    stale.forget(commits[-1].id)  # its snapshot left the cache, as it would in a busy process
    commits += [_load(writer, i) for i in range(2, 8)]
    cut = commits[-1].date
    writer.vacate(cut)
    writer.cleanup(grace=timedelta(0), now=cut + timedelta(days=1))
    landed = _load(stale, 99)
    assert Lake.open(str(tmp_path / "lake")).pool("p").tip() == landed.id
    assert writer.count().rows == 9 * 10  # every load: vacating history keeps the rows


def test_cleanup_during_a_stale_handles_walk_cannot_fork_the_journal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A handle walks forward from the entry it saw; if vacate + cleanup delete the entry it
    is about to probe, the gap must not pass for the head (it would re-create a number below
    TAIL: a commit reported as landed that no reader sees). TAIL is read after the walk."""
    import importlib

    from lake_core import journal as journal_module

    # Vacated entries go at once here, as before they had to age (VACATED_ENTRY_AGE): this
    # is the walk's own defence, TAIL read after it, whatever the ages.
    # (imported by name: the package's attribute ``cleanup`` is the function)
    cleanup_module = importlib.import_module("lake_core.maintenance.cleanup")
    monkeypatch.setattr(cleanup_module, "VACATED_ENTRY_AGE", timedelta(0))

    lake = Lake.init(str(tmp_path / "lake"))
    writer = lake.create_pool("p", "ts:asc")
    _load(writer, 0)
    stale = Lake.open(str(tmp_path / "lake")).pool("p")
    stale.read()  # sees entry 2
    # Entries 3..7; vacating at entry 7 lets cleanup delete entries up to 5, among them 4,
    # the one the stale handle is about to probe.
    commits = [_load(writer, i) for i in range(1, 6)]
    real = journal_module.Journal.read_entry
    fired: list[int] = []

    def read_entry(self: Any, n: int) -> Any:
        if self is stale.journal and n == 4 and not fired:
            fired.append(n)  # meanwhile, maintenance in another process
            writer.vacate(commits[-1].date)
            writer.cleanup(grace=timedelta(0))
        return real(self, n)

    monkeypatch.setattr(journal_module.Journal, "read_entry", read_entry)
    landed = _load(stale, 99)
    monkeypatch.setattr(journal_module.Journal, "read_entry", real)
    assert fired
    fresh = Lake.open(str(tmp_path / "lake")).pool("p")
    assert fresh.tip() == landed.id
    assert sorted(fresh.read(columns=["i"]).column("i").to_pylist()).count(99) == 10


def test_a_handle_far_behind_reads_head_instead_of_every_entry_it_missed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = Lake.init(str(tmp_path / "lake"))
    writer = lake.create_pool("p", "ts:asc")
    _load(writer, 0)
    stale = Lake.open(str(tmp_path / "lake")).pool("p")
    _load(stale, 1)
    for i in range(2, 102):
        _load(writer, i)
    reads = record_gets(monkeypatch)
    landed = _load(stale, 999)
    entries = [k for k in reads if k.endswith(".json") and "/branches/" in k]
    # Its first try appends after the entry it wrote (lake_core.journal, fresh_head): the
    # entry is taken, and read back twice (the store's "our bytes?", the commit's proof of a
    # lost race). Then the walk limit, HEAD's entry and the probes past it (HEAD is rewritten
    # every LOCAL_HEAD_EVERY entries on local disk); not the 100 entries it missed.
    names = [k.rsplit("/", 1)[-1] for k in reads]
    assert len(entries) <= 2 + WALK_LIMIT + 1 + LOCAL_HEAD_EVERY + 1, names
    assert "HEAD" in [k.rsplit("/", 1)[-1] for k in reads]
    assert Lake.open(str(tmp_path / "lake")).pool("p").tip() == landed.id


def test_a_pools_first_load_makes_its_new_directories_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("p", "ts:asc")
    rec = Recorder(monkeypatch)
    _load(pool, 0)
    root = tmp_path / "lake" / "pools" / pool.id
    fsyncs = [p for what, p in rec.events if what == "fsync"]
    # data/ and commits/ were created by this load: their entries in pools/<id>/ are synced
    # before the journal entry that names files inside them is linked.
    entry_link = rec.events.index(("link", str(root / "branches" / "2.json")))
    assert str(root) in [p for what, p in rec.events[:entry_link] if what == "fsync"]
    assert fsyncs.count(str(root)) >= 1


def test_a_failed_fsync_of_the_journal_directory_is_unknown_not_success(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lake_core.errors import CommitStateUnknownError

    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("p", "ts:asc")
    _load(pool, 0)
    real = LocalObjectStore._fsync_dir

    def failing(path: str | Path) -> None:
        if Path(path).name == "branches":
            raise OSError(5, "Input/output error")
        real(path)

    monkeypatch.setattr(LocalObjectStore, "_fsync_dir", staticmethod(failing))
    with pytest.raises(CommitStateUnknownError, match="may not be durable"):
        _load(pool, 1)
    monkeypatch.setattr(LocalObjectStore, "_fsync_dir", staticmethod(real))
    # Nothing was discarded: the entry is there and its data reads.
    assert Lake.open(str(tmp_path / "lake")).pool("p").count().rows == 20
