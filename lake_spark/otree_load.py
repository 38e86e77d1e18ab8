"""Spark load into an OTree pool: Spark tasks build the tree and write its objects; the driver
plans between the stages and commits once (:func:`lake_spark.ingest.spark_load` calls this
after its survey and schema unification).

1. **Place** (a task per chunk, kept in executor memory): the chunk conformed to the load's
   layout, its size in memory, its indexed columns, every row's weight (a salted
   pool's salts drawn from a generator seeded by the load and the chunk, so the last stage
   draws the same ones), and the chunk's :class:`~lake_core.otree.revisions.Extent`. The
   driver merges the extents and asks the pool for the revision covering the batch
   (:meth:`lake_core.pool.Pool.otree_revision`: the latest, or a new one recorded in the
   catalog, as the local path does). Then each task maps its rows to Morton codes once.
2. **Thresholds** (one small job per depth): at depth ``L`` each task reports, for each cube
   its still-unassigned rows fall in, their count and their ``C`` smallest weights. The
   driver merges them: a cube with more than ``C`` such rows gets the ``C``-th smallest of
   them all as its threshold — the exact level-wise construction of
   :mod:`lake_core.otree.build`, since the ``C`` smallest of a union are among the union of
   each part's ``C`` smallest. It stops at the first depth where no cube overflows.
3. **Rollup** (driver): a last job counts each cube's rows; lake_core's rollup packs the cubes
   into objects by the same rule as the local path (the rows' bytes in memory).
4. **Route and write**: each chunk is read again and its rows (weights recomputed, the same)
   go to their object's task through Spark's shuffle, in source order; the task orders them
   by (cube pre-order, weight), writes the object with lake_core's OTree encoder (blocks, row
   groups, tags, stats) and indexes it under the pool's index rules.

So the tree equals lake_core's build of the whole batch: the same revision, thresholds, and
rows in every cube (tests/spark/test_otree_spark_load.py). Rows that route to a cube the plan
does not know, or a row count that differs from the plan's, mean the input changed while
loading: the load fails and its objects are deleted.

Memory: a task holds one chunk, or one object's rows; the executors keep, per row, its Morton
code and weight (12 bytes) between stages 1 and 3.
"""

from __future__ import annotations

import pickle
import random
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from lake_core.clock import SYSTEM_CLOCK
from lake_core.encode import EncodeOptions
from lake_core.ids import new_id
from lake_core.ingest import conform_to, normalize_table
from lake_core.layout import PoolLayout
from lake_core.objects import ObjectMeta
from lake_core.otree.blocks import Block
from lake_core.otree.build import BuiltBlock, rollup_groups
from lake_core.otree.cubes import Cube, depth_limit, morton
from lake_core.otree.revisions import Extent, Revision, coordinates
from lake_core.otree.weights import MAX_WEIGHT, WEIGHT_COLUMN
from lake_core.otree.write import (
    batch_cube_size,
    block_rows,
    encode_object,
    object_meta,
    revision_rows,
    with_weights,
)
from lake_core.pool import Pool
from lake_core.writer import dictionary_limit
from lake_spark.sources import Chunk, read_chunk
from lake_spark.stages import (
    DATAFRAME_NAME,
    PIECES_PER_CHUNK,
    Job,
    Piece,
    Survey,
    Written,
    bucket_writer,
    by_bucket,
    chunk_pieces,
    frame_pieces,
    ipc_slices,
    partition_number,
    to_ipc,
)
from lake_spark.tasks import TaskError, task_store

if TYPE_CHECKING:
    from pyspark import RDD
    from pyspark.sql import DataFrame, SparkSession


def _keep() -> Any:
    """How stages 1 to 3 keep their rows between jobs: spilled to disk rather than evicted
    (an evicted partition would be recomputed from its source, through every level)."""
    from pyspark import StorageLevel

    return StorageLevel.MEMORY_AND_DISK


#: Columns the route stage adds to each row on its way to its object's task.
_POSITION = "__lake_cube_position"  # the cube's place among its object's cubes (pre-order)
_CODE = "__lake_morton"


# -- the tree as the driver plans it ----------------------------------------------------------


