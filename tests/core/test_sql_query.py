"""SQL over pools (lake_core.sql), on local disk and moto S3: results equal DuckDB over the
snapshot's rows, pruning is visible in the stats and never changes a result, refs and
``as_of`` pick snapshots, refused statements change nothing."""

from __future__ import annotations

import io
import uuid
from datetime import UTC, date, datetime
from typing import Any

import boto3
import duckdb
import pyarrow as pa
import pyarrow.fs as pafs
import pytest

from lake_core import Lake, LakeConfig
from lake_core.errors import BranchNotFoundError, PoolNotFoundError
from lake_core.pool import Pool
from lake_core.sql import (
    SqlError,
    SqlRefusedError,
    SqlSyntaxError,
    TableRef,
    parse_table_name,
    run_sql,
)
from lake_core.sql.analyze import analyze

DAYS = 8


def day_rows(d: int) -> pa.Table:
    n = 6
    return pa.table(
        {
            "day": pa.array([date(2026, 1, 1 + d)] * n, pa.date32()),
            "ts": pa.array(
                [datetime(2026, 1, 1 + d, h, tzinfo=UTC) for h in range(n)],
                pa.timestamp("us", tz="UTC"),
            ),
            "carrier": ["AA", "BB", "CC", "AA", "BB", None],
            "delay": pa.array([d * 10 + i for i in range(n)], pa.int64()),
            "origin": ["JFK", "LAX", "JFK", "SFO", "JFK", "LAX"],
            "f": [0.5, float("nan"), None, 1.5, -1.0, 2.0],
        }
    )


@pytest.fixture(scope="module", params=["local", "s3"])
def lake(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Lake:
    """One lake per backend for the module (the queries only read; the tests that create
    pools use their own names): loading per test would dominate the run on S3."""
    if request.param == "local":
        uri = str(tmp_path_factory.mktemp("sql")) + "/lake"
    else:
        endpoint = request.getfixturevalue("s3_endpoint")
        bucket = f"t-{uuid.uuid4().hex[:20]}"
        boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket=bucket)
        uri = f"s3://{bucket}/lake"
    return Lake.init(LakeConfig(uri=uri, user="tester"))


@pytest.fixture(scope="module")
def flights(lake: Lake) -> Pool:
    """Eight one-day objects on main; a branch ``dev`` with a ninth day; a later column on
    main (``gate``, absent from the older objects)."""
    pool = lake.create_pool("flights", "day")
    for d in range(DAYS):
        pool.load(day_rows(d), message=f"day {d}")
    pool.create_branch("dev")
    pool.load(day_rows(DAYS), branch="dev", message="dev day")
    late = day_rows(DAYS + 1).append_column("gate", pa.array(["g1"] * 6))
    pool.load(late, message="late day with a gate")
    return pool


