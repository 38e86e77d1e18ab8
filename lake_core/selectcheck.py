"""Checking that SQL text is one read-only SELECT, and which tables it reads, with DuckDB's
parser (``json_serialize_sql``, which serializes SELECT statements only).

Used where SQL is stored to run later (views): it must be one SELECT, read only tables (no
table functions such as ``read_csv``, which would read files outside the lake), and name
tables as the lake resolves them (``NAME`` or ``NS.NAME``, optionally ``@REF``/``$META``).
"""

from __future__ import annotations

import json
from typing import Any

from lake_core.errors import UsageError


def select_tables(sql: str) -> list[str]:
    """The table names ``sql`` reads, as written (``NS.NAME`` when qualified), in order of
    appearance, common-table-expression names left out. Raises UsageError when ``sql`` is not
    one SELECT, does not parse, calls a table function or names a three-part table."""
    import duckdb  # deferred: only SQL needs it

    con = duckdb.connect()
    try:
        row = con.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()
    except duckdb.Error as e:
        raise UsageError(f"SQL: {e}") from None
    finally:
        con.close()
    doc: dict[str, Any] = (
        json.loads(row[0]) if row else {"error": True, "error_message": "no result"}
    )
    if doc.get("error"):
        message = str(doc.get("error_message", "not a SELECT"))
        if message.startswith("Only SELECT"):
            message = "only a read-only SELECT is allowed"
        raise UsageError(f"SQL: {message}")
    statements: list[Any] = doc.get("statements", [])
    if len(statements) != 1:
        raise UsageError(f"SQL: one SELECT statement expected, not {len(statements)}")
    ctes: set[str] = set()
    tables: list[str] = []
    _walk(statements[0], ctes, tables)
    return [t for t in dict.fromkeys(tables) if t.lower() not in ctes]


def _walk(node: Any, ctes: set[str], tables: list[str]) -> None:
    if isinstance(node, list):
        for item in node:
            _walk(item, ctes, tables)
        return
    if not isinstance(node, dict):
        return
    cte_map = node.get("cte_map")
    if isinstance(cte_map, dict):
        for entry in cte_map.get("map", []):
            ctes.add(str(entry.get("key", "")).lower())
    kind = node.get("type")
    if kind == "TABLE_FUNCTION":
        raise UsageError("SQL: table functions are not allowed; read pools by name")
    if kind == "BASE_TABLE" and "table_name" in node:
        if node.get("catalog_name"):
            raise UsageError(
                f"SQL: {node['catalog_name']}.{node.get('schema_name')}.{node['table_name']}: "
                "a table is NAME or NS.NAME"
            )
        schema = node.get("schema_name") or ""
        tables.append(f"{schema}.{node['table_name']}" if schema else str(node["table_name"]))
    for value in node.values():
        if isinstance(value, (dict, list)):
            _walk(value, ctes, tables)
