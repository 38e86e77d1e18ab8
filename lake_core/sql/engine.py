"""Running SQL over a lake in embedded DuckDB: the lake plans, DuckDB executes.

Each table name the query uses is resolved (:mod:`lake_core.sql.resolve`); each pool snapshot
is planned by the read planner (:mod:`lake_core.planning`) with the predicate the query's WHERE
implies for it (:mod:`lake_core.sql.analyze`), and DuckDB is given exactly the planned data:

* **local disk**: a view over ``read_parquet`` of the planned object files (DuckDB's native
  reader, the fastest path; DuckDB skips row groups itself from the same WHERE), with columns
  an older object lacks read as NULL and types cast to the pool schema;
* **S3** (no httpfs needed): a ``pyarrow.dataset`` of the planned fragments with their planned
  row groups, read through the store's Arrow filesystem (:meth:`ObjectStore.arrow_location`)
  and streamed to DuckDB batch by batch, never materialised.

The query runs in a sandboxed database: ``allowed_paths`` lists the planned files only,
external access is disabled, the time zone is UTC (so timestamp literals mean what the lake's
pruning takes them to mean) and the configuration is locked. Usually that database is shared
(:func:`shared_database`: one per planned file set, cached per process) and the query gets a
cursor of its own with TEMP views, so it pays no DuckDB start; a query naming a pool through
a schema (``ns.flights``) or wanting progress gets a fresh database sandboxed after its views
are made. The returned relation keeps its connection (and database) alive.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from lake_core.errors import PurgedObjectError
from lake_core.expr import Expr, Or
from lake_core.ingest.schema import conform_to
from lake_core.objects import ObjectMeta
from lake_core.otree.sampling import and_sample, sample_predicate
from lake_core.planning import Fragment, ReadPlan, open_fragments, plan_read
from lake_core.pruners import read_pruners
from lake_core.purge_records import purged_by
from lake_core.sql.analyze import Analysis, analyze, table_key
from lake_core.sql.errors import SqlError, SqlRefusedError
from lake_core.sql.resolve import (
    PoolTable,
    Resolved,
    TableTable,
    ViewTable,
    pool_schemas,
    resolve_tables,
)

if TYPE_CHECKING:
    import duckdb

    from lake_core.derived.answer import Answer
    from lake_core.lake import Lake
    from lake_core.pool import Pool
    from lake_core.stores.base import ObjectStore

__all__ = ["SqlRun", "run_sql"]

#: How deep views may nest (a view naming itself, directly or not, stops here).
_MAX_VIEW_DEPTH = 16


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


@dataclass
class _PoolRead:
    """One pool snapshot as the query reads it."""

    name: str
    table: PoolTable
    plan: ReadPlan
    local: bool
    files: list[str] = field(default_factory=list)
    counted: bool = False


@dataclass
class SqlRun:
    """A prepared query: the DuckDB relation and what the lake planned for it."""

    relation: duckdb.DuckDBPyRelation
    connection: duckdb.DuckDBPyConnection
    analysis: Analysis
    reads: list[_PoolRead]
    #: Whether (and why) the query was answered from a derived pool (lake_core.derived).
    derivation: Answer | None = None

    @property
    def answered_from(self) -> list[str]:
        """The pools the query actually read (a derived pool when it answered)."""
        return sorted({read.table.pool.name for read in self.reads})

    def stats(self) -> dict[str, dict[str, int]]:
        """Per pool table (as named in the query): objects_total, objects_read,
        row_groups_read, rows_read, bytes_read — what the plan hands DuckDB. On local disk
        the row groups are counted from the footers on first call (DuckDB reads the planned
        files itself and may skip still more)."""
        out: dict[str, dict[str, int]] = {}
        for read in self.reads:
            if not read.counted:
                _count_local(read, self.analysis.columns)
            out[read.name] = read.plan.stats.to_json()
        return out


def _query_columns(columns: frozenset[str] | None, file_columns: list[str]) -> list[str]:
    if columns is None:
        return file_columns
    wanted = {c.lower() for c in columns}
    return [c for c in file_columns if c.lower() in wanted]


def _count_local(read: _PoolRead, columns: frozenset[str] | None) -> None:
    import pyarrow.parquet as pq

    for obj, path in zip(read.plan.objects, read.files, strict=True):
        metadata = pq.read_metadata(path)
        groups = read.plan.row_groups(obj, metadata)
        read.plan.opened()
        rows = sum(metadata.row_group(g).num_rows for g in groups)
        names = metadata.schema.to_arrow_schema().names
        read.plan.read(metadata, groups, _query_columns(columns, names), rows)
    read.counted = True


def _object_path(pool: Pool, obj: ObjectMeta) -> str:
    """The local file of ``obj``, checked to be there at its recorded size."""
    key = pool.layout.data(obj.id)
    path = pool.store.local_path(key)
    assert path is not None
    try:
        size = os.path.getsize(path)
    except FileNotFoundError:
        raise PurgedObjectError(obj.id, purged_by(pool.store, pool.id, obj.id)) from None
    if size != obj.size:
        from lake_core.errors import CorruptDataObjectError

        raise CorruptDataObjectError(
            obj.id, pool.name, f"it is {size} bytes, its commit recorded {obj.size}"
        )
    return path


def _uniform(objects: list[ObjectMeta], schema: pa.Schema) -> bool:
    """Whether every object's recorded columns are exactly the pool's, in the pool's types."""
    want = {f.name: str(f.type) for f in schema}
    return all(
        len(o.columns) == len(want)
        and all(want.get(name) == meta.type for name, meta in o.columns.items())
        for o in objects
    )


