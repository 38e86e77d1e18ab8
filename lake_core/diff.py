"""What changed between two refs of a pool: the live objects of each snapshot compared.

Objects are immutable and named by id, so the difference of two snapshots is exact at the
object level: objects live in the second and not in the first were added, and the reverse
removed. Row counts are the recorded counts of those objects, read from the commits, no data.
A layout-only change between the refs (compaction) rewrites rows without changing them: its
rows appear as both removed and added, so ``net_rows`` is the row-level change, while
``rows_added``/``rows_removed`` count rows in added and removed objects.
"""

from __future__ import annotations

from dataclasses import dataclass

from lake_core.objects import ObjectMeta
from lake_core.snapshot import Snapshot


@dataclass(frozen=True)
class SnapshotDiff:
    """Objects added and removed going from snapshot ``a`` to snapshot ``b``."""

    a: str | None
    b: str | None
    added: tuple[ObjectMeta, ...]
    removed: tuple[ObjectMeta, ...]

    @property
    def rows_added(self) -> int:
        return sum(o.count for o in self.added)

    @property
    def rows_removed(self) -> int:
        return sum(o.count for o in self.removed)

    @property
    def net_rows(self) -> int:
        return self.rows_added - self.rows_removed

    def to_json(self) -> dict[str, object]:
        return {
            "from": self.a,
            "to": self.b,
            "objects_added": len(self.added),
            "objects_removed": len(self.removed),
            "rows_added": self.rows_added,
            "rows_removed": self.rows_removed,
            "net_rows": self.net_rows,
            "bytes_added": sum(o.size for o in self.added),
            "bytes_removed": sum(o.size for o in self.removed),
            "added": sorted(o.id for o in self.added),
            "removed": sorted(o.id for o in self.removed),
        }


def diff_snapshots(a: Snapshot, b: Snapshot) -> SnapshotDiff:
    """The objects ``b`` has that ``a`` lacks (added) and the reverse (removed). Pure."""
    added = tuple(o for i, o in b.objects.items() if i not in a.objects)
    removed = tuple(o for i, o in a.objects.items() if i not in b.objects)
    return SnapshotDiff(a.commit_id, b.commit_id, added, removed)
