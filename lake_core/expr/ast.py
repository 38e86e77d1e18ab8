"""The node types of a ``--where`` predicate, and the error every bad predicate raises.

Invariants kept by every node:

* Nodes are immutable (frozen dataclasses) and compare structurally; source positions ride
  along for error messages but take no part in equality or hashing.
* ``str(node)`` is SQL text; for every node the parser produces, parsing it again gives an equal
  node (binary connectives are always parenthesised, names are quoted when they must be).
* A :class:`Literal` holds a plain Python value of one of :data:`LiteralValue`'s types; a
  ``TIMESTAMP`` literal is always a timezone-aware UTC ``datetime``. Its ``kind`` is derived from
  the value, so ``1``, ``1.0`` and ``TRUE`` are three different literals.
* The meaning is SQL's three-valued logic: a predicate selects a row only when it is TRUE.
"""

from __future__ import annotations

import re
import typing
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime

from lake_core.errors import UsageError

__all__ = [
    "And",
    "Between",
    "Column",
    "CompareOp",
    "Comparison",
    "Expr",
    "ExpressionError",
    "InList",
    "IsNull",
    "Like",
    "Literal",
    "LiteralKind",
    "LiteralValue",
    "Not",
    "Operand",
    "Or",
    "RESERVED_WORDS",
    "chain_terms",
    "columns_of",
    "flip_op",
    "negate_op",
]


class ExpressionError(UsageError):
    """A predicate that cannot be parsed or does not fit the schema.

    ``str(err)`` is the one-line message, which names what was expected and, when the fault
    has a place in the text, the 1-based character ``position`` there.
    """

    def __init__(self, message: str, position: int | None = None) -> None:
        super().__init__(message, position)
        self.message = message
        self.position = position

    def __str__(self) -> str:
        return self.message


CompareOp = typing.Literal["=", "<>", "<", "<=", ">", ">="]
LiteralKind = typing.Literal["null", "boolean", "integer", "float", "string", "timestamp", "date"]
LiteralValue = None | bool | int | float | str | datetime | date

#: Words that cannot name a column unless double-quoted. TIMESTAMP and DATE are not here: they
#: begin a typed literal only when a quoted string follows them.
RESERVED_WORDS = frozenset(
    {"AND", "OR", "NOT", "IN", "BETWEEN", "IS", "NULL", "LIKE", "TRUE", "FALSE"}
)

_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_FLIPPED: dict[CompareOp, CompareOp] = {
    "=": "=",
    "<>": "<>",
    "<": ">",
    "<=": ">=",
    ">": "<",
    ">=": "<=",
}
_NEGATED: dict[CompareOp, CompareOp] = {
    "=": "<>",
    "<>": "=",
    "<": ">=",
    "<=": ">",
    ">": "<=",
    ">=": "<",
}


def flip_op(op: CompareOp) -> CompareOp:
    """The operator that keeps ``a op b`` true when the operands swap sides."""
    return _FLIPPED[op]


def negate_op(op: CompareOp) -> CompareOp:
    """The operator of ``NOT (a op b)`` for totally ordered values (not for NaN)."""
    return _NEGATED[op]


def _quote_name(name: str) -> str:
    if _PLAIN_NAME.match(name) and name.upper() not in RESERVED_WORDS:
        return name
    return '"' + name.replace('"', '""') + '"'


def _quote_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@dataclass(frozen=True)
class Column:
    """A column reference; ``path`` has more than one part for a field inside a struct."""

    path: tuple[str, ...]
    pos: int = field(default=-1, compare=False, repr=False)

    def __post_init__(self) -> None:
        if not self.path or any(not part for part in self.path):
            raise ValueError(f"column path must be non-empty names: {self.path!r}")

    @property
    def name(self) -> str:
        """The dotted display name (also the key under which statistics are looked up)."""
        return ".".join(self.path)

    @property
    def root(self) -> str:
        """The top-level column that holds this reference."""
        return self.path[0]

    def __str__(self) -> str:
        return ".".join(_quote_name(part) for part in self.path)


def _kind_of(value: LiteralValue) -> LiteralKind:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    if isinstance(value, str):
        return "string"
    if isinstance(value, datetime):
        return "timestamp"
    if isinstance(value, date):
        return "date"
    raise TypeError(f"unsupported literal value {value!r}")