@dataclass(frozen=True)
class Level:
    """One depth of the tree: the cubes with a threshold (sorted prefixes, thresholds). Every
    other cube of that depth is a leaf: it takes all its rows still unassigned."""

    prefixes: np.ndarray
    thresholds: np.ndarray

    def threshold_of(self, prefixes: np.ndarray) -> np.ndarray:
        """Each prefix's threshold (:data:`MAX_WEIGHT` for a leaf)."""
        return _lookup(self.prefixes, self.thresholds, prefixes, MAX_WEIGHT)


def _lookup(keys: np.ndarray, values: np.ndarray, wanted: np.ndarray, default: int) -> np.ndarray:
    """``values`` at ``wanted``'s places in sorted ``keys`` (``default`` where absent)."""
    if not len(keys):
        return np.full(len(wanted), default, dtype=np.int64)
    at = np.minimum(np.searchsorted(keys, wanted), len(keys) - 1)
    return np.where(keys[at] == wanted, values[at], default)


def assign_depths(
    codes: np.ndarray, weights: np.ndarray, levels: Sequence[Level], dims: int
) -> np.ndarray:
    """The depth of each row's cube under the decided ``levels`` (depths ``0..len-1``); -1 for
    a row no decided level takes. A row's cube at depth ``L`` is its code's top ``dims*L``
    bits; a cube takes its unassigned rows of weight at most its threshold."""
    limit = depth_limit(dims)
    depth_of = np.full(len(codes), -1, dtype=np.int64)
    pending = np.arange(len(codes))
    for depth, level in enumerate(levels):
        if not len(pending):
            break
        prefixes = codes[pending] >> (dims * (limit - depth))
        take = weights[pending] <= level.threshold_of(prefixes)
        if depth == limit:  # the deepest cubes cannot be told apart: leaves
            take[:] = True
        depth_of[pending[take]] = depth
        pending = pending[~take]
    return depth_of


@dataclass(frozen=True)
class Candidates:
    """One task's unassigned rows at one depth: per cube (ascending ``prefixes``) their
    ``counts``, and ``kept``: cube after cube, its ``min(count, C)`` smallest weights."""

    prefixes: np.ndarray
    counts: np.ndarray
    kept: np.ndarray  # int32

    def weights_of(self, size: int) -> dict[int, np.ndarray]:
        """The kept weights of each cube."""
        ends = np.cumsum(np.minimum(self.counts, size))
        starts = ends - np.minimum(self.counts, size)
        return {int(p): self.kept[s:e] for p, s, e in zip(self.prefixes, starts, ends, strict=True)}


def candidates(
    codes: np.ndarray, weights: np.ndarray, depths: np.ndarray, depth: int, dims: int, size: int
) -> Candidates:
    """What a task reports for ``depth`` (see :class:`Candidates`). ``codes``: ascending;
    ``depths``: each row's cube depth so far (-1: not assigned yet)."""
    pending = depths < 0
    prefixes = codes[pending] >> (dims * (depth_limit(dims) - depth))  # ascending
    w = weights[pending]
    if not len(w):  # every row of this task has its cube already
        return Candidates(_empty(), _empty(), np.zeros(0, dtype=np.int32))
    starts = np.flatnonzero(np.r_[True, prefixes[1:] != prefixes[:-1]])
    ends = np.r_[starts[1:], len(w)].astype(np.int64)
    counts = ends - starts
    # A cube with at most ``size`` rows here reports them all; a larger one its ``size``
    # smallest (at most rows / size such cubes).
    kept = np.ones(len(w), dtype=bool)
    for s, e in zip(starts[counts > size], ends[counts > size], strict=True):
        kept[s:e] = False
        kept[s + np.argpartition(w[s:e], size - 1)[:size]] = True
    return Candidates(prefixes[starts], counts, w[kept].astype(np.int32))


def advance(
    codes: np.ndarray, weights: np.ndarray, depths: np.ndarray, level: Level, depth: int, dims: int
) -> np.ndarray:
    """``depths`` after ``level`` (the decided cubes of ``depth``) took their rows."""
    limit = depth_limit(dims)
    pending = np.flatnonzero(depths < 0)
    take = weights[pending] <= level.threshold_of(codes[pending] >> (dims * (limit - depth)))
    if depth == limit:  # the deepest cubes cannot be told apart: leaves
        take[:] = True
    out = depths.copy()
    out[pending[take]] = depth
    return out


def _empty() -> np.ndarray:
    return np.zeros(0, dtype=np.int64)


