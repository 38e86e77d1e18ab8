"""Writing one batch into an OTree pool: weights, revision, cubes, objects.

Each object is a rollup group of cubes (:mod:`lake_core.otree.build`), in cube pre-order.
A cube's rows, by weight, are cut into *bands* of at most ``block_rows`` rows (a quarter cube);
each band is ordered by place (Morton code) and cut into row groups of about
:func:`group_rows` rows; every row group is one block (block ``i`` is row group ``i``). So a
sample reads only the first bands of the cubes it reaches (a block whose smallest weight is
past the cut is skipped), and a box query reads, of a band, only the row groups whose
place — Parquet's min/max of the indexed columns — meets it. Every block of a cube carries the
cube's threshold as ``maxWeight`` (Qbeast's meaning), its own smallest weight as
``minWeight``.

An object's ``min``/``max`` (and its column stats) are true bounds over its rows: OTree
objects are not sorted by the pool key.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from lake_core.clock import Clock
from lake_core.encode import EncodeOptions
from lake_core.ids import new_id
from lake_core.integrity import checksum
from lake_core.layout import PoolLayout
from lake_core.objects import ObjectMeta
from lake_core.otree.blocks import Block, revision_of, tags_of, uid_of
from lake_core.otree.build import BuiltBlock, build_tree
from lake_core.otree.revisions import (
    Extent,
    Revision,
    coordinates,
    first_revision,
    next_revision,
)
from lake_core.otree.settings import OTreeLayout
from lake_core.otree.weights import WEIGHT_COLUMN, weights_for
from lake_core.poolkey import PoolKey
from lake_core.stats import table_meta
from lake_core.stores.base import ObjectStore
from lake_core.writer import (
    ENCODE_THREADS,
    WriteOptions,
    dictionary_limit,
    key_bounds,
    sort_table,
)

#: Bytes of Arrow data per row group at most (as the sorted layout's seek stride).
_MIN_BLOCK_ROWS = 1


def with_weights(
    table: pa.Table, layout: OTreeLayout, rng: np.random.Generator | None = None
) -> pa.Table:
    """``table`` with its weight column (int32, last): computed from the indexed columns; a
    salted pool keeps a weight column the rows already carry (a re-load of exported rows),
    else draws its salts from ``rng`` (fresh when None)."""
    names = table.schema.names
    if WEIGHT_COLUMN in names:
        given = table.column(WEIGHT_COLUMN)
        keep = (
            layout.weight == "salted" and given.null_count == 0 and pa.types.is_integer(given.type)
        )
        table = table.drop_columns([WEIGHT_COLUMN])
        if keep:
            return table.append_column(
                pa.field(WEIGHT_COLUMN, pa.int32(), False), given.cast(pa.int32())
            )
    weights = weights_for(table, layout.columns, layout.weight, rng)
    return table.append_column(pa.field(WEIGHT_COLUMN, pa.int32(), False), weights)


def revision_change(
    batch: pa.Table | Extent, now_ms: int, rng: random.Random
) -> Callable[[OTreeLayout], OTreeLayout | None]:
    """The catalog change that makes the latest revision cover ``batch`` (a table or its
    :class:`~lake_core.otree.revisions.Extent`): revision 1 for a pool's first batch, the
    union-range next revision for a batch outside the latest's ranges, nothing (None) when
    the latest covers it."""

    def change(current: OTreeLayout) -> OTreeLayout | None:
        latest = current.latest
        if latest is None:
            return current.with_revision(
                first_revision(batch, current.columns, current.cube_size, now_ms, rng)
            )
        following = next_revision(latest, batch, now_ms, rng)
        return None if following is None else current.with_revision(following)

    return change


def revision_rows(objects: list[ObjectMeta], revision: Revision) -> int:
    """Rows of the given live objects indexed in ``revision``."""
    return sum(
        o.count
        for o in objects
        if revision_of(o) == revision.id and uid_of(o) in ("", revision.uid)
    )


def batch_cube_size(cube_size: int, batch_rows: int, existing_rows: int) -> int:
    """The cube size a batch is built with so that each cube of the revision holds about
    ``cube_size`` rows over all its batches (anchor §6.4 b)."""
    total = batch_rows + existing_rows
    return max(1, cube_size * batch_rows // total) if total else cube_size


#: Rows a band is cut into at most (by place), and the fewest rows worth a row group.
_GROUPS_PER_BAND = 8
_MIN_GROUP_ROWS = 512


def group_rows(band: int) -> int:
    """Rows per row group within a band of ``band`` rows."""
    return max(_MIN_GROUP_ROWS, math.ceil(band / _GROUPS_PER_BAND))


def row_bytes(table: pa.Table) -> int:
    """A batch's bytes per row in memory: how its objects and blocks are sized."""
    return max(1, table.nbytes // max(1, table.num_rows))


def block_rows(cube_size: int, per_row: int, options: WriteOptions) -> int:
    """Rows per block (row group): a quarter cube, so a sample cuts a cube finely, and no
    more than the seek stride's worth of rows (``per_row``: :func:`row_bytes` of the batch)."""
    return max(
        _MIN_BLOCK_ROWS, min(math.ceil(cube_size / 4), options.seek_stride // max(1, per_row))
    )


def write_otree(
    store: ObjectStore,
    pool_id: str,
    table: pa.Table,
    key: PoolKey,
    revision: Revision,
    existing_rows: int,
    options: WriteOptions,
    *,
    clock: Clock,
    on_object: Callable[[ObjectMeta], None] | None = None,
) -> list[ObjectMeta]:
    """Write ``table`` (with its weight column) as OTree objects of ``revision``, which holds
    ``existing_rows`` rows already; return their metadata (nothing is committed)."""
    if table.num_rows == 0:
        return []
    weights = table.column(WEIGHT_COLUMN).to_numpy().astype(np.int32)
    cube_size = batch_cube_size(revision.cube_size, table.num_rows, existing_rows)
    q = coordinates(table, revision)
    per_row = row_bytes(table)
    rollup = max(cube_size, options.target_size // per_row)
    tree = build_tree(q, weights, cube_size, rollup)
    per_block = block_rows(cube_size, per_row, options)
    encoding = EncodeOptions(options.compression, dictionary_limit(options))
    metas: list[ObjectMeta] = []

    def build(built: list[BuiltBlock]) -> tuple[list[Block], pa.Table, bytes]:
        return encode_object(table, built, weights, tree.codes, per_block, encoding)

    # Objects encode on threads (pyarrow's writer releases the GIL) and land in order.
    with ThreadPoolExecutor(ENCODE_THREADS, thread_name_prefix="lake-otree") as ex:
        for blocks, rows, payload in ex.map(build, tree.objects):
            object_id = new_id(clock)
            store.put(PoolLayout(pool_id).data(object_id), payload)
            meta = object_meta(object_id, rows, payload, blocks, key, revision)
            metas.append(meta)
            if on_object is not None:
                on_object(meta)
    return metas


def encode_object(
    table: pa.Table,
    built: list[BuiltBlock],
    weights: np.ndarray,
    codes: np.ndarray,
    per_block: int,
    encoding: EncodeOptions,
) -> tuple[list[Block], pa.Table, bytes]:
    """One object of ``table``'s rows: its blocks, its rows in block order, its Parquet bytes
    (a row group per block). ``built``: its cubes in pre-order, each with its rows (indices
    into ``table``) in weight order; ``weights`` and ``codes`` (Morton) of every row of
    ``table``; ``per_block``: rows per weight band (:func:`block_rows`)."""
    blocks, pieces = _blocks(built, weights, codes, per_block, group_rows(per_block))
    # One gather per object (a take per block would re-walk the batch's chunks), then one
    # writer writing each block as its own row group (a writer per small row group, to
    # stitch, costs more than the encoding: OTree row groups are a few thousand rows).
    rows = table.take(np.concatenate(pieces))
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(
        sink,
        table.schema,
        compression=encoding.compression,  # type: ignore[arg-type]
        dictionary_pagesize_limit=encoding.dictionary_pagesize_limit,
        **encoding.page_options(),
    ) as writer:
        start = 0
        for piece in pieces:
            writer.write_table(rows.slice(start, len(piece)), row_group_size=len(piece))
            start += len(piece)
    return blocks, rows, sink.getvalue().to_pybytes()


def object_meta(
    object_id: str,
    rows: pa.Table,
    payload: bytes,
    blocks: list[Block],
    key: PoolKey,
    revision: Revision,
) -> ObjectMeta:
    """The metadata of an OTree object holding ``rows`` (encoded as ``payload``): true key
    bounds and column stats over its rows, and its revision and blocks as tags."""
    keys = rows.select([f for f in key.fields if f in rows.schema.names])
    lo, hi = key_bounds(sort_table(keys, key), key)
    return ObjectMeta(
        id=object_id,
        min=lo,
        max=hi,
        count=rows.num_rows,
        size=len(payload),
        columns=table_meta(rows),
        tags=tags_of(revision.id, blocks, revision.uid),
        checksum=checksum(payload),
    )


def _blocks(
    built: list[BuiltBlock],
    weights: np.ndarray,
    codes: np.ndarray,
    band: int,
    group: int,
) -> tuple[list[Block], list[np.ndarray]]:
    """An object's blocks and the batch rows of each, in row-group order: each cube's rows
    (weight-ordered) cut into *bands* of ``band`` rows, each band ordered by place (Morton
    code) and cut into row groups of about ``group`` rows. A sample skips a cube's bands past
    its cut (each block's minWeight); a box skips the row groups of a band whose place is
    elsewhere (Parquet's min/max of the indexed columns, which place-ordering keeps tight)."""
    blocks: list[Block] = []
    pieces: list[np.ndarray] = []
    for b in built:
        for start in range(0, len(b.rows), band):
            rows = b.rows[start : start + band]
            if len(rows) > group:
                rows = rows[np.argsort(codes[rows], kind="stable")]
            parts = max(1, round(len(rows) / group))
            for piece in np.array_split(rows, parts):
                blocks.append(Block(b.cube, int(weights[piece].min()), b.max_weight, len(piece)))
                pieces.append(piece)
    return blocks, pieces


__all__ = [
    "batch_cube_size",
    "block_rows",
    "encode_object",
    "group_rows",
    "object_meta",
    "row_bytes",
    "revision_change",
    "revision_rows",
    "with_weights",
    "write_otree",
]
