"""Answering an aggregate query from a derived pool instead of its source's rows.

A query is answered from derived pool ``D`` of source ``S`` when all of this holds (else it
runs on ``S`` and :attr:`Answer.reasons` says why):

* it is one SELECT over ``S`` alone (``S``, ``S@REF``; no join, subquery, CTE, sample,
  window, DISTINCT, QUALIFY, ``*``);
* ``D`` reflects exactly the source commit the query reads (``S``'s main tip, or ``REF``,
  or the commit at ``--as-of``): a stale derived pool is never used;
* every column it uses outside aggregates is one of ``D``'s group columns, or its bucket
  column inside ``date_trunc(UNIT, …)`` with UNIT coarser than or equal to ``D``'s (a day
  is 24 hours; a week is not a union of months), or in a WHERE conjunct ``col >= T`` /
  ``col < T`` where ``T`` is a bucket boundary of ``D``;
* every aggregate is ``count(*)``, ``count(x)``, ``sum(x)``, ``min(x)``, ``max(x)`` or
  ``avg(x)`` (``sum(x) / count(x)``) that ``D`` stores for ``x``, without DISTINCT, FILTER or
  ORDER BY.

The rewritten query reads ``D@COMMIT`` (the derived commit reflecting the source commit):
counts become ``CAST(coalesce(sum(n), 0) AS BIGINT)`` (0 over no rows, as ``count``), sums ``sum``, min and max themselves, ``avg(x)``
``sum(x_sum) / sum(count_x)``; every output keeps the raw query's column name and type
family. Results equal the raw query's exactly for counts, min, max and integer sums; float
sums and averages may differ in the last bits (the addition order differs).
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lake_core.derived.lineage import commit_reflecting
from lake_core.derived.spec import (
    DerivedSpec,
    aggregate_of,
    bucket_of,
    coarser_or_equal,
    parse_definition,
    parse_tree,
    quote,
    scratch,
    shared_tree,
)
from lake_core.errors import LakeError, UsageError
from lake_core.names import MAIN, PoolName

if TYPE_CHECKING:
    import pyarrow as pa

    from lake_core.lake import Lake
    from lake_core.pool import Pool


@dataclass
class Answer:
    """How a query is answered: ``sql`` to run instead (None: the query as written),
    ``derived``: the derived pools it reads, ``reasons``: what was considered and why."""

    sql: str | None = None
    derived: list[str] = field(default_factory=list)
    reasons: list[str] = field(default_factory=list)


class _NoMatch(Exception):
    """The query cannot be answered from this derived pool (the message says why)."""


_AGGREGATES = ("count_star", "count", "sum", "min", "max", "avg")
_LOWER = {"COMPARE_GREATERTHANOREQUALTO": ">=", "COMPARE_LESSTHAN": "<"}


def answer(
    sql: str,
    lake: Lake,
    open_pool: Callable[[str], Pool],
    *,
    as_of: datetime | None = None,
) -> Answer:
    """Whether and how ``sql`` can be answered from a derived pool (see the module
    docstring). Never raises for a query it cannot answer: the query then runs as written,
    and its own errors come from there."""
    from lake_core.sql.names import parse_table_name

    out = Answer()
    configs = lake.pools()
    derived_configs = [c for c in configs if c.derived is not None]
    if not derived_configs:  # the common case: no parse, no pool opened
        out.reasons.append("no derived pools in this lake")
        return out
    try:
        tree = shared_tree(sql)  # read here, never changed (the rewrite works on a copy)
    except (UsageError, LakeError) as e:
        out.reasons.append(f"not answered from a derived pool: {e}")
        return out
    table = tree.get("from_table") or {}
    if tree.get("type") != "SELECT_NODE" or table.get("type") != "BASE_TABLE":
        out.reasons.append("not answered from a derived pool: not one SELECT over one pool")
        return out
    try:
        ref = parse_table_name(
            ".".join(p for p in (table.get("schema_name"), table["table_name"]) if p)
        )
        source_name = PoolName.parse(ref.pool_name or ref.pool or "")
    except LakeError as e:
        out.reasons.append(f"not answered from a derived pool: {e}")
        return out
    if ref.pool is None or ref.meta is not None:
        out.reasons.append("not answered from a derived pool: it reads no pool's rows")
        return out
    source_ids = {c.id for c in configs if c.name == source_name}
    candidates = [c for c in derived_configs if c.derived and c.derived.source_id in source_ids]
    if not candidates:
        out.reasons.append(f"no derived pool of {source_name}: answered from its rows")
        return out
    try:
        source = open_pool(str(source_name))
    except LakeError as e:
        out.reasons.append(f"not answered from a derived pool: {e}")
        return out
    try:
        commit = source.resolve(ref.ref, as_of)
    except LakeError as e:
        out.reasons.append(f"not answered from a derived pool: {e}")
        return out
    for config in sorted(candidates, key=lambda c: str(c.name)):
        name = str(config.name)
        assert config.derived is not None
        try:
            derived = open_pool(name)
            at = commit_reflecting(derived, commit) if commit is not None else None
            if at is None:
                # A refresh brings it to the source's main tip: advice only for that commit.
                hint = (
                    f"refresh it: lake derive refresh {name}"
                    if commit == source.tip(MAIN)
                    else "it follows the source's main branch, and a refresh reflects main's tip"
                )
                raise _NoMatch(f"it does not reflect source commit {commit} ({hint})")
            schema = source.schema()
            if schema is None:
                raise _NoMatch("the source pool has no rows yet")
            rewritten = _rewritten(sql, config.derived.sql, f"{name}@{at}", schema)
        except (_NoMatch, LakeError) as e:
            out.reasons.append(f"{name}: not used: {e}")
            continue
        out.sql = rewritten
        out.derived.append(name)
        out.reasons.append(
            f"{name}: answers it (reflects {source.name} at {commit}; derived commit {at})"
        )
        return out
    out.reasons.append(f"answered from the rows of {source.name}")
    return out


@functools.lru_cache(maxsize=512)
def _rewritten(sql: str, definition: str, target: str, schema: pa.Schema) -> str:
    """The query ``sql`` rewritten to read ``target`` (``DERIVED@COMMIT``, a derived pool of
    ``definition``), its outputs bound against the source's ``schema``; raises _NoMatch.

    Cached: the rewrite costs ~15 ms of parsing, binding and DuckDB's deserialising, and
    everything it depends on is in the key — ``target`` names an immutable derived commit,
    and the query, definition and source schema are given. A refusal is cached too (an
    exception raised from the cached function is not, so it is kept as a value)."""
    kind, text = _rewrite_or_refusal(sql, definition, target, schema)
    if kind == "refused":
        raise _NoMatch(text)
    return text


@functools.lru_cache(maxsize=512)
def _rewrite_or_refusal(
    sql: str, definition: str, target: str, schema: pa.Schema
) -> tuple[str, str]:
    try:
        return "sql", _rewrite(sql, shared_tree(sql), parse_definition(definition), target, schema)
    except _NoMatch as e:
        return "refused", str(e)


def _rewrite(
    sql: str, tree: dict[str, Any], spec: DerivedSpec, target: str, schema: pa.Schema
) -> str:
    node = copy.deepcopy(tree)
    for key in ("cte_map",):
        if node.get(key, {}).get("map"):
            raise _NoMatch("it has a WITH clause")
    if node.get("sample") or node.get("qualify") or node["from_table"].get("sample"):
        raise _NoMatch("it samples or has QUALIFY")
    if any(n.get("class") in ("SUBQUERY", "WINDOW") for n in _walk(node)):
        raise _NoMatch("it has a subquery or a window function")
    if any(n.get("class") == "STAR" for n in _walk(node["select_list"])):
        raise _NoMatch("it selects *")  # (ORDER BY ALL is a * among the modifiers: fine)
    if any(m.get("type") == "DISTINCT_MODIFIER" for m in node.get("modifiers", [])):
        raise _NoMatch("it has DISTINCT")
    if len(node.get("group_sets") or []) > 1:
        raise _NoMatch("it has grouping sets")
    names, types = _outputs(sql, node, schema)
    aliases = {str(i.get("alias")) for i in node["select_list"] if i.get("alias")}
    rewrite = _Rewriter(spec, aliases)
    grouped = node.get("aggregate_handling") == "FORCE_AGGREGATES" or node.get("group_expressions")
    items = []
    for item, name, kind in zip(node["select_list"], names, types, strict=True):
        # The raw query's type too (a date's day bucket is a TIMESTAMP there; the derived pool
        # stores it as the lake stores timestamps, in UTC).
        new = _cast(rewrite.expression(item), kind)
        new["alias"] = name
        items.append(new)
    if not grouped and not rewrite.aggregates:
        raise _NoMatch("it does not aggregate")
    node["select_list"] = items
    node["group_expressions"] = [rewrite.expression(g) for g in node.get("group_expressions", [])]
    if node.get("having"):
        node["having"] = rewrite.expression(node["having"])
    for modifier in node.get("modifiers", []):
        for order in modifier.get("orders", []):
            order["expression"] = rewrite.expression(order["expression"])
    if node.get("where_clause"):
        node["where_clause"] = _where(node["where_clause"], spec, rewrite)
    node["from_table"] = {
        **node["from_table"],
        "schema_name": "",
        "catalog_name": "",
        "table_name": target,
        "qualified_name": {"path": [target]},
        # The raw query's qualified columns (flights.carrier) keep working.
        "alias": node["from_table"].get("alias") or str(tree["from_table"]["table_name"]),
    }
    return _deserialize({"error": False, "statements": [{"node": node}]})


def _walk(node: Any) -> Iterator[dict[str, Any]]:
    if isinstance(node, dict):
        if "class" in node:
            yield node
        for value in node.values():
            yield from _walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from _walk(value)


def _outputs(sql: str, node: dict[str, Any], schema: pa.Schema) -> tuple[list[str], list[str]]:
    """The raw query's output column names (DuckDB's names for unaliased expressions) and
    types, by binding it against an empty table of the source's ``schema``."""
    import duckdb

    name = str(node["from_table"]["table_name"])
    con = scratch().cursor()  # a registration of its own
    try:
        con.register(name, schema.empty_table())
        relation = con.sql(sql)
        columns, types = relation.columns, [str(t) for t in relation.types]
    except duckdb.Error as e:
        raise _NoMatch(f"it does not bind: {e}") from None
    finally:
        con.close()
    if len(columns) != len(node["select_list"]):
        raise _NoMatch("its outputs cannot be told apart")
    return list(columns), types


