"""The ``--where`` language: parsing, arrow filtering against a brute-force evaluator, and the
soundness of statistics pruning and key ranges."""

from __future__ import annotations

import math
import operator
import pickle
import re
from collections.abc import Callable, Mapping
from datetime import UTC, date, datetime, timedelta, timezone
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lake_core.errors import UsageError
from lake_core.expr import (
    And,
    Between,
    Column,
    ColumnStats,
    Comparison,
    Expr,
    ExpressionError,
    InList,
    IsNull,
    Like,
    Literal,
    Not,
    Or,
    columns_of,
    key_range,
    may_match,
    parse_predicate,
    to_arrow_expression,
)


def col(*path: str) -> Column:
    return Column(tuple(path))


def lit(value: Any) -> Literal:
    return Literal(value)


def cmp(name: str, op: Any, value: Any) -> Comparison:
    return Comparison(op, col(name), lit(value))


T0 = datetime(2026, 1, 5, tzinfo=UTC)

# -- parser -------------------------------------------------------------------------------


def test_and_binds_tighter_than_or() -> None:
    assert parse_predicate("a = 1 OR b = 2 AND c = 3") == Or(
        cmp("a", "=", 1), And(cmp("b", "=", 2), cmp("c", "=", 3))
    )
    assert parse_predicate("(a = 1 OR b = 2) AND c = 3") == And(
        Or(cmp("a", "=", 1), cmp("b", "=", 2)), cmp("c", "=", 3)
    )


def test_chains_associate_to_the_left() -> None:
    assert parse_predicate("a = 1 or a = 2 OR a = 3") == Or(
        Or(cmp("a", "=", 1), cmp("a", "=", 2)), cmp("a", "=", 3)
    )


def test_not_binds_tighter_than_and_but_looser_than_comparison() -> None:
    assert parse_predicate("NOT a = 1 AND b = 2") == And(Not(cmp("a", "=", 1)), cmp("b", "=", 2))
    assert parse_predicate("not not a <> 1") == Not(Not(cmp("a", "<>", 1)))
    assert parse_predicate("NOT (a = 1 OR b = 2)") == Not(Or(cmp("a", "=", 1), cmp("b", "=", 2)))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("x != 3", cmp("x", "<>", 3)),
        ("x <> -3", cmp("x", "<>", -3)),
        ("x >= 1.5", cmp("x", ">=", 1.5)),
        ("x < 1e3", cmp("x", "<", 1000.0)),
        ("x <= -2.5E-1", cmp("x", "<=", -0.25)),
        ("x > .5", cmp("x", ">", 0.5)),
        ("5 < x", cmp("x", ">", 5)),
        ("5 >= x", cmp("x", "<=", 5)),
        ("'a' = s", cmp("s", "=", "a")),
        ("s = 'it''s'", cmp("s", "=", "it's")),
        ("s = ''", cmp("s", "=", "")),
        ("flag = TRUE", cmp("flag", "=", True)),
        ("flag = false", cmp("flag", "=", False)),
        ("flag", cmp("flag", "=", True)),
        ("x = NULL", cmp("x", "=", None)),
        ('"weird name" = 1', cmp("weird name", "=", 1)),
        ('"say ""hi""" = 1', cmp('say "hi"', "=", 1)),
        ('"and" = 1', cmp("and", "=", 1)),
        ("a.b = 1", Comparison("=", col("a", "b"), lit(1))),
        ('a."b c" = 1', Comparison("=", col("a", "b c"), lit(1))),
        ("timestamp = 1", cmp("timestamp", "=", 1)),
        ("date > 2", cmp("date", ">", 2)),
        ("x = y", Comparison("=", col("x"), col("y"))),
        ("x IN (1, 2, NULL)", InList(col("x"), (lit(1), lit(2), lit(None)))),
        ("x not in ('a')", InList(col("x"), (lit("a"),), negated=True)),
        ("x BETWEEN 1 AND 5", Between(col("x"), lit(1), lit(5))),
        ("x NOT BETWEEN -1 AND y", Between(col("x"), lit(-1), col("y"), negated=True)),
        ("x IS NULL", IsNull(col("x"))),
        ("x is not null", IsNull(col("x"), negated=True)),
        ("s LIKE 'val%'", Like(col("s"), "val%")),
        ("s NOT LIKE 'a_''b'", Like(col("s"), "a_'b", negated=True)),
    ],
)
def test_parses(text: str, expected: Expr) -> None:
    assert parse_predicate(text) == expected


