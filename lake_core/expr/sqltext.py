"""A ``--where`` predicate as DuckDB SQL text, for queries the lake builds around it
(``lake histogram --where``).

User text never reaches the SQL: :func:`to_sql` renders the parsed AST, so the result is one
closed boolean expression (every node parenthesised, names double-quoted, strings
single-quoted with quotes doubled) — text such as ``a = 1) OR (1=1`` or ``a = 1 -- c`` is
refused by the parser before anything is built.

Invariant: over rows of ``schema`` the SQL is TRUE exactly where :func:`to_arrow_expression`
selects, so a count with ``--where`` equals ``lake count --where``. Where DuckDB and the lake
differ, the rendering follows the lake:

* literals take the value the lake coerces them to for their column: ISO 8601 text against a
  timestamp column is that instant in UTC, written as a string constant (as a derived pool's
  bucket bounds are written, so such a query can still be answered from one);
* comparisons with a floating column are IEEE's: NaN equals, orders and matches nothing (DuckDB
  orders NaN above every number and makes it equal to itself);
* ``LIKE`` treats ``\\`` as its escape character (DuckDB's has none unless ESCAPE says so),
  and ignores one left at the end (DuckDB refuses such a pattern);
* ``BETWEEN`` is its ``>= AND <=`` expansion, ``IN`` a comparison with each value.
"""

from __future__ import annotations

from datetime import date, datetime

import pyarrow as pa

from lake_core.expr.arrow import (
    ResolvedColumn,
    coerce_literal,
    resolve_column,
    to_arrow_expression,
)
from lake_core.expr.ast import (
    And,
    Between,
    Column,
    CompareOp,
    Comparison,
    Expr,
    InList,
    IsNull,
    Like,
    Literal,
    Not,
    Operand,
    Or,
    chain_terms,
    flip_op,
)

__all__ = ["to_sql"]

_NULL = "CAST(NULL AS BOOLEAN)"


def to_sql(expr: Expr, schema: pa.Schema) -> str:
    """``expr`` over the columns of ``schema`` as DuckDB SQL (see the module docstring).
    Raises :class:`ExpressionError`, as :func:`to_arrow_expression` does, for an unknown
    column or a literal that does not suit its column."""
    to_arrow_expression(expr, schema)  # the checks, with their messages; the SQL assumes them
    return _Renderer(schema).render(expr)