def normal(found: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    """Rows in a stable order, NaN as a string (NaN is unequal to itself)."""
    return sorted(
        (tuple("NaN" if isinstance(v, float) and v != v else v for v in r) for r in found),
        key=repr,
    )


def oracle(tables: dict[str, pa.Table], sql: str) -> list[tuple[Any, ...]]:
    """DuckDB over plain Arrow tables: the brute-force answer."""
    con = duckdb.connect()
    con.execute("SET TimeZone='UTC'")
    for name, table in tables.items():
        schema, dot, rest = name.partition(".")
        if dot and "@" not in schema:
            con.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
            con.register(f"__t_{rest}", table)
            con.execute(f'CREATE VIEW "{schema}"."{rest}" AS SELECT * FROM "__t_{rest}"')
        else:
            con.register(name, table)
    return normal(con.sql(sql).fetchall())


def rows(lake: Lake, sql: str, **kw: Any) -> list[tuple[Any, ...]]:
    return normal(lake.sql(sql, **kw).fetchall())


QUERIES = [
    "SELECT carrier, count(*) AS n, sum(delay) FROM flights GROUP BY carrier",
    "SELECT * FROM flights WHERE day = DATE '2026-01-03'",
    "SELECT * FROM flights WHERE day = '2026-01-03'",
    "SELECT delay FROM flights WHERE day BETWEEN '2026-01-02' AND '2026-01-04' AND delay > 20",
    "SELECT delay FROM flights WHERE delay IN (3, 44, 71) OR carrier IS NULL",
    "SELECT delay FROM flights WHERE NOT (day <> '2026-01-05') AND carrier LIKE 'A%'",
    "SELECT delay FROM flights WHERE ts >= TIMESTAMP '2026-01-07 03:00:00' AND ts < '2026-01-08'",
    "SELECT count(*) FROM flights WHERE carrier IS NOT NULL AND f > 1",
    "SELECT count(*) FROM flights WHERE f <> f OR f > 1.0",
    "SELECT gate, count(*) FROM flights GROUP BY gate",
    "SELECT count(*) FROM flights WHERE gate IS NULL",
    "WITH d AS (SELECT * FROM flights WHERE day = '2026-01-02') SELECT count(*), sum(delay) FROM d",
    "SELECT a.delay, b.delay FROM flights a LEFT JOIN flights b "
    "ON a.delay = b.delay + 1 AND b.day = '2026-01-02' WHERE a.day = '2026-01-02'",
    "SELECT a.delay FROM flights a LEFT JOIN flights b ON a.delay = b.delay "
    "WHERE b.day IS NULL OR a.day = '2026-01-03'",
    "SELECT count(*) FROM flights WHERE delay > (SELECT max(delay) FROM flights "
    "WHERE day = '2026-01-02')",
    "SELECT carrier FROM flights WHERE day = '2026-01-04' UNION SELECT carrier FROM flights "
    "WHERE day = '2026-01-06'",
    "SELECT * FROM range(3) r, flights WHERE flights.day = '2026-01-01' AND r.range = 1",
]


@pytest.mark.parametrize("sql", QUERIES)
def test_results_equal_duckdb_over_the_snapshot(flights: Pool, lake: Lake, sql: str) -> None:
    assert rows(lake, sql) == oracle({"flights": flights.read()}, sql)


def test_pruning_reads_one_object_of_a_one_day_query(flights: Pool, lake: Lake) -> None:
    run = run_sql("SELECT count(*) FROM flights WHERE day = '2026-01-03'", lake.pool, lake)
    assert run.relation.fetchall() == [(6,)]
    stats = run.stats()["flights"]
    assert stats["objects_total"] == DAYS + 1
    assert stats["objects_read"] == 1
    assert stats["row_groups_read"] == 1
    assert stats["rows_read"] == 6
    assert stats["bytes_read"] > 0
    everything = run_sql("SELECT count(*) FROM flights", lake.pool, lake)
    assert everything.relation.fetchall() == [((DAYS + 1) * 6,)]
    assert everything.stats()["flights"]["objects_read"] == DAYS + 1


def test_null_supplying_side_is_not_pruned(flights: Pool, lake: Lake) -> None:
    sql = (
        "SELECT count(*) FROM flights a LEFT JOIN flights b "
        "ON a.delay = b.delay AND b.day = '2026-01-02' WHERE b.day IS NULL"
    )
    analysis = analyze(duckdb.connect(), sql)
    assert analysis.predicates({"flights": flights.schema()})["flights"] is None
    assert rows(lake, sql) == oracle({"flights": flights.read()}, sql)


def test_refs_and_as_of_pick_snapshots(flights: Pool, lake: Lake) -> None:
    first = list(flights.log())[-1].id
    dev = flights.read("dev")
    assert rows(lake, 'SELECT count(*) FROM "flights@dev"') == [(dev.num_rows,)]
    assert rows(lake, f'SELECT count(*) FROM "flights@{first}"') == [(6,)]
    # Two snapshots of one pool in one query: the rows dev has and main lacks.
    diff = 'SELECT delay FROM "flights@dev" EXCEPT SELECT delay FROM flights'
    assert rows(lake, diff) == oracle({"flights@dev": dev, "flights": flights.read()}, diff)
    when = list(flights.log())[-3].date  # after the third day's commit
    assert rows(lake, "SELECT count(*) FROM flights", as_of=when) == [(18,)]
    with pytest.raises(BranchNotFoundError):
        lake.sql('SELECT * FROM "flights@nope"')


def test_namespaced_pools_and_joins_across_pools(flights: Pool, lake: Lake) -> None:
    other = lake.create_pool("ops.airports", "code")
    airports = pa.table({"code": ["JFK", "LAX"], "city": ["New York", "Los Angeles"]})
    other.load(airports)
    sql = (
        "SELECT city, count(*) FROM flights JOIN ops.airports a ON flights.origin = a.code "
        "WHERE a.code = 'JFK' GROUP BY city"
    )
    assert rows(lake, sql) == oracle({"flights": flights.read(), "ops.airports": airports}, sql)


def test_pool_sql_reads_its_own_pool(flights: Pool, lake: Lake) -> None:
    table = flights.sql("SELECT max(delay) AS m FROM flights").arrow().read_all()
    assert table.column("m").to_pylist() == [max(flights.read().column("delay").to_pylist())]
    with pytest.raises(PoolNotFoundError):
        flights.sql("SELECT * FROM other")
    relation = lake.sql("SELECT day, count(*) AS n FROM flights GROUP BY day ORDER BY day")
    assert list(relation.df()["n"]) == [6] * (DAYS + 1)
    assert relation.pl()["n"].to_list() == [6] * (DAYS + 1)
    assert relation.to_arrow_table().num_rows == DAYS + 1


def _listing(lake: Lake) -> list[tuple[str, int]]:
    return sorted((o.key, o.size) for o in lake.store.list(""))


REFUSED = [
    "INSERT INTO flights VALUES (1)",
    "UPDATE flights SET delay = 0",
    "DELETE FROM flights",
    "CREATE TABLE t AS SELECT 1",
    "COPY (SELECT 1) TO '/tmp/lake-sql-copy.csv'",
    "ATTACH '/tmp/lake-sql.db'",
    "PRAGMA version",
    "INSTALL httpfs",
    "SET threads = 1",
    "SELECT * FROM read_csv('/etc/passwd')",
    "SELECT * FROM read_parquet('/tmp/x.parquet')",
    "SELECT * FROM query('SELECT 1')",
    "SELECT 1; SELECT 2",
]


@pytest.mark.parametrize("sql", REFUSED)
def test_refused_statements_change_nothing(flights: Pool, lake: Lake, sql: str) -> None:
    before = _listing(lake)
    with pytest.raises(SqlRefusedError):
        lake.sql(sql)
    assert _listing(lake) == before


def test_errors(flights: Pool, lake: Lake) -> None:
    with pytest.raises(SqlSyntaxError) as syntax:
        lake.sql("SELECT * FROM flights WHER day = 1")
    assert syntax.value.position is not None and "position" in str(syntax.value)
    with pytest.raises(PoolNotFoundError, match="pool not found"):
        lake.sql("SELECT * FROM nope")
    with pytest.raises(SqlError, match="nosuch"):
        lake.sql("SELECT nosuch FROM flights")
    with pytest.raises(SqlError, match="unknown metadata table"):
        lake.sql("SELECT * FROM flights$nosuchmeta")


def test_file_access_is_sandboxed_even_past_the_walker(flights: Pool, lake: Lake) -> None:
    run = run_sql("SELECT count(*) FROM flights", lake.pool, lake)
    with pytest.raises(duckdb.Error):
        run.connection.sql("SELECT * FROM read_csv('/etc/passwd')").fetchall()
    with pytest.raises(duckdb.Error):
        run.connection.execute("SET enable_external_access = true")


def test_an_empty_pool_has_no_rows(lake: Lake) -> None:
    if "empty" not in {str(p.name) for p in lake.pools()}:
        lake.create_pool("empty", "k")
    assert rows(lake, "SELECT count(*) FROM empty") == [(0,)]


@pytest.mark.parametrize(
    ("text", "ref"),
    [
        ("flights", TableRef(None, "flights")),
        ("ns.flights", TableRef("ns", "flights")),
        ("flights@dev", TableRef(None, "flights", "dev")),
        ("ns.flights@dev$objects", TableRef("ns", "flights", "dev", "objects")),
        ("flights$commits", TableRef(None, "flights", None, "commits")),
        ("lake$pools", TableRef(None, None, None, "pools")),
        ("lake@main$commits", TableRef(None, "lake", "main", "commits")),
    ],
)
def test_table_names(text: str, ref: TableRef) -> None:
    assert parse_table_name(text) == ref
    assert str(ref) == text


@pytest.mark.parametrize("text", ["flights@", "flights$", "@dev", ".flights", "ns."])
def test_bad_table_names(text: str) -> None:
    with pytest.raises(Exception, match="table name"):
        parse_table_name(text)


def test_a_pool_name_with_a_dollar(lake: Lake) -> None:
    if "a$b" not in {str(p.name) for p in lake.pools()}:
        lake.create_pool("a$b", "k").load(pa.table({"k": [1, 2]}))
    assert rows(lake, "SELECT count(*) FROM a$b") == [(2,)]
    assert rows(lake, 'SELECT count(*) FROM "a$b@main"') == [(2,)]
    assert parse_table_name("a$b@dev") == TableRef(None, "a$b", "dev")


def test_the_relation_keeps_its_connection(flights: Pool, lake: Lake) -> None:
    import gc

    def make() -> Any:
        return lake.sql("SELECT count(*) AS n FROM flights WHERE day = '2026-01-02'")

    relation = make()
    gc.collect()
    assert relation.fetchall() == [(6,)]


def test_planned_fragments_name_row_groups(flights: Pool, lake: Lake) -> None:
    from lake_core.expr import parse_predicate
    from lake_core.planning import open_fragments, plan_read

    snap = flights.snapshot(flights.resolve())
    plan = plan_read(snap, flights.config.key, parse_predicate("day = '2026-01-04'"))
    fragments = open_fragments(plan, flights.store, flights.id, flights.name, ["delay"])
    assert [f.row_groups for f in fragments] == [(0,)]
    assert fragments[0].whole and fragments[0].obj.count == 6
    assert plan.stats.objects_read == 1 and plan.stats.rows_read == 6
    assert plan.pruned["stats"].objects == DAYS  # the other days, by their key range


def test_asof_join_right_side_is_not_pruned(flights: Pool, lake: Lake) -> None:
    sql = (
        'SELECT a.delay, b.delay FROM flights a ASOF JOIN "flights@dev" b '
        "ON a.delay >= b.delay WHERE b.day = '2026-01-02'"
    )
    expected = oracle({"flights": flights.read(), "flights@dev": flights.read("dev")}, sql)
    assert len(expected) == 6  # only rows whose nearest dev row is on that day
    assert rows(lake, sql) == expected


def test_a_quoted_dotted_name_and_a_view_beside_its_pool(flights: Pool, lake: Lake) -> None:
    n = flights.read().num_rows
    sql = 'SELECT count(*) FROM "default.flights@main" a JOIN "default".flights b USING (delay)'
    assert rows(lake, sql) == [(n,)]
    if "day2" not in {str(v[0]) for v in lake.sql("SELECT name FROM lake$views").fetchall()}:
        lake.create_view("day2", "SELECT * FROM flights WHERE day = '2026-01-02'")
    joined = "SELECT count(*) FROM day2 JOIN flights USING (delay)"
    assert rows(lake, joined) == [(6,)]
    run = run_sql(joined, lake.pool, lake)
    assert run.relation.fetchall() == [(6,)]
    assert run.stats()["flights"]["objects_read"] == DAYS + 1  # the outer read is unconstrained


@pytest.mark.parametrize(
    "join",
    [
        # A condition on the side that may be pruned, and one on the side that may not.
        "flights a LEFT JOIN \"flights@dev\" b ON a.delay = b.delay AND b.day = '2026-01-02'",
        "flights a LEFT JOIN \"flights@dev\" b ON a.delay = b.delay AND a.day = '2026-01-02'",
        "flights a RIGHT JOIN \"flights@dev\" b ON a.delay = b.delay AND b.day = '2026-01-02'",
        "flights a FULL JOIN \"flights@dev\" b ON a.delay = b.delay AND a.day = '2026-01-02'",
        "flights a FULL JOIN \"flights@dev\" b ON a.delay = b.delay AND b.day = '2026-01-02'",
        "flights a ANTI JOIN \"flights@dev\" b ON a.delay = b.delay AND a.day = '2026-01-02'",
        "flights a SEMI JOIN \"flights@dev\" b ON a.delay = b.delay AND b.day = '2026-01-02'",
    ],
)
def test_join_conditions_prune_only_where_sound(flights: Pool, lake: Lake, join: str) -> None:
    sql = f"SELECT * FROM {join}"
    expected = oracle({"flights": flights.read(), "flights@dev": flights.read("dev")}, sql)
    assert rows(lake, sql) == expected


def test_queries_share_a_sandboxed_database_but_see_only_their_own(
    flights: Pool, lake: Lake
) -> None:
    """Queries whose plans name the same objects run in cursors of one cached database:
    neither sees the other's registrations (TEMP, per cursor), and no query can read a lake
    object outside its own plan, even bypassing the analyser."""
    first = run_sql('SELECT count(*) FROM flights, "flights$commits"', lake.pool, lake)
    second = run_sql("SELECT count(*) FROM flights", lake.pool, lake)
    assert first.connection is not second.connection
    assert first.connection.sql('SELECT count(*) FROM "flights$commits"').fetchall()[0][0] > 0
    with pytest.raises(duckdb.Error, match="flights\\$commits"):
        second.connection.sql('SELECT count(*) FROM "flights$commits"').fetchall()
    with pytest.raises(duckdb.Error):
        second.connection.execute("SET lock_configuration = false")
    one_day = run_sql("SELECT count(*) FROM flights WHERE day = '2026-01-02'", lake.pool, lake)
    if lake.store.local_path("probe") is None:
        return  # S3: DuckDB reads no file at all (the lake hands it Arrow)
    assert one_day.relation.fetchall() == [(6,)]
    planned = set(flights_files(flights, "2026-01-02"))
    others = [f for f in flights.files() if f not in planned]
    assert others and len(planned) == 1
    with pytest.raises(duckdb.Error, match="Permission|disabled"):
        one_day.connection.sql(f"SELECT count(*) FROM read_parquet('{others[0]}')").fetchall()


def flights_files(pool: Pool, day: str) -> list[str]:
    from lake_core.expr import parse_predicate
    from lake_core.planning import plan_read

    snap = pool.snapshot(pool.resolve())
    plan = plan_read(snap, pool.config.key, parse_predicate(f"day = '{day}'"))
    return [pool.store.local_path(pool.layout.data(o.id)) or "" for o in plan.objects]


def test_a_relation_stays_valid_after_later_queries(flights: Pool, lake: Lake) -> None:
    from lake_core.sql.engine import SHARED_DATABASES

    early = lake.sql("SELECT count(*) AS n FROM flights WHERE day = '2026-01-02'")
    # More distinct plans than the cache holds: the early query's database leaves the cache.
    for d in range(SHARED_DATABASES + 1):
        day = f"2026-01-{1 + d % DAYS:02d}"
        later = lake.sql(f"SELECT count(*) FROM flights WHERE day = '{day}' AND delay >= {d}")
        later.fetchall()
    assert early.fetchall() == [(6,)]


def test_a_shared_query_prints_nothing(
    flights: Pool, lake: Lake, capfd: pytest.CaptureFixture[str]
) -> None:
    run = run_sql("SELECT count(*) FROM flights", lake.pool, lake)
    setting = "SELECT current_setting('enable_progress_bar'), current_setting('TimeZone')"
    assert run.connection.execute(setting).fetchall() == [(False, "UTC")]
    assert run.relation.fetchall() == [(flights.read().num_rows,)]
    assert capfd.readouterr().out == ""


class _CountingFiles(pafs.FileSystemHandler):
    """A local Arrow filesystem that records every read: (path, offset, length)."""

    def __init__(self) -> None:
        self.fs = pafs.LocalFileSystem()
        self.reads: list[tuple[str, int, int]] = []

    def __eq__(self, other: object) -> bool:
        return other is self

    def __ne__(self, other: object) -> bool:
        return other is not self

    def get_type_name(self) -> str:
        return "counting"

    def normalize_path(self, path: str) -> str:
        return path

    def get_file_info(self, paths: Any) -> Any:
        return self.fs.get_file_info(paths)

    def get_file_info_selector(self, selector: Any) -> Any:
        return self.fs.get_file_info(selector)

    def open_input_file(self, path: str) -> Any:
        handler = self

        class Raw(io.RawIOBase):
            def __init__(self) -> None:
                self.f = handler.fs.open_input_file(path)

            def readable(self) -> bool:
                return True

            def seekable(self) -> bool:
                return True

            def seek(self, offset: int, whence: int = 0) -> int:
                return int(self.f.seek(offset, whence))

            def tell(self) -> int:
                return int(self.f.tell())

            def readinto(self, buffer: Any) -> int:
                at = self.f.tell()
                data = self.f.read(len(buffer))
                buffer[: len(data)] = data
                handler.reads.append((path, at, len(data)))
                return len(data)

        return pa.PythonFile(Raw(), mode="r")

    def open_input_stream(self, path: str) -> Any:
        return self.open_input_file(path)

    def create_dir(self, *args: Any) -> None: ...
    def delete_dir(self, *args: Any) -> None: ...
    def delete_dir_contents(self, *args: Any) -> None: ...
    def delete_root_dir_contents(self, *args: Any) -> None: ...
    def delete_file(self, *args: Any) -> None: ...
    def move(self, *args: Any) -> None: ...
    def copy_file(self, *args: Any) -> None: ...
    def open_output_stream(self, *args: Any) -> Any: ...
    def open_append_stream(self, *args: Any) -> Any: ...


def test_arrow_fragments_read_each_footer_once(
    tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The S3 path's planner opens footers as pyarrow fragments that the scan reuses: the
    tail of each object (its footer) is fetched once, not once to plan and once to scan."""
    import pyarrow.dataset as ds

    from lake_core.expr import parse_predicate
    from lake_core.planning import open_fragments, plan_read

    pool = Lake.init(LakeConfig(uri=str(tmp_path / "lake"))).create_pool("p", "day")
    for d in range(3):
        pool.load(day_rows(d))
    counting = _CountingFiles()
    fs = pafs.PyFileSystem(counting)
    monkeypatch.setattr(pool.store, "arrow_location", lambda key: (fs, pool.store.local_path(key)))
    snap = pool.snapshot(pool.resolve())
    plan = plan_read(snap, pool.config.key, parse_predicate("day <= '2026-01-02'"))
    fmt = ds.ParquetFileFormat()
    fragments = open_fragments(plan, pool.store, pool.id, pool.name, None, arrow_format=fmt)
    assert len(fragments) == 2
    table = ds.FileSystemDataset([f.arrow for f in fragments], snap.schema, fmt, fs).to_table()
    assert table.num_rows == 12
    sizes = {f.arrow.path: f.obj.size for f in fragments}
    tails = [path for path, at, n in counting.reads if at + n >= sizes[path]]
    assert sorted(tails) == sorted(sizes)  # each footer once
    assert {path for path, _, _ in counting.reads} == set(sizes)  # and the data was read here


def test_a_cursor_that_would_print_gets_a_fresh_database(
    flights: Pool, lake: Lake, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Should a DuckDB turn the progress bar on in new cursors (it cannot be turned off in a
    locked database's cursor), the query gets a database of its own with the bar off."""
    import lake_core.sql.engine as engine

    monkeypatch.setattr(engine, "_may_print", lambda cursor: True)
    run = run_sql("SELECT count(*) FROM flights", lake.pool, lake)
    assert run.relation.fetchall() == [(flights.read().num_rows,)]
    setting = (
        "SELECT current_setting('enable_progress_bar'), "
        "current_setting('enable_progress_bar_print'), current_setting('TimeZone')"
    )
    # Set on its own connection (a shared cursor keeps the default: printing on, bar off).
    assert run.connection.execute(setting).fetchall() == [(False, False, "UTC")]
    with pytest.raises(duckdb.Error):
        run.connection.execute("SET enable_external_access = true")
    monkeypatch.undo()
    shared = run_sql("SELECT count(*) FROM flights", lake.pool, lake)
    assert shared.connection.execute(setting).fetchall() == [(False, True, "UTC")]


def _child_count(uri: str, out: Any) -> None:
    import lake_core.sql.engine as engine

    lake = Lake.open(LakeConfig(uri=uri))
    inherited = dict(engine._shared)  # the parent's, as the fork copied them
    found = lake.sql("SELECT count(*) FROM p").fetchall()
    mine = set(map(id, engine._shared.values()))
    out.put((found, bool(inherited), mine.isdisjoint(map(id, inherited.values()))))


def test_a_forked_child_starts_its_own_databases(tmp_path: Any) -> None:
    """DuckDB is not fork-safe: a child never uses the databases its parent cached."""
    import multiprocessing

    uri = str(tmp_path / "lake")
    lake = Lake.init(LakeConfig(uri=uri))
    lake.create_pool("p", "day").load(day_rows(0))
    assert lake.sql("SELECT count(*) FROM p").fetchall() == [(6,)]
    ctx = multiprocessing.get_context("fork")
    out = ctx.Queue()
    child = ctx.Process(target=_child_count, args=(uri, out))
    child.start()
    got = out.get(timeout=60)
    child.join(timeout=60)
    assert child.exitcode == 0
    assert got == ([(6,)], True, True)


def test_engine_errors_are_one_line_with_every_line_of_the_message() -> None:
    """DuckDB spreads some messages over lines (the reason an extension cannot load, candidate
    bindings): all of it on one line; the query excerpt with its caret is left out."""
    import duckdb

    from lake_core.sql.engine import engine_error

    with pytest.raises(duckdb.Error) as binder:
        duckdb.sql("SELECT x FROM (SELECT 1 a)")
    assert str(engine_error(binder.value)) == (
        'Binder Error: Referenced column "x" not found in FROM clause! Candidate bindings: "a"'
    )
    with pytest.raises(duckdb.Error) as parser:
        duckdb.sql("SELEC 1")
    assert str(engine_error(parser.value)) == 'Parser Error: syntax error at or near "SELEC"'
    multi = RuntimeError("IO Error: cannot install 'httpfs':\nfile system operations are disabled")
    assert str(engine_error(multi)) == (
        "IO Error: cannot install 'httpfs': file system operations are disabled"
    )
