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

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from lake_core.config import LakeConfig, RetryPolicy
    from lake_core.errors import LakeError
    from lake_core.lake import Lake
    from lake_core.pool import Pool

__all__ = ["Lake", "LakeConfig", "LakeError", "Pool", "RetryPolicy"]


def __getattr__(name: str) -> Any:
    """The public names, imported on first use (PEP 562). Importing any ``lake_core`` module
    runs this package first; importing :class:`Lake` here eagerly would pull pyarrow.dataset
    (and with it pandas), protobuf and the catalog into every process that only wants, say,
    ``lake_core.errors`` — the ``lake`` command's ``--help`` among them (tests/cli/test_startup.py)."""
    if name in ("LakeConfig", "RetryPolicy"):
        from lake_core import config

        return getattr(config, name)
    if name == "LakeError":
        from lake_core.errors import LakeError

        return LakeError
    if name == "Lake":
        from lake_core.lake import Lake

        return Lake
    if name == "Pool":
        from lake_core.pool import Pool

        return Pool
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
