"""Streaming k-way merge of tables already sorted by the pool key, and read-ahead.

Invariants of :func:`merge_sorted`:

- the output, concatenated, is exactly the stable sort of the sources concatenated in the given
  order: rows by the pool key (nulls last, in either direction), equal keys by source, then by
  position within the source — what sorting everything at once gives, without holding it;
- memory is bounded by the window: each source holds at most about two batches decoded plus
  one batch being read ahead, and each step emits one sorted piece of at most the window;
- every step makes progress: at least the whole buffer of one source is emitted.

How a step works: every source still being read has its buffer filled to at least one batch;
the buffers, in source order, form the window, which is sorted stably. Of each source's last
buffered row, the one first in that order is the bound: every row a source has not yet
delivered comes after its own last buffered row, so after the bound too — the rows up to the
bound are final and are emitted; the rest stay buffered for the next step.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Generator, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lake_core.poolkey import PoolKey

T = TypeVar("T")

#: Bytes a merge window aims at over all sources together, counted as Parquet's uncompressed
#: size (which dictionary encoding makes 2-3x smaller than the decoded Arrow rows).
DEFAULT_WINDOW_BYTES = 16 << 20


def batch_rows(row_bytes: float, sources: int, window_bytes: int = DEFAULT_WINDOW_BYTES) -> int:
    """Rows per source batch so that ``sources`` batches fill about ``window_bytes`` (256 to
    65,536 rows: tiny batches would make every merge step pay per-step overhead)."""
    return int(max(256, min(1 << 16, window_bytes // max(1, sources) / max(1.0, row_bytes))))


def _next(it: Iterator[pa.Table]) -> pa.Table | None:
    return next(it, None)


def merge_sorted(
    sources: Sequence[Iterator[pa.Table]],
    key: PoolKey,
    schema: pa.Schema,
    *,
    threads: int = 4,
) -> Iterator[pa.Table]:
    """Merge ``sources`` (each yields tables of ``schema``, sorted by ``key``; the size of
    their tables sets how much each keeps buffered) into sorted tables. Sources are advanced on up to
    ``threads`` threads, one batch ahead (Parquet decoding releases the GIL); a source's
    iterator is only ever advanced by one thread at a time."""
    k = len(sources)
    sort_keys = key.sort_keys(schema)
    key_names = [f for f in key.names(schema) if f in schema.names]
    with ThreadPoolExecutor(max_workers=max(1, min(threads, k))) as ex:
        ahead: list[Future[pa.Table | None] | None] = [ex.submit(_next, it) for it in sources]
        bufs: list[pa.Table | None] = [None] * k
        # A source's buffer is topped up to its largest batch so far before each step: were
        # it refilled only when empty, a few leftover rows would make every step a small one.
        want = [1] * k
        try:
            while True:
                for j in range(k):
                    _fill(j, sources, ahead, bufs, want, ex)
                live = [j for j in range(k) if bufs[j] is not None]
                if not live:
                    return
                parts = [bufs[j] for j in live]
                sizes = np.array([p.num_rows for p in parts if p is not None], dtype=np.int64)
                ends = np.cumsum(sizes)
                window = pa.concat_tables([p for p in parts if p is not None])
                n = window.num_rows
                if sort_keys:
                    keys = window.select(key_names).combine_chunks()
                    order = pc.sort_indices(keys, sort_keys=sort_keys).to_numpy()
                else:
                    order = np.arange(n, dtype=np.int64)
                waiting = [i for i, j in enumerate(live) if ahead[j] is not None]
                if waiting:
                    rank = np.empty(n, dtype=np.int64)
                    rank[order] = np.arange(n, dtype=np.int64)
                    cut = int(rank[ends[waiting] - 1].min()) + 1
                else:
                    cut = n
                emit = order[:cut]
                yield window.take(pa.array(emit))
                taken = np.bincount(np.searchsorted(ends, emit, side="right"), minlength=len(live))
                for i, j in enumerate(live):
                    buf = bufs[j]
                    assert buf is not None
                    rest = buf.slice(int(taken[i]))
                    bufs[j] = rest if rest.num_rows else None
        finally:
            for f in ahead:
                if f is not None:
                    f.cancel()


def _fill(
    j: int,
    sources: Sequence[Iterator[pa.Table]],
    ahead: list[Future[pa.Table | None] | None],
    bufs: list[pa.Table | None],
    want: list[int],
    ex: ThreadPoolExecutor,
) -> None:
    """Top source ``j``'s buffer up to ``want[j]`` rows from its read-ahead, reading the next batch
    ahead each time; ``ahead[j]`` becomes None once the source is exhausted."""
    buf = bufs[j]
    have = 0 if buf is None else buf.num_rows
    pieces = [] if buf is None else [buf]
    while have < want[j]:
        fut = ahead[j]
        if fut is None:
            break
        got = fut.result()
        if got is None:
            ahead[j] = None
            break
        ahead[j] = ex.submit(_next, sources[j])
        want[j] = max(want[j], got.num_rows)
        if got.num_rows:
            pieces.append(got)
            have += got.num_rows
    if pieces:
        bufs[j] = pieces[0] if len(pieces) == 1 else pa.concat_tables(pieces)


class KeepLast:
    """Drops, from a stream of tables sorted by ``key`` (a stable merge: equal keys in source
    order, then row order), every row whose next row has an equal key
    (:meth:`PoolKey.same_as_next`): what is left is the last row of each key — the newest
    when the sources are in the order they were added. Rows with a null named key are all
    kept (they equal nothing). ``removed`` counts the rows dropped so far. The last row of
    each table is held back until the next table shows whether its key goes on."""

    def __init__(self, key: PoolKey) -> None:
        self.key = key
        self.removed = 0

    def __call__(self, pieces: Iterator[pa.Table]) -> Iterator[pa.Table]:
        carry: pa.Table | None = None
        for piece in pieces:
            if piece.num_rows == 0:
                continue
            table = piece if carry is None else pa.concat_tables([carry, piece])
            n = table.num_rows
            same = self.key.same_as_next(table)
            self.removed += int(same.sum())
            carry = table.slice(n - 1)
            body = table.slice(0, n - 1)
            if same.any():
                body = body.filter(pa.array(~same))
            if body.num_rows:
                yield body
        if carry is not None:
            yield carry


_DONE = object()


def read_ahead(items: Iterator[T], depth: int = 2) -> Generator[T, None, None]:
    """``items`` produced on a thread, up to ``depth`` ahead of the consumer (so a merge runs
    while the previous piece is being encoded). An exception in the producer is raised here;
    a consumer that stops early stops the producer."""
    q: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def produce() -> None:
        try:
            for item in items:
                while not stop.is_set():
                    try:
                        q.put(item, timeout=0.1)
                        break
                    except queue.Full:
                        continue
                if stop.is_set():
                    return
            q.put((_DONE, None))
        except BaseException as e:  # handed to the consumer, which re-raises it
            q.put((_DONE, e))

    t = threading.Thread(target=produce, name="lake-read-ahead", daemon=True)
    t.start()
    try:
        while True:
            item = q.get()
            if isinstance(item, tuple) and len(item) == 2 and item[0] is _DONE:
                if item[1] is not None:
                    raise item[1]
                return
            yield item
    finally:
        stop.set()
        while t.is_alive():  # unblock a producer waiting to put
            try:
                q.get(timeout=0.1)
            except queue.Empty:
                pass
        t.join()
        close = getattr(items, "close", None)
        if close is not None:
            close()
