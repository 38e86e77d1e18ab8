"""Duplicate keys: ``lake dedupe`` (one commit, newest row per key, only candidate objects
read) and compaction of unique pools (never resurrects a replaced row), on both stores."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from lake_cli import main, report
from lake_core import Lake
from lake_core.dedupe import dedupe, plan_dedupe
from lake_core.loading import write_sources
from lake_core.stores import open_store
from tests import processes


def _rows(pool: Any, *cols: str) -> list[tuple[Any, ...]]:
    t = pool.read()
    return sorted(
        zip(*(t[c].to_pylist() for c in cols), strict=True),
        key=lambda r: tuple((v is None, v) for v in r),
    )


def _load(pool: Any, ids: list[Any], v: list[str] | str, **extra: Any) -> str:
    vals = v if isinstance(v, list) else [v] * len(ids)
    commit = pool.load([pa.table({"id": pa.array(ids, pa.int64()), "v": vals, **extra})])
    (obj,) = commit.adds()
    return str(obj.id)


def test_dedupe_keeps_the_last_commits_row_and_reads_only_candidates(lake_uri: str) -> None:
    lake = Lake.init(lake_uri)
    pool = lake.create_pool("d", "id:asc")
    first = _load(pool, list(range(10)), "a")
    second = _load(pool, list(range(5, 15)), "b")  # overlaps: ids 5..9 again, newer
    alone = _load(pool, list(range(100, 110)), "c")  # no duplicate: examined, not rewritten
    inner = _load(pool, [200, 200, 201, 200], ["d1", "d2", "d3", "d4"])  # last of 200: d4
    nulls = _load(pool, [None, None], "n")  # null keys equal nothing: never read
    single = _load(pool, [300], "e")  # one row, overlapping nothing: never read

    plan = plan_dedupe(pool.snapshot(pool.tip()), pool.config.key)
    assert [sorted(o.id for o in g) for g in plan.groups] == [
        sorted([first, second]),
        [alone],
        [inner],
    ]
    assert plan.skipped == 2

    result = pool.dedupe()
    assert result.commit is not None
    assert result.rows_removed == 5 + 2
    assert (result.objects_examined, result.objects_skipped) == (4, 2)
    assert result.objects_rewritten == 3  # first, second, inner; not alone
    assert _rows(pool, "id", "v") == sorted(
        [(i, "a") for i in range(5)]
        + [(i, "b") for i in range(5, 15)]
        + [(i, "c") for i in range(100, 110)]
        + [(200, "d4"), (201, "d3"), (300, "e"), (None, "n"), (None, "n")],
        key=lambda r: tuple((v is None, v) for v in r),
    )
    live = set(pool.snapshot(pool.tip()).objects)
    assert {alone, nulls, single} <= live and not {first, second, inner} & live
    assert result.commit.extra["kind"] == "dedupe"
    counts = {"rows_removed": 7, "objects_examined": 4, "objects_rewritten": 3}
    # ids 5..9 and 200 hold differing rows: decided from history (200 within one commit,
    # the last row it added); nothing fell back to snapshot order.
    recency = {"resolved_from_history": 6, "resolved_from_snapshot_order": 0}
    assert result.commit.meta == {
        "dedupe": {**counts, "objects_written": result.objects_written, **recency}
    }
    assert result.commit.rows_removed == 10 + 10 + 4  # the rewritten objects' rows

    again = pool.dedupe()
    assert again.commit is None and again.rows_removed == 0


def test_dedupe_this_pool_across_schema_evolution_and_partitions(lake_uri: str) -> None:
    lake = Lake.init(lake_uri)
    pool = lake.create_pool("t", "this", partition_by="p")
    pab = pa.schema([("p", pa.string()), ("a", pa.int64()), ("b", pa.string())])
    pool.load([pa.table({"p": ["x", "x", "y"], "a": [1, 2, None]})])
    # The same records once a column exists that they lack (null there), and a new one.
    rows = [{"p": "x", "a": 1}, {"p": "y", "b": "z"}, {"p": "y"}]
    pool.load([pa.Table.from_pylist(rows, schema=pab)])
    pool.load([pa.Table.from_pylist([{"p": "x", "a": 2, "b": "q"}])])  # differs in b: kept
    result = pool.dedupe()
    assert result.rows_removed == 2  # {p:x, a:1} and {p:y} — identical whatever they lack
    assert _rows(pool, "p", "a", "b") == [
        ("x", 1, None),
        ("x", 2, "q"),
        ("x", 2, None),
        ("y", None, "z"),
        ("y", None, None),
    ]
    for o in pool.snapshot(pool.tip()).objects.values():
        assert o.partition in ("x", "y")  # every object still within one partition


def test_dedupe_cross_partition_duplicate_keeps_the_newer(lake_uri: str) -> None:
    lake = Lake.init(lake_uri)
    pool = lake.create_pool("d", "id:asc", partition_by="p")
    pool.load([pa.table({"id": [1, 2], "p": ["x", "x"], "v": ["old", "a"]})])
    pool.load([pa.table({"id": [1], "p": ["y"], "v": ["new"]})])
    assert pool.dedupe().rows_removed == 1
    assert _rows(pool, "id", "p", "v") == [(1, "y", "new"), (2, "x", "a")]
    parts = {o.partition for o in pool.snapshot(pool.tip()).objects.values()}
    assert parts == {"x", "y"}


def test_dedupe_replans_when_a_racing_commit_deletes_what_it_rewrites(tmp_path: Path) -> None:
    uri = str(tmp_path / "lake")
    lake = Lake.init(uri)
    pool = lake.create_pool("d", "id:asc")
    _load(pool, [1, 2, 3], "a")
    _load(pool, [2, 3, 4], "b")
    other = Lake.open(uri).pool("d")
    raced: list[str] = []

    def guard() -> None:  # right before the append: another process's commit lands first
        if not raced:
            raced.append(other.delete("id = 4").id)

    result = dedupe(pool, guard=guard)
    assert result.attempts == 2 and result.rows_removed == 2
    assert _rows(pool, "id", "v") == [(1, "a"), (2, "b"), (3, "b")]


def test_unique_pool_compaction_keeps_the_newest_row_per_key(lake_uri: str) -> None:
    lake = Lake.init(lake_uri)
    plain = lake.create_pool("src", "id:asc")
    pool = lake.create_pool("u", "id:asc", unique=True, target_size=2_000, seek_stride=1024)
    pool.load([pa.table({"id": list(range(50)), "v": ["a"] * 50})])
    pool.load([pa.table({"id": list(range(0, 50, 2)), "v": ["main"] * 25})])
    # A unique pool gains no duplicate key through its own writes (loads upsert; merges and
    # reverts that would duplicate one are refused), so inject some through the raw commit
    # path (objects written, then committed as they are): keys 0, 5, 10, ... now live twice.
    dev = pa.table({"id": list(range(0, 50, 5)), "v": ["dev"] * 10})
    objects, schema = write_sources(pool, [dev], "main")
    pool.commit("main", objects, [], incoming_schema=schema)
    t = pool.read()
    assert t.num_rows > 50
    objs = list(pool.snapshot(pool.tip()).objects.values())
    result = pool.compact(object_ids=[o.id for o in objs])
    assert result.commit is not None
    assert result.duplicates_removed == t.num_rows - 50
    assert result.commit.extra["kind"] == "dedupe" and not result.commit.layout_only
    line = report.compacted_lines(result)[0]  # what lake compact prints
    assert line.endswith(f", removed {result.duplicates_removed} duplicate rows"), line
    got = dict(zip(pool.read()["id"].to_pylist(), pool.read()["v"].to_pylist(), strict=True))
    assert len(got) == 50 and pool.read().num_rows == 50
    # Newest per key: the injected objects were added last, so their rows win (0, 5, 10,
    # ...); main's upserted rows elsewhere on even keys.
    for i in range(50):
        want = "dev" if i % 5 == 0 else ("main" if i % 2 == 0 else "a")
        assert got[i] == want, i
    assert plain.compact().commit is None  # an empty non-unique pool: nothing to do


def test_non_unique_compaction_keeps_duplicates(tmp_path: Path) -> None:
    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("p", "id:asc")
    _load(pool, [1, 2], "a")
    _load(pool, [1, 2], "b")
    result = pool.compact(object_ids=[o for o in pool.snapshot(pool.tip()).objects])
    assert result.duplicates_removed == 0 and result.commit is not None
    assert result.commit.layout_only
    assert _rows(pool, "id", "v") == [(1, "a"), (1, "b"), (2, "a"), (2, "b")]


def _state(uri: str) -> dict[str, bytes]:
    store = open_store(uri)
    return {i.key: store.get(i.key) for i in store.list("")}


def test_dedupe_cli(lake_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def run(*args: str) -> tuple[int, str, str]:
        try:
            code = main(["--lake", lake_uri, *args])
        except SystemExit as e:  # usage errors exit from the parser
            code = int(e.code or 0)
        out, err = capsys.readouterr()
        return code, out, err

    assert run("init")[0] == 0
    assert run("create", "p", "--orderby", "id:asc")[0] == 0
    assert run("create", "w", "--orderby", "this")[0] == 0
    f = tmp_path / "rows.ndjson"
    f.write_text('{"id": 1, "v": "a"}\n{"id": 2, "v": "a"}\n')
    g = tmp_path / "more.ndjson"
    g.write_text('{"id": 2, "v": "b"}\n')
    for src in (f, g):
        assert run("load", "-p", "p", str(src))[0] == 0
    code, out, _ = run("ls")
    assert code == 0 and any(line.split()[:3][2:] == ["this"] for line in out.splitlines()[1:])

    code, out, err = run("dedupe", "-p", "p")
    lines = out.splitlines()
    assert code == 0 and err == ""
    assert lines[-1].endswith(" committed") and len(lines[-1].split()[0]) == 27
    assert lines[0].startswith("removed 1 duplicate row:")
    # Key 2's rows differ: the load of "b" (the tip) decides, reading it and the 2 live objects.
    assert lines[1] == (
        "newest row of 1 key from history (walked 1 commit, read 3 objects), 0 by snapshot order"
    )
    assert len(lines) == 3
    code, out, _ = run("dedupe", "-p", "p")
    assert code == 0 and out.startswith("no duplicates")
    code, out, _ = run("dedupe", "-p", "p", "-f", "json")
    assert code == 0 and '"rows_removed": 0' in out

    before = _state(lake_uri)
    for args, status in (
        (["create", "x", "--orderby", "this,id"], 2),  # the whole record or fields, not both
        (["dedupe", "-p", "nope"], 1),
        (["dedupe", "-p", "p@nobranch"], 1),
        (["dedupe"], 2),
        (["dedupe", "-p", "p", "-f", "xml"], 2),
    ):
        code, out, err = run(*args)
        assert code == status, (args, err)
        assert out == "" and len(err.splitlines()) == 1 and err.startswith("error: "), err
    assert _state(lake_uri) == before  # nothing changed


UPSERTERS = 3
UPSERTS_EACH = 6


def test_dedupe_racing_upserts_equals_a_serial_replay(lake_uri: str) -> None:
    """Three upserting processes and one deduping process on a pool full of duplicates:
    afterwards every key an upsert touched holds the value of the last such upsert in commit
    order, exactly once, and every other key its newest initial row (no replaced row came
    back)."""

    from tests.workers_dedupe import deduper, upserter

    lake = Lake.init(lake_uri)
    pool = lake.create_pool("k", "id:asc")
    for i in range(4):  # every key 0-39 four times; the newest is init3
        pool.load([pa.table({"id": pa.array(range(40), pa.int64()), "v": [f"init{i}"] * 40})])
    ctx = processes.context()
    out, stop, start = ctx.Queue(), ctx.Event(), ctx.Barrier(UPSERTERS + 1)
    procs = [
        ctx.Process(target=upserter, args=(lake_uri, "k", w, UPSERTS_EACH, start, out))
        for w in range(UPSERTERS)
    ]
    procs.append(ctx.Process(target=deduper, args=(lake_uri, "k", stop, start, out)))
    for proc in procs:
        proc.start()
    reports: list[tuple[Any, ...]] = []
    try:
        reports += [out.get(timeout=240) for _ in range(UPSERTERS)]
        stop.set()
        reports.append(out.get(timeout=240))
        for proc in procs:
            proc.join(60)
    finally:
        stop.set()
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
    assert [p.exitcode for p in procs] == [0] * len(procs)
    upserts = [u for r in reports if r[0] == "upserter" for u in r[2]]
    ((_, dedupes, _conflicts),) = [r for r in reports if r[0] == "deduper"]
    assert len(upserts) == UPSERTERS * UPSERTS_EACH and dedupes

    order = {c.id: n for n, c in enumerate(reversed(list(pool.log())))}  # commit order
    expected: dict[int, str] = {k: "init3" for k in range(40)}
    for _, values in sorted(upserts, key=lambda u: order[u[0]]):
        expected.update(values)
    rows = list(zip(pool.read()["id"].to_pylist(), pool.read()["v"].to_pylist(), strict=True))
    touched = {k for _, values in upserts for k in values}
    for k, v in rows:
        if k in touched:
            assert v == expected[k], (k, v)  # an upsert's value, never a replaced row
        else:
            assert v.startswith("init"), (k, v)
    assert sorted(k for k, _ in rows if k in touched) == sorted(touched)  # once each
    # What is left to dedupe is only the untouched keys' older initial rows.
    pool.dedupe()
    final = dict(zip(pool.read()["id"].to_pylist(), pool.read()["v"].to_pylist(), strict=True))
    assert pool.read().num_rows == len(final) and final == expected
