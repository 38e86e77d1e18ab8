"""Revert and merge are row-correct whatever maintenance ran since (issue 19): the two everyday
sequences that used to duplicate rows or refuse to merge, conflicts, --theirs/--ours, revert of
a revert and of a merge, merge after vacate. Every test runs on local disk and on moto S3."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from lake_cli import main
from lake_core import Lake, LakeConfig
from lake_core.changes import delete_objects, delete_where, merge, revert
from lake_core.errors import CommitConflictError, EmptyTransactionError, HistoryVacatedError
from lake_core.loading import load
from lake_core.maintenance.compact import compact
from lake_core.maintenance.vacate import vacate
from lake_core.pool import Pool


def rows(pool: Pool, ref: str = "main") -> Counter[tuple[object, ...]]:
    t = pool.read(ref)
    names = sorted(t.schema.names)
    return Counter(tuple(r.get(n) for n in names) for r in t.to_pylist())


def batch(lo: int, hi: int, tag: str = "a") -> pa.Table:
    return pa.table(
        {"id": list(range(lo, hi)), "carrier": [f"{tag}{i % 3}" for i in range(lo, hi)]}
    )


def loaded_pool(lake: Lake) -> Pool:
    pool = lake.create_pool("flights", "id:asc")
    for i in range(4):  # four overlapping loads: compaction has work to do
        load(pool, [batch(i * 5, i * 5 + 20, tag="c")])
    return pool


def test_revert_of_delete_after_compaction_restores_rows_once(lake: Lake) -> None:
    pool = loaded_pool(lake)
    before = rows(pool)
    deleted = delete_where(pool, "carrier = 'c1'")
    assert compact(pool).commit is not None
    after_delete = rows(pool)
    assert sum(after_delete.values()) < sum(before.values())
    r = revert(pool, deleted.id)
    assert rows(pool) == before  # not duplicated (issue 19: 337,209 -> 666,147)
    assert r.extra["reverts"] == deleted.id
    # Reverting again is an empty transaction naming the revert; reverting the revert
    # deletes the rows again.
    with pytest.raises(EmptyTransactionError, match=r.id):
        revert(pool, deleted.id)
    compact(pool)
    revert(pool, r.id)
    assert rows(pool) == after_delete
    # ... and reverting the original once more is allowed again (the revert was undone).
    revert(pool, deleted.id)
    assert rows(pool) == before


def test_revert_of_load_after_compaction_removes_only_its_rows(lake: Lake) -> None:
    pool = loaded_pool(lake)
    before = rows(pool)
    extra = load(pool, [batch(7, 12, tag="x")])
    compact(pool)
    assert len(pool.snapshot(pool.tip()).objects) < 5
    revert(pool, extra.id)
    assert rows(pool) == before


def test_revert_of_compaction_is_empty(lake: Lake) -> None:
    pool = loaded_pool(lake)
    c = compact(pool).commit
    assert c is not None
    with pytest.raises(EmptyTransactionError, match="layout"):
        revert(pool, c.id)


def test_merge_after_compaction_on_target(lake: Lake) -> None:
    pool = loaded_pool(lake)
    pool.create_branch("dev3")
    delete_where(pool, "carrier = 'c2'", "dev3")
    expected = rows(pool, "dev3")
    compact(pool)  # main rewrote every object dev3 deleted
    merge(pool, "dev3", "main")
    assert rows(pool) == expected


def test_merge_after_compaction_on_both_sides(lake: Lake) -> None:
    pool = loaded_pool(lake)
    pool.create_branch("dev")
    delete_where(pool, "id < 8", "dev")
    load(pool, [batch(100, 103)], "dev")
    compact(pool, "dev")
    load(pool, [batch(200, 202)])
    compact(pool)
    want = rows(pool, "dev") + Counter((r["carrier"], r["id"]) for r in batch(200, 202).to_pylist())
    merge(pool, "dev", "main")
    assert rows(pool) == want
    # Merging again brings nothing.
    with pytest.raises(EmptyTransactionError):
        merge(pool, "dev", "main")


def test_same_rows_changed_on_both_sides_merge_once(lake: Lake) -> None:
    """dev replaces row 2 and main deletes rows 2 and 3, then compacts: deleting row 2 is
    the same change on both sides (no conflict); dev's new rows land."""
    pool = lake.create_pool("p", "id:asc")
    load(pool, [pa.table({"id": [1, 2, 3, 4], "v": ["a", "b", "c", "d"]})])
    pool.create_branch("dev")
    delete_where(pool, "id = 2", "dev")
    load(pool, [pa.table({"id": [2, 10], "v": ["dev", "new"]})], "dev")
    delete_where(pool, "id BETWEEN 2 AND 3", "main")
    compact(pool)
    merge(pool, "dev", "main")
    assert sorted(pool.read().to_pylist(), key=lambda r: r["id"]) == [
        {"id": 1, "v": "a"},
        {"id": 2, "v": "dev"},
        {"id": 4, "v": "d"},
        {"id": 10, "v": "new"},
    ]


