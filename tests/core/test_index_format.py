"""The bytes an index object holds do not change with how it is built: every builder of this
release gives, for fixed inputs, the rows and header that the digests below record — the exact
ones from the builders of commit 105c09a, the version 1 bloom ones since bloom filters are sized
with fewer hash functions (session of 2026-11-28), the version 2 bloom ones (Parquet's
split-block filters, as pyarrow 26 builds them) since they came (2026-11-28, later); the forced
paths of version 1 (the two-thread split, 64-bit bit positions) must give the same. Bloom filters sized the earlier way (``k`` near ``m/n ln 2``)
are still answered: a lookup reads each filter's ``k`` and ``m`` from its row."""

from __future__ import annotations

import hashlib
import io
import json
import math
import random
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import lake_core.indexes.kinds as kinds
from lake_core.indexes.kinds import bloom_answers, build_index

#: sha256 (first 24 hex digits) of each case's header and rows: exact from 105c09a's builders,
#: bloom from the sizing by the fewest hash functions (``kinds._hashes_and_bits``).
GOLDEN = {
    "exact-int": "9bcc167f7ee1435454b75de7",
    "exact-wide": "b6f3909ed2dd4d146aecb823",
    "exact-str": "3ca4f7084e5d84211f637ff7",
    "exact-float": "b0ced4546ec320c77f3e4f12",
    "exact-u64": "867aa2c2f25bd753caf55ad5",
    "bloom-big-str": "72e7119995d937147598ea63",
    "bloom-small-int": "028fb347246e0d75625c0835",
    "bloom-float": "c947d6cda863d12c48491864",
    "sbbf-big-str": "b3ac9681db16f5caee35d929",
    "sbbf-small-int": "a88fe4f9bb59ef4c80b165da",
    # Exact indexes of version 2 (row slices), since they came (2026-11-28, later still).
    "exact-float-sliced": "ed99315eafeabade832ef1dd",
    "exact-int-sliced": "323a9f7bec62816071949553",
    "exact-str-sliced": "b7f26e6d0190fa53593dc4be",
    "exact-u64-sliced": "9f567f5f0244d80c5ff4c8fe",
    "exact-wide-sliced": "0a60caa1e52255b0fa98b4f1",
}
#: Cases built as version 1 indexes although they now get version 2 (the bloom filters and the
#: exact indexes without row slices that earlier releases wrote, which lookups still answer).
VERSION_1 = {
    "bloom-big-str",
    "bloom-small-int",
    "exact-int",
    "exact-wide",
    "exact-str",
    "exact-float",
    "exact-u64",
}
#: Exact indexes of version 2 (with row slices) of the exact cases' inputs.
SLICED = {f"{name}-sliced": name for name in sorted(VERSION_1) if name.startswith("exact")}


def cases() -> list[tuple[str, str, list[pa.Array[Any]], float]]:
    rng = random.Random(20261127)
    out = []
    ints = [
        pa.array(
            [None if rng.random() < 0.05 else rng.randrange(-50, 5000) for _ in range(3000)],
            pa.int64(),
        )
        for _ in range(5)
    ]
    out.append(("exact-int", "exact", ints, 0.01))
    wide = [
        pa.array(
            [rng.choice([-(2**63), 2**63 - 1, rng.randrange(-(2**62), 2**62)]) for _ in range(500)],
            pa.int64(),
        )
        for _ in range(3)
    ]
    out.append(("exact-wide", "exact", wide, 0.01))
    strs = [
        pa.array(
            [None if rng.random() < 0.1 else f"s{rng.randrange(900)}" for _ in range(2000)],
            pa.string(),
        )
        for _ in range(4)
    ]
    out.append(("exact-str", "exact", strs, 0.01))
    floats = [
        pa.array(
            [rng.choice([None, float("nan"), -0.0, 0.0, 1.5, rng.random()]) for _ in range(1500)],
            pa.float64(),
        )
        for _ in range(3)
    ]
    out.append(("exact-float", "exact", floats, 0.01))
    u64 = [
        pa.array(
            [rng.choice([0, 2**64 - 1, 2**63, rng.randrange(2**64)]) for _ in range(400)],
            pa.uint64(),
        )
        for _ in range(2)
    ]
    out.append(("exact-u64", "exact", u64, 0.01))
    big = [
        pa.array([f"comment {rng.randrange(10**9)} {i % 7}" for i in range(70_000)], pa.string())
        for _ in range(4)
    ]
    out.append(("bloom-big-str", "bloom", big, 0.01))
    small = [
        pa.array(
            [None if rng.random() < 0.2 else rng.randrange(100) for _ in range(700)], pa.int64()
        )
        for _ in range(3)
    ] + [pa.array([], pa.int64())]
    out.append(("bloom-small-int", "bloom", small, 0.05))
    out.append(("bloom-float", "bloom", floats, 0.001))
    out.append(("sbbf-big-str", "bloom", big, 0.01))
    out.append(("sbbf-small-int", "bloom", small, 0.05))
    by_name = {name: case for name, *case in out}
    for sliced, name in SLICED.items():
        out.append((sliced, *by_name[name]))
    return out


