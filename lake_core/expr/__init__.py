"""The ``--where`` language: SQL boolean expressions over a pool's columns.

``parse_predicate`` turns text into an immutable AST (:mod:`lake_core.expr.ast`);
``to_arrow_expression`` turns the AST into a pyarrow filter (:mod:`lake_core.expr.arrow`);
``may_match`` and ``key_range`` reason about it against column statistics
(:mod:`lake_core.expr.prune`); ``to_sql`` renders it as DuckDB SQL with the same meaning
(:mod:`lake_core.expr.sqltext`).
"""

from lake_core.expr.arrow import to_arrow_expression
from lake_core.expr.ast import (
    And,
    Between,
    Column,
    Comparison,
    Expr,
    ExpressionError,
    InList,
    IsNull,
    Like,
    Literal,
    Not,
    Operand,
    Or,
    columns_of,
    nodes,
)
from lake_core.expr.parser import parse_predicate
from lake_core.expr.prune import ColumnStats, key_range, may_match
from lake_core.expr.sqltext import to_sql

__all__ = [
    "And",
    "Between",
    "Column",
    "ColumnStats",
    "Comparison",
    "Expr",
    "ExpressionError",
    "InList",
    "IsNull",
    "Like",
    "Literal",
    "Not",
    "Operand",
    "Or",
    "columns_of",
    "nodes",
    "key_range",
    "may_match",
    "parse_predicate",
    "to_arrow_expression",
    "to_sql",
]
