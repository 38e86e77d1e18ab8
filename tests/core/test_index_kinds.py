"""The index kinds (lake_core.indexes.kinds): index objects' bytes and lookups in them.

Every test checks answers against the truth computed from the data: an exact index names
exactly the row groups holding a value, a bloom index at least those.
"""

from __future__ import annotations

import datetime as dt
import io
import json
import random
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lake_core.errors import CorruptObjectError, UsageError
from lake_core.indexes import hashing
from lake_core.indexes.canonical import canonical, check_indexable, domain
from lake_core.indexes.kinds import (
    BLOOM,
    DEFAULT_FPP,
    EXACT,
    EXACT_GROUP_ROWS,
    HEADER_KEY,
    KINDS,
    bloom_size,
    build_index,
    describe,
    index_row_groups,
)

UTC = dt.UTC
D0 = dt.date(2024, 2, 29)
T0 = dt.datetime(2024, 2, 29, 12, 30, tzinfo=UTC)

#: (type, row groups of Python values): every indexable type, with nulls and edge values.
CASES: list[tuple[pa.DataType, list[list[Any]]]] = [
    *(
        (t, [[0, 1, None, 5], [5, -3 if t.bit_width and pa.types.is_signed_integer(t) else 3], []])
        for t in (
            pa.int8(),
            pa.int16(),
            pa.int32(),
            pa.int64(),
            pa.uint8(),
            pa.uint16(),
            pa.uint32(),
        )
    ),
    (pa.uint64(), [[0, 2**63, None], [2**64 - 1, 1], [2**63 - 1]]),
    (pa.int64(), [[-(2**63), 2**63 - 1], [None, None], [-1]]),
    (pa.bool_(), [[True, None], [False], [True, False]]),
    (pa.float16(), [[1.5, -0.0, None], [2.0], [0.0]]),
    (pa.float32(), [[1.25, -0.0], [None, 3.5], [-1e30]]),
    (pa.float64(), [[-0.0, 1e300], [0.1, None], [float("inf"), -2.5]]),
    (pa.string(), [["", "a", None], ["ünï ✓", "b"], ["a"]]),
    (pa.large_string(), [["x" * 300, ""], [None], ["漢字"]]),
    (pa.string_view(), [["a long string beyond twelve bytes", "s"], ["s", None], [""]]),
    (pa.binary(), [[b"", b"\x00\xff"], [None, b"a"], [b"\x00"]]),
    (pa.large_binary(), [[b"abc"], [b"abc", b""], [None]]),
    (pa.binary_view(), [[b"a" * 40, b"b"], [b"b"], [None, b""]]),
    (pa.binary(3), [[b"abc", None], [b"\x00\x00\x00"], [b"abc"]]),
    (pa.date32(), [[D0, None], [dt.date(1969, 12, 31)], [D0]]),
    (pa.date64(), [[D0], [dt.date(1970, 1, 1), None], []]),
    (pa.time32("s"), [[dt.time(1, 2, 3), None], [dt.time(0, 0)], [dt.time(23, 59, 59)]]),
    (pa.time32("ms"), [[dt.time(1, 2, 3, 4000)], [None], [dt.time(1, 2, 3, 4000)]]),
    (pa.time64("us"), [[dt.time(1, 2, 3, 4)], [dt.time(0, 0), None], []]),
    (pa.time64("ns"), [[dt.time(1, 2, 3, 4)], [dt.time(5, 0)], [None]]),
    (pa.timestamp("s"), [[T0.replace(tzinfo=None)], [None], [dt.datetime(1900, 1, 1)]]),
    (pa.timestamp("us", "Europe/Paris"), [[T0, None], [T0 + dt.timedelta(microseconds=1)], []]),
    (pa.timestamp("ns", "UTC"), [[T0], [T0, T0 - dt.timedelta(days=1)], [None]]),
    (pa.duration("ms"), [[dt.timedelta(seconds=1), None], [dt.timedelta(0)], [dt.timedelta(-1)]]),
    (pa.duration("ns"), [[dt.timedelta(microseconds=3)], [None], [dt.timedelta(days=2)]]),
    (pa.dictionary(pa.int32(), pa.string()), [["x", "y", None], ["y"], ["z", "x"]]),
    (pa.dictionary(pa.int8(), pa.int64()), [[1, 2], [None, 2], [3]]),
]


