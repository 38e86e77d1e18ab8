"""The lake's pool registry, kept in the catalog: pools are the catalog's tables.

A pool ``NS.NAME`` is the table ``NAME`` in namespace ``NS`` (a bare name is in ``default``);
its namespace is created on first use. Its settings are its ``TableDef`` and round-trip
exactly: id, key fields and order, target size, seek stride, partitioning, creation time
(microseconds), layout, the schema mode (property ``schema_mode``; absent in pools made
before schema modes, which read as ``merge``) and the transaction retention (property
``txn_retention_seconds``, whole seconds or ``never``; absent: the default, 30 days), and
uniqueness (property ``unique`` = ``true``; absent: not unique), and a derived pool's source
pool id and definition (properties ``derived_source``, ``derived_sql``; :mod:`lake_core.derived`). The layout is ``sorted``, or
``otree`` with the OTree's settings and revisions as its options (:mod:`lake_core.otree.settings`).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime, timedelta

from lake_core.catalog.btree_keys import ObjectRef
from lake_core.catalog.catalog import Catalog
from lake_core.catalog.proto import objects_pb2
from lake_core.catalog.state import CatalogSnapshot
from lake_core.config import LakeConfig
from lake_core.derived.spec import DerivedLink
from lake_core.errors import (
    CatalogConflictError,
    CommitStateUnknownError,
    CorruptObjectError,
    NotFoundError,
    PoolNotFoundError,
    UsageError,
)
from lake_core.names import PoolName
from lake_core.otree.settings import LAYOUT_KIND, OTreeLayout
from lake_core.poolkey import PoolKey
from lake_core.registry import (
    PoolConfig,
    PoolRegistry,
    parse_retention_seconds,
    retention_seconds,
)
from lake_core.stores.base import ObjectStore
from lake_core.txn import DEFAULT_TXN_RETENTION

POOL_FORMAT_VERSION = 1
DEFAULT_LAYOUT = "sorted"
SCHEMA_MODE = "schema_mode"
TXN_RETENTION = "txn_retention_seconds"
UNIQUE = "unique"
DERIVED_SOURCE = "derived_source"
DERIVED_SQL = "derived_sql"
_REVISE_ATTEMPTS = 50
_UNKNOWN_ATTEMPTS = 3
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_ORDERS = {"asc": objects_pb2.KEY_ORDER_ASC, "desc": objects_pb2.KEY_ORDER_DESC}


def _micros(t: datetime) -> int:
    aware = t if t.tzinfo is not None else t.replace(tzinfo=UTC)
    return (aware - _EPOCH) // timedelta(microseconds=1)


def table_def_of(config: PoolConfig) -> objects_pb2.TableDef:
    """A pool's settings as its catalog definition."""
    definition = objects_pb2.TableDef(
        id=config.id,
        key_fields=list(config.key.fields),
        key_order=_ORDERS[config.key.order],
        target_size=config.target_size,
        seek_stride=config.seek_stride,
        layout=(
            objects_pb2.PoolLayout(kind=DEFAULT_LAYOUT)
            if config.otree is None
            else objects_pb2.PoolLayout(kind=LAYOUT_KIND, options=config.otree.to_options())
        ),
        format_version=POOL_FORMAT_VERSION,
    )
    if config.partition_by is not None:
        definition.partition_by = config.partition_by
    if config.created is not None:
        definition.created_at_micros = _micros(config.created)
    if config.schema_mode != "merge":
        definition.properties[SCHEMA_MODE] = config.schema_mode
    if config.txn_retention != DEFAULT_TXN_RETENTION:
        seconds = retention_seconds(config.txn_retention)
        definition.properties[TXN_RETENTION] = "never" if seconds is None else str(seconds)
    if config.unique:
        definition.properties[UNIQUE] = "true"
    if config.derived is not None:
        definition.properties[DERIVED_SOURCE] = config.derived.source_id
        definition.properties[DERIVED_SQL] = config.derived.sql
    return definition


def pool_config_of(ref: ObjectRef, definition: objects_pb2.TableDef) -> PoolConfig:
    """The settings a pool's catalog definition holds."""
    orders = {v: k for k, v in _ORDERS.items()}
    if definition.key_order not in orders or not definition.key_fields:
        raise CorruptObjectError(f"pool {ref.display}", "its definition has no valid key")
    created = (
        _EPOCH + timedelta(microseconds=definition.created_at_micros)
        if definition.HasField("created_at_micros")
        else None
    )
    return PoolConfig(
        id=definition.id,
        name=PoolName(ref.namespace, ref.name),
        key=PoolKey(tuple(definition.key_fields), orders[definition.key_order]),
        target_size=int(definition.target_size),
        seek_stride=int(definition.seek_stride),
        partition_by=definition.partition_by if definition.HasField("partition_by") else None,
        created=created,
        schema_mode=definition.properties.get(SCHEMA_MODE, "merge"),
        txn_retention=(
            parse_retention_seconds(definition.properties[TXN_RETENTION])
            if TXN_RETENTION in definition.properties
            else DEFAULT_TXN_RETENTION
        ),
        unique=definition.properties.get(UNIQUE) == "true",
        otree=(
            OTreeLayout.from_options(definition.layout.options)
            if definition.layout.kind == LAYOUT_KIND
            else None
        ),
        derived=(
            DerivedLink(definition.properties[DERIVED_SOURCE], definition.properties[DERIVED_SQL])
            if DERIVED_SOURCE in definition.properties
            else None
        ),
    )


