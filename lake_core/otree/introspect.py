"""An OTree pool's tree as tables: its revisions, and its cubes at a snapshot (``lake otree``,
SQL ``POOL$cubes``).

A cube row sums the cube's blocks over the snapshot's live objects: ``blocks``, ``objects``
(that hold some), ``elements`` (rows), and the weight range — ``min_weight`` the smallest row
weight, ``max_weight`` the smallest threshold any block recorded (Qbeast's cube weight: a cube
that only appends lowered has its old blocks' higher thresholds too), both also as fractions of
the weight range (``fraction = (w + 2^31) / (2^32 - 1)``; a leaf's ``max_fraction`` is 1). Rows
of unindexed objects (revision 0) are one row with no cube.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pyarrow as pa

from lake_core.otree.blocks import blocks_of, revision_of, uid_of
from lake_core.otree.settings import OTreeLayout

if TYPE_CHECKING:
    from lake_core.pool import Pool


def _schema(*fields: tuple[str, pa.DataType]) -> pa.Schema:
    return pa.schema([pa.field(name, type_) for name, type_ in fields])


CUBES_SCHEMA = _schema(
    ("revision", pa.int64()),
    ("cube", pa.string()),
    ("depth", pa.int32()),
    ("blocks", pa.int64()),
    ("objects", pa.int64()),
    ("elements", pa.int64()),
    ("min_weight", pa.int32()),
    ("max_weight", pa.int32()),
    ("min_fraction", pa.float64()),
    ("max_fraction", pa.float64()),
)
REVISIONS_SCHEMA = _schema(
    ("revision", pa.int64()),
    ("created", pa.timestamp("us", tz="UTC")),
    ("columns", pa.list_(pa.string())),
    ("cube_size", pa.int64()),
    ("transformations", pa.string()),
    ("uid", pa.string()),
)


def fraction(weight: int) -> float:
    """A weight as the fraction of the weight range below it."""
    return (weight + 2**31) / (2**32 - 1)


def revisions_table(layout: OTreeLayout | None) -> pa.Table:
    """One row per revision of ``layout`` (none for a pool without the OTree layout)."""
    rows: dict[str, list[object]] = {f.name: [] for f in REVISIONS_SCHEMA}
    for r in layout.revisions if layout is not None else ():
        rows["revision"].append(r.id)
        rows["created"].append(datetime.fromtimestamp(r.created_ms / 1000, UTC))
        rows["columns"].append(list(r.columns))
        rows["cube_size"].append(r.cube_size)
        rows["transformations"].append(json.dumps([t.to_json() for t in r.transformations]))
        rows["uid"].append(r.uid)
    return pa.Table.from_pydict(rows, schema=REVISIONS_SCHEMA)


@dataclass
class _Cube:
    """One (revision, cube) row being summed."""

    revision: int
    cube: str | None
    depth: int | None
    order: tuple[int, int]
    blocks: int = 0
    objects: int = 0
    elements: int = 0
    min_weight: int | None = None
    max_weight: int | None = None

    def row(self) -> dict[str, object]:
        lo, hi = self.min_weight, self.max_weight
        return {
            "revision": self.revision,
            "cube": self.cube,
            "depth": self.depth,
            "blocks": self.blocks,
            "objects": self.objects,
            "elements": self.elements,
            "min_weight": lo,
            "max_weight": hi,
            "min_fraction": None if lo is None else fraction(lo),
            "max_fraction": None if hi is None else fraction(hi),
        }


def cubes_table(pool: Pool, ref: str | None = None, as_of: datetime | None = None) -> pa.Table:
    """One row per (revision, cube) of the snapshot at ``ref``, sorted by revision and cube
    pre-order; empty for a pool without the OTree layout."""
    layout = pool.config.otree
    snap = pool.snapshot(pool.resolve(ref, as_of))
    cubes: dict[tuple[int, str | None], _Cube] = {}
    for obj in snap.objects.values():
        revision = None if layout is None else layout.revision(revision_of(obj), uid_of(obj))
        blocks = None if revision is None else blocks_of(obj, revision.dims)
        if revision is None or blocks is None:
            if layout is None:
                continue
            entry = cubes.setdefault((0, None), _Cube(0, None, None, (-1, -1)))
            entry.blocks += 1
            entry.objects += 1
            entry.elements += obj.count
            continue
        seen: set[str] = set()
        for block in blocks:
            name = block.cube.to_string()
            key = (revision.id, name)
            entry = cubes.setdefault(
                key, _Cube(revision.id, name, block.cube.depth, block.cube.sort_key())
            )
            entry.blocks += 1
            entry.elements += block.count
            if name not in seen:
                seen.add(name)
                entry.objects += 1
            lo, hi = entry.min_weight, entry.max_weight
            entry.min_weight = block.min_weight if lo is None else min(lo, block.min_weight)
            entry.max_weight = block.max_weight if hi is None else min(hi, block.max_weight)
    ordered = sorted(cubes.values(), key=lambda c: (c.revision, c.order))
    return pa.Table.from_pylist([c.row() for c in ordered], schema=CUBES_SCHEMA)


__all__ = ["CUBES_SCHEMA", "REVISIONS_SCHEMA", "cubes_table", "fraction", "revisions_table"]
