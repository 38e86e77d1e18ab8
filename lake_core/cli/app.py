"""Argument parsing, dispatch and error reporting for ``lake``.

Errors print one line ``error: …`` on stderr; exit 1 for a failed operation, 2 for a usage
error. Secrets never reach messages: S3 errors carry bucket, key and error code only.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any, NoReturn

from lake_core.errors import CommitStateUnknownError, LakeError, LakeWarning, UsageError


class _Parser(argparse.ArgumentParser):
    """Usage errors as one line pointing at the help of the (sub)command that was misused."""

    def error(self, message: str) -> NoReturn:
        sys.stderr.write(f"error: {message} (see {self.prog} --help)\n")
        raise SystemExit(2)


def _parse(parser: argparse.ArgumentParser, argv: list[str]) -> argparse.Namespace:
    """Parse ``argv``; a word no parser knows is reported by the subcommand it was given to
    (argparse itself blames the top-level parser for every leftover)."""
    args, extras = parser.parse_known_args(argv)
    if not extras:
        return args
    word = extras[0]
    if word.startswith("-"):
        what = f"unrecognized option {word}"
    else:
        what = f"unexpected argument {word!r}"
    before_command = args.command in argv and argv.index(word) < argv.index(args.command)
    (parser if before_command else _innermost(parser, args)).error(what)


def _innermost(
    parser: argparse.ArgumentParser, args: argparse.Namespace
) -> argparse.ArgumentParser:
    """The deepest subcommand parser ``args`` went through (``lake catalog ls`` → its own)."""
    current = parser
    while True:
        subs = [a for a in current._actions if isinstance(a, argparse._SubParsersAction)]
        name = getattr(args, subs[0].dest, None) if subs else None
        found = subs[0].choices.get(name) if subs and name else None
        if not isinstance(found, argparse.ArgumentParser):
            return current
        current = found


def _formatter(prog: str) -> argparse.HelpFormatter:
    return argparse.RawDescriptionHelpFormatter(prog, max_help_position=32)


def build_parser() -> argparse.ArgumentParser:
    from lake_core.cli import catalog_commands as cc
    from lake_core.cli import commands as c
    from lake_core.cli.help_text import fill_help
    from lake_core.cli.inspect_commands import add_inspect_commands

    p = _Parser(
        prog="lake",
        formatter_class=_formatter,
        description="A git-like data lake of pools on local disk or S3.",
        epilog=(
            "examples:\n"
            "  export LAKE_ROOT=/tmp/lake\n"
            "  lake init\n"
            "  lake create logs --orderby ts:desc\n"
            "  lake load -p logs events.ndjson -m 'first batch'\n"
            "  lake query -p logs --where \"ts > '2026-01-05'\" -f json\n"
            "  lake log -p logs\n"
        ),
    )
    p.add_argument(
        "--lake",
        metavar="URI",
        help="lake location: path, file://… or s3://bucket/prefix (else $LAKE_ROOT)",
    )
    p.add_argument(
        "--zk", metavar="HOST:PORT[,…]", help="ZooKeeper for locks (else $LAKE_ZOOKEEPER)"
    )
    sub = p.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True

    def cmd(name: str, func: object, help_: str, examples: str = "") -> argparse.ArgumentParser:
        sp = sub.add_parser(
            name,
            help=help_,
            description=help_,
            formatter_class=_formatter,
            epilog=f"examples:\n{examples}" if examples else None,
        )
        sp.set_defaults(func=func)
        return sp

    cmd(
        "init",
        c.cmd_init,
        "create a lake at the URI (fails if one exists)",
        "  lake --lake /tmp/lake init\n  lake --lake s3://bucket/lake init\n",
    )

    sp = cmd(
        "create",
        c.cmd_create,
        "create a pool with branch main",
        "  lake create logs\n  lake create ns1.events --orderby user,ts:asc --target-size 64MB\n"
        "  lake create metrics --orderby ts:asc --schema-mode strict\n",
    )
    sp.add_argument("pool", metavar="POOL")
    sp.add_argument("--orderby", default="ts:desc", metavar="KEY[,KEY…][:asc|:desc]")
    sp.add_argument("--partition-by", metavar="EXPR")
    sp.add_argument("--target-size", default="128MB", metavar="SIZE")
    sp.add_argument(
        "--schema-mode",
        default="merge",
        choices=["merge", "strict"],
        help="merge (default): new columns union into the schema; strict: a load bringing "
        "columns the pool lacks, or with no row having the pool key, is refused (the first "
        "load into an empty pool defines the schema)",
    )
    sp.add_argument("--seek-stride", default="4MB", metavar="SIZE", help=argparse.SUPPRESS)

    sp = cmd(
        "ls",
        c.cmd_ls,
        "list pools (now, or at a catalog version or time)",
        "  lake ls\n  lake ls -f json\n  lake ls --at-version 12\n  lake ls --as-of 2026-01-05T10:00:00Z\n",
    )
    sp.add_argument("-f", dest="format", default="table", choices=["table", "json", "csv"])
    cc.add_ls_time_travel(sp)

    sp = cmd(
        "drop",
        c.cmd_drop,
        "remove a pool from the registry (data stays until cleanup)",
        "  lake drop logs --force\n",
    )
    sp.add_argument("pool", metavar="POOL")
    sp.add_argument("--force", action="store_true")

    def commit_flags(sp: argparse.ArgumentParser) -> None:
        sp.add_argument("-m", dest="message", default="", metavar="MSG", help="commit message")
        sp.add_argument(
            "--user", metavar="NAME", help="commit author (else $LAKE_USER or the OS user)"
        )
        sp.add_argument("--meta", metavar="JSON", help="arbitrary JSON stored in the commit")

    sp = cmd(
        "load",
        c.cmd_load,
        "add files and commit them in one commit",
        "  lake load -p logs a.ndjson b.csv -m 'nightly'\n"
        "  cat x.ndjson | lake load -p logs@dev -\n"
        '  lake load -p logs data.parquet --meta \'{"source": "s3"}\'\n',
    )
    sp.add_argument("-p", dest="pool", required=True, metavar="POOL[@BRANCH]")
    sp.add_argument(
        "-i",
        dest="input_format",
        default="auto",
        choices=["auto", "ndjson", "json", "csv", "parquet", "arrow"],
    )
    commit_flags(sp)
    sp.add_argument("-q", dest="quiet", action="store_true", help="no progress on stderr")
    sp.add_argument("files", nargs="+", metavar="FILE")
    _spark_flags(sp, c.cmd_load, "cmd_load")

    sp = cmd(
        "add",
        c.cmd_add,
        "stage files as objects without committing",
        "  lake add -p logs a.ndjson\n  lake status -p logs\n  lake commit -p logs ID1 ID2\n",
    )
    sp.add_argument("-p", dest="pool", required=True, metavar="POOL[@BRANCH]")
    sp.add_argument(
        "-i",
        dest="input_format",
        default="auto",
        choices=["auto", "ndjson", "json", "csv", "parquet", "arrow"],
    )
    sp.add_argument("files", nargs="+", metavar="FILE")

    sp = cmd("status", c.cmd_status, "list staged, uncommitted work")
    sp.add_argument("-p", dest="pool", required=True, metavar="POOL")
    sp.add_argument("-f", dest="format", default="table", choices=["table", "json", "csv"])

    sp = cmd("commit", c.cmd_commit, "commit staged work in one commit")
    sp.add_argument("-p", dest="pool", required=True, metavar="POOL[@BRANCH]")
    commit_flags(sp)
    sp.add_argument("staged", nargs="+", metavar="STAGED-ID")

    sp = cmd(
        "query",
        c.cmd_query,
        "print the records of a snapshot in pool-key order",
        "  lake query -p logs\n"
        '  lake query -p logs --where "ts > 400 AND ts <= 500" --stats\n'
        "  lake query -p logs@0ujtsYcgvSTl8PAuAdqWYSMnLOv -f json\n"
        "  lake query -p logs --as-of 2026-01-05T10:00:00Z --columns ts,msg -f csv\n",
    )
    sp.add_argument("-p", dest="pool", required=True, metavar="POOL[@REF]")
    sp.add_argument("--as-of", metavar="TIME")
    sp.add_argument("--where", metavar="SQL-EXPR")
    sp.add_argument("--columns", metavar="A,B")
    sp.add_argument("--order", choices=["asc", "desc"])
    sp.add_argument("--stats", action="store_true", help="print what was read, as JSON on stderr")
    sp.add_argument(
        "--limit", type=int, metavar="N", help="print at most N records (stops reading there)"
    )
    sp.add_argument(
        "-f", dest="format", default="table", choices=["table", "json", "csv", "parquet"]
    )
    sp.add_argument(
        "-o", dest="output", metavar="FILE", help="write to FILE (needed for -f parquet)"
    )

    sp = cmd(
        "objects",
        c.cmd_objects,
        "list the live data objects",
        "  lake objects -p logs\n  lake objects -p logs@dev -f json\n  lake objects -p logs --verify\n",
    )
    sp.add_argument("-p", dest="pool", required=True, metavar="POOL[@REF]")
    sp.add_argument("--as-of", metavar="TIME")
    sp.add_argument("-f", dest="format", default="table", choices=["table", "json", "csv"])
    sp.add_argument(
        "--summary",
        action="store_true",
        help="print fragmentation as one JSON line: objects, overlapping_objects, "
        "small_objects, pending_runs, write_amplification",
    )
    sp.add_argument(
        "--verify",
        action="store_true",
        help="read every listed object whole and check it against its commit (size, rows, "
        "columns, checksum); exit 1 if any is corrupt",
    )

    sp = cmd(
        "log",
        c.cmd_log,
        "list commits, newest first",
        "  lake log -p logs\n  lake log -p logs@dev -f json\n",
    )
    sp.add_argument("-p", dest="pool", required=True, metavar="POOL[@BRANCH]")
    sp.add_argument("-f", dest="format", default="table", choices=["table", "json", "csv"])

    sp = cmd(
        "branch",
        c.cmd_branch,
        "list, create or delete branches",
        "  lake branch -p logs\n  lake branch -p logs dev --from main\n  lake branch -p logs -d dev\n",
    )
    sp.add_argument("-p", dest="pool", required=True, metavar="POOL")
    sp.add_argument("name", nargs="?", metavar="NAME")
    sp.add_argument("--from", dest="from_ref", metavar="REF")
    sp.add_argument("-d", dest="delete", metavar="NAME")
    sp.add_argument("-f", dest="format", default="table", choices=["table", "json", "csv"])
    sp = cmd(
        "merge",
        c.cmd_merge,
        "merge branch SOURCE into TARGET in one commit (row-correct after compaction)",
        "  lake merge -p logs dev --into main\n"
        "  lake merge -p logs dev --into main --theirs   # dev's version of contested rows\n"
        "\nThree-way by rows: a row only one branch changed takes that branch's version; a\n"
        "row both changed the same way (both deleted it) is kept once; a row both changed\n"
        "differently (of two copies, one branch deleted one and the other both) is a\n"
        "conflict: the error names the rows' key range and a commit on each side, and\n"
        "nothing is committed. --theirs takes the source's version of those rows, --ours\n"
        "the target's. Compaction on either side is never a conflict.\n",
    )
    sp.add_argument("-p", dest="pool", required=True, metavar="POOL")
    sp.add_argument("source", metavar="SOURCE")
    sp.add_argument("--into", required=True, metavar="TARGET")
    side = sp.add_mutually_exclusive_group()
    side.add_argument(
        "--theirs",
        dest="resolve",
        action="store_const",
        const="theirs",
        help="on conflicting rows, the source branch's change wins",
    )
    side.add_argument(
        "--ours",
        dest="resolve",
        action="store_const",
        const="ours",
        help="on conflicting rows, the target branch's version wins",
    )
    commit_flags(sp)

    sp = cmd(
        "delete",
        c.cmd_delete,
        "delete objects, or rows matching --where, in one commit",
        "  lake delete -p logs 2Cp6AbqYy1bLoRLcTgqhAlYjKeM\n"
        "  lake delete -p logs@dev --where \"user = 'bob' AND ts < '2026-01-01'\"\n",
    )
    sp.add_argument("-p", dest="pool", required=True, metavar="POOL[@BRANCH]")
    sp.add_argument("ids", nargs="*", metavar="OBJECT-ID")
    sp.add_argument(
        "--where", metavar="SQL-EXPR", help="delete the rows matching this SQL expression"
    )
    sp.add_argument(
        "--strict",
        action="store_true",
        help="with --where: fail with `empty transaction` when no row matches "
        "(default: print `no rows matched`, exit 0)",
    )
    commit_flags(sp)

    sp = cmd(
        "revert",
        c.cmd_revert,
        "undo one commit's rows in a new commit (row-correct after compaction)",
        "  lake revert -p logs 2Cp6AbqYy1bLoRLcTgqhAlYjKeM\n"
        "\nRows the commit removed come back and rows it added leave, wherever compaction\n"
        "moved them since. Reverting a revert re-applies the original; reverting a merge\n"
        "removes what it brought in; a compaction or an already-reverted commit has nothing\n"
        "to revert (empty transaction).\n",
    )
    sp.add_argument("-p", dest="pool", required=True, metavar="POOL[@BRANCH]")
    sp.add_argument("commit", metavar="COMMIT-ID")
    commit_flags(sp)
    _add_maintenance(cmd)
    add_inspect_commands(cmd)
    cc.add_catalog_commands(sub, cmd)
    fill_help(p)
    return p


def _add_maintenance(cmd: Any) -> None:
    from lake_core.cli import maintenance_commands as m

    sp = cmd(
        "compact",
        m.cmd_compact,
        "LSM-merge the given objects, or what the policy picks",
        "  lake compact -p logs\n  lake compact -p logs@dev ID1 ID2\n",
    )
    sp.add_argument("-p", dest="pool", required=True, metavar="POOL[@BRANCH]")
    sp.add_argument("ids", nargs="*", metavar="OBJECT-ID")
    m.add_lock_timeout(sp)
    _spark_flags(sp, m.cmd_compact, "cmd_compact")

    sp = cmd(
        "retain",
        m.cmd_retain,
        "commit the removal of data older than DURATION (by a timestamp pool key or a "
        "day/month/year partitioning)",
        "  lake retain -p logs --older-than 90d\n  lake retain -p logs@dev --older-than 12h\n",
    )
    sp.add_argument("-p", dest="pool", required=True, metavar="POOL[@BRANCH]")
    sp.add_argument(
        "--older-than",
        required=True,
        metavar="DURATION",
        help="remove rows whose time is before now minus this, e.g. 90d, 12h",
    )
    m.add_lock_timeout(sp)

    sp = cmd(
        "cleanup",
        m.cmd_cleanup,
        "delete tombstoned and orphaned files past the grace period (all branches, staged work)",
        "  lake cleanup -p logs --grace 7d --dry-run\n  lake cleanup -p logs --grace 2h\n"
        "  lake vacate -p logs --before 2026-01-01T00:00:00Z && lake cleanup -p logs --grace 0\n"
        "  lake cleanup -p logs --grace 1d --spark    # deletes spread over Spark tasks\n",
    )
    sp.add_argument("-p", dest="pool", required=True, metavar="POOL")
    sp.add_argument(
        "--grace",
        default="7d",
        metavar="DURATION",
        help="keep deleted files younger than this, e.g. 0, 2h, 7d (default 7d); files no "
        "commit references are always kept for at least 24h (loads in flight)",
    )
    sp.add_argument("--dry-run", action="store_true", help="report what would go; delete nothing")
    sp.add_argument(
        "-f",
        dest="format",
        default="table",
        choices=["table", "json"],
        help="table: readable lines; json: one object with counts and raw byte sizes",
    )
    m.add_lock_timeout(sp)
    _spark_flags(sp, m.cmd_cleanup, "cmd_cleanup")

    sp = cmd(
        "vacate",
        m.cmd_vacate,
        "cut history older than TIME on every branch",
        "  lake vacate -p logs --before 2026-01-01T00:00:00Z\n",
    )
    sp.add_argument("-p", dest="pool", required=True, metavar="POOL")
    sp.add_argument("--before", required=True, metavar="TIME")
    m.add_lock_timeout(sp)

    sp = cmd(
        "purge",
        m.cmd_purge,
        "physically delete a commit's data now (danger zone)",
        "  lake purge -p logs 2Cp6AbqYy1bLoRLcTgqhAlYjKeM --force\n",
    )
    sp.add_argument("-p", dest="pool", required=True, metavar="POOL")
    sp.add_argument("commit", metavar="COMMIT-ID")
    sp.add_argument("--force", action="store_true")
    m.add_lock_timeout(sp)

    sp = cmd(
        "partitions",
        m.cmd_partitions,
        "list partitions, one a line, value first",
        "  lake partitions -p logs\n",
    )
    sp.add_argument("-p", dest="pool", required=True, metavar="POOL[@REF]")
    sp.add_argument("--as-of", metavar="TIME")
    sp.add_argument("-f", dest="format", default="table", choices=["table", "json"])

    sp = cmd(
        "drop-partition",
        m.cmd_drop_partition,
        "drop a partition in one metadata-only commit",
        "  lake drop-partition -p logs 2026-01-05\n",
    )
    sp.add_argument("-p", dest="pool", required=True, metavar="POOL[@BRANCH]")
    sp.add_argument("value", metavar="VALUE")
    m.add_lock_timeout(sp)


def _spark_flags(sp: argparse.ArgumentParser, local: Any, name: str) -> None:
    """``--spark`` / ``--spark-master``: run the command on Spark. ``lake_spark`` (and pyspark)
    is imported only then; lake_core itself knows nothing of Spark."""
    sp.add_argument("--spark", action="store_true", help="run on Spark (local[*] by default)")
    sp.add_argument(
        "--spark-master",
        metavar="URL",
        help="Spark master, e.g. spark://host:7077 (implies --spark; else $LAKE_SPARK_MASTER)",
    )

    def run(args: argparse.Namespace) -> Any:
        if not (args.spark or args.spark_master):
            return local(args)
        try:
            spark_cli = importlib.import_module("lake_spark.cli")
        except ImportError as e:
            raise UsageError(
                f"--spark needs pyspark: pip install 'lakepool[spark]' ({e})"
            ) from None
        return getattr(spark_cli, name)(args)

    sp.set_defaults(func=run)


def _quiet_libraries() -> None:
    """Libraries that log (kazoo retries a dead ZooKeeper with a warning per attempt) would
    print through logging's last-resort handler: on the CLI their failure reaches the user as
    the one ``error:`` line instead. A NullHandler on their logger keeps the last resort out
    without touching the root logger an embedding application may have configured."""
    for name in ("kazoo",):
        logger = logging.getLogger(name)
        if not logger.handlers:
            logger.addHandler(logging.NullHandler())
        logger.propagate = False


def unknown_commit_hint(e: CommitStateUnknownError) -> str:
    """How to resolve an unknown commit outcome: look for the commit id on the branch."""
    return (
        f"run `lake log -p {e.pool}@{e.branch}` to see whether commit {e.commit_id} landed "
        f"(its data was kept; if it did not land, run the command again)"
    )


def main(argv: Sequence[str] | None = None) -> int:
    _quiet_libraries()
    parser = build_parser()
    args = _parse(parser, list(sys.argv[1:] if argv is None else argv))
    with warnings.catch_warnings():
        warnings.simplefilter("always", LakeWarning)
        shown = warnings.showwarning

        def show(message: Any, category: Any, *rest: Any, **kw: Any) -> None:
            if issubclass(category, LakeWarning):
                sys.stderr.write(f"warning: {message}\n")
            else:
                shown(message, category, *rest, **kw)

        warnings.showwarning = show
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    """Run the command; map errors to one ``error: …`` line and the exit status."""
    try:
        result = args.func(args)
        sys.stdout.flush()  # inside the try: a closed pipe surfaces here, not at exit
        return int(result or 0)
    except UsageError as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    except CommitStateUnknownError as e:
        hint = f"; {unknown_commit_hint(e)}" if e.pool and e.branch else ""
        sys.stderr.write(f"error: {e}{hint}\n")
        return 1
    except LakeError as e:
        sys.stderr.write(f"error: {e}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("error: interrupted\n")
        return 1
    except BrokenPipeError:
        # The reader went away (`lake query … | head`): stop quietly. Point stdout at
        # /dev/null so the interpreter's final flush does not complain about the pipe.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass  # stdout is not a real file (tests capture it)
        return 0


if __name__ == "__main__":
    raise SystemExit(main())
