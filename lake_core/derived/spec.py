"""What a derived pool computes: its definition, read through DuckDB's own parser.

A definition is one ``SELECT`` over one pool (the *source*), grouped by one time bucket
``date_trunc('UNIT', COLUMN)`` and any number of plain columns, selecting only those and
decomposable aggregates of source columns: ``count(*)``, ``count(x)``, ``sum(x)``, ``min(x)``,
``max(x)`` (``avg`` is not stored: a query's ``avg(x)`` is answered as ``sum(x) / count(x)``).
No WHERE, HAVING, DISTINCT, window, join or subquery: filters belong to the queries that use
the derived pool. Every output has a name (``AS``), unique.

For every ``sum(x)`` the derived pool also keeps ``count(x)`` (a hidden column
``__count_x`` when the definition does not select it), so ``avg(x)`` is exact over columns
with nulls.

Invariant: a derived row is the aggregate of the source rows of its bucket and group values;
:meth:`DerivedSpec.partial_sql` computes such rows from any set of source rows, and
:meth:`DerivedSpec.merge_sql` combines rows of disjoint sets of source rows into the rows of
their union (count and sum add, min and max take the extreme; SQL's sum of nothing is null,
and so is the merge of nulls).
"""

from __future__ import annotations

import copy
import functools
import json
import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from lake_core.errors import UsageError

if TYPE_CHECKING:
    import duckdb

#: Bucket units, finest first; a query's unit can be answered from a derived unit when each
#: of its buckets is a union of derived buckets (:func:`coarser_or_equal`).
UNITS = ("second", "minute", "hour", "day", "week", "month", "quarter", "year")
_CONTAINS: dict[str, frozenset[str]] = {
    "second": frozenset(UNITS),
    "minute": frozenset(UNITS[1:]),
    "hour": frozenset(UNITS[2:]),
    "day": frozenset(UNITS[3:]),
    "week": frozenset({"week"}),  # weeks straddle months and years
    "month": frozenset({"month", "quarter", "year"}),
    "quarter": frozenset({"quarter", "year"}),
    "year": frozenset({"year"}),
}
#: Aggregates a definition may hold, by DuckDB's function name.
AGGREGATES = ("count_star", "count", "sum", "min", "max")
HIDDEN_COUNT = "__count_"


@dataclass(frozen=True)
class DerivedLink:
    """What the catalog keeps of a derived pool: its source pool's id and its definition."""

    source_id: str
    sql: str


def coarser_or_equal(query_unit: str, derived_unit: str) -> bool:
    """Whether every ``query_unit`` bucket is a union of ``derived_unit`` buckets."""
    return query_unit in _CONTAINS.get(derived_unit, frozenset())


@dataclass(frozen=True)
class Aggregate:
    """One stored aggregate: ``function`` (:data:`AGGREGATES`) of ``column`` (None for
    ``count_star``), stored as ``name``."""

    name: str
    function: str
    column: str | None

    def sql(self) -> str:
        if self.function == "count_star":
            return f"count(*) AS {quote(self.name)}"
        assert self.column is not None
        return f"{self.function}({quote(self.column)}) AS {quote(self.name)}"

    def merge_sql(self) -> str:
        """Combines stored values of disjoint row sets (count and sum add)."""
        name = quote(self.name)
        if self.function in ("count_star", "count"):
            return f"CAST(sum({name}) AS BIGINT) AS {name}"
        return f"{self.function}({name}) AS {name}"


@dataclass(frozen=True)
class DerivedSpec:
    """A parsed definition (see the module docstring)."""

    sql: str
    source: str  # the pool's name as written
    bucket_name: str
    bucket_unit: str
    bucket_column: str
    groups: tuple[tuple[str, str], ...]  # (output name, source column)
    aggregates: tuple[Aggregate, ...]  # as defined, then hidden counts

    @property
    def key(self) -> tuple[str, ...]:
        """The derived pool's key: the bucket, then the group columns."""
        return (self.bucket_name, *(name for name, _ in self.groups))

    def aggregate(self, function: str, column: str | None) -> Aggregate | None:
        """The stored aggregate computing ``function(column)``, if any."""
        for a in self.aggregates:
            if a.function == function and a.column == column:
                return a
        return None

    def partial_sql(self, relation: str) -> str:
        """The derived rows of the source rows in ``relation``."""
        items = [
            f"date_trunc('{self.bucket_unit}', {quote(self.bucket_column)}) AS "
            f"{quote(self.bucket_name)}",
            *(f"{quote(column)} AS {quote(name)}" for name, column in self.groups),
            *(a.sql() for a in self.aggregates),
        ]
        return f"SELECT {', '.join(items)} FROM {relation} GROUP BY ALL"

    def merge_sql(self, relation: str) -> str:
        """The derived rows of the union of the row sets whose derived rows ``relation``
        holds (several rows per key)."""
        keys = [quote(k) for k in self.key]
        items = [*keys, *(a.merge_sql() for a in self.aggregates)]
        return f"SELECT {', '.join(items)} FROM {relation} GROUP BY ALL"

    def to_json(self) -> dict[str, Any]:
        return {"sql": self.sql, "source": self.source}


def quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _refuse(why: str) -> UsageError:
    return UsageError(f"a derived pool's query {why}")


def _column(node: dict[str, Any]) -> str | None:
    if node.get("class") == "COLUMN_REF" and len(node.get("column_names", [])) >= 1:
        return str(node["column_names"][-1])
    return None


def _arguments(node: dict[str, Any]) -> list[dict[str, Any]]:
    """A FUNCTION node's argument expressions (DuckDB 2 wraps them; older ones did not)."""
    out = []
    for arg in node.get("arguments", node.get("children", [])):
        out.append(arg.get("expression", arg))
    return out


def _literal_text(node: dict[str, Any]) -> str | None:
    if node.get("class") != "CONSTANT":
        return None
    value = node.get("literal", node.get("value"))
    if isinstance(value, dict):
        text = value.get("text", value.get("value"))
        return None if text is None else str(text)
    return None


_LOCAL = threading.local()


def scratch() -> duckdb.DuckDBPyConnection:
    """This thread's in-memory DuckDB for parsing and small computations (a connection costs
    tens of milliseconds to open; a query here, well under one). UTC, like every query."""
    con = getattr(_LOCAL, "con", None)
    if con is None:
        import duckdb

        con = duckdb.connect(":memory:")
        con.execute("SET TimeZone='UTC'")
        _LOCAL.con = con
    return con


def parse_tree(sql: str) -> dict[str, Any]:
    """DuckDB's parse tree of one statement (UsageError when it does not parse): a copy of
    its own, which the caller may change."""
    return copy.deepcopy(_parsed(sql))


def shared_tree(sql: str) -> dict[str, Any]:
    """:func:`parse_tree`'s tree without the copy: shared by every caller (cached), so it
    must never be changed. For reading only — a large tree's deep copy costs milliseconds."""
    return _parsed(sql)


@functools.lru_cache(maxsize=256)
def _parsed(sql: str) -> dict[str, Any]:
    text = scratch().execute("SELECT json_serialize_sql(?)", [sql]).fetchall()[0][0]
    tree = json.loads(text)
    if tree.get("error"):
        raise UsageError(f"cannot parse the query: {tree.get('error_message', 'syntax error')}")
    statements = tree.get("statements", [])
    if len(statements) != 1:
        raise _refuse("must be one SELECT")
    return dict(statements[0]["node"])


def bucket_of(node: dict[str, Any]) -> tuple[str, str] | None:
    """``(unit, column)`` of ``date_trunc('unit', column)``, else None."""
    if node.get("class") != "FUNCTION" or node.get("function_name") != "date_trunc":
        return None
    args = _arguments(node)
    if len(args) != 2:
        return None
    unit, column = _literal_text(args[0]), _column(args[1])
    if unit is None or column is None or unit.lower() not in UNITS:
        return None
    return unit.lower(), column


def _check_bucket_call(node: dict[str, Any], name: str) -> None:
    """A ``date_trunc`` call that :func:`bucket_of` does not take: say what is wrong with it
    (an unknown unit, or arguments that are not a quoted unit and a column) rather than
    refusing it as just another expression."""
    if node.get("class") != "FUNCTION" or str(node.get("function_name")).lower() != "date_trunc":
        return
    args = _arguments(node)
    unit = _literal_text(args[0]) if len(args) == 2 else None
    if unit is not None and _column(args[1]) is not None:
        raise _refuse(
            f"buckets {name!r} by unknown time unit {unit!r}: date_trunc takes " + ", ".join(UNITS)
        )
    raise _refuse(
        f"buckets {name!r} by date_trunc('unit', column), a unit in quotes and a column "
        "(units: " + ", ".join(UNITS) + ")"
    )


