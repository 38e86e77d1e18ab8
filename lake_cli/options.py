"""Options several commands share, as decorators, each with its one help line.

A command may reword the help of a shared option (``help=``) where its meaning there is
narrower, e.g. ``-p`` of ``lake load`` names the branch committed to.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import click
from click.shell_completion import CompletionItem

from lake_cli.context import parse_meta
from lake_cli.parsing import Arg, Choice, Number, Opt

F = TypeVar("F", bound=Callable[..., Any])

#: ``-p`` help by the form of its value.
POOL_HELP = {
    "POOL": "the pool: NAME or NAMESPACE.NAME",
    "POOL[@BRANCH]": "the pool, optionally @BRANCH (default main)",
    "POOL[@REF]": "the pool, optionally @BRANCH or @COMMIT-ID (default main)",
}
INPUT_FORMATS = ("auto", "ndjson", "json", "csv", "parquet", "arrow")
FORMAT_HELP = "output format (default table; json is one object a line)"
AS_OF_HELP = "as the branch was at this ISO 8601 time, e.g. 2026-01-05T10:00:00Z"
WHERE_HELP = "a SQL boolean expression over the columns, e.g. \"ts > '2026-01-05'\""


def option(*decls: str, **kw: Any) -> Callable[[F], F]:
    """``click.option`` with ``lake``'s parsing rules (see :mod:`lake_cli.parsing`)."""
    return click.option(*decls, cls=Opt, **kw)


def argument(name: str, metavar: str, help: str, **kw: Any) -> Callable[[F], F]:
    """A positional argument; ``nargs=-1`` takes the rest, ``required=False`` may be left out."""
    return click.argument(name, cls=Arg, metavar=metavar, help=help, **kw)


def _stack(*decorators: Callable[[F], F]) -> Callable[[F], F]:
    def apply(f: F) -> F:
        for d in reversed(decorators):
            f = d(f)
        return f

    return apply


def complete_pools(
    ctx: click.Context, param: click.Parameter, incomplete: str
) -> list[CompletionItem]:
    """Shell completion of ``-p``: the pools of the lake ``--lake`` (or ``LAKE_ROOT``) names.
    A lake that cannot be opened completes nothing: completion never prints an error."""
    from lake_core.config import LakeConfig
    from lake_core.lake import Lake

    try:
        uri = ctx.find_root().params.get("uri")
        lake = Lake.open(LakeConfig.resolve(uri=uri))
        names = sorted(str(p.name) for p in lake.pools())
    except Exception:  # any failure: no suggestions, never a traceback
        return []
    return [CompletionItem(n) for n in names if n.startswith(incomplete)]


def pool_option(metavar: str, help: str | None = None) -> Callable[[F], F]:
    """``-p POOL``, ``-p POOL[@BRANCH]`` or ``-p POOL[@REF]`` (required)."""
    return option(
        "-p",
        "pool",
        required=True,
        metavar=metavar,
        help=help or POOL_HELP[metavar],
        shell_complete=complete_pools,
    )


def format_option(*choices: str, help: str = FORMAT_HELP) -> Callable[[F], F]:
    """``-f FORMAT`` where output is data (default ``table``)."""
    return option("-f", "fmt", default="table", type=Choice(*choices), help=help)


def as_of_option(help: str = AS_OF_HELP) -> Callable[[F], F]:
    return option("--as-of", metavar="TIME", help=help)


def where_option(help: str = WHERE_HELP) -> Callable[[F], F]:
    return option("--where", metavar="SQL-EXPR", help=help)


def input_format_option() -> Callable[[F], F]:
    return option(
        "-i",
        "input_format",
        default="auto",
        type=Choice(*INPUT_FORMATS),
        help="input format (default auto: by extension, else by content)",
    )


def commit_options() -> Callable[[F], F]:
    """``-m MSG``, ``--user NAME``, ``--meta JSON``: what a new commit records."""
    return _stack(
        option("-m", "message", default="", metavar="MSG", help="commit message"),
        option("--user", metavar="NAME", help="commit author (else $LAKE_USER or the OS user)"),
        option(
            "--meta",
            metavar="JSON",
            callback=_meta,
            help='a JSON object stored in the commit, e.g. \'{"source": "demo"}\'',
        ),
    )


def _meta(ctx: click.Context, param: click.Parameter, value: str | None) -> Any:
    """``--meta`` parsed while the command line is read, so a bad one is a usage error
    before any lake is opened or input read; the command gets the object."""
    return parse_meta(value)


def lock_timeout_option() -> Callable[[F], F]:
    return option(
        "--lock-timeout",
        type=Number(float),
        default=600.0,
        metavar="SECONDS",
        help="how long to wait for the pool's maintenance lock (default 600)",
    )


def spark_options() -> Callable[[F], F]:
    """``--spark`` / ``--spark-master URL``: run the command on Spark (see
    :mod:`lake_cli.commands.spark`)."""
    return _stack(
        option("--spark", is_flag=True, help="run on Spark (local[*] by default)"),
        option(
            "--spark-master",
            metavar="URL",
            help="Spark master, e.g. spark://host:7077 (implies --spark; else $LAKE_SPARK_MASTER)",
        ),
    )


def command(
    name: str, help: str, examples: str, **kw: Any
) -> Callable[[Callable[..., Any]], click.Command]:
    """A ``lake`` command: ``help`` is its one-line description (also in ``lake --help``),
    ``examples`` its epilog, printed as written."""
    from lake_cli.parsing import LakeCommand

    return click.command(
        name,
        cls=LakeCommand,
        help=help,
        short_help=help,
        epilog=f"examples:\n{examples}",
        **kw,
    )
