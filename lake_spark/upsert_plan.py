"""Key ranges of a Spark upsert: which live objects and which incoming rows each task gets.

Pure (Arrow, numpy, the objects' recorded bounds; no I/O, no Spark), so the invariants are
unit-tested directly. The driver plans; each bucket's task then finds its targets among the
bucket's objects with lake_core's ``plan_targets`` and merge-joins them with its rows.

Invariants:

- **No live object belongs to two buckets.** Live objects are merged into *groups*: maximal
  runs whose key spans ``[min, max]`` overlap (in pool order). Buckets are cut only at a
  group's end or at a sampled incoming key lying between groups, so a group — and every
  object in it — lies inside one bucket, and an incoming key can only meet objects of its
  own bucket. Two tasks therefore never read, rewrite or delete the same object.
- Which bucket a row goes to depends on its key alone (:func:`lake_spark.ranges.assign_buckets`:
  bucket ``r`` holds the keys after boundary ``r - 1`` up to boundary ``r``), so duplicate
  keys of the input meet in one task, where the last one in input order wins.
- Cuts are made only where the recorded bounds are exact: every live object with a non-null
  key has bounds with a value for every key field, of a type whose bound is the key itself
  (integers, floats, strings, booleans, dates, timestamps of second, millisecond or
  microsecond unit). Otherwise (binary or decimal keys, nanosecond timestamps, a key field
  null in a bound) there is one bucket: correct, only not spread. Objects whose keys are all
  null are never targets (a null key matches nothing) and belong to no bucket.
- Buckets come out about the same work: each cut is placed where the estimated work so far
  (incoming bytes from the survey's weighted key samples, plus the stored bytes of the groups
  those samples fall in, which will be read and rewritten) reaches an equal share; there are
  about ``work / target`` of them.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lake_core.objects import ObjectMeta
from lake_core.poolkey import PoolKey
from lake_spark.ranges import WEIGHT, assign_buckets, sorts_after


@dataclass(frozen=True)
class Group:
    """A maximal run of live objects whose key spans overlap, in pool order: ``start`` and
    ``end`` are its first and last key in the pool's direction."""

    start: tuple[Any, ...]
    end: tuple[Any, ...]
    objects: tuple[ObjectMeta, ...]

    @property
    def size(self) -> int:
        return sum(o.size for o in self.objects)


@dataclass(frozen=True)
class BucketPlan:
    """``bounds`` (key fields, the pool schema's types; distinct, in pool order) cut the key
    space into ``len(bounds) + 1`` buckets; ``objects[r]`` are the live objects of bucket
    ``r`` (the only ones its task may read)."""

    bounds: pa.Table
    objects: tuple[tuple[ObjectMeta, ...], ...]

    @property
    def buckets(self) -> int:
        return len(self.objects)


def _exact_type(t: pa.DataType) -> bool:
    """A key type whose recorded bound (lake_core.stats.encode_value) is the key itself."""
    if pa.types.is_timestamp(t):
        return t.unit in ("s", "ms", "us")
    return bool(
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_boolean(t)
        or pa.types.is_date32(t)
    )


def _compare(descending: bool, a: Sequence[Any], b: Sequence[Any]) -> int:
    """Pool order of two complete bounds (no nulls: see :func:`_bounds`)."""
    for x, y in zip(a, b, strict=True):
        if x != y:
            less = x < y
            return (1 if less else -1) if descending else (-1 if less else 1)
    return 0


def _all_null(o: ObjectMeta, key: PoolKey) -> bool:
    """The object's keys are all null (the writer records no bounds then)."""
    col = o.columns.get(key.fields[0])
    return col is None or col.nulls >= o.count


def _bounds(o: ObjectMeta, key: PoolKey) -> tuple[tuple[Any, ...], tuple[Any, ...]] | None:
    """(start, end) of the object in pool order, or None when they are not exact."""
    lo = o.decoded_bound(key.fields, "min")
    hi = o.decoded_bound(key.fields, "max")
    if lo is None or hi is None or len(lo) != len(key.fields) or len(hi) != len(key.fields):
        return None
    for name, a, b in zip(key.fields, lo, hi, strict=True):
        col = o.columns.get(name)
        if a is None or b is None or col is None:
            return None
        if isinstance(a, float) and (math.isnan(a) or math.isnan(b)):
            return None
    return (tuple(hi), tuple(lo)) if key.descending else (tuple(lo), tuple(hi))


_Span = tuple[tuple[Any, ...], tuple[Any, ...], ObjectMeta]  # (start, end, object)


def key_groups(objects: Iterable[ObjectMeta], key: PoolKey) -> list[Group] | None:
    """The live objects with a non-null key, merged into groups in pool order; None when some
    object's bounds are not exact (then nothing may be cut). All-null objects are left out."""
    spans: list[_Span] = []
    for o in objects:
        if o.min is None and _all_null(o, key):
            continue
        b = _bounds(o, key)
        if b is None:
            return None
        spans.append((b[0], b[1], o))
    cmp = functools.partial(_compare, key.descending)

    def by_start(x: _Span, y: _Span) -> int:
        return cmp(x[0], y[0])

    groups: list[Group] = []
    try:
        spans.sort(key=functools.cmp_to_key(by_start))
        for start, end, o in spans:
            if groups and cmp(start, groups[-1].end) <= 0:
                last = groups[-1]
                far = end if cmp(end, last.end) > 0 else last.end
                groups[-1] = Group(last.start, far, (*last.objects, o))
            else:
                groups.append(Group(start, end, (o,)))
    except TypeError:  # bounds of different Python types (a column whose type changed)
        return None
    return groups