def aggregate_of(node: dict[str, Any]) -> tuple[str, str | None] | None:
    """``(function, column)`` of a plain aggregate call, else None."""
    if node.get("class") != "FUNCTION":
        return None
    name = str(node.get("function_name", "")).lower()
    if node.get("distinct") or node.get("filter") or node.get("order_bys", {}).get("orders"):
        return None
    args = _arguments(node)
    if name == "count_star" and not args:
        return name, None
    if name in ("count", "sum", "min", "max", "avg") and len(args) == 1:
        column = _column(args[0])
        return (name, column) if column is not None else None
    return None


@functools.lru_cache(maxsize=128)
def parse_definition(sql: str) -> DerivedSpec:
    """The spec of a definition; UsageError saying what is not allowed otherwise."""
    node = parse_tree(sql)
    if node.get("type") != "SELECT_NODE":
        raise _refuse("must be one plain SELECT (no UNION, VALUES …)")
    if node.get("where_clause") or node.get("having") or node.get("qualify"):
        raise _refuse("cannot filter (WHERE, HAVING, QUALIFY): filter the queries that use it")
    if node.get("modifiers") or node.get("cte_map", {}).get("map"):
        raise _refuse("cannot have ORDER BY, LIMIT, DISTINCT or WITH")
    table = node.get("from_table") or {}
    if table.get("type") != "BASE_TABLE" or table.get("schema_name") or table.get("sample"):
        raise _refuse("must read one pool (FROM POOL, no join, subquery or sample)")
    source = str(table["table_name"])
    bucket: tuple[str, str, str] | None = None
    groups: list[tuple[str, str]] = []
    aggregates: list[Aggregate] = []
    names: set[str] = set()
    for item in node.get("select_list", []):
        name = str(item.get("alias") or "")
        column = _column(item)
        if not name and column is not None:
            name = column
        if not name:
            raise _refuse("must name every output (… AS name)")
        if name in names:
            raise _refuse(f"names {name!r} twice")
        names.add(name)
        found = bucket_of(item)
        if found is not None:
            if bucket is not None:
                raise _refuse("must have exactly one time bucket date_trunc('unit', column)")
            bucket = (name, *found)
            continue
        if column is not None:
            groups.append((name, column))
            continue
        _check_bucket_call(item, name)
        agg = aggregate_of(item)
        if agg is None:
            raise _refuse(
                f"can select only the time bucket, columns, and count(*), count(x), sum(x), "
                f"min(x), max(x) of columns; not {name!r}"
            )
        if agg[0] == "avg":
            raise _refuse(
                f"stores sum(x) and count(x), not avg(x) ({name!r}): queries' avg uses them"
            )
        aggregates.append(Aggregate(name, *agg))
    if bucket is None:
        raise _refuse(
            "must have a time bucket date_trunc('unit', column) (units: " + ", ".join(UNITS) + ")"
        )
    if node.get("aggregate_handling") != "FORCE_AGGREGATES":
        grouped = {json.dumps(_strip(g), sort_keys=True) for g in node.get("group_expressions", [])}
        wanted = {
            json.dumps(_strip(i), sort_keys=True)
            for i in node.get("select_list", [])
            if bucket_of(i) is not None or _column(i) is not None
        }
        if grouped != wanted or node.get("group_sets") and len(node["group_sets"]) > 1:
            raise _refuse("must GROUP BY ALL (or by exactly its bucket and columns)")
    if not aggregates:
        raise _refuse("must compute at least one aggregate")
    counted = {a.column for a in aggregates if a.function == "count"}
    for a in list(aggregates):
        if a.function == "sum" and a.column not in counted:
            assert a.column is not None
            aggregates.append(Aggregate(f"{HIDDEN_COUNT}{a.column}", "count", a.column))
            counted.add(a.column)
    for name, _ in groups:
        if name.startswith(HIDDEN_COUNT):
            raise _refuse(f"cannot name an output {HIDDEN_COUNT}…")
    return DerivedSpec(
        sql, source, bucket[0], bucket[1], bucket[2], tuple(groups), tuple(aggregates)
    )


def _strip(node: Any) -> Any:
    """A parse node without its alias and source positions (for comparing expressions)."""
    if isinstance(node, dict):
        return {
            k: _strip(v)
            for k, v in node.items()
            if k not in ("alias", "query_location", "query_location_length")
        }
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


__all__ = [
    "AGGREGATES",
    "Aggregate",
    "DerivedLink",
    "DerivedSpec",
    "HIDDEN_COUNT",
    "UNITS",
    "aggregate_of",
    "bucket_of",
    "coarser_or_equal",
    "parse_definition",
    "parse_tree",
    "quote",
    "scratch",
]