def test_true_conflict_names_key_range_and_commits_and_sides_resolve(lake: Lake) -> None:
    """Of two copies of a row, dev deletes one (by object) and main both (by predicate):
    both changed the same row differently."""
    pool = lake.create_pool("p", "id:asc")
    load(pool, [pa.table({"id": [1, 5], "v": ["a", "x"]})])
    copy = load(pool, [pa.table({"id": [5], "v": ["x"]})]).adds()[0]
    load(pool, [pa.table({"id": [9], "v": ["z"]})])
    pool.create_branch("dev")
    d1 = delete_objects(pool, [copy.id], "dev")
    load(pool, [pa.table({"id": [20], "v": ["dev"]})], "dev")
    d2 = delete_where(pool, "id = 5", "main")
    compact(pool)
    tip = pool.tip()
    with pytest.raises(CommitConflictError) as e:
        merge(pool, "dev", "main")
    msg = str(e.value)
    assert "1 row(s) with id 5" in msg and d1.id in msg and d2.id in msg and "--theirs" in msg
    assert pool.tip() == tip  # nothing committed
    pool.create_branch("try-ours", "main")
    merge(pool, "dev", "try-ours", resolve="ours")
    assert sorted(pool.read("try-ours").column("id").to_pylist()) == [1, 9, 20]
    merge(pool, "dev", "main", resolve="theirs")
    assert sorted(pool.read().column("id").to_pylist()) == [1, 5, 9, 20]


def test_conflict_names_the_load_that_added_the_contested_copy(lake: Lake) -> None:
    """dev deletes id 2 (rewriting the object: id 1 removed and written again, unchanged),
    then loads 1..3 again: its change to id 1 is that load's extra copy, while main deleted
    id 1. The conflict names dev's load, not the rewrite that left id 1 as it was."""
    pool = lake.create_pool("p", "id:asc")
    load(pool, [pa.table({"id": [1, 2, 3]})])
    pool.create_branch("dev")
    delete_where(pool, "id = 2", "dev")
    again = load(pool, [pa.table({"id": [1, 2, 3]})], "dev")
    gone = delete_where(pool, "id = 1", "main")
    with pytest.raises(CommitConflictError) as e:
        merge(pool, "dev", "main")
    assert f"(dev: commit {again.id}; main: commit {gone.id})" in str(e.value)


def test_revert_of_merge(lake: Lake) -> None:
    pool = loaded_pool(lake)
    pool.create_branch("dev")
    load(pool, [batch(50, 60)], "dev")
    delete_where(pool, "carrier = 'c0'", "dev")
    before = rows(pool)
    m = merge(pool, "dev", "main")
    compact(pool)
    revert(pool, m.id)
    assert rows(pool) == before


def test_merge_after_vacate_fails_clearly(lake: Lake) -> None:
    pool = lake.create_pool("p", "id:asc")
    load(pool, [pa.table({"id": [1, 3, 4]})])
    pool.create_branch("dev")
    load(pool, [pa.table({"id": [100]})], "dev")
    load(pool, [pa.table({"id": [5]})])
    compact(pool)
    pool.clock.sleep(0.01)
    vacate(pool, pool.clock.now() + timedelta(seconds=1))
    tip = pool.tip()
    with pytest.raises(HistoryVacatedError, match="merge base"):
        merge(pool, "dev", "main")
    assert pool.tip() == tip


