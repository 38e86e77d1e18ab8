"""Bloom indexes of version 2: Parquet's split-block bloom filters, built by the writer as a load
encodes (``lake_core.indexes.sbbf``). For every column type they cover, on local disk and moto
S3: a load's index is version 2, the same bytes that building it from the object's file gives
(``lake index apply``), finds every value in its row group, rules out most absent values; a
lookup through the scan returns the exact rows; the object itself holds no filter."""

from __future__ import annotations

import io
import random
import sys
from collections.abc import Callable
from datetime import date, timedelta
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lake_core.integrity
from lake_core import Lake
from lake_core.indexes import sbbf
from lake_core.indexes.apply import apply_rule, remove_rule
from lake_core.indexes.building import index_key
from lake_core.indexes.kinds import BLOOM, build_index, describe, index_row_groups

ROWS = 3_000


#: (name, Arrow type, a random value, the edges of the type's range).
TYPES: list[tuple[str, pa.DataType, Callable[[random.Random], Any], tuple[Any, ...]]] = [
    ("int8", pa.int8(), lambda r: r.randrange(-128, 128), (-128, 127, 0)),
    ("int16", pa.int16(), lambda r: r.randrange(-(2**15), 2**15), (-(2**15), 2**15 - 1)),
    ("int32", pa.int32(), lambda r: r.randrange(-(2**31), 2**31), (-(2**31), 2**31 - 1)),
    ("uint8", pa.uint8(), lambda r: r.randrange(256), (0, 255)),
    ("uint16", pa.uint16(), lambda r: r.randrange(2**16), (0, 2**16 - 1)),
    ("uint32", pa.uint32(), lambda r: r.randrange(2**32), (0, 2**31, 2**32 - 1)),
    ("int64", pa.int64(), lambda r: r.randrange(-(2**63), 2**63), (-(2**63), 2**63 - 1)),
    # A load refuses uint64 values above int64's range (lake_core.ingest.types).
    ("uint64", pa.uint64(), lambda r: r.randrange(2**63), (0, 2**63 - 1)),
    (
        "date32",
        pa.date32(),
        lambda r: date(1970, 1, 1) + timedelta(days=r.randrange(-5_000, 30_000)),
        (date(1, 1, 1), date(9999, 12, 31)),
    ),
    ("string", pa.string(), lambda r: f"é{r.randrange(10**6)}", ("", "✓" * 40)),
    ("large_string", pa.large_string(), lambda r: f"s{r.randrange(10**6)}", ("",)),
    ("string_view", pa.string_view(), lambda r: f"a view of {r.randrange(10**6)}", ("",)),
    ("binary", pa.binary(), lambda r: r.randbytes(r.randrange(12)), (b"", b"\x00")),
    ("large_binary", pa.large_binary(), lambda r: r.randbytes(5), (b"\xff" * 5,)),
    ("fixed4", pa.binary(4), lambda r: r.randbytes(4), (b"\x00" * 4, b"\xff" * 4)),
    ("dictionary", pa.dictionary(pa.int32(), pa.string()), lambda r: f"d{r.randrange(50)}", ()),
]


def _table(value_type: pa.DataType, draw: Callable[[random.Random], Any], edges: tuple[Any, ...]):
    rng = random.Random(str(value_type))
    values = [
        None
        if rng.random() < 0.05
        else (rng.choice(edges) if edges and rng.random() < 0.1 else draw(rng))
        for _ in range(ROWS)
    ]
    if pa.types.is_dictionary(value_type):
        column: Any = pa.array(values, pa.string()).dictionary_encode()
    else:
        column = pa.array(values, value_type)
    return pa.table({"ts": pa.array(range(ROWS), pa.int64()), "v": column}), values


def _no_read_back(*args: Any, **kwargs: Any) -> Any:
    raise AssertionError("a load read one of its objects back to index it")


