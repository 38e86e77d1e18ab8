"""Committing commands say what happened: row and object counts before ``<id> committed``,
``lake log`` rows added/removed, and idempotent ``delete --where``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lake_cli import main
from lake_core.config import LakeConfig
from lake_core.lake import Lake


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def committed(out: str) -> str:
    """The commit id of a committing command's output, checking the last line's form."""
    last = out.splitlines()[-1]
    cid, word = last.split()
    assert word == "committed" and len(cid) == 27
    return cid


@pytest.fixture
def pool_lake(lake_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    L = ["--lake", lake_uri]
    assert run(capsys, *L, "init")[0] == 0
    assert run(capsys, *L, "create", "p", "--orderby", "id:asc")[0] == 0
    return L


def ndjson(path: Path, ids: range) -> str:
    path.write_text("".join(json.dumps({"id": i, "v": i % 10}) + "\n" for i in ids))
    return str(path)


def test_each_committing_command_prints_its_rows(
    pool_lake: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    L = pool_lake
    code, out, _ = run(capsys, *L, "load", "-p", "p", ndjson(tmp_path / "a.ndjson", range(1000)))
    assert code == 0 and out.splitlines()[0] == "loaded 1,000 rows in 1 object"
    load_id = committed(out)
    code, out, _ = run(
        capsys, *L, "load", "-p", "p", ndjson(tmp_path / "b.ndjson", range(1000, 1500))
    )
    assert out.splitlines()[0] == "loaded 500 rows in 1 object"
    second = committed(out)

    code, out, _ = run(capsys, *L, "delete", "-p", "p", "--where", "v = 3")
    assert code == 0 and out.splitlines()[0] == "deleted 150 rows in 2 objects"
    delete_id = committed(out)

    code, out, _ = run(capsys, *L, "compact", "-p", "p")
    assert code == 0
    assert out.splitlines()[0].startswith("compacted 2 objects (1,350 rows, ")
    assert out.splitlines()[0].endswith(" in 1 run")
    committed(out)

    code, out, _ = run(capsys, *L, "branch", "-p", "p", "dev")
    code, out, _ = run(
        capsys, *L, "load", "-p", "p@dev", ndjson(tmp_path / "c.ndjson", range(2000, 2007))
    )
    assert out.splitlines()[0] == "loaded 7 rows in 1 object"
    code, out, _ = run(capsys, *L, "merge", "-p", "p", "dev", "--into", "main")
    assert code == 0
    assert out.splitlines()[0] == (
        "merged dev into main: added 7 rows in 1 object, removed 0 rows in 0 objects (net +7 rows)"
    )
    committed(out)

    code, out, _ = run(capsys, *L, "log", "-p", "p", "-f", "json")
    merge_id = json.loads(out.splitlines()[0])["id"]
    code, out, _ = run(capsys, *L, "revert", "-p", "p", merge_id)
    assert code == 0
    assert out.splitlines()[0] == (
        f"reverted {merge_id}: added 0 rows in 0 objects, removed 7 rows in 1 object (net -7 rows)"
    )
    committed(out)

    code, out, _ = run(capsys, *L, "log", "-p", "p", "-f", "json")
    entries = {e["id"]: e for e in map(json.loads, out.splitlines())}
    assert entries[load_id]["rows"] == {"added": 1000, "removed": 0}
    assert entries[second]["rows"] == {"added": 500, "removed": 0}
    assert entries[delete_id]["rows"] == {"added": 1350, "removed": 1500}
    code, out, _ = run(capsys, *L, "log", "-p", "p")
    assert "(objects 2 added, 2 deleted; rows +1,350 -1,500)" in out
    assert "rows +1,350 -1,350, layout only" in out  # the compaction

    # Deleting objects by id counts the rows they held.
    code, out, _ = run(capsys, *L, "objects", "-p", "p", "-f", "json")
    obj = json.loads(out.splitlines()[0])
    code, out, _ = run(capsys, *L, "delete", "-p", "p", obj["id"])
    assert code == 0 and out.splitlines()[0] == f"deleted {obj['count']:,} rows in 1 object"
    committed(out)


def test_delete_matching_nothing_is_idempotent(
    pool_lake: list[str], lake_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    L = pool_lake
    run(capsys, *L, "load", "-p", "p", ndjson(tmp_path / "a.ndjson", range(100)))
    code, out, _ = run(capsys, *L, "delete", "-p", "p", "--where", "v = 3")
    assert code == 0 and out.startswith("deleted 10 rows in 1 object\n")
    pool = Lake.open(LakeConfig.resolve(uri=lake_uri)).pool("p")
    tip = pool.tip()
    code, out, err = run(capsys, *L, "delete", "-p", "p", "--where", "v = 3")
    assert (code, out, err) == (0, "no rows matched\n", "")
    assert pool.tip() == tip  # no commit
    code, out, err = run(capsys, *L, "delete", "-p", "p", "--where", "v = 3", "--strict")
    assert code == 1 and out == ""
    assert err.startswith("error: empty transaction") and err.count("\n") == 1
    assert pool.tip() == tip
    # A predicate over a column the pool lacks is still an error, not "no rows matched".
    code, out, err = run(capsys, *L, "delete", "-p", "p", "--where", "nope = 1")
    assert code != 0 and err.startswith("error: ") and pool.tip() == tip


def test_commit_and_drop_partition_say_what_they_did(
    lake_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``lake commit`` of staged work and ``lake drop-partition`` commit like the others, so
    they say what they did before ``<id> committed`` (README: every committing command)."""
    L = ["--lake", lake_uri]
    assert run(capsys, *L, "init")[0] == 0
    assert run(capsys, *L, "create", "p", "--orderby", "id:asc")[0] == 0
    s1 = run(capsys, *L, "add", "-p", "p", ndjson(tmp_path / "a.ndjson", range(3)))[1]
    s2 = run(capsys, *L, "add", "-p", "p", ndjson(tmp_path / "b.ndjson", range(3, 5)))[1]
    ids = [s.splitlines()[-1].split()[0] for s in (s1, s2)]
    code, out, err = run(capsys, *L, "commit", "-p", "p", *ids)
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == "loaded 5 rows in 2 objects"
    committed(out)
    code, out, err = run(capsys, *L, "commit", "-p", "p", "garbage")
    assert (code, out) == (1, "")
    assert err == "error: garbage: staged work not found (in pool p)\n"
    one = json.loads(run(capsys, *L, "log", "-p", "p", "-f", "json")[1].splitlines()[0])["id"]
    code, out, _ = run(capsys, *L, "load", "-p", "p", ndjson(tmp_path / "c.ndjson", range(9, 10)))
    code, out, _ = run(capsys, *L, "diff", "-p", "p", one, "main")
    assert out.splitlines()[-1].startswith("+ ") and "  1 row  " in out.splitlines()[-1], out
    f = tmp_path / "d.ndjson"
    f.write_text(
        "".join(
            json.dumps({"ts": f"2026-01-0{d}T0{h}:00:00Z", "i": h}) + "\n"
            for d in (5, 6)
            for h in range(3)
        )
    )
    assert (
        run(capsys, *L, "create", "m", "--orderby", "ts:asc", "--partition-by", "day(ts)")[0] == 0
    )
    assert run(capsys, *L, "load", "-p", "m", str(f))[0] == 0
    code, out, err = run(capsys, *L, "drop-partition", "-p", "m", "2026-01-06")
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == "dropped partition 2026-01-06: 3 rows in 1 object"
    cid = committed(out)
    log = [json.loads(x) for x in run(capsys, *L, "log", "-p", "m", "-f", "json")[1].splitlines()]
    assert log[0]["id"] == cid and log[0]["rows"] == {"added": 0, "removed": 3}
