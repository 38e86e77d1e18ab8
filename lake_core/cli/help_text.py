"""Help for options that were registered without any: one table, so every option of every
command says what it does (the README promises it) without repeating the same sentence at
each ``add_argument``. An option's own ``help=`` always wins; ``tests/test_cli_help.py``
fails on any option or command this leaves bare.
"""

from __future__ import annotations

import argparse

#: (command, dest) → help: wording that depends on the command.
_BY_COMMAND: dict[tuple[str, str], str] = {
    ("create", "pool"): "name of the new pool: NAME or NAMESPACE.NAME",
    ("drop", "pool"): "the pool to drop",
    ("drop", "force"): "really drop it (required)",
    ("load", "pool"): "the pool, optionally @BRANCH to commit to (default main)",
    (
        "load",
        "files",
    ): "files to load (ndjson, json, csv, parquet, arrow; .gz read too); - is stdin",
    ("add", "pool"): "the pool, optionally @BRANCH the work is for (default main)",
    (
        "add",
        "files",
    ): "files to stage (ndjson, json, csv, parquet, arrow; .gz read too); - is stdin",
    ("status", "pool"): "the pool whose staged work to list",
    ("commit", "pool"): "the pool, optionally @BRANCH to commit to (default main)",
    ("commit", "staged"): "ids printed by lake add",
    ("query", "pool"): "the pool, optionally @BRANCH or @COMMIT-ID (default main)",
    ("query", "columns"): "only these columns, comma-separated, in this order",
    ("query", "order"): "key order of the output (default: the pool's)",
    ("query", "output"): "write to FILE instead of stdout (required for -f parquet)",
    ("objects", "pool"): "the pool, optionally @BRANCH or @COMMIT-ID (default main)",
    ("log", "pool"): "the pool, optionally @BRANCH or @COMMIT-ID to start from (default main)",
    ("branch", "pool"): "the pool",
    ("branch", "name"): "create a branch of this name (without NAME: list branches)",
    ("branch", "from_ref"): "branch or commit id the new branch starts at (default main)",
    ("branch", "delete"): "delete the branch NAME (its commits stay until cleanup)",
    ("merge", "pool"): "the pool",
    ("merge", "source"): "the branch whose changes to bring in",
    ("merge", "into"): "the branch to commit the merge to",
    ("delete", "pool"): "the pool, optionally @BRANCH to commit to (default main)",
    ("delete", "ids"): "ids of live data objects to delete (see lake objects)",
    ("delete", "where"): "delete the records for which this SQL expression is true",
    ("revert", "pool"): "the pool, optionally @BRANCH to commit to (default main)",
    ("revert", "commit"): "id of the commit to undo (see lake log)",
    ("compact", "pool"): "the pool, optionally @BRANCH (default main)",
    ("compact", "ids"): "compact exactly these objects (default: what the policy picks)",
    ("cleanup", "pool"): "the pool (every branch and staged work is considered)",
    ("cleanup", "grace"): "keep unreferenced files younger than this, e.g. 0, 2h, 7d",
    ("cleanup", "dry_run"): "report what would be removed, remove nothing",
    ("vacate", "pool"): "the pool (every branch is cut)",
    ("vacate", "before"): "cut history older than this ISO 8601 time",
    ("purge", "pool"): "the pool",
    ("purge", "commit"): "id of the commit whose data to delete now",
    ("purge", "force"): "really delete the data (required)",
    ("partitions", "pool"): "the pool, optionally @BRANCH or @COMMIT-ID (default main)",
    ("drop-partition", "pool"): "the pool, optionally @BRANCH to commit to (default main)",
    ("drop-partition", "value"): "the partition value, as lake partitions prints it",
    ("rollback", "version"): "the catalog version to restore (see lake catalog log)",
    ("export", "dest"): "directory or s3:// URI to copy the catalog to",
}

#: dest → help: wording shared by every command that has the option.
_BY_DEST: dict[str, str] = {
    "format": "output format (default table; json is one object a line)",
    "input_format": "input format (default auto: by extension, else by content)",
    "as_of": "as the branch was at this ISO 8601 time, e.g. 2026-01-05T10:00:00Z",
    "where": "a SQL boolean expression over the columns, e.g. \"ts > '2026-01-05'\"",
    "orderby": "the pool key: fields (distinct column names) and direction (default ts:desc)",
    "partition_by": "partition objects by a column or day(ts)/month(ts)/year(ts)",
    "target_size": "object size to aim for, e.g. 16KB, 64MB (default 128MB)",
}

#: metavar → help: the ``-p`` forms every command shares.
_BY_METAVAR: dict[str, str] = {
    "POOL": "the pool: NAME or NAMESPACE.NAME",
    "POOL[@BRANCH]": "the pool, optionally @BRANCH (default main)",
    "POOL[@REF]": "the pool, optionally @BRANCH or @COMMIT-ID (default main)",
}

_EXAMPLES: dict[str, str] = {
    "status": "  lake add -p logs a.ndjson\n  lake status -p logs\n  lake status -p logs -f json\n",
    "commit": "  lake commit -p logs 2Cp6AbqYy1bLoRLcTgqhAlYjKeM -m 'reviewed batch'\n"
    "  lake commit -p logs@dev ID1 ID2\n",
}


def fill_help(parser: argparse.ArgumentParser, command: str = "") -> None:
    """Give every option of ``parser`` and its subcommands a help text, and every command
    without examples the ones above."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                if name in _EXAMPLES and not sub.epilog:
                    sub.epilog = f"examples:\n{_EXAMPLES[name]}"
                fill_help(sub, name)
        elif action.help is None:
            action.help = (
                _BY_COMMAND.get((command, action.dest))
                or _BY_DEST.get(action.dest)
                or _BY_METAVAR.get(str(action.metavar))
            )
