"""The order a scan returns records in, across objects (lake_core/scan.py).

Invariant (lake_core/poolkey.py): records are sorted by the key fields in order, all asc or all
desc, each field's nulls last — what pyarrow's sort with ``null_placement="at_end"`` gives.
Equal keys keep object id order, then their order within the object. So a scan equals the
stable pyarrow sort of every object's rows concatenated in id order.

The bug these pin: rows whose *first* key field is null are held back from every run for the
end of the scan; they came out in the order they were held back (run by run, then the objects
holding nothing but such rows), not sorted by the later key fields.
"""

from __future__ import annotations

import tempfile
import warnings
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lake_core.config import LakeConfig
from lake_core.lake import Lake
from lake_core.pool import Pool


def _load_each(pool: Pool, tables: list[pa.Table]) -> list[tuple[str, pa.Table]]:
    """Load each table as its own object; (object id, table) per load."""
    out = []
    for t in tables:
        before = set(pool.snapshot(pool.tip()).objects) if pool.tip() else set()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # MissingKeyWarning: a load with no key at all
            pool.load([t])
        (new,) = set(pool.snapshot(pool.tip()).objects) - before
        out.append((new, t))
    return out


def _expected(loaded: list[tuple[str, pa.Table]], fields: str, order: str) -> list[dict[str, Any]]:
    """pyarrow's stable sort of every row, objects concatenated in id order."""
    table = pa.concat_tables([t for _, t in sorted(loaded, key=lambda p: p[0])])
    direction = "descending" if order == "desc" else "ascending"
    keys: list[Any] = [(f, direction, "at_end") for f in fields.split(",")]
    return table.take(pc.sort_indices(table, sort_keys=keys)).to_pylist()


def _rows(columns: dict[str, list[Any]], first: int) -> pa.Table:
    n = len(next(iter(columns.values())))
    arrays = {f: pa.array(v, pa.int64()) for f, v in columns.items()}
    arrays["i"] = pa.array(range(first, first + n), pa.int64())
    return pa.table(arrays)


@pytest.mark.parametrize("order", ["desc", "asc"])
@pytest.mark.parametrize("fields", ["a,b", "a,b,c"])
def test_null_first_field_rows_sorted_by_later_fields(
    lake_uri: str, order: str, fields: str
) -> None:
    """Rows with a null first key field, held back from a run (an object holding keyed rows
    too) and from objects holding only such rows, come last sorted by the later fields; one-row
    objects with a null second field sit where the sort puts them."""
    lake = Lake.init(LakeConfig(uri=lake_uri, user="tester"))
    pool = lake.create_pool("p", f"{fields}:{order}")
    names = fields.split(",")
    specs: list[list[tuple[int | None, ...]]] = [
        [(1, 5, 1), (None, 2, 1)],  # keyed rows and one null-first row
        [(None, 3, 1)],  # only a null-first row
        [(2, None, 1)],  # one row, second field null
        [(None, 1, 1)],
        [(2, 4, None)],
        [(1, None, 2)],
        [(3, 1, 1)],
        [(None, None, 5)],
    ]
    tables, first = [], 0
    for spec in specs:
        cols = {f: [row[j] for row in spec] for j, f in enumerate(names)}
        tables.append(_rows(cols, first))
        first += len(spec)
    loaded = _load_each(pool, tables)
    got = pool.scan().to_table().to_pylist()
    assert got == _expected(loaded, fields, order)
    # The scan's reverse direction sorts the same way.
    flipped = "asc" if order == "desc" else "desc"
    assert pool.scan(order=flipped).to_table().to_pylist() == _expected(loaded, fields, flipped)


@pytest.mark.parametrize("order", ["desc", "asc"])
def test_reverse_scan_places_later_null_fields(lake_uri: str, order: str) -> None:
    """A scan against the pool's direction moves nulls in later key fields to the other end
    of their first-field group, past what the objects' recorded bounds (taken in the pool's
    order) say: objects that did not overlap in the pool's order overlap in the other one,
    and are merged — a descending pool's (2, null) comes after (2, 2) ascending."""
    lake = Lake.init(LakeConfig(uri=lake_uri, user="tester"))
    pool = lake.create_pool("p", f"a,b:{order}")
    specs: list[list[tuple[int, int | None]]] = (
        [[(2, 0), (2, None), (1, None)], [(2, 2)], [(1, 5)]]
        if order == "desc"
        else [[(1, 1), (1, None), (2, 0)], [(1, 0)], [(3, None)]]
    )
    tables, first = [], 0
    for spec in specs:
        tables.append(_rows({"a": [r[0] for r in spec], "b": [r[1] for r in spec]}, first))
        first += len(spec)
    loaded = _load_each(pool, tables)
    for direction in ("asc", "desc"):
        got = pool.scan(order=direction).to_table().to_pylist()
        assert got == _expected(loaded, "a,b", direction)


_value = st.one_of(st.none(), st.integers(0, 2))


@st.composite
def _objects(draw: st.DrawFn) -> tuple[str, str, list[list[tuple[int | None, ...]]]]:
    width = draw(st.integers(1, 3))
    fields = ",".join("abc"[:width])
    order = draw(st.sampled_from(["asc", "desc"]))
    row = st.tuples(*[_value] * width)
    objects = draw(
        st.lists(
            st.one_of(st.lists(row, min_size=1, max_size=1), st.lists(row, min_size=2, max_size=5)),
            min_size=1,
            max_size=7,
        )
    )
    return fields, order, objects


@settings(max_examples=60, deadline=None, database=None)
@given(_objects())
def test_scan_order_matches_pyarrow_sort(
    case: tuple[str, str, list[list[tuple[Any, ...]]]],
) -> None:
    """Random one-row and multi-row objects, nulls in any key field, asc and desc, one to
    three key fields: the scan (both directions) equals pyarrow's sort of all rows."""
    fields, order, objects = case
    names = fields.split(",")
    with tempfile.TemporaryDirectory() as d:
        lake = Lake.init(LakeConfig(uri=f"{d}/lake", user="tester"))
        pool = lake.create_pool("p", f"{fields}:{order}")
        tables, first = [], 0
        for spec in objects:
            tables.append(_rows({f: [r[j] for r in spec] for j, f in enumerate(names)}, first))
            first += len(spec)
        loaded = _load_each(pool, tables)
        for direction in ("asc", "desc"):
            got = pool.scan(order=direction).to_table().to_pylist()
            assert got == _expected(loaded, fields, direction)
