"""AST → ``pyarrow.compute.Expression``, with literals coerced to the columns' types.

Invariants:

* The expression follows SQL's three-valued logic: comparisons with a null side are null,
  ``AND``/``OR`` are Kleene, ``NOT`` keeps null, and a filter keeps a row only where the
  expression is TRUE. ``IN`` and ``BETWEEN`` mean exactly their ``OR``/``AND`` expansions.
* Every column named must exist in the schema given; every literal must suit its column's type
  (see :func:`coerce_literal`). Violations raise :class:`ExpressionError` before any data is read.
* The result is checked against the schema once (bound on an empty table), so an expression
  that is returned can be evaluated on any batch of that schema.
* Column types without compute kernels are cast first: ``string_view`` and ``binary_view`` to
  their large counterparts, dictionaries to their value type.
"""

from __future__ import annotations

import typing
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time
from decimal import Decimal, InvalidOperation
from functools import reduce

import pyarrow as pa
import pyarrow.compute as pc

from lake_core.expr.ast import (
    And,
    Between,
    Column,
    CompareOp,
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
    chain_terms,
    flip_op,
)
from lake_core.expr.parser import parse_date, parse_timestamp

__all__ = [
    "ResolvedColumn",
    "TypeCategory",
    "VALUE_PRUNABLE",
    "coerce_literal",
    "resolve_column",
    "to_arrow_expression",
    "type_category",
]

TypeCategory = typing.Literal[
    "integer",
    "floating",
    "decimal",
    "string",
    "binary",
    "boolean",
    "timestamp",
    "date",
    "null",
    "other",
]

#: Categories whose columns a translated predicate (SQL pushdown, a Polars filter) may prune
#: by a literal's value: the engines and the lake order their values alike. Floating columns
#: are not among them (NaN: absent from statistics, ordered differently by each engine).
VALUE_PRUNABLE: frozenset[TypeCategory] = frozenset(
    {"integer", "decimal", "string", "boolean", "timestamp", "date"}
)

_COMPARABLE_GROUPS: tuple[frozenset[TypeCategory], ...] = (
    frozenset({"integer", "floating", "decimal"}),
    frozenset({"timestamp", "date"}),
    frozenset({"string"}),
    frozenset({"binary"}),
    frozenset({"boolean"}),
)

_Compare = Callable[[pc.Expression, pc.Expression], pc.Expression]
_FUNCTION_NAMES: dict[CompareOp, str] = {
    "=": "equal",
    "<>": "not_equal",
    "<": "less",
    "<=": "less_equal",
    ">": "greater",
    ">=": "greater_equal",
}
_COMPARE: dict[CompareOp, _Compare] = {
    "=": pc.equal,
    "<>": pc.not_equal,
    "<": pc.less,
    "<=": pc.less_equal,
    ">": pc.greater,
    ">=": pc.greater_equal,
}


def type_category(data_type: pa.DataType) -> TypeCategory:
    """The family of ``data_type`` that decides which literals it compares with."""
    t = pa.types
    if t.is_dictionary(data_type):
        return type_category(
            typing.cast("pa.DictionaryType[typing.Any, typing.Any]", data_type).value_type
        )
    checks: tuple[tuple[Callable[[pa.DataType], bool], TypeCategory], ...] = (
        (t.is_boolean, "boolean"),
        (t.is_integer, "integer"),
        (t.is_floating, "floating"),
        (t.is_decimal, "decimal"),
        (t.is_string, "string"),
        (t.is_large_string, "string"),
        (t.is_string_view, "string"),
        (t.is_binary, "binary"),
        (t.is_large_binary, "binary"),
        (t.is_binary_view, "binary"),
        (t.is_fixed_size_binary, "binary"),
        (t.is_timestamp, "timestamp"),
        (t.is_date, "date"),
        (t.is_null, "null"),
    )
    return next((category for check, category in checks if check(data_type)), "other")


@dataclass(frozen=True)
class ResolvedColumn:
    """A column reference bound to a schema.

    ``data_type`` is the stored type; ``expression`` reads the column, cast where needed so that
    compute kernels exist for it, and ``value_type`` is the type ``expression`` yields.
    """

    column: Column
    data_type: pa.DataType
    expression: pc.Expression
    value_type: pa.DataType

    @property
    def category(self) -> TypeCategory:
        return type_category(self.value_type)

    def describe(self) -> str:
        return f"column {self.column.name!r} ({self.data_type})"


def _at(pos: int) -> str:
    return f" at position {pos + 1}" if pos >= 0 else ""