#: How many sandboxed databases :func:`shared_database` keeps (least recently used dropped).
SHARED_DATABASES = 8
_shared: OrderedDict[tuple[str, ...], duckdb.DuckDBPyConnection] = OrderedDict()
_shared_lock = threading.Lock()
#: The process the cached databases belong to.
_shared_pid = os.getpid()
#: A forked child's inherited databases (see _cached).
_forked_off: list[duckdb.DuckDBPyConnection] = []


def _sandbox(con: duckdb.DuckDBPyConnection, allowed: tuple[str, ...]) -> None:
    """Make ``con``'s database one :func:`shared_database` may hand out for ``allowed``."""
    paths = "[" + ", ".join(_string(p) for p in allowed) + "]"
    # Database-wide settings, inherited by every cursor: UTC (timestamp literals mean what
    # the lake's pruning takes them to mean), the Parquet metadata cache (objects are
    # immutable, so a footer read once stays true), then the sandbox, locked. A cursor's
    # progress bar cannot be set here (per connection only, and the lock refuses a cursor's
    # SET); it is off by default for the Python client's cursors, and _may_print checks it.
    con.execute(
        f"SET GLOBAL TimeZone='UTC'; SET GLOBAL parquet_metadata_cache=true; "
        f"SET allowed_paths={paths}; SET enable_external_access=false; "
        "SET lock_configuration=true"
    ).fetchall()


def shared_database(allowed: tuple[str, ...]) -> duckdb.DuckDBPyConnection:
    """A sandboxed in-memory DuckDB database (its root connection) that may read exactly the
    files ``allowed`` and nothing else, configuration locked; cached per process by that
    file set, so a query whose plan names the same objects as an earlier one skips DuckDB's
    start (12–25 ms here). A query runs in a cursor of it: its views and registrations are
    TEMP, in that cursor's own catalog, which no other query sees; a cursor (and the
    relation made in it) keeps the database alive after it leaves the cache.

    Sound because DuckDB's ``allowed_paths`` cannot change once locked and every query in
    the database has exactly this file set planned: no query can read a file outside its
    own plan."""
    con = _cached(allowed)
    if con is not None:
        return con
    import duckdb

    con = duckdb.connect(":memory:")
    _sandbox(con, allowed)
    return _remember(allowed, con)


def _cached(allowed: tuple[str, ...]) -> duckdb.DuckDBPyConnection | None:
    global _shared_pid
    with _shared_lock:
        if _shared_pid != os.getpid():
            # A forked child: the parent's DuckDB databases (and their threads) are not its
            # to use; it starts its own. Theirs are kept, never destroyed here: tearing down
            # a database whose threads did not survive the fork crashes the child.
            _forked_off.extend(_shared.values())
            _shared.clear()
            _shared_pid = os.getpid()
        con = _shared.get(allowed)
        if con is not None:
            _shared.move_to_end(allowed)
        return con


