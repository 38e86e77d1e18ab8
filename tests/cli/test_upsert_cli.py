"""``lake upsert`` and unique pools through the CLI (issue 14), on local disk and on moto S3:
what each command prints, the rows it leaves, the counts in ``lake log``; and bad input — one
``error:`` line, the contract's exit status, nothing changed in the lake."""

from __future__ import annotations

import io
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from lake_cli import main
from lake_core.stores import open_store

README = Path(__file__).resolve().parents[2] / "README.md"
RESULT_FIELDS = {
    "commit",
    "inserted",
    "updated",
    "deleted",
    "objects_read",
    "objects_skipped",
    "objects_rewritten",
    "bytes_rewritten",
    "bytes_written",
    "attempts",
}


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def ok(capsys: pytest.CaptureFixture[str], *args: str) -> list[str]:
    code, out, err = run(capsys, *args)
    assert code == 0, err
    return out.splitlines()


def ndjson(path: Path, *records: dict[str, object]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(path)


def records(capsys: pytest.CaptureFixture[str], L: list[str], pool: str) -> list[dict[str, object]]:
    return [json.loads(x) for x in ok(capsys, *L, "query", "-p", pool, "-f", "json")]


def committed(line: str) -> str:
    cid, word = line.split(" ")
    assert word == "committed" and len(cid) == 27, line
    return cid


@pytest.fixture
def L(lake_uri: str, capsys: pytest.CaptureFixture[str]) -> list[str]:
    assert run(capsys, "--lake", lake_uri, "init")[0] == 0
    return ["--lake", lake_uri]


def test_upsert_inserts_updates_deletes_and_reports(
    L: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ok(capsys, *L, "create", "c", "--orderby", "id:asc")
    base = ndjson(tmp_path / "base.ndjson", *({"id": i, "name": f"n{i}"} for i in range(1, 6)))
    ok(capsys, *L, "load", "-p", "c", base)
    # Changes: 2 and 4 updated, 9 inserted, 3 deleted, 7 deleted though absent (counts 0).
    feed = ndjson(
        tmp_path / "feed.ndjson",
        {"id": 2, "name": "two", "op": "u"},
        {"id": 9, "name": "nine", "op": "i"},
        {"id": 3, "name": None, "op": "d"},
        {"id": 4, "name": "four", "op": "u"},
        {"id": 7, "name": None, "op": "d"},
    )
    out = ok(
        capsys,
        *L,
        "upsert",
        "-p",
        "c",
        feed,
        "--delete-when",
        "op = 'd'",
        "-m",
        "cdc 1",
        "--meta",
        '{"batch": 1}',
    )
    assert len(out) == 2, out
    assert out[0] == (
        "upserted: 1 inserted, 2 updated, 1 deleted (read 1 of 1 object, rewrote 1, "
        + out[0].rsplit(", ", 1)[1]
    )
    assert out[0].endswith("B)") or out[0].endswith("iB)"), out[0]
    cid = committed(out[1])
    assert [(r["id"], r["name"], r.get("op")) for r in records(capsys, L, "c")] == [
        (1, "n1", None),
        (2, "two", "u"),
        (4, "four", "u"),
        (5, "n5", None),
        (9, "nine", "i"),
    ]
    log = [json.loads(x) for x in ok(capsys, *L, "log", "-p", "c", "-f", "json")]
    assert log[0]["id"] == cid and log[0]["message"] == "cdc 1" and log[0]["meta"] == {"batch": 1}
    assert log[0]["upsert"] == {"inserted": 1, "updated": 2, "deleted": 1}
    assert log[1]["upsert"] is None  # a plain load
    text = ok(capsys, *L, "log", "-p", "c")
    assert any("upserted: 1 inserted, 2 updated, 1 deleted" in line for line in text), text


def test_upsert_json_has_every_result_field(
    L: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ok(capsys, *L, "create", "c", "--orderby", "id:asc")
    ok(capsys, *L, "load", "-p", "c", ndjson(tmp_path / "a.ndjson", {"id": 1, "v": 1}))
    feed = ndjson(tmp_path / "b.ndjson", {"id": 1, "v": 10}, {"id": 2, "v": 20})
    (line,) = ok(capsys, *L, "upsert", "-p", "c", feed, "-f", "json")
    got = json.loads(line)
    assert set(got) >= RESULT_FIELDS, got
    assert (got["inserted"], got["updated"], got["deleted"]) == (1, 1, 0)
    assert (got["objects_read"], got["objects_skipped"], got["objects_rewritten"]) == (1, 0, 1)
    assert got["bytes_rewritten"] > 0 and got["bytes_written"] > 0 and got["attempts"] == 1
    (last,) = [json.loads(x) for x in ok(capsys, *L, "log", "-p", "c", "-f", "json")][:1]
    assert got["commit"] == last["id"]


def test_upsert_reads_stdin_and_several_files_in_one_commit(
    L: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ok(capsys, *L, "create", "c", "--orderby", "id:asc")
    ok(capsys, *L, "load", "-p", "c", ndjson(tmp_path / "a.ndjson", {"id": 1, "v": "a"}))
    (tmp_path / "b.csv").write_text("id,v\n1,from-csv\n2,b\n")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b'{"id": 2, "v": "stdin"}\n')))
    out = ok(capsys, *L, "upsert", "-p", "c", str(tmp_path / "b.csv"), "-")
    # Input order is the files' order: stdin's row for 2 comes last and wins.
    assert out[0].startswith("upserted: 1 inserted, 1 updated, 0 deleted"), out
    assert [(r["id"], r["v"]) for r in records(capsys, L, "c")] == [(1, "from-csv"), (2, "stdin")]
    assert len(ok(capsys, *L, "log", "-p", "c", "-f", "json")) == 2


def test_only_objects_whose_key_range_meets_an_incoming_key_are_read(
    L: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ok(capsys, *L, "create", "c", "--orderby", "id:asc")
    for n, lo in enumerate((0, 100, 200, 300)):  # four objects, disjoint key ranges
        f = ndjson(tmp_path / f"{n}.ndjson", *({"id": lo + i, "v": "old"} for i in range(10)))
        ok(capsys, *L, "load", "-p", "c", f)
    # 105 lies in [100, 109]; 150 lies in no object's range (an insert that reads nothing).
    feed = ndjson(tmp_path / "f.ndjson", {"id": 105, "v": "new"}, {"id": 150, "v": "new"})
    (line,) = ok(capsys, *L, "upsert", "-p", "c", feed, "-f", "json")
    got = json.loads(line)
    assert (got["objects_read"], got["objects_skipped"], got["objects_rewritten"]) == (1, 3, 1)
    assert (got["inserted"], got["updated"]) == (1, 1)
    rows = records(capsys, L, "c")
    assert len(rows) == 41
    assert [r["id"] for r in rows if r["v"] == "new"] == [105, 150]
    # The rewrite put 150 beside 100-109: again, one object of four holds both keys.
    out = ok(capsys, *L, "upsert", "-p", "c", feed)
    assert out[0].startswith("upserted: 0 inserted, 2 updated, 0 deleted (read 1 of 4 objects")


def test_noop_upsert_prints_no_rows_changed(
    L: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ok(capsys, *L, "create", "c", "--orderby", "id:asc")
    ok(capsys, *L, "load", "-p", "c", ndjson(tmp_path / "a.ndjson", {"id": 1, "op": "u"}))
    before = ok(capsys, *L, "log", "-p", "c", "-f", "json")
    gone = ndjson(tmp_path / "d.ndjson", {"id": 5, "op": "d"}, {"id": 6, "op": "d"})
    assert ok(capsys, *L, "upsert", "-p", "c", gone, "--delete-when", "op = 'd'") == [
        "no rows changed"
    ]
    (line,) = ok(capsys, *L, "upsert", "-p", "c", gone, "--delete-when", "op = 'd'", "-f", "json")
    got = json.loads(line)
    assert got["commit"] is None and (got["inserted"], got["updated"], got["deleted"]) == (0, 0, 0)
    assert ok(capsys, *L, "log", "-p", "c", "-f", "json") == before


def test_last_row_of_a_key_wins_and_null_keys_are_inserted(
    L: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ok(capsys, *L, "create", "c", "--orderby", "id:asc")
    ok(capsys, *L, "load", "-p", "c", ndjson(tmp_path / "a.ndjson", {"id": 1, "v": "a", "op": "u"}))
    feed = ndjson(
        tmp_path / "f.ndjson",
        {"id": 2, "v": "x", "op": "u"},
        {"id": 1, "v": "b", "op": "u"},
        {"id": 2, "v": "y", "op": "u"},  # 2: y wins over x
        {"id": 3, "v": "z", "op": "u"},
        {"id": 3, "v": None, "op": "d"},  # 3: the delete is last: never inserted
        {"id": None, "v": "n1", "op": "u"},
        {"id": None, "v": "n2", "op": "u"},  # null keys never match: both inserted
    )
    out = ok(capsys, *L, "upsert", "-p", "c", feed, "--delete-when", "op = 'd'")
    assert out[0].startswith("upserted: 3 inserted, 1 updated, 0 deleted"), out
    got = [(r["id"], r["v"]) for r in records(capsys, L, "c")]
    assert got[:2] == [(1, "b"), (2, "y")]
    assert sorted(v for k, v in got[2:]) == ["n1", "n2"] and all(k is None for k, _ in got[2:])
    # The nulls stay: a second upsert of a null-key row inserts another.
    ok(capsys, *L, "upsert", "-p", "c", ndjson(tmp_path / "n.ndjson", {"id": None, "v": "n3"}))
    assert len(records(capsys, L, "c")) == 5


def test_unique_pool_loads_upsert_and_ls_shows_it(
    L: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert ok(capsys, *L, "create", "dim", "--orderby", "id:asc", "--unique") == [
        "pool dim created"
    ]
    ok(capsys, *L, "create", "plain", "--orderby", "id:asc")
    listed = {r["name"]: r for r in map(json.loads, ok(capsys, *L, "ls", "-f", "json"))}
    assert listed["dim"]["unique"] is True and listed["plain"]["unique"] is False
    table = ok(capsys, *L, "ls")
    assert table[0].split()[-1] == "unique", table
    by_name = {line.split()[0]: line.split() for line in table[1:]}
    assert by_name["dim"][-1] == "true" and by_name["plain"][-1] == "false", table

    first = ndjson(tmp_path / "a.ndjson", {"id": 1, "v": "a"}, {"id": 2, "v": "b"})
    out = ok(capsys, *L, "load", "-p", "dim", first)
    assert out[0] == "upserted: 2 inserted, 0 updated, 0 deleted (rewrote 0)", out
    committed(out[1])
    again = ndjson(
        tmp_path / "b.ndjson", {"id": 2, "v": "B"}, {"id": 3, "v": "c"}, {"id": 3, "v": "C"}
    )
    out = ok(capsys, *L, "load", "-p", "dim", again)
    assert out[0] == "upserted: 1 inserted, 1 updated, 0 deleted (rewrote 1)", out
    assert [(r["id"], r["v"]) for r in records(capsys, L, "dim")] == [(1, "a"), (2, "B"), (3, "C")]
    log = [json.loads(x) for x in ok(capsys, *L, "log", "-p", "dim", "-f", "json")]
    assert [e["upsert"] for e in log] == [
        {"inserted": 1, "updated": 1, "deleted": 0},
        {"inserted": 2, "updated": 0, "deleted": 0},
    ]
    # The plain pool keeps both copies, as loads always did.
    ok(capsys, *L, "load", "-p", "plain", first)
    out = ok(capsys, *L, "load", "-p", "plain", first)
    assert out[0] == "loaded 2 rows in 1 object"
    assert len(records(capsys, L, "plain")) == 4


def test_upsert_on_a_branch_touches_only_that_branch(
    L: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    ok(capsys, *L, "create", "c", "--orderby", "id:asc")
    ok(capsys, *L, "load", "-p", "c", ndjson(tmp_path / "a.ndjson", {"id": 1, "v": "a"}))
    ok(capsys, *L, "branch", "-p", "c", "dev")
    main_log = ok(capsys, *L, "log", "-p", "c", "-f", "json")
    out = ok(
        capsys, *L, "upsert", "-p", "c@dev", ndjson(tmp_path / "b.ndjson", {"id": 1, "v": "b"})
    )
    assert out[0].startswith("upserted: 0 inserted, 1 updated, 0 deleted")
    assert [r["v"] for r in records(capsys, L, "c@dev")] == ["b"]
    assert [r["v"] for r in records(capsys, L, "c")] == ["a"]
    assert ok(capsys, *L, "log", "-p", "c", "-f", "json") == main_log


def readme_lines() -> list[str]:
    """The shell lines of the README's "Upserts and change feeds" block, continuations
    joined, comment-only lines left out."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("\n### Upserts and change feeds\n") :]
    block = re.search(r"^```sh\n(.*?)^```$", section, flags=re.S | re.M)
    assert block, "the README's upsert section has no sh block"
    joined = re.sub(r"\\\n\s*", " ", block.group(1))
    return [x for x in joined.splitlines() if x.strip() and not x.lstrip().startswith("#")]


def test_readme_upsert_example_runs_and_says_what_it_shows(
    L: list[str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    said: dict[str, list[str]] = {}
    for line in readme_lines():
        if not line.startswith("lake "):
            subprocess.run(["bash", "-c", line], check=True, cwd=tmp_path)
            continue
        said[line.split("#")[0].strip()] = ok(capsys, *L, *shlex.split(line, comments=True)[1:])
    upserted = said['lake upsert -p planes cdc.ndjson --delete-when "op = \'d\'" -m "cdc batch 1"']
    assert upserted[0].startswith("upserted: 1 inserted, 1 updated, 1 deleted (read 1 of 1 object,")
    assert said["lake load -p airlines b.ndjson"][0] == (
        "upserted: 1 inserted, 1 updated, 0 deleted (rewrote 1)"
    )
    planes = [(r["tailnum"], r["seats"]) for r in records(capsys, L, "planes")]
    assert planes == [("N10156", 55), ("N102UW", 180), ("N104UW", 182)]
    newest = json.loads(said["lake log -p planes -f json"][0])
    assert newest["upsert"] == {"inserted": 1, "updated": 1, "deleted": 1}
    airlines = [(r["carrier"], r["name"]) for r in records(capsys, L, "airlines")]
    assert airlines == [("AA", "American Airlines Inc."), ("UA", "United Air Lines Inc.")]


# -- bad input --------------------------------------------------------------------------------


def lake_state(uri: str) -> dict[str, bytes]:
    """Every file of the lake with its bytes: equal before and after means nothing changed."""
    store = open_store(uri)
    return {info.key: store.get(info.key) for info in store.list("")}


def _strict(L: list[str], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    ok(capsys, *L, "create", "s", "--orderby", "id:asc", "--schema-mode", "strict")
    ok(capsys, *L, "load", "-p", "s", ndjson(tmp_path / "s.ndjson", {"id": 1, "v": "a"}))


BAD = {
    # name: (argv after --lake, exit status, text the error line must contain)
    "unknown-pool": (lambda d: ["upsert", "-p", "nosuch", f"{d}/ok.ndjson"], 1, "pool not found"),
    "unknown-branch": (
        lambda d: ["upsert", "-p", "c@nosuch", f"{d}/ok.ndjson"],
        1,
        "branch not found",
    ),
    # As for lake load: a file that cannot be read is a usage error.
    "missing-file": (lambda d: ["upsert", "-p", "c", f"{d}/absent.ndjson"], 2, "absent.ndjson"),
    "malformed-line-2": (lambda d: ["upsert", "-p", "c", f"{d}/bad.ndjson"], 1, "line 2"),
    "type-conflict": (lambda d: ["upsert", "-p", "c", f"{d}/conflict.ndjson"], 1, "v"),
    "delete-when-syntax": (
        lambda d: ["upsert", "-p", "c", f"{d}/ok.ndjson", "--delete-when", "op = = 'd'"],
        2,
        "expected a value",
    ),
    "delete-when-unknown-column": (
        lambda d: ["upsert", "-p", "c", f"{d}/ok.ndjson", "--delete-when", "nosuch = 'd'"],
        2,
        "nosuch",
    ),
    "strict-new-column": (lambda d: ["upsert", "-p", "s", f"{d}/newcol.ndjson"], 1, "extra"),
    "no-files": (lambda d: ["upsert", "-p", "c"], 2, "FILE"),
    "bad-meta": (lambda d: ["upsert", "-p", "c", f"{d}/ok.ndjson", "--meta", "{"], 2, "--meta"),
    "unique-load-type-conflict": (lambda d: ["load", "-p", "u", f"{d}/conflict.ndjson"], 1, "v"),
    # Staged objects could not replace rows by key: a unique pool refuses lake add.
    "unique-add": (lambda d: ["add", "-p", "u", f"{d}/ok.ndjson"], 2, "staging is not supported"),
}


#: On S3 too: the failures found after the input was read (the rest fail before any store
#: access, alike on both; local disk keeps the suite fast).
ON_S3 = ("type-conflict", "strict-new-column", "unknown-branch", "unique-load-type-conflict")


@pytest.mark.parametrize(
    ("where", "case"),
    [("local", c) for c in sorted(BAD)] + [("s3", c) for c in ON_S3],
)
def test_bad_upsert_is_one_error_line_and_changes_nothing(
    where: str, case: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], request: Any
) -> None:
    lake_uri = (
        str(tmp_path / "lake")
        if where == "local"
        else f"s3://{request.getfixturevalue('s3_bucket')}/lake"
    )
    L = ["--lake", lake_uri]
    ok(capsys, *L, "init")
    ok(capsys, *L, "create", "c", "--orderby", "id:asc")
    ok(capsys, *L, "create", "u", "--orderby", "id:asc", "--unique")
    for pool in ("c", "u"):
        ok(capsys, *L, "load", "-p", pool, ndjson(tmp_path / "base.ndjson", {"id": 1, "v": "a"}))
    _strict(L, capsys, tmp_path)
    ndjson(tmp_path / "ok.ndjson", {"id": 1, "v": "b", "op": "u"})
    (tmp_path / "bad.ndjson").write_text('{"id": 2, "v": "x"}\n{"id": 3, "v": \n')
    ndjson(tmp_path / "conflict.ndjson", {"id": 1, "v": {"nested": True}})
    ndjson(tmp_path / "newcol.ndjson", {"id": 1, "v": "b", "extra": 1})
    build, status, text = BAD[case]
    before = lake_state(lake_uri)
    try:
        code, out, err = run(capsys, *L, *build(str(tmp_path)))
    except SystemExit as e:  # usage errors found while parsing
        code = int(e.code or 0)
        out, err = capsys.readouterr()
    lines = err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err and text in lines[0], lines[0]
    assert (code, out) == (status, ""), (code, out, lines[0])
    assert lake_state(lake_uri) == before
