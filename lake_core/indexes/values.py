"""Which values a predicate pins a field to: the question an index answers.

:func:`pinned_values` returns the literals ``v1 … vn`` such that every row where the predicate
is TRUE has the field equal to one of them, or None when the predicate does not pin the field
(a range, a negation, an OR with a branch on another field). Sound by construction:

* ``f = v`` pins ``{v}``; ``f IN (v1, …)`` pins those (a NULL in the list never matches);
* ``a AND b`` pins what either side pins (the smaller set: both must hold);
* ``a OR b`` pins the union, only when every branch pins the field;
* everything else (NOT, ranges, LIKE, IS NULL, a comparison with NULL or NaN) pins nothing.
"""

from __future__ import annotations

import math

from lake_core.expr.ast import And, Column, Comparison, Expr, InList, Literal, Or, chain_terms


def _usable(value: Literal) -> bool:
    v = value.value
    return v is not None and not (isinstance(v, float) and math.isnan(v))


def pinned_values(expr: Expr, field: str) -> list[Literal] | None:
    """The literals ``expr`` pins top-level ``field`` to (deduplicated, in order; possibly
    empty: then no row can match), or None; see the module docstring."""
    if isinstance(expr, Comparison):
        if expr.op != "=":
            return None
        for col, lit in ((expr.left, expr.right), (expr.right, expr.left)):
            if isinstance(col, Column) and isinstance(lit, Literal) and col.path == (field,):
                return [lit] if _usable(lit) else None
        return None
    if isinstance(expr, InList):
        operand = expr.operand
        if expr.negated or not isinstance(operand, Column) or operand.path != (field,):
            return None
        if any(isinstance(v.value, float) and math.isnan(v.value) for v in expr.values):
            return None
        return list(dict.fromkeys(v for v in expr.values if v.value is not None))
    if isinstance(expr, And):
        found = [p for p in (pinned_values(t, field) for t in chain_terms(expr)) if p is not None]
        return min(found, key=len) if found else None
    if isinstance(expr, Or):
        union: dict[Literal, None] = {}
        for term in chain_terms(expr):
            pinned = pinned_values(term, field)
            if pinned is None:
                return None
            union.update(dict.fromkeys(pinned))
        return list(union)
    return None