def test_revert_removing_a_columns_only_rows_drops_the_column(lake: Lake) -> None:
    pool = lake.create_pool("p", "id:asc")
    load(pool, [pa.table({"id": [1, 2]})])
    extra = load(pool, [pa.table({"id": [3], "note": ["only here"]})])
    assert "note" in pool.snapshot(pool.tip()).schema.names
    revert(pool, extra.id)
    assert pool.snapshot(pool.tip()).schema.names == ["id"]


def test_revert_of_object_delete_after_unrelated_compaction_is_by_id(lake: Lake) -> None:
    """A change no maintenance touched replays by object id: nothing is read or rewritten."""
    pool = lake.create_pool("p", "id:asc")
    a = load(pool, [pa.table({"id": [1, 2]})]).adds()[0]
    load(pool, [pa.table({"id": [10, 11]})])
    load(pool, [pa.table({"id": [11, 12]})])
    d = delete_objects(pool, [a.id])
    compact(pool)  # compacts the 10..12 objects only
    r = revert(pool, d.id)
    assert [o.id for o in r.adds()] == [a.id] and not r.deletes()


def test_cli_merge_conflict_is_one_error_line_then_theirs_resolves(
    lake_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's sequence through the CLI: a conflict is one `error:` line naming the key
    range, exit 1, nothing committed; `--theirs` merges; `lake revert` after `lake compact`
    restores the deleted rows once."""

    def run(*args: str) -> tuple[int, str, str]:
        code = main(["--lake", lake_uri, *args])
        out, err = capsys.readouterr()
        return code, out, err

    assert run("init")[0] == 0
    assert run("create", "p", "--orderby", "id:asc")[0] == 0
    a = tmp_path / "a.ndjson"
    a.write_text("".join(f'{{"id": {i}, "v": "x"}}\n' for i in (1, 5, 5, 9)))
    assert run("load", "-p", "p", str(a))[0] == 0
    b = tmp_path / "b.ndjson"
    b.write_text('{"id": 5, "v": "x"}\n{"id": 7, "v": "y"}\n')
    assert run("load", "-p", "p", str(b))[0] == 0
    assert run("branch", "-p", "p", "dev")[0] == 0
    pool = Lake.open(LakeConfig(uri=lake_uri)).pool("p")
    one_copy = [o.id for o in pool.snapshot(pool.tip()).objects.values() if o.count == 2][0]
    assert run("delete", "-p", "p@dev", one_copy)[0] == 0  # dev: one copy of row 5 gone
    code, out, _ = run("delete", "-p", "p", "--where", "id = 5")  # main: every copy gone
    deleted = out.strip().splitlines()[-1].split()[0]
    assert code == 0
    assert run("compact", "-p", "p")[0] == 0
    tip = pool.tip()
    code, out, err = run("merge", "-p", "p", "dev", "--into", "main")
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and err.startswith("error: ") and "id 5" in err
    assert pool.tip() == tip
    code, out, err = run("merge", "-p", "p", "dev", "--into", "main", "--theirs")
    assert code == 0 and out.strip().endswith("committed"), err
    # dev removed one of three copies of row 5 (and row 7); main removed all three: row 5
    # is contested and --theirs takes dev's count (2); row 7 only dev changed.
    assert sorted(pool.read().column("id").to_pylist()) == [1, 5, 5, 9]
    # Revert main's delete after compaction: the three copies it deleted come back.
    assert run("compact", "-p", "p")[0] == 0
    code, out, err = run("revert", "-p", "p", deleted)
    assert code == 0, err
    assert sorted(pool.read().column("id").to_pylist()) == [1, 5, 5, 5, 5, 5, 9]


def test_revert_of_the_vacate_tail_is_refused(lake: Lake) -> None:
    """What the oldest retained commit deleted may already be reclaimed by cleanup: revert
    refuses instead of re-adding objects whose files are gone."""
    pool = lake.create_pool("p", "id:asc")
    load(pool, [pa.table({"id": [1, 2]})])
    d = delete_where(pool, "id = 1")
    pool.clock.sleep(0.01)
    vacate(pool, d.date + timedelta(microseconds=1))
    tip = pool.tip()
    with pytest.raises(HistoryVacatedError, match="oldest retained"):
        revert(pool, d.id)
    assert pool.tip() == tip
