"""Partition operations: list, drop (metadata only) and rewrite (atomic replace).

Both drop and rewrite are single commits under the pool's maintenance lock. Dropping deletes
exactly the objects whose recorded partition equals the value — no data is read, so other
partitions cannot be touched (IceDB's drop-then-cleanup lost other partitions' data). A rewrite
deletes the partition's objects as planned and adds the new ones in the same commit; re-running
it with the same input gives the same rows, which is what makes a Dagster partition
materialization idempotent.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lake_core.commit import Commit
from lake_core.committing import discarding_on_failure
from lake_core.errors import NotFoundError, UsageError
from lake_core.keyset import KeySet
from lake_core.loading import Source, read_sources
from lake_core.names import MAIN
from lake_core.objects import ObjectMeta
from lake_core.schema_mode import check_key_present, check_new_columns
from lake_core.txn import Txn, as_txns, check_txns
from lake_core.upsert import check_unique, last_per_key
from lake_core.writer import WriteOptions, write_objects

if TYPE_CHECKING:
    from lake_core.pool import Pool  # a Pool delegates here: no import back at run time


@dataclass(frozen=True)
class PartitionInfo:
    value: str
    objects: int
    rows: int
    bytes: int

    def to_json(self) -> dict[str, Any]:
        return {
            "partition": self.value,
            "objects": self.objects,
            "rows": self.rows,
            "bytes": self.bytes,
        }


def list_partitions(pool: Pool, ref: str | None = None, as_of: Any = None) -> list[PartitionInfo]:
    """Partitions of the snapshot at ``ref``, sorted by value."""
    snap = pool.snapshot(pool.resolve(ref, as_of))
    acc: dict[str, list[int]] = {}
    for o in snap.objects.values():
        a = acc.setdefault(o.partition if o.partition is not None else "", [0, 0, 0])
        a[0] += 1
        a[1] += o.count
        a[2] += o.size
    return [PartitionInfo(v, *acc[v]) for v in sorted(acc)]


def _require_partitioned(pool: Pool) -> None:
    if pool.partition_spec is None:
        raise UsageError(f"pool {pool.name} is not partitioned (create it with --partition-by)")


def drop_partition(
    pool: Pool,
    value: str,
    branch: str = MAIN,
    *,
    guard: Callable[[], None] | None = None,
    author: str | None = None,
) -> Commit:
    """Delete every object of partition ``value`` in one metadata-only commit."""
    _require_partitioned(pool)
    snap = pool.snapshot(pool.tip(branch))
    ids = [o.id for o in snap.objects.values() if o.partition == value]
    if not ids:
        raise NotFoundError("partition", value, f"in {pool.name}@{branch}")
    return pool.commit(
        branch,
        [],
        ids,
        author=author,
        guard=guard,
        message=f"dropped partition {value} ({len(ids)} objects)",
        extra={"kind": "partition-drop"},
    )


def rewrite_partition(
    pool: Pool,
    value: str,
    sources: Sequence[Source],
    branch: str = MAIN,
    *,
    fmt: str = "auto",
    guard: Callable[[], None] | None = None,
    author: str | None = None,
    message: str = "",
    meta: Any = None,
    txn: Txn | Sequence[Txn] | None = None,
) -> Commit:
    """Replace partition ``value``'s contents with ``sources`` atomically. Every input row must
    belong to ``value``; an empty input empties the partition. ``txn``: the application
    transaction(s) this rewrite is (:mod:`lake_core.txn`); TxnCommittedError, nothing
    written or committed, when one is in already."""
    _require_partitioned(pool)
    spec = pool.partition_spec
    assert spec is not None
    txns = as_txns(txn)
    snap = pool.snapshot(pool.tip(branch))
    check_txns(snap.txns, txns)  # early, before reading; the commit re-checks at its parent
    table, schema = read_sources(sources, fmt, snap.schema)
    if table.num_rows:
        mode, what = pool.config.schema_mode, f"the input of partition {value}"
        check_new_columns(mode, pool.name, snap.schema, table.schema, what)
        check_key_present(mode, pool.name, pool.config.key, table, what)
        groups = spec.split(table)
        wrong = [v for v, _ in groups if v != value]
        if wrong:
            raise UsageError(
                f"rewrite of partition {value}: input has rows of partition {wrong[0]}"
            )
    old = [o.id for o in snap.objects.values() if o.partition == value]
    keys: KeySet | None = None
    read_ids: frozenset[str] = frozenset()
    if pool.config.unique and table.num_rows and schema is not None:
        # Rows unique by the key, as its loads keep them: the last row per key in input order,
        # and no key that another partition still holds (DuplicateKeyError, nothing written);
        # validated at the commit against racing writers of those keys.
        kept = last_per_key(table, pool.config.key.resolve(schema))
        if len(kept) < table.num_rows:
            table = table.take(pa.array(kept))
        what = f"the rewrite of partition {value}"
        keys, read_ids = check_unique(pool, snap, schema, [table], [], old, what)
    options = WriteOptions(pool.config.target_size, pool.config.seek_stride)
    adds: list[ObjectMeta] = []
    with discarding_on_failure(pool, adds):
        if table.num_rows:
            write_objects(
                pool.store,
                pool.id,
                table,
                pool.config.key.resolve(schema),
                options,
                clock=pool.clock,
                partition=value,
                on_object=adds.append,  # each object as it lands: a failure removes them all
            )
        return pool.commit(
            branch,
            adds,
            old,
            author=author,
            guard=guard,
            meta=meta,
            message=message or f"rewrote partition {value} ({len(old)} → {len(adds)} objects)",
            incoming_schema=table.schema if table.num_rows else None,
            extra={"kind": "partition-rewrite"},
            txn=txns,
            keys=keys,
            read_ids=tuple(read_ids),
        )
