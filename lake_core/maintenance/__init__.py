"""Maintenance: LSM compaction, partitions, vacate, cleanup and purge. Every operation here
runs under the pool's maintenance lock (see :mod:`lake_core.locks`) and passes the lock's
``check`` as the commit guard."""

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
from lake_core.maintenance.vacate import VacateResult, vacate

__all__ = [
    "CompactionResult",
    "CompactionRun",
    "Fragmentation",
    "PartitionInfo",
    "VacateResult",
    "compact",
    "drop_partition",
    "fragmentation",
    "list_partitions",
    "plan_compaction",
    "rewrite_partition",
    "vacate",
]
