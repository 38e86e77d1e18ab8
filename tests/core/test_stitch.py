"""Row groups encoded apart and stitched into one object: the same bytes as one writer, the same
objects whatever the number of encoding threads, stats from the footer equal to computing them,
and an encoding failure that leaves nothing behind."""

from __future__ import annotations

import itertools
import random
import threading
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import lake_core.writer as writer
from lake_core import Lake
from lake_core.encode import EncodeOptions, encode_group, group_stats
from lake_core.loading import load
from lake_core.maintenance import compact
from lake_core.stats import table_meta
from lake_core.stitch import StitchError, parse_fragment, stitch
from lake_core.writer import WriteOptions, write_sorted


def _table(n: int, seed: int = 1) -> pa.Table:
    rng = random.Random(seed)
    t0 = datetime(2020, 1, 1, tzinfo=UTC)

    def maybe(v: Any) -> Any:
        return None if rng.random() < 0.1 else v

    return pa.table(
        {
            "k": pa.array(sorted(rng.randrange(-(2**40), 2**40) for _ in range(n)), pa.int64()),
            "i8": pa.array([maybe(rng.randrange(-128, 128)) for _ in range(n)], pa.int8()),
            "u64": pa.array([maybe(rng.randrange(2**64)) for _ in range(n)], pa.uint64()),
            "f": pa.array(
                [maybe(rng.choice([float("nan"), -0.0, 0.0, rng.uniform(-9, 9)])) for _ in range(n)]
            ),
            "s": pa.array(
                [maybe("é" * rng.randrange(0, 30) + str(rng.random())) for _ in range(n)]
            ),
            "ts": pa.array(
                [maybe(t0 + timedelta(microseconds=rng.randrange(10**12))) for _ in range(n)],
                pa.timestamp("us", tz="UTC"),
            ),
            "d": pa.array(
                [maybe(date(2000, 1, 1) + timedelta(rng.randrange(9000))) for _ in range(n)]
            ),
            "b": pa.array([maybe(rng.random() < 0.5) for _ in range(n)]),
            "nulls": pa.array([None] * n, pa.string()),
            "lst": pa.array([maybe([rng.randrange(9)] * rng.randrange(3)) for _ in range(n)]),
            "st": pa.array(
                [maybe({"x": rng.randrange(9), "y": str(rng.random())}) for _ in range(n)]
            ),
        }
    )


OPTIONS = EncodeOptions("snappy", 32 << 10)


def _same_rows(a: pa.Table, b: pa.Table) -> bool:
    """Equal tables, NaN equal to NaN."""

    def nan_free(t: pa.Table) -> pa.Table:
        i = t.schema.get_field_index("f")
        f = t.column(i)
        return t.set_column(i, "f", pc.if_else(pc.is_nan(f), pa.scalar(1e300), f))

    return bool(nan_free(a).equals(nan_free(b)))


def _written(groups: list[pa.Table], **options: Any) -> bytes:
    """The file one ``ParquetWriter`` (with ``options``) writes of ``groups``, each its own
    row group."""
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(sink, groups[0].schema, **options) as w:
        for g in groups:
            w.write_table(g, row_group_size=max(1, len(g)))
    return sink.getvalue().to_pybytes()


def _slices(t: pa.Table, sizes: list[int]) -> list[pa.Table]:
    out, at = [], 0
    for n in sizes:
        out.append(t.slice(at, n))
        at += n
    return out


def test_stitched_row_groups_are_the_file_one_writer_writes() -> None:
    t = _table(30_000)
    sizes = [1, 9_000, 20, 12_000, 8_979]  # offsets past 2**7, 2**14 and 2**21: long varints
    groups, at = [], 0
    for n in sizes:
        groups.append(encode_group(t.slice(at, n), t.schema, OPTIONS, ["k"]))
        at += n
    stitched = b"".join(stitch([g.fragment for g in groups]))
    assert stitched == _written(
        _slices(t, sizes),
        compression="snappy",
        dictionary_pagesize_limit=32 << 10,
        **OPTIONS.page_options(),
    )
    back = pq.ParquetFile(pa.BufferReader(stitched))
    assert back.metadata.num_row_groups == len(sizes)
    assert _same_rows(back.read(), t)