def _ids(case: tuple[pa.DataType, Any]) -> str:
    return str(case[0])


def _group(t: pa.DataType, values: list[Any]) -> pa.Array[Any]:
    if pa.types.is_dictionary(t):
        return pa.array(values, t.value_type).dictionary_encode().cast(t)  # type: ignore[attr-defined, no-any-return]
    return pa.array(values, t)


def _literal(t: pa.DataType, v: Any) -> pa.Array[Any]:
    """A lookup literal as the caller passes it: cast to the column's type."""
    if pa.types.is_dictionary(t):
        return _group(t, [v])
    return pa.array([v], t)


def _equal(a: Any, b: Any) -> bool:
    """SQL equality of two Python values of one column (-0.0 = 0.0; null matches nothing)."""
    return a is not None and b is not None and a == b


def _truth(t: pa.DataType, groups: list[list[Any]], probe: Any) -> frozenset[int]:
    base = t.value_type if pa.types.is_dictionary(t) else t  # type: ignore[attr-defined]
    as_stored = [pa.array(g, base).to_pylist() for g in groups]
    return frozenset(i for i, g in enumerate(as_stored) if any(_equal(v, probe) for v in g))


@pytest.mark.parametrize("case", CASES, ids=_ids)
@pytest.mark.parametrize("kind", KINDS)
def test_round_trip_every_indexable_type(
    kind: str, case: tuple[pa.DataType, list[list[Any]]]
) -> None:
    t, groups = case
    check_indexable(pa.field("f", t))
    data = build_index(kind, [_group(t, g) for g in groups])
    info = describe(data)
    assert (info.kind, info.version, info.row_groups) == (kind, 1, len(groups))
    assert info.domain == domain(t)
    base = t.value_type if pa.types.is_dictionary(t) else t  # type: ignore[attr-defined]
    stored = {v for g in groups for v in pa.array(g, base).to_pylist() if v is not None}
    for probe in stored:
        want = _truth(t, groups, probe)
        got = index_row_groups(kind, data, _literal(t, probe))
        assert got is not None
        if kind == EXACT:
            assert got == want, (probe, got, want)
        else:
            assert want <= got, (probe, got, want)
    # Nulls are in no index and never match.
    assert index_row_groups(kind, data, _literal(t, None)) == frozenset()
    assert index_row_groups(kind, io_file(data), pa.array([], t)) == frozenset()


def io_file(data: bytes) -> pa.NativeFile:
    return pa.BufferReader(data)


@pytest.mark.parametrize("kind", KINDS)
def test_zero_signs_uint64_and_absent_values(kind: str) -> None:
    floats = build_index(kind, [pa.array([-0.0]), pa.array([2.5]), pa.array([0.0, None])])
    for zero in (0.0, -0.0):
        assert index_row_groups(kind, floats, pa.array([zero])) == frozenset({0, 2})
    big = build_index(kind, [pa.array([2**64 - 1], pa.uint64()), pa.array([1], pa.uint64())])
    assert index_row_groups(kind, big, pa.array([2**64 - 1], pa.uint64())) == frozenset({0})
    if kind == EXACT:
        assert index_row_groups(kind, floats, pa.array([1.0])) == frozenset()
        # uint64's bit pattern never meets another domain's -1.
        assert index_row_groups(kind, big, pa.array([2**63], pa.uint64())) == frozenset()
    assert index_row_groups(kind, big, pa.array([-1], pa.int64())) is None


