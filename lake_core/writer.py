"""Writing data objects: sort by the pool key, split near the target size, record metadata.

Invariants:
- every object is sorted by the pool key, nulls last;
- an object is cut only where the key changes, so a run of equal keys never straddles two
  objects (an object may exceed the target size to keep a run whole); under a resolved
  ``this`` key, rows whose first column is null count as one run (they all span the top);
- row groups hold about ``seek_stride`` bytes of uncompressed data, so Parquet's row-group
  statistics act as the seek index for key-range reads;
- objects are cut near ``target_size`` (compressed) however small the target: a row group
  never holds more than the target's worth of rows, and the last group of an object is sized
  from the compressed bytes per row seen so far, so an object overshoots by little;
- objects are written with an atomic put under a fresh KSUID: a writer that dies leaves at most
  an unreferenced object (an orphan for cleanup), never a partial one.
"""

from __future__ import annotations

import math
import os
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lake_core.clock import SYSTEM_CLOCK, Clock
from lake_core.encode import EncodedGroup, EncodeOptions, GroupTap, encode_group
from lake_core.ids import new_id
from lake_core.integrity import checksum
from lake_core.layout import PoolLayout
from lake_core.objects import ObjectMeta
from lake_core.poolkey import PoolKey
from lake_core.stats import ColumnMeta, encode_value
from lake_core.stitch import MAGIC, stitch
from lake_core.stores.base import ObjectStore

DEFAULT_TARGET_SIZE = 128 * 1024 * 1024
DEFAULT_SEEK_STRIDE = 4 * 1024 * 1024
_MIN_ROWS_PER_GROUP = 1024
#: Parquet's default dictionary page limit (1 MiB) suits 64-128 MiB row groups; in seek-stride
#: row groups it never trips, so high-cardinality columns (keys, prices, comments) get a full
#: dictionary per group: about 40% more encoding time and 20% larger files on TPC-H lineitem.
#: Scaled to the stride, such columns fall back to plain encoding early and low-cardinality
#: ones keep their dictionaries.
_DICTIONARY_LIMIT_PER_STRIDE = 128


@dataclass(frozen=True)
class WriteOptions:
    """How objects are laid out. ``target_size`` is compressed bytes, approximate."""

    target_size: int = DEFAULT_TARGET_SIZE
    seek_stride: int = DEFAULT_SEEK_STRIDE
    compression: str = "snappy"


def sort_table(table: pa.Table, key: PoolKey) -> pa.Table:
    """``table`` sorted by the pool key, nulls last (stable)."""
    if table.num_rows == 0 or not key.sort_keys(table.schema):
        return table
    return table.take(key.sort_indices(table))


