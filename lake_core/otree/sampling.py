"""Sampling an OTree pool: a fraction of its rows chosen by weight, as a predicate.

``sample(f)`` is the rows with ``W(0) <= _lake_weight < W(f)`` (:func:`weights.sample_range
<lake_core.otree.weights.sample_range>`). It is expressed as that predicate, AND-ed with the
user's ``--where``, so every engine evaluates it on the rows it reads and the result is *by
construction* the brute-force filter over the whole pool: the OTree pruner
(:mod:`lake_core.otree.pruner`) only decides what need not be read. The same fraction always
gives the same rows (a sample is deterministic, as Qbeast's); a larger fraction's sample holds
a smaller one's.
"""

from __future__ import annotations

from lake_core.errors import UsageError
from lake_core.expr import And, Column, Comparison, Expr, Literal
from lake_core.otree.settings import OTreeLayout
from lake_core.otree.weights import WEIGHT_COLUMN, sample_range


def sample_predicate(layout: OTreeLayout | None, fraction: float, pool: str) -> Expr | None:
    """The predicate of a ``fraction`` sample of an OTree pool (None: the whole pool, for a
    fraction of 1). Raises UsageError for a pool without the OTree layout or a fraction
    outside ``(0, 1]``."""
    if layout is None:
        raise UsageError(
            f"pool {pool} has no OTree layout: sampling needs one "
            "(lake create POOL --layout otree --index COLUMNS)"
        )
    cut = sample_range(fraction)
    if cut is None:
        return None
    lo, hi = cut
    column = Column((WEIGHT_COLUMN,))
    return And(Comparison(">=", column, Literal(lo)), Comparison("<", column, Literal(hi)))


def and_sample(predicate: Expr | None, sample: Expr | None) -> Expr | None:
    """``predicate AND sample``, either may be absent."""
    if sample is None:
        return predicate
    if predicate is None:
        return sample
    return And(predicate, sample)


__all__ = ["and_sample", "sample_predicate"]
