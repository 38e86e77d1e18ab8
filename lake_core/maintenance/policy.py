"""The LSM compaction policy: which objects to merge. Pure: no I/O.

Objects are grouped per partition (objects never cross partitions) and, within one, sorted by
key. *Units* are maximal groups of objects whose key ranges overlap (a null key sorts last, so
objects holding null keys overlap each other at the top). Consecutive *small* units (under half
the target) join one *run* while the run's combined size stays within the target; a unit of
half the target or more is never rewritten just to absorb a small neighbour (that would
rewrite most of a full object to gain little). Every run of two or more objects is compacted
into non-overlapping objects near the target size.

Fixpoint (a second ``compact`` right after the first finds nothing): sizes are taken as each
object's *planned size* — the ``plan_size`` tag compaction records on what it writes (the input
bytes a single output stands for, or the full target for the pieces of a split run), else its
actual size. A run closed because the next unit was not small, or the sum would pass the
target; after compaction the same sums are seen again (compression making outputs smaller
cannot re-open a decision), pieces of a split run count as full, and outputs never overlap.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from lake_core.objects import ObjectMeta

PLAN_SIZE_TAG = "plan_size"


def planned_size(obj: ObjectMeta) -> int:
    try:
        return int(obj.tags.get(PLAN_SIZE_TAG, obj.size))
    except ValueError:
        return obj.size


class _Top:
    """Sorts after every key value: the span end of an object holding null keys."""

    def __lt__(self, other: object) -> bool:
        return False

    def __gt__(self, other: object) -> bool:
        return not isinstance(other, _Top)

    def __le__(self, other: object) -> bool:
        return isinstance(other, _Top)

    def __ge__(self, other: object) -> bool:
        return True

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Top)

    def __hash__(self) -> int:
        return 0


TOP = _Top()


def _has_null_keys(obj: ObjectMeta, key_fields: tuple[str, ...]) -> bool:
    col = obj.columns.get(key_fields[0])
    return col is None or col.nulls > 0


def span(
    obj: ObjectMeta, key_fields: tuple[str, ...], descending: bool | None = None
) -> tuple[Any, Any]:
    """(start, end) of the object's keys in ascending terms; TOP for null keys (a null first
    key field).

    Sound: every key of the object lies in [start, end]. ``min``/``max`` hold None for a
    null in a secondary key field and for a value stats do not encode (a struct, a NaN).
    Knowing the direction (``descending``), a None in a column whose stats encode every
    non-null value is a null, placed where the sort puts it: after every value ascending,
    before every value descending (in ascending terms) — exact. Any other None, or every
    None when the direction is not given, cuts the bound there: the start keeps the
    prefix, which sorts before every key extending it, and the end gets TOP after it, which
    sorts after them (wider, still sound). A bound shorter than ``key_fields`` (a ``this``
    key's object written before a column was added) is null in the missing columns: the
    object lacks them. Pass a ``this`` key resolved (:meth:`PoolKey.names`); unresolved, every
    object's end is TOP (sound, but everything overlaps)."""
    bounds = key_span(obj, key_fields, descending)
    if bounds is None:
        return TOP, TOP
    return bounds[0], TOP if _has_null_keys(obj, key_fields) else bounds[1]


def key_span(
    obj: ObjectMeta, key_fields: tuple[str, ...] = (), descending: bool | None = None
) -> tuple[Any, Any] | None:
    """:func:`span` of the keys ``min``/``max`` record — those with a non-null first field —
    ignoring null keys; None when every key is null."""
    if obj.min is None:
        return None
    return (
        _bound(obj, obj.min, key_fields, descending, upper=False),
        _bound(obj, obj.max or [], key_fields, descending, upper=True),
    )


class _Null:
    """A null key value in ascending terms: after every value (``high``: an ascending sort's
    nulls last) or before every value (a descending sort's nulls last); before TOP."""

    def __init__(self, high: bool) -> None:
        self.high = high

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Null) and other.high == self.high

    def __hash__(self) -> int:
        return int(self.high)

    def __lt__(self, other: object) -> bool:
        if isinstance(other, _Top):
            return True
        if isinstance(other, _Null):
            return not self.high and other.high
        return not self.high

    def __gt__(self, other: object) -> bool:
        if isinstance(other, _Top):
            return False
        if isinstance(other, _Null):
            return self.high and not other.high
        return self.high

    def __le__(self, other: object) -> bool:
        return self == other or self < other

    def __ge__(self, other: object) -> bool:
        return self == other or self > other

    def __repr__(self) -> str:
        return "NULL_HIGH" if self.high else "NULL_LOW"


