"""The OTree weight function against a scalar Murmur3 written here from Spark's source (not the
code under test), and the sample cut's arithmetic (issue 16). Equality with a real Spark is
tests/spark/test_otree_weights_spark.py."""

from __future__ import annotations

import struct

import numpy as np
import pyarrow as pa
import pytest

from lake_core.errors import UsageError
from lake_core.otree.weights import (
    MIN_WEIGHT,
    hash_long,
    sample_range,
    spark_hash,
    weight_cut,
    weights_for,
)

M = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & M


def _k(k: int) -> int:
    return (_rotl((k * 0xCC9E2D51) & M, 15) * 0x1B873593) & M


def _h(h: int, k: int) -> int:
    return (_rotl(h ^ k, 13) * 5 + 0xE6546B64) & M


def _fmix(h: int, n: int) -> int:
    h ^= n
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & M
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & M
    return h ^ (h >> 16)


def _signed(h: int) -> int:
    return h - (1 << 32) if h >= 1 << 31 else h


def ref_int(v: int, seed: int) -> int:
    return _signed(_fmix(_h(seed & M, _k(v & M)), 4))


def ref_long(v: int, seed: int) -> int:
    v &= (1 << 64) - 1
    h = _h(seed & M, _k(v & M))
    h = _h(h, _k(v >> 32))
    return _signed(_fmix(h, 8))


def ref_bytes(b: bytes, seed: int) -> int:
    h = seed & M
    aligned = len(b) - len(b) % 4
    for i in range(0, aligned, 4):
        h = _h(h, _k(struct.unpack("<I", b[i : i + 4])[0]))
    for i in range(aligned, len(b)):
        h = _h(h, _k(struct.unpack("<b", b[i : i + 1])[0] & M))  # one signed byte at a time
    return _signed(_fmix(h, len(b)))


def test_known_values() -> None:
    # Read off a real Spark 4.3: SELECT hash(1), hash(1L), hash('abc'), hash(1, 'a'), hash('').
    assert spark_hash([pa.array([1], pa.int32())]).tolist() == [-559580957]
    assert spark_hash([pa.array([1], pa.int64())]).tolist() == [-1712319331]
    assert spark_hash([pa.array(["abc"])]).tolist() == [1322437556]
    assert spark_hash([pa.array([1], pa.int32()), pa.array(["a"])]).tolist() == [-936062819]
    assert spark_hash([pa.array([""])]).tolist() == [142593372]
    assert ref_bytes(b"abc", 42) == 1322437556 and ref_int(1, 42) == -559580957


def test_integers_longs_and_chaining_match_the_reference() -> None:
    rng = np.random.default_rng(1)
    ints = rng.integers(-(2**31), 2**31 - 1, 300).astype(np.int32)
    longs = rng.integers(-(2**63), 2**63 - 1, 300, dtype=np.int64)
    assert spark_hash([pa.array(ints)]).tolist() == [ref_int(int(v), 42) for v in ints]
    assert spark_hash([pa.array(longs)]).tolist() == [ref_long(int(v), 42) for v in longs]
    chained = spark_hash([pa.array(ints), pa.array(longs)], seed=-7).tolist()
    assert chained == [
        ref_long(int(b), ref_int(int(a), -7)) for a, b in zip(ints, longs, strict=True)
    ]
    seeds = rng.integers(-(2**31), 2**31 - 1, 300).astype(np.int32)
    assert hash_long(longs, seeds).tolist() == [
        ref_long(int(v), int(s)) for v, s in zip(longs, seeds, strict=True)
    ]


@pytest.mark.parametrize("kind", [pa.string(), pa.large_string(), pa.string_view(), pa.binary()])
def test_strings_of_every_tail_length(kind: pa.DataType) -> None:
    words = ["", "a", "ab", "abc", "abcd", "abcde", "é", "€€", "😀x", "ÿÿÿ", "\x80\x81\x82\x83\x84"]
    values = [w.encode() if pa.types.is_binary(kind) else w for w in words]
    got = spark_hash([pa.array(values, kind)]).tolist()
    assert got == [ref_bytes(w.encode(), 42) for w in words]


def test_nulls_leave_the_hash_unchanged_and_offsets_are_honoured() -> None:
    a = pa.array([1, None, 3], pa.int64())
    s = pa.array(["x", "y", None])
    got = spark_hash([a, s]).tolist()
    assert got[1] == ref_bytes(b"y", 42)  # the null int changed nothing
    assert got[2] == ref_long(3, 42)  # nor the null string
    long = pa.array(["zero", "one", "two", "three", "four"])
    sliced = long.slice(2, 3)
    assert spark_hash([sliced]).tolist() == [
        ref_bytes(w.encode(), 42) for w in ("two", "three", "four")
    ]
    chunked = pa.chunked_array([long.slice(0, 2), long.slice(2)])
    assert spark_hash([chunked]).tolist() == [ref_bytes(w.encode(), 42) for w in long.to_pylist()]
    dictionary = pa.array(["b", "a", "b"]).dictionary_encode()
    assert spark_hash([dictionary]).tolist() == [ref_bytes(w.encode(), 42) for w in ("b", "a", "b")]


def test_floats_negative_zero_and_nan() -> None:
    got = spark_hash([pa.array([0.0, -0.0, float("nan"), 1.5])]).tolist()
    bits = [struct.unpack("<q", struct.pack("<d", v))[0] for v in (0.0, 0.0, float("nan"), 1.5)]
    bits[2] = 0x7FF8000000000000
    assert got == [ref_long(b, 42) for b in bits]
    f32 = spark_hash([pa.array([-0.0, 2.5], pa.float32())]).tolist()
    assert f32 == [ref_int(0, 42), ref_int(struct.unpack("<i", struct.pack("<f", 2.5))[0], 42)]


def test_unhashable_types_are_refused() -> None:
    for array in (pa.array([1], pa.uint32()), pa.array([[1]]), pa.array([{"a": 1}])):
        with pytest.raises(UsageError):
            spark_hash([array])


def test_weights_for_and_the_sample_cut() -> None:
    t = pa.table({"x": [1, 2], "y": ["a", "b"]})
    plain = weights_for(t, ["x", "y", "absent"], "hash")
    assert plain.type == pa.int32() and plain.null_count == 0
    assert plain.to_pylist() == spark_hash([t["x"], t["y"]]).tolist()
    salted = weights_for(t, ["x"], "salted")
    assert salted.type == pa.int32() and salted.null_count == 0
    assert weight_cut(0.1) == -1717986918 and weight_cut(0.3) == -858993459 and weight_cut(0.5) == 0
    assert sample_range(0.5) == (MIN_WEIGHT, 0) and sample_range(1) is None
    for bad in (0, -0.1, 1.01, float("nan"), "0.1", True):
        with pytest.raises(UsageError):
            sample_range(bad)  # type: ignore[arg-type]
