"""Loading: input files or tables → data objects → one commit (``load`` = ``add`` + ``commit``).

Staged work lives at ``pools/<id>/staging/<staged-id>.json``: the objects an ``add`` wrote and
the schema they carry, awaiting ``commit``. Committing staged work twice is impossible: the
second commit would add objects that are already live, which the commit protocol refuses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import pyarrow as pa

from lake_core.clock import parse_iso, to_iso
from lake_core.codec import decode_doc, encode_doc
from lake_core.commit import Commit, decode_schema, encode_schema
from lake_core.committing import discarding_on_failure
from lake_core.errors import EmptyTransactionError, NotFoundError, ObjectNotFoundError, UsageError
from lake_core.ids import new_id
from lake_core.inflight import check_write_window, write_window_guard
from lake_core.ingest import conform_to, normalize_table, read_input, unify_schema
from lake_core.names import MAIN
from lake_core.objects import ObjectMeta
from lake_core.schema_mode import check_key_present, check_new_columns
from lake_core.snapshot import Snapshot
from lake_core.stores.base import SyncBatch
from lake_core.txn import Txn, as_txns, check_txns
from lake_core.units import counted
from lake_core.writer import WriteOptions, write_partitioned

if TYPE_CHECKING:
    from lake_core.encode import GroupTap
    from lake_core.pool import Pool  # a Pool delegates here: no import back at run time

Source = str | Path | BinaryIO | pa.Table
STAGED_FORMAT = "lakepool.staged"
STAGED_VERSION = 1


@dataclass(frozen=True)
class Staged:
    """One ``add``: objects written but not committed."""

    id: str
    objects: list[ObjectMeta]
    schema: pa.Schema | None
    created: datetime
    sources: list[str]


def _source_name(src: Source, i: int) -> str:
    if isinstance(src, pa.Table):
        return f"table #{i + 1}"
    if isinstance(src, (str, Path)):
        return "stdin" if str(src) == "-" else str(src)
    return getattr(src, "name", None) or f"stream #{i + 1}"


def source_names(sources: Sequence[Source]) -> str:
    """The inputs as messages name them: paths, ``stdin``, ``table #N``."""
    return ", ".join(_source_name(s, i) for i, s in enumerate(sources))


def read_sources(
    sources: Sequence[Source], fmt: str, base_schema: pa.Schema | None
) -> tuple[pa.Table, pa.Schema | None]:
    """Read and normalize every source; unify their schemas with ``base_schema`` (raising
    SchemaConflictError naming the source); return the combined table and the unified schema."""
    tables: list[pa.Table] = []
    schema = base_schema
    for i, src in enumerate(sources):
        name = _source_name(src, i)
        if isinstance(src, pa.Table):
            table = normalize_table(src, name)
        else:
            table = read_input(src, fmt, name=name)
        if table.num_rows == 0:
            continue
        schema = unify_schema(schema, table.schema, name)
        tables.append(table)
    if not tables or schema is None:
        return pa.table({}), schema
    tables = [conform_to(t, schema, exact=False) for t in tables]
    combined = (
        tables[0] if len(tables) == 1 else pa.concat_tables(tables, promote_options="default")
    )
    return combined, schema


def write_sources(
    pool: Pool,
    sources: Sequence[Source],
    branch: str,
    fmt: str = "auto",
    on_object: Callable[[ObjectMeta], None] | None = None,
    batch: SyncBatch | None = None,
    tap: GroupTap | None = None,
) -> tuple[list[ObjectMeta], pa.Schema]:
    """Read, check against the branch's schema, and write objects (not committed).

    ``batch``: write the objects without fsync, noted there; whoever names them (the journal
    append, a staging document) must make the batch durable first. ``tap`` sees the row
    groups and objects written (:class:`~lake_core.encode.GroupTap`; not for an OTree pool).

    The branch's schema is the last this process saw lately (``Journal.recent``) when its
    snapshot is still in memory (no read): the checks here only refuse early, and the commit
    re-checks against the real parent. A tip seen long ago is not used (a long-lived handle's
    would refuse early against an old schema), nor read back when its snapshot is gone: it
    may have been vacated and cleaned up since, so the real tip is read instead."""
    known = pool.journal.recent()
    base_snapshot = None
    if known is not None and branch in known.state:
        seen_tip = known.state[branch]
        base_snapshot = Snapshot() if seen_tip is None else pool.cached_snapshot(seen_tip)
    if base_snapshot is None:
        # pool.tip raises BranchNotFoundError before any work.
        base_snapshot = pool.snapshot(pool.tip(branch))
    base = base_snapshot.schema
    table, schema = read_sources(sources, fmt, base)
    if table.num_rows == 0:
        raise EmptyTransactionError("no records in the input")
    # Schema-mode checks before any object is written: a refused load leaves nothing behind.
    names = source_names(sources)
    mode = pool.config.schema_mode
    check_new_columns(mode, pool.name, base, table.schema, names)
    check_key_present(mode, pool.name, pool.config.key, table, names)
    options = WriteOptions(pool.config.target_size, pool.config.seek_stride)
    if pool.config.otree is not None:
        return write_otree_batch(pool, table, base_snapshot, options, batch, on_object)
    objects = write_partitioned(
        pool.store if batch is None else pool.store.deferring(batch),
        pool.id,
        table,
        pool.config.key.resolve(schema),  # ``this``: the pool's columns, new ones last
        options,
        pool.partition_spec,
        clock=pool.clock,
        on_object=on_object,
        tap=tap,
    )
    return objects, table.schema


