"""Pool partitions: an optional column-derived grouping that objects never straddle.

A spec is a column (identity) or ``day(COL)``, ``month(COL)``, ``year(COL)`` of a timestamp
column. A partition value is a string: ``2026-01-05``, ``2026-01``, ``2026``, or the column's
value as text (ISO 8601 for timestamps); a record lacking the column is in partition ``null``.
Dropping a partition is then a metadata-only commit that deletes exactly the objects whose
recorded ``partition`` equals the value.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from lake_core.errors import UsageError
from lake_core.names import validate_name

TRANSFORMS = {"day": "%Y-%m-%d", "month": "%Y-%m", "year": "%Y"}
NULL_PARTITION = "null"
_CALL = re.compile(r"^\s*(day|month|year)\s*\(\s*([^()\s]+)\s*\)\s*$", re.IGNORECASE)


@dataclass(frozen=True)
class PartitionSpec:
    column: str
    transform: str = "identity"

    @classmethod
    def parse(cls, text: str) -> PartitionSpec:
        m = _CALL.match(text)
        if m:
            return cls(validate_name(m.group(2), "partition column"), m.group(1).lower())
        if "(" in text:
            raise UsageError(
                f"invalid --partition-by {text!r}: use a column, or day(COL), month(COL), year(COL)"
            )
        return cls(validate_name(text.strip(), "partition column"))

    def __str__(self) -> str:
        return self.column if self.transform == "identity" else f"{self.transform}({self.column})"

    def values(self, table: pa.Table) -> pa.Array[Any]:
        """The partition value (string, never null) of every row of ``table``."""
        n = table.num_rows
        if self.column not in table.schema.names:
            return pa.array([NULL_PARTITION] * n, pa.string())
        col = table.column(self.column).combine_chunks()
        if self.transform != "identity":
            if not pa.types.is_timestamp(col.type) and not pa.types.is_date(col.type):
                raise UsageError(
                    f"partition {self}: column {self.column!r} is {col.type}, not a timestamp"
                )
            if pa.types.is_timestamp(col.type) and col.type.tz is not None:
                col = col.cast(pa.timestamp(col.type.unit, "UTC"))
            text: Any = pc.strftime(col, format=TRANSFORMS[self.transform])
        elif pa.types.is_timestamp(col.type):
            text = pc.strftime(col, format="%Y-%m-%dT%H:%M:%S.%fZ")
        else:
            text = pc.cast(col, pa.string())
        fill: Any = pa.scalar(NULL_PARTITION)
        filled: pa.Array[Any] = pc.fill_null(text, fill)
        return filled

    def split(self, table: pa.Table) -> list[tuple[str, pa.Table]]:
        """``table``'s rows grouped by partition value (values sorted; row order kept)."""
        if table.num_rows == 0:
            return []
        encoded = self.values(table).dictionary_encode()
        codes = encoded.indices.to_numpy(zero_copy_only=False)
        order = np.argsort(codes, kind="stable")
        counts = np.bincount(codes, minlength=len(encoded.dictionary))
        taken = table.take(order)
        groups = []
        start = 0
        for code, count in enumerate(counts):
            if count:
                groups.append((encoded.dictionary[code].as_py(), taken.slice(start, int(count))))
                start += int(count)
        return sorted(groups, key=lambda g: g[0])
