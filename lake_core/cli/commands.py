"""One function per ``lake`` command. Each resolves its settings at the edge, calls lake_core,
and prints per the contract (the last line of a committing command is ``<id> committed``)."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterator
from datetime import datetime
from typing import Any

import pyarrow as pa

from lake_core.cli import report
from lake_core.cli.progress import batch_progress
from lake_core.clock import parse_iso, to_iso
from lake_core.commit import Add
from lake_core.config import LakeConfig
from lake_core.errors import NoRowsMatchedError, UsageError
from lake_core.lake import Lake
from lake_core.names import split_ref
from lake_core.output import write_records
from lake_core.pool import MAIN, Pool
from lake_core.textcols import jsonable
from lake_core.units import format_size, human_size, parse_size


def _config(args: argparse.Namespace, user: str | None = None) -> LakeConfig:
    return LakeConfig.resolve(uri=args.lake, zookeeper=args.zk, user=user)


def _lake(args: argparse.Namespace, user: str | None = None) -> Lake:
    return Lake.open(_config(args, user))


def _pool_ref(args: argparse.Namespace, user: str | None = None) -> tuple[Pool, str | None]:
    name, ref = split_ref(args.pool)
    return _lake(args, user).pool(name), ref


def _time(text: str | None) -> datetime | None:
    if text is None:
        return None
    try:
        return parse_iso(text)
    except ValueError:
        raise UsageError(
            f"invalid time {text!r}: use ISO 8601, e.g. 2026-01-05T10:00:00Z"
        ) from None


def _meta(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"--meta is not valid JSON: {e}") from None
    except RecursionError:
        raise UsageError("--meta is nested too deeply") from None


def _say(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def cmd_init(args: argparse.Namespace) -> None:
    config = _config(args)
    Lake.init(config)
    _say(f"initialized lake at {config.uri}")


def cmd_create(args: argparse.Namespace) -> None:
    lake = _lake(args)
    pool = lake.create_pool(
        args.pool,
        args.orderby,
        target_size=parse_size(args.target_size),
        seek_stride=parse_size(args.seek_stride),
        partition_by=args.partition_by,
        schema_mode=args.schema_mode,
    )
    _say(f"pool {pool.name} created")


def cmd_ls(args: argparse.Namespace) -> None:
    from lake_core.cli.catalog_commands import pools_for_ls

    rows = [
        {
            "name": str(p.name),
            "id": p.id,
            "key": ",".join(p.key.fields),
            "order": p.key.order,
            "target_size": p.target_size if args.format != "table" else human_size(p.target_size),
            "created": p.created,
            "schema_mode": p.schema_mode,
        }
        for p in pools_for_ls(_lake(args), args)
    ]
    write_records(
        rows,
        args.format,
        columns=["name", "id", "key", "order", "target_size", "created", "schema_mode"],
    )


def cmd_drop(args: argparse.Namespace) -> None:
    if not args.force:
        raise UsageError(f"dropping pool {args.pool} needs --force")
    config = _lake(args).drop_pool(args.pool)
    _say(f"pool {config.name} dropped")


def _progress(quiet: bool) -> Any:
    if quiet or not sys.stderr.isatty():
        return None
    state = {"objects": 0, "rows": 0, "bytes": 0}

    def on_object(obj: Any) -> None:
        state["objects"] += 1
        state["rows"] += obj.count
        state["bytes"] += obj.size
        sys.stderr.write(
            f"\rwrote {state['objects']} objects, {state['rows']} rows, "
            f"{format_size(state['bytes'])}"
        )
        sys.stderr.flush()

    return on_object


def cmd_load(args: argparse.Namespace) -> None:
    from lake_core.loading import load

    pool, branch = _pool_ref(args, args.user)
    on_object = _progress(args.quiet)
    commit = load(
        pool,
        args.files,
        branch or MAIN,
        fmt=args.input_format,
        message=args.message,
        meta=_meta(args.meta),
        on_object=on_object,
    )
    if on_object is not None:
        sys.stderr.write("\n")
    _say(report.loaded(commit))
    _say(f"{commit.id} committed")


def cmd_add(args: argparse.Namespace) -> None:
    from lake_core.loading import stage

    pool, branch = _pool_ref(args)
    staged = stage(pool, args.files, branch or MAIN, fmt=args.input_format)
    for o in staged.objects:
        _say(f"{o.id} object ({o.count:,} records, {human_size(o.size)})")
    _say(f"{staged.id} staged")


def cmd_status(args: argparse.Namespace) -> None:
    from lake_core.loading import list_staged

    pool, _ = _pool_ref(args)
    rows = [
        {
            "id": s.id,
            "created": s.created,
            "objects": len(s.objects),
            "records": sum(o.count for o in s.objects),
            "sources": ", ".join(s.sources),
        }
        for s in list_staged(pool)
    ]
    if not rows and args.format == "table":
        _say("nothing staged")
        return
    write_records(rows, args.format, columns=["id", "created", "objects", "records", "sources"])


def cmd_commit(args: argparse.Namespace) -> None:
    from lake_core.loading import commit_staged

    pool, branch = _pool_ref(args, args.user)
    commit = commit_staged(
        pool, args.staged, branch or MAIN, message=args.message, meta=_meta(args.meta)
    )
    _say(f"{commit.id} committed")


def _snapshot_at(args: argparse.Namespace) -> tuple[Pool, Any]:
    pool, ref = _pool_ref(args)
    commit_id = pool.resolve(ref, _time(getattr(args, "as_of", None)))
    return pool, pool.snapshot(commit_id)


def cmd_query(args: argparse.Namespace) -> None:
    pool, ref = _pool_ref(args)
    columns = [c.strip() for c in args.columns.split(",")] if args.columns else None
    if args.limit is not None and args.limit < 0:
        raise UsageError("--limit must be 0 or more")
    scan = pool.scan(
        ref, as_of=_time(args.as_of), where=args.where, columns=columns, order=args.order
    )
    batches: Iterator[pa.RecordBatch] = scan.batches()
    if args.limit is not None:
        batches = _limited(batches, args.limit)
    # Progress only for a person watching: a terminal on stderr, and not when the records
    # themselves go to that terminal (they would interleave with the bar).
    show = sys.stderr.isatty() and (args.output is not None or not sys.stdout.isatty())
    with batch_progress(batches, len(scan.objects), lambda: scan.stats.objects_read, show) as shown:
        reader = pa.RecordBatchReader.from_batches(scan.out_schema, shown)
        if args.output is not None and args.format != "parquet":
            with open(args.output, "w", encoding="utf-8", newline="") as f:
                write_records(reader, args.format, out=f)
        else:
            write_records(reader, args.format, path=args.output)
    if args.stats:
        sys.stderr.write(json.dumps(scan.stats.to_json()) + "\n")


def _limited(batches: Iterator[pa.RecordBatch], limit: int) -> Iterator[pa.RecordBatch]:
    """The first ``limit`` records; stops reading once it has them."""
    left = limit
    for batch in batches:
        if left <= 0:
            return
        if batch.num_rows > left:
            batch = batch.slice(0, left)
        left -= batch.num_rows
        yield batch


def _bound(obj: Any, pool: Pool, which: str) -> Any:
    bound = obj.decoded_bound(pool.config.key.fields, which)
    if bound is None:
        return None
    return bound[0] if len(bound) == 1 else bound


def cmd_objects(args: argparse.Namespace) -> None:
    if args.summary:
        from lake_core.maintenance import fragmentation

        pool, ref = _pool_ref(args)
        _say(json.dumps(fragmentation(pool, ref or MAIN).to_json()))
        return
    pool, snap = _snapshot_at(args)
    rows = [
        {
            "id": o.id,
            "min": _bound(o, pool, "min"),
            "max": _bound(o, pool, "max"),
            "count": o.count,
            # Bytes for scripts, readable sizes for people.
            "size": o.size if args.format != "table" else human_size(o.size),
        }
        for o in sorted(snap.objects.values(), key=lambda o: o.id)
    ]
    columns = ["id", "min", "max", "count", "size"]
    if getattr(args, "verify", False):
        from lake_core.integrity import raise_for_verdicts, verify_objects

        metas = sorted(snap.objects.values(), key=lambda o: o.id)
        verdicts = verify_objects(pool.store, pool.id, metas, pool.name)
        for row, v in zip(rows, verdicts, strict=True):
            row["verified"] = "ok" if v.problem is None else f"corrupt: {v.problem}"
        columns.append("verified")
        write_records(rows, args.format, columns=columns)
        sys.stdout.flush()
        raise_for_verdicts(verdicts, pool.name)
        return
    write_records(rows, args.format, columns=columns)


def _readable_actions(commit: Any, pool: Pool) -> list[dict[str, Any]]:
    """A commit's actions with key bounds and column stats decoded as ``lake objects -f json``
    prints them (ISO timestamps, a composite key as a list), not in their stored encoding."""
    out = []
    for action, stored in zip(commit.actions, commit.actions_json(), strict=True):
        if isinstance(action, Add):
            meta = action.object
            stored = {
                **stored,
                "object": {
                    **stored["object"],
                    "min": _bound(meta, pool, "min"),
                    "max": _bound(meta, pool, "max"),
                    "columns": {
                        name: {**col.to_json(), "min": col.decoded_min(), "max": col.decoded_max()}
                        for name, col in meta.columns.items()
                    },
                },
            }
        out.append(stored)
    return out


def cmd_log(args: argparse.Namespace) -> None:
    pool, ref = _pool_ref(args)
    commits = list(pool.log(ref))
    if args.format in ("json", "csv"):
        rows = [
            {
                "id": c.id,
                "parent": c.parent,
                "author": c.author,
                "date": c.date,
                "message": c.message,
                "meta": c.meta,
                "actions": _readable_actions(c, pool),
                "rows": {"added": c.rows_added, "removed": c.rows_removed},
            }
            for c in commits
        ]
        write_records(
            rows,
            args.format,
            columns=["id", "parent", "author", "date", "message", "meta", "actions", "rows"],
        )
        return
    for c in commits:
        _say(f"commit {c.id}")
        _say(f"Author: {c.author}")
        _say(f"Date:   {to_iso(c.date)}")
        if c.meta is not None:
            _say(f"Meta:   {json.dumps(jsonable(c.meta))}")
        _say("")
        for line in (c.message or "(no message)").splitlines():
            _say(f"    {line}")
        _say(f"    {report.log_counts(c)}")
        _say("")


def cmd_branch(args: argparse.Namespace) -> None:
    name, _ = split_ref(args.pool)
    pool = _lake(args).pool(name)
    if args.delete:
        pool.delete_branch(args.delete)
        _say(f"branch {args.delete} deleted")
        return
    if args.name:
        tip = pool.create_branch(args.name, args.from_ref)
        _say(f"branch {args.name} created at {tip or '(empty)'}")
        return
    rows = [{"name": b, "commit": c} for b, c in sorted(pool.branches().items())]
    write_records(rows, args.format, columns=["name", "commit"])


def cmd_merge(args: argparse.Namespace) -> None:
    from lake_core.changes import merge

    name, _ = split_ref(args.pool)
    pool = _lake(args, args.user).pool(name)
    commit = merge(
        pool,
        args.source,
        args.into,
        message=args.message,
        meta=_meta(args.meta),
        resolve=args.resolve,
    )
    _say(report.changed(f"merged {args.source} into {args.into}", commit))
    _say(f"{commit.id} committed")


def cmd_delete(args: argparse.Namespace) -> None:
    from lake_core.changes import delete_objects, delete_where

    pool, branch = _pool_ref(args, args.user)
    if bool(args.ids) == bool(args.where):
        raise UsageError("give either OBJECT-IDs or --where, not both or neither")
    if args.where:
        try:
            commit = delete_where(
                pool, args.where, branch or MAIN, message=args.message, meta=_meta(args.meta)
            )
        except NoRowsMatchedError:
            if args.strict:
                raise
            # Scripts re-run deletes: deleting what is already gone succeeds.
            _say("no rows matched")
            return
        _say(report.deleted_rows(commit))
    else:
        commit = delete_objects(
            pool, args.ids, branch or MAIN, message=args.message, meta=_meta(args.meta)
        )
        _say(report.deleted_objects(commit))
    _say(f"{commit.id} committed")


def cmd_revert(args: argparse.Namespace) -> None:
    from lake_core.changes import revert

    pool, branch = _pool_ref(args, args.user)
    commit = revert(pool, args.commit, branch or MAIN, message=args.message, meta=_meta(args.meta))
    _say(report.changed(f"reverted {args.commit}", commit))
    _say(f"{commit.id} committed")
