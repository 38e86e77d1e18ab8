"""Column statistics of a data object, and their JSON encoding.

Stats let scans prune: an object (or a row group) whose min/max/null counts prove that no row
can match is never read. Values are encoded per column type so JSON keeps them exactly:
timestamps as integer microseconds since the epoch (UTC), dates as integer days, other
orderable scalars (integers, floats, strings, booleans) as themselves. Columns of other types
(nested, binary, decimal) record only their null count. NaN bounds are dropped (unknown).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_EPOCH_DATE = date(1970, 1, 1)


@dataclass(frozen=True)
class ColumnMeta:
    """Stats of one column of one object: Arrow type string, encoded min/max, null count."""

    type: str
    min: Any
    max: Any
    nulls: int

    def to_json(self) -> dict[str, Any]:
        return {"type": self.type, "min": self.min, "max": self.max, "nulls": self.nulls}

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ColumnMeta:
        return cls(str(d["type"]), d.get("min"), d.get("max"), int(d["nulls"]))

    def decoded_min(self) -> Any:
        return decode_value(self.type, self.min)

    def decoded_max(self) -> Any:
        return decode_value(self.type, self.max)


def _orderable(t: pa.DataType) -> bool:
    return bool(
        pa.types.is_integer(t)
        or pa.types.is_floating(t)
        or pa.types.is_string(t)
        or pa.types.is_large_string(t)
        or pa.types.is_boolean(t)
        or pa.types.is_timestamp(t)
        or pa.types.is_date32(t)
    )


def encode_value(t: pa.DataType, value: Any) -> Any:
    """A Python scalar of Arrow type ``t`` as a JSON value (see the module docstring)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=UTC)
        delta = value - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, date):
        return (value - _EPOCH_DATE).days
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, (bool, int, float, str)):
        return value
    return None


def decode_value(type_str: str, value: Any) -> Any:
    """The Python value of an encoded stat (datetime for timestamps, date for dates)."""
    if value is None:
        return None
    if type_str.startswith("timestamp"):
        return _EPOCH + timedelta(microseconds=int(value))
    if type_str.startswith("date32"):
        return _EPOCH_DATE + timedelta(days=int(value))
    return value


def column_meta(column: pa.ChunkedArray[Any] | pa.Array[Any]) -> ColumnMeta:
    """Stats of one column."""
    t = column.type
    nulls = column.null_count
    lo = hi = None
    if _orderable(t) and nulls < len(column):
        mm = pc.min_max(column)
        lo = encode_value(t, mm["min"].as_py())
        hi = encode_value(t, mm["max"].as_py())
    return ColumnMeta(str(t), lo, hi, int(nulls))


def table_meta(table: pa.Table) -> dict[str, ColumnMeta]:
    return {name: column_meta(table.column(name)) for name in table.schema.names}
