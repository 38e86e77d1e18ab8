"""The small-commit path on local disk: which fsyncs a load makes, in which order, and what it
reads (docs/architecture.md, "Which fsync protects what"). Crashes themselves: test_crash.py."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from lake_core import Lake
from lake_core.errors import ObjectStoreError
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
    reads: list[str] = []
    real_get = LocalObjectStore.get

    def get(self: LocalObjectStore, key: str) -> bytes:
        reads.append(key)
        return real_get(self, key)

    monkeypatch.setattr(LocalObjectStore, "get", get)
    for i in range(3, 40):  # across a cached snapshot (every 32nd commit)
        reads.clear()
        _load(pool, i)
        names = [k.rsplit("/", 1)[-1] for k in reads]
        # TAIL, and the probe of the next entry (missing): nothing else.
        assert names == ["TAIL", f"{i + 2}.json"], reads  # entry 1 made main


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
