"""Which WHERE conjuncts prune which table (lake_core.sql.analyze/pushdown), checked on the
predicates themselves, and soundness checked end to end: random WHERE clauses over a pool
give exactly DuckDB's answer over the snapshot's rows, whatever was pruned."""

from __future__ import annotations

import math
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lake_core import Lake, LakeConfig
from lake_core.expr import Expr, parse_predicate
from lake_core.pool import Pool
from lake_core.sql import run_sql
from lake_core.sql.analyze import analyze

SCHEMA = pa.schema(
    [
        ("k", pa.int64()),
        ("s", pa.string()),
        ("f", pa.float64()),
        ("d", pa.date32()),
        ("ts", pa.timestamp("us", tz="UTC")),
    ]
)
OTHER = pa.schema([("k", pa.int64()), ("name", pa.string())])


def predicates(sql: str) -> dict[str, Expr | None]:
    analysis = analyze(duckdb.connect(), sql)
    return analysis.predicates({"t": SCHEMA, "u": OTHER, "t@dev": SCHEMA})


def same(found: Expr | None, text: str | None) -> bool:
    return found == (parse_predicate(text) if text is not None else None)


@pytest.mark.parametrize(
    ("sql", "t", "u"),
    [
        ("SELECT * FROM t WHERE k = 5", "k = 5", None),
        ("SELECT * FROM t WHERE 5 < k AND s LIKE 'ab%'", "(k > 5 AND s LIKE 'ab%')", None),
        (
            "SELECT * FROM t WHERE k BETWEEN 1 AND 3 OR k IN (7, 9)",
            "(k BETWEEN 1 AND 3 OR k IN (7, 9))",
            None,
        ),
        ("SELECT * FROM t WHERE d = DATE '2026-01-02'", "d = DATE '2026-01-02'", None),
        (
            "SELECT * FROM t WHERE ts >= '2026-01-02 10:00'",
            "ts >= TIMESTAMP '2026-01-02T10:00:00+00:00'",
            None,
        ),
        # functions, floats, backslash patterns, column-to-column: not used
        ("SELECT * FROM t WHERE abs(k) = 5", None, None),
        ("SELECT * FROM t WHERE f > 1.5", None, None),
        ("SELECT * FROM t WHERE s LIKE 'a\\%'", None, None),
        ("SELECT * FROM t WHERE k = k + 1", None, None),
        # an AND keeps the terms it can use, an OR needs all of them
        ("SELECT * FROM t WHERE (k = 1 AND abs(k) = 1) OR k = 3", "(k = 1 OR k = 3)", None),
        ("SELECT * FROM t WHERE k = 1 OR abs(k) = 3", None, None),
        # NOT (a AND b) needs both; NOT (a OR b) may drop one
        ("SELECT * FROM t WHERE NOT (k = 1 AND abs(k) = 1)", None, None),
        ("SELECT * FROM t WHERE NOT (k = 1 OR abs(k) = 1)", "NOT k = 1", None),
        # joins: qualified and unqualified columns, inner ON, outer sides
        ("SELECT * FROM t JOIN u ON t.k = u.k WHERE t.k = 1 AND name = 'x'", "k = 1", "name = 'x'"),
        (
            "SELECT * FROM t a JOIN u b ON a.k = b.k AND b.name = 'x' WHERE a.s = 'y'",
            "s = 'y'",
            "name = 'x'",
        ),
        ("SELECT * FROM t JOIN u USING (k) WHERE k = 1", None, None),  # ambiguous: both have k
        (
            "SELECT * FROM t LEFT JOIN u ON t.k = u.k WHERE u.name IS NULL AND t.k = 2",
            "k = 2",
            None,
        ),
        ("SELECT * FROM t RIGHT JOIN u ON t.k = u.k WHERE t.k = 2 AND u.k = 3", None, "k = 3"),
        ("SELECT * FROM t FULL JOIN u ON t.k = u.k WHERE t.k = 2 AND u.k = 3", None, None),
        # ON: the side where a row failing it never joins
        (
            "SELECT * FROM t LEFT JOIN u ON t.k = u.k AND u.name = 'x' AND t.s = 'y'",
            None,
            "name = 'x'",
        ),
        (
            "SELECT * FROM t RIGHT JOIN u ON t.k = u.k AND t.s = 'y' AND u.name = 'x'",
            "s = 'y'",
            None,
        ),
        ("SELECT * FROM t FULL JOIN u ON t.k = u.k AND t.s = 'y' AND u.name = 'x'", None, None),
        (
            "SELECT * FROM t ANTI JOIN u ON t.k = u.k AND u.name = 'x' AND t.s = 'y'",
            None,
            "name = 'x'",
        ),
        (
            "SELECT * FROM u LEFT JOIN (t JOIN u AS v ON t.k = v.k AND t.s = 'a') ON u.k = t.k",
            "s = 'a'",
            None,
        ),
        ("SELECT * FROM t POSITIONAL JOIN u WHERE t.k = 2", None, None),
        (
            "SELECT * FROM u ASOF JOIN t ON u.k >= t.k WHERE t.s = 'a' AND u.name = 'n'",
            None,
            "name = 'n'",
        ),
        # a table used twice: the OR of its references, or nothing
        (
            "SELECT * FROM t WHERE k = 1 UNION ALL SELECT * FROM t WHERE k = 2",
            "(k = 1 OR k = 2)",
            None,
        ),
        ("SELECT * FROM t WHERE k = 1 UNION ALL SELECT * FROM t", None, None),
        # scopes: the outer WHERE does not reach into a subquery, the inner one does
        ("SELECT * FROM (SELECT * FROM t) x WHERE x.k = 1", None, None),
        (
            "SELECT * FROM u WHERE k IN (SELECT k FROM t WHERE s = 'a') AND u.k = 4",
            "s = 'a'",
            "k = 4",
        ),
        ("WITH c AS (SELECT * FROM t WHERE k > 3) SELECT * FROM c WHERE k < 9", "k > 3", None),
        # a correlated column is the outer table's: it constrains neither table (the
        # conjunct is inside the subquery, and t has no column "name")
        (
            "SELECT * FROM u WHERE EXISTS (SELECT 1 FROM t WHERE t.k = u.k AND name = 'z')",
            None,
            None,
        ),
        # sampling: never pruned
        ("SELECT * FROM t WHERE k = 1 USING SAMPLE 10", None, None),
        ("SELECT * FROM t TABLESAMPLE 10% WHERE k = 1", None, None),
    ],
)
def test_which_conjuncts_prune_which_table(sql: str, t: str | None, u: str | None) -> None:
    found = predicates(sql)
    assert same(found.get("t"), t), found.get("t")
    assert same(found.get("u"), u), found.get("u")


