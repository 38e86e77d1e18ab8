"""``lake view create|ls|drop``; views in ``lake ls`` (now, ``--at-version``) and across
``lake catalog rollback``; refused input: one ``error:`` line, exit 1 (2 for usage), nothing
changed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lake_cli import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    try:
        code = main(list(args))
    except SystemExit as e:  # usage errors exit as argparse did
        code = int(e.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def L(lake_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    L = ["--lake", lake_uri]
    assert run(capsys, *L, "init")[0] == 0
    assert run(capsys, *L, "create", "flights")[0] == 0
    data = tmp_path / "f.ndjson"
    data.write_text('{"ts": 1, "carrier": "AA"}\n{"ts": 2, "carrier": "BA"}\n')
    assert run(capsys, *L, "load", "-p", "flights", str(data))[0] == 0
    return L


def catalog_version(capsys: pytest.CaptureFixture[str], L: list[str]) -> int:
    code, out, _ = run(capsys, *L, "catalog", "log", "-n", "1", "-f", "json")
    assert code == 0
    return int(json.loads(out)["version"])


def test_create_ls_drop_and_rollback(L: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    sql = "SELECT carrier, count(*) AS n FROM flights GROUP BY carrier"
    code, out, err = run(capsys, *L, "view", "create", "by_carrier", sql)
    assert (code, err) == (0, "")
    assert out == "view by_carrier created (catalog version 2)\n"
    code, out, _ = run(capsys, *L, "view", "ls", "-f", "json")
    (row,) = [json.loads(x) for x in out.splitlines()]
    assert row["name"] == "by_carrier" and row["sql"] == sql
    assert row["references"] == ["flights"] and row["created"].endswith("Z")
    code, out, _ = run(capsys, *L, "view", "ls")
    assert out.splitlines()[0].split() == ["name", "sql", "references", "created"]

    # lake ls lists views after the pools, with a kind column (only when there are views).
    code, out, _ = run(capsys, *L, "ls", "-f", "json")
    listed = [json.loads(x) for x in out.splitlines()]
    assert [(r["name"], r["kind"]) for r in listed] == [("flights", "pool"), ("by_carrier", "view")]
    assert listed[1]["key"] is None
    code, out, _ = run(capsys, *L, "ls", "--at-version", "1")
    assert out.splitlines()[0].split()[-1] == "unique"  # no views then: as before

    assert run(capsys, *L, "view", "drop", "by_carrier")[1] == (
        "view by_carrier dropped (catalog version 3)\n"
    )
    assert run(capsys, *L, "view", "ls")[1].splitlines()[1:] == []
    code, out, _ = run(capsys, *L, "ls", "--at-version", "2")
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["flights", "by_carrier"]
    code, out, _ = run(capsys, *L, "view", "ls", "--at-version", "2", "-f", "json")
    assert [json.loads(x)["name"] for x in out.splitlines()] == ["by_carrier"]

    code, out, _ = run(capsys, *L, "catalog", "log", "-f", "json")
    times = {json.loads(x)["version"]: json.loads(x)["time"] for x in out.splitlines()}
    code, out, _ = run(capsys, *L, "view", "ls", "--as-of", times[2], "-f", "json")
    assert [json.loads(x)["name"] for x in out.splitlines()] == ["by_carrier"]
    assert run(capsys, *L, "view", "ls", "--as-of", times[3])[1].splitlines()[1:] == []
    assert run(capsys, *L, "catalog", "rollback", "2")[1] == "4\n"
    code, out, _ = run(capsys, *L, "view", "ls", "-f", "json")
    assert [json.loads(x)["sql"] for x in out.splitlines()] == [sql]


#: (arguments, exit status, the start of the one error line): each refused, nothing changed.
REFUSED: list[tuple[list[str], int, str]] = [
    (
        ["view", "create", "v", "DROP TABLE flights"],
        1,
        "error: DROP statements are refused",
    ),
    (
        ["view", "create", "v", "SELECT * FROM nope"],
        1,
        "error: nope: pool not found (named by view v)",
    ),
    (["view", "create", "flights", "SELECT 1"], 1, "error: pool 'flights' already exists"),
    (
        ["view", "create", "a b", "SELECT 1"],
        2,
        "error: invalid name 'a b': a view name must not contain ' '",
    ),
    (
        ["view", "create", "v", "SELECT * FROM read_parquet('/etc/x')"],
        1,
        "error: table function read_parquet() is refused",
    ),
    (["view", "drop", "zz"], 1, "error: zz: view not found"),
    (["view", "create", "v", "SELECT nosuch FROM flights"], 1, "error: Binder Error"),
    (["view", "create", "v"], 2, "error: the following arguments are required: SQL"),
    (["view", "ls", "--at-version", "99"], 1, "error: 99: catalog version not found"),
    (["view", "ls", "--at-version", "1", "--as-of", "2026-01-01"], 2, "error: argument --as-of"),
]


def test_refused(L: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    before = catalog_version(capsys, L)
    for args, status, message in REFUSED:
        code, out, err = run(capsys, *L, *args)
        assert (code, out) == (status, ""), args
        assert len(err.splitlines()) == 1 and err.startswith(message), err
        assert catalog_version(capsys, L) == before, args


def test_a_duplicate_is_refused(L: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, *L, "view", "create", "v", "SELECT 1")[0] == 0
    code, _, err = run(capsys, *L, "view", "create", "v", "SELECT 2")
    assert (code, err) == (1, "error: view 'v' already exists\n")
    out = run(capsys, *L, "view", "ls", "-f", "json")[1]
    assert [json.loads(x)["sql"] for x in out.splitlines()] == ["SELECT 1"]
