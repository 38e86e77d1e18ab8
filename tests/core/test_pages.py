"""Reading part of a row group by its pages (``lake_core.pages``), and exact lookups that do.

The page reader is checked against pyarrow's own reading of whole row groups, over every flat
type, nulls, dictionary pages that fall back to plain mid-chunk (so columns' pages start at
different rows) and random row ranges; then an exact index's lookups through the scan and
through SQL, on local disk and on moto's S3 server: the exact rows, fewer rows decoded and
fewer bytes fetched than the row groups hold; objects without page indexes and pages that do
not decode are read whole, with the same rows.
"""

from __future__ import annotations

import itertools
import random
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lake_core import Lake
from lake_core.encode import EncodeOptions
from lake_core.errors import PurgedObjectError
from lake_core.pages import ObjectPages, PageLayoutError, PageRead, file_layout, read_rows
from lake_core.sql.engine import run_sql
from tests.core.test_indexes_model import model_matches

ROWS = 6_000


def _typed_table(n: int, seed: int) -> pa.Table:
    rng = random.Random(seed)

    def maybe(v: Any) -> Any:
        return None if rng.random() < 0.07 else v

    base = datetime(2024, 1, 1, tzinfo=UTC)
    return pa.table(
        {
            "i64": pa.array([maybe(rng.randrange(-(2**63), 2**63)) for _ in range(n)], pa.int64()),
            "i8": pa.array([maybe(rng.randrange(-128, 128)) for _ in range(n)], pa.int8()),
            "u32": pa.array([maybe(rng.randrange(2**32)) for _ in range(n)], pa.uint32()),
            "f64": pa.array(
                [maybe(rng.choice([float("nan"), -0.0, rng.random()])) for _ in range(n)]
            ),
            "f32": pa.array([maybe(rng.random()) for _ in range(n)], pa.float32()),
            "b": pa.array([maybe(rng.random() < 0.5) for _ in range(n)], pa.bool_()),
            # Few distinct values: dictionary pages all through the chunk.
            "low": pa.array([maybe(f"k{rng.randrange(9)}") for _ in range(n)], pa.string()),
            # Many: the dictionary outgrows its limit and falls back to plain mid-chunk (pages
            # after the first ones need no dictionary).
            "s": pa.array([maybe(f"comment {rng.randrange(10**9)} é") for _ in range(n)]),
            "ls": pa.array([maybe("x" * rng.randrange(30)) for _ in range(n)], pa.large_string()),
            "bin": pa.array(
                [maybe(rng.randbytes(rng.randrange(9))) for _ in range(n)], pa.binary()
            ),
            "fix": pa.array([maybe(rng.randbytes(4)) for _ in range(n)], pa.binary(4)),
            "dec": pa.array(
                [maybe(Decimal(rng.randrange(-(10**9), 10**9)) / 100) for _ in range(n)],
                pa.decimal128(12, 2),
            ),
            "d": pa.array([maybe(date(2000, 1, 1) + timedelta(days=i % 999)) for i in range(n)]),
            "ts": pa.array(
                [maybe(base + timedelta(seconds=rng.randrange(10**7))) for _ in range(n)],
                pa.timestamp("us", tz="America/New_York"),
            ),
            "t": pa.array(
                [maybe(time(rng.randrange(24), rng.randrange(60))) for _ in range(n)],
                pa.time64("us"),
            ),
            "dur": pa.array([maybe(rng.randrange(10**9)) for _ in range(n)], pa.duration("ms")),
            "dict": pa.array(
                [maybe(f"d{rng.randrange(40)}") for _ in range(n)]
            ).dictionary_encode(),
            "allnull": pa.array([None] * n, pa.string()),
            # View types (TPC-H's strings from tpchgen-cli), which Arrow's take does not cover.
            "sv": pa.array([maybe(f"v{rng.randrange(10**6)}") for _ in range(n)], pa.string_view()),
            "bv": pa.array(
                [maybe(rng.randbytes(rng.randrange(20))) for _ in range(n)], pa.binary_view()
            ),
        }
    )


