"""Text → AST for ``--where`` predicates: a tokenizer and a recursive-descent parser.

Grammar (keywords are case-insensitive; ``OR`` binds loosest, comparisons tightest)::

    predicate  := or_expr EOF
    or_expr    := and_expr ("OR" and_expr)*
    and_expr   := not_expr ("AND" not_expr)*
    not_expr   := "NOT" not_expr | primary
    primary    := "(" or_expr ")" | operand [tail]
    tail       := cmp_op operand
                | ["NOT"] "IN" "(" literal ("," literal)* ")"
                | ["NOT"] "BETWEEN" operand "AND" operand
                | "IS" ["NOT"] "NULL"
                | ["NOT"] "LIKE" string
    operand    := column | literal
    column     := name ("." name)*   -- name: [A-Za-z_][A-Za-z0-9_]*, or any text in double
                                        quotes with "" for a quote; a dotted path is a struct field
    literal    := ["-" | "+"] number | string | TRUE | FALSE | NULL
                | TIMESTAMP string | DATE string
    cmp_op     := "=" | "<>" | "!=" | "<" | "<=" | ">" | ">="

Invariants of the result:

* ``!=`` becomes ``<>``; ``literal op column`` becomes ``column op' literal``.
* A bare operand used as a predicate (``flag``) becomes ``flag = TRUE``, which has the same
  three-valued meaning.
* Every :class:`ExpressionError` names what was expected and the 1-based position of the
  offending character (the end of the text counts as one past its last character).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Literal as TypingLiteral

from lake_core.expr.ast import (
    RESERVED_WORDS,
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
    flip_op,
)

__all__ = ["parse_predicate", "parse_timestamp", "parse_date"]

TokenKind = TypingLiteral[
    "name", "qname", "number", "string", "op", "(", ")", ",", ".", "-", "+", "eof"
]


@dataclass(frozen=True)
class Token:
    kind: TokenKind
    text: str  # the source text, or the decoded value for strings and quoted names
    pos: int  # 0-based offset into the predicate text

    @property
    def word(self) -> str | None:
        """The upper-cased keyword this token could be, if it is a bare name."""
        return self.text.upper() if self.kind == "name" else None

    def describe(self) -> str:
        if self.kind == "eof":
            return "end of input"
        if self.kind == "string":
            return "'" + self.text.replace("'", "''") + "'"
        if self.kind == "qname":
            return '"' + self.text.replace('"', '""') + '"'
        if self.kind == "name" and self.text.upper() in RESERVED_WORDS:
            return f"keyword {self.text.upper()}"
        return f"'{self.text}'"


_NUMBER = re.compile(r"(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_OPERATORS = ("<=", ">=", "<>", "!=", "=", "<", ">")
_PUNCTUATION: dict[str, TokenKind] = {"(": "(", ")": ")", ",": ",", ".": ".", "-": "-", "+": "+"}
_COMPARE_OPS: dict[str, CompareOp] = {
    "=": "=",
    "<>": "<>",
    "!=": "<>",
    "<": "<",
    "<=": "<=",
    ">": ">",
    ">=": ">=",
}


def _at(pos: int) -> str:
    return f"at position {pos + 1}"


def _read_quoted(text: str, start: int, quote: str, what: str) -> tuple[str, int]:
    """Decode a ``quote``-delimited run starting at ``start``; a doubled quote is one quote."""
    parts: list[str] = []
    i = start + 1
    while True:
        end = text.find(quote, i)
        if end < 0:
            raise ExpressionError(f"unterminated {what} starting {_at(start)}", start + 1)
        parts.append(text[i:end])
        if text.startswith(quote, end + 1):
            parts.append(quote)
            i = end + 2
        else:
            return "".join(parts), end + 1


def tokenize(text: str) -> list[Token]:
    """Split ``text`` into tokens, ending with one ``eof`` token."""
    tokens: list[Token] = []
    i, n = 0, len(text)
    while i < n:
        ch = text[i]
        if ch.isspace():
            i += 1
            continue
        if ch == "'":
            value, end = _read_quoted(text, i, "'", "string")
            tokens.append(Token("string", value, i))
            i = end
            continue
        if ch == '"':
            value, end = _read_quoted(text, i, '"', "quoted name")
            if not value:
                raise ExpressionError(f"empty quoted name {_at(i)}", i + 1)
            tokens.append(Token("qname", value, i))
            i = end
            continue
        number = _NUMBER.match(text, i)
        if number:
            tokens.append(Token("number", number.group(), i))
            i = number.end()
            continue
        name = _NAME.match(text, i)
        if name:
            tokens.append(Token("name", name.group(), i))
            i = name.end()
            continue
        op = next((o for o in _OPERATORS if text.startswith(o, i)), None)
        if op is not None:
            tokens.append(Token("op", op, i))
            i += len(op)
            continue
        if ch in _PUNCTUATION:
            tokens.append(Token(_PUNCTUATION[ch], ch, i))
            i += 1
            continue
        raise ExpressionError(f"unexpected character {ch!r} {_at(i)}", i + 1)
    tokens.append(Token("eof", "", n))
    return tokens


def parse_timestamp(text: str) -> datetime | None:
    """An ISO 8601 date or date-time as an aware UTC ``datetime`` (naive means UTC), or None."""
    try:
        parsed = datetime.fromisoformat(text.strip())
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def parse_date(text: str) -> date | None:
    """An ISO 8601 calendar date (``2026-01-05``), or None."""
    try:
        return date.fromisoformat(text.strip())
    except ValueError:
        return None


#: How deep '(' and NOT may nest in one predicate.
MAX_NESTING = 100


class _Parser:
    """One pass over the token list; each ``_parse_*`` method owns one grammar rule."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.tokens = tokenize(text)
        self.index = 0
        self.depth = 0

    # -- token helpers -------------------------------------------------------------------

    @property
    def current(self) -> Token:
        return self.tokens[self.index]

    def kind(self) -> TokenKind:
        """The current token's kind (a call, so type checkers do not pin it across advances)."""
        return self.tokens[self.index].kind

    def peek(self, ahead: int = 1) -> Token:
        return self.tokens[min(self.index + ahead, len(self.tokens) - 1)]

    def advance(self) -> Token:
        token = self.current
        if token.kind != "eof":
            self.index += 1
        return token

    def at_word(self, *words: str) -> bool:
        return self.current.word in words

    def fail(self, expected: str, token: Token | None = None, hint: str = "") -> ExpressionError:
        token = token or self.current
        if not hint and token.kind == "name" and token.text.upper() in RESERVED_WORDS:
            hint = f'write "{token.text}" to use it as a column name'
        suffix = f" ({hint})" if hint else ""
        return ExpressionError(
            f"expected {expected} {_at(token.pos)}, found {token.describe()}{suffix}",
            token.pos + 1,
        )

    def expect_word(self, word: str, expected: str) -> Token:
        if not self.at_word(word):
            raise self.fail(expected)
        return self.advance()

    # -- grammar -------------------------------------------------------------------------

    def parse(self) -> Expr:
        if self.kind() == "eof":
            raise self.fail("a predicate")
        expr = self._parse_or()
        if self.kind() != "eof":
            hint = "it closes no '('" if self.kind() == ")" else ""
            raise self.fail("AND, OR or end of input", hint=hint)
        return expr

    def _parse_or(self) -> Expr:
        expr = self._parse_and()
        while self.at_word("OR"):
            self.advance()
            expr = Or(expr, self._parse_and())
        return expr

    def _parse_and(self) -> Expr:
        expr = self._parse_not()
        while self.at_word("AND"):
            self.advance()
            expr = And(expr, self._parse_not())
        return expr

    def _nest(self) -> None:
        """Count one level of '(' or NOT; refuse to go deeper than MAX_NESTING (the parser and
        every walk over the tree recurse once per level)."""
        self.depth += 1
        if self.depth > MAX_NESTING:
            raise ExpressionError(
                f"expression nested deeper than {MAX_NESTING} levels {_at(self.current.pos)}",
                self.current.pos + 1,
            )

    def _parse_not(self) -> Expr:
        if self.at_word("NOT"):
            self.advance()
            self._nest()
            expr: Expr = Not(self._parse_not())
            self.depth -= 1
            return expr
        return self._parse_primary()

    def _parse_primary(self) -> Expr:
        if self.kind() == "(":
            opening = self.advance()
            self._nest()
            expr = self._parse_or()
            self.depth -= 1
            if self.kind() != ")":
                raise self.fail("')'", hint=f"to close the '(' {_at(opening.pos)}")
            self.advance()
            return expr
        left = self._parse_operand("a predicate")
        return self._parse_tail(left)

    def _parse_tail(self, left: Operand) -> Expr:
        token = self.current
        if token.kind == "op":
            self.advance()
            op = _COMPARE_OPS[token.text]
            right = self._parse_operand(f"a value after '{token.text}'")
            if isinstance(left, Literal) and isinstance(right, Column):
                return Comparison(flip_op(op), right, left)
            return Comparison(op, left, right)
        negated = False
        if self.at_word("NOT") and self.peek().word in ("IN", "BETWEEN", "LIKE"):
            self.advance()
            negated = True
        if self.at_word("IN"):
            self.advance()
            return InList(left, self._parse_in_list(), negated)
        if self.at_word("BETWEEN"):
            word = self.advance()
            low = self._parse_operand(f"a value after {word.text.upper()}")
            self.expect_word("AND", "AND between the bounds of BETWEEN")
            high = self._parse_operand("a value after BETWEEN … AND")
            return Between(left, low, high, negated)
        if self.at_word("LIKE"):
            self.advance()
            if self.kind() != "string":
                raise self.fail("a quoted pattern after LIKE")
            return Like(left, self.advance().text, negated)
        if self.at_word("IS"):
            self.advance()
            is_not = self.at_word("NOT")
            if is_not:
                self.advance()
            self.expect_word("NULL", "NULL after IS NOT" if is_not else "NULL or NOT NULL after IS")
            return IsNull(left, is_not)
        if self.at_word("NOT"):
            raise self.fail("IN, BETWEEN or LIKE after NOT", self.peek())
        if token.kind in ("eof", ")") or token.word in ("AND", "OR"):
            # A bare operand is a boolean test; `flag = TRUE` has exactly its meaning.
            return Comparison("=", left, Literal(True, pos=token.pos))
        what = f"column {left}" if isinstance(left, Column) else left.describe()
        raise self.fail(f"an operator after {what}")

    def _parse_in_list(self) -> tuple[Literal, ...]:
        if self.kind() != "(":
            raise self.fail("'(' after IN")
        self.advance()
        values = [self._parse_literal("a literal value in the IN list")]
        while self.kind() == ",":
            self.advance()
            values.append(self._parse_literal("a literal value in the IN list"))
        if self.kind() != ")":
            raise self.fail("',' or ')' in the IN list")
        self.advance()
        return tuple(values)

    def _parse_operand(self, expected: str) -> Operand:
        token = self.current
        if token.kind == "qname" or (
            token.kind == "name"
            and token.text.upper() not in RESERVED_WORDS
            and not self._starts_typed_literal()
        ):
            return self._parse_column()
        return self._parse_literal(expected)

    def _starts_typed_literal(self) -> bool:
        return self.current.word in ("TIMESTAMP", "DATE") and self.peek().kind == "string"

    def _parse_column(self) -> Column:
        first = self.advance()
        path = [first.text]
        while self.kind() == ".":
            self.advance()
            if self.kind() not in ("name", "qname"):
                raise self.fail("a field name after '.'")
            path.append(self.advance().text)
        return Column(tuple(path), pos=first.pos)

    def _parse_literal(self, expected: str) -> Literal:
        token = self.current
        if token.kind in ("-", "+"):
            sign = self.advance()
            if self.kind() != "number":
                raise self.fail(f"a number after '{sign.text}'")
            number = self._number(self.advance())
            return Literal(-number if sign.kind == "-" else number, pos=sign.pos)
        if token.kind == "number":
            return Literal(self._number(self.advance()), pos=token.pos)
        if token.kind == "string":
            return Literal(self.advance().text, pos=token.pos)
        word = token.word
        if word in ("TRUE", "FALSE", "NULL"):
            self.advance()
            return Literal(None if word == "NULL" else word == "TRUE", pos=token.pos)
        if self._starts_typed_literal():
            self.advance()
            body = self.advance()
            typed: datetime | date | None
            if word == "TIMESTAMP":
                typed = parse_timestamp(body.text)
                example = "'2026-01-05 00:00:00'"
            else:
                typed = parse_date(body.text)
                example = "'2026-01-05'"
            if typed is None:
                raise ExpressionError(
                    f"expected an ISO 8601 {word} like {example} {_at(body.pos)}, "
                    f"found {body.describe()}",
                    body.pos + 1,
                )
            return Literal(typed, pos=token.pos)
        raise self.fail(expected)

    @staticmethod
    def _number(token: Token) -> int | float:
        if not any(c in token.text for c in ".eE"):
            return int(token.text)
        value = float(token.text)
        if not math.isfinite(value):
            raise ExpressionError(f"number out of range {_at(token.pos)}", token.pos + 1)
        return value


def parse_predicate(text: str) -> Expr:
    """Parse a SQL boolean expression; raise :class:`ExpressionError` if it is malformed.

    >>> str(parse_predicate("a = 1 OR b = 2 AND c = 3"))
    '(a = 1 OR (b = 2 AND c = 3))'
    """
    if not isinstance(text, str):
        raise ExpressionError(f"a predicate must be text, not {type(text).__name__}")
    return _Parser(text).parse()
