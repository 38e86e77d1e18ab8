"""Derived pools (issue 17): the definition rules, refresh keeping the derived pool equal to
its definition evaluated on the source over random histories (loads, deletes, reverts,
compactions, merges from a branch — refreshed after some of them, so one refresh often
spans several commits), and aggregate queries answered from it — a fixed set and random ones
(bucket, groups, aggregates and bounds drawn at random) — equal to the same queries on the
source's rows (counts, integer sums, min, max exactly; avg within float tolerance).
Local disk and S3 (moto over HTTP)."""

from __future__ import annotations

import math
import os
import tempfile
import uuid
from datetime import UTC, date, datetime, timedelta
from typing import Any

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lake_core import Lake, LakeConfig
from lake_core.derived.answer import answer
from lake_core.derived.lineage import reflected
from lake_core.derived.maintain import create_derived, refresh
from lake_core.derived.spec import parse_definition
from lake_core.errors import EmptyTransactionError, UsageError
from lake_core.sql import run_sql
from tests.modelsettings import model_settings

DEFINITION = (
    "SELECT date_trunc('hour', ts) AS hour, carrier, count(*) AS n, sum(delay) AS delay_sum, "
    "min(delay) AS delay_min, max(delay) AS delay_max FROM events GROUP BY ALL"
)
START = datetime(2026, 1, 1, tzinfo=UTC)
#: Queries the derived pool answers (each compared with the raw answer).
ANSWERED = (
    "SELECT date_trunc('day', ts) AS d, carrier, count(*) AS n, avg(delay) AS a "
    "FROM events GROUP BY ALL",
    "SELECT carrier, sum(delay) AS s, min(delay) AS lo, max(delay) AS hi FROM events "
    "WHERE ts >= '2026-01-02' AND ts < '2026-01-03 06:00:00' GROUP BY carrier",
    "SELECT count(*) AS n, count(delay) AS c FROM events WHERE carrier IN ('a', 'b')",
    "SELECT date_trunc('hour', ts) AS h, count(*) FROM events GROUP BY ALL HAVING count(*) > 2",
    "SELECT date_trunc('month', ts), sum(delay) FROM events GROUP BY 1",
)
#: Queries it cannot answer: they run on the source's rows.
NOT_ANSWERED = (
    "SELECT date_trunc('minute', ts) AS m, count(*) FROM events GROUP BY ALL",  # finer
    "SELECT carrier, count(*) FROM events WHERE ts > '2026-01-02' GROUP BY ALL",  # > bound
    "SELECT carrier, count(*) FROM events WHERE ts >= '2026-01-02 00:30:00' GROUP BY ALL",
    "SELECT carrier, count(*) FROM events WHERE delay > 3 GROUP BY ALL",  # not grouped
    "SELECT carrier, count(DISTINCT delay) FROM events GROUP BY ALL",
    "SELECT carrier, sum(delay * 2) FROM events GROUP BY ALL",
    "SELECT * FROM events",
)


def _batch(rng: np.random.Generator, start_id: int, n: int, hours: int) -> pa.Table:
    ts = [START + timedelta(minutes=int(m)) for m in rng.integers(0, hours * 60, n)]
    carriers = rng.choice(np.array(["a", "b", "c", "d"], dtype=object), n)
    carrier = pa.array(carriers.tolist(), mask=rng.random(n) < 0.05)  # null group values too
    delay = pa.array(rng.integers(-20, 200, n), mask=rng.random(n) < 0.1)
    return pa.table(
        {
            "id": pa.array(np.arange(start_id, start_id + n), pa.int64()),
            "ts": pa.array(ts, pa.timestamp("us", tz="UTC")),
            "carrier": carrier,
            "delay": delay.cast(pa.int64()),
        }
    )


def _sql(sql: str, **tables: pa.Table) -> list[tuple[Any, ...]]:
    con = duckdb.connect(":memory:")
    con.execute("SET TimeZone='UTC'")
    for name, table in tables.items():
        con.register(name, table)
    return sorted(con.sql(sql).fetchall(), key=repr)


def _check_derived(lake: Lake, rows: pa.Table) -> None:
    """The derived pool equals the definition over ``rows`` (the model's rows)."""
    want = _sql(DEFINITION, events=rows)
    got = _sql(
        "SELECT hour, carrier, n, delay_sum, delay_min, delay_max FROM d",
        d=lake.pool("hourly").read(),
    )
    assert got == want