def _written(table: pa.Table, group_rows: int, page_rows: int) -> bytes:
    sink = pa.BufferOutputStream()
    with pq.ParquetWriter(
        sink,
        table.schema,
        compression="snappy",
        dictionary_pagesize_limit=4096,
        max_rows_per_page=page_rows,
        write_page_index=True,
        # Pages of wide columns cut by size (checked every write batch) before they reach
        # ``page_rows``: columns' pages start at different rows.
        data_page_size=1024,
        write_batch_size=64,
    ) as w:
        w.write_table(table, row_group_size=group_rows)
    return sink.getvalue().to_pybytes()


def _same(a: pa.Table, b: pa.Table) -> bool:
    """Equal tables, NaN equal to NaN."""
    if a.schema != b.schema or a.num_rows != b.num_rows:
        return False
    for name in a.column_names:
        x, y = a.column(name), b.column(name)
        if pa.types.is_floating(x.type):
            x = pc.if_else(pc.is_nan(x), pa.scalar(1e300, x.type), x)
            y = pc.if_else(pc.is_nan(y), pa.scalar(1e300, y.type), y)
        if not x.equals(y):
            return False
    return True


def _ranges(rng: random.Random, rows: int) -> list[tuple[int, int]]:
    starts = sorted(rng.sample(range(rows), rng.randrange(1, 4)))
    out: list[tuple[int, int]] = []
    for s in starts:
        stop = min(rows, s + rng.choice([1, 2, 300, 1_000]))
        if out and s <= out[-1][1]:
            out[-1] = (out[-1][0], max(out[-1][1], stop))
        else:
            out.append((s, stop))
    return out


def test_page_reads_give_the_rows_pyarrow_reads_of_the_whole_group() -> None:
    table = _typed_table(ROWS, seed=3)
    data = _written(table, group_rows=2_500, page_rows=400)
    pf = pq.ParquetFile(pa.BufferReader(data))
    layout = file_layout(data)
    names = table.column_names
    rng = random.Random(5)
    misaligned = 0
    for g in range(pf.metadata.num_row_groups):
        whole = pf.read_row_group(g)
        rows = whole.num_rows
        for ranges in [
            [(0, 1)],
            [(rows - 1, rows + 50)],
            [(0, rows)],
            *(_ranges(rng, rows) for _ in range(12)),
        ]:
            counts = PageRead()
            got = read_rows(
                lambda o, n: data[o : o + n],
                layout,
                pf.schema_arrow,
                g,
                names,
                ranges,
                counts=counts,
            )
            # The ranges' rows as slices of the whole group (Arrow's take has no kernel for
            # view types).
            want = pa.concat_tables([whole.slice(a, min(b, rows) - a) for a, b in ranges])
            assert _same(got, want), (g, ranges)
            if ranges == [(rows - 1, rows + 50)]:
                # The last page of each column (and the dictionaries it still needs), not
                # the group.
                chunks = sum(
                    pf.metadata.row_group(g).column(c).total_compressed_size
                    for c in range(len(names))
                )
                assert 0 < counts.bytes_read < chunks / 2
        firsts = set()
        for c in layout.groups[g].chunks:
            assert c.offset_index is not None
            from lake_core.pages import page_locations

            at, length = c.offset_index
            firsts.add(tuple(p.first_row for p in page_locations(data[at : at + length])))
        misaligned += len(firsts) > 1
    # Some column's pages started at other rows (cut by size): the reader decoded those
    # columns apart and lined the rows up.
    assert misaligned >= 1