@pytest.mark.parametrize("case", TYPES, ids=[t[0] for t in TYPES])
def test_a_loads_filters_find_every_value_of_every_covered_type(
    lake: Lake, case: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    _, value_type, draw, edges = case
    table, values = _table(value_type, draw, edges)
    lake.create_pool("p", "ts:asc", seek_stride=4096)
    lake.create_index_rule("by_v", "v", "bloom")
    pool = lake.pool("p")
    # A tripwire, not a stand-in: the load must index from the writer's filters.
    monkeypatch.setattr(lake_core.integrity, "open_verified", _no_read_back)
    pool.load(table)
    monkeypatch.undo()
    snap = pool.snapshot(pool.tip())
    (obj,) = snap.objects.values()
    meta = snap.indexes[(obj.id, "by_v")]
    data = pool.store.get(index_key(pool.id, meta))
    info = describe(data)
    assert info.version == 2 and info.entries == sum(v is not None for v in values)

    file = pq.ParquetFile(io.BytesIO(pool.store.get(pool.layout.data(obj.id))))
    groups = file.metadata.num_row_groups
    assert groups >= 3
    columns = [file.read_row_group(g, columns=["v"]).column(0) for g in range(groups)]
    # The writer's filters are the ones building from the file gives (``lake index apply``).
    assert build_index(BLOOM, columns) == data
    for g in range(groups):
        assert all(file.metadata.row_group(g).column(c).bloom_filter_offset is None for c in (0, 1))

    column_type = file.schema_arrow.field("v").type
    rng = random.Random(1)
    for g, column in enumerate(columns):
        present = [v for v in column.to_pylist() if v is not None]
        for v in rng.sample(present, min(40, len(present))):
            found = index_row_groups(BLOOM, data, pa.array([v], column_type))
            assert found is not None and g in found, (g, v)
    if pa.types.is_dictionary(value_type) or value_type in (pa.uint8(), pa.int8()):
        return  # too few values outside the column's to rule anything out
    held = set(values)
    absent = list(dict.fromkeys(v for v in (draw(rng) for _ in range(600)) if v not in held))
    assert len(absent) >= 300
    maybe = sum(
        len(index_row_groups(BLOOM, data, pa.array([v], column_type)) or ()) for v in absent
    )
    assert maybe < 0.1 * len(absent) * groups  # about 1% asked (pyarrow rounds filters up)


@pytest.mark.parametrize(
    ("value_type", "needle", "literal"),
    [
        # Inside every object's min/max (so statistics rule nothing out), with the bit
        # patterns that differ by type: a uint32 above 2**31 (negative as Parquet's int32), a
        # negative int32, a uint64 above 2**62, a string with a quote and non-ASCII.
        (pa.uint32(), 3_000_000_001, "3000000001"),
        (pa.int32(), -123_456_789, "-123456789"),
        (pa.uint64(), 6_000_000_000_000_000_001, "6000000000000000001"),
        (pa.string(), "é5 it's ✓", "'é5 it''s ✓'"),
    ],
    ids=["uint32", "int32", "uint64", "string"],
)
def test_lookups_through_the_scan_return_the_exact_rows(
    lake: Lake, value_type: pa.DataType, needle: Any, literal: str
) -> None:
    """A value planted in one row group of one of three objects: the scan reads that object
    only (the other two and most row groups ruled out by the index), and the rows are exact."""
    rng = random.Random(3)
    lake.create_pool("p", "ts:asc", seek_stride=2048)
    lake.create_index_rule("by_v", "v", "bloom")
    pool = lake.pool("p")
    draw = next(t[2] for t in TYPES if t[1] == value_type)
    for i in range(3):
        values = [draw(rng) for _ in range(ROWS)]
        values = [None if v == needle else v for v in values]
        if i == 1:
            values[1_700] = values[1_702] = needle
        pool.load(
            pa.table(
                {"ts": pa.array(range(i * ROWS, (i + 1) * ROWS)), "v": pa.array(values, value_type)}
            )
        )
    scan = pool.scan(where=f"v = {literal}")
    table = pa.Table.from_batches(list(scan.batches()), schema=scan.out_schema)
    assert sorted(table["ts"].to_pylist()) == [ROWS + 1_700, ROWS + 1_702]
    stats = scan.stats.to_json()
    assert stats["objects_read"] == 1 and stats["index_objects_pruned"] == 2
    assert stats["index_row_groups_pruned"] >= 1


def test_filter_bytes_that_are_not_a_split_block_filter_are_refused() -> None:
    """The header must say block algorithm, xxHash, uncompressed, and match its bits."""
    table = pa.table({"v": pa.array(["a", "b"])})
    sink = io.BytesIO()
    pq.write_table(table, sink, bloom_filter_options=sbbf.writer_options({"v": 0.01}, 2))
    data = sink.getvalue()
    meta = pq.ParquetFile(io.BytesIO(data)).metadata
    chunk = meta.row_group(0).column(0)
    raw = data[chunk.bloom_filter_offset : chunk.bloom_filter_offset + chunk.bloom_filter_length]
    bits = sbbf.filter_bits(raw)
    assert len(bits) % sbbf.BLOCK_BYTES == 0 and any(bits)
    for bad in (b"", raw[:-1], raw[:3] + b"\x2c" + raw[4:], b"\x16" + raw[1:]):
        with pytest.raises(ValueError):
            sbbf.filter_bits(bad)


def test_a_load_and_apply_make_the_same_indexes_of_two_rules_and_of_an_all_null_field(
    lake: Lake,
) -> None:
    """Two bloom rules on one field at different rates (the writer builds one filter, at the
    lower rate) and a bloom rule on a field null in every row: each index a load makes is the
    one ``lake index apply`` makes afterwards, byte for byte."""
    rng = random.Random(9)
    lake.create_pool("p", "ts:asc", seek_stride=4096)
    lake.create_index_rule("fine", "v", "bloom", fpp=0.01)
    lake.create_index_rule("coarse", "v", "bloom", fpp=0.05)
    lake.create_index_rule("empty", "nothing", "bloom")
    pool = lake.pool("p")
    values = [f"w{rng.randrange(10**6)}" for _ in range(ROWS)]
    pool.load(
        pa.table({"ts": pa.array(range(ROWS)), "v": pa.array(values), "nothing": pa.nulls(ROWS)})
    )

    def indexes() -> dict[str, tuple[int, float | None, bytes]]:
        snap = pool.snapshot(pool.tip())
        out = {}
        for (_, rule), meta in snap.indexes.items():
            data = pool.store.get(index_key(pool.id, meta))
            out[rule] = (describe(data).version, describe(data).fpp, data)
        return out

    loaded = indexes()
    assert {r: v[:2] for r, v in loaded.items()} == {
        "fine": (2, 0.01),
        "coarse": (2, 0.05),
        "empty": (1, 0.01),
    }
    for rule in pool.index_rules:
        remove_rule(pool, rule.name)
        assert rule.name not in indexes()
        apply_rule(pool, rule)
    assert indexes() == loaded


def test_many_values_are_checked_at_once_as_one_at_a_time() -> None:
    """``may_contain_all`` (long IN lists) answers what ``may_contain`` answers per value, for
    every bucket of a filter cut as an index object cuts it."""
    rng = random.Random(4)
    held = [f"x{rng.randrange(10**9)}" for _ in range(20_000)]
    (bits,) = sbbf.column_filters([pa.array(held)], 0.01)
    blocks = len(bits) // sbbf.BLOCK_BYTES
    probes = held[:500] + [f"y{i}" for i in range(2_000)]
    hashes = np.array([sbbf.hash_of(v, "bytes") for v in probes], dtype=np.uint64)
    for bucket_bits in (0, 3):
        bucket_of = (hashes >> np.uint64(64 - bucket_bits)) if bucket_bits else hashes * 0
        for bucket in range(1 << bucket_bits):
            first, end = sbbf.bucket_blocks(blocks, bucket_bits, bucket)
            part = bits[first * sbbf.BLOCK_BYTES : end * sbbf.BLOCK_BYTES]
            mine = hashes[bucket_of == np.uint64(bucket)]
            at_once = sbbf.may_contain_all(part, first, blocks, mine).tolist()
            assert at_once == [sbbf.may_contain(part, first, blocks, int(h)) for h in mine]
    assert all(sbbf.may_contain(bits, 0, blocks, int(h)) for h in hashes[:500])


def test_without_the_hash_library_a_lookup_cannot_tell(monkeypatch: pytest.MonkeyPatch) -> None:
    """A lookup that cannot hash (``xxhash`` missing) answers None: the object is read
    unpruned, never a failed read or a lost row."""
    data = build_index(BLOOM, [pa.array(["a"]), pa.array(["b"])])
    assert index_row_groups(BLOOM, data, pa.array(["b"])) == frozenset({1})
    monkeypatch.setitem(sys.modules, "xxhash", None)  # import xxhash raises ImportError
    assert index_row_groups(BLOOM, data, pa.array(["b"])) is None
