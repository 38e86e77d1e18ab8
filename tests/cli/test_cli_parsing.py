"""The command line is read by argparse's rules on click (lake_cli/parsing.py): the exact
``error:`` line and exit status 2 that ``lake`` printed when it was built on argparse, for each
kind of mistake, and the argparse conveniences scripts use (option prefixes, glued values,
``--``). Every expected line here was printed by the argparse-based ``lake``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lake_cli import main

COMMANDS = (
    "'init', 'create', 'ls', 'drop', 'load', 'upsert', 'add', 'status', 'commit', 'query', "
    "'objects', 'log', 'branch', 'merge', 'delete', 'revert', 'compact', 'optimize', 'dedupe', "
    "'retain', 'cleanup', 'vacate', 'purge', 'partitions', 'drop-partition', 'schema', 'otree', "
    "'count', 'diff', "
    "'verify', 'catalog', 'view', 'index', 'derive', 'histogram', 'serve'"
)

USAGE_ERRORS = [
    # nothing, or no such command
    ([], "the following arguments are required: COMMAND (see lake --help)"),
    (["foo"], f"argument COMMAND: invalid choice: 'foo' (choose from {COMMANDS}) (see lake --help)"),
    (["-", "ls"], f"argument COMMAND: invalid choice: '-' (choose from {COMMANDS}) (see lake --help)"),
    # a command's option put before the command: its value is taken for the command
    (["-f", "json", "ls"], "-f is not an option of 'lake': a command's options go after it, e.g. lake COMMAND -f json (see lake --help)"),
    (["catalog", "-f", "json", "log"], "-f is not an option of 'lake catalog': a command's options go after it, e.g. lake catalog COMMAND -f json (see lake catalog --help)"),
    (["catalog"], "the following arguments are required: COMMAND (see lake catalog --help)"),
    (
        ["catalog", "foo"],
        "argument COMMAND: invalid choice: 'foo' (choose from 'log', 'rollback', 'export') "
        "(see lake catalog --help)",
    ),
    # a value missing, or a word that looks like an option where a value belongs
    (["--lake"], "argument --lake: expected one argument (see lake --help)"),
    (["query", "-p", "p", "-f"], "argument -f: expected one argument (see lake query --help)"),
    (["create", "--orderby", "-x"], "argument --orderby: expected one argument (see lake create --help)"),
    # bad values, reported where they are met
    (["query", "-p", "p", "--limit", "abc"], "argument --limit: invalid int value: 'abc' (see lake query --help)"),
    (["query", "-p", "p", "--limit", "-2.5"], "argument --limit: invalid int value: '-2.5' (see lake query --help)"),
    (
        ["compact", "-p", "p", "--lock-timeout", "abc"],
        "argument --lock-timeout: invalid float value: 'abc' (see lake compact --help)",
    ),
    (["catalog", "rollback", "abc"], "argument N: invalid int value: 'abc' (see lake catalog rollback --help)"),
    (
        ["catalog", "log", "-n", "x"],
        "argument -n: must be a whole number, 0 or more, not 'x' (see lake catalog log --help)",
    ),
    # before any missing argument or unknown word
    (
        ["--bogus", "catalog", "--zz", "log", "-n", "x"],
        "argument -n: must be a whole number, 0 or more, not 'x' (see lake catalog log --help)",
    ),
    # flags take no value; clusters of short flags
    (["drop", "--force=yes"], "argument --force: ignored explicit argument 'yes' (see lake drop --help)"),
    (["load", "-qx"], "argument -q: ignored explicit argument 'x' (see lake load --help)"),
    (["load", "-q=1"], "argument -q: ignored explicit argument '1' (see lake load --help)"),
    # option prefixes
    (
        ["load", "-p", "p", "--spa"],
        "ambiguous option: --spa could match --spark, --spark-master (see lake load --help)",
    ),
    (
        ["create", "-p", "p", "--s"],
        "ambiguous option: --s could match --schema-mode, --seek-stride (see lake create --help)",
    ),
    # mutually exclusive options, the later one named first
    (
        ["merge", "-p", "p", "a", "--into", "c", "--the", "--o"],
        "argument --ours: not allowed with argument --theirs (see lake merge --help)",
    ),
    (
        ["ls", "--as-of", "x", "--at-version", "1"],
        "argument --at-version: not allowed with argument --as-of (see lake ls --help)",
    ),
    # every missing required argument at once, in declaration order
    (["merge"], "the following arguments are required: -p, SOURCE, --into (see lake merge --help)"),
    (["merge", "-p", "p", "--nope", "x"], "the following arguments are required: --into (see lake merge --help)"),
    (["--bogus", "objects"], "the following arguments are required: -p (see lake objects --help)"),
    # unknown words last: the first one, blaming the command it was given to
    (["-x", "ls"], "unrecognized option -x (see lake --help)"),
    (["catalog", "--zz", "log"], "unrecognized option --zz (see lake catalog log --help)"),
    (["objects", "-p", "p", "extra", "--nope"], "unexpected argument 'extra' (see lake objects --help)"),
    (["objects", "-p", "p", "-x y"], "unrecognized option -x y (see lake objects --help)"),
    (["objects", "-p", "p", "--", "x"], "unrecognized option -- (see lake objects --help)"),
    # lake query takes SQL as its positional: with -p as well it is a usage error
    (["query", "-p", "p", "SELECT 1"], "a SQL query names its pools itself: give SQL or -p POOL, not both (see lake query --help)"),
    (["query"], "lake query needs a SQL query or -p POOL (see lake query --help)"),
    (["branch", "-p", "p", "a", "b"], "unexpected argument 'b' (see lake branch --help)"),
    (["diff", "-p", "p", "--", "a", "--", "b", "c"], "unexpected argument 'b' (see lake diff --help)"),
    # positionals are matched in runs between options, as argparse did
    (["load", "-p", "p", "a.ndjson", "-m", "x", "b.csv"], "unexpected argument 'b.csv' (see lake load --help)"),
]


@pytest.mark.parametrize(("argv", "line"), USAGE_ERRORS, ids=[" ".join(a) or "-" for a, _ in USAGE_ERRORS])
def test_usage_error_lines_are_argparse_s(
    argv: list[str], line: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["--lake", str(tmp_path / "none"), *argv] if argv[:1] != ["--lake"] else argv)
    out, err = capsys.readouterr()
    assert (exit_.value.code, out, err) == (2, "", f"error: {line}\n")


def test_prefixes_glued_values_and_dashes_work_as_before(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    lake = ["--lake", str(tmp_path / "lake")]
    assert main([*lake, "init"]) == 0
    assert main([*lake, "create", "p", "--order=ts:asc"]) == 0
    src = tmp_path / "a.ndjson"
    src.write_text("".join(json.dumps({"ts": i, "v": f"r{i}"}) + "\n" for i in range(5)))
    assert main([*lake, "load", "-qpp", str(src)]) == 0
    capsys.readouterr()
    # --col/--ord are prefixes, -fcsv a glued value, -1 a value (not an option).
    assert main([*lake, "query", "-pp", "--col=ts", "--ord=desc", "-fcsv", "--w", "ts > -1"]) == 0
    assert capsys.readouterr().out == "ts\n4\n3\n2\n1\n0\n"
    # After --, a word that looks like an option is a positional: here an object id.
    assert main([*lake, "delete", "-p=p", "--", "--where"]) == 1
    assert capsys.readouterr().err == "error: --where: object not found (not live on p@main)\n"
