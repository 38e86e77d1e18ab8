"""``lake retain``: expiring data older than a cut, by a timestamp key or a time partitioning,
on local disk and on moto S3; exact rows afterwards, and bad input that changes nothing."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from lake_cli import main
from lake_core import Lake, LakeConfig
from lake_core.errors import UsageError
from lake_core.loading import load
from lake_core.maintenance import list_partitions, retain
from lake_core.pool import Pool

NOW = datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
D = timedelta(days=1)


def table(days_ago: list[float | None], tag: str) -> pa.Table:
    ts = [None if d is None else NOW - d * D for d in days_ago]
    return pa.table(
        {
            "ts": pa.array(ts, pa.timestamp("us", "UTC")),
            "tag": [f"{tag}{i}" for i in range(len(ts))],
        }
    )


def tags(pool: Pool, ref: str | None = None) -> list[str]:
    return sorted(pool.read(ref)["tag"].to_pylist())


def all_keys(pool: Pool) -> set[str]:
    return {i.key for i in pool.store.list("")}


def test_retain_by_timestamp_key_drops_whole_objects_and_rewrites_the_boundary(
    lake: Lake,
) -> None:
    pool = lake.create_pool("k", "ts:asc")
    old = load(pool, [table([100, 99, 98], "old")])  # wholly before a 90-day cut
    mid = load(pool, [table([95, 91, 89, 80], "mid")])  # straddles it
    new = load(pool, [table([10, 1], "new")])
    nulls = load(pool, [table([None, 120], "nul")])  # a row without a time, and an old one
    before = tags(pool)

    r = retain(pool, 90 * D, now=NOW)
    assert r.commit is not None and (r.column, r.by) == ("ts", "key")
    assert r.cut == NOW - 90 * D
    assert (r.dropped, r.rewritten, r.rows_removed) == (1, 2, 3 + 2 + 1)
    assert r.rows_kept == 2 + 1
    c = r.commit
    # The old object goes without being rewritten (metadata-only); the boundary objects are
    # replaced; the new one is untouched.
    deleted = set(c.deletes())
    assert deleted == {old.adds()[0].id, mid.adds()[0].id, nulls.adds()[0].id}
    assert new.adds()[0].id not in deleted
    assert {o.id for o in c.adds()}.isdisjoint({o.id for o in old.adds()})
    assert c.extra["kind"] == "retain" and c.rows_removed - c.rows_added == 6
    assert tags(pool) == ["mid2", "mid3", "new0", "new1", "nul0"]
    assert tags(pool, c.parent) == before  # history keeps the expired rows until a vacate

    again = retain(pool, 90 * D, now=NOW)
    assert again.commit is None
    assert tags(Lake.open(pool.lake_config).pool("k")) == ["mid2", "mid3", "new0", "new1", "nul0"]


def test_retain_by_time_partition_drops_partitions_and_rewrites_the_boundary_day(
    lake: Lake,
) -> None:
    pool = lake.create_pool("p", "tag:asc", partition_by="day(ts)")
    load(pool, [table([5.2, 5.1, 4.4, 3.9, 3.7, 3.2, 2.9, 2.5, 0.1], "r")])
    days = [p.value for p in list_partitions(pool)]
    assert len(days) == 5

    # The cut, 2026-05-29T12:00, falls inside a day: that day's object is rewritten.
    r = retain(pool, 3 * D, now=NOW)
    assert r.commit is not None and (r.column, r.by) == ("ts", "partition")
    assert r.partitions_dropped == ("2026-05-27", "2026-05-28")
    assert (r.dropped, r.rewritten, r.rows_removed, r.rows_kept) == (2, 1, 6, 1)
    assert tags(pool) == ["r6", "r7", "r8"]
    remaining = [p.value for p in list_partitions(pool)]
    assert remaining == ["2026-05-29", "2026-05-30", "2026-06-01"]
    assert all(
        not o.partition or o.partition in remaining
        for o in pool.snapshot(pool.tip()).objects.values()
    )


def test_retain_a_pool_without_a_time_column_is_a_clear_error_and_changes_nothing(
    lake: Lake,
) -> None:
    pool = lake.create_pool("n", "id:asc")
    load(pool, [pa.table({"id": [1, 2], "ts": pa.array([NOW, NOW], pa.timestamp("us"))})])
    before = all_keys(pool)
    with pytest.raises(UsageError, match="first key field 'id' is int64, not a timestamp"):
        retain(pool, 90 * D, now=NOW)
    with pytest.raises(UsageError, match="negative"):
        retain(pool, -D, now=NOW)
    assert all_keys(pool) == before


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def test_retain_cli(lake_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    L = ["--lake", lake_uri]
    assert run(capsys, *L, "init")[0] == 0
    assert run(capsys, *L, "create", "logs", "--orderby", "ts:desc")[0] == 0
    assert run(capsys, *L, "create", "ints", "--orderby", "n:asc")[0] == 0
    now = datetime.now(UTC)
    f = tmp_path / "a.ndjson"
    f.write_text(
        "".join(
            json.dumps({"ts": (now - timedelta(days=d)).isoformat(), "n": i}) + "\n"
            for i, d in enumerate([200, 120, 100, 30, 1])
        )
    )
    assert run(capsys, *L, "load", "-p", "logs", str(f))[0] == 0
    assert run(capsys, *L, "load", "-p", "ints", str(f))[0] == 0

    code, out, err = run(capsys, *L, "retain", "-p", "logs", "--older-than", "90d")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("removed 3 rows with ts before ")
    assert "0 objects dropped, 1 object rewritten (kept 2 rows)" in lines[0]
    assert lines[-1].endswith(" committed") and len(lines) == 2
    code, out, _ = run(capsys, *L, "query", "-p", "logs", "-f", "json")
    assert [json.loads(x)["n"] for x in out.splitlines()] == [4, 3]
    code, out, err = run(capsys, *L, "retain", "-p", "logs", "--older-than", "90d")
    assert code == 0 and out.startswith("nothing to retain: no ts before "), err

    # Bad input: one error line, usage exit status, nothing changed.
    lake = Lake.open(LakeConfig(uri=lake_uri))
    before = {i.key for i in lake.pool("ints").store.list("")}
    for args, needle in (
        (["-p", "ints", "--older-than", "90d"], "cannot be retained by time"),
        (["-p", "logs", "--older-than", "soon"], "invalid duration"),
        (["-p", "nope", "--older-than", "1d"], "pool not found"),
    ):
        code, out, err = run(capsys, *L, "retain", *args)
        assert code in (1, 2) and out == "" and err.count("\n") == 1, (args, err)
        assert err.startswith("error: ") and needle in err, err
    assert code == 1  # a pool that does not exist is not a usage error
    after = {i.key for i in lake.pool("ints").store.list("")}
    assert {k for k in after if not k.startswith("locks/")} == {
        k for k in before if not k.startswith("locks/")
    }
