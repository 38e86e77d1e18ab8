"""``lake optimize``: rewrite an OTree pool's live objects as one fresh tree in the latest
revision, with the pool's full cube size.

A pool needs it when its branch holds

* unindexed objects (revision 0: written by a ``delete --where`` rewrite, or of a revision the
  catalog forgot), which every read must open whole;
* objects of older revisions, whose cubes are in other coordinates: reads consult each; or
* cubes with blocks in several objects (appends into one revision: each built its own, smaller
  cubes), which samples read more of than one build would.

Otherwise there is nothing to do, so optimizing twice changes nothing the second time. The
rewrite keeps every row and its stored weight (``_lake_weight`` is read, never recomputed: a
salted weight stays what it was), so every sample and query answers the same before and after.
It is one commit deleting exactly the objects it read, marked layout-only (``kind`` =
``compaction``: history, revert and merge see no change of rows); a racing load's objects stay,
and a racing change to the objects it read makes it fail cleanly (a conflict), its written
objects removed. It reads the branch into memory: a pool larger than memory is rebuilt with a
Spark load instead.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lake_core.commit import Commit
from lake_core.committing import discarding_on_failure
from lake_core.names import MAIN
from lake_core.objects import ObjectMeta
from lake_core.otree.blocks import blocks_of, revision_of, uid_of
from lake_core.otree.settings import OTreeLayout
from lake_core.otree.write import write_otree
from lake_core.writer import WriteOptions

if TYPE_CHECKING:
    from lake_core.pool import Pool


@dataclass(frozen=True)
class OptimizeResult:
    """What an optimize did; ``commit`` is None when there was nothing to do."""

    commit: Commit | None
    reason: str = ""
    objects_in: int = 0
    objects_out: int = 0
    rows: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    revision: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "commit": None if self.commit is None else self.commit.id,
            "reason": self.reason,
            "objects_in": self.objects_in,
            "objects_out": self.objects_out,
            "rows": self.rows,
            "bytes_in": self.bytes_in,
            "bytes_out": self.bytes_out,
            "revision": self.revision,
        }


def needs_optimize(layout: OTreeLayout, objects: list[ObjectMeta]) -> str:
    """Why the objects of a branch need rewriting ("" when they do not)."""
    latest = layout.latest
    if not objects:
        return ""
    if latest is None:  # loaded by paths that build no tree (a Spark load): index them all
        return f"{len(objects)} unindexed object(s)"
    unindexed = 0
    older = 0
    homes: dict[str, str] = {}
    split = 0
    for obj in objects:
        revision = layout.revision(revision_of(obj), uid_of(obj))
        blocks = None if revision is None else blocks_of(obj, revision.dims)
        if revision is None or blocks is None:
            unindexed += 1
            continue
        if revision.id != latest.id:
            older += 1
            continue
        for block in blocks:
            cube = block.cube.to_string()
            if homes.setdefault(cube, obj.id) != obj.id:
                split += 1
    reasons = []
    if unindexed:
        reasons.append(f"{unindexed} unindexed object(s)")
    if older:
        reasons.append(f"{older} object(s) of older revisions")
    if split:
        reasons.append(f"cubes split over several objects ({split} block(s) elsewhere)")
    return ", ".join(reasons)


def pool_needs_optimize(pool: Pool, branch: str = MAIN) -> str:
    """Why ``branch`` of OTree pool ``pool`` needs :func:`optimize` ("" when it does not)."""
    layout = pool.config.otree
    if layout is None:
        return ""
    return needs_optimize(layout, list(pool.snapshot(pool.tip(branch)).objects.values()))


def optimize(
    pool: Pool,
    branch: str = MAIN,
    *,
    guard: Callable[[], None] | None = None,
    author: str | None = None,
    message: str = "",
    on_object: Callable[[ObjectMeta], None] | None = None,
) -> OptimizeResult:
    """Rewrite ``branch`` of OTree pool ``pool`` as one tree in its latest revision, if it
    needs it (see the module docstring). Raises UsageError for a pool without the OTree
    layout, CommitConflictError when a racing commit changed the objects it read,
    CommitStateUnknownError (the objects stay: the commit may have landed)."""
    from lake_core.otree.settings import refuse_unless_otree

    layout = refuse_unless_otree(pool.config.otree, pool.name)
    tip = pool.tip(branch)
    snapshot = pool.snapshot(tip)
    objects = list(snapshot.objects.values())
    reason = needs_optimize(layout, objects)
    if not reason:
        return OptimizeResult(None)
    started = pool.clock.now()
    # Exactly the rows of the objects it deletes: the tip it planned on, not a newer one.
    table = pool.scan(tip).to_table()
    revision = pool.otree_revision(table)
    written = write_otree(
        pool.store,
        pool.id,
        table,
        pool.config.key.resolve(table.schema),
        revision,
        0,
        WriteOptions(pool.config.target_size, pool.config.seek_stride),
        clock=pool.clock,
        on_object=on_object,
    )
    from lake_core.inflight import write_window_guard

    window = write_window_guard(pool.clock, started)

    def both() -> None:
        window()
        if guard is not None:
            guard()

    bytes_in = sum(o.size for o in objects)
    bytes_out = sum(o.size for o in written)
    stats = {
        "objects_in": len(objects),
        "objects_out": len(written),
        "rows": table.num_rows,
        "bytes_in": bytes_in,
        "bytes_out": bytes_out,
        "revision": revision.id,
    }
    with discarding_on_failure(pool, written):
        commit = pool.commit(
            branch,
            written,
            [o.id for o in objects],
            author=author,
            guard=both,
            message=message
            or f"optimized {len(objects)} objects into {len(written)} (revision {revision.id})",
            meta={"optimize": stats},
            extra={"kind": "compaction"},  # layout only: no row changes
        )
    return OptimizeResult(
        commit, reason, len(objects), len(written), table.num_rows, bytes_in, bytes_out, revision.id
    )


__all__ = ["OptimizeResult", "needs_optimize", "optimize", "pool_needs_optimize"]
