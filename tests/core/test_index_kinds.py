"""The index objects' bytes (lake_core/indexes/kinds.py): every indexable type round-trips, a
lookup never misses a row group holding its value (property test), exact answers exactly,
bloom's false-positive rate is what it was sized for, and bytes that are not an index (or an
index of another hash) are refused or answered "cannot tell"."""

from __future__ import annotations

import datetime as dt
import io
import json
import random
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lake_core.errors import CorruptObjectError, UsageError
from lake_core.indexes.canonical import canonical, check_indexable
from lake_core.indexes.kinds import (
    BLOOM,
    EXACT,
    bloom_answers,
    build_index,
    describe,
    index_row_groups,
)

UTC = dt.UTC

CASES: list[tuple[pa.DataType, list[Any]]] = [
    (pa.int8(), [1, -1, None, 127]),
    (pa.uint64(), [0, 2**63 + 5, 2**64 - 1, None]),
    (pa.bool_(), [True, False, None]),
    (pa.float32(), [0.5, -0.0, 1e30, None]),
    (pa.float64(), [0.0, -2.5, 3.25, None]),
    (pa.string(), ["", "a", "ünï ✓", None]),
    (pa.large_string(), ["x" * 200, "y", None]),
    (pa.string_view(), ["view", "", None]),
    (pa.binary(), [b"", b"\x00\xff", None]),
    (pa.binary(3), [b"abc", b"\x00\x00\x01", None]),
    (pa.date32(), [dt.date(2020, 1, 1), dt.date(1969, 12, 31), None]),
    (pa.timestamp("us", "UTC"), [dt.datetime(2024, 5, 1, 12, tzinfo=UTC), None]),
    (pa.timestamp("s"), [dt.datetime(2001, 1, 1), dt.datetime(1900, 1, 1)]),
    (pa.time64("us"), [dt.time(12, 30), None]),
    (pa.duration("ms"), [dt.timedelta(seconds=5), None]),
]


@pytest.mark.parametrize("kind", [EXACT, BLOOM])
@pytest.mark.parametrize(("data_type", "values"), CASES, ids=[str(c[0]) for c in CASES])
def test_every_indexable_type_round_trips(
    kind: str, data_type: pa.DataType, values: list[Any]
) -> None:
    groups = [pa.array(values[:2], data_type), pa.array(values[2:], data_type)]
    data = build_index(kind, groups)
    info = describe(data)
    assert (info.kind, info.row_groups) == (kind, 2)
    for i, group in enumerate(groups):
        for v in group.to_pylist():
            got = index_row_groups(kind, data, pa.array([v], data_type))
            assert got is not None
            if v is None:
                assert got == frozenset()  # = NULL matches nothing
            else:
                assert i in got
                if kind == EXACT:
                    assert got == {j for j, g in enumerate(groups) if v in g.to_pylist()}


def test_dictionaries_negative_zero_and_chunked_arrays() -> None:
    dictionary = pa.array(["a", "b", "a", None]).dictionary_encode()
    data = build_index(EXACT, [dictionary, pa.chunked_array([["c"], ["a"]])])
    assert index_row_groups(EXACT, data, pa.array(["a"])) == {0, 1}
    assert index_row_groups(EXACT, data, pa.array(["b"])) == {0}
    assert index_row_groups(EXACT, data, pa.array(["zz"])) == frozenset()
    zeros = build_index(BLOOM, [pa.array([-0.0]), pa.array([1.0])])
    assert 0 in index_row_groups(BLOOM, zeros, pa.array([0.0]))  # type: ignore[operator]
    assert canonical(pa.array([-0.0])).to_pylist() == [0.0]
    assert canonical(pa.array([2**64 - 1], pa.uint64())).to_pylist() == [-1]


def test_unindexable_types_are_refused() -> None:
    for t in (pa.struct([("x", pa.int64())]), pa.list_(pa.int64()), pa.decimal128(10, 2)):
        with pytest.raises(UsageError, match="cannot be indexed|indexes cover"):
            check_indexable(pa.field("f", t))
        with pytest.raises(UsageError):
            build_index(EXACT, [pa.array([], t)])
    with pytest.raises(UsageError):
        build_index("hash", [pa.array([1])])