def test_canonical_forms() -> None:
    assert canonical(pa.array([-0.0, None, float("nan")])).to_pylist()[:2] == [0.0, None]
    assert str(canonical(pa.array([-0.0])).to_pylist()[0]) == "0.0"
    assert canonical(pa.array([2**64 - 1], pa.uint64())).to_pylist() == [-1]
    assert canonical(pa.array([True, None])).to_pylist() == [1, None]
    assert canonical(pa.array(["a"], pa.string_view())).type == pa.large_string()
    assert canonical(pa.array([b"ab"], pa.binary(2))).type == pa.large_binary()
    assert canonical(pa.array([D0], pa.date32())).to_pylist() == [19782]
    assert canonical(pa.chunked_array([[1], [2]], pa.int8())).to_pylist() == [1, 2]
    # Widths share a domain (an int32 index answers an int64 lookup); units do not.
    assert domain(pa.int32()) == domain(pa.int64()) != domain(pa.uint64())
    assert domain(pa.timestamp("ms")) != domain(pa.timestamp("us"))
    assert domain(pa.timestamp("ms", "UTC")) == domain(pa.timestamp("ms"))


def test_widened_column_is_still_answered_and_other_units_are_not() -> None:
    data = build_index(EXACT, [pa.array([7, None], pa.int32()), pa.array([8], pa.int32())])
    assert index_row_groups(EXACT, data, pa.array([8], pa.int64())) == frozenset({1})
    ts = build_index(BLOOM, [pa.array([T0], pa.timestamp("ms", "UTC"))])
    assert index_row_groups(BLOOM, ts, pa.array([T0], pa.timestamp("ms", "UTC"))) == {0}
    assert index_row_groups(BLOOM, ts, pa.array([T0], pa.timestamp("us", "UTC"))) is None
    assert index_row_groups(BLOOM, ts, pa.array([D0], pa.date32())) is None


# --- the property: sound for both kinds, exact for exact --------------------------------------

_ints = st.one_of(st.none(), st.integers(-40, 40))
_strs = st.one_of(st.none(), st.text(alphabet="ab✓", max_size=3))


@st.composite
def _split(draw: st.DrawFn, values: st.SearchStrategy[Any]) -> tuple[list[list[Any]], list[Any]]:
    rows = draw(st.lists(values, max_size=60))
    cuts = sorted(draw(st.lists(st.integers(0, len(rows)), max_size=6)))
    bounds = [0, *cuts, len(rows)]
    groups = [rows[a:b] for a, b in zip(bounds, bounds[1:], strict=False)]
    probes = draw(st.lists(values, min_size=1, max_size=4))
    return groups, probes


def _check_property(t: pa.DataType, groups: list[list[Any]], probes: list[Any]) -> None:
    arrays = [pa.array(g, t) for g in groups]
    truth = frozenset().union(*(_truth(t, groups, p) for p in probes))
    lookup = pa.array(probes, t)
    for kind in KINDS:
        got = index_row_groups(kind, build_index(kind, arrays), lookup)
        assert got is not None
        assert truth <= got, (kind, groups, probes, got)
        if kind == EXACT:
            assert got == truth


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_split(_ints))
def test_property_ints(case: tuple[list[list[Any]], list[Any]]) -> None:
    _check_property(pa.int16(), *case)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_split(_strs))
def test_property_strings(case: tuple[list[list[Any]], list[Any]]) -> None:
    _check_property(pa.string(), *case)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(1, 5))
def test_property_many_index_row_groups(seed: int, lookups: int) -> None:
    """Enough entries for several exact index row groups: statistics pruning stays exact."""
    rng = np.random.default_rng(seed)
    n = EXACT_GROUP_ROWS * 3
    values = rng.integers(0, n * 2, n)
    groups = [pa.array(values[i : i + 20_000]) for i in range(0, n, 20_000)]
    probes = rng.integers(-5, n * 2 + 5, lookups)
    want = frozenset(i for i, g in enumerate(groups) if np.isin(g.to_numpy(), probes).any())
    got = index_row_groups(EXACT, build_index(EXACT, groups), pa.array(probes))
    assert got == want


# --- bloom rates, reading little ---------------------------------------------------------------