def _remember(
    allowed: tuple[str, ...], con: duckdb.DuckDBPyConnection
) -> duckdb.DuckDBPyConnection:
    """Cache ``con`` (sandboxed for ``allowed``) unless a racing query cached one first;
    the one cached is returned."""
    with _shared_lock:
        con = _shared.setdefault(allowed, con)
        _shared.move_to_end(allowed)
        while len(_shared) > SHARED_DATABASES:
            _shared.popitem(last=False)
    return con


def _may_print(cursor: duckdb.DuckDBPyConnection) -> bool:
    """Whether DuckDB's progress bar is on and printing in ``cursor`` (it would print on
    stdout, and a locked database's cursor cannot turn it off). False for the Python client's
    cursors in DuckDB 2.0, even in an interactive session (where the root connection's is on).
    Asked once per process, of the first shared cursor: every cached database is made alike
    (:func:`_sandbox` sets no progress option), so a cursor's default is the same in all of
    them; a DuckDB that changes that default gets a fresh database per query instead. (Asking
    per query cost ~1 ms of every query.)"""
    global _cursors_print
    if _cursors_print is None:
        rows = cursor.execute(
            "SELECT current_setting('enable_progress_bar') "
            "AND current_setting('enable_progress_bar_print')"
        ).fetchall()  # all: a cursor runs one result at a time
        _cursors_print = bool(rows and rows[0][0])
    return _cursors_print


#: What :func:`_may_print` found (None: not asked yet in this process).
_cursors_print: bool | None = None


def parser_cursor() -> tuple[duckdb.DuckDBPyConnection, bool]:
    """A connection that parses and analyses SQL, and whether it is a new database of its
    own, not yet sandboxed: a cursor of the cached database that may read no file, or, the
    first time in a process, a new database that the query then runs in (sandboxed for its
    plan), so a process's first query starts DuckDB once, not twice."""
    parser = _cached(())
    if parser is not None:
        return parser.cursor(), False
    import duckdb

    return duckdb.connect(":memory:"), True


