"""A data object replaced by another object's bytes is caught, never read as rows (issue 10
item 6): cheap footer checks on every read, the checksum on whole-object reads and on
``lake verify`` / ``lake objects --verify``. Both stores; old commits without checksums stay
readable."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest

from lake_cli import main
from lake_core import Lake
from lake_core.commit import Add, Commit
from lake_core.errors import CorruptDataObjectError, PurgedObjectError
from lake_core.integrity import checksum
from lake_core.loading import load
from lake_core.maintenance import compact
from lake_core.objects import ObjectMeta
from lake_core.pool import Pool


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def _three(lake: Lake) -> tuple[Pool, list[ObjectMeta]]:
    """Three loads of the same shape: 50 rows each, same columns, same size on disk."""
    pool = lake.create_pool("p", "ts:asc")
    for i in range(2, 5):
        load(pool, [pa.table({"ts": list(range(i * 100, i * 100 + 50)), "v": [f"a{i}"] * 50})])
    objs = sorted(pool.snapshot(pool.tip()).objects.values(), key=lambda o: o.min or [])
    return pool, objs


def _swap(lake: Lake, pool: Pool, target: ObjectMeta, source: ObjectMeta) -> None:
    """Overwrite ``target``'s file with ``source``'s bytes, as a bad copy or restore would."""
    lake.store.put(pool.layout.data(target.id), lake.store.get(pool.layout.data(source.id)))


def test_commits_record_a_checksum_of_the_bytes(lake: Lake) -> None:
    pool, objs = _three(lake)
    for o in objs:
        data = lake.store.get(pool.layout.data(o.id))
        assert o.checksum == checksum(data) and o.checksum.startswith("crc32:")
        assert len(data) == o.size
    # And it survives the commit's encoding.
    commit = pool.read_commit(pool.tip() or "")
    added = [a.object for a in commit.actions if isinstance(a, Add)]
    assert added[0].checksum == objs[-1].checksum


def test_a_swapped_object_of_the_same_shape_fails_every_read(lake: Lake) -> None:
    pool, objs = _three(lake)
    target, source = objs[1], objs[2]
    assert target.size == source.size  # same shape: the size check alone cannot catch it
    _swap(lake, pool, target, source)
    fresh = Lake.open(lake.config).pool("p")
    message = f"data object {target.id} of pool p is corrupt: "
    with pytest.raises(CorruptDataObjectError, match=message + "column 'ts' spans 400..449"):
        fresh.read()
    with pytest.raises(CorruptDataObjectError, match=message):
        fresh.read(where="ts >= 300 AND ts < 350")
    # A read that prunes the object away does not touch it.
    assert fresh.read(where="ts < 250")["ts"].to_pylist() == list(range(200, 250))
    if lake.store.local_path("probe") is None:
        # SQL on S3 checks each planned footer (once) as the read above does. (On local disk
        # DuckDB reads the files itself and only their sizes are checked.)
        with pytest.raises(CorruptDataObjectError, match=message + "column 'ts' spans"):
            Lake.open(lake.config).sql("SELECT count(*) FROM p").fetchall()
    # Compaction reads whole objects: the checksum catches it before anything is written.
    tip = fresh.tip()
    with pytest.raises(CorruptDataObjectError, match=message + "checksum crc32:"):
        compact(fresh, "main", [o.id for o in objs])
    assert fresh.tip() == tip


def test_an_object_of_another_size_is_caught(lake: Lake) -> None:
    pool = lake.create_pool("s", "ts:asc")
    load(pool, [pa.table({"ts": list(range(50))})])
    load(pool, [pa.table({"ts": list(range(100, 400)), "w": ["x" * 20] * 300})])
    small, big = sorted(pool.snapshot(pool.tip()).objects.values(), key=lambda o: o.min or [])
    assert small.size != big.size
    _swap(lake, pool, small, big)
    fresh = Lake.open(lake.config).pool("s")
    with pytest.raises(CorruptDataObjectError, match=f"data object {small.id} of pool s"):
        fresh.read()
    # SQL too (local disk: the file's size; S3: the footer fetched at the recorded size).
    with pytest.raises(CorruptDataObjectError, match=f"data object {small.id} of pool s"):
        Lake.open(lake.config).sql("SELECT count(*) FROM s").fetchall()


def test_verify_cli(lake: Lake, capsys: pytest.CaptureFixture[str]) -> None:
    pool, objs = _three(lake)
    L = ["--lake", lake.config.uri]
    code, out, err = run(capsys, *L, "verify", "-p", "p")
    assert (code, err) == (0, "")
    assert out.startswith("verified 3 objects (") and out.endswith("): all intact\n")
    _swap(lake, pool, objs[0], objs[2])
    before = {i.key: lake.store.get(i.key) for i in lake.store.list("") if "/data/" not in i.key}
    code, out, err = run(capsys, *L, "verify", "-p", "p", "-f", "json")
    assert code == 1
    verdicts = {v["id"]: v for v in map(json.loads, out.splitlines())}
    assert verdicts[objs[0].id]["status"] == "corrupt" and verdicts[objs[1].id]["status"] == "ok"
    assert verdicts[objs[0].id]["problem"]
    assert err.count("\n") == 1
    assert err.startswith(f"error: data object {objs[0].id} of pool p is corrupt: ")
    code, out, err = run(capsys, *L, "objects", "-p", "p", "--verify")
    assert code == 1 and err.startswith(f"error: data object {objs[0].id} of pool p is corrupt")
    lines = out.splitlines()
    assert lines[0].split()[-1] == "verified"
    # Split after the id: an id may itself end in "B" before the column gap.
    status = {ln.split()[0]: ln.split(None, 1)[1].split("B  ", 1)[1] for ln in lines[1:]}
    assert status[objs[1].id] == status[objs[2].id] == "ok"
    assert status[objs[0].id].startswith("corrupt: ")
    code, out, err = run(capsys, *L, "query", "-p", "p")
    assert code == 1 and err.startswith(f"error: data object {objs[0].id} of pool p is corrupt")
    # Nothing but the damaged file differs: verification changes nothing.
    after = {i.key: lake.store.get(i.key) for i in lake.store.list("") if "/data/" not in i.key}
    assert after == before


def test_verify_a_branch_and_objects_of_old_commits(
    lake: Lake, capsys: pytest.CaptureFixture[str]
) -> None:
    """A commit written before checksums existed (no ``checksum`` field) stays readable and
    verifiable; verify says how many objects it could not checksum."""
    pool, objs = _three(lake)
    tip = pool.read_commit(pool.tip() or "")
    key = pool.layout.commit(tip.id)
    doc = json.loads(lake.store.get(key))
    for action in doc["actions"]:
        if action["op"] == "add":
            del action["object"]["checksum"]
    lake.store.put(key, json.dumps(doc).encode())
    fresh = Lake.open(lake.config).pool("p")
    assert Commit.decode(key, lake.store.get(key)).adds()[0].checksum is None
    assert fresh.read().num_rows == 150
    code, out, err = run(capsys, "--lake", lake.config.uri, "verify", "-p", "p@main")
    assert (code, err) == (0, "")
    assert out.endswith("all intact; 1 written before checksums were recorded\n")


def test_missing_object_is_reported_by_verify(
    lake: Lake, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    pool, objs = _three(lake)
    lake.store.delete(pool.layout.data(objs[2].id))
    code, out, err = run(capsys, "--lake", lake.config.uri, "verify", "-p", "p")
    assert code == 1
    assert err == f"error: data object {objs[2].id} of pool p is corrupt: missing from the store\n"


def test_verify_names_a_purged_object_as_purged_not_corrupt(
    lake: Lake, capsys: pytest.CaptureFixture[str]
) -> None:
    """An object that ``lake purge`` deleted on purpose is reported as purged, naming the
    commit, the way reads say it: not as damage ("corrupt: missing from the store"). An object
    gone without a purge record is still missing, and corruption is named before a purge."""
    pool, objs = _three(lake)
    purged_commit = next(iter(pool.log()))  # the load of objs[2]
    assert [a.id for a in purged_commit.adds()] == [objs[2].id]
    pool.purge(purged_commit.id)
    verdicts = {v.object_id: v for v in pool.verify(check=False)}
    assert verdicts[objs[2].id].purged_by == purged_commit.id
    assert verdicts[objs[2].id].status == "purged"
    assert verdicts[objs[2].id].problem == f"purged (lake purge of commit {purged_commit.id})"
    assert verdicts[objs[0].id].status == "ok" and verdicts[objs[0].id].purged_by is None
    with pytest.raises(PurgedObjectError, match=f"{objs[2].id} was purged"):
        pool.verify()
    L = ["--lake", lake.config.uri]
    code, out, err = run(capsys, *L, "verify", "-p", "p", "-f", "json")
    assert code == 1
    assert err == (
        f"error: data object {objs[2].id} was purged (lake purge of commit {purged_commit.id})\n"
    )
    rows = {r["id"]: r for r in map(json.loads, out.splitlines())}
    assert rows[objs[2].id]["status"] == "purged" and rows[objs[0].id]["status"] == "ok"
    code, out, err = run(capsys, *L, "objects", "-p", "p", "--verify")
    assert code == 1 and "was purged" in err
    assert f"purged (lake purge of commit {purged_commit.id})" in out
    # An object lost without a purge is damage, and it is named first.
    lake.store.delete(pool.layout.data(objs[0].id))
    code, out, err = run(capsys, *L, "verify", "-p", "p")
    assert code == 1
    assert err == (
        f"error: data object {objs[0].id} of pool p is corrupt: missing from the store "
        "(and 1 purged object)\n"
    )