def test_bloom_false_positive_rate_near_fpp() -> None:
    rng = np.random.default_rng(7)
    groups = [pa.array(rng.integers(0, 2**40, 100) * 2) for _ in range(1000)]  # even numbers
    data = build_index(BLOOM, groups, fpp=DEFAULT_FPP)
    assert describe(data).entries == 100 * 1000
    maybes = 0
    absent = rng.integers(0, 2**40, 20) * 2 + 1  # odd: in no row group
    for v in absent:
        got = index_row_groups(BLOOM, data, pa.array([int(v)]))
        assert got is not None
        maybes += len(got)
    rate = maybes / (len(absent) * len(groups))
    assert 0.003 < rate < 0.02, rate
    m, k = bloom_size(100, DEFAULT_FPP)
    assert (m, k) == (960, 7)


def test_bloom_empty_row_groups_answer_no() -> None:
    data = build_index(
        BLOOM, [pa.array([None, None], pa.string()), pa.array(["a"]), pa.array([], pa.string())]
    )
    assert index_row_groups(BLOOM, data, pa.array(["a", "b"])) == frozenset({1})
    t = pq.read_table(pa.BufferReader(data))
    assert t.column("m").to_pylist()[0] == 0 and t.column("m").to_pylist()[2] == 0


class _Counting(io.BytesIO):
    """A file that counts the bytes read from it."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.read_bytes = 0

    def read(self, size: int | None = -1) -> bytes:
        out = super().read(size)
        self.read_bytes += len(out)
        return out


def test_exact_lookup_reads_the_footer_and_about_one_index_row_group() -> None:
    n = EXACT_GROUP_ROWS * 8
    values = np.random.default_rng(1).permutation(n)
    data = build_index(EXACT, [pa.array(values[i : i + 50_000]) for i in range(0, n, 50_000)])
    assert pq.ParquetFile(pa.BufferReader(data)).metadata.num_row_groups == 8
    f = _Counting(data)
    got = index_row_groups(EXACT, pa.PythonFile(f, mode="r"), pa.array([12345]))
    where = int(np.nonzero(values == 12345)[0][0]) // 50_000
    assert got == frozenset({where})
    assert f.read_bytes < len(data) / 3, (f.read_bytes, len(data))


# --- refusals and undecidable lookups ----------------------------------------------------------


def _rewrite_header(data: bytes, **changes: Any) -> bytes:
    table = pq.read_table(pa.BufferReader(data))
    header = json.loads(table.schema.metadata[HEADER_KEY])
    header.update(changes)
    sink = io.BytesIO()
    pq.write_table(table.replace_schema_metadata({HEADER_KEY: json.dumps(header)}), sink)
    return sink.getvalue()


def test_fingerprint_version_kind_and_nan_lookups_cannot_be_decided() -> None:
    groups = [pa.array([1.0, 2.0]), pa.array([3.0])]
    bloom = build_index(BLOOM, groups)
    assert describe(bloom).fingerprint == hashing.FINGERPRINT == hashing.fingerprint()
    assert index_row_groups(BLOOM, bloom, pa.array([3.0])) == frozenset({1})
    other = _rewrite_header(bloom, fingerprint="0123456789abcdef")
    assert index_row_groups(BLOOM, other, pa.array([3.0])) is None
    assert index_row_groups(BLOOM, _rewrite_header(bloom), pa.array([3.0])) == frozenset({1})
    assert index_row_groups(BLOOM, _rewrite_header(bloom, version=2), pa.array([3.0])) is None
    exact = build_index(EXACT, groups)
    assert index_row_groups(BLOOM, exact, pa.array([3.0])) is None
    assert index_row_groups(EXACT, bloom, pa.array([3.0])) is None
    for data, kind in ((exact, EXACT), (bloom, BLOOM)):
        assert index_row_groups(kind, data, pa.array([float("nan")])) is None
        assert index_row_groups(kind, data, pa.array(["3.0"])) is None


def _plain_parquet() -> bytes:
    sink = io.BytesIO()
    pq.write_table(pa.table({"value": [1], "rg": pa.array([0], pa.int32())}), sink)
    return sink.getvalue()


@pytest.mark.parametrize(
    "make",
    [
        lambda good: b"",
        lambda good: b"not parquet at all",
        lambda good: bytes(random.Random(3).randbytes(4096)),
        lambda good: good[: len(good) // 2],
        lambda good: good[:-12] + b"\x00" * 12,
        lambda good: _plain_parquet(),
        lambda good: _rewrite_header(good, format="other"),
        lambda good: _rewrite_header(good, kind=None),
        lambda good: _rewrite_header(good, row_groups="three"),
    ],
    ids=[
        "empty",
        "text",
        "random",
        "truncated",
        "bad-footer",
        "no-header",
        "format",
        "kind",
        "count",
    ],
)
def test_foreign_bytes_raise_corrupt_object_error(make: Any) -> None:
    for kind in KINDS:
        good = build_index(kind, [pa.array([1, 2]), pa.array([3])])
        bad = make(good)
        with pytest.raises(CorruptObjectError):
            describe(bad)
        with pytest.raises(CorruptObjectError, match="idx/key"):
            index_row_groups(kind, bad, pa.array([1]), key="idx/key")


def test_index_contradicting_its_header_is_corrupt() -> None:
    bloom = build_index(BLOOM, [pa.array([1]), pa.array([2])])
    with pytest.raises(CorruptObjectError, match="filter per row group"):
        index_row_groups(BLOOM, _rewrite_header(bloom, row_groups=5), pa.array([1]))
    exact = build_index(EXACT, [pa.array([1]), pa.array([2])])
    with pytest.raises(CorruptObjectError, match="beyond"):
        index_row_groups(EXACT, _rewrite_header(exact, row_groups=1), pa.array([2]))


@pytest.mark.parametrize(
    "t",
    [
        pa.list_(pa.int64()),
        pa.struct([("a", pa.int64())]),
        pa.map_(pa.string(), pa.int64()),
        pa.decimal128(10, 2),
        pa.null(),
        pa.dictionary(pa.int32(), pa.list_(pa.int8())),
    ],
    ids=str,
)
def test_check_indexable_refuses_other_types(t: pa.DataType) -> None:
    with pytest.raises(UsageError, match=r"field 'col' has type .* cannot be indexed"):
        check_indexable(pa.field("col", t))
    with pytest.raises(UsageError):
        build_index(EXACT, [pa.nulls(0, t)])


def test_build_refuses_bad_kind_rate_and_mixed_domains() -> None:
    with pytest.raises(UsageError, match="kind"):
        build_index("hash", [pa.array([1])])
    for fpp in (0.0, 1.0, -0.5):
        with pytest.raises(UsageError, match="rate"):
            build_index(BLOOM, [pa.array([1])], fpp=fpp)
    with pytest.raises(UsageError, match="one type"):
        build_index(EXACT, [pa.array([1]), pa.array(["1"])])
    _ = Decimal  # decimals are refused above


def test_no_row_groups_and_all_null() -> None:
    for kind in KINDS:
        nothing = build_index(kind, [])
        assert describe(nothing).row_groups == 0
        assert index_row_groups(kind, nothing, pa.array([1])) == frozenset()
        nulls = build_index(kind, [pa.array([None, None], pa.string())])
        assert describe(nulls).entries == 0
        assert index_row_groups(kind, nulls, pa.array(["x"])) == frozenset()


def test_hash64_is_positional_and_fingerprint_stable() -> None:
    values = canonical(pa.array([f"v{i}" for i in range(50_000)]))
    whole = hashing.hash64(values)
    parts = np.concatenate(
        [hashing.hash64(values.slice(i, 7_000)) for i in range(0, 50_000, 7_000)]
    )
    assert whole.dtype == np.uint64 and np.array_equal(whole, parts)
    assert len(np.unique(whole)) == 50_000
    assert (
        hashing.hash64(canonical(pa.array([1], pa.int8())))[0]
        == hashing.hash64(canonical(pa.array([1], pa.int64())))[0]
    )
    assert len(hashing.fingerprint()) == 16 and hashing.fingerprint() == hashing.FINGERPRINT