def test_page_indexes_move_with_their_row_groups() -> None:
    """Fragments with page indexes (every fragment the writer encodes has them) stitch into the
    file one writer writes — its column indexes, then its offset indexes, each offset index's
    pages moved with its chunks — with or without bloom filters behind; row groups copied out
    of a file are the file a writer writes of them alone. pyarrow reads the rows back, and
    every offset index of the result locates pages where its chunks are."""
    from lake_core.pages import file_layout, page_locations
    from lake_core.stitch import copy_row_groups

    t = _table(30_000)
    parts = _slices(t, [1, 9_000, 20, 12_000, 8_979])
    blooms = {c: {"ndv": 1_000, "fpp": 0.01} for c in ("k", "s")}

    def written(groups: list[pa.Table], **options: Any) -> bytes:
        return _written(
            groups,
            compression="snappy",
            dictionary_pagesize_limit=32 << 10,
            max_rows_per_page=1_000,
            write_page_index=True,
            **options,
        )

    whole = written(parts)
    for options in ({}, {"bloom_filter_options": blooms}):
        fragments = [parse_fragment(written([p], **options)) for p in parts]
        assert all(f.footer.groups[0].page_indexes for f in fragments)
        assert b"".join(bytes(p) for p in stitch(fragments)) == whole
    with_filters = written(parts, bloom_filter_options=blooms)
    for first, stop in ((0, 5), (1, 3), (3, 4)):
        copied = b"".join(bytes(p) for p in copy_row_groups(with_filters, first, stop))
        assert copied == written(parts[first:stop])
    back = pq.ParquetFile(pa.BufferReader(whole))
    assert _same_rows(back.read(), t)
    layout = file_layout(whole)
    for g, group in enumerate(layout.groups):
        for c, chunk in enumerate(group.chunks):
            meta = back.metadata.row_group(g).column(c)
            assert chunk.offset_index is not None
            at, length = chunk.offset_index
            pages = page_locations(whole[at : at + length])
            # The pages tile the chunk behind its dictionary page, rows in order.
            assert pages[0].offset == meta.data_page_offset == chunk.data_offset
            assert pages[0].first_row == 0
            assert all(a.offset + a.size == b.offset for a, b in itertools.pairwise(pages))
            assert all(a.first_row < b.first_row for a, b in itertools.pairwise(pages))
            start = meta.dictionary_page_offset or meta.data_page_offset
            assert pages[-1].offset + pages[-1].size == start + meta.total_compressed_size
    with pytest.raises(StitchError, match="not a Parquet file"):
        parse_fragment(b"PAR1xxxx")


def test_bloom_filters_stay_behind_when_fragments_are_stitched_or_row_groups_copied() -> None:
    """A fragment written with bloom filters stitches into the very bytes a writer without them
    writes (the filters' footer fields cut out, the next field's header re-encoded), one
    fragment or several; row groups copied out of a file with filters read back the same rows
    and locate no filter."""
    from lake_core.stitch import copy_row_groups

    t = _table(3_000)
    groups = [t.slice(0, 1_000), t.slice(1_000, 1_000), t.slice(2_000, 1_000)]
    blooms = {c: {"ndv": 1_000, "fpp": 0.01} for c in ("k", "i8", "u64", "s", "ts", "d", "nulls")}

    fragments = [parse_fragment(_written([g], bloom_filter_options=blooms)) for g in groups]
    assert all(f.filtered and len(f.footer.groups[0].filters) == len(blooms) for f in fragments)
    assert b"".join(bytes(p) for p in stitch(fragments)) == _written(groups)
    one = parse_fragment(_written(groups[:1], bloom_filter_options=blooms))
    assert b"".join(bytes(p) for p in stitch([one])) == _written(groups[:1])

    with_filters = _written(groups, bloom_filter_options=blooms)
    copied = b"".join(bytes(p) for p in copy_row_groups(with_filters, 1, 3))
    back = pq.ParquetFile(pa.BufferReader(copied))
    assert _same_rows(back.read(), t.slice(1_000, 2_000))
    for g in range(back.metadata.num_row_groups):
        for c in range(back.metadata.num_columns):
            assert back.metadata.row_group(g).column(c).bloom_filter_offset is None


def test_bytes_behind_a_fragments_chunks_other_than_its_filters_are_refused() -> None:
    """Bloom filters are the only bytes allowed between a fragment's chunks and its footer."""
    t = _table(100)
    sink = pa.BufferOutputStream()
    pq.write_table(t, sink)
    data = sink.getvalue().to_pybytes()
    footer_len = int.from_bytes(data[-8:-4], "little")
    chunks_end = len(data) - 8 - footer_len
    padded = data[:chunks_end] + b"\x00" * 16 + data[chunks_end:]
    with pytest.raises(StitchError, match="16 bytes between its chunks and footer"):
        parse_fragment(padded)


def test_stats_from_the_footer_equal_stats_computed_from_the_rows() -> None:
    t = _table(5_000, seed=2)
    for start, n in [(0, 5_000), (0, 1), (100, 7), (4_000, 1_000)]:
        group = t.slice(start, n)
        assert encode_group(group, t.schema, OPTIONS, ["k"]).stats == table_meta(group)


