"""``lake index apply``: index objects already live (or remove their index entries) in one
commit.

The commit holds only AddIndex (or DeleteIndex) actions, is marked ``kind: index`` and
``layout_only`` (it changes no row, so history operations see through it), and is planned
against whatever tip it lands on (:func:`lake_core.committing.plan_index_actions`): an object a
racing compaction deleted meanwhile simply loses its new index (the file is an orphan for
cleanup), and an object another ``apply`` indexed first is not indexed twice. When nothing is
left to do, nothing is committed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lake_core.errors import EmptyTransactionError, NotFoundError, UsageError
from lake_core.indexes.building import build_indexes
from lake_core.indexes.coverage import wants_index
from lake_core.inflight import write_window_guard
from lake_core.names import MAIN

if TYPE_CHECKING:
    from lake_core.commit import Commit
    from lake_core.indexes.rules import IndexRule
    from lake_core.objects import ObjectMeta
    from lake_core.pool import Pool

#: Objects indexed per batch (progress is reported per batch).
BATCH = 16


@dataclass(frozen=True)
class ApplyResult:
    """What ``apply`` did: ``indexed`` index objects written and committed (``removed``
    entries taken out), ``bytes`` their total size, ``skipped`` objects already indexed by the
    rule or without its field; ``commit`` None when nothing was committed."""

    pool: str
    rule: str
    commit: Commit | None
    indexed: int = 0
    removed: int = 0
    skipped: int = 0
    bytes: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "pool": self.pool,
            "rule": self.rule,
            "commit": self.commit.id if self.commit else None,
            "indexed": self.indexed,
            "removed": self.removed,
            "skipped": self.skipped,
            "bytes": self.bytes,
        }


def _targets(
    live: Sequence[ObjectMeta], object_ids: Sequence[str] | None, where: str
) -> list[ObjectMeta]:
    """The live objects ``object_ids`` names (all when None); ``where`` (``POOL@BRANCH``)
    names the branch in the error for an id that is not live there."""
    if object_ids is None:
        return list(live)
    by_id = {o.id: o for o in live}
    missing = [i for i in object_ids if i not in by_id]
    if missing:
        raise NotFoundError("object", missing[0], f"not live on {where}")
    return [by_id[i] for i in dict.fromkeys(object_ids)]


def _index_commit(
    pool: Pool, branch: str, author: str | None, message: str, **changes: Any
) -> Commit | None:
    """The one commit of an apply or a removal (``changes``: ``index_adds`` or
    ``index_deletes``, and a ``guard``): only index actions, ``kind: index``, layout only;
    None when, against the tip it lands on, nothing is left to do."""
    try:
        return pool.commit(
            branch,
            [],
            [],
            author=author,
            message=message,
            extra={"kind": "index", "layout_only": True},
            index=False,
            **changes,
        )
    except EmptyTransactionError:
        return None


def apply_rule(
    pool: Pool,
    rule: IndexRule,
    object_ids: Sequence[str] | None = None,
    *,
    branch: str = MAIN,
    author: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    build: Callable[[Sequence[ObjectMeta]], list[Any]] | None = None,
) -> ApplyResult:
    """Index the live objects of ``branch`` (or ``object_ids`` of them) under ``rule`` that
    are not indexed by it yet, in one commit. ``progress(done, total)`` is called as objects
    are indexed. ``build`` replaces the local builder (the Spark path builds on executors and
    returns the same IndexMeta). Raises UsageError (the rule does not cover the pool),
    NotFoundError (an object id not live), and what reading or committing raises."""
    if not rule.covers(pool.config.name):
        raise UsageError(f"index rule {rule.full_name} does not cover pool {pool.name}")
    # The index files are unreferenced until the commit lands: like a load, the apply must
    # commit within the write window or not at all, so cleanup's minimum orphan age covers it.
    guard = write_window_guard(pool.clock, pool.clock.now())
    snap = pool.snapshot(pool.tip(branch))
    targets = _targets(list(snap.objects.values()), object_ids, f"{pool.name}@{branch}")
    todo = []
    for obj in targets:
        held = snap.indexes.get((obj.id, rule.name))
        if (held is not None and held.rule_id == rule.id) or not wants_index(obj, rule, snap.schema):
            continue
        todo.append(obj)
    skipped = len(targets) - len(todo)
    metas: list[Any] = []
    if build is not None:
        metas = build(todo)
    else:
        for start in range(0, len(todo), BATCH):
            chunk = todo[start : start + BATCH]
            metas.extend(
                build_indexes(pool.store, pool.id, pool.name, chunk, [rule], pool.clock)
            )
            if progress is not None:
                progress(start + len(chunk), len(todo))
    if not metas:
        return ApplyResult(pool.name, rule.full_name, None, skipped=skipped + len(todo))
    landed = _index_commit(
        pool,
        branch,
        author,
        f"index {len(metas)} object(s) by rule {rule.full_name}",
        guard=guard,
        index_adds=metas,
    )
    if landed is None:
        return ApplyResult(pool.name, rule.full_name, None, skipped=len(targets))
    added = landed.index_adds()
    return ApplyResult(
        pool.name,
        rule.full_name,
        landed,
        indexed=len(added),
        skipped=len(targets) - len(added),
        bytes=sum(m.size for m in added),
    )


def remove_rule(
    pool: Pool,
    rule_name: str,
    object_ids: Sequence[str] | None = None,
    *,
    branch: str = MAIN,
    author: str | None = None,
) -> ApplyResult:
    """Take the index entries of rule ``rule_name`` (its name in the pool's namespace; the
    rule may be dropped already) out of ``branch``'s snapshot, for every object or
    ``object_ids``, in one commit. The index files leave with cleanup."""
    snap = pool.snapshot(pool.tip(branch))
    if object_ids is not None:
        _targets(list(snap.objects.values()), object_ids, f"{pool.name}@{branch}")
    wanted = None if object_ids is None else set(object_ids)
    slots = [
        (oid, r)
        for (oid, r) in snap.indexes
        if r == rule_name and (wanted is None or oid in wanted)
    ]
    if not slots:
        return ApplyResult(pool.name, rule_name, None)
    landed = _index_commit(
        pool,
        branch,
        author,
        f"remove the index entries of rule {rule_name} from {len(slots)} object(s)",
        index_deletes=slots,
    )
    if landed is None:
        return ApplyResult(pool.name, rule_name, None)
    return ApplyResult(pool.name, rule_name, landed, removed=len(landed.index_deletes()))
