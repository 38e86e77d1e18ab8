"""A pool snapshot as a Polars LazyFrame whose filters go through the lake's read planner.

The frame is a Polars IO plugin (``polars.io.plugins.register_io_source``) over one snapshot,
fixed when the frame is made. When Polars runs it, it hands the source the frame's predicate
(a Polars expression) and the columns it needs. The source translates the predicate into the
lake's predicate (:func:`lake_predicate`) and reads with :class:`lake_core.scan.Scan`, so the
planner (:mod:`lake_core.planning`) decides which objects and row groups are read, exactly as
for ``lake query --where`` and SQL, and later pruning rules apply here too. Then the source
applies Polars' own predicate to what it read, so the rows are Polars' semantics exactly.

Translation is only used to skip data, so it is *sound*: the lake predicate is TRUE on every row
where the Polars one can be (it may be TRUE on more). Understood: ``and``/``or``/``not``,
comparisons of a column with a literal, ``is_between``, ``is_in``, ``is_null``/``is_not_null``.
Anything else is dropped where dropping widens (a term of an AND in positive position, of an OR
under NOT), and otherwise makes the whole predicate untranslatable (everything is read). A
literal is taken only where Polars and the lake compare it the same way: integers with integer
and decimal columns, strings with string columns, dates and UTC datetimes with temporal
columns, booleans with booleans; floating columns are never pruned by value (NaN).

Polars' expression format (``Expr.meta.serialize(format="json")``) is not stable across Polars
releases: a node this module does not recognise is simply not used for pruning, so a format
change costs pruning, never rows. Polars is imported only when a frame is asked for.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lake_core.expr import (
    And,
    Between,
    Column,
    Comparison,
    Expr,
    ExpressionError,
    InList,
    IsNull,
    Literal,
    Not,
    Or,
    may_match,
)
from lake_core.expr.arrow import VALUE_PRUNABLE, type_category
from lake_core.expr.ast import CompareOp, flip_op

if TYPE_CHECKING:
    import polars as pl

    from lake_core.planning import ReadStats
    from lake_core.scan import Scan

__all__ = ["lake_predicate", "lazy_frame"]

_COMPARISONS: dict[str, CompareOp] = {
    "Eq": "=",
    "NotEq": "<>",
    "Lt": "<",
    "LtEq": "<=",
    "Gt": ">",
    "GtEq": ">=",
}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_INTEGERS = {f"{s}{n}" for s in ("Int", "UInt") for n in (8, 16, 32, 64)}


def _scalar(node: Any, category: str) -> Literal | None:
    """A Polars literal as the lake's, when both compare it with a ``category`` column alike."""
    if not isinstance(node, dict) or "Literal" not in node:
        return None
    lit = node["Literal"]
    if isinstance(lit, dict) and "Dyn" in lit:  # a Python int/float/str not yet typed
        dyn = lit["Dyn"]
        kind, value = next(iter(dyn.items())) if isinstance(dyn, dict) and dyn else (None, None)
        typed = {"Int": "Int64", "Float": "Float64", "Str": "String"}.get(str(kind), "?")
        lit = {"Scalar": {typed: value}}
    scalar = lit.get("Scalar") if isinstance(lit, dict) else None
    if not isinstance(scalar, dict) or len(scalar) != 1:
        return None
    kind, value = next(iter(scalar.items()))
    if kind in _INTEGERS and isinstance(value, int) and category in ("integer", "decimal"):
        return Literal(value)
    if kind == "String" and isinstance(value, str) and category == "string":
        return Literal(value)
    if kind == "Boolean" and isinstance(value, bool) and category == "boolean":
        return Literal(value)
    if kind == "Date" and isinstance(value, int) and category in ("date", "timestamp"):
        day = date(1970, 1, 1) + timedelta(days=value)
        if category == "date":
            return Literal(day)
        return Literal(datetime(day.year, day.month, day.day, tzinfo=UTC))
    if kind == "Datetime" and isinstance(value, list) and len(value) == 3:
        amount, unit, zone = value
        tz = zone.get("inner") if isinstance(zone, dict) else zone
        per_us = {"Microseconds": 1, "Milliseconds": 1000}.get(str(unit))
        if unit == "Nanoseconds" and isinstance(amount, int) and amount % 1000 == 0:
            amount, per_us = amount // 1000, 1
        if per_us is None or not isinstance(amount, int) or tz not in (None, "UTC"):
            return None
        if category in ("timestamp", "date"):
            return Literal(_EPOCH + timedelta(microseconds=amount * per_us))
    return None


