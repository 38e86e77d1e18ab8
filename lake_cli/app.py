"""The ``lake`` group, dispatch and error reporting.

Errors print one line ``error: …`` on stderr; exit 1 for a failed operation, 2 for a usage
error (:mod:`lake_cli.parsing` words those of the command line). Secrets never reach
messages: S3 errors carry bucket, key and error code only.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Sequence
from typing import Any

import click

from lake_cli.commands import all_commands
from lake_cli.context import LakeContext
from lake_cli.parsing import COMMAND_PATH, LakeGroup
from lake_core.errors import (
    CommitStateUnknownError,
    LakeError,
    LakeWarning,
    NotServedError,
    UsageError,
)

#: The environment variable of click's shell completion (``_LAKE_COMPLETE=bash_source lake``).
COMPLETE_VAR = "_LAKE_COMPLETE"


class _Lake(LakeGroup):
    """``lake`` itself: runs the command and maps its failure to one line and the exit status
    (inside click's invocation, so click never sees an operation's exception)."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            result = super().invoke(ctx)
            sys.stdout.flush()  # inside the try: a closed pipe surfaces here, not at exit
            return int(result or 0)
        except UsageError as e:
            sys.stderr.write(f"error: {e}\n")
            return 2
        except CommitStateUnknownError as e:
            hint = f"; {unknown_commit_hint(e)}" if e.pool and e.branch else ""
            sys.stderr.write(f"error: {e}{hint}\n")
            return 1
        except NotServedError as e:
            # A method the service lacks is named as the command that needed it.
            command = ctx.meta.get(COMMAND_PATH)
            shown = e.naming(command) if e.method and command else e
            sys.stderr.write(f"error: {shown}\n")
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


@click.group(
    "lake",
    cls=_Lake,
    help="A git-like data lake of pools on local disk or S3.",
    epilog=(
        "examples:\n"
        "  export LAKE_ROOT=/tmp/lake\n"
        "  lake init\n"
        "  lake create logs --orderby ts:desc\n"
        "  lake load -p logs events.ndjson -m 'first batch'\n"
        "  lake query -p logs --where \"ts > '2026-01-05'\" -f json\n"
        "  lake log -p logs\n"
        "\n"
        "shell completion (bash; zsh and fish alike with zsh_source, fish_source):\n"
        '  eval "$(_LAKE_COMPLETE=bash_source lake)"\n'
    ),
)
@click.option(
    "--lake",
    "uri",
    metavar="URI",
    help="lake location: path, file://…, s3://bucket/prefix or http(s)://HOST:PORT of `lake serve` (else $LAKE_ROOT)",
)
@click.option("--zk", metavar="HOST:PORT[,…]", help="ZooKeeper for locks (else $LAKE_ZOOKEEPER)")
@click.option(
    "--token",
    metavar="T",
    help="bearer token for a lake served by `lake serve` (--lake http://HOST:PORT; "
    "else $LAKE_TOKEN)",
)
@click.pass_context
def cli(ctx: click.Context, uri: str | None, zk: str | None, token: str | None) -> None:
    ctx.obj = LakeContext(uri=uri, zookeeper=zk, token=token or os.environ.get("LAKE_TOKEN"))


for _command in all_commands():
    cli.add_command(_command)


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
    """Run ``lake`` with ``argv`` (default: the process's arguments) and return the exit
    status. As argparse did, a usage error or ``--help`` raises ``SystemExit`` (2 or 0)."""
    _quiet_libraries()
    args = list(sys.argv[1:] if argv is None else argv)
    with warnings.catch_warnings():
        warnings.simplefilter("always", LakeWarning)
        shown = warnings.showwarning

        def show(message: Any, category: Any, *rest: Any, **kw: Any) -> None:
            if issubclass(category, LakeWarning):
                sys.stderr.write(f"warning: {message}\n")
            else:
                shown(message, category, *rest, **kw)

        warnings.showwarning = show
        try:
            result = cli.main(
                args, prog_name="lake", complete_var=COMPLETE_VAR, standalone_mode=False
            )
        except click.exceptions.Exit as e:
            raise SystemExit(e.exit_code) from None
        except click.ClickException as e:
            e.show()
            raise SystemExit(e.exit_code) from None
        return result if isinstance(result, int) else 0


if __name__ == "__main__":
    raise SystemExit(main())
