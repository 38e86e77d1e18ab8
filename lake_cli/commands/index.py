"""``lake index create|ls|drop|apply``: search-index rules in the catalog, and the index entries
of a pool (see :mod:`lake_core.indexes`).

Rules are catalog versions like pools and views (``lake catalog rollback`` restores them).
Loads and compactions of a covered pool index their new objects in the same commit; ``apply``
indexes the objects already live (or, with ``--remove``, takes a rule's entries out) in one
commit of its own, which ``lake log`` shows with its index entry counts.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from lake_cli.context import LakeContext, pass_lake, say
from lake_cli.options import (
    argument,
    complete_pools,
    format_option,
    option,
    pool_option,
    spark_options,
)
from lake_cli.parsing import Choice, LakeGroup, Number
from lake_core.errors import UsageError
from lake_core.names import MAIN

if TYPE_CHECKING:
    from lake_core.indexes.apply import ApplyResult
    from lake_core.indexes.rules import IndexRule

#: ``lake index ls -p``: an entry built for the current definition of a rule covering the pool,
#: one of a dropped (or re-created) rule, and a live object a covering rule has not indexed.
INDEXED, STALE, UNINDEXED = "indexed", "stale", "unindexed"


@click.group(
    "index",
    cls=LakeGroup,
    help="search-index rules and the index entries of pools: create, ls, drop, apply",
    short_help="search indexes: create, ls, drop, apply",
    epilog="examples:\n"
    "  lake index create by_user --field user\n"
    "  lake index create ops.by_trace --field trace_id --kind bloom --fpp 0.01 --pool logs\n"
    "  lake index apply -p logs by_user\n"
    "  lake index ls -p logs\n"
    "  lake index drop by_user\n",
)
def index() -> None:
    pass


def _pool_names(rule: str, pools: tuple[str, ...]) -> tuple[str, ...]:
    """``--pool`` values as names in the rule's namespace: ``NAME``, or ``NS.NAME`` of the
    rule's own namespace ``NS``."""
    from lake_core.indexes.rules import parse_rule_name  # deferred: protobuf (lake --help)

    namespace = parse_rule_name(rule).namespace
    out = []
    for p in pools:
        ns, dot, name = p.partition(".")
        if dot:
            if ns != namespace:
                raise UsageError(
                    f"--pool {p}: index rule {rule} covers pools of namespace {namespace} only"
                )
            p = name
        out.append(p)
    return tuple(out)


@index.command(
    "create",
    help="create index rule RULE on FIELD of the pools of its namespace (all, or those of "
    "--pool); loads and compactions index new objects from then on",
    short_help="create an index rule",
    epilog="examples:\n"
    "  lake index create by_user --field user\n"
    "  lake index create ops.by_trace --field trace_id --kind bloom --fpp 0.001\n"
    "  lake index create by_user --field user --pool logs --pool audit -f json\n"
    "\n"
    "A lookup reads the row groups an index points it to: for values scattered over the pool\n"
    "key, create the pool with a finer row group (lake create … --seek-stride 1MB).\n",
)
@argument("rule", "RULE", "the rule: NAME or NAMESPACE.NAME (it covers pools of that namespace)")
@option("--field", required=True, metavar="FIELD", help="the top-level field to index")
@option(
    "--kind",
    default="exact",
    type=Choice("exact", "bloom"),
    help="exact: each value's row groups (default); bloom: per row group, maybe/no",
)
@option(
    "--fpp",
    type=Number(float),
    metavar="RATE",
    help="the bloom kind's false-positive rate, from 1e-06 up to 0.5 (default 0.01)",
)
@option(
    "--pool",
    "pools",
    multiple=True,
    metavar="POOL",
    help="cover only this pool of the namespace (repeatable; default: every pool there)",
)
@format_option("table", "json", help="table: one line; json: the rule and the catalog version")
@pass_lake
def index_create(
    lk: LakeContext,
    rule: str,
    field: str,
    kind: str,
    fpp: float | None,
    pools: tuple[str, ...],
    fmt: str,
) -> None:
    from lake_core.indexes.rules import DEFAULT_FPP  # deferred: protobuf (lake --help)

    if fpp is not None and kind != "bloom":
        raise UsageError("--fpp applies to --kind bloom only")
    created, version = lk.lake().create_index_rule(
        rule,
        field,
        kind,
        fpp=DEFAULT_FPP if fpp is None else fpp,
        pools=_pool_names(rule, pools),
    )
    if fmt == "json":
        say(json.dumps({**_rule_json(created), "catalog_version": version}))
        return
    say(f"index rule {created.full_name} created (catalog version {version})")


def _rule_json(rule: IndexRule) -> dict[str, Any]:
    from lake_core.clock import to_iso

    return {
        "name": rule.full_name,
        "id": rule.id,
        "field": rule.field,
        "kind": rule.kind,
        "fpp": rule.fpp if rule.kind == "bloom" else None,
        "pools": list(rule.pools),
        "created": to_iso(rule.created) if rule.created else None,
    }


@index.command(
    "ls",
    help="list index rules; with -p, the pool's index entries and the live objects a rule "
    "covering it has not indexed (status unindexed)",
    short_help="list index rules, or a pool's index entries",
    epilog="examples:\n"
    "  lake index ls\n  lake index ls -f json\n"
    "  lake index ls -p logs\n  lake index ls -p logs@dev -f csv\n",
)
@option(
    "-p",
    "pool",
    metavar="POOL[@REF]",
    help="list this pool's index entries at @BRANCH or @COMMIT-ID (default main)",
    shell_complete=complete_pools,
)
@format_option("table", "json", "csv")
@pass_lake
def index_ls(lk: LakeContext, pool: str | None, fmt: str) -> None:
    from lake_cli.output import write_records  # deferred: pyarrow, numpy (lake --help)

    if pool is None:
        rules = lk.lake().index_rules()
        rows = []
        for r in rules:
            row = _rule_json(r)
            if fmt != "json":
                # Text: the pools comma-separated, "*" for every pool of the namespace.
                row["pools"] = ",".join(r.pools) or "*"
                row["created"] = r.created
            rows.append(row)
        columns = ["name", "field", "kind", "fpp", "pools", "created"]
        write_records(rows, fmt, columns=columns + ["id"] if fmt == "json" else columns)
        return
    write_records(_entries(lk, pool), fmt, columns=list(_ENTRY_COLUMNS))