@settings(max_examples=60, deadline=None)
@given(
    data=st.lists(st.lists(st.one_of(st.none(), st.integers(-50, 50)), max_size=30), max_size=8),
    probes=st.lists(st.integers(-60, 60), min_size=1, max_size=5),
    as_text=st.booleans(),
)
def test_lookups_never_miss_and_exact_is_exact(
    data: list[list[int | None]], probes: list[int], as_text: bool
) -> None:
    conv = (lambda v: None if v is None else f"v{v}") if as_text else (lambda v: v)
    groups = [pa.array([conv(v) for v in g], pa.string() if as_text else pa.int64()) for g in data]
    lookup = pa.array([conv(p) for p in probes], pa.string() if as_text else pa.int64())
    truth = {i for i, g in enumerate(data) if set(g) & set(probes)}
    exact = index_row_groups(EXACT, build_index(EXACT, groups), lookup)
    bloom = index_row_groups(BLOOM, build_index(BLOOM, groups), lookup)
    assert exact == truth
    assert bloom is not None and truth <= bloom


@pytest.mark.parametrize("version", [1, 2])
def test_bloom_false_positive_rate_is_near_its_target(version: int) -> None:
    """Version 1 filters are sized for the rate (within 10% of the smallest filter); version 2
    are Parquet's split-block filters, whose size pyarrow rounds up to a power of two (at most
    twice the size the rate needs, so the rate is at most the target)."""
    rng = np.random.default_rng(1)
    present = rng.choice(10**9, 20_000, replace=False)
    groups = [pa.array(present[i::4]) for i in range(4)]  # 5,000 distinct per row group
    absent = pa.array(np.arange(10**9 + 1, 10**9 + 1 + 20_000))
    for fpp in (0.01, 0.05):
        data = build_index(BLOOM, groups, fpp=fpp, version=version)
        assert describe(data).version == version
        maybe = bloom_answers(data, absent)  # each absent value asked of every row group
        rate = float(maybe.mean())
        assert rate < 2 * fpp, (fpp, rate)
        if version == 1:
            bits_per_value = -np.log(fpp) / np.log(2) ** 2
            slack, footer = 1.1, 4096
        else:  # the split-block filter's bits for the rate (parquet-format's BloomFilter.md)
            bits_per_value = -8 / np.log(1 - fpp ** (1 / 8))
            slack, footer = 2.0, 8192  # more buckets, so more index row groups in the footer
        assert len(data) < 20_000 * slack * bits_per_value / 8 + footer
        assert bloom_answers(data, pa.array(present)).any(axis=1).all()  # no false negative


def test_foreign_bytes_and_other_hashes() -> None:
    for junk in (b"", b"not parquet", b"PAR1" * 10):
        with pytest.raises(CorruptObjectError):
            index_row_groups(EXACT, junk, pa.array([1]))
    plain = io.BytesIO()
    pq.write_table(pa.table({"value": [1], "rg": pa.array([0], pa.int32())}), plain)
    with pytest.raises(CorruptObjectError, match="header"):
        describe(plain.getvalue())
    data = build_index(BLOOM, [pa.array([1, 2, 3])], version=1)
    # The same index under another hash fingerprint: the lookup cannot tell.
    table = pq.read_table(io.BytesIO(data))
    header = json.loads(table.schema.metadata[b"lakepool.index"])
    header["fingerprint"] = "0" * 16
    forged = io.BytesIO()
    pq.write_table(table.replace_schema_metadata({b"lakepool.index": json.dumps(header)}), forged)
    assert index_row_groups(BLOOM, forged.getvalue(), pa.array([1])) is None
    assert index_row_groups(EXACT, data, pa.array([1])) is None  # asked as another kind


def test_exact_lookup_reads_one_index_row_group() -> None:
    rng = random.Random(4)
    groups = [pa.array([rng.randrange(10**9) for _ in range(20_000)]) for _ in range(8)]
    data = build_index(EXACT, groups)
    pf = pq.ParquetFile(io.BytesIO(data))
    assert pf.metadata.num_row_groups >= 4  # small index row groups
    probe = groups[3][17].as_py()
    assert 3 in index_row_groups(EXACT, data, pa.array([probe]))  # type: ignore[operator]
