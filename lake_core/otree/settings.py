"""An OTree pool's settings: indexed columns, cube size, weight mode and revisions.

They live in the pool's catalog definition (``TableDef.layout``: kind ``otree``, options
``columns`` (comma-separated), ``cube_size``, ``weight`` and one ``revision.<id>`` per
revision, its JSON), so a catalog version fixes them and ``lake catalog rollback`` restores
them. Revisions are only ever added (:func:`with_revision`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from lake_core.errors import UsageError
from lake_core.otree.revisions import Revision

LAYOUT_KIND = "otree"
DEFAULT_CUBE_SIZE = 100_000
WEIGHT_MODES = ("hash", "salted")
MAX_DIMS = 6
_REVISION = "revision."


@dataclass(frozen=True)
class OTreeLayout:
    """What an OTree pool indexes and how."""

    columns: tuple[str, ...]
    cube_size: int = DEFAULT_CUBE_SIZE
    #: ``hash``: the weight is Spark's ``hash(columns)``; ``salted``: that hash chained with a
    #: random number per row (no skew from repeated values; stored, not recomputable).
    weight: str = "hash"
    revisions: tuple[Revision, ...] = ()

    @property
    def latest(self) -> Revision | None:
        return self.revisions[-1] if self.revisions else None

    def revision(self, revision_id: int, uid: str = "") -> Revision | None:
        """Revision ``revision_id``; None when unknown, or when ``uid`` (an object's tag)
        names another revision that once had this id (forgotten by a catalog rollback)."""
        for r in self.revisions:
            if r.id == revision_id:
                return r if not uid or not r.uid or uid == r.uid else None
        return None

    def to_options(self) -> dict[str, str]:
        out = {
            "columns": ",".join(self.columns),
            "cube_size": str(self.cube_size),
            "weight": self.weight,
        }
        for r in self.revisions:
            out[f"{_REVISION}{r.id}"] = json.dumps(r.to_json(), separators=(",", ":"))
        return out

    @classmethod
    def from_options(cls, options: Mapping[str, str]) -> OTreeLayout:
        revisions = sorted(
            (
                Revision.from_json(json.loads(v))
                for k, v in options.items()
                if k.startswith(_REVISION)
            ),
            key=lambda r: r.id,
        )
        return cls(
            columns=tuple(c for c in options.get("columns", "").split(",") if c),
            cube_size=int(options.get("cube_size", DEFAULT_CUBE_SIZE)),
            weight=options.get("weight", "hash"),
            revisions=tuple(revisions),
        )

    def with_revision(self, revision: Revision) -> OTreeLayout:
        """These settings plus ``revision`` (the next id)."""
        expected = (self.latest.id if self.latest else 0) + 1
        if revision.id != expected:
            raise ValueError(f"revision {revision.id} follows {expected - 1}")
        return replace(self, revisions=(*self.revisions, revision))


def parse_layout(
    columns: Sequence[str] | str, cube_size: int | None = None, weight: str | None = None
) -> OTreeLayout:
    """Settings from user input. Raises UsageError for no column, a repeated or empty column
    name, more than :data:`MAX_DIMS` columns, a cube size below 1, or an unknown weight mode."""
    names = [c.strip() for c in columns.split(",")] if isinstance(columns, str) else list(columns)
    if not names or any(not c for c in names):
        raise UsageError("--index needs one or more column names, comma-separated")
    if len(set(names)) != len(names):
        raise UsageError(f"--index names a column twice: {','.join(names)}")
    if len(names) > MAX_DIMS:
        raise UsageError(
            f"--index takes at most {MAX_DIMS} columns (each doubles a cube's children)"
        )
    if "_lake_weight" in names:
        raise UsageError("--index cannot name _lake_weight: it is the OTree's own weight")
    size = DEFAULT_CUBE_SIZE if cube_size is None else int(cube_size)
    if size < 1:
        raise UsageError(f"--cube-size must be at least 1: {cube_size}")
    mode = weight or "hash"
    if mode not in WEIGHT_MODES:
        raise UsageError(f"unknown OTree weight {mode!r}: use {' or '.join(WEIGHT_MODES)}")
    return OTreeLayout(tuple(names), size, mode)


def check_combination(layout: OTreeLayout, *, unique: bool, partition_by: str | None) -> None:
    """Raise UsageError for settings an OTree pool cannot have with ``layout``: unique rows
    (an upsert finds rows by key ranges of key-sorted objects) or partitions."""
    if layout.revisions:
        raise UsageError("a new OTree pool has no revisions yet")
    if unique:
        raise UsageError("an OTree pool cannot be --unique: its objects are not sorted by key")
    if partition_by is not None:
        raise UsageError("an OTree pool cannot be partitioned: its cubes partition it already")


def refuse_unless_otree(layout: OTreeLayout | None, pool: str) -> OTreeLayout:
    """``layout``, or UsageError for a pool without the OTree layout."""
    if layout is None:
        raise UsageError(
            f"pool {pool} has no OTree layout (lake create POOL --layout otree --index COLUMNS)"
        )
    return layout


def refuse_key_sorted(layout: OTreeLayout | None, pool: str, what: str) -> None:
    """Raise UsageError when ``what`` — an operation that merges objects as key-sorted runs
    (compaction, upsert, dedupe) — is asked of an OTree pool: its objects are ordered by cube,
    and a key-order merge of them would write objects whose recorded key bounds are wrong."""
    if layout is not None:
        raise UsageError(
            f"pool {pool} has the OTree layout: {what} merges objects in key order, which OTree "
            "objects are not in; use lake optimize to rewrite an OTree pool"
        )


__all__ = [
    "check_combination",
    "DEFAULT_CUBE_SIZE",
    "LAYOUT_KIND",
    "MAX_DIMS",
    "OTreeLayout",
    "parse_layout",
]
