"""lakepool's core: a git-like data lake of pools on object storage.

Knows nothing of Spark, Dagster or the CLI. :class:`Pool` is the one handle, for writes as for
reads (``tests/core/test_readme_python.py`` runs this example)::

    >>> import pyarrow as pa
    >>> from lake_core import Lake
    >>> lake = Lake.init("demo-lake")        # or "s3://bucket/lake"; Lake.open(...) later
    >>> pool = lake.create_pool("logs", "ts:desc")
    >>> commit = pool.load(pa.table({"ts": [1, 2, 3], "user": ["ann", "bob", "cy"]}))
    >>> pool.read(where="ts >= 2")["user"].to_pylist()
    ['cy', 'bob']
    >>> deleted = pool.delete(where="user = 'bob'")
    >>> deleted.rows_removed - deleted.rows_added
    1
    >>> pool.read().to_pylist()
    [{'ts': 3, 'user': 'cy'}, {'ts': 1, 'user': 'ann'}]
    >>> undone = pool.revert(deleted.id)
    >>> pool.count("ts > 1").rows
    2
"""

from lake_core.config import LakeConfig, RetryPolicy
from lake_core.errors import LakeError
from lake_core.lake import Lake
from lake_core.pool import Pool

__all__ = ["Lake", "LakeConfig", "LakeError", "Pool", "RetryPolicy"]