@pytest.mark.parametrize("length", [4_000, 4_096, 5_000, 100_000])
def test_long_strings_keep_exact_bounds(length: int) -> None:
    """Parquet leaves out (or might shorten) long min/max: a bound read from the footer must
    still be the exact one, or be computed."""
    t = pa.table({"s": ["a" * length + "z", "b", "a" * (length + 1)], "n": [1, 2, 3]})
    stats = encode_group(t, t.schema, OPTIONS, []).stats
    assert stats == table_meta(t)
    assert stats["s"].min == "a" * (length + 1) and stats["s"].max == "b"
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(sink, t.schema) as w:
        w.write_table(t)
    assert group_stats(t, w.writer.metadata) == table_meta(t)


def _write(tmp_path: Path, t: pa.Table, threads: int) -> list[tuple[Any, ...]]:
    pool = Lake.init(str(tmp_path / f"lake{threads}")).create_pool("p", "k:asc")
    options = WriteOptions(target_size=60_000, seek_stride=8_000)
    chunks = [t.slice(i, 777) for i in range(0, t.num_rows, 777)]
    metas = write_sorted(
        pool.store, pool.id, iter(chunks), t.schema, pool.config.key, options, threads=threads
    )
    out = []
    for m in metas:
        data = pool.store.get(pool.layout.data(m.id))
        out.append((m.count, m.min, m.max, m.size, m.checksum, m.columns, data))
    return out


def test_concurrent_encoding_writes_the_objects_serial_encoding_writes(tmp_path: Path) -> None:
    t = _table(40_000, seed=3)
    serial = _write(tmp_path, t, threads=1)
    assert len(serial) > 5  # many objects, each cut on estimated sizes
    for threads in (2, 4, 8):
        assert _write(tmp_path, t, threads) == serial
    rows = pa.concat_tables(pq.read_table(pa.BufferReader(o[-1])) for o in serial)
    assert _same_rows(rows, t)


