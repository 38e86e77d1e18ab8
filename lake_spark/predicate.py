"""The lake's ``--where`` predicates as Spark Columns.

The predicate is parsed and checked by lake_core (:mod:`lake_core.expr`); each literal is
coerced against the column it meets with lake_core's own rules (ISO 8601 text compared with a
timestamp column is a timestamp, an integer against a float column is a float, ...), so Spark
filters with the values the lake's pruning used. Columns are quoted, struct fields are
``getField`` steps, and long AND/OR chains are folded without recursion.
"""

from __future__ import annotations

import functools
import operator
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lake_core.expr.arrow import coerce_literal, resolve_column
from lake_core.expr.ast import (
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
    Operand,
    Or,
    chain_terms,
)

if TYPE_CHECKING:
    from pyspark.sql import Column as SparkColumn

_OPS: dict[str, Any] = {
    "=": operator.eq,
    "<>": operator.ne,
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
}


def spark_predicate(expr: Expr, schema: pa.Schema) -> SparkColumn:
    """``expr`` (checked against the pool ``schema``) as a boolean Spark Column."""
    from pyspark.sql import functions as F

    def column(c: Column) -> SparkColumn:
        out = F.col("`" + c.path[0].replace("`", "``") + "`")
        for part in c.path[1:]:
            out = out.getField(part)
        return out

    def literal(lit: Literal, against: Operand | None) -> SparkColumn:
        value: Any = lit.value
        if isinstance(against, Column) and value is not None:
            value = coerce_literal(lit, resolve_column(against, schema)).as_py()
        return F.lit(value)

    def operand(op: Operand, against: Operand | None = None) -> SparkColumn:
        return column(op) if isinstance(op, Column) else literal(op, against)

    def negate(c: SparkColumn, negated: bool) -> SparkColumn:
        return ~c if negated else c

    def build(node: Expr) -> SparkColumn:
        if isinstance(node, And | Or):
            join = operator.and_ if isinstance(node, And) else operator.or_
            return functools.reduce(join, (build(t) for t in chain_terms(node)))
        if isinstance(node, Not):
            return ~build(node.operand)
        if isinstance(node, Comparison):
            left = operand(node.left, node.right)
            right = operand(node.right, node.left)
            result: SparkColumn = _OPS[node.op](left, right)
            return result
        if isinstance(node, InList):
            target = operand(node.operand)
            values = [literal(v, node.operand) for v in node.values]
            return negate(target.isin(values), node.negated)
        if isinstance(node, Between):
            target = operand(node.operand)
            low = operand(node.low, node.operand)
            high = operand(node.high, node.operand)
            return negate(target.between(low, high), node.negated)
        if isinstance(node, IsNull):
            target = operand(node.operand)
            return target.isNotNull() if node.negated else target.isNull()
        if isinstance(node, Like):
            return negate(operand(node.operand).like(node.pattern), node.negated)
        raise TypeError(f"unknown predicate node {node!r}")

    return build(expr)