class _Translator:
    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema

    def column(self, node: Any) -> tuple[Column, str] | None:
        if not isinstance(node, dict) or not isinstance(node.get("Column"), str):
            return None
        name = node["Column"]
        if name not in self.schema.names:
            return None
        category = type_category(self.schema.field(name).type)
        return (Column((name,)), category) if category in VALUE_PRUNABLE else None

    def expr(self, node: Any, positive: bool) -> Expr | None:
        if not isinstance(node, dict):
            return None
        if "BinaryExpr" in node:
            b = node["BinaryExpr"]
            op = b.get("op")
            if op in ("And", "LogicalAnd", "Or", "LogicalOr"):
                is_and = op in ("And", "LogicalAnd")
                may_drop = is_and == positive  # dropping a term widens
                left, right = (
                    self.expr(b.get("left"), positive),
                    self.expr(b.get("right"), positive),
                )
                if left is None or right is None:
                    return (left or right) if may_drop else None
                return And(left, right) if is_and else Or(left, right)
            if op in _COMPARISONS:
                return self.comparison(_COMPARISONS[op], b.get("left"), b.get("right"))
            return None
        if "Function" in node:
            return self.function(node["Function"], positive)
        return None

    def comparison(self, op: CompareOp, left: Any, right: Any) -> Expr | None:
        found, other = self.column(left), right
        if found is None:
            found, other, op = self.column(right), left, flip_op(op)
        if found is None:
            return None
        value = _scalar(other, found[1])
        return None if value is None else Comparison(op, found[0], value)

    def function(self, fn: dict[str, Any], positive: bool) -> Expr | None:
        inputs = fn.get("input") or []
        boolean = (fn.get("function") or {}).get("Boolean")
        if boolean in ("IsNull", "IsNotNull") and len(inputs) == 1:
            found = self.column(inputs[0])
            return None if found is None else IsNull(found[0], boolean == "IsNotNull")
        if boolean == "Not" and len(inputs) == 1:
            inner = self.expr(inputs[0], not positive)
            return None if inner is None else Not(inner)
        if isinstance(boolean, dict) and "IsBetween" in boolean and len(inputs) == 3:
            found = self.column(inputs[0])
            if found is None:
                return None
            low, high = _scalar(inputs[1], found[1]), _scalar(inputs[2], found[1])
            if low is None or high is None:
                return None
            closed = (boolean["IsBetween"] or {}).get("closed")
            if closed == "Both":
                return Between(found[0], low, high)
            # Half-open or open: the closed range holds every row the open one does.
            return Between(found[0], low, high) if closed in ("Left", "Right", "None") else None
        if isinstance(boolean, dict) and "IsIn" in boolean and len(inputs) == 2:
            found = self.column(inputs[0])
            if found is None:
                return None
            values = _list_literal(inputs[1], found[1])
            return None if not values else InList(found[0], tuple(values))
        return None


def _list_literal(node: Any, category: str) -> list[Literal] | None:
    """The values of an ``is_in`` list literal (an Arrow IPC stream of one list), as literals."""
    try:
        raw = node["Literal"]["Scalar"]["List"]
        table = pa.ipc.open_stream(pa.py_buffer(bytes(raw))).read_all()
        items = table.column(0).to_pylist()
    except (KeyError, TypeError, ValueError, pa.ArrowException):
        return None
    out = []
    for v in items:
        integer = isinstance(v, int) and not isinstance(v, bool)
        if (integer and category in ("integer", "decimal")) or (
            isinstance(v, str) and category == "string"
        ):
            out.append(Literal(v))
        else:
            return None
    return out


def lake_predicate(predicate: pl.Expr, schema: pa.Schema) -> Expr | None:
    """A lake predicate over ``schema`` that is TRUE wherever Polars' ``predicate`` can be,
    or None (read everything): see the module docstring."""
    try:
        node = json.loads(predicate.meta.serialize(format="json"))
    except Exception:  # an expression Polars cannot serialise: no pruning
        return None
    found = _Translator(schema).expr(node, positive=True)
    if found is None:
        return None
    try:
        may_match(found, {}, schema)  # literals coerce, columns resolve: checked once here
    except (ExpressionError, TypeError, ValueError, pa.ArrowException):
        return None
    return found


def lazy_frame(
    make_scan: Callable[[str | None, list[str] | None], Scan],
    schema: pa.Schema,
    stats: ReadStats | None = None,
) -> pl.LazyFrame:
    """A LazyFrame over one snapshot of ``schema``: ``make_scan(where, columns)`` plans and reads
    it (see :meth:`lake_core.pool.Pool.to_polars`). ``stats``, if given, adds up what every
    collect read."""
    import polars as pl
    from polars.io.plugins import register_io_source

    polars_schema = pl.DataFrame(schema.empty_table()).schema

    def source(
        with_columns: list[str] | None,
        predicate: pl.Expr | None,
        n_rows: int | None,
        batch_size: int | None,
    ) -> Iterator[pl.DataFrame]:
        where = lake_predicate(predicate, schema) if predicate is not None else None
        wanted = list(with_columns) if with_columns is not None else list(schema.names)
        needed = set(wanted) | (
            set(predicate.meta.root_names()) if predicate is not None else set()
        )
        columns = [n for n in schema.names if n in needed] or schema.names[:1]
        scan = make_scan(None if where is None else str(where), columns)
        left = n_rows
        try:
            for batch in scan.batches():
                frame = pl.DataFrame(pa.Table.from_batches([batch]))
                if predicate is not None:
                    frame = frame.filter(predicate)
                frame = frame.select(wanted)
                if left is not None:
                    frame = frame.head(left)
                    left -= frame.height
                if frame.height:
                    yield frame
                if left is not None and left <= 0:
                    return
        finally:
            if stats is not None:
                for name, value in scan.stats.to_json().items():
                    if name != "objects_total":
                        setattr(stats, name, getattr(stats, name) + value)
                stats.objects_total = scan.stats.objects_total

    return register_io_source(source, schema=polars_schema, explain_name="lakepool")
