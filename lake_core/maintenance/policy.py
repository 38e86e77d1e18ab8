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


def span(obj: ObjectMeta, key_fields: tuple[str, ...]) -> tuple[Any, Any]:
    """(start, end) of the object's keys in ascending terms; TOP for null keys."""
    lo: Any = tuple(obj.min) if obj.min is not None else TOP
    hi: Any = TOP if _has_null_keys(obj, key_fields) else tuple(obj.max or ())
    return lo, hi


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
    objects: list[ObjectMeta], key_fields: tuple[str, ...], target_size: int
) -> list[CompactionRun]:
    """The runs the policy compacts (each of two or more objects)."""
    by_partition: dict[str | None, list[ObjectMeta]] = {}
    for o in objects:
        by_partition.setdefault(o.partition, []).append(o)
    runs: list[CompactionRun] = []
    for partition in sorted(by_partition, key=lambda p: (p is None, p or "")):
        runs += _plan_partition(partition, by_partition[partition], key_fields, target_size)
    return runs


def _plan_partition(
    partition: str | None, objects: list[ObjectMeta], key_fields: tuple[str, ...], target: int
) -> list[CompactionRun]:
    ordered = sorted(objects, key=lambda o: (SpanOrder(span(o, key_fields)[0]), o.id))
    units: list[list[ObjectMeta]] = []
    unit_end: Any = None
    for o in ordered:
        lo, hi = span(o, key_fields)
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