@pytest.fixture(scope="module")
def pool(tmp_path_factory: pytest.TempPathFactory) -> Pool:
    """Twelve small objects (values spread so that pruning bites), with nulls and NaN."""
    lake = Lake.init(LakeConfig(uri=str(tmp_path_factory.mktemp("push")) + "/lake", user="t"))
    pool = lake.create_pool("t", "k")
    for i in range(12):
        n = 5
        pool.load(
            pa.table(
                {
                    "k": [i * 10 + j for j in range(n)],
                    "s": [None if j == 0 else f"{chr(97 + i)}{j}" for j in range(n)],
                    "f": [
                        float("nan") if j == 1 else (None if j == 2 else i + j / 10)
                        for j in range(n)
                    ],
                    "g": [None if i % 3 == 0 else i % 4 for _ in range(n)],
                },
            )
        )
    return pool


columns = {
    "k": st.integers(-5, 125),
    "g": st.integers(-1, 4),
    "s": st.sampled_from(["a1", "b", "c3", "l4", "m"]),
    "f": st.sampled_from([0.5, 3.2, 11.4, 20.0]),
}


@st.composite
def atoms(draw: Any) -> str:
    col = draw(st.sampled_from(sorted(columns)))
    value = draw(columns[col])
    lit = f"'{value}'" if isinstance(value, str) else repr(value)
    kind = draw(st.sampled_from(["cmp", "between", "in", "null", "like"]))
    if kind == "cmp":
        op = draw(st.sampled_from(["=", "<>", "<", "<=", ">", ">="]))
        return f"{col} {op} {lit}" if draw(st.booleans()) else f"{lit} {op} {col}"
    if kind == "between":
        other = draw(columns[col])
        lit2 = f"'{other}'" if isinstance(other, str) else repr(other)
        return f"{col} {'NOT ' if draw(st.booleans()) else ''}BETWEEN {lit} AND {lit2}"
    if kind == "in":
        more = draw(st.lists(columns[col], min_size=1, max_size=3))
        items = ", ".join(f"'{v}'" if isinstance(v, str) else repr(v) for v in [value, *more])
        return f"{col} {'NOT ' if draw(st.booleans()) else ''}IN ({items})"
    if kind == "like" and col == "s":
        return f"s {'NOT ' if draw(st.booleans()) else ''}LIKE '{value[0]}%'"
    return f"{col} IS {'NOT ' if draw(st.booleans()) else ''}NULL"


wheres = st.recursive(
    atoms(),
    lambda inner: st.one_of(
        st.tuples(inner, inner).map(lambda p: f"({p[0]} AND {p[1]})"),
        st.tuples(inner, inner).map(lambda p: f"({p[0]} OR {p[1]})"),
        inner.map(lambda p: f"NOT ({p})"),
        inner.map(lambda p: f"({p} AND abs(k) >= 0)"),
    ),
    max_leaves=5,
)


def _without_nan(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return [r for r in rows if "NaN" not in r]


def _normal(rows: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    return sorted(
        (tuple("NaN" if isinstance(v, float) and math.isnan(v) else v for v in r) for r in rows),
        key=repr,
    )


@settings(
    max_examples=80,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(where=wheres)
def test_pruning_never_changes_a_result(pool: Pool, where: str) -> None:
    sql = f"SELECT * FROM t WHERE {where}"
    run = run_sql(sql, lambda name: pool, None)
    got = _normal(run.relation.fetchall())
    # The brute force: DuckDB over every file of the snapshot. (Not over pool.read(): on
    # Parquet, DuckDB trusts row-group statistics that leave NaN out, so NaN > 0.5 reads as
    # false there and true over Arrow; docs/sql.md.)
    files = ", ".join(f"'{f}'" for f in pool.files())
    con = duckdb.connect()
    con.execute(f"CREATE VIEW t AS SELECT * FROM read_parquet([{files}], union_by_name=true)")
    want = _normal(con.sql(sql).fetchall())
    # Rows whose f is NaN are left out of the comparison: whether DuckDB's Parquet reader
    # keeps them depends on whether its row-group statistics (which leave NaN out) let it
    # skip evaluating the filter, and that differs between two reads of the same files
    # (`11.4 >= f` kept a NaN row in one read and not the other). The lake never prunes
    # by a float's value, so NaN rows are DuckDB's decision either way.
    assert _without_nan(got) == _without_nan(want)