def _cast(node: dict[str, Any], kind: str) -> dict[str, Any]:
    """``CAST(node AS kind)``."""
    template = _parse_expression(f"CAST(__lake_cast AS {kind})")

    def put(value: Any) -> Any:
        if isinstance(value, dict):
            if value.get("class") == "COLUMN_REF" and value.get("column_names") == ["__lake_cast"]:
                return node
            return {k: put(v) for k, v in value.items()}
        if isinstance(value, list):
            return [put(v) for v in value]
        return value

    out: dict[str, Any] = put(template)
    return out


def _parse_expression(text: str) -> dict[str, Any]:
    node = parse_tree(f"SELECT {text}")
    return dict(node["select_list"][0])


def _deserialize(tree: dict[str, Any]) -> str:
    return str(
        scratch().execute("SELECT json_deserialize_sql(?)", [json.dumps(tree)]).fetchall()[0][0]
    )


class _Rewriter:
    """Rewrites expressions of the raw query into expressions over the derived pool."""

    def __init__(self, spec: DerivedSpec, aliases: set[str]) -> None:
        self.spec = spec
        self.aliases = aliases
        self.groups = {column: name for name, column in spec.groups}
        self.aggregates = 0

    def expression(self, node: dict[str, Any]) -> dict[str, Any]:
        cls = node.get("class")
        if cls == "FUNCTION" and str(node.get("function_name", "")).lower() in _AGGREGATES:
            return self._aggregate(node)
        found = bucket_of(node)
        if found is not None:
            unit, column = found
            if column != self.spec.bucket_column:
                raise _NoMatch(f"it buckets {column}, not {self.spec.bucket_column}")
            if not coarser_or_equal(unit, self.spec.bucket_unit):
                raise _NoMatch(
                    f"its {unit} buckets are not unions of {self.spec.bucket_unit} buckets"
                )
            return _keep_alias(
                node, _parse_expression(f"date_trunc('{unit}', {quote(self.spec.bucket_name)})")
            )
        if cls == "COLUMN_REF":
            column = str(node["column_names"][-1])
            if len(node["column_names"]) > 2:
                raise _NoMatch(f"it names {'.'.join(node['column_names'])}")
            if column in self.groups:
                return _keep_alias(node, _parse_expression(quote(self.groups[column])))
            if column in self.aliases:
                return node  # an output of the query (ORDER BY d, GROUP BY d)
            raise _NoMatch(f"it uses column {column} outside what the derived pool groups by")
        return {key: self._any(value) for key, value in node.items()}

    def _any(self, value: Any) -> Any:
        """Any part of an expression: nodes rewritten, everything else walked."""
        if isinstance(value, dict):
            if "class" in value:
                return self.expression(value)
            return {key: self._any(v) for key, v in value.items()}
        if isinstance(value, list):
            return [self._any(v) for v in value]
        return value

    def _aggregate(self, node: dict[str, Any]) -> dict[str, Any]:
        found = aggregate_of(node)
        if found is None:
            raise _NoMatch(
                f"{node.get('function_name')}(…) is not a plain aggregate of a column "
                "(DISTINCT, FILTER, ORDER BY or an expression)"
            )
        function, column = found
        spec = self.spec
        self.aggregates += 1
        if function == "avg":
            total, count = spec.aggregate("sum", column), spec.aggregate("count", column)
            if total is None or count is None:
                raise _NoMatch(f"it stores no sum and count of {column} for avg({column})")
            text = f"sum({quote(total.name)}) / sum({quote(count.name)})"
        elif function == "count_star":
            stored = spec.aggregate("count_star", None)
            if stored is None:
                raise _NoMatch("it stores no count(*)")
            # coalesce: count over no rows is 0, a sum over no rows null.
            text = f"CAST(coalesce(sum({quote(stored.name)}), 0) AS BIGINT)"
        else:
            stored = spec.aggregate(function, column)
            if stored is None:
                raise _NoMatch(f"it stores no {function}({column})")
            text = (
                f"CAST(coalesce(sum({quote(stored.name)}), 0) AS BIGINT)"
                if function == "count"
                else f"{function}({quote(stored.name)})"
            )
        return _keep_alias(node, _parse_expression(text))


