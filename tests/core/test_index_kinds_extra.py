"""More cases for the index kinds (lake_core.indexes.kinds), beside test_index_kinds.py: every
other indexable type with nulls and edge values, text and multi-group properties, the bytes an
exact lookup reads, damaged bytes, empty and all-null objects, values too long for statistics,
and the hash's order. Answers are checked against the truth computed from the data: an exact
index names exactly the row groups holding a value, a bloom index at least those."""

from __future__ import annotations

import datetime as dt
import io
import json
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lake_core.errors import CorruptObjectError, UsageError
from lake_core.indexes import hashing, kinds
from lake_core.indexes.canonical import canonical, check_indexable
from lake_core.indexes.kinds import (
    BLOOM,
    EXACT,
    EXACT_GROUP_ROWS,
    KINDS,
    build_index,
    describe,
    index_row_groups,
)

HEADER_KEY = b"lakepool.index"
UTC = dt.UTC
D0 = dt.date(2024, 2, 29)
T0 = dt.datetime(2024, 2, 29, 12, 30, tzinfo=UTC)
PARIS = dt.timezone(dt.timedelta(hours=1))

#: (type, row groups of Python values): the types test_index_kinds.py does not cover, and
#: edge values (extremes, zeros of both signs, empty strings, values in several row groups).
CASES: list[tuple[pa.DataType, list[list[Any]]]] = [
    (pa.int16(), [[0, -32768, None], [32767, 0], []]),
    (pa.int32(), [[-1, None], [2**31 - 1], [-1]]),
    (pa.int64(), [[-(2**63), 2**63 - 1], [None, None], [-1]]),
    (pa.uint8(), [[0, 255], [None], [255]]),
    (pa.uint16(), [[65535], [1, None], []]),
    (pa.uint32(), [[2**32 - 1, 0], [None], [7]]),
    (pa.uint64(), [[0, 2**63, None], [2**64 - 1, 1], [2**63 - 1]]),
    (pa.float16(), [[1.5, -0.0, None], [2.0], [0.0]]),
    (pa.float64(), [[-0.0, 1e300], [0.1, None], [float("inf"), -2.5]]),
    (pa.large_string(), [["x" * 300, ""], [None], ["漢字"]]),
    (pa.string_view(), [["a long string beyond twelve bytes", "s"], ["s", None], [""]]),
    (pa.large_binary(), [[b"abc"], [b"abc", b""], [None]]),
    (pa.binary_view(), [[b"a" * 40, b"b"], [b"b"], [None, b""]]),
    (pa.date64(), [[D0], [dt.date(1970, 1, 1), None], []]),
    (pa.time32("s"), [[dt.time(1, 2, 3), None], [dt.time(0, 0)], [dt.time(23, 59, 59)]]),
    (pa.time32("ms"), [[dt.time(1, 2, 3, 4000)], [None], [dt.time(1, 2, 3, 4000)]]),
    (pa.time64("ns"), [[dt.time(1, 2, 3, 4)], [dt.time(5, 0)], [None]]),
    (pa.timestamp("ms", "Europe/Paris"), [[T0, None], [T0 + dt.timedelta(milliseconds=1)], []]),
    (pa.timestamp("ns", "UTC"), [[T0], [T0, T0 - dt.timedelta(days=1)], [None]]),
    (pa.duration("ns"), [[dt.timedelta(microseconds=3)], [None], [dt.timedelta(days=2)]]),
    (pa.duration("s"), [[dt.timedelta(seconds=-1)], [dt.timedelta(0)], [None]]),
    (pa.dictionary(pa.int32(), pa.string()), [["x", "y", None], ["y"], ["z", "x"]]),
    (pa.dictionary(pa.int8(), pa.int64()), [[1, 2], [None, 2], [3]]),
]


def _base(t: pa.DataType) -> pa.DataType:
    return t.value_type if pa.types.is_dictionary(t) else t  # type: ignore[attr-defined, no-any-return]


def _group(t: pa.DataType, values: list[Any]) -> pa.Array[Any]:
    if pa.types.is_dictionary(t):
        return pa.array(values, _base(t)).dictionary_encode().cast(t)  # type: ignore[no-any-return]
    return pa.array(values, t)


def _truth(t: pa.DataType, groups: list[list[Any]], probe: Any) -> frozenset[int]:
    """The row groups where ``= probe`` is TRUE (-0.0 = 0.0; null matches nothing)."""
    stored = [pa.array(g, _base(t)).to_pylist() for g in groups]
    return frozenset(i for i, g in enumerate(stored) if probe is not None and probe in g)