def merge_candidates(parts: Sequence[Candidates], size: int) -> Level:
    """The level decided by all tasks' candidates: a cube with more than ``size`` unassigned
    rows gets the ``size``-th smallest weight among them as its threshold. Every such cube
    has at least ``size`` weights over the tasks (each task kept its ``size`` smallest, or
    all it had), so the ``size``-th smallest of them all is there."""
    prefixes = np.concatenate([p.prefixes for p in parts] or [_empty()])
    counts = np.concatenate([p.counts for p in parts] or [_empty()])
    cubes, inverse = np.unique(prefixes, return_inverse=True)
    totals = np.bincount(inverse, weights=counts, minlength=len(cubes))
    full = {int(c) for c in cubes[totals > size]}
    pieces: dict[int, list[np.ndarray]] = {}
    for part in parts:
        for prefix, kept in part.weights_of(size).items():
            if prefix in full:
                pieces.setdefault(prefix, []).append(kept)
    decided = sorted(pieces)
    thresholds = [int(np.partition(np.concatenate(pieces[p]), size - 1)[size - 1]) for p in decided]
    return Level(np.array(decided, dtype=np.int64), np.array(thresholds, dtype=np.int64))


def cube_counts(codes: np.ndarray, depths: np.ndarray, dims: int) -> dict[tuple[int, int], int]:
    """Rows per cube ``(depth, prefix)`` once every row is assigned (``codes`` ascending, so
    each depth's prefixes come in runs)."""
    if (depths < 0).any():
        raise AssertionError("the tree's levels leave rows unassigned")
    out: dict[tuple[int, int], int] = {}
    for depth in np.unique(depths).tolist():
        prefixes = codes[depths == depth] >> (dims * (depth_limit(dims) - depth))
        starts = np.flatnonzero(np.r_[True, prefixes[1:] != prefixes[:-1]])
        counts = np.diff(np.r_[starts, len(prefixes)])
        for prefix, n in zip(prefixes[starts].tolist(), counts.tolist(), strict=True):
            out[(depth, prefix)] = n
    return out