def _keep_alias(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    new["alias"] = old.get("alias", "")
    return new


def _conjuncts(node: dict[str, Any]) -> list[dict[str, Any]]:
    if node.get("class") == "CONJUNCTION" and node.get("type") == "CONJUNCTION_AND":
        return [c for child in node["children"] for c in _conjuncts(child)]
    return [node]


def _where(node: dict[str, Any], spec: DerivedSpec, rewrite: _Rewriter) -> dict[str, Any]:
    """The WHERE over the derived pool: conjuncts on group columns as they are, bounds on
    the bucket column that fall on bucket boundaries as bounds on the bucket."""
    parts = []
    for conjunct in _conjuncts(node):
        bound = _bucket_bound(conjunct, spec)
        parts.append(bound if bound is not None else rewrite.expression(conjunct))
    if len(parts) == 1:
        return parts[0]
    return {
        "class": "CONJUNCTION",
        "type": "CONJUNCTION_AND",
        "alias": "",
        "children": parts,
    }


def _bucket_bound(node: dict[str, Any], spec: DerivedSpec) -> dict[str, Any] | None:
    """``col >= T`` or ``col < T`` (or flipped) with ``T`` a bucket boundary, as a bound on
    the bucket; None when ``node`` does not compare the bucket column (raises when it does
    in a way buckets cannot answer)."""
    if node.get("class") != "COMPARISON":
        return None
    left, right, kind = node.get("left", {}), node.get("right", {}), node.get("type")
    column = spec.bucket_column
    if _is_column(right, column) and not _is_column(left, column):
        left, right = right, left
        kind = {
            "COMPARE_GREATERTHANOREQUALTO": "COMPARE_LESSTHANOREQUALTO",
            "COMPARE_LESSTHAN": "COMPARE_GREATERTHAN",
            "COMPARE_LESSTHANOREQUALTO": "COMPARE_GREATERTHANOREQUALTO",
            "COMPARE_GREATERTHAN": "COMPARE_LESSTHAN",
        }.get(str(kind), kind)
    if not _is_column(left, column):
        return None
    if kind not in _LOWER:
        raise _NoMatch(
            f"it compares {column} with {kind}: only {column} >= T and {column} < T at "
            f"{spec.bucket_unit} boundaries can be answered by buckets"
        )
    literal = right.get("literal") if right.get("class") == "CONSTANT" else None
    text = literal.get("text") if isinstance(literal, dict) else None
    if text is None:
        raise _NoMatch(f"it compares {column} with an expression, not a constant")
    if not _on_boundary(str(text), spec.bucket_unit):
        article = "an" if spec.bucket_unit[:1] in "aeiouh" else "a"
        raise _NoMatch(f"{text} is not {article} {spec.bucket_unit} boundary")
    return _parse_expression(f"{quote(spec.bucket_name)} {_LOWER[str(kind)]} '{text}'")


def _is_column(node: dict[str, Any], column: str) -> bool:
    return node.get("class") == "COLUMN_REF" and str(node["column_names"][-1]) == column


def _on_boundary(text: str, unit: str) -> bool:
    import duckdb

    try:
        row = (
            scratch()
            .execute(
                f"SELECT date_trunc('{unit}', CAST(? AS TIMESTAMPTZ)) = CAST(? AS TIMESTAMPTZ)",
                [text, text],
            )
            .fetchall()[0]
        )
        return bool(row[0])
    except duckdb.Error:
        return False


__all__ = ["Answer", "answer"]