def write_otree_batch(
    pool: Pool,
    table: pa.Table,
    base: Snapshot,
    options: WriteOptions,
    batch: SyncBatch | None,
    on_object: Callable[[ObjectMeta], None] | None,
) -> tuple[list[ObjectMeta], pa.Schema]:
    """Write a checked batch into an OTree pool (:mod:`lake_core.otree.write`): its weight
    column, the revision that covers it (a new one committed to the catalog if needed), its
    cubes as objects. Returns the objects and the batch schema (with the weight column)."""
    from lake_core.otree.write import revision_rows, with_weights, write_otree

    table = with_weights(table, pool.config.otree)  # type: ignore[arg-type]
    revision = pool.otree_revision(table)
    existing = revision_rows(list(base.objects.values()), revision)
    objects = write_otree(
        pool.store if batch is None else pool.store.deferring(batch),
        pool.id,
        table,
        pool.config.key.resolve(table.schema),
        revision,
        existing,
        options,
        clock=pool.clock,
        on_object=on_object,
    )
    return objects, table.schema


def load(
    pool: Pool,
    sources: Sequence[Source],
    branch: str = MAIN,
    *,
    fmt: str = "auto",
    author: str | None = None,
    message: str = "",
    meta: Any = None,
    on_object: Callable[[ObjectMeta], None] | None = None,
    txn: Txn | Sequence[Txn] | None = None,
    group: bool = False,
) -> Commit:
    """Add and commit ``sources`` to ``branch`` in one commit; nothing is visible on failure.
    On CommitStateUnknownError the objects stay: the commit may have landed. The commit point
    must come within the write window (see :mod:`lake_core.inflight`).

    ``txn``: the application transaction(s) this load is (:mod:`lake_core.txn`). One already
    committed on ``branch`` raises TxnCommittedError before any input is read; one committed
    by a racing writer meanwhile raises it at the commit point, the objects discarded.

    ``group``: hand the commit to the pool's group committer (:mod:`lake_core.grouping`), so
    loads running in other threads meanwhile share it; the outcome is still this load's own.

    A unique pool (``PoolConfig.unique``) upserts instead (:meth:`Pool.upsert
    <lake_core.pool.Pool.upsert>`, through the handle: this module does not import the
    upsert's): the commit records the counts in ``extra["upsert"]``; ``group`` does not apply
    (an upsert commits alone)."""
    if pool.config.unique:
        result = pool.upsert(
            sources,
            branch,
            fmt=fmt,
            author=author,
            message=message,
            meta=meta,
            txn=txn,
            on_object=on_object,
        )
        # Without delete rows every input row is written: an upsert of records commits.
        assert result.commit is not None
        return result.commit
    txns = as_txns(txn)
    if txns:
        check_txns(pool.snapshot(pool.tip(branch)).txns, txns)
    started = pool.clock.now()
    # The objects are written without fsync; the journal append makes them durable, with the
    # commit object, in one round before its commit point (docs/architecture.md).
    batch = SyncBatch()
    # An indexed pool's indexes are prepared from the rows as the writer encodes them, so the
    # commit does not read the new objects back to build them (lake_core.indexes.building).
    inputs = None
    if pool.index_rules and pool.config.otree is None:
        from lake_core.indexes.building import IndexInputs

        inputs = IndexInputs(pool.index_rules)
    objects, schema = write_sources(pool, sources, branch, fmt, on_object, batch, inputs)
    names = source_names(sources)
    with discarding_on_failure(pool, objects):
        return pool.commit(
            branch,
            objects,
            [],
            author=author,
            message=message or f"loaded {counted(len(objects), 'data object')} from {names}",
            meta=meta,
            incoming_schema=schema,
            source=names,
            guard=write_window_guard(pool.clock, started),
            txn=txns,
            durable_first=batch,
            group=group,
            index_inputs=inputs,
        )


