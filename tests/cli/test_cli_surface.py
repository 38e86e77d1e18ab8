"""Every everyday command through the CLI, on local disk and on moto S3."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from lake_cli import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def last_id(out: str) -> str:
    line = out.strip().splitlines()[-1]
    word, rest = line.split(" ", 1)
    assert rest in ("committed", "staged"), line
    return word


def rows(capsys: pytest.CaptureFixture[str], *args: str) -> list[dict[str, object]]:
    code, out, err = run(capsys, *args, "-f", "json")
    assert code == 0, err
    return [json.loads(x) for x in out.splitlines()]


@pytest.fixture
def L(lake_uri: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert run(capsys, "--lake", lake_uri, "init")[0] == 0
    assert run(capsys, "--lake", lake_uri, "create", "p", "--orderby", "ts:asc")[0] == 0
    return ["--lake", lake_uri]


def test_formats_stdin_and_many_files_in_one_commit(
    L: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    (tmp_path / "a.csv").write_text("ts,name\n1,a\n2,b\n")
    pq.write_table(
        pa.table({"ts": [3], "name": pa.array(["c"], pa.string_view())}), tmp_path / "b.parquet"
    )
    with (
        pa.OSFile(str(tmp_path / "c.arrow"), "wb") as f,
        pa.ipc.new_file(f, pa.schema([("ts", pa.int64()), ("name", pa.string())])) as w,
    ):
        w.write_table(pa.table({"ts": [4], "name": ["d"]}))
    (tmp_path / "d.json").write_text('[{"ts": 5, "name": "e", "extra": {"k": [1, 2]}}]')
    code, out, err = run(
        capsys,
        *L,
        "load",
        "-p",
        "p",
        *(str(tmp_path / n) for n in ["a.csv", "b.parquet", "c.arrow", "d.json"]),
    )
    assert code == 0, err
    assert len(rows(capsys, *L, "log", "-p", "p")) == 1  # one commit for four files
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b'{"ts": 6, "name": "f"}\n')))
    code, out, err = run(capsys, *L, "load", "-p", "p", "-i", "ndjson", "-")
    assert code == 0, err
    got = rows(capsys, *L, "query", "-p", "p")
    assert [r["name"] for r in got] == ["a", "b", "c", "d", "e", "f"]
    assert got[4]["extra"] == {"k": [1, 2]} and got[0]["extra"] is None
    code, _, _ = run(capsys, *L, "query", "-p", "p", "-f", "parquet", "-o", str(tmp_path / "o.pq"))
    assert code == 0 and pq.read_table(tmp_path / "o.pq").num_rows == 6
    got = rows(capsys, *L, "query", "-p", "p", "--order", "desc", "--columns", "ts")
    assert got == [{"ts": t} for t in [6, 5, 4, 3, 2, 1]]


def test_add_status_commit(
    L: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.ndjson").write_text('{"ts": 1}\n')
    (tmp_path / "b.ndjson").write_text('{"ts": 2}\n')
    s1 = last_id(run(capsys, *L, "add", "-p", "p", str(tmp_path / "a.ndjson"))[1])
    s2 = last_id(run(capsys, *L, "add", "-p", "p", str(tmp_path / "b.ndjson"))[1])
    assert rows(capsys, *L, "query", "-p", "p") == []  # staged is not committed
    assert {r["id"] for r in rows(capsys, *L, "status", "-p", "p")} == {s1, s2}
    code, out, _ = run(capsys, *L, "commit", "-p", "p", s1, s2, "-m", "both")
    assert code == 0 and out.endswith(" committed\n")
    assert [r["ts"] for r in rows(capsys, *L, "query", "-p", "p")] == [1, 2]
    assert rows(capsys, *L, "status", "-p", "p") == []
    code, _, err = run(capsys, *L, "commit", "-p", "p", s1)
    assert code == 1 and s1 in err and "not found" in err


def test_branches_merge_delete_revert_time_travel(
    L: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    f = tmp_path / "x.ndjson"
    f.write_text('{"ts": 1, "u": "ann"}\n{"ts": 2, "u": "bob"}\n')
    c1 = last_id(run(capsys, *L, "load", "-p", "p", str(f))[1])
    entry = rows(capsys, *L, "log", "-p", "p")[0]
    assert run(capsys, *L, "branch", "-p", "p", "dev", "--from", "main")[0] == 0
    assert {r["name"] for r in rows(capsys, *L, "branch", "-p", "p")} == {"main", "dev"}
    f.write_text('{"ts": 3, "u": "cid"}\n')
    last_id(run(capsys, *L, "load", "-p", "p@dev", str(f))[1])
    last_id(run(capsys, *L, "delete", "-p", "p@dev", "--where", "u = 'bob'")[1])
    assert [r["ts"] for r in rows(capsys, *L, "query", "-p", "p@dev")] == [1, 3]
    assert [r["ts"] for r in rows(capsys, *L, "query", "-p", "p")] == [1, 2]
    m = last_id(run(capsys, *L, "merge", "-p", "p", "dev", "--into", "main")[1])
    assert [r["ts"] for r in rows(capsys, *L, "query", "-p", "p")] == [1, 3]
    code, _, err = run(capsys, *L, "merge", "-p", "p", "dev", "--into", "main")
    assert code == 1 and "empty transaction" in err
    last_id(run(capsys, *L, "revert", "-p", "p", m)[1])
    assert [r["ts"] for r in rows(capsys, *L, "query", "-p", "p")] == [1, 2]
    assert [r["ts"] for r in rows(capsys, *L, "query", "-p", f"p@{c1}")] == [1, 2]
    assert [r["ts"] for r in rows(capsys, *L, "query", "-p", "p", "--as-of", entry["date"])] == [
        1,
        2,
    ]
    code, _, err = run(capsys, *L, "query", "-p", f"p@{c1}", "--as-of", entry["date"])
    assert code == 2 and "--as-of goes with a branch" in err
    objs = rows(capsys, *L, "objects", "-p", "p")
    last_id(run(capsys, *L, "delete", "-p", "p", str(objs[0]["id"]))[1])
    code, _, err = run(capsys, *L, "delete", "-p", "p", str(objs[0]["id"]))
    assert code == 1 and str(objs[0]["id"]) in err and "not found" in err
    code, _, err = run(capsys, *L, "revert", "-p", "p", "0ujtsYcgvSTl8PAuAdqWYSMnLOv")
    assert code == 1 and "0ujtsYcgvSTl8PAuAdqWYSMnLOv: commit not found" in err
    assert run(capsys, *L, "branch", "-p", "p", "-d", "dev")[0] == 0
    code, _, err = run(capsys, *L, "load", "-p", "p@dev", str(f))
    assert code == 1 and "dev: branch not found" in err


def test_bad_input_changes_nothing(
    L: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = tmp_path / "good.ndjson"
    good.write_text('{"ts": 1, "user_id": 7}\n')
    run(capsys, *L, "load", "-p", "p", str(good))
    before = rows(capsys, *L, "log", "-p", "p")
    (tmp_path / "conflict.ndjson").write_text('{"ts": 2, "user_id": "seven"}\n')
    (tmp_path / "short.csv").write_text("ts,a\n1,2\n3\n")
    pq.write_table(pa.table({"ts": list(range(1000))}), tmp_path / "t.parquet")
    data = (tmp_path / "t.parquet").read_bytes()
    (tmp_path / "t.parquet").write_bytes(data[: len(data) // 2])
    for name, needle in [
        ("conflict.ndjson", "user_id"),
        ("short.csv", "line 3"),
        ("t.parquet", "t.parquet"),
    ]:
        code, _, err = run(capsys, *L, "load", "-p", "p", str(good), str(tmp_path / name))
        assert code == 1 and err.startswith("error: ") and needle in err, err
    assert rows(capsys, *L, "log", "-p", "p") == before
    assert [r["ts"] for r in rows(capsys, *L, "query", "-p", "p")] == [1]
    code, _, err = run(capsys, *L, "query", "-p", "p", "--where", "ts >")
    assert code == 2 and "position" in err


def test_maintenance_commands(
    lake_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    L = ["--lake", lake_uri]
    assert run(capsys, *L, "init")[0] == 0
    code, out, err = run(
        capsys, *L, "create", "m", "--orderby", "ts:asc", "--partition-by", "day(ts)"
    )
    assert code == 0, err
    for i in range(3):
        f = tmp_path / f"{i}.ndjson"
        f.write_text(
            f'{{"ts": "2026-01-05T0{i}:00:00Z", "i": {i}}}\n'
            f'{{"ts": "2026-01-06T0{i}:00:00Z", "i": {i}}}\n'
        )
        assert run(capsys, *L, "load", "-p", "m", str(f))[0] == 0
    code, out, _ = run(capsys, *L, "partitions", "-p", "m")
    assert out.splitlines() == [
        "2026-01-05  objects=3 rows=3 size=" + out.splitlines()[0].split("size=")[1],
        "2026-01-06  objects=3 rows=3 size=" + out.splitlines()[1].split("size=")[1],
    ]
    summary = json.loads(run(capsys, *L, "objects", "-p", "m", "--summary")[1])
    assert summary["objects"] == 6 and summary["pending_runs"] == 2
    code, out, _ = run(capsys, *L, "compact", "-p", "m")
    assert code == 0 and out.endswith(" committed\n")
    assert run(capsys, *L, "compact", "-p", "m")[1] == "nothing to compact\n"
    code, out, _ = run(capsys, *L, "drop-partition", "-p", "m", "2026-01-06")
    assert code == 0 and out.endswith(" committed\n")
    assert [r["i"] for r in rows(capsys, *L, "query", "-p", "m")] == [0, 1, 2]
    code, _, err = run(capsys, *L, "purge", "-p", "m", "0ujtsYcgvSTl8PAuAdqWYSMnLOv")
    assert code == 2 and "--force" in err
    code, out, _ = run(capsys, *L, "cleanup", "-p", "m", "--grace", "1h", "--dry-run", "-f", "json")
    assert code == 0 and json.loads(out)["dry_run"] is True
    log = rows(capsys, *L, "log", "-p", "m")
    code, out, err = run(capsys, *L, "vacate", "-p", "m", "--before", log[0]["date"])
    assert code == 0, err
    code, _, err = run(capsys, *L, "query", "-p", "m", "--as-of", log[-1]["date"])
    assert code == 1 and "history was vacated" in err
    code, _, err = run(capsys, *L, "cleanup", "-p", "m", "--grace", "soon")
    assert code == 2 and "invalid duration" in err


def test_purge_says_what_it_deleted_in_text_and_json(
    L: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "a.json").write_text('{"ts": 1}\n{"ts": 2}\n')
    (tmp_path / "b.json").write_text('{"ts": 3}\n')
    code, out, err = run(capsys, *L, "load", "-p", "p", str(tmp_path / "a.json"))
    assert code == 0, err
    first = last_id(out)
    code, out, err = run(capsys, *L, "load", "-p", "p", str(tmp_path / "b.json"))
    second = last_id(out)
    code, out, err = run(capsys, *L, "purge", "-p", "p", first, "--force")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].startswith("purged 1 object (") and lines[0].endswith(f"by commit {first}")
    assert lines[1].startswith("purge record: ") and first in lines[1]
    code, out, err = run(capsys, *L, "purge", "-p", "p", second, "--force", "-f", "json")
    assert code == 0, err
    doc = json.loads(out)
    assert doc["commit"] == second and doc["count"] == 1 and doc["bytes"] > 0


def test_branch_with_an_empty_name_is_refused_not_listed(
    L: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, *L, "branch", "-p", "p", "")
    assert code != 0 and out == ""
    assert err.startswith("error: ") and "must not be empty" in err
    assert [r["name"] for r in rows(capsys, *L, "branch", "-p", "p")] == ["main"]


def test_create_sets_the_transaction_retention_and_ls_json_shows_it(
    L: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, *L, "create", "keep", "--txn-retention", "90d")[0] == 0
    assert run(capsys, *L, "create", "ever", "--txn-retention", "forever")[0] == 0
    code, _, err = run(capsys, *L, "create", "bad", "--txn-retention", "soon")
    assert code == 2 and "invalid duration 'soon'" in err
    listed = {r["name"]: r for r in rows(capsys, *L, "ls")}
    assert "bad" not in listed
    assert listed["keep"]["txn_retention_seconds"] == 90 * 86400
    assert listed["ever"]["txn_retention_seconds"] is None
    assert listed["p"]["txn_retention_seconds"] == 30 * 86400


def test_csv_output_loads_back_with_the_same_nulls_and_strings(
    L: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    records = [{"ts": 1, "s": ""}, {"ts": 2, "s": None}, {"ts": 3, "s": "NA"}, {"ts": 4, "s": "x"}]
    (tmp_path / "in.json").write_text("\n".join(json.dumps(r) for r in records))
    assert run(capsys, *L, "load", "-p", "p", str(tmp_path / "in.json"))[0] == 0
    code, out, err = run(capsys, *L, "query", "-p", "p", "-f", "csv")
    assert code == 0, err
    assert out == 'ts,s\n1,""\n2,\n3,"NA"\n4,x\n'
    (tmp_path / "out.csv").write_text(out)
    assert run(capsys, *L, "create", "back", "--orderby", "ts:asc")[0] == 0
    assert run(capsys, *L, "load", "-p", "back", str(tmp_path / "out.csv"))[0] == 0
    assert rows(capsys, *L, "query", "-p", "back") == records