def digest(data: bytes) -> str:
    table = pq.read_table(io.BytesIO(data))
    h = hashlib.sha256()
    h.update(table.schema.metadata[b"lakepool.index"])
    for name in table.column_names:
        h.update(name.encode())
        for v in table.column(name).to_pylist():
            h.update(repr(v).encode())
    return h.hexdigest()[:24]


@pytest.mark.parametrize("path", ["default", "split", "uint64"])
def test_every_build_path_writes_what_the_previous_release_wrote(
    path: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if path == "split":  # every bloom index on two threads
        monkeypatch.setattr(kinds, "PARALLEL_BLOOM_VALUES", 0)
    if path == "uint64":  # bit positions in 64 bits, as for filters of 2**31 bits or more
        monkeypatch.setattr(kinds, "_UINT32_BITS", 1)
    for name, kind, row_groups, fpp in cases():
        version = 1 if name in VERSION_1 else None
        assert digest(build_index(kind, row_groups, fpp=fpp, version=version)) == GOLDEN[name], name


def _earlier_size(n: int, fpp: float) -> tuple[int, int]:
    """How bloom filters were sized before 2026-11-28: the smallest filter, k = m/n ln 2."""
    if n == 0:
        return 0, 0
    m = math.ceil(-n * math.log(fpp) / (math.log(2) ** 2))
    m = max(64, -(-m // 64) * 64)
    return m, max(1, round(m / n * math.log(2)))


def test_bloom_filters_sized_the_earlier_way_are_still_answered(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rng = np.random.default_rng(5)
    present = rng.choice(10**9, 8_000, replace=False)
    groups = [pa.array(present[i::4]) for i in range(4)]
    absent = pa.array(np.arange(10**9 + 1, 10**9 + 1 + 8_000))
    with monkeypatch.context() as m:
        m.setattr(kinds, "_bloom_size", _earlier_size)
        earlier = build_index("bloom", groups, fpp=0.01, version=1)
    now = build_index("bloom", groups, fpp=0.01, version=1)
    ks = {d: set(pq.read_table(io.BytesIO(d)).column("k").to_pylist()) for d in (earlier, now)}
    assert ks[earlier] == {7} and ks[now] == {4}
    for data in (earlier, now):
        hits = bloom_answers(data, pa.array(present))
        for g in range(4):  # every value is found in its own row group
            assert hits[g::4, g].all()
        assert float(bloom_answers(data, absent).mean()) < 0.02


@pytest.mark.parametrize("name", ["exact-int-sliced", "exact-wide-sliced", "exact-str-sliced"])
def test_an_exact_index_of_version_2_lists_each_value_with_its_row_slices(name: str) -> None:
    """The rows of a sliced exact index are the distinct (value, row group, row // slice rows)
    of the non-null values, sorted: computed here from the inputs, row by row."""
    (case,) = [c for c in cases() if c[0] == name]
    _, kind, row_groups, fpp = case
    data = build_index(kind, row_groups, fpp=fpp)
    table = pq.read_table(io.BytesIO(data))
    header = json.loads(table.schema.metadata[b"lakepool.index"])
    assert header["version"] == 2 and header["slice_rows"] == kinds.SLICE_ROWS
    expected = sorted(
        {
            (v, g, row // kinds.SLICE_ROWS)
            for g, column in enumerate(row_groups)
            for row, v in enumerate(column.to_pylist())
            if v is not None
        }
    )
    assert expected
    if name == "exact-int-sliced":  # 3,000 rows a group: two slices
        assert max(k for _, _, k in expected) == 1
    got = list(zip(*(table.column(c).to_pylist() for c in ("value", "rg", "slice")), strict=True))
    assert got == expected
    assert header["entries"] == len(expected)