def _same(got: list[tuple[Any, ...]], want: list[tuple[Any, ...]]) -> bool:
    if len(got) != len(want):
        return False
    for g, w in zip(got, want, strict=True):
        for a, b in zip(g, w, strict=True):
            if isinstance(a, float) and isinstance(b, float):
                if not math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9):
                    return False
            elif a != b:
                return False
    return True


def random_queries(rng: np.random.Generator, n: int) -> list[str]:
    """Queries the derived pool answers: a coarser-or-equal bucket (or none), a subset of
    its group columns, decomposable aggregates, and bounds on bucket boundaries."""
    out = []
    aggregates = [
        "count(*)",
        "count(delay)",
        "sum(delay)",
        "min(delay)",
        "max(delay)",
        "avg(delay)",
    ]
    for _ in range(n):
        items = []
        unit = rng.choice(["hour", "day", "week", "month", "none"])
        if unit != "none":
            items.append(f"date_trunc('{unit}', ts) AS b")
        if rng.random() < 0.6:
            items.append("carrier")
        picked = rng.choice(aggregates, size=int(rng.integers(1, 4)), replace=False)
        items += [f"{a} AS a{i}" for i, a in enumerate(picked)]
        where = []
        if rng.random() < 0.5:
            where.append(
                f"ts >= '2026-01-0{int(rng.integers(1, 4))} {int(rng.integers(0, 24)):02d}:00:00'"
            )
        if rng.random() < 0.3:
            where.append(f"ts < '2026-01-0{int(rng.integers(2, 5))}'")
        if rng.random() < 0.3:
            where.append(rng.choice(["carrier = 'a'", "carrier IN ('b', 'c')", "carrier IS NULL"]))
        sql = f"SELECT {', '.join(items)} FROM events"
        if where:
            sql += " WHERE " + " AND ".join(where)
        out.append(sql + " GROUP BY ALL")
    return out


def _check_queries(lake: Lake, extra: int = 0) -> None:
    rng = np.random.default_rng(extra)
    for sql in [*ANSWERED, *random_queries(rng, extra)]:
        run = run_sql(sql, lake.pool, lake)
        assert run.answered_from == ["hourly"], (sql, run.derivation)
        raw = run_sql(sql, lake.pool, lake, derived=False)
        assert raw.answered_from == ["events"]
        got = sorted(run.relation.fetchall(), key=repr)
        want = sorted(raw.relation.fetchall(), key=repr)
        assert _same(got, want), sql
        assert run.relation.columns == raw.relation.columns, sql
        assert run.relation.types == raw.relation.types, sql  # the raw query's types too


op_st = st.one_of(
    st.tuples(st.just("load"), st.integers(1, 120), st.integers(1, 72)),
    st.tuples(st.just("delete"), st.sampled_from(["a", "b", "c"])),
    st.tuples(st.just("revert"), st.integers(0, 20)),
    st.tuples(st.just("compact")),
    st.tuples(st.just("merge"), st.integers(1, 60)),
    st.tuples(st.just("refresh")),
)


def run_history(lake: Lake, ops: list[tuple[Any, ...]]) -> None:
    rng = np.random.default_rng(len(ops) * 7919 + sum(len(o) for o in ops))
    pool = lake.create_pool("events", "ts:asc")
    first = _batch(rng, 0, 200, 48)
    loads = [(pool.load(first).id, first)]
    model = {r["id"]: r for r in first.to_pylist()}
    next_id = 200
    create_derived(lake, "hourly", "events", DEFINITION)
    for op in ops:
        pool = lake.pool("events")
        kind = op[0]
        if kind == "load":
            batch = _batch(rng, next_id, op[1], op[2])
            next_id += op[1]
            loads.append((pool.load(batch).id, batch))
            model.update({r["id"]: r for r in batch.to_pylist()})
        elif kind == "delete":
            gone = [i for i, r in model.items() if r["carrier"] == op[1]]
            try:
                pool.delete(f"carrier = '{op[1]}'")
            except EmptyTransactionError:
                assert not gone
                continue
            for i in gone:
                del model[i]
        elif kind == "revert":
            commit, batch = loads.pop(op[1] % len(loads))
            present = [i for i in batch["id"].to_pylist() if i in model]
            try:
                pool.revert(commit)
            except EmptyTransactionError:
                assert not present
                continue
            for i in present:
                del model[i]
        elif kind == "compact":
            pool.compact()
        elif kind == "merge":
            pool.create_branch("dev")
            batch = _batch(rng, next_id, op[1], 24)
            next_id += op[1]
            pool.load(batch, "dev")
            pool.merge("dev", "main")
            pool.delete_branch("dev")
            model.update({r["id"]: r for r in batch.to_pylist()})
        else:
            refresh(lake, lake.pool("hourly"))
            _check_derived(lake, pa.Table.from_pylist(list(model.values()), schema=first.schema))
    result = refresh(lake, lake.pool("hourly"))
    assert reflected(lake.pool("hourly")) == lake.pool("events").tip("main")
    assert result.source_commit == lake.pool("events").tip("main")
    rows = pa.Table.from_pylist(list(model.values()), schema=first.schema)
    _check_derived(lake, rows)
    _check_queries(lake, extra=8)


