"""Pruning: could any row described by column statistics satisfy a predicate?

:func:`may_match` is *sound*: it answers False only when no row with those statistics can make
the predicate TRUE under the same semantics as :func:`lake_core.expr.arrow.to_arrow_expression`.
Whenever it cannot prove that — unknown statistics, a column compared with a column, values of
types that do not order against each other, a pattern without a literal prefix — it answers
True. Proofs rest on these facts:

* a null (or a NULL literal) makes every comparison, IN, BETWEEN and LIKE null, never TRUE;
* ``NOT`` is pushed down by De Morgan, which is exact in three-valued logic, and a negated
  comparison becomes the opposite comparison — except on floating columns, where NaN (absent
  from statistics, and unequal and unordered to everything) makes ``NOT (x < 1)`` differ from
  ``x >= 1``; negations and ``<>`` on floating columns therefore prune nothing;
* ``min``/``max`` bound every non-null value; strings order by code point, which is the order of
  their UTF-8 bytes, so string statistics from Parquet agree with Python's comparisons.

:func:`key_range` derives the interval a conjunction confines one column to; it follows the
same rules and, like pruning, errs towards a wider interval, never a narrower one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lake_core.expr.arrow import coerce_literal, resolve_column
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
    negate_op,
)

__all__ = ["ColumnStats", "Interval", "key_range", "may_match"]

#: ``(lo, lo_inclusive, hi, hi_inclusive)``; a None bound is unbounded (its flag is False).
Interval = tuple[Any | None, bool, Any | None, bool]


@dataclass(frozen=True)
class ColumnStats:
    """What is known of one column in one object (or row group).

    ``min``/``max`` bound every non-null value and must not be truncated; None means unknown
    (or that every value is null). Values are plain Python values of the column's domain:
    ``int``, ``float``, ``str``, ``bytes``, ``bool``, ``datetime`` (tz-aware UTC for a UTC
    column), ``date``, ``Decimal``. ``null_count`` None means unknown. A column that an object
    lacks altogether is all-null: ``ColumnStats(None, None, row_count, row_count)``.
    """

    min: Any
    max: Any
    null_count: int | None
    row_count: int

    @property
    def has_values(self) -> bool:
        """False when the statistics prove that there is no non-null value."""
        if self.row_count <= 0:
            return False
        return self.null_count is None or self.null_count < self.row_count


def _proves(claim: Callable[[], bool]) -> bool:
    """Whether ``claim`` holds; a claim that cannot be evaluated proves nothing."""
    try:
        return bool(claim())
    except Exception:  # incomparable types, odd values: never prune on them
        return False


def _like_prefix(pattern: str) -> str:
    """The literal text every match of the LIKE ``pattern`` starts with."""
    prefix: list[str] = []
    chars = iter(pattern)
    for ch in chars:
        if ch in "%_":
            break
        if ch == "\\":
            escaped = next(chars, None)
            if escaped is None:
                break
            prefix.append(escaped)
        else:
            prefix.append(ch)
    return "".join(prefix)


def _flipped(comparison: Comparison) -> tuple[CompareOp, Operand, Operand]:
    if isinstance(comparison.left, Literal) and isinstance(comparison.right, Column):
        return flip_op(comparison.op), comparison.right, comparison.left
    return comparison.op, comparison.left, comparison.right


class _Pruner:
    """Decides ``may_match`` for one set of statistics; ``negated`` is the polarity so far."""

    def __init__(
        self,
        stats: Mapping[str, ColumnStats],
        schema: pa.Schema,
        memo: dict[tuple[int, int], tuple[Any, Any]] | None = None,
    ) -> None:
        self.stats = stats
        self.schema = schema
        self.memo = memo if memo is not None else {}

    def may(self, expr: Expr, negated: bool) -> bool:
        if isinstance(expr, And | Or):
            # Evaluate every term, so that a bad column raises however the terms fall.
            answers = [self.may(term, negated) for term in chain_terms(expr)]
            all_needed = isinstance(expr, And) != negated
            return all(answers) if all_needed else any(answers)
        if isinstance(expr, Not):
            return self.may(expr.operand, not negated)
        if isinstance(expr, Comparison):
            op, left, right = _flipped(expr)
            return self.compare(op, left, right, negated)
        if isinstance(expr, Between):
            # x BETWEEN a AND b  is  x >= a AND x <= b.
            answers = [
                self.compare(">=", expr.operand, expr.low, negated != expr.negated),
                self.compare("<=", expr.operand, expr.high, negated != expr.negated),
            ]
            return any(answers) if negated != expr.negated else all(answers)
        if isinstance(expr, InList):
            # x IN (a, b)  is  x = a OR x = b.
            answers = [
                self.compare("=", expr.operand, value, negated != expr.negated)
                for value in expr.values
            ]
            return all(answers) if negated != expr.negated else any(answers)
        if isinstance(expr, IsNull):
            return self.is_null(expr.operand, negated != expr.negated)
        if isinstance(expr, Like):
            return self.like(expr.operand, expr.pattern, negated != expr.negated)
        raise TypeError(f"not a predicate node: {expr!r}")

    def compare(self, op: CompareOp, left: Operand, right: Operand, negated: bool) -> bool:
        if isinstance(left, Literal) and isinstance(right, Column):
            op, left, right = flip_op(op), right, left
        if not (isinstance(left, Column) and isinstance(right, Literal)):
            for operand in (left, right):
                if isinstance(operand, Column):
                    resolve_column(operand, self.schema)
            return True
        resolved = self.memo.get((id(left), id(right)))
        if resolved is None:
            target = resolve_column(left, self.schema)
            resolved = self.memo[id(left), id(right)] = (
                target.category,
                coerce_literal(right, target).as_py(),
            )
        category, value = resolved
        if right.value is None or category == "null":
            return False
        stats = self.stats.get(left.name)
        if stats is None:
            return True
        if not stats.has_values:
            return False
        if category == "floating" and (negated or op == "<>"):
            return True
        return not _excluded(negate_op(op) if negated else op, value, stats.min, stats.max)

    def is_null(self, operand: Operand, want_not_null: bool) -> bool:
        if isinstance(operand, Literal):
            return True
        resolve_column(operand, self.schema)
        stats = self.stats.get(operand.name)
        if stats is None or stats.null_count is None:
            return True
        if want_not_null:
            return stats.has_values
        return stats.row_count > 0 and stats.null_count > 0

    def like(self, operand: Operand, pattern: str, negated: bool) -> bool:
        if isinstance(operand, Literal):
            return True
        target = resolve_column(operand, self.schema)
        if target.category not in ("string", "binary", "null"):
            where = f" at position {operand.pos + 1}" if operand.pos >= 0 else ""
            raise ExpressionError(
                f"LIKE needs a string column, but {target.describe()} is not one{where}",
                operand.pos + 1 if operand.pos >= 0 else None,
            )
        stats = self.stats.get(operand.name)
        if target.category == "null" or (stats is not None and not stats.has_values):
            return False
        if stats is None:
            return True
        lo, hi = stats.min, stats.max
        if negated:
            # Every value is lo; NOT LIKE fails for all of them if lo matches.
            return not _proves(
                lambda: (
                    lo is not None
                    and lo == hi
                    and pc.match_like(pa.scalar(lo), pattern=pattern).as_py() is True
                )
            )
        text = _like_prefix(pattern)
        if not text:
            return True
        prefix: str | bytes = text.encode() if target.category == "binary" else text
        # Values starting with the prefix form one run in sort order, right after the prefix.
        return not (
            _proves(lambda: hi is not None and hi < prefix)
            or _proves(lambda: lo is not None and lo > prefix and not lo.startswith(prefix))
        )


def _excluded(op: CompareOp, value: Any, lo: Any, hi: Any) -> bool:
    """Whether no value in ``[lo, hi]`` (None = unknown bound) satisfies ``x op value``."""
    if op == "=":
        return _proves(lambda: lo is not None and value < lo) or _proves(
            lambda: hi is not None and value > hi
        )
    if op == "<>":
        return _proves(lambda: lo is not None and hi is not None and lo == value == hi)
    if op == "<":
        return _proves(lambda: lo is not None and lo >= value)
    if op == "<=":
        return _proves(lambda: lo is not None and lo > value)
    if op == ">":
        return _proves(lambda: hi is not None and hi <= value)
    return _proves(lambda: hi is not None and hi < value)


def may_match(
    expr: Expr,
    stats: Mapping[str, ColumnStats],
    schema: pa.Schema,
    memo: dict[tuple[int, int], tuple[Any, Any]] | None = None,
) -> bool:
    """False only if no row described by ``stats`` can make ``expr`` TRUE.

    ``stats`` maps column names (dotted for struct fields) to :class:`ColumnStats`; a column
    without an entry is unknown. ``schema`` is the pool schema that gives literals their types,
    as in :func:`~lake_core.expr.arrow.to_arrow_expression`; an unknown column or a literal
    that does not suit its column raises :class:`ExpressionError` here too.

    ``memo``: a dict kept by a caller that tests the same ``expr`` and ``schema`` against many
    objects' stats: each comparison's column and literal are resolved once, not per object
    (most of the planning time over thousands of objects). It holds the ids of ``expr``'s
    nodes, so it must not outlive ``expr`` or be shared with another expression or schema.
    """
    return _Pruner(stats, schema, memo).may(expr, negated=False)


# -- key ranges -------------------------------------------------------------------------


def _tighter_lower(a: Interval, b: Interval) -> tuple[Any, bool]:
    if a[0] is None:
        return b[0], b[1]
    if b[0] is None:
        return a[0], a[1]
    if a[0] == b[0]:
        return a[0], a[1] and b[1]
    return (a[0], a[1]) if a[0] > b[0] else (b[0], b[1])


def _tighter_upper(a: Interval, b: Interval) -> tuple[Any, bool]:
    if a[2] is None:
        return b[2], b[3]
    if b[2] is None:
        return a[2], a[3]
    if a[2] == b[2]:
        return a[2], a[3] and b[3]
    return (a[2], a[3]) if a[2] < b[2] else (b[2], b[3])


def _intersect(a: Interval | None, b: Interval | None) -> Interval | None:
    if a is None or b is None:
        return a if b is None else b
    try:
        lo, lo_inclusive = _tighter_lower(a, b)
        hi, hi_inclusive = _tighter_upper(a, b)
    except TypeError:
        return a  # bounds of different types: keep one, a wider but still sound answer
    return lo, lo_inclusive, hi, hi_inclusive


def _hull(a: Interval | None, b: Interval | None) -> Interval | None:
    if a is None or b is None:
        return None
    try:
        if a[0] is None or b[0] is None:
            lo, lo_inclusive = None, False
        elif a[0] == b[0]:
            lo, lo_inclusive = a[0], a[1] or b[1]
        else:
            lo, lo_inclusive = (a[0], a[1]) if a[0] < b[0] else (b[0], b[1])
        if a[2] is None or b[2] is None:
            hi, hi_inclusive = None, False
        elif a[2] == b[2]:
            hi, hi_inclusive = a[2], a[3] or b[3]
        else:
            hi, hi_inclusive = (a[2], a[3]) if a[2] > b[2] else (b[2], b[3])
    except TypeError:
        return None
    if lo is None and hi is None:
        return None
    return lo, lo_inclusive, hi, hi_inclusive


def _prefix_upper(prefix: str | bytes) -> str | bytes | None:
    """The least value above every value that starts with ``prefix``, if there is one."""
    if isinstance(prefix, bytes):
        trimmed = prefix.rstrip(b"\xff")
        return trimmed[:-1] + bytes([trimmed[-1] + 1]) if trimmed else None
    trimmed_text = prefix.rstrip(chr(0x10FFFF))
    if not trimmed_text:
        return None
    return trimmed_text[:-1] + chr(ord(trimmed_text[-1]) + 1)


class _Ranger:
    """Derives ``key_range`` for one column; ``negated`` is the polarity so far."""

    def __init__(self, column: str, schema: pa.Schema | None) -> None:
        self.column = column
        self.schema = schema

    def range(self, expr: Expr, negated: bool) -> Interval | None:
        if isinstance(expr, And | Or):
            ranges = [self.range(term, negated) for term in chain_terms(expr)]
            combine = _intersect if isinstance(expr, And) != negated else _hull
            result = ranges[0]
            for item in ranges[1:]:
                result = combine(result, item)
            return result
        if isinstance(expr, Not):
            return self.range(expr.operand, not negated)
        if isinstance(expr, Comparison):
            op, left, right = _flipped(expr)
            return self.compare(op, left, right, negated)
        if isinstance(expr, Between):
            low = self.compare(">=", expr.operand, expr.low, negated != expr.negated)
            high = self.compare("<=", expr.operand, expr.high, negated != expr.negated)
            return _intersect(low, high) if negated == expr.negated else _hull(low, high)
        if isinstance(expr, InList):
            if negated != expr.negated:
                return None
            hull = self.compare("=", expr.operand, expr.values[0], False)
            for value in expr.values[1:]:
                hull = _hull(hull, self.compare("=", expr.operand, value, False))
            return hull
        if isinstance(expr, Like) and negated == expr.negated:
            return self.like(expr.operand, expr.pattern)
        return None

    def value(self, column: Column, literal: Literal) -> tuple[Any, bool]:
        """The literal in the column's domain, and whether the column may hold NaN."""
        if self.schema is None:
            return literal.value, isinstance(literal.value, int | float)
        target = resolve_column(column, self.schema)
        value = coerce_literal(literal, target).as_py()
        return value, target.category == "floating"

    def compare(
        self, op: CompareOp, left: Operand, right: Operand, negated: bool
    ) -> Interval | None:
        if not (isinstance(left, Column) and isinstance(right, Literal)):
            return None
        if left.name != self.column or right.value is None:
            return None
        value, may_be_nan = self.value(left, right)
        if negated and may_be_nan:
            return None
        op = negate_op(op) if negated else op
        bounds: dict[CompareOp, Interval] = {
            "=": (value, True, value, True),
            "<": (None, False, value, False),
            "<=": (None, False, value, True),
            ">": (value, False, None, False),
            ">=": (value, True, None, False),
        }
        return bounds.get(op)

    def like(self, operand: Operand, pattern: str) -> Interval | None:
        if not isinstance(operand, Column) or operand.name != self.column:
            return None
        text = _like_prefix(pattern)
        if not text:
            return None
        prefix: str | bytes = text
        if self.schema is not None and resolve_column(operand, self.schema).category == "binary":
            prefix = text.encode()
        return prefix, True, _prefix_upper(prefix), False


def key_range(expr: Expr, column: str, schema: pa.Schema | None = None) -> Interval | None:
    """The tightest interval ``(lo, lo_inclusive, hi, hi_inclusive)`` that holds every value
    of ``column`` (its dotted name) on a row where ``expr`` is TRUE; None if ``expr`` does not
    bound it. Rows where it is TRUE never have a null in ``column`` when an interval is given.

    Without ``schema`` the bounds are the literals as written (a plain string stays a string);
    with it they are coerced to the column's type as for :func:`may_match`. An interval may be
    empty (``x > 5 AND x < 1``): then no row matches.
    """
    return _Ranger(column, schema).range(expr, negated=False)
