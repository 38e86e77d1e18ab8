"""One SQL query read through DuckDB's parser: whether it may run, which tables it names, and
which WHERE conjuncts constrain each table (for pruning).

The parse tree is DuckDB's own (``json_serialize_sql``), so what is analysed is exactly what
DuckDB will execute. Refused: anything but one SELECT (INSERT, UPDATE, DELETE, CREATE, COPY,
ATTACH, PRAGMA, INSTALL, SET, EXPLAIN … are not SELECTs), table functions outside
:data:`ALLOWED_TABLE_FUNCTIONS` (``read_csv``, ``read_parquet``, ``query`` …), AT clauses and
three-part names. The connection that runs the query is also sandboxed (no file access beyond
the lake's objects, configuration locked), so the refusal here is the clear message, not the
only guard.

Pushdown rules (soundness: pruning never drops a row the query could see):

* a table referenced several times gets the OR of its references' predicates, or none if any
  reference is unconstrained;
* only conjuncts of the WHERE of the SELECT whose FROM holds the reference constrain it, and
  those of the ON of a join on the side where a row failing it never joins (both sides of an
  inner join, the right of LEFT/SEMI/ANTI, the left of RIGHT); subqueries and CTEs are
  analysed in their own scope;
* the null-supplying side of an outer join, the right side of an ASOF join (pruning it could
  change which row is nearest), both sides of a positional join, and sampled tables or SELECTs
  are never constrained (``LEFT JOIN r … WHERE r.x IS NULL`` is an anti-join);
* an unqualified column binds to the one table of its FROM that has it; otherwise (ambiguous,
  outer, a select-list alias, a struct field) it is not used.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lake_core.expr import And, Expr, ExpressionError, Or, may_match
from lake_core.sql.errors import SqlRefusedError, SqlSyntaxError
from lake_core.sql.names import TableRef, parse_table_name
from lake_core.sql.pushdown import translate

if TYPE_CHECKING:
    import duckdb

__all__ = ["ALLOWED_TABLE_FUNCTIONS", "Analysis", "analyze", "table_key"]

#: Table functions that read nothing outside the query.
ALLOWED_TABLE_FUNCTIONS = frozenset({"range", "generate_series", "unnest"})
_NOT_NULL_SUPPLIED = {"INNER": (False, False), "LEFT": (False, True), "RIGHT": (True, False)}


def table_key(schema_name: str, table_name: str) -> str:
    """The name a BASE_TABLE node refers to, as :func:`parse_table_name` reads it."""
    return f"{schema_name}.{table_name}" if schema_name else table_name


@dataclass
class _Occurrence:
    node: dict[str, Any]
    key: str
    binding: str  # the alias, else the table name: what qualified columns use
    prunable: bool  # by the WHERE
    sampled: bool  # by nothing


@dataclass
class Analysis:
    """A query DuckDB parsed and the lake accepts."""

    sql: str
    tree: dict[str, Any]
    #: Every table name the query uses (CTE names excluded unless also a table) → its parts.
    tables: dict[str, TableRef]
    #: Names that a CTE defines somewhere in the query (they may shadow a pool).
    cte_names: frozenset[str]
    #: Top-level column names the query mentions; None when it selects ``*``.
    columns: frozenset[str] | None
    _selects: list[dict[str, Any]] = field(default_factory=list, repr=False)
    _bases: list[dict[str, Any]] = field(default_factory=list, repr=False)

    def bases(self) -> list[dict[str, Any]]:
        """Every table reference of the query (BASE_TABLE nodes of :attr:`tree`, which a
        caller may change before :meth:`rewritten`)."""
        return list(self._bases)

    def rewritten(self, con: duckdb.DuckDBPyConnection) -> str:
        """The query as :attr:`tree` now reads (DuckDB's ``json_deserialize_sql``)."""
        doc = json.dumps({"error": False, "statements": [self.tree]})
        rows = con.execute("SELECT json_deserialize_sql(?::JSON)", [doc]).fetchall()
        return str(rows[0][0])

    def targets(self) -> dict[str, list[tuple[str, str]]]:
        """Per table key, the (schema, table) pairs DuckDB looks it up by: ``ns.flights`` is
        ("ns", "flights"), the quoted ``"ns.flights"`` is ("", "ns.flights"); both are one
        key, so both must answer."""
        out: dict[str, list[tuple[str, str]]] = {}
        for base in self._bases:
            pair = (str(base.get("schema_name", "")), str(base.get("table_name", "")))
            pairs = out.setdefault(table_key(*pair), [])
            if pair not in pairs:
                pairs.append(pair)
        return out

    def predicates(self, schemas: Mapping[str, pa.Schema | None]) -> dict[str, Expr | None]:
        """Per table key, a predicate every row the query can read from it satisfies (None:
        read everything). ``schemas`` gives each pool's schema (None: not a pool)."""
        found: dict[int, Expr | None] = {id(b): None for b in self._bases}
        for select in self._selects:
            for occ, expr in _select_predicates(select, schemas):
                found[id(occ.node)] = expr
        out: dict[str, Expr | None] = {}
        seen: set[str] = set()
        for base in self._bases:
            key = table_key(str(base.get("schema_name", "")), str(base.get("table_name", "")))
            expr = found[id(base)]
            if key not in seen:
                seen.add(key)
                out[key] = expr
            else:
                prior = out[key]
                out[key] = None if prior is None or expr is None else Or(prior, expr)
        return out


def _walk(tree: Any) -> Iterator[dict[str, Any]]:
    """Every dict in the tree, without recursion (long OR chains nest deeply)."""
    pending = [tree]
    while pending:
        node = pending.pop()
        if isinstance(node, dict):
            yield node
            pending.extend(node.values())
        elif isinstance(node, list):
            pending.extend(node)


def _statement_kind(con: duckdb.DuckDBPyConnection, sql: str) -> str:
    try:
        statements = con.extract_statements(sql)
    except Exception:
        return "this"
    if not statements:
        return "this"
    kind = str(statements[0].type).rsplit(".", 1)[-1].replace("_", " ")
    # DuckDB files INSTALL under LOAD: name both, so "INSTALL httpfs" reads right.
    return "INSTALL and LOAD" if kind == "LOAD" else kind


def analyze(con: duckdb.DuckDBPyConnection, sql: str) -> Analysis:
    """Parse ``sql`` with DuckDB and check it is one read-only SELECT over tables and allowed
    table functions. Raises SqlSyntaxError (with the 1-based position) or SqlRefusedError."""
    rows = con.execute("SELECT json_serialize_sql(?)", [sql]).fetchall()
    raw = rows[0] if rows else None
    doc: dict[str, Any] = json.loads(raw[0]) if raw else {"error": True}
    if doc.get("error"):
        if doc.get("error_type") == "parser":
            pos = doc.get("position")
            position = int(pos) + 1 if isinstance(pos, str) and pos.isdigit() else None
            where = f" at position {position}" if position is not None else ""
            message = str(doc.get("error_message", "syntax error")).splitlines()[0]
            raise SqlSyntaxError(f"SQL {message}{where}", position)
        kind = _statement_kind(con, sql)
        raise SqlRefusedError(
            f"{kind} statements are refused: SQL over a lake is read-only and runs SELECT "
            "queries only (write with lake load, lake delete, …)"
        )
    statements: list[dict[str, Any]] = doc.get("statements", [])
    if len(statements) != 1:
        raise SqlRefusedError(f"one SQL statement at a time, not {len(statements)}")
    tree = statements[0]
    tables: dict[str, TableRef] = {}
    ctes: set[str] = set()
    columns: set[str] | None = set()
    selects, bases = [], []
    for node in _walk(tree):
        node_type = node.get("type")
        if node_type == "TABLE_FUNCTION":
            name = str((node.get("function") or {}).get("function_name", "?"))
            if name.lower() not in ALLOWED_TABLE_FUNCTIONS:
                allowed = ", ".join(sorted(ALLOWED_TABLE_FUNCTIONS))
                raise SqlRefusedError(
                    f"table function {name}() is refused: SQL over a lake reads only the "
                    f"lake's tables (allowed table functions: {allowed})"
                )
        elif node_type == "BASE_TABLE":
            if node.get("catalog_name"):
                raise SqlRefusedError(
                    f"table {node['catalog_name']}.{node.get('schema_name')}."
                    f"{node.get('table_name')}: a table is POOL or NAMESPACE.POOL"
                )
            if node.get("at_clause"):
                raise SqlRefusedError(
                    'AT clauses are refused: name a snapshot as "POOL@REF" or use --as-of'
                )
            bases.append(node)
        elif node_type == "SELECT_NODE":
            selects.append(node)
            for entry in (node.get("cte_map") or {}).get("map", []):
                ctes.add(str(entry.get("key", "")))
        elif node_type in ("SET_OPERATION_NODE", "RECURSIVE_CTE_NODE"):
            for entry in (node.get("cte_map") or {}).get("map", []):
                ctes.add(str(entry.get("key", "")))
        elif node_type in ("STAR", "COLUMNS"):
            columns = None
        elif node_type == "COLUMN_REF" and columns is not None:
            columns.update(str(n) for n in node.get("column_names", []))
    bases.reverse()  # _walk pops from the end: restore the order of the text
    for base in bases:
        key = table_key(str(base.get("schema_name", "")), str(base.get("table_name", "")))
        if key in tables:
            continue
        try:
            tables[key] = parse_table_name(key)
        except Exception:
            if key not in ctes:
                raise
    return Analysis(
        sql,
        tree,
        tables,
        frozenset(ctes),
        None if columns is None else frozenset(columns),
        selects,
        bases,
    )


# -- pushdown per SELECT -------------------------------------------------------------------


def _from_items(
    ref: dict[str, Any],
    blocked: bool,
    sampled: bool,
    out: list[_Occurrence | None],
    ons: list[tuple[dict[str, Any], frozenset[int]]],
) -> None:
    """The FROM clause's table occurrences (with whether the WHERE may constrain them), and
    each join's ON condition with the occurrences it may constrain: both sides of an inner
    join, the right side of a LEFT (and SEMI, ANTI) join, the left side of a RIGHT join — a
    row failing the ON there never joins, whatever surrounds the join. Non-table items
    (subqueries, functions) are ``None``."""
    kind = ref.get("type")
    sampled = sampled or ref.get("sample") is not None
    if kind == "BASE_TABLE":
        key = table_key(str(ref.get("schema_name", "")), str(ref.get("table_name", "")))
        binding = str(ref.get("alias") or ref.get("table_name", ""))
        out.append(_Occurrence(ref, key, binding.lower(), not (blocked or sampled), sampled))
    elif kind == "JOIN":
        ref_type = ref.get("ref_type", "REGULAR")
        join_type = ref.get("join_type", "INNER")
        if ref_type in ("REGULAR", "CROSS", "NATURAL") and join_type in _NOT_NULL_SUPPLIED:
            left_blocked, right_blocked = _NOT_NULL_SUPPLIED[join_type]
        elif ref_type == "ASOF" and join_type in ("INNER", "LEFT"):
            # Each left row takes its nearest right row: pruning the right side could hand
            # it a different one, pruning the left side cannot.
            left_blocked, right_blocked = False, True
        elif ref_type == "REGULAR" and join_type in ("SEMI", "ANTI"):
            left_blocked, right_blocked = False, True
        else:  # FULL OUTER, POSITIONAL, anything new: constrain neither side
            left_blocked, right_blocked = True, True
        start = len(out)
        _from_items(ref.get("left") or {}, blocked or left_blocked, sampled, out, ons)
        middle = len(out)
        _from_items(ref.get("right") or {}, blocked or right_blocked, sampled, out, ons)
        left = {id(o.node) for o in out[start:middle] if o is not None}
        right = {id(o.node) for o in out[middle:] if o is not None}
        sides = {"INNER": left | right, "LEFT": right, "RIGHT": left, "SEMI": right, "ANTI": right}
        condition = ref.get("condition")
        if condition and ref_type == "REGULAR" and sides.get(join_type):
            ons.append((condition, frozenset(sides[join_type])))
    elif kind != "EMPTY":
        out.append(None)


def _conjuncts(node: dict[str, Any] | None) -> list[dict[str, Any]]:
    if not node:
        return []
    if node.get("type") == "CONJUNCTION_AND":
        return [c for child in node.get("children", []) for c in _conjuncts(child)]
    return [node]


def _select_predicates(
    select: dict[str, Any], schemas: Mapping[str, pa.Schema | None]
) -> list[tuple[_Occurrence, Expr | None]]:
    items: list[_Occurrence | None] = []
    ons: list[tuple[dict[str, Any], frozenset[int]]] = []
    _from_items(select.get("from_table") or {}, False, False, items, ons)
    occurrences = [o for o in items if o is not None]
    if select.get("sample") is not None:
        return []
    where = _conjuncts(select.get("where_clause"))
    if not where and not ons:
        return []
    lowered: dict[int, dict[str, pa.Field[Any]]] = {}
    for occ in occurrences:
        schema = schemas.get(occ.key)
        lowered[id(occ)] = {} if schema is None else _fields_by_lower(schema)
    bindings: dict[str, list[_Occurrence]] = {}
    for occ in occurrences:
        bindings.setdefault(occ.binding, []).append(occ)
    out: list[tuple[_Occurrence, Expr | None]] = []
    for occ in occurrences:
        schema = schemas.get(occ.key)
        conjuncts = where if occ.prunable else []
        conjuncts = conjuncts + [
            c for condition, ids in ons if id(occ.node) in ids for c in _conjuncts(condition)
        ]
        if occ.sampled or schema is None or not conjuncts:
            continue

        def bind(names: list[str], occ: _Occurrence = occ) -> pa.Field[Any] | None:
            fields = lowered[id(occ)]
            if len(names) == 1:
                col = names[0].lower()
                owners = [o for o in occurrences if col in lowered[id(o)]]
                return fields.get(col) if owners == [occ] else None
            if len(names) == 2:
                qualifier, col = names[0].lower(), names[1].lower()
                if bindings.get(qualifier) != [occ]:
                    return None
                return fields.get(col)
            return None

        terms = [t for t in (translate(c, bind) for c in conjuncts) if t is not None]
        kept = [t for t in terms if _fits(t, schema)]
        if not kept:
            continue
        expr = kept[0]
        for term in kept[1:]:
            expr = And(expr, term)
        out.append((occ, expr))
    return out


def _fields_by_lower(schema: pa.Schema) -> dict[str, pa.Field[Any]]:
    """DuckDB's identifiers are case-insensitive; a name two columns share that way binds
    to neither."""
    out: dict[str, pa.Field[Any]] = {}
    clash: set[str] = set()
    for f in schema:
        low = f.name.lower()
        if low in out:
            clash.add(low)
        out[low] = f
    for low in clash:
        del out[low]
    return out


def _fits(expr: Expr, schema: pa.Schema) -> bool:
    """Whether the lake can evaluate ``expr`` over ``schema`` (literals coerce, columns
    resolve): checked once here so pruning never fails on a term DuckDB would accept."""
    try:
        may_match(expr, {}, schema)
    except (ExpressionError, TypeError, ValueError, pa.ArrowException):
        return False
    return True
