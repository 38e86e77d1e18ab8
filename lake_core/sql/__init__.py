"""Read-only SQL over a lake's pools, executed by embedded DuckDB after the lake has planned
what to read (:mod:`lake_core.planning`). See docs/sql.md.

Modules: :mod:`~lake_core.sql.names` (the table-name grammar), :mod:`~lake_core.sql.analyze`
(parse tree: refusals, tables, pushdown), :mod:`~lake_core.sql.pushdown` (SQL conjuncts as
the lake's predicates), :mod:`~lake_core.sql.resolve` (names → pools, metadata tables, views;
the registration seams), :mod:`~lake_core.sql.engine` (the DuckDB session),
:mod:`~lake_core.sql.metadata` (metadata tables and catalog views, registered at import).
"""

# Imported for its effect: it registers the metadata tables and views with the resolver.
import lake_core.sql.metadata  # noqa: F401
from lake_core.sql.engine import SqlRun, engine_error, run_sql
from lake_core.sql.errors import SqlError, SqlRefusedError, SqlSyntaxError
from lake_core.sql.names import TableRef, parse_table_name
from lake_core.sql.resolve import (
    LAKE_META_TABLES,
    POOL_META_TABLES,
    VIEW_LOOKUPS,
    MetaRequest,
)

__all__ = [
    "LAKE_META_TABLES",
    "POOL_META_TABLES",
    "VIEW_LOOKUPS",
    "MetaRequest",
    "SqlError",
    "SqlRefusedError",
    "SqlRun",
    "SqlSyntaxError",
    "TableRef",
    "engine_error",
    "parse_table_name",
    "run_sql",
]
