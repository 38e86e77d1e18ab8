"""OTree revisions: how each indexed column maps to a coordinate in ``[0, 1]``.

A revision is one coordinate system: per indexed column a :class:`Transformation` —

* ``linear`` for numbers, booleans, dates and timestamps (dates and timestamps as epoch
  milliseconds, as Qbeast): ``x = (v - min) / (max - min)``; a null maps to ``null_value``, a
  value drawn uniformly from ``[min, max]`` when the revision was made;
* ``identity`` when every value seen was the same (``min == max``): ``x = 0``;
* ``hash`` for strings and binaries: ``x`` from a hash of the value (seeded differently from
  the row weight, so position and weight stay independent); only ``=`` prunes on it.

Revisions are append-only and numbered from 1 (revision 0 is "unindexed": objects without
OTree tags). A batch whose values fall outside the latest revision's ranges opens the next
revision with the *union* of the ranges (:func:`next_revision`); only that batch is indexed
into it, older objects keep the revision they were written in and are read with its mapping.

Invariant: :func:`coordinates` and :func:`bound_coordinates` use the same value -> number ->
lattice mapping, which is monotone, so a predicate interval mapped with the latter brackets
the lattice coordinates of every row whose value lies in it.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, date, datetime, timedelta
from decimal import Decimal
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lake_core.errors import UsageError
from lake_core.otree.cubes import lattice
from lake_core.otree.weights import is_bytes, spark_hash

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
#: Seed of the hash that places string values (the row weight uses Spark's 42).
COORDINATE_SEED = 0x5BD1E995 - (1 << 32)


@dataclass(frozen=True)
class Transformation:
    """One column's mapping to ``[0, 1]``. ``kind``: ``linear``, ``identity`` or ``hash``."""

    kind: str
    minimum: float = 0.0
    maximum: float = 0.0
    null_value: float = 0.0

    def to_json(self) -> dict[str, Any]:
        if self.kind == "hash":
            return {"kind": "hash"}
        out: dict[str, Any] = {"kind": self.kind, "minNumber": self.minimum}
        if self.kind == "linear":
            out |= {"maxNumber": self.maximum, "nullValue": self.null_value}
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Transformation:
        kind = str(d["kind"])
        if kind == "hash":
            return cls("hash")
        if kind == "identity":
            return cls("identity", float(d["minNumber"]), float(d["minNumber"]))
        if kind == "linear":
            return cls(
                "linear", float(d["minNumber"]), float(d["maxNumber"]), float(d["nullValue"])
            )
        raise ValueError(f"unknown OTree transformation {kind!r}")

    def covers(self, lo: float, hi: float) -> bool:
        """Whether values in ``[lo, hi]`` lie inside this mapping's range."""
        if self.kind == "hash":
            return True
        return self.minimum <= lo and hi <= self.maximum

    def widened(self, lo: float, hi: float, rng: random.Random) -> Transformation:
        """The union of this range and ``[lo, hi]``, with a fresh null value."""
        if self.kind == "hash":
            return self
        return for_range(min(self.minimum, lo), max(self.maximum, hi), rng)

    def map(self, values: np.ndarray, nulls: np.ndarray | None) -> np.ndarray:
        """Coordinates of ``values`` (float64; ``nulls`` marks the null rows)."""
        if self.kind == "identity":
            return np.zeros(len(values))
        span = self.maximum - self.minimum
        x = (values - self.minimum) / span
        if nulls is not None and nulls.any():
            x = np.where(nulls, (self.null_value - self.minimum) / span, x)
        return x


def for_range(lo: float, hi: float, rng: random.Random) -> Transformation:
    """``identity`` for a single value, else ``linear`` with a null value drawn in range."""
    if lo == hi:
        return Transformation("identity", lo, hi)
    return Transformation("linear", lo, hi, rng.uniform(lo, hi))