class CatalogPoolRegistry(PoolRegistry):
    """Pools as catalog tables. Every call reads the latest catalog version; changes are one
    catalog transaction each (racing changes are replayed or refused per the catalog's rules)."""

    def __init__(self, store: ObjectStore, config: LakeConfig, catalog: Catalog | None = None):
        self.catalog = catalog or Catalog.for_lake(store, config)

    def latest(self) -> CatalogSnapshot | None:
        """The latest catalog version (None: a lake made before its catalog)."""
        try:
            return self.catalog.snapshot()
        except NotFoundError:
            return None  # a lake made before its catalog: no pools yet

    def get(self, name: PoolName) -> PoolConfig:
        return self.get_at(self.latest(), name)

    @staticmethod
    def get_at(snap: CatalogSnapshot | None, name: PoolName) -> PoolConfig:
        """Pool ``name`` at one catalog version. Raises PoolNotFoundError."""
        definition = None if snap is None else snap.state.pool(name.namespace, name.name)
        if definition is None:
            raise PoolNotFoundError(str(name))
        return pool_config_of(ObjectRef(objects_pb2.TABLE, name.namespace, name.name), definition)

    def list(self) -> list[PoolConfig]:
        snap = self.latest()
        return [] if snap is None else self.list_at(snap)

    @staticmethod
    def list_at(snapshot: CatalogSnapshot) -> builtins.list[PoolConfig]:
        """Every pool of one catalog version, sorted by name."""
        pools = [pool_config_of(ref, d) for ref, d in snapshot.state.pools()]
        return sorted(pools, key=lambda p: p.name)

    def create(self, config: PoolConfig) -> None:
        with self.catalog.begin() as txn:
            txn.create_namespace(config.name.namespace, if_not_exists=True)
            txn.create_pool(config.name.namespace, config.name.name, table_def_of(config))
            txn.commit()

    def alter(self, config: PoolConfig) -> int:
        """Replace the settings of pool ``config.name`` (its id must not change); returns the
        catalog version. Raises PoolNotFoundError, CatalogConflictError."""
        with self.catalog.begin() as txn:
            current = txn.state.pool(config.name.namespace, config.name.name)
            if current is None:
                raise PoolNotFoundError(str(config.name))
            if current.id != config.id:
                raise PoolNotFoundError(
                    str(config.name), f"it is pool {current.id}, not {config.id}"
                )
            txn.alter_pool(config.name.namespace, config.name.name, table_def_of(config))
            return txn.commit()

    def revise_otree(
        self, name: PoolName, pool_id: str, change: Callable[[OTreeLayout], OTreeLayout | None]
    ) -> OTreeLayout:
        """Apply ``change`` to the OTree settings of pool ``name`` (id ``pool_id``) in one
        catalog transaction, replayed against the newest version when a racing commit wins;
        returns the settings now in the catalog (``change`` returning None changes nothing).
        Raises PoolNotFoundError (dropped, or another pool of that name now), UsageError (not
        an OTree pool), CatalogConflictError after many lost races."""
        unknowns: list[CommitStateUnknownError] = []
        for _ in range(_REVISE_ATTEMPTS):
            with self.catalog.begin() as txn:
                current = txn.state.pool(name.namespace, name.name)
                if current is None or current.id != pool_id:
                    raise PoolNotFoundError(str(name))
                config = pool_config_of(
                    ObjectRef(objects_pb2.TABLE, name.namespace, name.name), current
                )
                if config.otree is None:
                    raise UsageError(f"pool {name} has no OTree layout")
                revised = change(config.otree)
                if revised is None:
                    return config.otree
                txn.alter_pool(
                    name.namespace, name.name, table_def_of(replace(config, otree=revised))
                )
                try:
                    txn.commit()
                except CatalogConflictError:
                    continue  # lost to a racing commit: decide again on the newest version
                except CommitStateUnknownError as e:
                    # The answer was lost: the next round re-reads the newest version, where
                    # the revision is found (change gives None) or still missing (made again).
                    unknowns.append(e)
                    if len(unknowns) >= _UNKNOWN_ATTEMPTS:
                        raise
                    continue
                return revised
        raise CatalogConflictError(
            f"pool {name}: its OTree settings changed {_REVISE_ATTEMPTS} times meanwhile"
        )

    def drop(self, name: PoolName) -> PoolConfig:
        with self.catalog.begin() as txn:
            definition = txn.drop_pool(name.namespace, name.name)
            txn.commit()
        return pool_config_of(ObjectRef(objects_pb2.TABLE, name.namespace, name.name), definition)
