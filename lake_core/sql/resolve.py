"""What each table name of a query stands for: a pool snapshot, a metadata table, a view.

The registration seams (metadata tables and catalog views are added by their own modules):

* :data:`POOL_META_TABLES`: meta kind (``commits``, ``objects`` …) → function of a
  :class:`MetaRequest` giving a ``pyarrow.Table``; ``flights$commits`` calls it with the pool.
* :data:`LAKE_META_TABLES`: the same for the lake's own tables (``lake$pools``).
* :data:`VIEW_LOOKUPS`: functions ``(request) -> SQL text | None`` tried, in order, for a name
  that is no pool; the first SQL found is the view's definition.

Until something registers a kind, ``flights$commits`` fails with ``unknown metadata table``;
an unknown name is ``pool not found``.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

import pyarrow as pa

from lake_core.errors import PoolNotFoundError
from lake_core.sql.errors import SqlError
from lake_core.sql.names import TableRef

if TYPE_CHECKING:
    from lake_core.lake import Lake
    from lake_core.pool import Pool
    from lake_core.snapshot import Snapshot

__all__ = [
    "LAKE_META_TABLES",
    "POOL_META_TABLES",
    "VIEW_LOOKUPS",
    "MetaRequest",
    "PoolTable",
    "Resolved",
    "TableTable",
    "ViewTable",
    "pool_schemas",
    "resolve_table",
    "resolve_tables",
]


@dataclass(frozen=True)
class MetaRequest:
    """What a metadata table (or view lookup) is asked for."""

    lake: Lake | None
    #: The pool for a pool's metadata table (None for the lake's own, and for views).
    pool: Pool | None
    name: TableRef
    #: ``--as-of``: every table of the query is read as of this time (None: now).
    as_of: datetime | None


POOL_META_TABLES: dict[str, Callable[[MetaRequest], pa.Table]] = {}
LAKE_META_TABLES: dict[str, Callable[[MetaRequest], pa.Table]] = {}
VIEW_LOOKUPS: list[Callable[[MetaRequest], str | None]] = []


@dataclass(frozen=True)
class PoolTable:
    """The rows of one pool snapshot."""

    pool: Pool
    commit_id: str | None
    snapshot: Snapshot


@dataclass(frozen=True)
class TableTable:
    """A table computed from metadata (small: materialised)."""

    table: pa.Table


@dataclass(frozen=True)
class ViewTable:
    """A view: SQL run in the same session."""

    sql: str


Resolved = PoolTable | TableTable | ViewTable

#: Opens a pool by ``NS.NAME``; raises PoolNotFoundError.
PoolOpener = Callable[[str], "Pool"]


def resolve_table(
    name: TableRef, open_pool: PoolOpener, lake: Lake | None, as_of: datetime | None
) -> Resolved:
    """What ``name`` reads. Raises PoolNotFoundError, BranchNotFoundError and the other
    ref errors of :meth:`Pool.resolve`, SqlError for an unknown metadata table."""
    if name.pool is None:
        assert name.meta is not None
        make = LAKE_META_TABLES.get(name.meta)
        if make is None:
            raise SqlError(f"{name}: unknown metadata table{_known(LAKE_META_TABLES)}")
        return TableTable(make(MetaRequest(lake, None, name, as_of)))
    pool_name = name.pool_name
    assert pool_name is not None
    if name.meta is not None and name.meta not in POOL_META_TABLES and name.ref is None:
        # "a$b" with no metadata table b: a pool whose name holds a '$', if there is one.
        try:
            pool = open_pool(f"{pool_name}${name.meta}")
        except PoolNotFoundError:
            pass
        else:
            commit_id = pool.resolve(None, as_of)
            return PoolTable(pool, commit_id, pool.snapshot(commit_id))
    try:
        pool = open_pool(pool_name)
    except PoolNotFoundError:
        for lookup in VIEW_LOOKUPS:
            sql = lookup(MetaRequest(lake, None, name, as_of))
            if sql is not None:
                return ViewTable(sql)
        raise
    if name.meta is not None:
        make = POOL_META_TABLES.get(name.meta)
        if make is None:
            raise SqlError(f"{name}: unknown metadata table{_known(POOL_META_TABLES)}")
        return TableTable(make(MetaRequest(lake, pool, name, as_of)))
    commit_id = pool.resolve(name.ref, as_of)
    return PoolTable(pool, commit_id, pool.snapshot(commit_id))


def resolve_tables(
    tables: Mapping[str, TableRef],
    cte_names: Collection[str],
    open_pool: PoolOpener,
    lake: Lake | None,
    as_of: datetime | None,
) -> dict[str, Resolved]:
    """:func:`resolve_table` for each of a query's table names. A name that is no pool but a
    CTE of the query is left out: the CTE is what the query reads."""
    resolved: dict[str, Resolved] = {}
    for key, ref in tables.items():
        try:
            resolved[key] = resolve_table(ref, open_pool, lake, as_of)
        except PoolNotFoundError:
            if key not in cte_names:
                raise
    return resolved


def pool_schemas(resolved: Mapping[str, Resolved]) -> dict[str, pa.Schema | None]:
    """Each resolved name's pool schema (None for metadata tables and views): what the
    predicate extraction binds unqualified columns with."""
    return {
        k: (r.snapshot.schema if isinstance(r, PoolTable) else None) for k, r in resolved.items()
    }


def _known(kinds: Mapping[str, object]) -> str:
    return f" (known: {', '.join(sorted(kinds))})" if kinds else ""