@dataclass(frozen=True)
class Literal:
    """A constant. ``kind`` is derived from ``value`` and takes part in equality."""

    value: LiteralValue
    pos: int = field(default=-1, compare=False, repr=False)
    kind: LiteralKind = field(init=False)

    def __post_init__(self) -> None:
        value = self.value
        if isinstance(value, datetime):
            if value.tzinfo is None:
                value = value.replace(tzinfo=UTC)
            object.__setattr__(self, "value", value.astimezone(UTC))
        object.__setattr__(self, "kind", _kind_of(self.value))

    def __str__(self) -> str:
        value = self.value
        if value is None:
            return "NULL"
        if isinstance(value, bool):
            return "TRUE" if value else "FALSE"
        if isinstance(value, int | float):
            return repr(value)
        if isinstance(value, str):
            return _quote_string(value)
        if isinstance(value, datetime):
            return f"TIMESTAMP {_quote_string(value.isoformat())}"
        return f"DATE {_quote_string(value.isoformat())}"

    def describe(self) -> str:
        """``string literal 'x'``: how error messages name this literal."""
        return f"{self.kind} literal {self}"


Operand = Column | Literal


@dataclass(frozen=True)
class Comparison:
    """``left op right``; the parser puts a column on the left whenever one side is a column."""

    op: CompareOp
    left: Operand
    right: Operand

    def __str__(self) -> str:
        return f"{self.left} {self.op} {self.right}"


@dataclass(frozen=True)
class InList:
    """``operand [NOT] IN (v1, v2, …)``: at least one value, all literals."""

    operand: Operand
    values: tuple[Literal, ...]
    negated: bool = False

    def __post_init__(self) -> None:
        if not self.values:
            raise ValueError("IN needs at least one value")

    def __str__(self) -> str:
        values = ", ".join(str(v) for v in self.values)
        return f"{self.operand} {'NOT IN' if self.negated else 'IN'} ({values})"


@dataclass(frozen=True)
class Between:
    """``operand [NOT] BETWEEN low AND high``, i.e. ``operand >= low AND operand <= high``."""

    operand: Operand
    low: Operand
    high: Operand
    negated: bool = False

    def __str__(self) -> str:
        word = "NOT BETWEEN" if self.negated else "BETWEEN"
        return f"{self.operand} {word} {self.low} AND {self.high}"


@dataclass(frozen=True)
class IsNull:
    """``operand IS [NOT] NULL``; never NULL itself (NaN is not null)."""

    operand: Operand
    negated: bool = False

    def __str__(self) -> str:
        return f"{self.operand} {'IS NOT NULL' if self.negated else 'IS NULL'}"


@dataclass(frozen=True)
class Like:
    """``operand [NOT] LIKE 'pattern'``: ``%`` any run, ``_`` one character, ``\\`` escapes."""

    operand: Operand
    pattern: str
    negated: bool = False

    def __str__(self) -> str:
        word = "NOT LIKE" if self.negated else "LIKE"
        return f"{self.operand} {word} {_quote_string(self.pattern)}"


@dataclass(frozen=True)
class Not:
    operand: Expr

    def __str__(self) -> str:
        return f"NOT {self.operand}"


@dataclass(frozen=True)
class And:
    left: Expr
    right: Expr

    def __str__(self) -> str:
        return "(" + " AND ".join(str(term) for term in chain_terms(self)) + ")"


@dataclass(frozen=True)
class Or:
    left: Expr
    right: Expr

    def __str__(self) -> str:
        return "(" + " OR ".join(str(term) for term in chain_terms(self)) + ")"


Expr = Comparison | InList | Between | IsNull | Like | Not | And | Or


def chain_terms(expr: And | Or) -> list[Expr]:
    """The operands of the left-nested chain ``((a AND b) AND c)`` → ``[a, b, c]``.

    The parser builds long ``OR`` lists as such chains; walking them with this loop instead of
    recursion keeps thousands of terms within Python's recursion limit.
    """
    connective = type(expr)
    terms: list[Expr] = []
    node: Expr = expr
    while isinstance(node, connective):
        terms.append(node.right)
        node = node.left
    terms.append(node)
    terms.reverse()
    return terms


def nodes(expr: Expr) -> Iterator[Expr | Operand]:
    """Every node of ``expr`` (operators, columns, literals), without recursion: the parser
    accepts chains deep enough to exhaust Python's stack."""
    pending: list[Expr | Operand] = [expr]
    while pending:
        node = pending.pop()
        yield node
        if isinstance(node, And | Or):
            pending.extend((node.left, node.right))
        elif isinstance(node, Not):
            pending.append(node.operand)
        elif isinstance(node, Comparison):
            pending.extend((node.left, node.right))
        elif isinstance(node, Between):
            pending.extend((node.operand, node.low, node.high))
        elif isinstance(node, InList):
            pending.extend((node.operand, *node.values))
        elif isinstance(node, IsNull | Like):
            pending.append(node.operand)


def columns_of(expr: Expr) -> frozenset[str]:
    """The top-level columns ``expr`` reads (``a`` for a reference to the struct field ``a.b``)."""
    return frozenset(n.root for n in nodes(expr) if isinstance(n, Column))
