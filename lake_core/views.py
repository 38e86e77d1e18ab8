"""SQL views: named read-only SELECTs kept in the catalog, versioned with it.

A view is a catalog ``ViewDef`` of format ``SQL`` (field ``sql``) named ``NS.NAME`` like a pool
(a bare name lives in namespace ``default``). It lists the tables its SQL names in
``referenced_object_full_names``. Views written before SQL views (format ``LAKE_QUERY``: a
pool, a predicate and columns) read as the equivalent SELECT.

Invariants:

- Creating a view checks, against the catalog version it commits on, that its SQL is one
  read-only SELECT (the checker is given by the caller: the SQL layer's guard), that every
  table it names is a pool, a metadata table of a pool (``POOL$commits`` …, ``lake$pools``)
  or a view, that the query binds (its columns exist), that no pool has the view's name, and
  that it does not reach itself through other views. Anything refused changes nothing.
- A view is expanded at query time (:func:`expansion_order`): its own references resolve
  afresh, so it reads its pools as they are then (or as of the query's ``--as-of``). A cycle
  (possible only through a view dropped and created again) is refused there too.
- Views live in the catalog's tree, so ``lake ls --at-version N`` sees the views of version
  N and a catalog rollback restores them.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from lake_core.catalog.btree_keys import VIEW, ObjectRef
from lake_core.catalog.proto import objects_pb2
from lake_core.catalog.state import CatalogSnapshot, CatalogState
from lake_core.errors import (
    AlreadyExistsError,
    InvalidNameError,
    NotFoundError,
    PoolNotFoundError,
    UsageError,
)
from lake_core.names import (
    DEFAULT_NAMESPACE,
    LAKE,
    LAKE_TABLES,
    POOL_TABLES,
    PoolName,
)

if TYPE_CHECKING:
    from lake_core.catalog.catalog import Catalog

#: What a SQL checker returns for one statement: the table names it reads, as written
#: (``NS.NAME``, ``NAME@REF``, ``NAME$objects`` …), CTE names left out.
SqlChecker = Callable[[str], Sequence[str]]


@dataclass(frozen=True, order=True)
class View:
    """One SQL view of a catalog version."""

    name: PoolName
    sql: str
    #: The tables its SQL names, as written.
    references: tuple[str, ...] = ()
    created: datetime | None = None
    id: str = ""


@dataclass(frozen=True)
class TableName:
    """A table name as SQL writes it: ``[NS.]NAME[@REF][$META]``."""

    namespace: str
    name: str
    ref: str | None = None
    meta: str | None = None

    @classmethod
    def parse(cls, written: str) -> TableName:
        """A table name as DuckDB's parser hands it over (``NS.NAME`` when qualified). The
        grammar is :func:`lake_core.sql.names.parse_table_name`'s — ``$`` splits at its last
        occurrence, the namespace ends at the first ``.`` — repeated here because the SQL
        package imports this module."""
        base, dollar, meta = written.rpartition("$")
        if not dollar:
            base, meta = written, ""
        elif not meta:
            raise InvalidNameError(written, "nothing after '$'")
        pool_text, at, ref = base.partition("@")
        if at and not ref:
            raise InvalidNameError(written, "nothing after '@'")
        namespace, dot, name = pool_text.partition(".")
        if not dot:
            namespace, name = "", pool_text
        return cls(namespace or DEFAULT_NAMESPACE, name, ref if at else None, meta or None)

    @property
    def bare(self) -> str:
        """The name without its namespace: ``NAME[@REF][$META]``."""
        ref = f"@{self.ref}" if self.ref is not None else ""
        meta = f"${self.meta}" if self.meta is not None else ""
        return f"{self.name}{ref}{meta}"

    @property
    def object(self) -> PoolName:
        return PoolName(self.namespace, self.name)


def parse_view_name(text: str) -> PoolName:
    """``NS.NAME`` or ``NAME`` under the pool-name rules, and without ``$``. Raises
    InvalidNameError."""
    parsed = PoolName.parse(text, "view")
    if "$" in text:
        # SQL reads NAME$META as a metadata table: such a view could never be queried.
        raise InvalidNameError(text, "a view name must not contain '$'")
    return parsed


def view_sql(definition: objects_pb2.ViewDef) -> str:
    """The SELECT a stored view stands for (a ``LAKE_QUERY`` view's pool, predicate and
    columns written as one)."""
    if definition.view_format == objects_pb2.SQL:
        return definition.sql
    columns = ", ".join(_quote(c) for c in definition.columns) or "*"
    where = f" WHERE {definition.where}" if definition.where else ""
    pool = PoolName.parse(definition.pool)
    table = (
        _quote(pool.name)
        if pool.namespace == DEFAULT_NAMESPACE
        else (f"{_quote(pool.namespace)}.{_quote(pool.name)}")
    )
    return f"SELECT {columns} FROM {table}{where}"


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _view_of(ref: ObjectRef, definition: objects_pb2.ViewDef) -> View:
    refs = tuple(
        n.name if n.namespace_name == DEFAULT_NAMESPACE else f"{n.namespace_name}.{n.name}"
        for n in definition.referenced_object_full_names
    )
    if definition.view_format != objects_pb2.SQL and not refs and definition.pool:
        refs = (str(PoolName.parse(definition.pool)),)
    created = (
        datetime.fromtimestamp(definition.created_at_millis / 1000, UTC)
        if definition.created_at_millis
        else None
    )
    return View(
        PoolName(ref.namespace, ref.name), view_sql(definition), refs, created, definition.id
    )


def list_views(catalog_version: CatalogSnapshot | CatalogState) -> list[View]:
    """Every view of a catalog version (a snapshot, or a transaction's state), by name."""
    state = catalog_version if isinstance(catalog_version, CatalogState) else catalog_version.state
    return sorted(_view_of(ref, d) for ref, d in state.views())


def get_view(state: CatalogState, name: PoolName) -> View | None:
    ref = ObjectRef(VIEW, name.namespace, name.name)
    definition = state.get(ref, objects_pb2.ViewDef)
    return None if definition is None else _view_of(ref, definition)


def _check_references(state: CatalogState, view: PoolName, tables: Iterable[TableName]) -> None:
    """Every table a new view names exists at ``state`` (see the module docstring)."""
    for t in tables:
        if t.meta is not None:
            if t.name == LAKE and t.namespace == DEFAULT_NAMESPACE and t.meta in LAKE_TABLES:
                continue
            if t.meta not in POOL_TABLES:
                raise UsageError(f"{t.name}${t.meta}: no such metadata table")
        if state.pool(t.namespace, t.name) is not None:
            continue
        if (
            t.meta is None
            and t.ref is None
            and state.get(ObjectRef(VIEW, t.namespace, t.name), objects_pb2.ViewDef) is not None
        ):
            continue
        raise PoolNotFoundError(str(t.object), f"named by view {view}")


def expansion_order(state: CatalogState, name: PoolName) -> list[View]:
    """The views ``name`` reads, directly or through other views, each after the views it
    reads and ``name`` itself last. Raises NotFoundError (no such view) and UsageError for a
    cycle."""
    order: list[View] = []
    done: set[PoolName] = set()

    def visit(current: PoolName, path: tuple[PoolName, ...]) -> None:
        if current in path:
            cycle = " -> ".join(str(p) for p in (*path[path.index(current) :], current))
            raise UsageError(f"view {name} reaches itself: {cycle}")
        if current in done:
            return
        view = get_view(state, current)
        if view is None:
            raise NotFoundError("view", str(current))
        for text in view.references:
            t = TableName.parse(text)
            is_view = t.meta is None and t.ref is None and state.pool(t.namespace, t.name) is None
            if is_view and get_view(state, t.object) is not None:
                visit(t.object, (*path, current))
        done.add(current)
        order.append(view)

    visit(name, ())
    return order


def create_view(
    catalog: Catalog,
    name: str,
    sql: str,
    check: SqlChecker,
    now_millis: int,
    *,
    bind: Callable[[str], None] | None = None,
) -> int:
    """Commit view ``name`` with ``sql``; returns the catalog version. ``check`` validates the
    SQL (one read-only SELECT) and returns the table names it reads; ``bind``, once the names
    are known to exist, prepares the query (an unknown column fails there). Raises
    InvalidNameError, UsageError (a cycle), AlreadyExistsError (a view or pool of that name),
    PoolNotFoundError (a table it names does not exist), and what ``check`` and ``bind``
    raise; nothing changes then."""
    view = parse_view_name(name)
    sql = sql.strip().rstrip(";").strip()
    if not sql:
        raise UsageError("a view needs a SELECT")
    written = list(dict.fromkeys(check(sql)))
    tables = [TableName.parse(w) for w in written]
    with catalog.begin() as txn:
        state = txn.state
        if state.get(ObjectRef(VIEW, view.namespace, view.name), objects_pb2.ViewDef):
            raise AlreadyExistsError("view", str(view))
        if state.pool(view.namespace, view.name) is not None:
            raise AlreadyExistsError("pool", str(view))
        _check_references(state, view, tables)
        definition = objects_pb2.ViewDef(
            id=str(uuid.uuid4()),
            view_format=objects_pb2.SQL,
            sql=sql,
            referenced_object_full_names=[
                objects_pb2.NamespaceObjectFullName(namespace_name=t.namespace, name=t.bare)
                for t in tables
            ],
            created_at_millis=now_millis,
        )
        txn.create_namespace(view.namespace, if_not_exists=True)
        txn.create_view(view.namespace, view.name, definition)
        expansion_order(txn.state, view)  # a view reached through dangling names: a cycle
        if bind is not None:
            bind(sql)
        return txn.commit()


def drop_view(catalog: Catalog, name: str) -> int:
    """Remove view ``name``; returns the catalog version. Raises NotFoundError."""
    view = parse_view_name(name)
    with catalog.begin() as txn:
        if txn.state.get(ObjectRef(VIEW, view.namespace, view.name), objects_pb2.ViewDef) is None:
            raise NotFoundError("view", str(view))
        txn.drop_view(view.namespace, view.name)
        return txn.commit()