_ENTRY_COLUMNS = ("object", "rule", "kind", "field", "index_id", "size", "status")


def _entries(lk: LakeContext, pool: str) -> list[dict[str, Any]]:
    """``lake index ls -p``'s rows: every index entry of the snapshot (indexed or stale), then
    every (object, rule) a covering rule has not indexed, by object and rule."""
    from lake_core.indexes.coverage import is_current, unindexed

    source, ref = lk.pool_ref(pool)
    snap = source.snapshot(source.resolve(ref))
    rules = source.index_rules
    rows = [
        {
            "object": m.object,
            "rule": m.rule,
            "kind": m.kind,
            "field": m.field,
            "index_id": m.id,
            "size": m.size,
            "status": INDEXED if is_current(m, rules) else STALE,
        }
        for m in snap.indexes.values()
    ]
    rows += [
        {
            "object": obj.id,
            "rule": rule.name,
            "kind": rule.kind,
            "field": rule.field,
            "index_id": None,
            "size": None,
            "status": UNINDEXED,
        }
        for obj, rule in unindexed(snap, rules)
    ]
    rows.sort(key=lambda r: (r["object"], r["rule"], r["status"]))
    return rows


@index.command(
    "drop",
    help="drop index rule RULE: new objects are no longer indexed by it (its entries stay "
    "until lake index apply --remove, or their objects go)",
    short_help="drop an index rule",
    epilog="examples:\n  lake index drop by_user\n  lake index drop ops.by_trace\n",
)
@argument("rule", "RULE", "the rule: NAME or NAMESPACE.NAME")
@pass_lake
def index_drop(lk: LakeContext, rule: str) -> None:
    dropped, version = lk.lake().drop_index_rule(rule)
    name = dropped.full_name if dropped is not None else rule
    say(f"index rule {name} dropped (catalog version {version})")


@index.command(
    "apply",
    help="index the live objects (or OBJECT-IDs) of the pool that RULE has not indexed, in one "
    "commit; --remove takes RULE's index entries out instead",
    short_help="index existing objects by a rule (or remove its entries)",
    epilog="examples:\n"
    "  lake index apply -p logs by_user\n"
    "  lake index apply -p logs@dev by_user ID1 ID2 -f json\n"
    "  lake index apply -p logs by_user --remove\n"
    "  lake index apply -p logs by_user --spark     # one Spark task per object\n",
)
@pool_option("POOL[@BRANCH]")
@argument("rule", "RULE", "the rule: NAME or NAMESPACE.NAME (of the pool's namespace)")
@argument(
    "ids",
    "OBJECT-ID",
    "only these live objects (default: every live object)",
    nargs=-1,
    required=False,
)
@option("--remove", is_flag=True, help="remove RULE's index entries (the rule may be dropped)")
@format_option("table", "json", help="table: one line; json: one object of the counts")
@spark_options()
@pass_lake
def index_apply(
    lk: LakeContext,
    pool: str,
    rule: str,
    ids: tuple[str, ...],
    remove: bool,
    fmt: str,
    spark: bool,
    spark_master: str | None,
) -> None:
    from lake_cli.progress import count_progress
    from lake_core.indexes.apply import apply_rule, remove_rule
    from lake_core.indexes.rules import parse_rule_name
    from lake_core.names import PoolName

    target, branch = lk.pool_ref(pool)
    rule_name = parse_rule_name(rule)
    if "." not in rule:  # a bare NAME is the rule of that name in the pool's namespace
        rule_name = PoolName(target.config.name.namespace, rule_name.name)
        rule = str(rule_name)
    object_ids = list(ids) if ids else None
    if remove:
        if rule_name.namespace != target.config.name.namespace:
            raise UsageError(f"index rule {rule_name} does not cover pool {target.name}")
        snap = target.snapshot(target.tip(branch or MAIN))
        held = any(r == rule_name.name for _, r in snap.indexes)
        if not held:
            lk.lake().index_rule(rule)  # NotFoundError for a rule that is not there at all
        result = remove_rule(target, rule_name.name, object_ids, branch=branch or MAIN)
    elif spark or spark_master:
        from lake_cli.commands import spark as on_spark

        found = lk.lake().index_rule(rule)  # errors before Spark starts
        result = on_spark.index_apply(target, found, object_ids, branch or MAIN, spark_master)
    else:
        found = lk.lake().index_rule(rule)
        with count_progress("indexing objects", sys.stderr.isatty()) as progress:
            result = apply_rule(target, found, object_ids, branch=branch or MAIN, progress=progress)
    if fmt == "json":
        say(json.dumps(result.to_json()))
        return
    say(_applied(result, remove))


def _applied(result: ApplyResult, remove: bool) -> str:
    if result.commit is None:
        return "nothing to remove" if remove else "nothing to index"
    if remove:
        return (
            f"removed {result.removed} index entries of {result.rule} in commit {result.commit.id}"
        )
    return (
        f"indexed {result.indexed} object(s) by {result.rule} ({result.bytes:,} bytes) "
        f"in commit {result.commit.id}"
    )