def test_an_object_page_reader_walks_the_footer_pyarrow_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The footer's bytes come from the metadata the engine opened (no second fetch); where
    pyarrow would write them otherwise, they are fetched, and the rows are the same."""
    table = _typed_table(3_000, seed=9)
    data = _written(table, group_rows=1_000, page_rows=250)
    metadata = pq.ParquetFile(pa.BufferReader(data)).metadata
    asked: list[tuple[int, int]] = []

    def fetch(offset: int, length: int) -> bytes:
        asked.append((offset, length))
        return data[offset : offset + length]

    pages = ObjectPages(fetch, len(data), metadata, threads=1)
    assert asked == [] and pages.fetched == 0
    got, fetched = pages.read(1, table.column_names, [(10, 20)])
    assert _same(got, table.slice(1_010, 10)) and pages.fetched == fetched > 0
    footer = metadata.serialized_size + 8
    assert (len(data) - footer, footer) not in asked
    # A footer pyarrow writes otherwise (fields of another writer it does not keep): fetched.
    monkeypatch.setattr("lake_core.pages._written_footer", lambda metadata: b"\x15\x00")
    asked.clear()
    pages = ObjectPages(fetch, len(data), metadata, threads=1)
    assert asked == [(len(data) - footer, footer)] and pages.fetched == footer
    got, _ = pages.read(1, table.column_names, [(10, 20)])
    assert _same(got, table.slice(1_010, 10))


def test_a_read_by_pages_refuses_what_it_cannot_follow() -> None:
    table = pa.table({"k": pa.array(range(3_000), pa.int64()), "lst": [[1, 2]] * 3_000})
    with_index = _written(table, 3_000, 500)
    pf = pq.ParquetFile(pa.BufferReader(with_index))
    layout = file_layout(with_index)
    fetch = lambda o, n: with_index[o : o + n]  # noqa: E731
    with pytest.raises(PageLayoutError, match="not flat"):
        read_rows(fetch, layout, pf.schema_arrow, 0, ["lst"], [(0, 10)])
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink)  # no page index
    plain = sink.getvalue().to_pybytes()
    with pytest.raises(PageLayoutError, match="offset index"):
        read_rows(
            lambda o, n: plain[o : o + n], file_layout(plain), pf.schema_arrow, 0, ["k"], [(0, 1)]
        )
    # Pages that are not what the offset index says: an error of this module, never rows.
    broken = bytearray(with_index)
    chunk = layout.groups[0].chunks[0]
    broken[chunk.data_offset : chunk.data_offset + 40] = b"\x07" * 40
    with pytest.raises(PageLayoutError):
        read_rows(
            lambda o, n: bytes(broken[o : o + n]), layout, pf.schema_arrow, 0, ["k"], [(0, 1)]
        )


def _pool_table(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table(
        {
            "ts": pa.array(np.arange(n, dtype=np.int64)),
            "part": pa.array(rng.integers(0, 4_000, n)),
            "note": pa.array([f"note {i} {i * 7 % 1_000}" for i in range(n)]),
            "price": pa.array(rng.random(n) * 1_000),
        }
    )


def _lookup(lake: Lake, pool: str, where: str) -> tuple[pa.Table, dict[str, int]]:
    scan = lake.pool(pool).scan(where=where)
    return scan.to_table(), scan.stats.to_json()


def _group_bytes(lake: Lake, pool: str) -> tuple[int, int]:
    """(rows, compressed bytes) of the largest row group of the pool's objects."""
    p = lake.pool(pool)
    best = (0, 0)
    for obj in p.snapshot(p.tip()).objects.values():
        data = p.store.get(p.layout.data(obj.id))
        meta = pq.ParquetFile(pa.BufferReader(data)).metadata
        for g in range(meta.num_row_groups):
            rg = meta.row_group(g)
            size = sum(rg.column(c).total_compressed_size for c in range(rg.num_columns))
            best = max(best, (rg.num_rows, size))
    return best