def _kernel_type(data_type: pa.DataType) -> pa.DataType:
    if pa.types.is_dictionary(data_type):
        return _kernel_type(
            typing.cast("pa.DictionaryType[typing.Any, typing.Any]", data_type).value_type
        )
    if pa.types.is_string_view(data_type):
        return pa.large_string()
    if pa.types.is_binary_view(data_type):
        return pa.large_binary()
    return data_type


def resolve_column(column: Column, schema: pa.Schema) -> ResolvedColumn:
    """Bind ``column`` to ``schema``; an unknown column or field raises ExpressionError."""
    if column.root not in schema.names:
        shown = ", ".join(schema.names[:20]) + (", …" if len(schema.names) > 20 else "")
        raise ExpressionError(
            f"unknown column {column.root!r}{_at(column.pos)} (columns: {shown or 'none'})",
            column.pos + 1 if column.pos >= 0 else None,
        )
    data_type = schema.field(schema.names.index(column.root)).type
    for depth, part in enumerate(column.path[1:], start=1):
        parent = ".".join(column.path[:depth])
        if not pa.types.is_struct(data_type):
            raise ExpressionError(
                f"column {parent!r} is {data_type}, not a struct, so it has no field "
                f"{part!r}{_at(column.pos)}",
                column.pos + 1 if column.pos >= 0 else None,
            )
        struct = data_type
        index = struct.get_field_index(part)
        if index < 0:
            raise ExpressionError(
                f"unknown field {part!r} in column {parent!r}{_at(column.pos)}",
                column.pos + 1 if column.pos >= 0 else None,
            )
        data_type = struct.field(index).type
    expression = pc.field(*column.path)
    value_type = _kernel_type(data_type)
    if value_type != data_type:
        expression = expression.cast(value_type)
    return ResolvedColumn(column, data_type, expression, value_type)


def _mismatch(literal: Literal, target: ResolvedColumn, why: str = "") -> ExpressionError:
    reason = f": {why}" if why else ""
    return ExpressionError(
        f"{target.describe()} cannot be compared with {literal.describe()}"
        f"{_at(literal.pos)}{reason}",
        literal.pos + 1 if literal.pos >= 0 else None,
    )


def _integer_scalar(value: int, preferred: pa.DataType) -> pa.Scalar[typing.Any] | None:
    for data_type in (preferred, pa.int64(), pa.uint64()):
        try:
            return pa.scalar(value, type=data_type)
        except (OverflowError, pa.ArrowInvalid):
            continue
    return None


def _timestamp_value(literal: Literal, target: ResolvedColumn) -> datetime:
    value = literal.value
    if isinstance(value, datetime):
        return value
    if isinstance(value, date):
        return datetime.combine(value, time(), tzinfo=UTC)
    if isinstance(value, str):
        parsed = parse_timestamp(value)
        if parsed is None:
            raise _mismatch(literal, target, "the string is not an ISO 8601 timestamp")
        return parsed
    raise _mismatch(literal, target)


def _timestamp_scalar(moment: datetime, data_type: pa.DataType) -> pa.Scalar[typing.Any]:
    column_type = typing.cast("pa.TimestampType[typing.Any, typing.Any]", data_type)
    # Microseconds at least, so that no literal is truncated; kernels upcast coarser columns.
    unit: typing.Literal["us", "ns"] = "ns" if str(column_type.unit) == "ns" else "us"
    tz: str | None = column_type.tz
    if tz is None:
        # A naive column holds UTC wall-clock times.
        naive = moment.astimezone(UTC).replace(tzinfo=None)
        return pa.scalar(naive, type=pa.timestamp(unit))
    return pa.scalar(moment, type=pa.timestamp(unit, tz=tz))


