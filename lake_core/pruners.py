"""The pruning rules every read plans with: the one place read features plug into.

The pyarrow scan (``lake query -p … --where``), DuckDB and Spark (SQL) all call
:func:`read_pruners` and hand the list to :func:`lake_core.planning.plan_read`, so every engine
skips exactly the same objects and row groups and ``--stats`` counts the same way. A new read
feature adds its rule here (as the OTree's cubes and samples did: :mod:`lake_core.otree.pruner`);
rules run in order and each sees only what the rules before it kept.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyarrow as pa

from lake_core.expr import Expr
from lake_core.indexes.pruner import IndexPruner
from lake_core.otree.pruner import otree_rules
from lake_core.planning import Pruner, StatsPruner

if TYPE_CHECKING:
    from lake_core.otree.settings import OTreeLayout
    from lake_core.poolkey import PoolKey
    from lake_core.snapshot import Snapshot
    from lake_core.stores.base import ObjectStore


def read_pruners(
    snapshot: Snapshot,
    key: PoolKey,
    predicate: Expr | None,
    schema: pa.Schema,
    store: ObjectStore | None = None,
    pool_id: str | None = None,
    otree: OTreeLayout | None = None,
) -> list[Pruner]:
    """The pruning rules a read of ``snapshot`` plans with: none without a predicate; the
    stats rule; the index rule when ``store`` is given and an index entry of the snapshot is
    on a field the predicate pins; the OTree rule for a pool of that layout (``otree``: its
    settings) when the predicate bounds its weight (a sample) or an indexed column."""
    if predicate is None:
        return []
    # The OTree rule first: it decides from the commit's block tags alone, the cheapest test,
    # and --stats then says what the cubes and the sample skipped.
    rules: list[Pruner] = [
        *otree_rules(predicate, schema, otree),
        StatsPruner(predicate, schema, key),
    ]
    if store is not None and pool_id is not None and snapshot.indexes:
        index = IndexPruner(predicate, schema, snapshot.indexes, store, pool_id)
        if index.active:
            rules.append(index)
    return rules


__all__ = ["read_pruners"]