def dictionary_limit(options: WriteOptions) -> int:
    """The dictionary page limit for row groups of about ``options.seek_stride`` bytes."""
    return min(1 << 20, max(8 << 10, options.seek_stride // _DICTIONARY_LIMIT_PER_STRIDE))


def write_partitioned(
    store: ObjectStore,
    pool_id: str,
    table: pa.Table,
    key: PoolKey,
    options: WriteOptions,
    spec: Any,
    *,
    clock: Clock = SYSTEM_CLOCK,
    on_object: Callable[[ObjectMeta], None] | None = None,
    tap: GroupTap | None = None,
) -> list[ObjectMeta]:
    """Write ``table`` split by ``spec`` (a PartitionSpec, or None for an unpartitioned pool)
    so that no object straddles two partitions."""
    if spec is None:
        return write_objects(
            store, pool_id, table, key, options, clock=clock, on_object=on_object, tap=tap
        )
    out: list[ObjectMeta] = []
    for value, part in spec.split(table):
        out += write_objects(
            store,
            pool_id,
            part,
            key,
            options,
            clock=clock,
            on_object=on_object,
            partition=value,
            tap=tap,
        )
    return out


def key_bounds(table: pa.Table, key: PoolKey) -> tuple[list[object] | None, list[object] | None]:
    """(min, max) of a sorted table's key, ascending terms, nulls ignored."""
    present = [f for f in key.fields if f in table.schema.names]
    if not present or table.num_rows == 0:
        return None, None
    first = table.column(key.fields[0]) if key.fields[0] in present else None
    if first is None or first.null_count == table.num_rows:
        return None, None
    last_valid = table.num_rows - first.null_count - 1  # nulls sort last
    cols = key.key_columns(table)
    a = [encode_value(c.type, c[0].as_py()) for c in cols]
    b = [encode_value(c.type, c[last_valid].as_py()) for c in cols]
    return (b, a) if key.descending else (a, b)


def write_objects(
    store: ObjectStore,
    pool_id: str,
    table: pa.Table,
    key: PoolKey,
    options: WriteOptions = WriteOptions(),
    *,
    presorted: bool = False,
    clock: Clock = SYSTEM_CLOCK,
    on_object: Callable[[ObjectMeta], None] | None = None,
    partition: str | None = None,
    tags: dict[str, str] | None = None,
    tap: GroupTap | None = None,
) -> list[ObjectMeta]:
    """Write ``table`` as one or more sorted objects of pool ``pool_id``; return their metadata.
    Every object records ``partition`` (the caller has split the table by partition) and
    ``tags``. ``key`` must be resolved (:meth:`PoolKey.resolve` against the pool schema: a
    ``this`` key's order is the pool's column order, and the table's columns are laid out in
    it).

    ``on_object`` is called after each object lands (progress, and so a caller can remove what
    it wrote if a later step fails); ``tap`` sees every row group as it is encoded and every
    object as it lands (:class:`~lake_core.encode.GroupTap`).
    """
    key.require_resolved()
    if table.num_rows == 0:
        return []
    table = key.layout(table)
    with _Lazy(ENCODE_THREADS, "lake-combine") as ex:
        table = _combined(table, ex)
    order = None if presorted else _sort_order(table, key)
    return write_sorted(
        store,
        pool_id,
        _in_key_order(table, order),
        table.schema,
        key,
        options,
        clock=clock,
        on_object=on_object,
        partition=partition,
        tags=tags,
        row_bytes=max(1, table.nbytes // table.num_rows),
        tap=tap,
    )


def _combined(table: pa.Table, ex: _Lazy) -> pa.Table:
    """``table`` with each column in one chunk (gathering from many chunks is several times
    slower), the columns combined on ``ex``'s threads."""
    if all(c.num_chunks <= 1 for c in table.columns):
        return table

    def one(c: pa.ChunkedArray[Any]) -> pa.ChunkedArray[Any]:
        return c if c.num_chunks <= 1 else pa.chunked_array([c.combine_chunks()], c.type)

    columns = [ex.submit(one, c) for c in table.columns]
    return pa.Table.from_arrays([f.result() for f in columns], schema=table.schema)


#: Rows gathered into key order per step by :func:`_in_key_order`.
_GATHER_ROWS = 65_536


def _in_key_order(table: pa.Table, order: pa.Array[Any] | None) -> Iterator[pa.Table]:
    """``table``'s rows in key order, a bounded slice at a time, so the sorted table is never
    materialized whole. The calling thread gathers while the row groups already cut encode on
    threads of their own. (Gathering the next slices on more threads as well was tried twice:
    on the shared 2-vCPU VM it cost more CPU — 12-26% in the first trial — and showed no wall
    time gain.)"""
    for start in range(0, table.num_rows, _GATHER_ROWS):
        if order is None:
            yield table.slice(start, _GATHER_ROWS)
        else:
            yield table.take(order.slice(start, _GATHER_ROWS))


class _Pending:
    """Sorted rows not yet written, pulled from a stream of tables only as far as needed."""

    def __init__(self, chunks: Iterable[pa.Table]) -> None:
        self._chunks = iter(chunks)
        self._parts: deque[pa.Table] = deque()
        self.rows = 0
        self._done = False

    def fill(self, rows: int) -> None:
        while self.rows < rows and not self._done:
            t = next(self._chunks, None)
            if t is None:
                self._done = True
            elif t.num_rows:
                self._parts.append(t)
                self.rows += t.num_rows

    def empty(self) -> bool:
        self.fill(1)
        return self.rows == 0

    @property
    def exhausted(self) -> bool:
        """Every row of the stream has been pulled (``rows`` is all that is left)."""
        return self._done

    def first(self) -> pa.Table:
        self.fill(1)
        return self._parts[0]

    def take(self, rows: int) -> pa.Table:
        """The next ``rows`` rows (fewer at the end of the stream)."""
        self.fill(rows)
        out: list[pa.Table] = []
        need = rows
        while need and self._parts:
            head = self._parts[0]
            if head.num_rows <= need:
                out.append(self._parts.popleft())
                need -= head.num_rows
            else:
                out.append(head.slice(0, need))
                self._parts[0] = head.slice(need)
                need = 0
        got = sum(t.num_rows for t in out)
        self.rows -= got
        return out[0] if len(out) == 1 else pa.concat_tables(out)

    def run_length(self, key: PoolKey, prev: list[pa.Scalar[Any]]) -> int:
        """How many of the next rows have the key ``prev`` (pulling more while all do)."""
        count = 0
        i = 0
        while True:
            while i >= len(self._parts) and not self._done:
                self.fill(self.rows + 1)
            if i >= len(self._parts):
                return count
            part = self._parts[i]
            same: Any = None
            for column, p in zip(key.key_columns(part), prev, strict=True):
                col: Any = column
                eq: Any = (
                    pc.is_null(col) if not p.is_valid else pc.fill_null(pc.equal(col, p), False)
                )
                same = eq if same is None else pc.and_(same, eq)
            idx = pc.index(same, False).as_py()
            if idx != -1:
                return count + idx
            count += part.num_rows
            i += 1


def write_sorted(
    store: ObjectStore,
    pool_id: str,
    chunks: Iterable[pa.Table],
    schema: pa.Schema,
    key: PoolKey,
    options: WriteOptions = WriteOptions(),
    *,
    clock: Clock = SYSTEM_CLOCK,
    on_object: Callable[[ObjectMeta], None] | None = None,
    partition: str | None = None,
    tags: dict[str, str] | None = None,
    row_bytes: int | None = None,
    threads: int | None = None,
    tap: GroupTap | None = None,
) -> list[ObjectMeta]:
    """:func:`write_objects` of ``presorted`` rows arriving as a stream of tables of
    ``schema`` (a streaming compaction's merge): the same cutting, row groups and metadata,
    (a ``this`` key resolved, and ``schema`` in its column order),
    holding only the rows of the row groups being encoded. ``row_bytes`` sizes row groups;
    when not given (a stream of unknown length), it is taken from the first table.

    Row groups are encoded on up to ``threads`` threads at once (default
    :data:`ENCODE_THREADS`; 1 encodes on the calling thread) while the next is gathered, and
    stitched into objects (:mod:`lake_core.stitch`). Where objects are cut does not depend on
    ``threads``: an object's size so far counts the encoded bytes of all but its latest
    :data:`CUT_LAG` row groups and estimates those from the bytes per row encoded before, so
    every thread count writes the same objects, byte for byte. If encoding fails, no further
    object is written and the error is raised; objects already written were passed to
    ``on_object``."""
    key.require_resolved()
    pending = _Pending(chunks)
    if pending.empty():
        return []
    if row_bytes is None:
        head = pending.first()
        row_bytes = max(1, head.nbytes // head.num_rows)
    rows_per_group = max(
        1,
        min(
            max(_MIN_ROWS_PER_GROUP, options.seek_stride // row_bytes),
            options.target_size // row_bytes,
        ),
    )
    # A write of a few rows (a small load: one row group, one object) is written without
    # dictionaries: a fifth less time in the Parquet writer for 10 rows of lineitem.
    pending.fill(TINY_WRITE_ROWS)
    tiny = pending.exhausted and pending.rows < TINY_WRITE_ROWS
    encoding = EncodeOptions(options.compression, dictionary_limit(options), not tiny)
    key_names = [f for f in key.fields if f in schema.names]
    workers = ENCODE_THREADS if threads is None else max(1, threads)
    metas: list[ObjectMeta] = []
    with (
        _Lazy(workers, "lake-encode") as ex,
        _Lazy(2, "lake-put") as putter,  # one put in flight: collected before the next
    ):
        done = _Encoded()
        footer = 0
        building: list[Future[EncodedGroup]] = []
        landing: Future[ObjectMeta] | None = None

        def collect(f: Future[ObjectMeta] | None) -> None:
            """Wait for an object's put; note it and tell ``on_object``."""
            if f is None:
                return
            meta = f.result()
            metas.append(meta)
            if on_object is not None:
                on_object(meta)

        def submit(group: pa.Table) -> None:
            # The write's first group is waited for at once: encoded on this thread, its
            # footer walked only if its object is stitched (a write of one group never is).
            inline = done.rows == 0 and not building
            via = _INLINE if inline else ex
            building.append(
                via.submit(_encode_group, group, schema, encoding, key_names, tap, not inline)
            )

        try:
            while not pending.empty():
                building = []
                obj = _ObjectSize()
                while not pending.empty():
                    rows = rows_per_group
                    last = False
                    per_row = done.bytes_per_row()
                    if per_row is not None:
                        remaining = max(0, options.target_size - footer - obj.estimate(per_row))
                        to_target = max(1, math.ceil(remaining / per_row))
                        if to_target <= rows:
                            rows, last = to_target, True
                    group = pending.take(rows)
                    submit(group)
                    obj.pending_rows.append(group.num_rows)
                    # The very first group is waited for: its bytes per row size the rest.
                    lag = CUT_LAG if per_row is not None else 0
                    obj.settle(building, lag, done)
                    per_row = done.bytes_per_row()
                    assert per_row is not None
                    if (
                        last or obj.estimate(per_row) + footer >= options.target_size
                    ) and not pending.empty():
                        prev = [c[group.num_rows - 1] for c in key.key_columns(group)]
                        cut_key = key
                        if key.whole and not prev[0].is_valid:
                            # Rows with a null first field span the top whatever the rest
                            # holds (policy.span): one object keeps them all, so the objects
                            # a compaction writes never overlap there.
                            cut_key, prev = PoolKey(key.fields[:1], key.order), prev[:1]
                        run = pending.run_length(cut_key, prev)
                        if run:  # keep the run of equal keys whole
                            submit(pending.take(run))
                            obj.pending_rows.append(run)
                        break
                groups = [f.result() for f in building]
                building = []
                for g in groups[obj.settled :]:
                    done.add(g)
                pieces = stitch([g.fragment for g in groups])
                footer = len(pieces[-3]) + 8
                # An object is put (and fsynced) while the next one's rows are encoded; one
                # put at a time, so objects land (and are reported) in order.
                collect(landing)
                landing = None
                # The last object is put on this thread: nothing is left to overlap it with.
                via = _INLINE if pending.empty() else putter
                landing = via.submit(
                    _land, store, pool_id, pieces, groups, key, clock, partition, tags, tap
                )
            collect(landing)
            landing = None
        except BaseException:
            for f in building:
                f.cancel()
            if landing is not None:
                try:  # an object that landed is reported, so that the caller can remove it
                    collect(landing)
                except BaseException:  # noqa: BLE001, S110 - the first error is the one raised
                    pass
            raise
    return metas


def _encode_group(
    group: pa.Table,
    schema: pa.Schema,
    encoding: EncodeOptions,
    key_names: list[str],
    tap: GroupTap | None,
    walk_footer: bool,
) -> EncodedGroup:
    """:func:`~lake_core.encode.encode_group`, and the fragment's footer walked here when it
    is likely to be stitched (a group encoded on a worker: the write has more than one): on
    the encoding thread, while other groups encode, rather than on the writer's thread when
    the object is stitched, where no encoding overlaps it (a fifth of the load's samples at a
    1 MiB seek stride)."""
    encoded = encode_group(group, schema, encoding, key_names, tap)
    if walk_footer:
        encoded.fragment.footer  # noqa: B018 - walks and keeps it
    return encoded


#: A write of fewer rows than this is encoded without dictionaries (see ``write_sorted``).
TINY_WRITE_ROWS = 64
#: CPUs this process may run on (its affinity: a container's or a Spark task's share, not the
#: machine's count where the platform says).
USABLE_CPUS = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
#: Row groups encoded at once by default (pyarrow's Parquet writer releases the GIL); also what
#: other CPU-bound fan-outs of a write use (an upsert's planning).
ENCODE_THREADS = max(1, min(4, USABLE_CPUS or 1))
#: How many of an object's latest row groups its cut estimates rather than waits for: so many
#: can be encoding while the next is gathered. A constant, not the thread count, so that every
#: thread count cuts the same objects.
CUT_LAG = 4


class _Inline:
    """An executor that runs each task on the calling thread (one encoding thread)."""

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> Future[Any]:
        f: Future[Any] = Future()
        try:
            f.set_result(fn(*args))
        except BaseException as e:  # noqa: BLE001 - raised by result(), as a pool's would be
            f.set_exception(e)
        return f


_INLINE = _Inline()


class _Lazy:
    """A thread pool of ``workers`` threads started on first use (a small write — one row
    group, one object — starts none), or the calling thread when ``workers`` is 1."""

    def __init__(self, workers: int, name: str) -> None:
        self._workers = workers
        self._name = name
        self._pool: ThreadPoolExecutor | None = None

    def submit(self, fn: Callable[..., Any], /, *args: Any) -> Future[Any]:
        if self._workers == 1:
            return _INLINE.submit(fn, *args)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(self._workers, thread_name_prefix=self._name)
        return self._pool.submit(fn, *args)

    def __enter__(self) -> _Lazy:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True)


class _Encoded:
    """Bytes and rows of the row groups whose encoding was waited for, over the whole write."""

    def __init__(self) -> None:
        self.bytes = 0
        self.rows = 0

    def add(self, g: EncodedGroup) -> None:
        self.bytes += g.size
        self.rows += g.rows

    def bytes_per_row(self) -> float | None:
        return max(1.0, self.bytes / self.rows) if self.rows else None


class _ObjectSize:
    """The object being built: encoded bytes of its settled row groups, rows of the rest."""

    def __init__(self) -> None:
        self.settled = 0
        self.bytes = len(MAGIC)
        self.pending_rows: list[int] = []

    def settle(self, building: list[Future[EncodedGroup]], lag: int, done: _Encoded) -> None:
        """Wait for all but the latest ``lag`` groups, in order."""
        while self.settled < len(building) - lag:
            g = building[self.settled].result()
            self.bytes += g.size
            done.add(g)
            self.settled += 1

    def estimate(self, per_row: float) -> float:
        unsettled = sum(self.pending_rows[self.settled :])
        return self.bytes + unsettled * per_row


def _land(
    store: ObjectStore,
    pool_id: str,
    pieces: list[bytes | memoryview],
    groups: list[EncodedGroup],
    key: PoolKey,
    clock: Clock,
    partition: str | None,
    tags: dict[str, str] | None,
    tap: GroupTap | None = None,
) -> ObjectMeta:
    """Put the object stitched from ``groups`` (``pieces``), tell ``tap``, return its
    metadata. ``tap`` hears of the object while it is put (on a thread of its own: an index
    build is CPU, a put mostly waits on the disk or the network) and the put returns only
    after it; a failed put raises after ``tap`` is done (what it built is then unused)."""
    payload = b"".join(pieces)
    object_id = new_id(clock)
    meta = _object_meta(object_id, payload, groups, key, partition, tags)
    if tap is None:
        store.put(PoolLayout(pool_id).data(object_id), payload)
        return meta
    with ThreadPoolExecutor(1, thread_name_prefix="lake-tap") as ex:
        told = ex.submit(tap.landed, meta, [g.tapped for g in groups])
        try:
            store.put(PoolLayout(pool_id).data(object_id), payload)
        finally:
            error = told.exception()  # waits: no tap work outlives the write
        if error is not None:
            raise error
    return meta


def _object_meta(
    object_id: str,
    payload: bytes,
    groups: list[EncodedGroup],
    key: PoolKey,
    partition: str | None,
    tags: dict[str, str] | None,
) -> ObjectMeta:
    """The metadata of the object ``object_id`` whose bytes are ``payload``, stitched from
    ``groups``."""
    keys = pa.concat_tables([g.keys for g in groups]) if len(groups) > 1 else groups[0].keys
    lo, hi = key_bounds(keys, key)
    meta = ObjectMeta(
        id=object_id,
        min=lo,
        max=hi,
        count=sum(g.rows for g in groups),
        size=len(payload),
        columns=merge_stats([g.stats for g in groups], [g.rows for g in groups]),
        partition=partition,
        tags=dict(tags or {}),
        checksum=checksum(payload),
    )
    return meta


def _sort_order(table: pa.Table, key: PoolKey) -> pa.Array[Any] | None:
    """Row indices that sort ``table`` by the pool key (None: already in order, as input in
    time or key order often is: the rows are then sliced, not gathered — gathering a sorted
    6M-row lineitem into the order it already had took most of its load's writing thread)."""
    if table.num_rows == 0 or not key.sort_keys(table.schema):
        return None
    order = key.sort_indices(table)
    # A stable sort of rows already in order is the identity.
    if np.array_equal(order.to_numpy(zero_copy_only=False), np.arange(len(order))):
        return None
    return order


def merge_stats(parts: list[dict[str, ColumnMeta]], rows: list[int]) -> dict[str, ColumnMeta]:
    """The stats of consecutive row ranges (``rows`` each) combined: equal to
    :func:`table_meta` of the whole, or less precise, never wrong. A range whose column
    holds values but no bound (one the stats cannot encode: an infinity, a decimal) leaves
    the whole without that bound — the other ranges' bound would wrongly exclude its value
    from pruned queries; a range of nulls only has no bound and adds none. (A range of NaN
    only also has no bound, so the whole gets none where ``table_meta``, skipping NaN,
    would give the others': unknown, which prunes nothing.)"""
    if len(parts) == 1:
        return parts[0]
    out: dict[str, ColumnMeta] = {}
    for name, first in parts[0].items():
        cols = [p[name] for p in parts]
        valued = [c for c, n in zip(cols, rows, strict=True) if c.nulls < n]
        lows = [c.min for c in valued]
        highs = [c.max for c in valued]
        out[name] = ColumnMeta(
            first.type,
            min(lows) if lows and None not in lows else None,
            max(highs) if highs and None not in highs else None,
            sum(c.nulls for c in cols),
        )
    return out
