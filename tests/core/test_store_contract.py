"""The object-store contract, run against every backend (local disk and moto S3 over HTTP)."""

from __future__ import annotations

import os

import pytest

from lake_core.errors import ObjectExistsError, ObjectNotFoundError
from lake_core.stores import ObjectStore, open_store
from tests import processes


def test_put_get_roundtrip(store: ObjectStore) -> None:
    store.put("a/b/c.bin", b"hello")
    assert store.get("a/b/c.bin") == b"hello"
    store.put("a/b/c.bin", b"replaced")
    assert store.get("a/b/c.bin") == b"replaced"


def test_get_missing_raises_not_found(store: ObjectStore) -> None:
    with pytest.raises(ObjectNotFoundError) as info:
        store.get("nope/x")
    assert isinstance(info.value, FileNotFoundError)
    assert "nope/x" in str(info.value)
    with pytest.raises(ObjectNotFoundError):
        store.head("nope/x")
    with pytest.raises(ObjectNotFoundError):
        store.get_range("nope/x", 0, 3)


def test_get_range(store: ObjectStore) -> None:
    store.put("r", bytes(range(100)))
    assert store.get_range("r", 10, 5) == bytes([10, 11, 12, 13, 14])
    assert store.get_range("r", 95, 50) == bytes([95, 96, 97, 98, 99])


def test_put_if_missing_creates_once(store: ObjectStore) -> None:
    store.put_if_missing("j/1.json", b"first")
    with pytest.raises(ObjectExistsError) as info:
        store.put_if_missing("j/1.json", b"second")
    assert isinstance(info.value, FileExistsError)
    assert store.get("j/1.json") == b"first"


def test_head_and_list(store: ObjectStore) -> None:
    store.put("p/x/1", b"1")
    store.put("p/x/22", b"22")
    store.put("p/y/3", b"333")
    store.put("q/4", b"4444")
    info = store.head("p/x/22")
    assert info.size == 2 and info.mtime > 0
    assert sorted(i.key for i in store.list("p/")) == ["p/x/1", "p/x/22", "p/y/3"]
    assert sorted(i.key for i in store.list("p/x/2")) == ["p/x/22"]
    assert sorted((i.key, i.size) for i in store.list("p/y/")) == [("p/y/3", 3)]
    assert list(store.list("none/")) == []


def test_delete_is_idempotent(store: ObjectStore) -> None:
    store.put("d/1", b"x")
    store.delete("d/1")
    store.delete("d/1")
    assert not store.exists("d/1")
    store.put("d/2", b"y")
    store.put("d/3", b"z")
    store.delete_many(["d/2", "d/3", "d/4"])
    assert list(store.list("d/")) == []


def _race(uri: str, key: str, me: int, start: object, results: object) -> None:
    store = open_store(uri)
    start.wait()  # type: ignore[attr-defined]
    try:
        store.put_if_missing(key, f"writer-{me}".encode())
        results.put(me)  # type: ignore[attr-defined]
    except ObjectExistsError:
        results.put(-1)  # type: ignore[attr-defined]


@pytest.mark.parametrize("round_", range(3))
def test_racing_put_if_missing_exactly_one_wins(lake_uri: str, round_: int) -> None:
    """Eight OS processes race put-if-missing on one name: exactly one wins, and the object
    holds the winner's bytes, whole."""
    ctx = processes.context()
    start = ctx.Barrier(8)
    results = ctx.Queue()
    key = f"race/{round_}.json"
    procs = [ctx.Process(target=_race, args=(lake_uri, key, i, start, results)) for i in range(8)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
    got = [results.get(timeout=5) for _ in procs]
    winners = [g for g in got if g >= 0]
    assert len(winners) == 1, got
    assert open_store(lake_uri).get(key) == f"writer-{winners[0]}".encode()


def test_local_store_leaves_no_temp_files(tmp_path: os.PathLike[str]) -> None:
    store = open_store(str(tmp_path))
    store.put("a/1", b"x")
    store.put_if_missing("a/2", b"y")
    with pytest.raises(ObjectExistsError):
        store.put_if_missing("a/2", b"z")
    assert sorted(os.listdir(os.path.join(tmp_path, "a"))) == ["1", "2"]
