"""Maintenance: LSM compaction, partitions, retain, vacate, cleanup and purge. Every operation here
runs under the pool's maintenance lock (see :mod:`lake_core.locks`) and passes the lock's
``check`` as the commit guard."""

from lake_core.maintenance.cleanup import CleanupResult, cleanup
from lake_core.maintenance.compact import (
    CompactionResult,
    Fragmentation,
    compact,
    fragmentation,
)
from lake_core.maintenance.partitions import (
    PartitionInfo,
    drop_partition,
    list_partitions,
    rewrite_partition,
)
from lake_core.maintenance.policy import CompactionRun, plan_compaction
from lake_core.maintenance.purge import PurgeResult, purge
from lake_core.maintenance.retain import RetainResult, retain
from lake_core.maintenance.vacate import VacateResult, vacate

__all__ = [
    "CleanupResult",
    "CompactionResult",
    "CompactionRun",
    "Fragmentation",
    "PartitionInfo",
    "PurgeResult",
    "RetainResult",
    "VacateResult",
    "cleanup",
    "compact",
    "drop_partition",
    "fragmentation",
    "list_partitions",
    "plan_compaction",
    "purge",
    "retain",
    "rewrite_partition",
    "vacate",
]