@pytest.mark.parametrize("case", CASES, ids=lambda c: str(c[0]))
@pytest.mark.parametrize("kind", KINDS)
def test_round_trip_more_types(kind: str, case: tuple[pa.DataType, list[list[Any]]]) -> None:
    t, groups = case
    check_indexable(pa.field("f", t))
    data = build_index(kind, [_group(t, g) for g in groups])
    assert (describe(data).kind, describe(data).row_groups) == (kind, len(groups))
    stored = {v for g in groups for v in pa.array(g, _base(t)).to_pylist() if v is not None}
    for probe in stored:
        want = _truth(t, groups, probe)
        got = index_row_groups(kind, data, _group(t, [probe]))
        assert got is not None and want <= got, (probe, got, want)
        if kind == EXACT:
            assert got == want, (probe, got, want)
    assert index_row_groups(kind, data, _group(t, [None])) == frozenset()
    assert index_row_groups(kind, pa.BufferReader(data), pa.array([], t)) == frozenset()


@pytest.mark.parametrize("kind", KINDS)
def test_zero_signs_and_uint64_bit_patterns(kind: str) -> None:
    floats = build_index(kind, [pa.array([-0.0]), pa.array([2.5]), pa.array([0.0, None])])
    for zero in (0.0, -0.0):
        assert index_row_groups(kind, floats, pa.array([zero])) == frozenset({0, 2})
    big = build_index(kind, [pa.array([2**64 - 1], pa.uint64()), pa.array([1], pa.uint64())])
    assert index_row_groups(kind, big, pa.array([2**64 - 1], pa.uint64())) == frozenset({0})
    if kind == EXACT:
        assert index_row_groups(kind, floats, pa.array([1.0])) == frozenset()
        assert index_row_groups(kind, big, pa.array([2**63], pa.uint64())) == frozenset()


def test_an_int32_index_answers_int64_lookups() -> None:
    """A widened column's older objects: equal values, equal canonical values."""
    data = build_index(EXACT, [pa.array([7, None], pa.int32()), pa.array([8], pa.int32())])
    assert index_row_groups(EXACT, data, pa.array([8], pa.int64())) == frozenset({1})
    assert canonical(pa.array([5], pa.int8())).equals(canonical(pa.array([5], pa.int64())))


# --- properties --------------------------------------------------------------------------------

_strs = st.one_of(st.none(), st.text(alphabet="ab✓\x00", max_size=3))


@st.composite
def _split(draw: st.DrawFn, values: st.SearchStrategy[Any]) -> tuple[list[list[Any]], list[Any]]:
    rows = draw(st.lists(values, max_size=60))
    cuts = sorted(draw(st.lists(st.integers(0, len(rows)), max_size=6)))
    bounds = [0, *cuts, len(rows)]
    groups = [rows[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    return groups, draw(st.lists(values, min_size=1, max_size=4))


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_split(_strs))
def test_property_strings(case: tuple[list[list[Any]], list[Any]]) -> None:
    groups, probes = case
    arrays = [pa.array(g, pa.string()) for g in groups]
    truth = frozenset().union(*(_truth(pa.string(), groups, p) for p in probes))
    for kind in KINDS:
        got = index_row_groups(kind, build_index(kind, arrays), pa.array(probes, pa.string()))
        assert got is not None and truth <= got, (kind, groups, probes, got)
        if kind == EXACT:
            assert got == truth


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**32 - 1), st.sampled_from([3, 5000, 2**40, 2**62]), st.booleans())
def test_property_exact_rows_are_the_distinct_triples(seed: int, span: int, narrow: bool) -> None:
    """The integer coding (:func:`kinds._int_pairs`: one sort of int64 codes, row group and
    slice decoded in 32 bits or, for codes too wide, 64) gives the distinct (value, row group,
    slice) triples of the non-null values, sorted: computed here row by row. Spans past 2**62
    take the general path; repeats within a slice and nulls are deduplicated and left out."""
    rng = np.random.default_rng(seed)
    groups = []
    for _ in range(int(rng.integers(1, 12))):
        n = int(rng.integers(0, 5000))
        values = rng.integers(-span, span, n)
        valid = rng.random(n) > 0.05
        groups.append(pa.array(values, pa.int64(), mask=~valid))
    expected = sorted(
        {
            (v, g, row // kinds.SLICE_ROWS)
            for g, column in enumerate(groups)
            for row, v in enumerate(column.to_pylist())
            if v is not None
        }
    )
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(kinds, "_TAIL32_BITS", 32 if narrow else 0)
        table = pq.read_table(io.BytesIO(build_index(EXACT, groups)))
    got = list(zip(*(table.column(c).to_pylist() for c in ("value", "rg", "slice")), strict=True))
    assert got == expected


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 5))
def test_property_exact_over_many_index_row_groups(seed: int, lookups: int) -> None:
    """Enough entries for several index row groups: pruning them by statistics stays exact."""
    rng = np.random.default_rng(seed)
    n = EXACT_GROUP_ROWS * 3
    values = rng.integers(0, n * 2, n)
    groups = [pa.array(values[i : i + 20_000]) for i in range(0, n, 20_000)]
    probes = rng.integers(-5, n * 2 + 5, lookups)
    want = frozenset(i for i, g in enumerate(groups) if np.isin(g.to_numpy(), probes).any())
    assert index_row_groups(EXACT, build_index(EXACT, groups), pa.array(probes)) == want