def check_stageable(pool: Pool) -> None:
    """Raise UsageError for a unique pool: its rows are unique by the pool key, which only
    an upsert keeps (``lake load`` and ``lake upsert`` do; ``add``/``commit`` would not)."""
    if pool.config.unique:
        raise UsageError(
            f"pool {pool.name} is unique (rows unique by {pool.config.key}): staging is not "
            "supported; use lake load or lake upsert, which replace rows by key"
        )


def stage(
    pool: Pool, sources: Sequence[Source], branch: str = MAIN, *, fmt: str = "auto"
) -> Staged:
    """Write objects and record them as staged work (``lake add``). The staging document must
    land within the write window (see :mod:`lake_core.inflight`): until it does, cleanup knows
    the objects only by their age.

    A unique pool refuses staging (UsageError, nothing written): a commit of staged objects
    could not replace rows by key without reading what it stages, so its loads upsert
    instead (:func:`check_stageable`)."""
    check_stageable(pool)
    started = pool.clock.now()
    batch = SyncBatch()  # made durable with the staging document, which names the objects
    objects, schema = write_sources(pool, sources, branch, fmt, batch=batch)
    staged = Staged(
        new_id(pool.clock),
        objects,
        schema,
        pool.clock.now(),
        [_source_name(s, i) for i, s in enumerate(sources)],
    )
    body = {
        "id": staged.id,
        "created": to_iso(staged.created),
        "sources": staged.sources,
        "schema": encode_schema(schema),
        "objects": [o.to_json() for o in objects],
    }
    with discarding_on_failure(pool, objects):
        # Puts still in flight (S3's background writes) finish first: the window is checked
        # on the time they took too, and a failed one removes what this stage wrote.
        pool.store.settle(batch)
        check_write_window(pool.clock, started)
    pool.store.put_if_missing_idempotent(
        pool.layout.staged(staged.id), encode_doc(STAGED_FORMAT, STAGED_VERSION, body), batch
    )
    return staged


def read_staged(pool: Pool, staged_id: str) -> Staged:
    key = pool.layout.staged(staged_id)
    try:
        doc = decode_doc(key, pool.store.get(key), STAGED_FORMAT, STAGED_VERSION)
    except ObjectNotFoundError:
        raise NotFoundError("staged work", staged_id, f"in pool {pool.name}") from None
    return Staged(
        doc["id"],
        [ObjectMeta.from_json(o) for o in doc["objects"]],
        decode_schema(doc["schema"]) if doc.get("schema") else None,
        parse_iso(doc["created"]),
        list(doc.get("sources", [])),
    )


def list_staged(pool: Pool) -> list[Staged]:
    found = (pool.layout.parse_staged(i.key) for i in pool.store.list(pool.layout.staging_dir))
    ids = sorted(i for i in found if i is not None)
    out = []
    for staged_id in ids:
        try:
            out.append(read_staged(pool, staged_id))
        except NotFoundError:
            continue  # committed meanwhile
    return out


def commit_staged(
    pool: Pool,
    staged_ids: Sequence[str],
    branch: str = MAIN,
    *,
    author: str | None = None,
    message: str = "",
    meta: Any = None,
) -> Commit:
    """Commit several staged ids in one commit, then forget them. A unique pool refuses
    (UsageError, see :func:`check_stageable`)."""
    check_stageable(pool)
    staged = [read_staged(pool, s) for s in staged_ids]
    objects = [o for s in staged for o in s.objects]
    schema: pa.Schema | None = None
    for s in staged:
        if s.schema is not None:
            schema = unify_schema(schema, s.schema, f"staged {s.id}")
    commit = pool.commit(
        branch,
        objects,
        [],
        author=author,
        message=message or f"committed {len(staged)} staged loads ({len(objects)} data objects)",
        meta=meta,
        incoming_schema=schema,
        source=", ".join(f"staged {s}" for s in staged_ids),
    )
    pool.store.delete_many([pool.layout.staged(s.id) for s in staged])
    return commit
