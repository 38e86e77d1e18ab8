"""``lake schema``, ``count``, ``diff``; ``--as-of`` before the first commit; usage errors that
point at the subcommand's help; help text everywhere; ``log -f json`` key bounds; readable
sizes in tables (issue 19). Both stores where the store matters."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest

from lake_cli import main
from lake_cli.app import cli


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def last_id(out: str) -> str:
    return out.strip().splitlines()[-1].split()[0]


@pytest.fixture
def pool(lake_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """Pool ``p`` keyed ts:asc: main has ts 0..99 (v null every tenth row); branch dev adds
    ts 100..149 with a column w. Returns the CLI prefix."""
    L = ["--lake", lake_uri]
    assert run(capsys, *L, "init")[0] == 0
    assert run(capsys, *L, "create", "p", "--orderby", "ts:asc")[0] == 0
    a = tmp_path / "a.ndjson"
    a.write_text(
        "".join(
            json.dumps({"ts": i, "v": None if i % 10 == 0 else i * 2, "s": "x"}) + "\n"
            for i in range(100)
        )
    )
    b = tmp_path / "b.ndjson"
    b.write_text("".join(json.dumps({"ts": i, "w": "y"}) + "\n" for i in range(100, 150)))
    assert run(capsys, *L, "load", "-p", "p", str(a))[0] == 0
    assert run(capsys, *L, "branch", "-p", "p", "dev")[0] == 0
    assert run(capsys, *L, "load", "-p", "p@dev", str(b))[0] == 0
    return L


def test_schema(pool: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *pool, "schema", "-p", "p@dev", "-f", "json")
    assert code == 0
    assert [json.loads(x) for x in out.splitlines()] == [
        {"name": "ts", "type": "int64", "nullable": True, "nulls": 0, "key": 1},
        {"name": "v", "type": "int64", "nullable": True, "nulls": 60, "key": None},
        {"name": "s", "type": "string", "nullable": True, "nulls": 50, "key": None},
        {"name": "w", "type": "string", "nullable": True, "nulls": 100, "key": None},
    ]
    code, out, _ = run(capsys, *pool, "schema", "-p", "p")
    assert code == 0
    assert out.splitlines() == [
        "name  type    nullable  nulls  key",
        "ts    int64   True      0      1",
        "v     int64   True      10",
        "s     string  True      0",
    ]


def test_schema_of_empty_pool_names_the_missing_key(
    pool: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(capsys, *pool, "create", "e", "--orderby", "a,b:asc")[0] == 0
    code, out, _ = run(capsys, *pool, "schema", "-p", "e")
    assert code == 0
    assert out.splitlines()[1:] == [
        "(key field a is in no record yet)",
        "(key field b is in no record yet)",
    ]


@pytest.mark.parametrize(
    ("where", "rows", "read"),
    [
        (None, 150, 0),  # from commit metadata alone
        ("ts >= 0", 150, 0),  # stats prove every row of both objects matches
        ("ts >= 0 AND ts < 1000", 150, 0),
        ("w = 'y'", 50, 0),  # main's object lacks w: pruned; dev's all match
        ("ts < 50", 50, 1),  # dev's object pruned, main's read
        ("v > 3", 89, 1),  # v has nulls: main's object must be read
        ("ts <> 5", 149, 1),
        ("ts = NULL", 0, 0),  # a NULL literal is never true: pruned
    ],
)
def test_count(
    pool: list[str],
    capsys: pytest.CaptureFixture[str],
    where: str | None,
    rows: int,
    read: int,
) -> None:
    args = ["count", "-p", "p@dev", "--stats"] + (["--where", where] if where else [])
    code, out, err = run(capsys, *pool, *args)
    assert (code, out) == (0, f"{rows}\n")
    stats = json.loads(err)
    assert stats["rows"] == rows and stats["objects_total"] == 2
    assert stats["objects_read"] == read
    # The count agrees with the rows a query returns.
    query = ["query", "-p", "p@dev", "-f", "json"] + (["--where", where] if where else [])
    assert len(run(capsys, *pool, *query)[1].splitlines()) == rows


def test_count_as_of_and_bad_where(pool: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, *pool, "count", "-p", "p", "--as-of", "2001-01-01T00:00:00Z")
    assert (code, out) == (1, "")
    assert err == "error: no commit on main at or before 2001-01-01T00:00:00.000000Z\n"
    code, out, err = run(capsys, *pool, "count", "-p", "p", "--where", "nope = 1")
    assert (code, out) == (2, "") and err == "error: unknown column 'nope' in --where\n"


def test_diff(pool: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, *pool, "diff", "-p", "p", "main", "dev", "-f", "json")
    assert code == 0
    d = json.loads(out)
    assert (d["objects_added"], d["objects_removed"]) == (1, 0)
    assert (d["rows_added"], d["rows_removed"], d["net_rows"]) == (50, 0, 50)
    added = d["added"][0]
    code, out, _ = run(capsys, *pool, "diff", "-p", "p", "dev", "main", "-f", "json")
    back = json.loads(out)
    assert (back["removed"], back["rows_removed"], back["net_rows"]) == ([added], 50, -50)
    # A compaction is layout only: rows move between objects, the net is zero.
    main_tip = run(capsys, *pool, "log", "-p", "p", "-f", "json")[1].splitlines()[0]
    before = json.loads(main_tip)["id"]
    assert run(capsys, *pool, "merge", "-p", "p", "dev", "--into", "main")[0] == 0
    code, out, _ = run(capsys, *pool, "compact", "-p", "p")
    assert code == 0, out
    code, out, _ = run(capsys, *pool, "diff", "-p", "p", before, "main", "-f", "json")
    d = json.loads(out)
    assert d["net_rows"] == 50 and d["rows_added"] == 150 and d["rows_removed"] == 100
    code, out, _ = run(capsys, *pool, "diff", "-p", "p", "main", "main")
    assert code == 0 and "objects: +0 -0" in out and "rows:    +0 -0  (net +0)" in out


def test_diff_usage(pool: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, *pool, "diff", "-p", "p@dev", "main", "dev")
    assert (code, out) == (2, "") and err.startswith("error: lake diff takes the two refs")
    code, out, err = run(capsys, *pool, "diff", "-p", "p", "main", "nope")
    assert (code, out, err) == (1, "", "error: nope: branch not found (in pool p)\n")


def test_as_of_before_the_first_commit(pool: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    early = "2001-01-01T00:00:00Z"
    for cmd in ("query", "objects", "count", "schema", "partitions"):
        code, out, err = run(capsys, *pool, cmd, "-p", "p", "--as-of", early)
        assert (code, out) == (1, ""), cmd
        assert err == "error: no commit on main at or before 2001-01-01T00:00:00.000000Z\n", cmd
    # A branch created later did not exist then: same message, naming it.
    code, out, err = run(capsys, *pool, "query", "-p", "p@dev", "--as-of", early)
    assert err == "error: no commit on dev at or before 2001-01-01T00:00:00.000000Z\n"
    # A branch that does not exist at all is still "branch not found".
    code, out, err = run(capsys, *pool, "query", "-p", "p@nope", "--as-of", early)
    assert (code, err) == (1, "error: nope: branch not found (in pool p)\n")


def test_as_of_on_an_empty_branch(pool: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert run(capsys, *pool, "create", "e")[0] == 0
    code, out, err = run(capsys, *pool, "query", "-p", "e", "--as-of", "2100-01-01T00:00:00Z")
    assert (code, out) == (1, "")
    assert err == "error: no commit on main at or before 2100-01-01T00:00:00.000000Z\n"
    # Without --as-of an empty pool is simply empty.
    assert run(capsys, *pool, "count", "-p", "e")[:2] == (0, "0\n")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["load", "-p", "p", "--foo", "x"],
            "error: unrecognized option --foo (see lake load --help)",
        ),
        (
            ["query", "-p", "p", "extra"],
            # a positional of lake query is its SQL, which goes without -p
            "error: a SQL query names its pools itself: give SQL or -p POOL, not both "
            "(see lake query --help)",
        ),
        (["--bogus", "ls"], "error: unrecognized option --bogus (see lake --help)"),
        (
            ["catalog", "log", "--zz"],
            "error: unrecognized option --zz (see lake catalog log --help)",
        ),
        (
            ["query", "-p", "p", "-f", "xml"],
            "error: argument -f: invalid choice: 'xml' (choose from 'table', 'json', 'csv', "
            "'parquet') (see lake query --help)",
        ),
        (["count"], "error: the following arguments are required: -p (see lake count --help)"),
    ],
)
def test_usage_errors_point_at_the_subcommand_help(
    lake_uri: str, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--lake", lake_uri, *argv])
    out, err = capsys.readouterr()
    assert exit_.value.code == 2 and out == ""
    assert err == message + "\n"


def _commands(group: click.Group, path: str = "lake") -> list[tuple[str, click.Command]]:
    out: list[tuple[str, click.Command]] = []
    for name, command in group.commands.items():
        if isinstance(command, click.Group):
            out += _commands(command, f"{path} {name}")
        else:
            out.append((f"{path} {name}", command))
    return out


def test_every_option_has_help_and_every_command_an_example() -> None:
    commands = _commands(cli)
    assert len(commands) > 25
    for path, command in commands:
        assert (command.epilog or "").startswith("examples:\n  lake "), path
        assert command.help, path
        for param in command.params:
            assert getattr(param, "help", None), f"{path}: {param.opts or param.name} has no help"


def test_help_keeps_examples_and_one_line_per_option(capsys: pytest.CaptureFixture[str]) -> None:
    """``--help`` (and ``-h``) prints the command's options and positionals with their help and
    its examples as written, and exits 0."""
    for flag in ("--help", "-h"):
        with pytest.raises(SystemExit) as exit_:
            main(["query", flag])
        assert exit_.value.code == 0
        out, err = capsys.readouterr()
        assert err == ""
        assert "-p POOL[@REF]" in out and "--where SQL-EXPR" in out and "-f {table,json,csv,parquet}" in out
        examples = out[out.index("examples:\n") :]
        assert examples.splitlines()[1].startswith('  lake query "SELECT ')
        assert "  lake query -p logs\n" in examples
        assert '  lake query -p logs --where "ts > 400 AND ts <= 500" --stats' in examples
    with pytest.raises(SystemExit):
        main(["load", "--help"])
    out = capsys.readouterr().out
    assert "FILE" in out and "files to load" in out


def test_log_json_prints_key_bounds_as_objects_does(
    lake_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    L = ["--lake", lake_uri]
    run(capsys, *L, "init")
    run(capsys, *L, "create", "t")
    f = tmp_path / "t.ndjson"
    f.write_text('{"ts":"2026-01-05T10:00:00Z","x":1}\n{"ts":"2026-01-06T10:00:00Z","x":2}\n')
    assert run(capsys, *L, "load", "-p", "t", str(f))[0] == 0
    obj = json.loads(run(capsys, *L, "objects", "-p", "t", "-f", "json")[1])
    entry = json.loads(run(capsys, *L, "log", "-p", "t", "-f", "json")[1])
    logged = entry["actions"][0]["object"]
    assert (logged["min"], logged["max"]) == (obj["min"], obj["max"])
    assert logged["min"] == "2026-01-05T10:00:00.000000Z"
    assert logged["columns"]["ts"]["max"] == "2026-01-06T10:00:00.000000Z"
    assert logged["columns"]["x"] == {"type": "int64", "min": 1, "max": 2, "nulls": 0}
    assert logged["size"] == obj["size"] and isinstance(obj["size"], int)


def test_sizes_are_readable_in_tables_and_bytes_in_json(
    pool: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    table = run(capsys, *pool, "objects", "-p", "p")[1].splitlines()
    assert table[0].split() == ["id", "min", "max", "count", "size"]
    size_cell = table[1].split(maxsplit=4)[4]
    assert size_cell.endswith((" B", " KiB", " MiB")), size_cell
    obj = json.loads(run(capsys, *pool, "objects", "-p", "p", "-f", "json")[1])
    assert isinstance(obj["size"], int)
    ls = run(capsys, *pool, "ls")[1]
    assert "128.0 MiB" in ls
    assert json.loads(run(capsys, *pool, "ls", "-f", "json")[1])["target_size"] == 128 << 20