def coerce_literal(literal: Literal, target: ResolvedColumn) -> pa.Scalar[typing.Any]:
    """``literal`` as a scalar that compares with ``target``'s values.

    NULL suits every column. Integers suit integer, floating and decimal columns; floats
    suit those too. Strings suit string and binary columns, and timestamp and date columns
    when they hold ISO 8601 text (naive means UTC). TIMESTAMP and DATE literals suit timestamp
    and date columns. Booleans suit boolean columns. Anything else raises ExpressionError
    naming the column, its type and the literal.
    """
    category = target.category
    value = literal.value
    if value is None:
        return pa.scalar(None, type=target.value_type)
    if category == "null":
        return pa.scalar(value)
    kind = literal.kind
    if category == "integer" and isinstance(value, int) and kind == "integer":
        scalar = _integer_scalar(value, target.value_type)
        if scalar is None:
            raise _mismatch(literal, target, "the integer is out of range")
        return scalar
    if category in ("integer", "floating") and kind in ("integer", "float"):
        assert isinstance(value, int | float)
        try:
            return pa.scalar(float(value), type=pa.float64())
        except OverflowError:
            raise _mismatch(literal, target, "the number is out of range") from None
    if category == "decimal" and kind in ("integer", "float"):
        assert isinstance(value, int | float)
        try:
            return pa.scalar(Decimal(value if isinstance(value, int) else repr(value)))
        except (InvalidOperation, pa.ArrowException):
            return pa.scalar(float(value), type=pa.float64())
    if category == "string" and isinstance(value, str):
        return pa.scalar(value, type=target.value_type)
    if category == "binary" and isinstance(value, str):
        try:
            return pa.scalar(value.encode(), type=target.value_type)
        except pa.ArrowException as error:
            raise _mismatch(literal, target, str(error)) from None
    if category == "boolean" and isinstance(value, bool):
        return pa.scalar(value, type=pa.bool_())
    if category == "timestamp" and kind in ("timestamp", "date", "string"):
        return _timestamp_scalar(_timestamp_value(literal, target), target.value_type)
    if category == "date" and kind in ("timestamp", "date", "string"):
        day = parse_date(value) if isinstance(value, str) else None
        if day is None and not isinstance(value, datetime) and isinstance(value, date):
            day = value
        if day is not None:
            return pa.scalar(day, type=target.value_type)
        # A point in time: the kernels compare dates as midnight UTC timestamps.
        return pa.scalar(_timestamp_value(literal, target), type=pa.timestamp("us", tz="UTC"))
    raise _mismatch(literal, target)


def _scalar_expression(value: pa.Scalar[typing.Any]) -> pc.Expression:
    return pc.scalar(value)  # type: ignore[arg-type]  # the stubs omit pa.Scalar


_NULL_BOOL = _scalar_expression(pa.scalar(None, type=pa.bool_()))