def test_an_encoding_failure_in_a_worker_commits_nothing_and_leaves_no_object(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lake = Lake.init(str(tmp_path / "lake"))
    pool = lake.create_pool("c", "k:asc", target_size=30_000, seek_stride=4_096)
    rng = random.Random(5)
    for s in range(6):
        k = sorted(rng.randrange(10_000) for _ in range(3_000))
        load(pool, [pa.table({"k": k, "s": [s] * len(k), "pad": [str(x) * 3 for x in k]})])
    tip = pool.tip("main")
    rows = pool.read().sort_by([("k", "ascending"), ("s", "ascending")])
    data_before = {i.key for i in lake.store.list(f"pools/{pool.id}/data/")}
    calls = 0
    real = writer.encode_group

    def failing(*args: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 12:  # after some objects have landed
            raise OSError("disk on fire")
        return real(*args)

    landed = 0
    real_land = writer._land

    def land(*args: Any, **kwargs: Any) -> Any:
        nonlocal landed
        landed += 1
        return real_land(*args, **kwargs)

    monkeypatch.setattr(writer, "encode_group", failing)
    monkeypatch.setattr(writer, "_land", land)
    monkeypatch.setattr(writer, "ENCODE_THREADS", 4)
    with pytest.raises(OSError, match="disk on fire"):
        compact(pool)
    assert calls >= 12 and landed >= 1  # objects were written, then removed
    # The merge thread was stopped and joined on the way out, not left for the garbage
    # collector (whose close, run inside another merge's executor, once deadlocked).
    assert [t for t in threading.enumerate() if t.name == "lake-read-ahead"] == []
    assert pool.tip("main") == tip
    assert {i.key for i in lake.store.list(f"pools/{pool.id}/data/")} == data_before
    monkeypatch.setattr(writer, "encode_group", real)
    result = compact(pool)
    assert result.objects_out > 1
    assert pool.read().sort_by([("k", "ascending"), ("s", "ascending")]).equals(rows)


def test_input_already_in_key_order_is_sliced_and_writes_what_gathering_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Rows already in key order are written as slices, not gathered (``writer._sort_order``
    is None): the same objects, byte for byte, as the same rows shuffled and sorted."""
    t = _table(20_000, seed=9)  # distinct keys: shuffled and sorted again, the same order
    shuffled = t.take(pa.array(random.Random(2).sample(range(t.num_rows), t.num_rows)))
    pool = Lake.init(str(tmp_path / "lake")).create_pool("p", "k:asc")
    options = WriteOptions(target_size=60_000, seek_stride=8_000)
    orders: list[Any] = []
    real_order = writer._sort_order

    def recording_order(table: pa.Table, key: Any) -> Any:
        orders.append(real_order(table, key))
        return orders[-1]

    monkeypatch.setattr(writer, "_sort_order", recording_order)

    def write(table: pa.Table) -> list[bytes]:
        metas = writer.write_objects(pool.store, pool.id, table, pool.config.key, options)
        return [pool.store.get(pool.layout.data(m.id)) for m in metas]

    from_sorted = write(t)
    from_shuffled = write(shuffled)
    assert orders[0] is None and orders[1] is not None  # sliced, then gathered
    assert len(from_sorted) > 3 and from_sorted == from_shuffled


def test_a_walked_footer_gives_back_the_writers_bytes() -> None:
    """Walking a footer pyarrow wrote and listing its row groups again, unmoved, gives its bytes
    exactly: every type of the table above (nested, nulls, statistics with long binary bounds),
    more than 15 row groups (the long list header), key-value metadata. Its groups moved to
    other places are the groups a writer writes there (``copy_row_groups`` of every group of a
    file is the file). Truncated, it is refused."""
    import struct as st

    from lake_core.stitch import copy_row_groups, read_footer

    t = _table(5000, seed=4)
    for options in (
        {},
        {"compression": "zstd", "use_dictionary": False},
        {"max_rows_per_page": 100, "write_page_index": True},
    ):
        sink = pa.BufferOutputStream()
        pq.write_table(t, sink, row_group_size=300, **options)
        data = sink.getvalue().to_pybytes()
        (length,) = st.unpack("<I", data[-8:-4])
        footer_bytes = data[len(data) - 8 - length : len(data) - 8]
        footer = read_footer(data)
        assert len(footer.groups) == 17
        assert footer.with_groups(footer.groups, [0] * 17) == footer_bytes
        assert b"".join(copy_row_groups(data, 0, 17, footer)) == data
        with pytest.raises(StitchError):
            read_footer(data[: len(data) - 8 - length // 2] + data[-8:])
    # Bytes that read as structs nested thousands deep: refused, not a RecursionError.
    deep = b"\x1c" * 5000
    with pytest.raises(StitchError, match="nested too deep"):
        read_footer(b"PAR1" + deep + st.pack("<I", len(deep)) + b"PAR1")


class _Tap:
    """A GroupTap recording what it hears; ``fail`` makes ``landed`` raise."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.landed_ids: list[str] = []
        self.done = threading.Event()

    def writer_options(self, schema: pa.Schema, rows: int) -> dict[str, Any]:
        return {"bloom_filter_options": {"s": {"ndv": rows, "fpp": 0.01}}}

    def group(self, rows: pa.Table, data: memoryview, meta: pq.FileMetaData) -> int:
        # The fragment holds the filter asked for (which the object will not).
        chunk = meta.row_group(0).column(rows.schema.get_field_index("s"))
        assert chunk.path_in_schema == "s" and chunk.bloom_filter_length > 32
        assert chunk.bloom_filter_offset + chunk.bloom_filter_length <= len(data)
        return rows.num_rows

    def landed(self, meta: Any, groups: list[Any]) -> None:
        assert sum(groups) == meta.count
        self.landed_ids.append(meta.id)
        self.done.set()
        if self.fail:
            raise ValueError("tap failed")


def test_the_tap_hears_each_object_while_it_is_put_and_errors_reach_the_writer(
    tmp_path: Path,
) -> None:
    """``_land`` tells the tap on a thread of its own while the object is put: the write
    returns (or raises) only after the tap is done; a tap's error is the write's error; a
    failed put's error wins, after the tap has finished."""
    t = _table(6_000, seed=4)
    pool = Lake.init(str(tmp_path / "lake")).create_pool("p", "k:asc")
    options = WriteOptions(target_size=60_000, seek_stride=8_000)

    def write(tap: _Tap, store: Any = None) -> list[Any]:
        return write_sorted(
            store or pool.store, pool.id, iter([t]), t.schema, pool.config.key, options, tap=tap
        )

    tap = _Tap()
    metas = write(tap)
    assert tap.landed_ids == [m.id for m in metas] and len(metas) > 1
    for meta in metas:  # the filters the tap asked for stayed out of the objects
        file = pq.ParquetFile(pa.BufferReader(pool.store.get(pool.layout.data(meta.id))))
        assert file.metadata.num_row_groups > 1
        for g in range(file.metadata.num_row_groups):
            chunks = file.metadata.row_group(g)
            assert all(
                chunks.column(c).bloom_filter_offset is None for c in range(chunks.num_columns)
            )
    with pytest.raises(ValueError, match="tap failed"):
        write(_Tap(fail=True))

    class FailingPut:
        def __init__(self, inner: Any, tap: _Tap) -> None:
            self.inner, self.tap = inner, tap

        def put(self, key: str, data: Any) -> None:
            assert self.tap.done.wait(10)  # the tap runs while the put is under way
            raise OSError("put failed")

        def __getattr__(self, name: str) -> Any:
            return getattr(self.inner, name)

    slow = _Tap(fail=True)
    with pytest.raises(OSError, match="put failed"):
        write(slow, FailingPut(pool.store, slow))
    assert len(slow.landed_ids) == 1
    assert [th for th in threading.enumerate() if th.name.startswith("lake-tap")] == []