EXAMPLES = int(os.environ.get("LAKE_MODEL_EXAMPLES", "120")) // 12


OPS = st.lists(op_st, min_size=2, max_size=8)


@model_settings(max(6, EXAMPLES))
@given(ops=OPS)
def test_derived_history_equals_definition_local(ops: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as d:
        run_history(Lake.init(LakeConfig(uri=d + "/lake", user="model")), ops)


@pytest.mark.slow
@model_settings(max(3, EXAMPLES // 3))
@given(ops=OPS)
def test_derived_history_equals_definition_s3(s3_bucket: str, ops: list[tuple[Any, ...]]) -> None:
    uri = f"s3://{s3_bucket}/lake-{uuid.uuid4().hex[:8]}"
    run_history(Lake.init(LakeConfig(uri=uri, user="model")), ops)


def test_definition_rules() -> None:
    spec = parse_definition(DEFINITION)
    assert spec.key == ("hour", "carrier")
    assert (spec.bucket_unit, spec.bucket_column) == ("hour", "ts")
    # sum(delay) brings a hidden count(delay), for avg(delay) over rows with nulls.
    assert [a.name for a in spec.aggregates][-1] == "__count_delay"
    refused = {
        "SELECT carrier, count(*) AS n FROM events GROUP BY ALL": "time bucket",
        "SELECT date_trunc('hour', ts) AS h, count(*) AS n FROM events WHERE x > 1 GROUP BY ALL": (
            "cannot filter"
        ),
        "SELECT date_trunc('hour', ts) AS h, avg(x) AS a FROM events GROUP BY ALL": "not avg",
        "SELECT date_trunc('hour', ts) AS h, count(*) + 1 AS n FROM events GROUP BY ALL": (
            "can select only"
        ),
        "SELECT date_trunc('hour', ts) AS h, count(*) AS n FROM a JOIN b USING (k) GROUP BY ALL": (
            "one pool"
        ),
        "SELECT date_trunc('hour', ts) AS h, count(*) AS h FROM events GROUP BY ALL": "twice",
        "SELECT date_trunc('hour', ts) AS h FROM events GROUP BY ALL": "at least one aggregate",
        # A date_trunc it cannot keep says why, not "can select only …".
        "SELECT date_trunc('fortnight', ts) AS h, count(*) AS n FROM events GROUP BY ALL": (
            "buckets 'h' by unknown time unit 'fortnight': date_trunc takes second, minute, "
            "hour, day, week, month, quarter, year"
        ),
        "SELECT date_trunc(ts, 'hour') AS h, count(*) AS n FROM events GROUP BY ALL": (
            r"a unit in quotes and a column \(units: second, minute"
        ),
        "SELEC 1": "cannot parse",
    }
    for sql, message in refused.items():
        with pytest.raises(UsageError, match=message):
            parse_definition(sql)


def test_queries_answered_stale_and_time_travel(lake: Lake) -> None:
    rng = np.random.default_rng(3)
    pool = lake.create_pool("events", "ts:asc")
    first = pool.load(_batch(rng, 0, 500, 72))
    # A definition naming a column the source lacks is refused, and leaves no pool.
    with pytest.raises(UsageError, match="no column"):
        create_derived(lake, "bad", "events", DEFINITION.replace("delay)", "nope)", 1))
    assert "bad" not in [str(c.name) for c in lake.pools()]
    create_derived(lake, "hourly", "events", DEFINITION)
    _check_queries(lake)
    for sql in NOT_ANSWERED:
        got = answer(sql, lake, lake.pool)
        assert got.sql is None and got.derived == [], sql
        assert any("not used" in r for r in got.reasons), (sql, got.reasons)
        assert run_sql(sql, lake.pool, lake).answered_from == ["events"]
    # A load the derived pool does not reflect yet: never used silently.
    second = pool.load(_batch(rng, 500, 100, 72))
    sql = ANSWERED[0]
    stale = answer(sql, lake, lake.pool)
    assert stale.sql is None and any("does not reflect" in r for r in stale.reasons)
    assert any("refresh it: lake derive refresh hourly" in r for r in stale.reasons)
    # A branch's commit: a refresh follows main and would not help, so it is not advised.
    pool.create_branch("dev")
    pool.load(_batch(rng, 700, 10, 72), branch="dev")
    on_dev = answer(sql.replace("FROM events", 'FROM "events@dev"'), lake, lake.pool)
    assert on_dev.sql is None and any(
        "follows the source's main branch" in r for r in on_dev.reasons
    )
    assert not any("refresh it" in r for r in on_dev.reasons)
    # Time travel: the first commit is reflected by the derived pool's first commit.
    old = run_sql(sql.replace("FROM events", f'FROM "events@{first.id}"'), lake.pool, lake)
    assert old.answered_from == ["hourly"]
    raw_old = run_sql(
        sql.replace("FROM events", f'FROM "events@{first.id}"'), lake.pool, lake, derived=False
    )
    assert _same(
        sorted(old.relation.fetchall(), key=repr), sorted(raw_old.relation.fetchall(), key=repr)
    )
    result = refresh(lake, lake.pool("hourly"))
    assert (result.mode, result.source_commit) == ("incremental", second.id)
    assert refresh(lake, lake.pool("hourly")).mode == "current"
    _check_queries(lake)


def test_objects_hold_the_pool_types_and_rewrites_are_reused(lake: Lake) -> None:
    """A date bucket comes out of DuckDB as a naive timestamp: the derived objects store it
    as the lake does (UTC), so every object holds the pool schema's types (queries read the
    files as they are). A query answered twice at the same derived commit is rewritten once;
    a new derived commit (or source schema) gets a rewrite of its own."""
    import lake_core.derived.answer as answer_module

    pool = lake.create_pool("orders", "id:asc")
    days = pa.array([date(2026, 1, 1) + timedelta(days=i % 40) for i in range(400)], pa.date32())
    pool.load(pa.table({"id": pa.array(range(400), pa.int64()), "day": days}))
    definition = "SELECT date_trunc('day', day) AS d, count(*) AS n FROM orders GROUP BY ALL"
    derived, _ = create_derived(lake, "daily", "orders", definition)
    snap = derived.snapshot(derived.resolve())
    assert snap.schema is not None
    want = {f.name: str(f.type) for f in snap.schema}
    assert want["d"] == "timestamp[us, tz=UTC]"
    for obj in snap.objects.values():
        assert {name: meta.type for name, meta in obj.columns.items()} == want
    sql = "SELECT date_trunc('month', day) AS m, count(*) AS n FROM orders GROUP BY ALL ORDER BY 1"
    raw = run_sql(sql, lake.pool, lake, derived=False).relation.fetchall()
    before = answer_module._rewritten.cache_info()
    for _ in range(3):
        run = run_sql(sql, lake.pool, lake)
        assert run.answered_from == ["daily"]
        assert run.relation.fetchall() == raw
    after = answer_module._rewritten.cache_info()
    assert after.misses == before.misses + 1 and after.hits == before.hits + 2
    # A wider source (a new column) and a refresh: a new derived commit, rewritten afresh.
    pool.load(
        pa.table(
            {
                "id": pa.array([400], pa.int64()),
                "day": pa.array([date(2026, 3, 1)], pa.date32()),
                "note": ["x"],
            }
        )
    )
    refresh(lake, derived)
    run = run_sql(sql, lake.pool, lake)
    assert run.answered_from == ["daily"]
    assert (
        run.relation.fetchall() == run_sql(sql, lake.pool, lake, derived=False).relation.fetchall()
    )
    assert answer_module._rewritten.cache_info().misses == after.misses + 1
