"""What a commit records of an OTree object: its revision and its blocks, as Add-action tags.

The tags are Qbeast's (format >= 0.6): ``revision`` (the revision id, a decimal string) and
``blocks`` (a JSON array of ``{"cubeId", "minWeight", "maxWeight", "elementCount"}``, nothing
else in the items, as Qbeast's reader rejects unknown keys). Ours add one rule: **block ``i``
is row group ``i``** of the object, so a read can skip row groups block by block.

Invariant: every row of block ``b`` has ``b.min_weight <= weight <= b.max_weight`` and lies in
``b.cube``'s region of the revision's space. An object without a ``revision`` tag, or with
revision 0, is unindexed: every read considers it.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from lake_core.objects import ObjectMeta
from lake_core.otree.cubes import Cube

REVISION_TAG = "revision"
BLOCKS_TAG = "blocks"
#: The revision's uid (ours, beside Qbeast's tags): an object is read with a revision's
#: mapping only when the uids agree.
REVISION_UID_TAG = "revisionUid"


@dataclass(frozen=True)
class Block:
    """One cube's rows in one object (one row group)."""

    cube: Cube
    min_weight: int
    max_weight: int
    count: int

    def to_json(self) -> dict[str, object]:
        return {
            "cubeId": self.cube.to_string(),
            "minWeight": self.min_weight,
            "maxWeight": self.max_weight,
            "elementCount": self.count,
        }


def tags_of(revision: int, blocks: list[Block], uid: str = "") -> dict[str, str]:
    """The Add-action tags of an object of ``revision`` (uid ``uid``) holding ``blocks``
    (row-group order)."""
    tags = {
        REVISION_TAG: str(revision),
        BLOCKS_TAG: json.dumps([b.to_json() for b in blocks], separators=(",", ":")),
    }
    if uid:
        tags[REVISION_UID_TAG] = uid
    return tags


def uid_of(obj: ObjectMeta) -> str:
    """The uid of the revision the object was written in ("" when not recorded)."""
    return obj.tags.get(REVISION_UID_TAG, "")


def revision_of(obj: ObjectMeta) -> int:
    """The object's revision; 0 (unindexed) when it has none or an unreadable one."""
    raw = obj.tags.get(REVISION_TAG)
    if raw is None:
        return 0
    try:
        return max(0, int(raw))
    except ValueError:
        return 0


def blocks_of(obj: ObjectMeta, dims: int) -> list[Block] | None:
    """The object's blocks in row-group order; None for an unindexed object or tags that do
    not parse (then the object is read as unindexed, never skipped)."""
    if revision_of(obj) == 0 or BLOCKS_TAG not in obj.tags:
        return None
    try:
        items = json.loads(obj.tags[BLOCKS_TAG])
        return [
            Block(
                Cube.from_string(str(item["cubeId"]), dims),
                int(item["minWeight"]),
                int(item["maxWeight"]),
                int(item["elementCount"]),
            )
            for item in items
        ]
    except (ValueError, KeyError, TypeError):
        return None


__all__ = [
    "BLOCKS_TAG",
    "REVISION_TAG",
    "REVISION_UID_TAG",
    "Block",
    "blocks_of",
    "revision_of",
    "tags_of",
    "uid_of",
]
