"""The lake's metadata tables and catalog views, plugged into SQL name resolution.

Registers with the resolver's seams (:mod:`lake_core.sql.resolve`): ``POOL$commits``,
``$objects``, ``$branches``, ``$partitions``, ``$indexes`` (:mod:`lake_core.introspection`, read at the
name's ``@REF``, or as of the query's ``--as-of``), ``lake$pools`` and ``lake$views`` (the
catalog version of ``--as-of``, else the latest), and a view lookup: a name that is no pool
but a view of the latest catalog version reads as the view's SELECT, after checking that the
view does not reach itself through other views (:func:`lake_core.views.expansion_order`).
Importing this module registers them (``lake_core.sql`` does), once.
"""

from __future__ import annotations

from collections.abc import Callable

import pyarrow as pa

from lake_core.introspection import (
    branches_table,
    catalog_snapshot,
    commits_table,
    indexes_table,
    objects_table,
    partitions_table,
    pools_table,
    views_table,
)
from lake_core.names import DEFAULT_NAMESPACE, PoolName
from lake_core.otree.introspect import cubes_table
from lake_core.sql.errors import SqlError
from lake_core.sql.resolve import LAKE_META_TABLES, POOL_META_TABLES, VIEW_LOOKUPS, MetaRequest
from lake_core.views import expansion_order, get_view

__all__ = ["register", "view_lookup", "view_tables"]


def _commits(request: MetaRequest) -> pa.Table:
    assert request.pool is not None
    return commits_table(request.pool, request.name.ref, request.as_of)


def _objects(request: MetaRequest) -> pa.Table:
    assert request.pool is not None
    return objects_table(request.pool, request.name.ref, request.as_of)


def _partitions(request: MetaRequest) -> pa.Table:
    assert request.pool is not None
    return partitions_table(request.pool, request.name.ref, request.as_of)


def _indexes(request: MetaRequest) -> pa.Table:
    assert request.pool is not None
    return indexes_table(request.pool, request.name.ref, request.as_of)


def _cubes(request: MetaRequest) -> pa.Table:
    assert request.pool is not None
    return cubes_table(request.pool, request.name.ref, request.as_of)


def _branches(request: MetaRequest) -> pa.Table:
    assert request.pool is not None
    if request.name.ref is not None:
        raise SqlError(f"{request.name}: branches belong to the pool, not to a ref")
    return branches_table(request.pool, request.as_of)


def _lake_table(make: Callable[..., pa.Table]) -> Callable[[MetaRequest], pa.Table]:
    def read(request: MetaRequest) -> pa.Table:
        if request.lake is None:
            raise SqlError(f"{request.name}: the lake's tables need a lake")
        return make(catalog_snapshot(request.lake, None, request.as_of))

    return read


def view_lookup(request: MetaRequest) -> str | None:
    """The SELECT of the view ``request.name`` names (latest catalog version), or None when
    it names no view. Raises UsageError when the view reaches itself."""
    name = request.name
    if request.lake is None or name.pool is None or name.meta is not None or name.ref is not None:
        return None
    view_name = PoolName(name.namespace or DEFAULT_NAMESPACE, name.pool)
    state = request.lake.catalog.snapshot().state
    if get_view(state, view_name) is None:
        return None
    return expansion_order(state, view_name)[-1].sql


def view_tables(sql: str) -> list[str]:
    """The guard of a view's SQL: :func:`lake_core.sql.analyze.analyze` (one read-only
    SELECT, no file-reading table function), and the table names it reads as written, CTE
    names left out. Raises SqlSyntaxError, SqlRefusedError."""
    import duckdb  # deferred: DuckDB is imported by SQL only

    from lake_core.sql.analyze import analyze

    con = duckdb.connect(":memory:")
    try:
        analysis = analyze(con, sql)
    finally:
        con.close()
    return [key for key in analysis.tables if key not in analysis.cte_names]


def register() -> None:
    """Plug the tables and the view lookup into the resolver (idempotent)."""
    POOL_META_TABLES.update(
        commits=_commits,
        objects=_objects,
        branches=_branches,
        partitions=_partitions,
        indexes=_indexes,
        cubes=_cubes,
    )
    LAKE_META_TABLES.update(pools=_lake_table(pools_table), views=_lake_table(views_table))
    if view_lookup not in VIEW_LOOKUPS:
        VIEW_LOOKUPS.append(view_lookup)


register()
