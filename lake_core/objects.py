"""Data objects: immutable Parquet files named by KSUID, and the metadata a commit records.

An object's records are sorted by the pool key (nulls last). ``min``/``max`` are the first and
last key of the object *in ascending terms* — for a descending pool they are swapped so that
``min <= max`` always holds — each a list with one encoded value per key field (see
:mod:`lake_core.stats`). Null keys do not count towards min/max; ``min``/``max`` are None when
every key is null.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lake_core.stats import ColumnMeta


@dataclass(frozen=True)
class ObjectMeta:
    """What a commit records of one data object. Immutable, like the object itself."""

    id: str
    min: list[Any] | None
    max: list[Any] | None
    count: int
    size: int
    columns: dict[str, ColumnMeta] = field(default_factory=dict)
    partition: str | None = None
    tags: dict[str, str] = field(default_factory=dict)
    #: ``"crc32:<hex>"`` of the object's bytes (see lake_core.integrity); None in commits
    #: written before checksums were recorded.
    checksum: str | None = None

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": self.id,
            "min": self.min,
            "max": self.max,
            "count": self.count,
            "size": self.size,
            "columns": {k: v.to_json() for k, v in self.columns.items()},
        }
        if self.partition is not None:
            d["partition"] = self.partition
        if self.tags:
            d["tags"] = dict(self.tags)
        if self.checksum is not None:
            d["checksum"] = self.checksum
        return d

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> ObjectMeta:
        return cls(
            id=str(d["id"]),
            min=d.get("min"),
            max=d.get("max"),
            count=int(d["count"]),
            size=int(d["size"]),
            columns={k: ColumnMeta.from_json(v) for k, v in d.get("columns", {}).items()},
            partition=d.get("partition"),
            tags=dict(d.get("tags", {})),
            checksum=d.get("checksum"),
        )

    def decoded_bound(self, key_fields: tuple[str, ...], which: str) -> list[Any] | None:
        """``min`` or ``max`` decoded to Python values (datetime for timestamps)."""
        raw = self.min if which == "min" else self.max
        if raw is None:
            return None
        out = []
        for name, value in zip(key_fields, raw, strict=False):
            col = self.columns.get(name)
            out.append(col and col.type and _decode(col.type, value))
        return out


def _decode(type_str: str, value: Any) -> Any:
    from lake_core.stats import decode_value

    return decode_value(type_str, value)
