"""lakepool's Dagster adapter: pools as assets, landing-zone sensors, compaction and retention
jobs and schedules, asset checks and observations, built from a pools YAML config.

A thin layer over :mod:`lake_core` (and lake_spark for the ``spark`` engine); it holds no lake
logic of its own. The code location is :mod:`lake_orchestration.definitions`; see
docs/orchestration.md.
"""

from lake_orchestration.config import PoolsConfig, PoolSpec, load_pools_config, parse_pools_config
from lake_orchestration.resources import LakeResource, S3Settings, ZooKeeperResource

__all__ = [
    "LakeResource",
    "PoolSpec",
    "PoolsConfig",
    "S3Settings",
    "ZooKeeperResource",
    "load_pools_config",
    "parse_pools_config",
]