def test_between_owns_its_and() -> None:
    assert parse_predicate("x BETWEEN 1 AND 5 AND y = 2") == And(
        Between(col("x"), lit(1), lit(5)), cmp("y", "=", 2)
    )


def test_literal_kinds_differ() -> None:
    assert parse_predicate("x = 1") != parse_predicate("x = 1.0")
    assert parse_predicate("x = 1") != parse_predicate("x = TRUE")


@pytest.mark.parametrize(
    "text",
    [
        "2026-01-05 00:00:00",
        "2026-01-05T00:00:00",
        "2026-01-05T00:00:00Z",
        "2026-01-05T00:00:00.000000+00:00",
        "2026-01-05T02:00:00+02:00",
        "2026-01-04T19:00:00-05:00",
        "2026-01-05",
    ],
)
def test_timestamp_literals_are_utc(text: str) -> None:
    expr = parse_predicate(f"ts >= TIMESTAMP '{text}'")
    assert expr == cmp("ts", ">=", T0)
    assert isinstance(expr, Comparison) and isinstance(expr.right, Literal)
    assert expr.right.value == T0 and expr.right.kind == "timestamp"


def test_date_literal() -> None:
    assert parse_predicate("d = DATE '2026-01-05'") == cmp("d", "=", date(2026, 1, 5))


@pytest.mark.parametrize(
    ("text", "message", "position"),
    [
        ("ts >", "expected a value after '>' at position 5", 5),
        ("ts > AND x = 1", "expected a value after '>' at position 6", 6),
        ("", "expected a predicate at position 1", 1),
        ("a = 1 )", "expected AND, OR or end of input at position 7", 7),
        ("(a = 1", "expected ')' at position 7", 7),
        ("a IN 1", "expected '(' after IN at position 6", 6),
        ("a IN (1, b)", "expected a literal value in the IN list at position 10", 10),
        ("a IN (1 2)", "expected ',' or ')' in the IN list at position 9", 9),
        ("a BETWEEN 1 OR 2", "expected AND between the bounds of BETWEEN at position 13", 13),
        ("a IS 5", "expected NULL or NOT NULL after IS at position 6", 6),
        ("a NOT 5", "expected IN, BETWEEN or LIKE after NOT at position 7", 7),
        ("s LIKE 5", "expected a quoted pattern after LIKE at position 8", 8),
        ("s = 'abc", "unterminated string starting at position 5", 5),
        ('"abc = 1', "unterminated quoted name starting at position 1", 1),
        ("a # 1", "unexpected character '#' at position 3", 3),
        ("a = -b", "expected a number after '-' at position 6", 6),
        ("a b", "expected an operator after column a at position 3", 3),
        ("a = 1 = 2", "expected AND, OR or end of input at position 7", 7),
        ("in = 1", 'write "in" to use it as a column name', 1),
        ("t > TIMESTAMP 'soon'", "expected an ISO 8601 TIMESTAMP", 15),
        ("d > DATE '2026-13-01'", "expected an ISO 8601 DATE", 10),
        ("x > 1e999", "number out of range at position 5", 5),
    ],
)
def test_syntax_errors_say_what_and_where(text: str, message: str, position: int) -> None:
    with pytest.raises(ExpressionError) as caught:
        parse_predicate(text)
    assert message in str(caught.value)
    assert caught.value.position == position


def test_expression_error_is_a_picklable_usage_error() -> None:
    with pytest.raises(UsageError) as caught:
        parse_predicate("ts >")
    copy = pickle.loads(pickle.dumps(caught.value))
    assert isinstance(copy, ExpressionError)
    assert str(copy) == str(caught.value) and copy.position == 5


def test_columns_of_names_top_level_columns() -> None:
    expr = parse_predicate("a = 1 AND (b.c IN (1) OR NOT d IS NULL) OR 3 BETWEEN e AND f")
    assert columns_of(expr) == frozenset({"a", "b", "d", "e", "f"})


def test_long_or_chains_stay_within_the_recursion_limit() -> None:
    text = " OR ".join(f"x = {i}" for i in range(5000))
    expr = parse_predicate(text)
    schema = pa.schema([("x", pa.int64())])
    table = pa.table({"x": [3, 4999, 5000, None]})
    assert table.filter(to_arrow_expression(expr, schema))["x"].to_pylist() == [3, 4999]
    assert columns_of(expr) == {"x"}
    assert not may_match(expr, {"x": ColumnStats(5000, 6000, 0, 3)}, schema)
    assert key_range(expr, "x") == (0, True, 4999, True)
    assert str(expr).startswith("(x = 0 OR x = 1 OR")


