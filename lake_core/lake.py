"""The lake: its marker, its pool registry, and opening pools.

``<lake>/lake.json`` marks a lake (format, version, id) and is written once with
put-if-missing, so two racing ``init``s cannot both succeed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any, cast

import pyarrow as pa

from lake_core.catalog import Catalog, CatalogPoolRegistry
from lake_core.clock import to_iso
from lake_core.codec import decode_doc, encode_doc
from lake_core.config import LakeConfig, shown_uri
from lake_core.derived.spec import DerivedLink
from lake_core.errors import (
    AlreadyExistsError,
    NotFoundError,
    ObjectExistsError,
    ObjectNotFoundError,
    PoolNotFoundError,
    UsageError,
)
from lake_core.ids import new_id
from lake_core.indexes.rules import DEFAULT_FPP, EXACT, IndexRule, rules_for
from lake_core.layout import LAKE_MARKER
from lake_core.locks import LockProvider, open_lock_provider
from lake_core.names import PoolName
from lake_core.otree.settings import OTreeLayout
from lake_core.partitions import PartitionSpec
from lake_core.pool import Pool
from lake_core.poolkey import PoolKey
from lake_core.registry import PoolConfig, PoolRegistry
from lake_core.remote.uri import is_remote_uri
from lake_core.stores.base import ObjectStore
from lake_core.stores.factory import open_store
from lake_core.txn import DEFAULT_TXN_RETENTION
from lake_core.writer import DEFAULT_SEEK_STRIDE, DEFAULT_TARGET_SIZE

if TYPE_CHECKING:
    from lake_core.catalog.history import CatalogVersion
    from lake_core.views import View

LAKE_FORMAT = "lakepool.lake"
LAKE_VERSION = 1


class Lake:
    """An open lake. Use :meth:`init` or :meth:`open`."""

    def __init__(self, store: ObjectStore, config: LakeConfig, lake_id: str) -> None:
        self.store = store
        self.config = config
        self.id = lake_id
        self._journal_locks: LockProvider | None = None
        pools = CatalogPoolRegistry(store, config)
        #: The Olympia catalog at ``<lake>/catalog/``: pools, namespaces, views, index rules.
        self.catalog: Catalog = pools.catalog
        self.registry: PoolRegistry = pools
        self._pools = pools

    @classmethod
    def init(cls, config: LakeConfig | str, store: ObjectStore | None = None) -> Lake:
        """Create a lake at ``config.uri``. Raises AlreadyExistsError if one is there."""
        config = LakeConfig(uri=config) if isinstance(config, str) else config
        store = store or open_store(config.uri, config.conditional_writes, config.s3)
        lake_id = new_id(config.clock)
        marker = encode_doc(
            LAKE_FORMAT, LAKE_VERSION, {"id": lake_id, "created": to_iso(config.clock.now())}
        )
        try:
            store.put_if_missing(LAKE_MARKER, marker)
        except ObjectExistsError:
            raise AlreadyExistsError("lake", shown_uri(config.uri)) from None
        lake = cls(store, config, lake_id)
        lake.catalog.initialize()
        return lake

    @classmethod
    def open(
        cls, config: LakeConfig | str, store: ObjectStore | None = None, *, token: str | None = None
    ) -> Lake:
        """Open the lake at ``config.uri``. Raises NotFoundError if there is none.

        An ``http://`` or ``https://`` URI is a lake served by ``lake serve``: the result is
        then a :class:`lake_core.remote.RemoteLake` (``token``: its bearer token), which
        answers the calls the service serves with the same types and errors (pools, load,
        scan/read, log, branches, merge, delete, revert, compact, cleanup, catalog log) and
        raises NotServedError, a LakeError, for the rest (docs/service.md)."""
        config = LakeConfig(uri=config) if isinstance(config, str) else config
        if store is None and is_remote_uri(config.uri):
            from lake_core.remote.lake import RemoteLake

            # Duck-typed, not a subclass: a RemoteLake holds no store, catalog or locks.
            return cast(Lake, RemoteLake(config.uri, token, config.user))
        store = store or open_store(config.uri, config.conditional_writes, config.s3)
        try:
            data = store.get(LAKE_MARKER)
        except ObjectNotFoundError:
            raise NotFoundError("lake", shown_uri(config.uri), "run `lake init` first") from None
        doc = decode_doc(LAKE_MARKER, data, LAKE_FORMAT, LAKE_VERSION)
        return cls(store, config, str(doc.get("id", "")))

    # -- pools --------------------------------------------------------------------------------

    def create_pool(
        self,
        name: str,
        key: PoolKey | str | None = None,
        *,
        target_size: int = DEFAULT_TARGET_SIZE,
        seek_stride: int = DEFAULT_SEEK_STRIDE,
        partition_by: str | None = None,
        schema_mode: str = "merge",
        txn_retention: timedelta | None = DEFAULT_TXN_RETENTION,
        unique: bool = False,
        otree: OTreeLayout | None = None,
        derived: DerivedLink | None = None,
    ) -> Pool:
        """A new pool with branch ``main``. ``schema_mode``: ``merge`` or ``strict`` (see
        :mod:`lake_core.schema_mode`). ``txn_retention``: how long recorded application
        transactions are remembered (None: forever; :mod:`lake_core.txn`). ``unique``: rows
        are unique by the pool key, every load upserts (:mod:`lake_core.upsert`). ``otree``:
        lay rows out in an OTree over those columns (:mod:`lake_core.otree`; see
        :func:`lake_core.otree.settings.parse_layout`), which neither a unique nor a
        partitioned pool can have. Raises AlreadyExistsError, InvalidNameError, UsageError."""
        from lake_core.schema_mode import validate_schema_mode

        validate_schema_mode(schema_mode)
        if txn_retention is not None and txn_retention < timedelta(seconds=1):
            raise UsageError(f"transaction retention must be at least a second: {txn_retention}")
        pool_name = PoolName.parse(name)
        pool_key = PoolKey.parse(key) if isinstance(key, str) else (key or PoolKey())
        if otree is not None:
            from lake_core.otree.settings import check_combination

            check_combination(otree, unique=unique, partition_by=partition_by)
        if partition_by is not None:
            partition_by = str(PartitionSpec.parse(partition_by))
        pool_config = PoolConfig(
            id=new_id(self.config.clock),
            name=pool_name,
            key=pool_key,
            target_size=target_size,
            seek_stride=seek_stride,
            partition_by=partition_by,
            created=self.config.clock.now(),
            schema_mode=schema_mode,
            txn_retention=txn_retention,
            unique=unique,
            otree=otree,
            derived=derived,
        )
        try:
            self.registry.get(pool_name)
        except PoolNotFoundError:
            pass
        else:
            # Checked first so the common mistake leaves nothing behind; a racing creator of
            # the same name is still refused by the catalog commit below.
            raise AlreadyExistsError("pool", str(pool_name))
        if self._view_named(pool_name):
            raise AlreadyExistsError("view", str(pool_name))  # likewise, before any write

        def index_rules() -> tuple[IndexRule, ...]:
            snap = self._pools.latest()
            return () if snap is None else rules_for(snap.state, pool_name)

        pool = self._open_pool(pool_config, index_rules)
        # The pool's journal exists before its name does: a reader that finds the name always
        # finds a usable pool. A crash (or a lost race for the name) between the two leaves an
        # unnamed pool directory behind.
        pool.initialize()
        self.registry.create(pool_config)
        return pool

    def pool(self, name: str) -> Pool:
        """The pool called ``name``, with the index rules that cover it at the same catalog
        version (read when its first commit adds objects). Raises PoolNotFoundError."""
        pool_name = PoolName.parse(name)
        snap = self._pools.latest()
        config = self._pools.get_at(snap, pool_name)

        def index_rules() -> tuple[IndexRule, ...]:
            return () if snap is None else rules_for(snap.state, pool_name)

        return self._open_pool(config, index_rules)

    def _view_named(self, name: PoolName) -> bool:
        from lake_core.views import get_view

        try:
            state = self.catalog.snapshot().state
        except NotFoundError:
            return False  # a lake made before its catalog has no views
        return get_view(state, name) is not None

    def _open_pool(
        self, config: PoolConfig, index_rules: Callable[[], Sequence[IndexRule]] | None = None
    ) -> Pool:
        registry = self._pools

        def revise(change: Callable[[OTreeLayout], OTreeLayout | None]) -> OTreeLayout:
            return registry.revise_otree(config.name, config.id, change)

        if self.config.conditional_writes:
            return Pool(
                self.store,
                config,
                self.config,
                locks=self.locks,
                index_rules=index_rules,
                revise=revise,
            )
        # No conditional writes: every journal append holds the pool's journal lock (Zed's
        # lock-service strategy). Without ZooKeeper that is a file lock: one machine only.
        if self._journal_locks is None:
            self._journal_locks = self.locks()
        locks = self._journal_locks

        def journal_lock() -> Any:
            return locks.journal_lock(config.id, timeout=120)

        return Pool(
            self.store,
            config,
            self.config,
            journal_lock,
            locks=self.locks,
            index_rules=index_rules,
            revise=revise,
        )

    def pools(self) -> list[PoolConfig]:
        return self.registry.list()

    def listing(
        self, at_version: int | str | None = None, as_of: datetime | None = None
    ) -> tuple[list[PoolConfig], list[View]]:
        """The pools and views of the latest catalog version, or of the version
        ``at_version`` (a number or an export's name) or ``as_of`` names (``lake ls``).
        Raises NotFoundError for a version that does not exist, UsageError for both."""
        from lake_core.views import list_views

        try:
            snap = self.catalog.snapshot_at(at_version, as_of)
        except NotFoundError:
            if at_version is not None or as_of is not None:
                raise
            return self.pools(), []  # no catalog yet
        return CatalogPoolRegistry.list_at(snap), list_views(snap)

    def catalog_versions(self, limit: int | None = None) -> list[CatalogVersion]:
        """The catalog's versions, newest first (``lake catalog log``; only the newest
        ``limit`` when given)."""
        from lake_core.catalog.history import catalog_versions

        return list(catalog_versions(self.catalog, limit))

    def locks(self) -> LockProvider:
        """The lake's lock provider: ZooKeeper when configured, else local file locks. Use it
        as a context manager so a ZooKeeper session is closed."""
        return open_lock_provider(self.config, self.id, self.config.uri)

    def sql(self, query: str, *, as_of: datetime | None = None) -> Any:
        """Run read-only SQL over the lake's pools (``flights``, ``ns.flights``,
        ``"flights@dev"``, ``"flights@<commit>"``); ``as_of`` applies to every pool. Returns a
        ``duckdb.DuckDBPyRelation`` (``.arrow()``, ``.df()``, ``.pl()``); see docs/sql.md.
        Raises SqlSyntaxError, SqlRefusedError, SqlError, PoolNotFoundError."""
        from lake_core.sql import run_sql  # deferred: DuckDB is imported by SQL only

        return run_sql(query, self.pool, self, as_of=as_of).relation

    def drop_pool(self, name: str) -> PoolConfig:
        """Remove ``name`` from the registry; its files stay until cleanup."""
        return self.registry.drop(PoolName.parse(name))

    # -- index rules (lake_core.indexes) -------------------------------------------------------

    def create_index_rule(
        self,
        name: str,
        field: str,
        kind: str = EXACT,
        *,
        fpp: float = DEFAULT_FPP,
        pools: Sequence[str] = (),
    ) -> tuple[IndexRule, int]:
        """Create index rule ``name`` (``NS.RULE``: it covers pools of namespace NS, or only
        ``pools`` of it) on top-level ``field``; returns the rule and the catalog version.
        Loads and compactions of covered pools index their new objects from then on; ``lake
        index apply`` indexes existing ones. Refused, changing nothing (UsageError unless
        named): a bad name, kind or rate, a rule of that name (AlreadyExistsError), a listed
        pool that does not exist (PoolNotFoundError), a namespace that does not exist (a
        typo would make a rule that covers nothing), ``field`` of a type indexes do not cover
        in a covered pool's schema, or ``field`` in none of the covered pools that hold data
        (a typo; a rule for a column no pool has yet is made before their data, or with
        ``--pool`` naming empty pools)."""
        from lake_core.indexes.canonical import check_indexable
        from lake_core.indexes.rules import check_field, create_rule, parse_rule_name

        rule_name = parse_rule_name(name)
        check_field(field)
        snap = self._pools.latest()
        if snap is None or snap.state.namespace(rule_name.namespace) is None:
            raise UsageError(
                f"namespace {rule_name.namespace} does not exist: an index rule covers pools of "
                "its own namespace (NAMESPACE.RULE)"
            )
        schemas = {}
        for config in self._pools.list_at(snap):
            if config.name.namespace != rule_name.namespace or (
                pools and config.name.name not in pools
            ):
                continue
            schema = self._open_pool(config).schema()
            if schema is not None and len(schema):
                schemas[str(config.name)] = schema
        for pool_name, schema in schemas.items():
            if field in schema.names and not pa.types.is_null(schema.field(field).type):
                try:
                    check_indexable(schema.field(field))
                except UsageError as e:
                    raise UsageError(
                        f"{e} (in pool {pool_name}; --pool limits the rule to other pools)"
                    ) from None
        if schemas and not any(field in s.names for s in schemas.values()):
            raise UsageError(
                f"no pool that index rule {rule_name} covers has a field {field!r} "
                f"(pools: {', '.join(sorted(schemas))})"
            )
        return create_rule(self.catalog, name, field, kind, fpp=fpp, pools=tuple(pools))

    def drop_index_rule(self, name: str) -> tuple[IndexRule | None, int]:
        """Drop index rule ``name``; returns it and the catalog version. New objects are no
        longer indexed by it; entries already committed stay until ``lake index apply
        --remove`` (or their objects go). Raises NotFoundError."""
        from lake_core.indexes.rules import drop_rule

        return drop_rule(self.catalog, name)

    def index_rules(self) -> list[IndexRule]:
        """Every usable index rule of the latest catalog version, by namespace and name."""
        from lake_core.indexes.rules import rules_in

        snap = self._pools.latest()
        return [] if snap is None else rules_in(snap.state)

    def index_rule(self, name: str) -> IndexRule:
        """Index rule ``name``; NotFoundError if there is none."""
        from lake_core.indexes.rules import find_rule

        snap = self._pools.latest()
        if snap is None:
            raise NotFoundError("index rule", name)
        return find_rule(snap.state, name)

    # -- views and metadata tables (lake_core.views, lake_core.introspection) -------------------

    def create_view(self, name: str, sql: str) -> int:
        """Save the read-only SELECT ``sql`` as view ``name`` in the catalog; returns the catalog
        version. Refused, changing nothing, when the SQL is not one SELECT, a table it names does
        not exist, the name is taken, or the query does not bind (an unknown column:
        SqlError) (:func:`lake_core.views.create_view`)."""
        from lake_core.sql import run_sql
        from lake_core.sql.metadata import view_tables
        from lake_core.views import create_view

        def bind(query: str) -> None:
            run_sql(query, self.pool, self).connection.close()

        return create_view(
            self.catalog, name, sql, view_tables, self.catalog.now_millis(), bind=bind
        )

    def drop_view(self, name: str) -> int:
        """Remove view ``name``; returns the catalog version. Raises NotFoundError."""
        from lake_core.views import drop_view

        return drop_view(self.catalog, name)

    def views(self) -> list[Any]:
        """The views of the latest catalog version (:class:`lake_core.views.View`), by name."""
        from lake_core.views import list_views

        return list_views(self.catalog.snapshot())

    def metadata(
        self, pool: str, table: str, ref: str | None = None, *, as_of: datetime | None = None
    ) -> Any:
        """A metadata table as a ``pyarrow.Table``: ``POOL[@REF]$TABLE`` for TABLE ``commits``,
        ``objects``, ``branches``, ``partitions``, or ``lake$pools``/``lake$views``
        (:mod:`lake_core.introspection`)."""
        from lake_core.introspection import metadata_table

        return metadata_table(self, pool, table, ref, as_of)