def _key_table(
    rows: Sequence[tuple[Any, ...]], key: PoolKey, types: Sequence[pa.DataType]
) -> pa.Table:
    return pa.table({f: pa.array([r[i] for r in rows], types[i]) for i, f in enumerate(key.fields)})


def _complete(samples: pa.Table, key: PoolKey) -> np.ndarray[Any, np.dtype[np.bool_]]:
    """Per sample: every key field present and neither null nor NaN."""
    ok = np.ones(samples.num_rows, dtype=bool)
    for f in key.fields:
        if f not in samples.schema.names:
            return np.zeros(samples.num_rows, dtype=bool)
        column = samples.column(f).combine_chunks()
        if pa.types.is_null(column.type):
            return np.zeros(samples.num_rows, dtype=bool)
        missing = pc.is_null(column, nan_is_null=pa.types.is_floating(column.type))
        ok &= ~np.asarray(missing.to_numpy(zero_copy_only=False), dtype=bool)
    return ok


def one_bucket(objects: Iterable[ObjectMeta], key: PoolKey) -> BucketPlan:
    """Every live object with a non-null key in one bucket."""
    kept = tuple(o for o in objects if not (o.min is None and _all_null(o, key)))
    return BucketPlan(pa.table({}), (kept,))


def plan_buckets(
    objects: Iterable[ObjectMeta],
    key: PoolKey,
    schema: pa.Schema,
    samples: pa.Table,
    bytes_per_row: float,
    target: int,
) -> BucketPlan:
    """Cut the key space into buckets of about ``target`` bytes of work (see the module
    docstring). ``samples``: the survey's key samples conformed to ``schema`` (key fields,
    plus :data:`WEIGHT`: the input rows each stands for); ``bytes_per_row``: the input's
    estimated stored bytes per row."""
    objects = list(objects)
    if any(f not in schema.names for f in key.fields):
        return one_bucket(objects, key)
    types = [schema.field(f).type for f in key.fields]
    if not all(_exact_type(t) for t in types):
        return one_bucket(objects, key)
    groups = key_groups(objects, key)
    if groups is None:
        return one_bucket(objects, key)
    try:
        ends = _key_table([g.end for g in groups], key, types)
        starts = _key_table([g.start for g in groups], key, types)
    except (pa.ArrowException, TypeError, ValueError, OverflowError):
        return one_bucket(objects, key)
    weights = (
        np.asarray(samples.column(WEIGHT).to_numpy(zero_copy_only=False), dtype=float)
        * bytes_per_row
        if samples.num_rows
        else np.zeros(0)
    )
    complete = _complete(samples, key)
    tail = float(weights[~complete].sum())  # null keys sort last: the last bucket
    # Samples lacking a key field (input without it) are all incomplete: none to cut at.
    valid = samples.filter(pa.array(complete)).select(list(key.fields)) if complete.any() else None
    if valid is not None:
        valid = pa.table(
            {f: valid.column(f).cast(t) for f, t in zip(key.fields, types, strict=True)}
        )
    weights = weights[complete]
    n_groups = len(groups)
    if valid is None or valid.num_rows == 0:
        at = np.zeros(0, dtype=np.int64)
        inside = np.zeros(0, dtype=bool)
    else:
        # The first group whose end is at or after the sample; inside it unless the sample
        # comes before the group's start.
        at = assign_buckets(valid, ends, key) if n_groups else np.zeros(valid.num_rows, np.int64)
        inside = np.zeros(valid.num_rows, dtype=bool)
        hit = at < n_groups
        if hit.any():
            rows = np.nonzero(hit)[0]
            before = sorts_after(starts.take(at[rows]), valid.take(rows), key)
            inside[rows] = ~before
    group_work = np.zeros(n_groups)
    for j in np.unique(at[inside]):
        group_work[j] = groups[j].size  # a sampled key falls in it: read and rewritten
    np.add.at(group_work, at[inside], weights[inside])
    total = float(group_work.sum() + weights[~inside].sum() + tail)
    wanted = max(1, math.ceil(total / max(1, target)))
    # Walk the key space in pool order: each group's gap samples (sorted), then the group.
    gap_rows = np.nonzero(~inside)[0]
    gaps: dict[int, list[int]] = {}
    if gap_rows.size:
        assert valid is not None
        gap_table = valid.take(gap_rows)
        for i in np.asarray(key.sort_indices(gap_table)):
            row = int(gap_rows[int(i)])
            gaps.setdefault(int(at[row]), []).append(row)
    cuts: list[tuple[Any, ...]] = []
    owner: list[int] = []  # bucket of each group
    done = 0.0
    for j in range(n_groups + 1):
        for row in gaps.get(j, []):
            done += float(weights[row])
            assert valid is not None
            value = tuple(valid.column(f)[row].as_py() for f in key.fields)
            due = done >= total * (len(cuts) + 1) / wanted and len(cuts) < wanted - 1
            if due and (not cuts or value != cuts[-1]):
                cuts.append(value)
        if j == n_groups:
            break
        owner.append(len(cuts))
        done += float(group_work[j])
        if done >= total * (len(cuts) + 1) / wanted and len(cuts) < wanted - 1:
            cuts.append(groups[j].end)
    per_bucket: list[list[ObjectMeta]] = [[] for _ in range(len(cuts) + 1)]
    for j, g in enumerate(groups):
        per_bucket[owner[j]].extend(g.objects)
    bounds = _key_table(cuts, key, types) if cuts else pa.table({})
    return BucketPlan(bounds, tuple(tuple(b) for b in per_bucket))