_NULL_HIGH = _Null(True)
_NULL_LOW = _Null(False)
#: Stat types whose every non-null value is encoded: a None bound there is a null.
_EXACT_TYPES = ("int", "uint", "string", "large_string", "bool", "timestamp", "date32", "null")


def _bound(
    obj: ObjectMeta,
    values: Sequence[Any],
    names: tuple[str, ...],
    descending: bool | None,
    upper: bool,
) -> tuple[Any, ...]:
    out: list[Any] = []
    for i in range(max(len(values), len(names))):
        if i < len(values) and values[i] is not None:
            out.append(values[i])
            continue
        name = names[i] if i < len(names) else None
        col = obj.columns.get(name) if name is not None else None
        # Past the recorded bound the object lacks the column; else its stats must say
        # a None can only be a null.
        null = descending is not None and (
            i >= len(values) or col is None or col.type.startswith(_EXACT_TYPES)
        )
        if not null:
            return (*out, TOP) if upper else tuple(out)
        out.append(_NULL_LOW if descending else _NULL_HIGH)
    return tuple(out)


@dataclass(frozen=True)
class CompactionRun:
    """Objects to merge-sort together, within one partition."""

    partition: str | None
    objects: tuple[ObjectMeta, ...]

    @property
    def size(self) -> int:
        return sum(planned_size(o) for o in self.objects)


def key_lt(a: Any, b: Any) -> bool:
    try:
        return bool(a < b)
    except TypeError:
        return str(a) < str(b)


def _max(a: Any, b: Any) -> Any:
    return b if key_lt(a, b) else a


def plan_compaction(
    objects: list[ObjectMeta],
    key_fields: tuple[str, ...],
    target_size: int,
    descending: bool | None = None,
) -> list[CompactionRun]:
    """The runs the policy compacts (each of two or more objects). ``descending``: the
    pool's direction, which places null secondary key values (:func:`span`)."""
    by_partition: dict[str | None, list[ObjectMeta]] = {}
    for o in objects:
        by_partition.setdefault(o.partition, []).append(o)
    runs: list[CompactionRun] = []
    for partition in sorted(by_partition, key=lambda p: (p is None, p or "")):
        runs += _plan_partition(
            partition, by_partition[partition], key_fields, target_size, descending
        )
    return runs


def _plan_partition(
    partition: str | None,
    objects: list[ObjectMeta],
    key_fields: tuple[str, ...],
    target: int,
    descending: bool | None,
) -> list[CompactionRun]:
    spans = {o.id: span(o, key_fields, descending) for o in objects}
    ordered = sorted(objects, key=lambda o: (SpanOrder(spans[o.id][0]), o.id))
    units: list[list[ObjectMeta]] = []
    unit_end: Any = None
    for o in ordered:
        lo, hi = spans[o.id]
        if units and not key_lt(unit_end, lo):  # lo <= unit_end: overlaps the current unit
            units[-1].append(o)
            unit_end = _max(unit_end, hi)
        else:
            units.append([o])
            unit_end = hi
    runs: list[list[ObjectMeta]] = []
    run_size = 0
    run_small = False
    for unit in units:
        size = sum(planned_size(o) for o in unit)
        small = size < target / 2
        if runs and run_small and small and run_size + size <= target:
            runs[-1].extend(unit)
            run_size += size
        else:
            runs.append(list(unit))
            run_size, run_small = size, small
    return [CompactionRun(partition, tuple(r)) for r in runs if len(r) >= 2]


class SpanOrder:
    """Orders span starts: tuples of mixed JSON scalars, TOP last."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def __lt__(self, other: SpanOrder) -> bool:
        return key_lt(self.value, other.value)