def test_an_exact_lookup_reads_the_pages_of_its_rows(lake: Lake) -> None:
    table = _pool_table(40_000, seed=1)
    for name in ("plain", "indexed"):
        lake.create_pool(name, "ts:asc", seek_stride=512 * 1024)
    lake.create_index_rule("by_part", "part", "exact", pools=["indexed"])
    for name in ("plain", "indexed"):
        lake.pool(name).load(table.slice(0, 25_000))
        lake.pool(name).load(table.slice(25_000))
    group_rows, group_bytes = _group_bytes(lake, "indexed")
    assert group_rows > 3 * 2048  # slices are smaller than row groups
    parts = table.column("part").to_pylist()
    for value in (parts[7], parts[31_000], 4_000_001):
        where = f"part = {value}"
        want = table.filter(pc.equal(table.column("part"), value))
        got, stats = _lookup(lake, "indexed", where)
        plain, plain_stats = _lookup(lake, "plain", where)
        assert got.equals(want) and plain.equals(want)
        if not want.num_rows:
            assert stats["rows_read"] == 0
            continue
        # Each row found costs a slice of its group, not the group.
        assert stats["rows_read"] <= want.num_rows * 2048 < plain_stats["rows_read"]
        assert stats["bytes_read"] < want.num_rows * group_bytes / 2
        assert stats["bytes_read"] < plain_stats["bytes_read"]
        # SQL plans the same pruning and reads the same pages.
        run = run_sql(
            f"SELECT * FROM indexed WHERE {where} ORDER BY ts", lake.pool, lake, derived=False
        )
        rows = run.relation.arrow()
        rows = rows.read_all() if hasattr(rows, "read_all") else rows
        assert rows.to_pylist() == want.to_pylist()
        sql_stats = run.stats()["indexed"]
        assert sql_stats["rows_read"] == stats["rows_read"]
        counted = run_sql(
            f"SELECT count(*), sum(price) FROM indexed WHERE {where}",
            lake.pool,
            lake,
            derived=False,
        )
        ((n, total),) = counted.relation.fetchall()
        assert n == want.num_rows and total == pytest.approx(pc.sum(want.column("price")).as_py())
        # Queries whose text names fewer columns than DuckDB reads: the rows read by pages
        # hold every column.
        joined = run_sql(
            f"SELECT i.note FROM indexed i JOIN plain p USING (ts) WHERE i.{where} ORDER BY ts",
            lake.pool,
            lake,
            derived=False,
        )
        assert [r[0] for r in joined.relation.fetchall()] == want.column("note").to_pylist()
        whole = run_sql(f"SELECT indexed FROM indexed WHERE {where} ORDER BY ts", lake.pool, lake)
        assert [r[0] for r in whole.relation.fetchall()] == want.to_pylist()


def test_an_object_purged_between_its_footer_and_its_pages_is_named(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A lookup that opened an object's footer and then finds its pages gone (a purge
    racing the read) says which object was purged, through the scan and SQL alike."""
    table = _pool_table(12_000, seed=3)
    lake.create_pool("p", "ts:asc", seek_stride=512 * 1024)
    lake.create_index_rule("by_part", "part", "exact")
    pool = lake.pool("p")
    pool.load(table)
    (obj,) = pool.snapshot(pool.tip()).objects.values()
    where = f"part = {table.column('part')[5].as_py()}"
    key = pool.layout.data(obj.id)
    data = pool.store.get(key)
    read = ObjectPages.read

    def purged_first(self: ObjectPages, *args: Any, **kwargs: Any) -> Any:
        pool.store.delete(key)
        return read(self, *args, **kwargs)

    monkeypatch.setattr(ObjectPages, "read", purged_first)
    with pytest.raises(PurgedObjectError) as scanned:
        _lookup(lake, "p", where)
    assert scanned.value.object_id == obj.id
    pool.store.put(key, data)  # back, to be purged again once its footer is read
    with pytest.raises(PurgedObjectError) as queried:
        run_sql(f"SELECT * FROM p WHERE {where}", lake.pool, lake, derived=False)
    assert queried.value.object_id == obj.id


def test_objects_without_page_indexes_are_read_whole_with_the_same_rows(
    lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Objects written before page indexes (or by another writer): an exact lookup reads its
    row groups whole; so does one whose pages do not decode."""
    table = _pool_table(12_000, seed=2)
    lake.create_pool("p", "ts:asc", seek_stride=512 * 1024)
    lake.create_index_rule("by_part", "part", "exact")
    monkeypatch.setattr(EncodeOptions, "page_options", lambda self: {})
    lake.pool("p").load(table.slice(0, 6_000))
    monkeypatch.undo()
    lake.pool("p").load(table.slice(6_000))
    value = table.column("part")[100].as_py()
    want = table.filter(pc.equal(table.column("part"), value))
    got, stats = _lookup(lake, "p", f"part = {value}")
    assert got.equals(want)

    pool = lake.pool("p")
    indexed = []
    for obj in pool.snapshot(pool.tip()).objects.values():
        meta = pq.ParquetFile(pa.BufferReader(pool.store.get(pool.layout.data(obj.id)))).metadata
        indexed.append(meta.row_group(0).column(0).has_offset_index)
    assert sorted(indexed) == [False, True]  # one object of each

    import lake_core.pages

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise PageLayoutError("pages that do not decode")

    monkeypatch.setattr(lake_core.pages, "read_rows", broken)
    again, _ = _lookup(lake, "p", f"part = {value}")
    assert again.equals(want)
    run = run_sql(
        f"SELECT * FROM p WHERE part = {value} ORDER BY ts", lake.pool, lake, derived=False
    )
    assert run.relation.fetchall() == [tuple(r.values()) for r in want.to_pylist()]