class _Translator:
    """Builds the expression for one schema; each method handles one node type."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema

    def translate(self, expr: Expr) -> pc.Expression:
        if isinstance(expr, And):
            return reduce(pc.and_kleene, map(self.translate, chain_terms(expr)))
        if isinstance(expr, Or):
            return reduce(pc.or_kleene, map(self.translate, chain_terms(expr)))
        if isinstance(expr, Not):
            return pc.invert(self.translate(expr.operand))
        if isinstance(expr, Comparison):
            return self.compare(expr.op, expr.left, expr.right)
        if isinstance(expr, Between):
            inside = pc.and_kleene(
                self.compare(">=", expr.operand, expr.low),
                self.compare("<=", expr.operand, expr.high),
            )
            return pc.invert(inside) if expr.negated else inside
        if isinstance(expr, InList):
            found = self.in_list(expr.operand, expr.values)
            return pc.invert(found) if expr.negated else found
        if isinstance(expr, IsNull):
            return self.is_null(expr.operand, expr.negated)
        if isinstance(expr, Like):
            matched = self.like(expr.operand, expr.pattern)
            return pc.invert(matched) if expr.negated else matched
        raise TypeError(f"not a predicate node: {expr!r}")

    def compare(self, op: CompareOp, left: Operand, right: Operand) -> pc.Expression:
        if isinstance(left, Literal) and isinstance(right, Column):
            op, left, right = flip_op(op), right, left
        if isinstance(left, Column) and isinstance(right, Literal):
            target = resolve_column(left, self.schema)
            scalar = coerce_literal(right, target)
            if target.category == "null" or right.value is None:
                return _NULL_BOOL
            column = target.expression
            if target.category == "integer" and pa.types.is_floating(scalar.type):
                # Cast the column to float64 ourselves: Acero's implicit cast of an integer
                # column against a float literal refuses values beyond 2**24 (it casts
                # through float32 checks), where comparing as float64 is what SQL means.
                column = column.cast(pa.float64())
            return _COMPARE[op](column, _scalar_expression(scalar))
        if isinstance(left, Column) and isinstance(right, Column):
            a, b = resolve_column(left, self.schema), resolve_column(right, self.schema)
            if "null" in (a.category, b.category):
                return _NULL_BOOL
            if not any({a.category, b.category} <= group for group in _COMPARABLE_GROUPS):
                raise ExpressionError(
                    f"{a.describe()} cannot be compared with {b.describe()}{_at(left.pos)}",
                    left.pos + 1 if left.pos >= 0 else None,
                )
            return _COMPARE[op](a.expression, b.expression)
        assert isinstance(left, Literal) and isinstance(right, Literal)
        return self.compare_constants(op, left, right)

    @staticmethod
    def compare_constants(op: CompareOp, left: Literal, right: Literal) -> pc.Expression:
        if left.value is None or right.value is None:
            return _NULL_BOOL
        try:
            folded = pc.call_function(
                _FUNCTION_NAMES[op], [pa.scalar(left.value), pa.scalar(right.value)]
            )
        except pa.ArrowException:
            raise ExpressionError(
                f"{left.describe()} cannot be compared with {right.describe()}{_at(left.pos)}",
                left.pos + 1 if left.pos >= 0 else None,
            ) from None
        return _scalar_expression(folded)

    def in_list(self, operand: Operand, values: tuple[Literal, ...]) -> pc.Expression:
        has_null = any(v.value is None for v in values)
        members = [v for v in values if v.value is not None]
        found: pc.Expression | None = None
        if isinstance(operand, Column) and members:
            target = resolve_column(operand, self.schema)
            scalars = [coerce_literal(v, target) for v in members]
            if target.category == "null":
                return _NULL_BOOL
            # Not for floats: is_in hashes values, so -0.0 would miss 0.0 (equal in SQL);
            # the chain of ``=`` below compares them as ``=`` does.
            if target.category != "floating" and all(s.type == target.value_type for s in scalars):
                value_set = pa.array([s.as_py() for s in scalars], type=target.value_type)
                # is_in answers false for a null input; SQL wants null there.
                found = pc.if_else(
                    pc.is_null(target.expression),
                    _NULL_BOOL,
                    pc.is_in(target.expression, value_set=value_set, skip_nulls=True),
                )
        if found is None and members:
            found = reduce(pc.or_kleene, (self.compare("=", operand, v) for v in members))
        if found is None:
            return _NULL_BOOL
        return pc.or_kleene(found, _NULL_BOOL) if has_null else found

    def is_null(self, operand: Operand, negated: bool) -> pc.Expression:
        if isinstance(operand, Literal):
            return _scalar_expression(pa.scalar((operand.value is None) != negated))
        target = resolve_column(operand, self.schema)
        return pc.is_valid(target.expression) if negated else pc.is_null(target.expression)

    def like(self, operand: Operand, pattern: str) -> pc.Expression:
        if isinstance(operand, Literal):
            if operand.value is None:
                return _NULL_BOOL
            if not isinstance(operand.value, str):
                raise ExpressionError(
                    f"LIKE needs a string, not {operand.describe()}{_at(operand.pos)}",
                    operand.pos + 1 if operand.pos >= 0 else None,
                )
            matched = pc.match_like(pa.scalar(operand.value), pattern=pattern)
            return _scalar_expression(matched)
        target = resolve_column(operand, self.schema)
        if target.category == "null":
            return _NULL_BOOL
        if target.category not in ("string", "binary"):
            raise ExpressionError(
                f"LIKE needs a string column, but {target.describe()} is not one{_at(operand.pos)}",
                operand.pos + 1 if operand.pos >= 0 else None,
            )
        return pc.match_like(target.expression, pattern=pattern)


def _project(table: pa.Table, expression: pc.Expression) -> pa.Table:
    # Deferred: pyarrow.acero imports pyarrow.dataset and with it pandas (~0.25 s), which
    # every process that merely parses a filter (the ``lake`` command) would pay.
    import pyarrow.acero as acero

    source = acero.Declaration("table_source", acero.TableSourceNodeOptions(table))
    project = acero.Declaration("project", acero.ProjectNodeOptions([expression]))
    return acero.Declaration.from_sequence([source, project]).to_table()


def to_arrow_expression(expr: Expr, schema: pa.Schema) -> pc.Expression:
    """A filter expression selecting exactly the rows of ``schema`` where ``expr`` is TRUE.

    Raises :class:`ExpressionError` for an unknown column or a literal that does not suit its
    column's type (the message names the column and both types).
    """
    expression = _Translator(schema).translate(expr)
    try:
        result = _project(schema.empty_table(), expression)
    except pa.ArrowException as error:
        raise ExpressionError(f"cannot evaluate {expr}: {error}") from None
    if not pa.types.is_boolean(result.schema.field(0).type):
        raise ExpressionError(f"not a boolean predicate: {expr}")
    return expression