def _name(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


class _Renderer:
    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema

    def render(self, expr: Expr) -> str:
        if isinstance(expr, And | Or):
            word = " AND " if isinstance(expr, And) else " OR "
            return "(" + word.join(map(self.render, chain_terms(expr))) + ")"
        if isinstance(expr, Not):
            return f"(NOT {self.render(expr.operand)})"
        if isinstance(expr, Comparison):
            return self.compare(expr.op, expr.left, expr.right)
        if isinstance(expr, Between):
            low = self.compare(">=", expr.operand, expr.low)
            high = self.compare("<=", expr.operand, expr.high)
            return _negated(f"({low} AND {high})", expr.negated)
        if isinstance(expr, InList):
            members = [
                self.compare("=", expr.operand, v) for v in expr.values if v.value is not None
            ]
            if len(members) < len(expr.values):
                members.append("NULL")  # x IN (…, NULL): TRUE or NULL, never FALSE
            return _negated("(" + " OR ".join(members) + ")", expr.negated)
        if isinstance(expr, IsNull):
            if isinstance(expr.operand, Literal):
                return "TRUE" if (expr.operand.value is None) != expr.negated else "FALSE"
            word = "IS NOT NULL" if expr.negated else "IS NULL"
            return f"({_column_sql(expr.operand)} {word})"
        if isinstance(expr, Like):
            operand = expr.operand
            if isinstance(operand, Literal):
                if operand.value is None:
                    return _NULL
                subject = str(operand)
            elif resolve_column(operand, self.schema).category == "null":
                return _NULL
            else:
                subject = _column_sql(operand)
            word = "NOT LIKE" if expr.negated else "LIKE"
            return f"({subject} {word} {_string(_pattern(expr.pattern))} ESCAPE '\\')"
        raise TypeError(f"not a predicate node: {expr!r}")

    def compare(self, op: CompareOp, left: Operand, right: Operand) -> str:
        if isinstance(left, Literal) and isinstance(right, Column):
            op, left, right = flip_op(op), right, left
        if isinstance(left, Literal) and isinstance(right, Literal):
            if left.value is None or right.value is None:
                return _NULL
            return f"({left} {op} {right})"
        assert isinstance(left, Column)
        a = _bound(resolve_column(left, self.schema), _column_sql(left))
        if isinstance(right, Literal):
            if a[0].category == "null" or right.value is None:
                return _NULL
            value = _literal(right, a[0])
            if a[0].category == "floating":
                value = f"CAST({value} AS DOUBLE)"
            return _ieee(op, f"{a[1]} {op} {value}", [a])
        b = _bound(resolve_column(right, self.schema), _column_sql(right))
        if "null" in (a[0].category, b[0].category):
            return _NULL
        return _ieee(op, f"{a[1]} {op} {b[1]}", [a, b])


def _bound(column: ResolvedColumn, sql: str) -> tuple[ResolvedColumn, str]:
    """A column and its SQL as a comparison uses it: a floating column (float32 too) as
    DOUBLE, since Arrow compares floats in float64 (DuckDB would cast the literal to FLOAT,
    and ``x = 0.1`` would then match a float32 0.1 that the lake's filter does not)."""
    if column.category == "floating":
        return column, f"CAST({sql} AS DOUBLE)"
    return column, sql


def _pattern(pattern: str) -> str:
    """A LIKE pattern for DuckDB: a lone ``\\`` at the end escapes nothing, and the lake
    (Arrow) ignores it where DuckDB would refuse the pattern."""
    trailing = len(pattern) - len(pattern.rstrip("\\"))
    return pattern[:-1] if trailing % 2 else pattern


def _negated(sql: str, negated: bool) -> str:
    return f"(NOT {sql})" if negated else sql


def _ieee(op: CompareOp, plain: str, sides: list[tuple[ResolvedColumn, str]]) -> str:
    """``plain``, a comparison of the columns ``sides`` (each bound, and as SQL) with a
    literal or each other, with IEEE's answer where no side is null and one is NaN: ``<>``
    is TRUE, every other comparison FALSE."""
    floating = [sql for column, sql in sides if column.category == "floating"]
    if not floating:
        return f"({plain})"
    known = "".join(f"{sql} IS NOT NULL AND " for _, sql in sides)
    nan = " OR ".join(f"isnan({sql})" for sql in floating)
    answer = "TRUE" if op == "<>" else "FALSE"
    return f"(CASE WHEN {known}({nan}) THEN {answer} ELSE {plain} END)"


def _column_sql(column: Column) -> str:
    out = _name(column.root)
    for part in column.path[1:]:
        out = f"struct_extract({out}, {_string(part)})"
    return out


def _literal(literal: Literal, target: ResolvedColumn) -> str:
    """``literal`` as SQL with the value the lake compares with ``target``'s values."""
    scalar = coerce_literal(literal, target)
    kind = scalar.type
    if pa.types.is_timestamp(kind):
        moment = scalar.cast(pa.timestamp("us", tz=kind.tz)).as_py()
        assert isinstance(moment, datetime)
        if target.category == "date":  # a point in time against dates (midnight UTC)
            return f"TIMESTAMPTZ {_string(moment.isoformat(sep=' '))}"
        return _string(moment.isoformat(sep=" "))
    if pa.types.is_date(kind):
        day = scalar.as_py()
        assert isinstance(day, date)
        return _string(day.isoformat())
    if pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_binary_view(kind):
        return f"unhex({_string(scalar.as_py().hex())})"
    return str(literal)