class _Session:
    """One query's registrations. Planning runs first, against a parser cursor; the views and
    registrations it decides are recorded (:attr:`pending`) and applied by :meth:`attach` to
    the connection the query then runs in."""

    def __init__(
        self,
        open_pool: Callable[[str], Pool],
        lake: Lake | None,
        as_of: datetime | None,
        progress: bool,
    ) -> None:
        #: Parses and analyses the query and its views; ``blank``: a new database of its own,
        #: not sandboxed yet (:func:`parser_cursor`), which :meth:`attach` puts to use.
        self.con, self.blank = parser_cursor()
        self.progress = progress
        #: Whether views are TEMP (the query runs in a cursor of a shared database, whose
        #: temporary catalog is its own) — set by :meth:`attach`.
        self.temp = False
        self.pending: list[Callable[[], None]] = []
        self.open_pool, self.lake, self.as_of = open_pool, lake, as_of
        self.reads: list[_PoolRead] = []
        self.allowed: list[str] = []
        self.schemas: set[str] = set()
        #: Table key → the (schema, table) pairs DuckDB looks it up by.
        self.targets: dict[str, list[tuple[str, str]]] = {}
        self.serial = 0
        #: Columns the query mentions (None: ``*``), for the bytes_read counter.
        self.columns: frozenset[str] | None = None
        #: Per OTree pool read with TABLESAMPLE, its sample's predicate (the OTree cut), and
        #: per OTree pool whether each of its occurrences is sampled (all or none may be).
        self.samples: dict[str, Expr] = {}
        self.sampled: dict[str, set[float | None]] = {}
        #: Whether a TABLESAMPLE clause was taken out of the query (it then runs rewritten).
        self.rewritten = False

    def attach(self) -> None:
        """Make the connection the query runs in and apply the recorded registrations.

        Shared (a cursor of a cached sandboxed database, :func:`shared_database`) when every
        name the query reads is unqualified (TEMP views cannot live in a schema of their own)
        and no progress is wanted (a cursor cannot change its settings once the database is
        locked); otherwise a fresh database for this query alone, sandboxed after its views
        are made (:meth:`lock`)."""
        qualified = any(s for pairs in self.targets.values() for s, _ in pairs)
        if not qualified and not self.progress:
            allowed = tuple(sorted(set(self.allowed)))
            shared = _cached(allowed)
            if self.blank:
                # The parsing database becomes a cached one: for this plan if none is, else
                # the parser of later queries. (It ran nothing but the parser.)
                kept = () if shared is not None else allowed
                _sandbox(self.con, kept)
                found = _remember(kept, self.con)
                shared = shared if shared is not None else found
                self.blank = False
            cursor = (shared if shared is not None else shared_database(allowed)).cursor()
            if not _may_print(cursor):
                self.con, self.temp = cursor, True
                for op in self.pending:
                    op()
                return
        import duckdb

        if not self.blank:
            self.con = duckdb.connect(":memory:")
        # UTC, so timestamp literals mean what the lake's pruning takes them to mean. Progress
        # is tracked for the caller to poll (connection.query_progress()), never printed:
        # DuckDB's bar prints on stdout, where the records go. One statement: a query's whole
        # set-up is on the clock. (None of these can go in connect's config.) The Parquet
        # metadata cache lets the query's bind reuse the footers DuckDB read when the view
        # over read_parquet was created (sound: objects are immutable).
        bar = "true" if self.progress else "false"
        self.run(
            f"SET TimeZone='UTC'; SET enable_progress_bar={bar}; "
            "SET enable_progress_bar_print=false; SET parquet_metadata_cache=true"
        )
        for op in self.pending:
            op()
        self.lock()

    def run(self, sql: str) -> list[Any]:
        """Execute and finish ``sql`` (a connection runs one result at a time)."""
        return self.con.execute(sql).fetchall()

    def internal_name(self) -> str:
        self.serial += 1
        return f"__lake_{self.serial}"

    def view_targets(self, key: str) -> list[str]:
        """Where DuckDB looks ``key`` up, quoted (``"ns"."flights"``, ``"flights@dev"``),
        creating the schemas they need."""
        out = []
        for schema, table in self.targets.get(key) or [("", key)]:
            if not schema:
                out.append(_quote(table))
                continue
            if schema not in self.schemas:
                self.run(f"CREATE SCHEMA IF NOT EXISTS {_quote(schema)}")
                self.schemas.add(schema)
            out.append(f"{_quote(schema)}.{_quote(table)}")
        return out

    def create_view(self, key: str, body: str) -> None:
        """``key`` (under every name DuckDB may look it up by) as the view ``body``."""
        first, *others = self.view_targets(key)
        kind = "TEMP VIEW" if self.temp else "VIEW"
        self.run(f"CREATE {kind} {first} AS {body}")
        for other in others:
            self.run(f"CREATE {kind} {other} AS SELECT * FROM {first}")

    def register_arrow(self, key: str, data: Any, where: str = "") -> None:
        internal = self.internal_name()
        self.con.register(internal, data)
        self.create_view(key, f"SELECT * FROM {internal}{where}")

    def add_query(self, analysis: Analysis) -> None:
        """Resolve and register every table ``analysis`` names, and those of the views it
        reads (recursively), each name once: a pool read by the query and by a view is
        planned with the OR of their predicates, a view is created after what it reads."""
        resolved: dict[str, Resolved] = {}
        predicates: dict[str, Expr | None] = {}
        views: list[tuple[str, str]] = []  # (key, SQL), discovered outside-in
        pending = [(analysis, 0)]
        while pending:
            current, depth = pending.pop()
            for key, pairs in current.targets().items():
                known = self.targets.setdefault(key, [])
                known.extend(p for p in pairs if p not in known)
            unresolved = {k: r for k, r in current.tables.items() if k not in resolved}
            fresh = resolve_tables(
                unresolved, current.cte_names, self.open_pool, self.lake, self.as_of
            )
            resolved.update(fresh)
            self.take_samples(current, resolved, depth)
            schemas = pool_schemas(resolved)
            for key, expr in current.predicates(schemas).items():
                if key not in resolved:
                    continue
                if key not in predicates:
                    predicates[key] = expr
                else:
                    prior = predicates[key]
                    predicates[key] = None if prior is None or expr is None else Or(prior, expr)
            for key, source in fresh.items():
                if isinstance(source, ViewTable):
                    if depth >= _MAX_VIEW_DEPTH:
                        raise SqlError(f"{key}: views nest more than {_MAX_VIEW_DEPTH} deep")
                    views.append((key, source.sql))
                    pending.append((analyze(self.con, source.sql), depth + 1))
        for key, fractions in self.sampled.items():
            if len(fractions) > 1:
                raise SqlRefusedError(
                    f"{key}: an OTree pool sampled with TABLESAMPLE must be sampled alike "
                    "wherever the query (and the views it reads) names it"
                )
        for key, source in resolved.items():
            if isinstance(source, PoolTable):
                sample = self.samples.get(key)
                self.add_pool(key, source, and_sample(predicates.get(key), sample), sample)
            elif isinstance(source, TableTable):
                self.later(self.register_arrow, key, source.table)
        for key, sql in reversed(views):  # inner views first: a view binds what it reads
            self.later(self.create_view, key, sql)

    def take_samples(self, analysis: Analysis, resolved: dict[str, Resolved], depth: int) -> None:
        """Map ``TABLESAMPLE p%`` (``PERCENT``, DuckDB's default method) on an OTree pool to
        the OTree cut: the clause is taken out of the query, and the pool is read as the rows
        with ``W(0) <= _lake_weight < W(p/100)`` (:mod:`lake_core.otree.sampling`): pruned by
        cube, always the same rows, exactly the brute-force filter. Other samples (``ROWS``,
        ``reservoir``/``bernoulli``, of a subquery, or on a pool without the OTree layout) are
        DuckDB's own. Raises SqlRefusedError for the cut inside a view, SqlError for a
        percentage outside (0, 100]."""
        for node in analysis.bases():
            key = table_key(str(node.get("schema_name", "")), str(node.get("table_name", "")))
            source = resolved.get(key)
            if not isinstance(source, PoolTable) or source.pool.config.otree is None:
                continue
            clause = node.get("sample")
            fraction = _otree_fraction(key, clause)
            if fraction is None:
                self.sampled.setdefault(key, set()).add(None)
                continue
            if depth > 0:
                raise SqlRefusedError(
                    f"{key}: TABLESAMPLE of an OTree pool inside a view is not supported; "
                    "sample the view instead"
                )
            self.sampled.setdefault(key, set()).add(fraction)
            predicate = sample_predicate(source.pool.config.otree, fraction, key)
            if predicate is not None:
                self.samples[key] = predicate
            node["sample"] = None  # DuckDB must not sample these rows again
            self.rewritten = True

    def later(self, op: Callable[..., None], *args: Any) -> None:
        """Record ``op(*args)`` for :meth:`attach` (run on the query's own connection)."""
        self.pending.append(lambda: op(*args))

    def add_pool(
        self, key: str, source: PoolTable, predicate: Expr | None, sample: Expr | None = None
    ) -> None:
        pool, snap = source.pool, source.snapshot
        schema = snap.schema
        if schema is None or not len(schema):
            # Nothing loaded yet: the key fields, typeless, so count(*) is 0 and names bind.
            schema = pa.schema([(f, pa.null()) for f in pool.config.key.fields])
        pruners = read_pruners(
            snap, pool.config.key, predicate, schema, pool.store, pool.id, otree=pool.config.otree
        )
        plan = plan_read(snap, pool.config.key, predicate, schema=schema, pruners=pruners)
        # DuckDB's read_parquet takes whole files (and prunes them by their statistics): when
        # a rule may drop row groups statistics would keep (an index), read through the
        # pyarrow dataset of the planned row groups instead.
        local = pool.store.local_path(pool.layout.data("probe")) is not None and not any(
            rule.beyond_statistics for rule in pruners
        )
        read = _PoolRead(key, source, plan, local)
        self.reads.append(read)
        # A sample's cut filters the rows the view yields (the query's own WHERE does not
        # hold it: it was a TABLESAMPLE clause).
        where = "" if sample is None else f" WHERE {_sample_sql(sample)}"
        if not plan.objects:
            read.counted = True
            self.later(self.register_arrow, key, schema.empty_table())
        elif local:
            read.files = [_object_path(pool, o) for o in plan.objects]
            self.allowed.extend(read.files)
            self.later(self.add_parquet_view, key, read, schema, where)
        else:
            read.counted = True
            self.later(self.register_arrow, key, self.dataset(read, schema), where)

    def add_parquet_view(
        self, key: str, read: _PoolRead, schema: pa.Schema, where: str = ""
    ) -> None:
        """A view over read_parquet of the planned files, shaped as the pool schema."""
        files = "[" + ", ".join(_string(f) for f in read.files) + "]"
        if _uniform(read.plan.objects, schema):
            # Every object holds every pool column in the pool's type (the commits say so):
            # DuckDB reads the files as they are, with no probe of their footers here.
            source = f"read_parquet({files})"
            select = ", ".join(_quote(name) for name in schema.names)
        else:
            # Files differ (a column added later, an all-null column written as type null):
            # DuckDB unifies them by name, then each column is made the pool's.
            source = f"read_parquet({files}, union_by_name=true)"
            select = self.conforming_columns(source, schema)
        self.create_view(key, f"SELECT {select} FROM {source}{where}")

    def conforming_columns(self, source: str, schema: pa.Schema) -> str:
        """The select list that reads ``source`` as ``schema``: a column no file has is a
        typed NULL, a column whose files disagree with the pool's type is cast to it."""
        probe = self.internal_name()
        self.con.register(probe, schema.empty_table())
        wanted = {row[0]: row[1] for row in self.run(f"DESCRIBE {probe}")}
        self.con.unregister(probe)
        found = {row[0]: row[1] for row in self.run(f"DESCRIBE SELECT * FROM {source}")}
        columns = []
        for name, duck_type in wanted.items():
            if name not in found:
                columns.append(f"CAST(NULL AS {duck_type}) AS {_quote(name)}")
            elif found[name] != duck_type:
                columns.append(f"CAST({_quote(name)} AS {duck_type}) AS {_quote(name)}")
            else:
                columns.append(_quote(name))
        return ", ".join(columns)

    def dataset(self, read: _PoolRead, schema: pa.Schema) -> Any:
        """The planned fragments and row groups as a pyarrow dataset over the store's Arrow
        filesystem (footers opened and checked by the planner, in parallel)."""
        import pyarrow.dataset as ds

        pool = read.table.pool
        fmt = ds.ParquetFileFormat()
        # Footers read once: the planner opens each through the store's Arrow filesystem as a
        # pyarrow fragment (at its recorded size: no HEAD), checks it against the commit and
        # keeps it parsed in the fragment (and in its subset of the planned row groups), so
        # the scan fetches no footer again.
        fragments = open_fragments(
            read.plan,
            pool.store,
            pool.id,
            pool.name,
            self.columns,
            arrow_format=fmt,
            row_ranges=True,
        )
        fs, _ = pool.store.arrow_location(pool.layout.data("probe"))
        parts = [fragment.arrow for fragment in fragments if fragment.row_groups]
        whole = ds.FileSystemDataset(parts, schema, fmt, fs)
        # Row groups an exact index narrows to a few rows: those rows, read by pages.
        rows = [
            conform_to(table, schema)
            for fragment in fragments
            for table in _read_parts(read.plan, fragment, pool.store)
        ]
        if not rows:
            return whole
        return ds.dataset([whole, ds.dataset(rows, schema=schema)])

    def lock(self) -> None:
        """No file beyond the planned objects, no configuration change, from here on."""
        paths = "[" + ", ".join(_string(p) for p in self.allowed) + "]"
        self.run(
            f"SET allowed_paths={paths}; SET enable_external_access=false; "
            "SET lock_configuration=true"
        )