@dataclass(frozen=True)
class TreePlan:
    """What the route and write tasks need of the planned tree."""

    revision: Revision
    cube_size: int  # this batch's (lake_core.otree.write.batch_cube_size)
    salt: int  # seeds a salted pool's salts, with the chunk's index
    levels: tuple[Level, ...] = ()
    rows: int = 0  # of the batch
    row_bytes: int = 1  # of the batch in memory (lake_core.otree.write.row_bytes)
    #: Per object, its cubes in pre-order.
    objects: tuple[tuple[Cube, ...], ...] = ()
    #: Per depth: the sorted prefixes of its cubes, their object and place in it.
    routes: tuple[tuple[np.ndarray, np.ndarray, np.ndarray], ...] = ()

    @property
    def dims(self) -> int:
        return self.revision.dims

    def route(self, codes: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each row's object and its cube's place in the object (-1: a cube not planned)."""
        depth_of = assign_depths(codes, weights, self.levels, self.dims)
        limit = depth_limit(self.dims)
        objects = np.full(len(codes), -1, dtype=np.int64)
        places = np.full(len(codes), -1, dtype=np.int64)
        for depth, (prefixes, object_of, place_of) in enumerate(self.routes):
            rows = np.flatnonzero(depth_of == depth)
            if not len(rows):
                continue
            mine = codes[rows] >> (self.dims * (limit - depth))
            objects[rows] = _lookup(prefixes, object_of, mine, -1)
            places[rows] = _lookup(prefixes, place_of, mine, -1)
        return objects, places

    def with_objects(self, objects: list[list[Cube]]) -> TreePlan:
        by_depth: dict[int, list[tuple[int, int, int]]] = {}
        for i, cubes in enumerate(objects):
            for place, cube in enumerate(cubes):
                by_depth.setdefault(cube.depth, []).append((cube.prefix, i, place))
        routes = []
        for depth in range(max(by_depth, default=-1) + 1):
            entries = sorted(by_depth.get(depth, []))
            routes.append(
                tuple(np.array([e[k] for e in entries], dtype=np.int64) for k in range(3))
            )
        return replace(
            self,
            objects=tuple(tuple(c) for c in objects),
            routes=tuple(routes),  # type: ignore[arg-type]
        )

    def threshold(self, cube: Cube) -> int:
        level = self.levels[cube.depth]
        return int(level.threshold_of(np.array([cube.prefix], dtype=np.int64))[0])


# -- stage 1: place (tasks) -------------------------------------------------------------------


@dataclass(frozen=True)
class Placed:
    """One chunk's rows as the tree needs them: weights, indexed columns (conformed), extent,
    size; after :func:`coded`, Morton codes and cube depths instead of the columns."""

    chunk: int
    weights: np.ndarray
    indexed: pa.Table | None = None
    extent: Extent | None = None
    codes: np.ndarray | None = None
    depths: np.ndarray | None = None
    error: TaskError | None = None
    nbytes: int = 0  # of the rows in memory, conformed, with their weight

    def candidates(self, depth: int, dims: int, size: int) -> Candidates:
        assert self.codes is not None and self.depths is not None
        return candidates(self.codes, self.weights, self.depths, depth, dims, size)

    def cube_counts(self, dims: int) -> dict[tuple[int, int], int]:
        assert self.codes is not None and self.depths is not None
        return cube_counts(self.codes, self.depths, dims)


def _salts(job: Job, salt: int, chunk: int) -> np.random.Generator | None:
    """The generator of a salted pool's salts for one chunk (the same in every stage)."""
    assert job.otree is not None
    return np.random.default_rng([salt, chunk]) if job.otree.weight == "salted" else None


def _indexed_layout(job: Job) -> pa.Schema:
    assert job.otree is not None and job.layout is not None
    wanted = [*job.otree.columns, WEIGHT_COLUMN]
    return pa.schema([job.layout.field(c) for c in wanted if c in job.layout.names])


def _place(job: Job, salt: int, chunk: int, table: pa.Table) -> Placed:
    assert job.otree is not None and job.layout is not None
    conformed = conform_to(table, job.layout)
    # The rows' bytes in memory, as the local path measures its batch: the layout's weight
    # column, null here, counts as the four bytes a row it will hold.
    weight = conformed.column(WEIGHT_COLUMN) if WEIGHT_COLUMN in conformed.schema.names else None
    nbytes = conformed.nbytes - (0 if weight is None else weight.nbytes) + 4 * conformed.num_rows
    rows = with_weights(
        conformed.select(_indexed_layout(job).names), job.otree, _salts(job, salt, chunk)
    )
    weights = rows.column(WEIGHT_COLUMN).to_numpy().astype(np.int32)
    indexed = rows.drop_columns([WEIGHT_COLUMN])
    return Placed(chunk, weights, indexed, Extent.of(indexed, job.otree.columns), nbytes=nbytes)


def place_chunk(job: Job, salt: int) -> Callable[[Chunk], Placed]:
    def run(chunk: Chunk) -> Placed:
        try:
            return _place(job, salt, chunk.index, read_chunk(chunk))
        except Exception as exc:  # noqa: BLE001 - reported to the driver, which re-raises it
            return Placed(chunk.index, np.zeros(0, np.int32), error=TaskError.capture(exc))

    return run


def place_frame(
    job: Job, salt: int
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        part = partition_number()
        try:
            collected = list(batches)
            raw = pa.Table.from_batches(collected) if collected else None
            if raw is None or raw.num_rows == 0:
                placed = Placed(part, np.zeros(0, np.int32))
            else:
                placed = _place(job, salt, part, normalize_table(raw, DATAFRAME_NAME))
        except Exception as exc:  # noqa: BLE001 - reported to the driver, which re-raises it
            placed = Placed(part, np.zeros(0, np.int32), error=TaskError.capture(exc))
        yield pa.RecordBatch.from_pydict({"placed": [pickle.dumps(placed)]})

    return run


def coded(revision: Revision) -> Callable[[Placed], Placed]:
    """The placed rows as the threshold stage keeps them: Morton codes ascending, weights in
    the same order, no cube yet."""

    def run(placed: Placed) -> Placed:
        if placed.indexed is None:
            return Placed(placed.chunk, placed.weights, codes=_empty(), depths=np.zeros(0, np.int8))
        codes = morton(coordinates(placed.indexed, revision))
        order = np.argsort(codes, kind="stable")
        depths = np.full(len(codes), -1, dtype=np.int8)
        return Placed(placed.chunk, placed.weights[order], codes=codes[order], depths=depths)

    return run


def advanced(level: Level, depth: int, dims: int) -> Callable[[Placed], Placed]:
    def run(placed: Placed) -> Placed:
        assert placed.codes is not None and placed.depths is not None
        depths = advance(placed.codes, placed.weights, placed.depths, level, depth, dims)
        return replace(placed, depths=depths)

    return run


# -- stage 4: route and write (tasks) ---------------------------------------------------------


def _route(job: Job, plan: TreePlan, table: pa.Table, chunk: int) -> Iterator[Piece]:
    assert job.otree is not None and job.layout is not None
    rows = with_weights(conform_to(table, job.layout), job.otree, _salts(job, plan.salt, chunk))
    weights = rows.column(WEIGHT_COLUMN).to_numpy().astype(np.int32)
    codes = morton(coordinates(rows, plan.revision))
    objects, places = plan.route(codes, weights)
    if (objects < 0).any():
        raise RuntimeError(
            "rows fell in cubes the load did not plan: the input changed while loading "
            "(persist a DataFrame that is not deterministic)"
        )
    rows = rows.append_column(_POSITION, pa.array(places, pa.int32()))
    rows = rows.append_column(_CODE, pa.array(codes, pa.int64()))
    order = np.argsort(objects, kind="stable")
    sorted_objects = objects[order]
    starts = np.flatnonzero(np.r_[True, sorted_objects[1:] != sorted_objects[:-1]])
    for start, end in zip(starts, np.r_[starts[1:], len(order)], strict=True):
        part = rows.take(order[start:end])
        for i, piece in enumerate(ipc_slices(part)):
            seq = chunk * PIECES_PER_CHUNK + i
            yield int(sorted_objects[start]), (seq, to_ipc(piece, job.shuffle_compression))


def route_chunk(job: Job, plan: TreePlan) -> Callable[[Chunk], Iterator[Piece]]:
    return chunk_pieces(len(plan.objects), partial(_route, job, plan))


def route_frame(
    job: Job, plan: TreePlan
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    return frame_pieces(len(plan.objects), partial(_route, job, plan))


def _encode(
    job: Job, plan: TreePlan, bucket: int, table: pa.Table
) -> tuple[list[Block], pa.Table, bytes]:
    """The object of ``bucket`` from its rows (in source order, with their cube's place and
    Morton code): lake_core's encoder over its cubes in pre-order, rows by weight."""
    places = table.column(_POSITION).to_numpy()
    codes = table.column(_CODE).to_numpy()
    table = table.drop_columns([_POSITION, _CODE])
    weights = table.column(WEIGHT_COLUMN).to_numpy().astype(np.int32)
    order = np.lexsort((weights, places))  # stable: equal weights keep source order
    bounds = np.searchsorted(places[order], np.arange(len(plan.objects[bucket]) + 1))
    built = []
    for place, cube in enumerate(plan.objects[bucket]):
        rows = order[bounds[place] : bounds[place + 1]]
        if len(rows):
            built.append(BuiltBlock(cube, rows, int(weights[rows[0]]), plan.threshold(cube)))
    per_block = block_rows(plan.cube_size, plan.row_bytes, job.options)
    encoding = EncodeOptions(job.options.compression, dictionary_limit(job.options))
    return encode_object(table, built, weights, codes, per_block, encoding)


def _write_object(
    job: Job,
    plan: TreePlan,
    bucket: int,
    table: pa.Table,
    on_object: Callable[[ObjectMeta], None],
) -> None:
    """Object ``bucket`` of the plan, from its rows."""
    blocks, rows, payload = _encode(job, plan, bucket, table)
    object_id = new_id(SYSTEM_CLOCK)
    task_store(job.uri).put(PoolLayout(job.pool_id).data(object_id), payload)
    on_object(object_meta(object_id, rows, payload, blocks, job.key, plan.revision))


def write_object(job: Job, plan: TreePlan) -> Callable[[int, Iterable[Piece]], Iterator[Written]]:
    return bucket_writer(job, partial(_write_object, job, plan))


# -- the driver -------------------------------------------------------------------------------


def _placed_rdd(
    spark: SparkSession, job: Job, salt: int, chunks: Sequence[Chunk], frame: DataFrame | None
) -> RDD[Placed]:
    if frame is not None:
        return frame.mapInArrow(place_frame(job, salt), "placed binary").rdd.map(
            lambda row: pickle.loads(row[0])
        )
    sc = spark.sparkContext
    return sc.parallelize(list(chunks), len(chunks)).map(place_chunk(job, salt))


def write_tree(
    spark: SparkSession,
    pool: Pool,
    job: Job,
    surveys: Sequence[Survey],
    base: Sequence[ObjectMeta],
    chunks: Sequence[Chunk],
    frame: DataFrame | None,
) -> list[Written]:
    """All four stages: the objects the tasks wrote (or the errors they met), by object.
    ``base``: the live objects of the branch's tip (the revision's rows so far)."""
    plan = plan_tree(spark, pool, job, surveys, base, chunks, frame)
    sc = spark.sparkContext
    sc.setJobDescription(f"lakepool load into {pool.name}: write {len(plan.objects)} objects")
    if frame is not None:
        pairs = frame.mapInArrow(
            route_frame(job, plan), "bucket int, seq long, payload binary"
        ).rdd.map(lambda row: (row[0], (row[1], row[2])))
    else:
        pairs = sc.parallelize(list(chunks), len(chunks)).flatMap(route_chunk(job, plan))
    results: list[Written] = (
        pairs.partitionBy(len(plan.objects), by_bucket)
        .mapPartitionsWithIndex(write_object(job, plan))
        .collect()
    )
    results.sort(key=lambda r: r.bucket)
    if all(r.error is None for r in results):
        written = sum(int(o["count"]) for r in results for o in r.objects)
        if written != plan.rows:
            changed = RuntimeError(
                f"the load planned {plan.rows} rows and wrote {written}: the input changed "
                "while loading (persist a DataFrame that is not deterministic)"
            )
            results.append(Written(len(results), (), TaskError.capture(changed)))
    return results


def plan_tree(
    spark: SparkSession,
    pool: Pool,
    job: Job,
    surveys: Sequence[Survey],
    base: Sequence[ObjectMeta],
    chunks: Sequence[Chunk],
    frame: DataFrame | None,
) -> TreePlan:
    """Stages 1 to 3: the revision, the thresholds and the objects of this batch."""
    sc = spark.sparkContext
    salt = random.SystemRandom().getrandbits(63)
    sc.setJobDescription(f"lakepool load into {pool.name}: weigh and place the rows")
    placed = _placed_rdd(spark, job, salt, chunks, frame).persist(_keep())
    states: list[Any] = []  # the threshold stage's persisted states, newest last
    try:
        reports = sorted(
            placed.map(lambda p: (p.chunk, p.extent, p.error, p.nbytes)).collect(),
            key=lambda r: r[0],
        )
        for _, _, error, _ in reports:
            if error is not None:
                error.reraise()
        revision = pool.otree_revision(Extent.merge([r[1] for r in reports if r[1] is not None]))
        nbytes = sum(r[3] for r in reports)
        rows = sum(s.rows for s in surveys)
        cube_size = batch_cube_size(revision.cube_size, rows, revision_rows(list(base), revision))
        state = placed.map(coded(revision)).persist(_keep())
        states.append(state)
        dims = revision.dims
        limit = depth_limit(dims)
        levels: list[Level] = []
        for depth in range(limit + 1):
            if depth == limit:
                level = Level(_empty(), _empty())  # the deepest cubes are leaves
            else:
                sc.setJobDescription(
                    f"lakepool load into {pool.name}: cube thresholds, depth {depth}"
                )
                report = partial(Placed.candidates, depth=depth, dims=dims, size=cube_size)
                parts = state.map(report).collect()
                while len(states) > 1:  # the state before this one is not needed any more
                    states.pop(0).unpersist()
                placed.unpersist()
                level = merge_candidates(parts, cube_size)
            levels.append(level)
            state = state.map(advanced(level, depth, dims)).persist(_keep())
            states.append(state)
            if not len(level.prefixes):  # no cube overflows: every row has its cube
                break
        sc.setJobDescription(f"lakepool load into {pool.name}: count the cubes' rows")
        sizes: dict[Cube, int] = {}
        for part in state.map(lambda p: p.cube_counts(dims)).collect():
            for (depth, prefix), n in part.items():
                cube = Cube(dims, depth, prefix)
                sizes[cube] = sizes.get(cube, 0) + n
    finally:
        placed.unpersist()
        for kept in states:
            kept.unpersist()
    # Cubes roll up as on the local path (lake_core.otree.write): by the rows' bytes in memory.
    per_row = max(1, nbytes // max(1, rows))
    rollup = max(cube_size, job.options.target_size // per_row)
    plan = TreePlan(revision, cube_size, salt, tuple(levels), rows, per_row)
    return plan.with_objects(rollup_groups(sizes, rollup))