@dataclass(frozen=True)
class Revision:
    """One OTree coordinate system of a pool: ``columns`` map through ``transformations``."""

    id: int
    columns: tuple[str, ...]
    cube_size: int
    transformations: tuple[Transformation, ...]
    created_ms: int = 0
    #: Per column, the Arrow type it was indexed as (a later widening changes coordinates).
    types: tuple[str, ...] = field(default=())
    #: Drawn when the revision is made, and tagged on its objects: after a catalog rollback
    #: forgot a revision, the next one may take its id, and its objects must not be read
    #: with the newcomer's mapping (they are read whole instead).
    uid: str = ""

    @property
    def dims(self) -> int:
        return len(self.columns)

    def to_json(self) -> dict[str, Any]:
        return {
            "revisionID": self.id,
            "timestamp": self.created_ms,
            "uid": self.uid,
            "desiredCubeSize": self.cube_size,
            "columnTransformers": [
                {"columnName": c, "dataType": t}
                for c, t in zip(self.columns, self.types or [""] * self.dims, strict=True)
            ],
            "transformations": [t.to_json() for t in self.transformations],
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Revision:
        transformers = d["columnTransformers"]
        return cls(
            id=int(d["revisionID"]),
            columns=tuple(str(t["columnName"]) for t in transformers),
            cube_size=int(d["desiredCubeSize"]),
            transformations=tuple(Transformation.from_json(t) for t in d["transformations"]),
            created_ms=int(d.get("timestamp", 0)),
            types=tuple(str(t.get("dataType", "")) for t in transformers),
            uid=str(d.get("uid", "")),
        )

    def covers(self, ranges: Sequence[tuple[float, float] | None]) -> bool:
        """Whether a batch with these per-column (min, max) ranges (None: all null) fits."""
        return all(
            r is None or t.covers(*r) for t, r in zip(self.transformations, ranges, strict=True)
        )


def is_hashed(t: pa.DataType) -> bool:
    """Whether a column of type ``t`` is placed by hash (strings, binaries)."""
    return is_bytes(t)


def check_indexable(name: str, t: pa.DataType) -> None:
    """Raise UsageError for a column type an OTree cannot place."""
    if pa.types.is_dictionary(t):
        t = t.value_type
    ok = (
        is_hashed(t)
        or pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_boolean(t)
        or pa.types.is_date(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_decimal(t)
        or pa.types.is_null(t)
    )
    if not ok:
        raise UsageError(f"OTree column {name!r} has type {t}, which an OTree cannot index")


def numbers(column: pa.ChunkedArray[Any] | pa.Array[Any]) -> tuple[np.ndarray, np.ndarray | None]:
    """A linear column as float64 (dates and timestamps as epoch milliseconds) and its null
    mask (None when there are no nulls). Nulls' slots hold 0."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    t = column.type
    if pa.types.is_dictionary(t):
        column = column.dictionary_decode()  # type: ignore[union-attr]
        t = column.type
    if pa.types.is_null(t):
        return np.zeros(len(column)), np.ones(len(column), dtype=bool)
    if pa.types.is_timestamp(t):
        column = pc.cast(column.cast(pa.timestamp(t.unit)), pa.int64())
        per_ms = {"s": 1e-3, "ms": 1.0, "us": 1e3, "ns": 1e6}[t.unit]
        values = column.to_numpy(zero_copy_only=False).astype(np.float64) / per_ms
    elif pa.types.is_date32(t):
        values = column.cast(pa.int32()).to_numpy(zero_copy_only=False).astype(np.float64)
        values = values * 86_400_000.0
    elif pa.types.is_date64(t):
        values = column.cast(pa.int64()).to_numpy(zero_copy_only=False).astype(np.float64)
    elif pa.types.is_boolean(t) or pa.types.is_decimal(t):
        values = pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False)
    else:
        values = pc.cast(column, pa.float64()).to_numpy(zero_copy_only=False)
    nulls = None
    if column.null_count:
        nulls = column.is_null().to_numpy(zero_copy_only=False)
        values = np.where(nulls, 0.0, values)
    return np.asarray(values, dtype=np.float64), nulls


def value_number(value: Any) -> float | None:
    """A predicate literal as the number :func:`numbers` gives its column (None: not one)."""
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float | Decimal):
        return float(value)
    if isinstance(value, datetime):
        # As numbers() computes it: whole microseconds, then one division.
        aware = value if value.tzinfo is not None else value.replace(tzinfo=UTC)
        return float((aware - _EPOCH) // timedelta(microseconds=1)) / 1e3
    if isinstance(value, date):
        return float((value - date(1970, 1, 1)).days) * 86_400_000.0
    return None


def hash_coordinates(column: pa.ChunkedArray[Any] | pa.Array[Any]) -> np.ndarray:
    """Coordinates of a hashed column: its values' Murmur3 (Spark's, seeded with
    :data:`COORDINATE_SEED`) scaled to ``[0, 1]``; a null hashes as nothing (the seed)."""
    h = np.asarray(spark_hash([column], seed=COORDINATE_SEED), dtype=np.int64)
    out: np.ndarray = (h & 0x7FFFFFFF).astype(np.float64) / float(0x7FFFFFFF)
    return out


def column_range(column: pa.ChunkedArray[Any] | pa.Array[Any]) -> tuple[float, float] | None:
    """(min, max) of a linear column as numbers; None when all null (or NaN only)."""
    values, nulls = numbers(column)
    if nulls is not None:
        values = values[~nulls]
    values = values[~np.isnan(values)]
    if not len(values):
        return None
    return float(values.min()), float(values.max())


def batch_ranges(table: pa.Table, columns: Sequence[str]) -> list[tuple[float, float] | None]:
    """Per indexed column, the batch's (min, max) (None: hashed, absent or all null)."""
    out: list[tuple[float, float] | None] = []
    for name in columns:
        if name not in table.schema.names or is_hashed(table.schema.field(name).type):
            out.append(None)
        else:
            out.append(column_range(table.column(name)))
    return out


@dataclass(frozen=True)
class Extent:
    """What a revision needs to know of a batch, per indexed column: its Arrow type as a
    string (``null`` when the batch lacks it), whether it is placed by hash, and its (min, max)
    as numbers (None: hashed, absent or all null). A batch spread over tasks is summed up by
    :meth:`merge` of its parts' extents (each computed on rows conformed to the batch's
    schema), which equals the extent of the whole batch."""

    types: tuple[str, ...]
    hashed: tuple[bool, ...]
    ranges: tuple[tuple[float, float] | None, ...]

    @classmethod
    def of(cls, table: pa.Table, columns: Sequence[str]) -> Extent:
        names = table.schema.names
        return cls(
            _types(table, columns),
            tuple(c in names and is_hashed(table.schema.field(c).type) for c in columns),
            tuple(batch_ranges(table, columns)),
        )

    @classmethod
    def merge(cls, parts: Sequence[Extent]) -> Extent:
        """The extent of the parts together (at least one part)."""
        first = parts[0]
        types = list(first.types)
        hashed = list(first.hashed)
        ranges = list(first.ranges)
        for part in parts[1:]:
            for i, (t, h, r) in enumerate(zip(part.types, part.hashed, part.ranges, strict=True)):
                if types[i] == "null":
                    types[i] = t
                hashed[i] = hashed[i] or h
                old = ranges[i]
                ranges[i] = (
                    r
                    if old is None
                    else old
                    if r is None
                    else (
                        min(old[0], r[0]),
                        max(old[1], r[1]),
                    )
                )
        return cls(tuple(types), tuple(hashed), tuple(ranges))


def _extent(batch: pa.Table | Extent, columns: Sequence[str]) -> Extent:
    return batch if isinstance(batch, Extent) else Extent.of(batch, columns)


def first_revision(
    batch: pa.Table | Extent,
    columns: Sequence[str],
    cube_size: int,
    now_ms: int,
    rng: random.Random,
) -> Revision:
    """Revision 1 for the first batch of a pool (the batch, or its :class:`Extent`)."""
    extent = _extent(batch, columns)
    transformations = []
    for hashed, r in zip(extent.hashed, extent.ranges, strict=True):
        if hashed:
            transformations.append(Transformation("hash"))
        elif r is None:
            transformations.append(Transformation("identity"))
        else:
            transformations.append(for_range(r[0], r[1], rng))
    return Revision(
        1,
        tuple(columns),
        cube_size,
        tuple(transformations),
        now_ms,
        extent.types,
        _uid(rng),
    )


def _uid(rng: random.Random) -> str:
    return f"{rng.getrandbits(64):016x}"


def next_revision(
    latest: Revision, batch: pa.Table | Extent, now_ms: int, rng: random.Random
) -> Revision | None:
    """The revision after ``latest`` whose ranges are the union of ``latest``'s and the
    batch's (the batch, or its :class:`Extent`); None when ``latest`` already covers it."""
    extent = _extent(batch, latest.columns)
    if latest.covers(extent.ranges):
        return None
    transformations = []
    for t, r in zip(latest.transformations, extent.ranges, strict=True):
        if r is None or t.covers(*r):
            transformations.append(t)
        else:
            transformations.append(t.widened(r[0], r[1], rng))
    return replace(
        latest,
        id=latest.id + 1,
        transformations=tuple(transformations),
        created_ms=now_ms,
        types=extent.types or latest.types,
        uid=_uid(rng),
    )


def _types(table: pa.Table, columns: Sequence[str]) -> tuple[str, ...]:
    names = table.schema.names
    return tuple(str(table.schema.field(c).type) if c in names else "null" for c in columns)


def coordinates(table: pa.Table, revision: Revision) -> np.ndarray:
    """Lattice coordinates (int64, shape (rows, dims)) of every row under ``revision``."""
    out = np.zeros((table.num_rows, revision.dims), dtype=np.int64)
    for i, (name, t) in enumerate(zip(revision.columns, revision.transformations, strict=True)):
        if name not in table.schema.names:
            column: pa.Array[Any] = pa.nulls(table.num_rows)
        else:
            column = table.column(name)  # type: ignore[assignment]
        if t.kind == "hash":
            x = hash_coordinates(column)
        else:
            values, nulls = numbers(column)
            x = t.map(values, nulls)
        out[:, i] = lattice(x, revision.dims)
    return out


def bound_coordinates(
    revision: Revision, dim: int, interval: tuple[Any, bool, Any, bool], field_type: pa.DataType
) -> tuple[int, int] | None:
    """The inclusive lattice range that holds every row whose value in column ``dim`` lies in
    ``interval`` (a :func:`lake_core.expr.key_range` interval in the column's domain); None
    when it cannot be bounded (the whole range)."""
    lo, _, hi, _ = interval
    t = revision.transformations[dim]
    full = (0, (1 << 62))
    if t.kind == "hash":
        if lo is None or hi is None or lo != hi:
            return None
        x = hash_coordinates(pa.array([lo], field_type))
        q = int(lattice(x, revision.dims)[0])
        return q, q
    if t.kind == "identity":
        return None
    lo_n = None if lo is None else value_number(lo)
    hi_n = None if hi is None else value_number(hi)
    if (lo is not None and lo_n is None) or (hi is not None and hi_n is None):
        return None
    if (lo_n is not None and math.isnan(lo_n)) or (hi_n is not None and math.isnan(hi_n)):
        return None
    # One lattice cell of slack each side: a literal converted by another route than the
    # column (a decimal, a timestamp of another unit) may round an ulp apart at a cell edge.
    q_lo = full[0] if lo_n is None else _cell(t, lo_n, revision.dims) - 1
    q_hi = full[1] if hi_n is None else _cell(t, hi_n, revision.dims) + 1
    return q_lo, q_hi


def _cell(t: Transformation, number: float, dims: int) -> int:
    return int(lattice(t.map(np.array([number]), None), dims)[0])


__all__ = [
    "Revision",
    "Transformation",
    "Extent",
    "batch_ranges",
    "bound_coordinates",
    "check_indexable",
    "coordinates",
    "first_revision",
    "for_range",
    "is_hashed",
    "next_revision",
]
