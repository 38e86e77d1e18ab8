"""lakepool's core: a git-like data lake of pools on object storage.

Knows nothing of Spark or Dagster. The public Python API::

    from lake_core import Lake, LakeConfig
    lake = Lake.init("/tmp/lake")            # or Lake.open("s3://bucket/lake")
    pool = lake.create_pool("logs", "ts:desc")
    commit = pool_load(pool, ["events.ndjson"])
"""

from lake_core.config import LakeConfig, RetryPolicy
from lake_core.errors import LakeError
from lake_core.lake import Lake
from lake_core.pool import Pool

__all__ = ["Lake", "LakeConfig", "LakeError", "Pool", "RetryPolicy"]