def _read_parts(plan: ReadPlan, fragment: Fragment, store: ObjectStore) -> list[pa.Table]:
    """The rows of ``fragment``'s :attr:`~lake_core.planning.Fragment.parts`, read by pages
    (every column of the file: DuckDB picks the query's, which the query's text does not
    always name — a view, a join's USING, ``SELECT t``), counted in ``plan``; a group whose
    pages this reader cannot follow is read whole instead (an index never makes a read
    fail)."""
    from lake_core.pages import PageLayoutError
    from lake_core.reader import open_object

    if not fragment.parts or fragment.pages is None:
        return []
    read = fragment.metadata.schema.to_arrow_schema().names
    out = []
    for group, ranges in sorted(fragment.parts.items()):
        try:
            table, fetched = fragment.pages.read(group, read, ranges)
            plan.read_part(table.num_rows, fetched)
        except PageLayoutError:
            opened = open_object(store, fragment.key, fragment.obj.size)
            table = opened.file.read_row_group(group, columns=read)
            plan.read(fragment.metadata, [group], read, table.num_rows)
        out.append(table)
    return out


def _otree_fraction(key: str, clause: Any) -> float | None:
    """The fraction a ``TABLESAMPLE`` clause asks of an OTree pool, or None when the clause
    is absent or is not the cut's kind (rows, an explicit reservoir or bernoulli method)."""
    if not isinstance(clause, dict) or not clause.get("is_percentage"):
        return None
    if str(clause.get("method", "")).lower() != "system":
        return None
    size = clause.get("sample_size") or {}
    value = size.get("value")
    if not isinstance(value, int | float | str):
        return None
    try:
        percent = float(value)
    except ValueError:
        return None
    if not 0 < percent <= 100:
        raise SqlError(f"{key}: TABLESAMPLE takes a percentage above 0 and at most 100")
    return percent / 100