# --- what a lookup reads; values too long for statistics -------------------------------------


class _Counting(io.BytesIO):
    """A file that counts the bytes read from it."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.read_bytes = 0

    def read(self, size: int | None = -1) -> bytes:
        out = super().read(size)
        self.read_bytes += len(out)
        return out


def test_exact_lookup_reads_a_fraction_of_the_index() -> None:
    n = EXACT_GROUP_ROWS * 8
    # Distinct values spread over a wide range: sorted, they do not compress to nothing (as
    # 0..n would), so that the index is larger than the footer read that pyarrow makes.
    rng = np.random.default_rng(1)
    values = rng.permutation(rng.choice(2**40, n, replace=False))
    probe = int(values[12345])
    data = build_index(EXACT, [pa.array(values[i : i + 50_000]) for i in range(0, n, 50_000)])
    f = _Counting(data)
    got = index_row_groups(EXACT, pa.PythonFile(f, mode="r"), pa.array([probe]))
    assert got == frozenset({12345 // 50_000})
    assert f.read_bytes < len(data) / 3, (f.read_bytes, len(data))


@pytest.mark.parametrize("kind", KINDS)
def test_values_longer_than_statistics_keep(kind: str) -> None:
    """Parquet drops min/max statistics of long values: such index row groups are read."""
    long = ["a" * 9000, "b" * 9000 + "✓", "c"]
    data = build_index(kind, [pa.array(long[:2]), pa.array(long[2:] + [long[0]])])
    assert index_row_groups(kind, data, pa.array([long[0]])) == frozenset({0, 1})
    assert index_row_groups(kind, data, pa.array([long[1]])) == frozenset({0})


@pytest.mark.parametrize("version", [1, 2])
def test_bloom_row_groups_without_values_answer_no(version: int) -> None:
    groups = [pa.array([None, None], pa.string()), pa.array(["a"]), pa.array([], pa.string())]
    data = build_index(BLOOM, groups, version=version)
    assert index_row_groups(BLOOM, data, pa.array(["a", "b"])) == frozenset({1})
    table = pq.read_table(pa.BufferReader(data))
    if version == 1:
        assert table.column("m").to_pylist() == [0, 64, 0]
    else:  # one block each, nothing set where there is no value
        assert table.column("blocks").to_pylist() == [1, 1, 1]
        assert [set(b) for b in table.column("bits").to_pylist()][::2] == [{0}, {0}]


@pytest.mark.parametrize("kind", KINDS)
def test_all_null_objects(kind: str) -> None:
    data = build_index(kind, [pa.array([None, None], pa.string()), pa.array([None], pa.string())])
    assert describe(data).entries == 0
    assert index_row_groups(kind, data, pa.array(["x"])) == frozenset()


# --- damaged bytes -------------------------------------------------------------------------------


def _rewrite_header(data: bytes, **changes: Any) -> bytes:
    table = pq.read_table(pa.BufferReader(data))
    header = json.loads(table.schema.metadata[HEADER_KEY])
    header.update(changes)
    sink = io.BytesIO()
    pq.write_table(table.replace_schema_metadata({HEADER_KEY: json.dumps(header)}), sink)
    return sink.getvalue()


@pytest.mark.parametrize(
    "damage",
    [
        lambda good: b"",
        lambda good: good[: len(good) // 2],
        lambda good: good[:-12] + b"\x00" * 12,
        lambda good: b"PAR1" + bytes(200) + b"PAR1",
        lambda good: _rewrite_header(good, format="something.else"),
    ],
    ids=["empty", "truncated", "bad-footer", "magic-only", "format"],
)
@pytest.mark.parametrize("kind", KINDS)
def test_damaged_bytes_raise_corrupt_object_error(kind: str, damage: Any) -> None:
    bad = damage(build_index(kind, [pa.array([1, 2]), pa.array([3])]))
    with pytest.raises(CorruptObjectError):
        describe(bad)
    with pytest.raises(CorruptObjectError):
        index_row_groups(kind, bad, pa.array([1]))


def test_unknown_version_and_rewritten_fingerprint_cannot_be_decided() -> None:
    for version in (1, 2):
        bloom = build_index(BLOOM, [pa.array(["a"]), pa.array(["b"])], version=version)
        assert index_row_groups(BLOOM, _rewrite_header(bloom), pa.array(["b"])) == frozenset({1})
        assert index_row_groups(BLOOM, _rewrite_header(bloom, version=3), pa.array(["b"])) is None
    for version in (1, 2):  # version 2: with row slices
        exact = build_index(EXACT, [pa.array(["a"]), pa.array(["b"])], version=version)
        assert index_row_groups(EXACT, exact, pa.array(["b"])) == frozenset({1})
        assert index_row_groups(EXACT, _rewrite_header(exact, version=3), pa.array(["b"])) is None
    # A version 1 bloom index under another hash fingerprint (version 2 hashes as Parquet does).
    bloom = build_index(BLOOM, [pa.array(["a"]), pa.array(["b"])], version=1)
    other = _rewrite_header(bloom, fingerprint=hashing.fingerprint()[::-1] + "0")
    assert index_row_groups(BLOOM, other, pa.array(["b"])) is None


def test_refusals() -> None:
    with pytest.raises(UsageError, match="'deep'"):
        check_indexable(pa.field("deep", pa.struct([("a", pa.int8())])))
    with pytest.raises(UsageError):
        check_indexable(pa.field("m", pa.map_(pa.string(), pa.int8())))
    with pytest.raises(UsageError):
        check_indexable(pa.field("d", pa.decimal128(10, 2)))
    with pytest.raises(UsageError):
        build_index("hash", [pa.array([1])])
    for fpp in (0.0, -0.5, 1.0):
        with pytest.raises(UsageError):
            build_index(BLOOM, [pa.array([1])], fpp=fpp)


# --- the hash ----------------------------------------------------------------------------------


def test_hash64_is_positional_and_spreads() -> None:
    values = canonical(pa.array([f"v{i}" for i in range(50_000)]))
    whole = hashing.hash64(values)
    parts = np.concatenate(
        [hashing.hash64(values.slice(i, 7_000)) for i in range(0, 50_000, 7_000)]
    )
    assert whole.dtype == np.uint64 and np.array_equal(whole, parts)
    assert len(np.unique(whole)) == 50_000
    # Both 32-bit halves vary (double hashing takes h1 and h2 from them).
    assert len(np.unique(whole & np.uint64(0xFFFFFFFF))) > 49_000
    assert len(np.unique(whole >> np.uint64(32))) > 49_000
    assert hashing.fingerprint() == hashing.fingerprint()


@pytest.mark.parametrize("kind", KINDS)
def test_nan_lookups_are_not_decided(kind: str) -> None:
    """Parquet statistics leave NaN out: an exact index row group [1.0, NaN] has max 1.0."""
    data = build_index(kind, [pa.array([1.0, float("nan")]), pa.array([2.0])])
    assert index_row_groups(kind, data, pa.array([float("nan")])) is None


def test_bloom_lookup_reads_only_its_values_buckets() -> None:
    """A large object's bloom index is split into hash buckets: a lookup of one value reads
    the footer and one bucket's filters, a small part of the index, and still finds it."""
    from lake_core.indexes.kinds import MAX_BUCKET_BITS, describe

    rng = np.random.default_rng(3)
    values = rng.choice(10**12, 8 * 100_000, replace=False)
    groups = [pa.array(values[i : i + 100_000]) for i in range(0, len(values), 100_000)]
    data = build_index(BLOOM, groups)
    assert pq.ParquetFile(io.BytesIO(data)).metadata.num_row_groups == 1 << MAX_BUCKET_BITS
    assert describe(data).row_groups == 8
    for probe in (int(values[5]), int(values[450_000])):
        f = _Counting(data)
        got = index_row_groups(BLOOM, pa.PythonFile(f, mode="r"), pa.array([probe]))
        assert got is not None and int(np.nonzero(values == probe)[0][0]) // 100_000 in got
        assert f.read_bytes < len(data) / 10, (f.read_bytes, len(data))
