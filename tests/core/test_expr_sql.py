"""``to_sql``: a ``--where`` predicate rendered as DuckDB SQL selects exactly the rows the
lake's Arrow filter selects (nulls, NaN, LIKE escapes, coerced literals), and user text never
escapes its literal or name."""

from __future__ import annotations

import math
import re
from datetime import date, datetime
from typing import Any

import duckdb
import pyarrow as pa
import pytest
from hypothesis import given

from lake_core.expr import ExpressionError, parse_predicate, to_arrow_expression, to_sql
from tests.core.test_expr import (
    EXAMPLE,
    FAST,
    make_table,
    predicates,
    rows_strategy,
    selected,
)


def sql_selected(table: pa.Table, where: str) -> list[int]:
    con = duckdb.connect()
    con.execute("SET TimeZone='UTC'")  # as every query of the lake's
    con.register("rows", table)
    condition = to_sql(parse_predicate(where), table.schema)
    return sorted(r[0] for r in con.execute(f"SELECT rid FROM rows WHERE {condition}").fetchall())


@pytest.mark.parametrize(
    "where",
    [
        "i > 400 AND i <= 500",
        "t >= '2026-01-05T01:00:00Z'",
        "t < '2026-01-05 03:00:00+02:00'",
        "t = TIMESTAMP '2026-01-05 00:00:00'",
        "t < DATE '2026-01-05'",
        "i > 450.5",
        "i IN (400, 500, NULL)",
        "i NOT IN (400, NULL)",
        "i NOT BETWEEN 450 AND 500",
        "s LIKE 'val_'",
        "s NOT LIKE 'val%'",
        "s = 'it''s'",
        # NaN (row 1) orders and equals nothing, as IEEE (DuckDB alone: NaN > every number)
        "f > -5",
        "NOT f > -5",
        "f <> 1.0",
        "f BETWEEN -5 AND 5",
        "i > f",
        "NOT i > f",
        "m = 1 OR m IS NULL",
        "m <> 1",
        "1 > 2 OR i = 400",
    ],
)
def test_examples_select_as_the_filter_does(where: str) -> None:
    assert sql_selected(EXAMPLE, where) == selected(EXAMPLE, parse_predicate(where))


@FAST
@given(rows=rows_strategy, where=predicates)
def test_sql_selects_what_the_filter_selects(rows: list[dict[str, Any]], where: str) -> None:
    table = make_table(rows)
    assert sql_selected(table, where) == selected(table, parse_predicate(where))


def test_other_column_types() -> None:
    table = pa.table(
        {
            "rid": [0, 1, 2],
            "dict": pa.array(["p", "q", "p"]).dictionary_encode(),
            "small": pa.array([1, 2, None], pa.int8()),
            "dec": pa.array([1, 2, 3], pa.decimal128(10, 2)),
            "naive": pa.array(
                [datetime(2026, 1, 5), datetime(2026, 1, 6), None], pa.timestamp("ms")
            ),
            "d": pa.array([date(2026, 1, 5), date(2026, 1, 6), None]),
            "st": [{"a": 1.5}, {"a": math.nan}, None],
            "b": pa.array([b"x'y", b"z", None], pa.binary()),
            "weird name": ["a", "b\\", "a%"],
            # Arrow compares float32 in float64: 0.1 as float32 is not 0.1, nor 16777217.
            "f32": pa.array([0.1, 0.2, 16777216.0], pa.float32()),
        }
    )
    for where, rids in [
        ("dict IN ('q', 'z')", [1]),
        ("small > 1000", []),
        ("small IN (1, 1000)", [0]),
        ("dec >= 2 AND dec < 2.5", [1]),
        ("naive >= '2026-01-05T12:00:00'", [1]),
        ("naive > TIMESTAMP '2026-01-05T12:00:00+02:00'", [1]),
        ("d = '2026-01-06'", [1]),
        ("d < TIMESTAMP '2026-01-05 12:00:00'", [0]),
        ("st.a > 1", [0]),
        ("b = 'x''y'", [0]),
        ("\"weird name\" LIKE 'a\\%'", [2]),
        # A lone escape at the end escapes nothing: ignored, as Arrow does (DuckDB refuses it).
        ("\"weird name\" LIKE 'b\\'", []),
        ("\"weird name\" LIKE 'a\\'", [0]),
        ("f32 = 0.1", []),
        ("f32 > 0.1", [0, 1, 2]),
        ("f32 = 16777217", []),
        ("f32 IN (0.1, 7)", []),
        ("f32 < 0.2", [0]),
    ]:
        assert sql_selected(table, where) == rids, where
        assert selected(table, parse_predicate(where)) == rids, where


def test_user_text_stays_inside_its_literal_and_name() -> None:
    schema = pa.schema([("s", pa.string()), ('a"b', pa.int64())])
    sql = to_sql(parse_predicate("s = 'x'') OR (''1''=''1' AND \"a\"\"b\" = 1"), schema)
    assert sql == "((\"s\" = 'x'') OR (''1''=''1') AND (\"a\"\"b\" = 1))"
    # Whatever the text, the parser refuses what is not one predicate before any SQL is made.
    for text in ("s = 'x') OR (1=1", "s = 'x' -- c", "s = 'x'; DROP TABLE t", "error('x')"):
        with pytest.raises(ExpressionError):
            parse_predicate(text)


def test_checks_as_the_filter_does() -> None:
    schema = pa.schema([("s", pa.string())])
    for where in ("s = 1", "nope = 1", "s LIKE 1"):
        try:
            expr = parse_predicate(where)
        except ExpressionError:
            continue
        with pytest.raises(ExpressionError) as raised:
            to_arrow_expression(expr, schema)
        with pytest.raises(ExpressionError, match=re.escape(raised.value.message)):
            to_sql(expr, schema)