def _sample_sql(sample: Expr) -> str:
    """The cut's predicate (``_lake_weight >= lo AND _lake_weight < hi``) as SQL."""
    return str(sample)


def run_sql(
    sql: str,
    open_pool: Callable[[str], Pool],
    lake: Lake | None = None,
    *,
    as_of: datetime | None = None,
    progress: bool = False,
    derived: bool = True,
) -> SqlRun:
    """Prepare ``sql`` (read-only, one SELECT) over the pools ``open_pool`` finds. Raises
    SqlSyntaxError, SqlRefusedError, SqlError (unknown column …), PoolNotFoundError and the
    ref errors; executing the relation may raise ``duckdb.Error`` (wrap with
    :func:`engine_error`). ``derived`` (with ``lake``): answer an aggregate query from a
    derived pool that reflects exactly the snapshot it reads (:mod:`lake_core.derived.answer`);
    :attr:`SqlRun.derivation` says whether and why."""
    import duckdb

    derivation = None
    open_pool = _opened_once(open_pool)
    if derived and lake is not None:
        from lake_core.derived.answer import answer

        derivation = answer(sql, lake, open_pool, as_of=as_of)
        if derivation.sql is not None:
            sql = derivation.sql

    session = _Session(open_pool, lake, as_of, progress)
    analysis = analyze(session.con, sql)
    session.columns = analysis.columns
    session.add_query(analysis)
    if session.rewritten:
        sql = analysis.rewritten(session.con)
    session.attach()
    try:
        relation = session.con.sql(sql)
    except duckdb.Error as e:
        raise engine_error(e) from None
    return SqlRun(relation, session.con, analysis, session.reads, derivation)


def _opened_once(open_pool: Callable[[str], Pool]) -> Callable[[str], Pool]:
    """``open_pool`` opening each name once for this query (the derived check and the
    planner ask for the same pools; a handle reads its tips afresh on every resolve)."""
    opened: dict[str, Pool] = {}

    def open_once(name: str) -> Pool:
        if name not in opened:
            opened[name] = open_pool(name)
        return opened[name]

    return open_once


def engine_error(error: Exception) -> SqlError:
    """A DuckDB error as one line: ``Binder Error: Referenced column "x" not found …``. A
    message DuckDB spreads over lines is joined up to its first blank line or its ``LINE n:``
    excerpt of the query (with a caret under it: useless on one line)."""
    kept: list[str] = []
    for line in str(error).strip().splitlines():
        if not line.strip() or line.startswith("LINE "):
            break
        kept.append(line.strip())
    return SqlError(" ".join(kept) if kept else type(error).__name__)