# -- arrow filtering ----------------------------------------------------------------------

SCHEMA = pa.schema(
    [
        ("rid", pa.int64()),
        ("i", pa.int64()),
        ("f", pa.float64()),
        ("s", pa.string()),
        ("t", pa.timestamp("us", tz="UTC")),
        ("m", pa.int64()),  # in the pool schema, absent from objects: all null
    ]
)


def make_table(rows: list[dict[str, Any]]) -> pa.Table:
    columns = {name: [row.get(name) for row in rows] for name in SCHEMA.names}
    columns["rid"] = list(range(len(rows)))
    return pa.table(columns, schema=SCHEMA)


def _to_datetime(value: Any) -> Any:
    if isinstance(value, datetime):
        return value
    if isinstance(value, date):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if isinstance(value, str):
        parsed = datetime.fromisoformat(value)
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    return value


def _like_regex(pattern: str) -> re.Pattern[str]:
    out, chars = [], iter(pattern)
    for ch in chars:
        if ch == "\\":
            nxt = next(chars, "")
            out.append(re.escape(nxt))
        elif ch == "%":
            out.append(".*")
        elif ch == "_":
            out.append(".")
        else:
            out.append(re.escape(ch))
    return re.compile("".join(out), re.DOTALL)


_OPS: dict[str, Callable[[Any, Any], bool]] = {
    "=": operator.eq,
    "<>": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def _not3(v: bool | None) -> bool | None:
    return None if v is None else not v


def reference(expr: Expr, row: Mapping[str, Any]) -> bool | None:
    """SQL three-valued logic, brute force, in plain Python."""

    def value(operand: Column | Literal, other: Column | Literal) -> Any:
        raw = row[operand.name] if isinstance(operand, Column) else operand.value
        if isinstance(other, Column) and other.name == "t":
            return _to_datetime(raw)
        return raw

    def compare(op: str, left: Column | Literal, right: Column | Literal) -> bool | None:
        a, b = value(left, right), value(right, left)
        return None if a is None or b is None else _OPS[op](a, b)

    if isinstance(expr, And):
        a, b = reference(expr.left, row), reference(expr.right, row)
        return False if False in (a, b) else (None if None in (a, b) else True)
    if isinstance(expr, Or):
        a, b = reference(expr.left, row), reference(expr.right, row)
        return True if True in (a, b) else (None if None in (a, b) else False)
    if isinstance(expr, Not):
        return _not3(reference(expr.operand, row))
    if isinstance(expr, Comparison):
        return compare(expr.op, expr.left, expr.right)
    if isinstance(expr, Between):
        inside = reference(
            And(
                Comparison(">=", expr.operand, expr.low), Comparison("<=", expr.operand, expr.high)
            ),
            row,
        )
        return _not3(inside) if expr.negated else inside
    if isinstance(expr, InList):
        answers = [compare("=", expr.operand, v) for v in expr.values]
        found = True if True in answers else (None if None in answers else False)
        return _not3(found) if expr.negated else found
    if isinstance(expr, IsNull):
        operand = expr.operand
        raw = row[operand.name] if isinstance(operand, Column) else operand.value
        return (raw is None) != expr.negated
    assert isinstance(expr, Like) and isinstance(expr.operand, Column)
    text = row[expr.operand.name]
    if text is None:
        return None
    return bool(_like_regex(expr.pattern).fullmatch(text)) != expr.negated


def selected(table: pa.Table, expr: Expr) -> list[int]:
    result = table.filter(to_arrow_expression(expr, table.schema))
    return sorted(result["rid"].to_pylist())


def expected(table: pa.Table, expr: Expr) -> list[int]:
    return [row["rid"] for row in table.to_pylist() if reference(expr, row) is True]


EXAMPLE = make_table(
    [
        {"i": 400, "s": "val1", "t": T0, "f": 1.0},
        {"i": 450, "s": "val2", "t": T0 + timedelta(hours=1), "f": math.nan},
        {"i": 500, "s": None, "t": None, "f": None},
        {"i": None, "s": "val999", "t": T0 + timedelta(days=1), "f": -2.0},
        {"i": 501, "s": "it's", "t": T0 - timedelta(days=1), "f": 0.0},
    ]
)


@pytest.mark.parametrize(
    ("where", "rids"),
    [
        ("i > 400 AND i <= 500", [1, 2]),
        ("s = 'val1' OR s = 'val999'", [0, 3]),
        ("t > '2026-01-05'", [1, 3]),
        ("t >= '2026-01-05T01:00:00Z'", [1, 3]),
        ("t < '2026-01-05 03:00:00+02:00'", [0, 4]),
        ("t = TIMESTAMP '2026-01-05 00:00:00'", [0]),
        ("t < DATE '2026-01-05'", [4]),
        ("i > 450.5", [2, 4]),
        ("i IN (400, 500, NULL)", [0, 2]),
        ("i NOT IN (400, 500)", [1, 4]),
        ("i NOT IN (400, NULL)", []),
        ("NOT i = 400", [1, 2, 4]),
        ("i BETWEEN 450 AND 500", [1, 2]),
        ("i NOT BETWEEN 450 AND 500", [0, 4]),
        ("s LIKE 'val_'", [0, 1]),
        ("s NOT LIKE 'val%'", [4]),
        ("s = 'it''s'", [4]),
        ("s IS NULL", [2]),
        ("i IS NOT NULL AND s IS NOT NULL", [0, 1, 4]),
        ("f <> 1.0", [1, 3, 4]),
        ("f > -5", [0, 3, 4]),
        ("NOT f > -5", [1]),
        ("m = 1 OR m IS NULL", [0, 1, 2, 3, 4]),
        ("m <> 1", []),
        ("i = NULL OR NOT i = NULL", []),
        ("1 = 1", [0, 1, 2, 3, 4]),
        ("1 > 2 OR i = 400", [0]),
        ("i > f", [0, 4]),
    ],
)
def test_filter_examples(where: str, rids: list[int]) -> None:
    expr = parse_predicate(where)
    assert selected(EXAMPLE, expr) == rids
    assert expected(EXAMPLE, expr) == rids


@pytest.mark.parametrize(
    ("where", "fragment"),
    [
        ("nope = 1", "unknown column 'nope'"),
        ("i = 'abc'", "column 'i' (int64) cannot be compared with string literal 'abc'"),
        ("s = 1", "column 's' (string) cannot be compared with integer literal 1"),
        ("t > 'yesterday'", "not an ISO 8601 timestamp"),
        ("i = TRUE", "column 'i' (int64) cannot be compared with boolean literal TRUE"),
        ("i LIKE 'a%'", "LIKE needs a string column"),
        ("i = s", "column 'i' (int64) cannot be compared with column 's' (string)"),
        ("i.x = 1", "not a struct"),
    ],
)
def test_schema_errors(where: str, fragment: str) -> None:
    expr = parse_predicate(where)
    with pytest.raises(ExpressionError, match=re.escape(fragment)):
        to_arrow_expression(expr, SCHEMA)
    if "cannot be compared with column" not in fragment:
        with pytest.raises(ExpressionError, match=re.escape(fragment)):
            may_match(expr, {}, SCHEMA)


def test_other_column_types() -> None:
    schema = pa.schema(
        [
            ("sv", pa.string_view()),
            ("dict", pa.dictionary(pa.int32(), pa.string())),
            ("small", pa.int8()),
            ("dec", pa.decimal128(10, 2)),
            ("naive", pa.timestamp("ms")),
            ("d", pa.date32()),
            ("st", pa.struct([("a", pa.int64())])),
        ]
    )
    table = pa.table(
        {
            "sv": pa.array(["x", "y", None], pa.string_view()),
            "dict": pa.array(["p", "q", "p"]).dictionary_encode(),
            "small": pa.array([1, 2, None], pa.int8()),
            "dec": pa.array([1, 2, 3], pa.decimal128(10, 2)),
            "naive": pa.array(
                [datetime(2026, 1, 5), datetime(2026, 1, 6), None], pa.timestamp("ms")
            ),
            "d": pa.array([date(2026, 1, 5), date(2026, 1, 6), None]),
            "st": [{"a": 1}, {"a": 2}, None],
        },
        schema=schema,
    )

    def count(where: str) -> int:
        expression = to_arrow_expression(parse_predicate(where), schema)
        # string_view columns cannot pass through Table.filter, so count the mask instead.
        return int(pc.sum(_evaluate(table, expression)).as_py() or 0)

    assert count("sv = 'y'") == 1
    assert count("sv LIKE 'x%' OR sv IS NULL") == 2
    assert count("dict = 'p'") == 2
    assert count("dict IN ('q', 'z')") == 1
    assert count("small > 1000") == 0
    assert count("small IN (1, 1000)") == 1
    assert count("dec >= 2 AND dec < 2.5") == 1
    assert count("naive >= '2026-01-05T12:00:00'") == 1
    assert count("naive > TIMESTAMP '2026-01-05T12:00:00+02:00'") == 1
    assert count("d = '2026-01-06'") == 1
    assert count("d < TIMESTAMP '2026-01-05 12:00:00'") == 1
    assert count("st.a = 2") == 1


def _evaluate(table: pa.Table, expression: pc.Expression) -> pa.ChunkedArray[Any]:
    import pyarrow.acero as acero

    source = acero.Declaration("table_source", acero.TableSourceNodeOptions(table))
    project = acero.Declaration("project", acero.ProjectNodeOptions([expression]))
    result = acero.Declaration.from_sequence([source, project]).to_table()
    return result.column(0).fill_null(False)


# -- pruning and key ranges: examples ------------------------------------------------------

INT_TS = pa.schema([("ts", pa.int64()), ("s", pa.string()), ("x", pa.int64())])


def stats_of(table: pa.Table) -> dict[str, ColumnStats]:
    """Statistics as a writer would record them: min/max over non-null values."""
    out = {}
    for name in table.column_names:
        column = table[name]
        bounds = pc.min_max(column)
        out[name] = ColumnStats(
            bounds["min"].as_py(), bounds["max"].as_py(), column.null_count, len(column)
        )
    return out


def test_prunes_by_bounds() -> None:
    stats = {"ts": ColumnStats(100, 400, 0, 10)}
    assert not may_match(parse_predicate("ts > 500"), stats, INT_TS)
    assert not may_match(parse_predicate("ts > 400"), stats, INT_TS)
    assert may_match(parse_predicate("ts >= 400"), stats, INT_TS)
    assert not may_match(parse_predicate("ts < 100"), stats, INT_TS)
    assert may_match(parse_predicate("ts <= 100"), stats, INT_TS)
    assert not may_match(parse_predicate("ts = 401"), stats, INT_TS)
    assert may_match(parse_predicate("ts = 250.5"), stats, INT_TS)
    assert not may_match(parse_predicate("ts BETWEEN 401 AND 900"), stats, INT_TS)
    assert not may_match(parse_predicate("ts IN (1, 2, 500, NULL)"), stats, INT_TS)
    assert may_match(parse_predicate("ts IN (1, 2, 300)"), stats, INT_TS)
    assert not may_match(parse_predicate("ts > 400 AND ts <= 500"), stats, INT_TS)
    assert not may_match(parse_predicate("500 < ts"), stats, INT_TS)


def test_or_with_an_unknown_column_may_match() -> None:
    stats = {"s": ColumnStats("val2", "val9", 0, 10)}
    expr = parse_predicate("s = 'val1' OR x > 3")
    assert may_match(expr, stats, INT_TS)
    assert not may_match(expr, {**stats, "x": ColumnStats(0, 3, 0, 10)}, INT_TS)
    assert not may_match(parse_predicate("s = 'val1' AND x > 3"), stats, INT_TS)


def test_negations_prune_only_where_sound() -> None:
    constant = {"x": ColumnStats(5, 5, 2, 10)}  # every non-null value is 5
    assert not may_match(parse_predicate("NOT x = 5"), constant, INT_TS)
    assert not may_match(parse_predicate("x <> 5"), constant, INT_TS)
    assert not may_match(parse_predicate("x NOT IN (5, 6)"), constant, INT_TS)
    assert not may_match(parse_predicate("NOT (x = 5 OR x = 6)"), constant, INT_TS)
    assert may_match(parse_predicate("NOT (x = 5 AND x = 6)"), constant, INT_TS)
    assert not may_match(parse_predicate("NOT x >= 5"), constant, INT_TS)
    assert may_match(parse_predicate("NOT x > 5"), constant, INT_TS)
    assert not may_match(parse_predicate("x NOT BETWEEN 1 AND 9"), constant, INT_TS)
    assert not may_match(parse_predicate("x NOT IN (1, NULL)"), constant, INT_TS)
    floats = pa.schema([("x", pa.float64())])
    # NaN escapes the statistics and is unequal to everything: nothing may be pruned.
    assert may_match(parse_predicate("x <> 5"), {"x": ColumnStats(5.0, 5.0, 0, 3)}, floats)
    assert may_match(parse_predicate("NOT x < 9"), {"x": ColumnStats(1.0, 5.0, 0, 3)}, floats)
    assert not may_match(parse_predicate("x > 9"), {"x": ColumnStats(1.0, 5.0, 0, 3)}, floats)


def test_nulls_and_missing_columns() -> None:
    absent = {"x": ColumnStats(None, None, 7, 7)}
    assert not may_match(parse_predicate("x = 1"), absent, INT_TS)
    assert not may_match(parse_predicate("x <> 1"), absent, INT_TS)
    assert not may_match(parse_predicate("x IS NOT NULL"), absent, INT_TS)
    assert may_match(parse_predicate("x IS NULL"), absent, INT_TS)
    assert may_match(parse_predicate("NOT x IS NOT NULL"), absent, INT_TS)
    no_nulls = {"x": ColumnStats(1, 2, 0, 7)}
    assert not may_match(parse_predicate("x IS NULL"), no_nulls, INT_TS)
    assert may_match(parse_predicate("x IS NOT NULL"), no_nulls, INT_TS)
    unknown_nulls = {"x": ColumnStats(1, 2, None, 7)}
    assert may_match(parse_predicate("x IS NULL"), unknown_nulls, INT_TS)
    assert not may_match(parse_predicate("x = NULL"), {}, INT_TS)
    assert not may_match(parse_predicate("ts > 1"), {"ts": ColumnStats(None, None, 0, 0)}, INT_TS)
    assert may_match(parse_predicate("x > 1"), {}, INT_TS)


def test_like_prunes_by_prefix() -> None:
    stats = {"s": ColumnStats("val1", "val5", 0, 10)}
    assert may_match(parse_predicate("s LIKE 'val%'"), stats, INT_TS)
    assert may_match(parse_predicate("s LIKE 'va%'"), stats, INT_TS)
    assert may_match(parse_predicate("s LIKE 'val3_x'"), stats, INT_TS)
    assert not may_match(parse_predicate("s LIKE 'val6%'"), stats, INT_TS)
    assert not may_match(parse_predicate("s LIKE 'uzz%'"), stats, INT_TS)
    assert not may_match(parse_predicate("s LIKE 'wal%'"), stats, INT_TS)
    assert may_match(parse_predicate("s LIKE '%zzz'"), stats, INT_TS)
    assert not may_match(parse_predicate("s LIKE 'x\\%%'"), stats, INT_TS)
    one = {"s": ColumnStats("val1", "val1", 3, 10)}
    assert not may_match(parse_predicate("s NOT LIKE 'val_'"), one, INT_TS)
    assert may_match(parse_predicate("s NOT LIKE 'val__'"), one, INT_TS)


def test_timestamps_prune_with_iso_strings_and_typed_literals() -> None:
    schema = pa.schema([("ts", pa.timestamp("us", tz="UTC"))])
    stats = {"ts": ColumnStats(T0, T0 + timedelta(hours=5), 0, 10)}
    assert not may_match(parse_predicate("ts > '2026-01-05T05:00:00Z'"), stats, schema)
    assert may_match(parse_predicate("ts >= '2026-01-05T07:00:00+02:00'"), stats, schema)
    assert not may_match(parse_predicate("ts < TIMESTAMP '2026-01-05'"), stats, schema)
    assert not may_match(parse_predicate("ts >= DATE '2026-01-06'"), stats, schema)
    assert may_match(parse_predicate("ts < '2026-01-05 00:00:01'"), stats, schema)


def test_incomparable_statistics_never_raise_and_never_prune() -> None:
    odd = {"x": ColumnStats("a", "z", 0, 5), "s": ColumnStats(1, 9, 0, 5)}
    for where in ["x = 3", "x > 3", "x <> 3", "s = 'b'", "s LIKE 'q%'", "NOT s LIKE 'q'"]:
        assert may_match(parse_predicate(where), odd, INT_TS), where
    naive = {"ts": ColumnStats(datetime(2026, 1, 1), datetime(2026, 1, 2), 0, 5)}
    schema = pa.schema([("ts", pa.timestamp("us", tz="UTC"))])
    assert may_match(parse_predicate("ts > '2027-01-01'"), naive, schema)


def test_column_against_column_prunes_nothing() -> None:
    stats = {"x": ColumnStats(1, 2, 0, 5), "ts": ColumnStats(8, 9, 0, 5)}
    assert may_match(parse_predicate("x > ts"), stats, INT_TS)
    assert not may_match(parse_predicate("x > ts AND x > 2"), stats, INT_TS)


@pytest.mark.parametrize(
    ("where", "column", "interval"),
    [
        ("ts > 400 AND ts <= 500", "ts", (400, False, 500, True)),
        ("ts >= 400 AND ts >= 450 AND ts < 900 AND ts <= 900", "ts", (450, True, 900, False)),
        ("ts = 7", "ts", (7, True, 7, True)),
        ("ts IN (9, 3, 5)", "ts", (3, True, 9, True)),
        ("ts BETWEEN 1 AND 5 OR ts = 9", "ts", (1, True, 9, True)),
        ("ts < 3 OR ts > 7", "ts", None),
        ("ts > 1 OR x = 2", "ts", None),
        ("ts > 1 AND x = 2", "ts", (1, False, None, False)),
        ("ts > 1 AND x = 2", "x", (2, True, 2, True)),
        ("NOT (ts > 1 OR s = 'a')", "ts", None),
        ("ts <> 3", "ts", None),
        ("s LIKE 'ab%'", "s", ("ab", True, "ac", False)),
        ("s NOT LIKE 'ab%'", "s", None),
        ("x IS NULL", "x", None),
        ("ts = NULL", "ts", None),
    ],
)
def test_key_range(where: str, column: str, interval: Any) -> None:
    assert key_range(parse_predicate(where), column) == interval


def test_key_range_negations_and_schema_coercion() -> None:
    expr = parse_predicate("NOT (ts <= 1 OR ts > 9)")
    assert key_range(expr, "ts", INT_TS) == (1, False, 9, True)
    assert key_range(expr, "ts") is None  # without a schema a number might be a NaN float
    schema = pa.schema([("ts", pa.timestamp("us", tz="UTC"))])
    expr = parse_predicate("ts >= '2026-01-05' AND ts < TIMESTAMP '2026-01-06'")
    assert key_range(expr, "ts", schema) == (T0, True, T0 + timedelta(days=1), False)


# -- properties ------------------------------------------------------------------------------

STRINGS = ["", "a", "ab", "abc", "b", "val1", "val2", "val999", "a%b", "A", "é", "b\nc"]
FLOATS = [0.0, 2.0, math.nan]
PATTERNS = ["a%", "a_", "%b", "val%", "v_l1", "%", "ab", "a\\%b", "A%", "", "_", "é%", "b_c"]

row_strategy = st.fixed_dictionaries(
    {
        "i": st.none() | st.integers(-1, 3),
        "f": st.none() | st.sampled_from(FLOATS),
        "s": st.none() | st.sampled_from(STRINGS),
        "t": st.none() | st.integers(0, 5).map(lambda h: T0 + timedelta(hours=h)),
    }
)


def _quote(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _timestamp_text(hours: int, style: int) -> str:
    moment = T0 + timedelta(hours=hours)
    if style == 0:
        return f"TIMESTAMP '{moment:%Y-%m-%d %H:%M:%S}'"
    if style == 1:
        return _quote(moment.strftime("%Y-%m-%dT%H:%M:%SZ"))
    if style == 2:
        shifted = moment.astimezone(timezone(timedelta(hours=2)))
        return _quote(shifted.isoformat())
    return f"DATE '{moment.date().isoformat()}'"


LITERALS: dict[str, st.SearchStrategy[str]] = {
    "i": st.one_of(
        st.integers(-2, 4).map(str),
        st.sampled_from(["2.5", "-0.5", "1e0", "NULL"]),
    ),
    "f": st.one_of(
        st.integers(-2, 4).map(str), st.sampled_from(["-1.5", "0.0", "3.5", "2e0", "NULL"])
    ),
    "s": st.one_of(st.sampled_from(STRINGS).map(_quote), st.just("NULL")),
    "t": st.one_of(
        st.builds(_timestamp_text, st.integers(-1, 6), st.integers(0, 3)), st.just("NULL")
    ),
    "m": st.one_of(st.integers(-1, 2).map(str), st.just("NULL")),
}
COLUMNS = sorted(LITERALS)
OPS = ["=", "<>", "!=", "<", "<=", ">", ">="]


@st.composite
def leaf_predicates(draw: st.DrawFn) -> str:
    name = draw(st.sampled_from(COLUMNS))
    literal = LITERALS[name]
    shape = draw(st.integers(0, 6))
    if shape == 0:
        op, value = draw(st.sampled_from(OPS)), draw(literal)
        if draw(st.booleans()):
            return f"{value} {op} {name}"
        return f"{name} {op} {value}"
    if shape == 1:
        values = draw(st.lists(literal, min_size=1, max_size=4))
        neg = "NOT " if draw(st.booleans()) else ""
        return f"{name} {neg}IN ({', '.join(values)})"
    if shape == 2:
        neg = "NOT " if draw(st.booleans()) else ""
        return f"{name} {neg}BETWEEN {draw(literal)} AND {draw(literal)}"
    if shape == 3:
        return f"{name} IS {'NOT ' if draw(st.booleans()) else ''}NULL"
    if shape == 4:
        neg = "NOT " if draw(st.booleans()) else ""
        return f"s {neg}LIKE {_quote(draw(st.sampled_from(PATTERNS)))}"
    if shape == 5:
        left, right = draw(st.sampled_from([("i", "f"), ("i", "m"), ("f", "i")]))
        return f"{left} {draw(st.sampled_from(OPS))} {right}"
    return draw(st.sampled_from(["TRUE", "FALSE", "NULL", "1 = 1", "NULL IS NULL"]))


predicates = st.recursive(
    leaf_predicates(),
    lambda inner: st.one_of(
        inner.map(lambda p: f"NOT {p}"),
        st.tuples(inner, inner).map(lambda pq: f"({pq[0]} AND {pq[1]})"),
        st.tuples(inner, inner).map(lambda pq: f"({pq[0]} OR {pq[1]})"),
    ),
    max_leaves=6,
)

rows_strategy = st.lists(row_strategy, max_size=10)
FAST = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FAST
@given(rows=rows_strategy, where=predicates)
def test_filter_equals_brute_force(rows: list[dict[str, Any]], where: str) -> None:
    table = make_table(rows)
    expr = parse_predicate(where)
    assert selected(table, expr) == expected(table, expr)


@FAST
@given(where=predicates)
def test_text_round_trips(where: str) -> None:
    expr = parse_predicate(where)
    assert parse_predicate(str(expr)) == expr


@FAST
@given(rows=rows_strategy, where=predicates, forget=st.sets(st.sampled_from(SCHEMA.names)))
def test_may_match_is_sound(rows: list[dict[str, Any]], where: str, forget: set[str]) -> None:
    table = make_table(rows)
    expr = parse_predicate(where)
    stats = stats_of(table)
    assert stats["m"] == ColumnStats(None, None, len(rows), len(rows))
    known = {name: s for name, s in stats.items() if name not in forget}
    if selected(table, expr):
        assert may_match(expr, known, SCHEMA)
        assert may_match(expr, stats, SCHEMA)


@settings(max_examples=600, deadline=None)
@given(rows=rows_strategy, where=leaf_predicates().map(lambda p: f"NOT {p}") | leaf_predicates())
def test_may_match_is_sound_for_single_conditions(rows: list[dict[str, Any]], where: str) -> None:
    table = make_table(rows)
    expr = parse_predicate(where)
    if selected(table, expr):
        assert may_match(expr, stats_of(table), SCHEMA)


@settings(max_examples=800, deadline=None)
@given(
    strings=st.lists(st.none() | st.sampled_from(STRINGS), min_size=1, max_size=4),
    pattern=st.sampled_from(PATTERNS) | st.sampled_from(STRINGS).map(lambda s: s + "%"),
    negated=st.booleans(),
)
def test_like_pruning_is_sound(strings: list[str | None], pattern: str, negated: bool) -> None:
    table = make_table([{"s": text} for text in strings])
    expr: Expr = Like(col("s"), pattern, negated)
    if selected(table, expr):
        assert may_match(expr, stats_of(table), SCHEMA)


@FAST
@given(rows=rows_strategy, where=predicates)
def test_key_range_holds_every_selected_value(rows: list[dict[str, Any]], where: str) -> None:
    table = make_table(rows)
    expr = parse_predicate(where)
    matches = table.filter(to_arrow_expression(expr, SCHEMA)).to_pylist()
    for name in ("i", "s", "t", "f"):
        interval = key_range(expr, name, SCHEMA)
        if interval is None:
            continue
        lo, lo_inclusive, hi, hi_inclusive = interval
        for row in matches:
            value = row[name]
            assert value is not None, (name, interval)
            if lo is not None:
                assert value > lo or (lo_inclusive and value == lo), (name, interval, value)
            if hi is not None:
                assert value < hi or (hi_inclusive and value == hi), (name, interval, value)


def test_pruning_happens_on_generated_objects() -> None:
    """Not a soundness check: makes sure pruning is not vacuously True."""
    table = make_table([{"i": v, "s": f"val{v}", "t": T0} for v in range(1, 5)])
    stats = stats_of(table)
    for where in ["i > 4", "i < 1", "s = 'val9'", "t > '2026-01-05'", "m = 1", "i IN (7, 8)"]:
        expr = parse_predicate(where)
        assert selected(table, expr) == []
        assert not may_match(expr, stats, SCHEMA), where
