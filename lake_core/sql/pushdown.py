"""WHERE conjuncts of DuckDB's parse tree, as the lake's own predicate AST, for pruning.

:func:`translate` turns one DuckDB expression (the JSON of ``json_serialize_sql``) into a
:mod:`lake_core.expr` predicate over the columns of ONE table occurrence, or None when it cannot.
It is used only to skip data, so it must be *sound*: the predicate it returns is TRUE for every
row of that table on which the SQL expression can be TRUE (it may be TRUE on more). Hence:

* a term that cannot be translated (a function, a column of another table, a parameter) may be
  dropped only where dropping widens: from an AND in positive position, from an OR under NOT;
  anywhere else it makes the whole expression untranslatable;
* a literal is taken only where DuckDB and the lake compare it the same way: integers with
  integer and decimal columns, strings with string columns and (ISO 8601 text, UTC) with
  timestamp and date columns, booleans with booleans, ``TIMESTAMP '…'``/``DATE '…'`` casts
  with temporal columns. Floating columns are never pruned by value: DuckDB orders NaN above
  every number and Parquet statistics leave NaN out;
* LIKE patterns with a backslash are left alone (DuckDB's LIKE has no escape character unless
  ESCAPE is given, the lake's treats ``\\`` as one).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, date, datetime
from typing import Any

import pyarrow as pa

from lake_core.expr import (
    And,
    Between,
    Column,
    Comparison,
    Expr,
    InList,
    IsNull,
    Like,
    Literal,
    Not,
    Or,
)
from lake_core.expr.arrow import VALUE_PRUNABLE, type_category
from lake_core.expr.ast import CompareOp, flip_op

__all__ = ["Binder", "translate"]

#: ``column_names`` of a COLUMN_REF → the pool field it reads in the target table, or None
#: when it is not a column of that table.
Binder = Callable[[list[str]], "pa.Field[Any] | None"]

_COMPARISONS: dict[str, CompareOp] = {
    "COMPARE_EQUAL": "=",
    "COMPARE_NOTEQUAL": "<>",
    "COMPARE_LESSTHAN": "<",
    "COMPARE_GREATERTHAN": ">",
    "COMPARE_LESSTHANOREQUALTO": "<=",
    "COMPARE_GREATERTHANOREQUALTO": ">=",
}
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}\Z")
_TIMESTAMP = re.compile(r"\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}(:\d{2}(\.\d{1,6})?)?Z?\Z")


def _temporal(text: str, category: str) -> date | datetime | None:
    if _DATE.match(text):
        day = date.fromisoformat(text)
        if category == "date":
            return day
        return datetime(day.year, day.month, day.day, tzinfo=UTC)
    if category == "timestamp" and _TIMESTAMP.match(text):
        return datetime.fromisoformat(text.rstrip("Z").replace(" ", "T")).replace(tzinfo=UTC)
    return None


def _literal(node: dict[str, Any], field: pa.Field[Any]) -> Literal | None:
    """The constant ``node`` in the lake's terms for a comparison with ``field``, if DuckDB
    compares them the same way (see the module docstring)."""
    category = type_category(field.type)
    cast_to = None
    if node.get("type") == "OPERATOR_CAST" and not node.get("try_cast"):
        cast_to = str(node.get("type_expr", {}).get("type_name", "")).upper()
        node = node.get("child", {})
    if node.get("type") != "VALUE_CONSTANT":
        return None
    kind = node.get("literal", {}).get("kind")
    text = node.get("literal", {}).get("text")
    if kind == "NULL_LITERAL" and cast_to is None:
        return Literal(None)
    if not isinstance(text, str):
        return None
    if cast_to is not None:
        if kind != "STRING" or category not in ("timestamp", "date"):
            return None
        if cast_to == "DATE" and _DATE.match(text):
            value = _temporal(text, category)
        elif cast_to in ("TIMESTAMP", "TIMESTAMPTZ", "TIMESTAMP WITH TIME ZONE", "DATETIME"):
            value = _temporal(text, "timestamp")
            if isinstance(value, datetime) and category == "date":
                return Literal(value)
        else:
            return None
        return None if value is None else Literal(value)
    if kind == "INTEGER" and category in ("integer", "decimal"):
        try:
            return Literal(int(text))
        except ValueError:
            return None
    if kind == "STRING":
        if category == "string":
            return Literal(text)
        if category in ("timestamp", "date"):
            value = _temporal(text, category)
            return None if value is None else Literal(value)
    if kind == "BOOLEAN" and category == "boolean" and text.lower() in ("true", "false"):
        return Literal(text.lower() == "true")
    return None


class _Translator:
    def __init__(self, bind: Binder) -> None:
        self.bind = bind

    def column(self, node: dict[str, Any]) -> tuple[Column, pa.Field[Any]] | None:
        if node.get("type") != "COLUMN_REF":
            return None
        names = node.get("column_names")
        if not isinstance(names, list) or not names:
            return None
        field = self.bind([str(n) for n in names])
        if field is None:
            return None
        return Column((field.name,)), field

    def expr(self, node: dict[str, Any], positive: bool) -> Expr | None:
        kind = node.get("type")
        if kind in ("CONJUNCTION_AND", "CONJUNCTION_OR"):
            is_and = kind == "CONJUNCTION_AND"
            may_drop = is_and == positive  # AND when positive, OR under NOT: dropping widens
            terms = []
            for child in node.get("children", []):
                term = self.expr(child, positive)
                if term is None:
                    if not may_drop:
                        return None
                    continue
                terms.append(term)
            if not terms:
                return None
            result = terms[0]
            for term in terms[1:]:
                result = And(result, term) if is_and else Or(result, term)
            return result
        if kind == "OPERATOR_NOT":
            children = node.get("children", [])
            inner = self.expr(children[0], not positive) if len(children) == 1 else None
            return None if inner is None else Not(inner)
        if kind in _COMPARISONS:
            return self.comparison(_COMPARISONS[kind], node.get("left", {}), node.get("right", {}))
        if kind == "COMPARE_BETWEEN":
            found = self.column(node.get("input", {}))
            if found is None:
                return None
            col, field = found
            low = _literal(node.get("lower", {}), field)
            high = _literal(node.get("upper", {}), field)
            if low is None or high is None:
                return None
            return Between(col, low, high)
        if kind in ("COMPARE_IN", "COMPARE_NOT_IN"):
            children = node.get("children", [])
            found = self.column(children[0]) if children else None
            if found is None or len(children) < 2:
                return None
            col, field = found
            values = [_literal(c, field) for c in children[1:]]
            if any(v is None for v in values):
                return None
            return InList(col, tuple(v for v in values if v is not None), kind == "COMPARE_NOT_IN")
        if kind in ("OPERATOR_IS_NULL", "OPERATOR_IS_NOT_NULL"):
            children = node.get("children", [])
            found = self.column(children[0]) if len(children) == 1 else None
            if found is None:
                return None
            return IsNull(found[0], kind == "OPERATOR_IS_NOT_NULL")
        if kind == "FUNCTION" and node.get("function_name") in ("~~", "!~~"):
            args = [a.get("expression", {}) for a in node.get("arguments", [])]
            if len(args) != 2:
                return None
            found = self.column(args[0])
            if found is None or type_category(found[1].type) != "string":
                return None
            pattern = _literal(args[1], found[1])
            if pattern is None or not isinstance(pattern.value, str) or "\\" in pattern.value:
                return None
            return Like(found[0], pattern.value, node.get("function_name") == "!~~")
        return None

    def comparison(self, op: CompareOp, left: dict[str, Any], right: dict[str, Any]) -> Expr | None:
        found = self.column(left)
        other = right
        if found is None:
            found, other = self.column(right), left
            if found is None:
                return None
            op = flip_op(op)
        col, field = found
        if type_category(field.type) not in VALUE_PRUNABLE:
            return None
        value = _literal(other, field)
        if value is None:
            return None
        return Comparison(op, col, value)


def translate(node: dict[str, Any], bind: Binder) -> Expr | None:
    """A predicate over the table ``bind`` knows that holds wherever ``node`` may be TRUE, or
    None (see the module docstring)."""
    return _Translator(bind).expr(node, positive=True)