#: Many users: each has a few rows, a few slices of the row groups that hold them.
USERS = [f"u{i}" for i in range(2_000)]
_pools = itertools.count()

page_ops = st.lists(
    st.one_of(
        st.tuples(st.just("load"), st.integers(2_500, 9_000), st.integers(0, 2**31)),
        st.tuples(st.just("compact"), st.none(), st.none()),
        st.tuples(st.just("delete"), st.sampled_from(USERS), st.none()),
    ),
    min_size=1,
    max_size=5,
)
page_lookups = st.lists(
    st.one_of(
        st.sampled_from([*USERS, "nobody"]).map(lambda u: f"user = '{u}'"),
        st.lists(st.sampled_from(USERS), min_size=1, max_size=3).map(
            lambda us: "user IN (" + ", ".join(f"'{u}'" for u in us) + ")"
        ),
        st.tuples(st.sampled_from(USERS), st.integers(0, 9)).map(
            lambda t: f"user = '{t[0]}' AND n = {t[1]}"
        ),
    ),
    min_size=1,
    max_size=4,
)


@pytest.mark.slow
@settings(
    max_examples=8,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(ops=page_ops, queries=page_lookups)
def test_lookups_by_pages_match_the_model(
    lake: Lake, ops: list[tuple[str, Any, Any]], queries: list[str]
) -> None:
    """Random loads (row groups of several slices), compactions and deletes of a pool with an
    exact index, on local disk and moto S3: every lookup returns the rows a plain row-level
    model holds, and a lookup of one user decodes at most a slice per row it finds."""
    name = f"pages{next(_pools)}"
    lake.create_pool(name, "ts:asc", seek_stride=256 * 1024)
    lake.create_index_rule(f"by_user_{name}", "user", "exact", pools=[name])
    pool = lake.pool(name)
    model: list[tuple[int, str, int]] = []
    ts = itertools.count()
    for what, arg, seed in ops:
        if what == "load":
            rng = random.Random(seed)
            rows = [(next(ts), rng.choice(USERS), rng.randrange(10)) for _ in range(arg)]
            pool.load(
                pa.table(
                    {
                        "ts": pa.array([r[0] for r in rows], pa.int64()),
                        "user": [r[1] for r in rows],
                        "n": pa.array([r[2] for r in rows], pa.int64()),
                    }
                )
            )
            model += rows
        elif what == "compact" and pool.tip() is not None:
            pool.compact()
        elif what == "delete" and any(r[1] == arg for r in model):
            pool.delete(where=f"user = '{arg}'")
            model = [r for r in model if r[1] != arg]
    if pool.tip() is None:
        return
    for where in queries:
        scan = pool.scan(where=where)
        table = scan.to_table()
        got = sorted(zip(*(table[c].to_pylist() for c in ("ts", "user", "n")), strict=True))
        want = sorted(r for r in model if model_matches(r, where))
        assert got == want, where
        if " AND " not in where and " IN " not in where:
            assert scan.stats.rows_read <= 2048 * len(want), where
