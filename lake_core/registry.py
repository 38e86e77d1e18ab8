"""The pool registry: which pools exist, under which names, with which settings.

:class:`PoolRegistry` is the interface and :class:`PoolConfig` a pool's settings; the
implementation is :class:`~lake_core.catalog.pools.CatalogPoolRegistry`, which keeps them in
the Olympia catalog at ``<lake>/catalog/``.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from lake_core.clock import parse_iso, to_iso
from lake_core.derived.spec import DerivedLink
from lake_core.names import PoolName
from lake_core.otree.settings import OTreeLayout
from lake_core.poolkey import PoolKey
from lake_core.txn import DEFAULT_TXN_RETENTION
from lake_core.writer import DEFAULT_SEEK_STRIDE, DEFAULT_TARGET_SIZE


@dataclass(frozen=True)
class PoolConfig:
    """A pool's settings. ``id`` is a KSUID and names the pool's directory."""

    id: str
    name: PoolName
    key: PoolKey = field(default_factory=PoolKey)
    target_size: int = DEFAULT_TARGET_SIZE
    seek_stride: int = DEFAULT_SEEK_STRIDE
    partition_by: str | None = None
    created: datetime | None = None
    #: ``merge`` (new columns union in) or ``strict`` (see :mod:`lake_core.schema_mode`).
    schema_mode: str = "merge"
    #: How long recorded application transactions are remembered (None: forever; see
    #: :mod:`lake_core.txn`, "Expiry").
    txn_retention: timedelta | None = DEFAULT_TXN_RETENTION
    #: Rows are unique by the pool key: every load upserts (:mod:`lake_core.upsert`).
    unique: bool = False
    #: The OTree layout's settings and revisions (:mod:`lake_core.otree`); None: sorted by key.
    otree: OTreeLayout | None = None
    #: A derived pool's source and definition (:mod:`lake_core.derived`); None: not derived.
    derived: DerivedLink | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "namespace": self.name.namespace,
            "name": self.name.name,
            "key": list(self.key.fields),
            "order": self.key.order,
            "target_size": self.target_size,
            "seek_stride": self.seek_stride,
            "partition_by": self.partition_by,
            "created": to_iso(self.created) if self.created else None,
            "schema_mode": self.schema_mode,
            "txn_retention_seconds": retention_seconds(self.txn_retention),
            "unique": self.unique,
            "layout": "sorted" if self.otree is None else "otree",
            **({} if self.otree is None else {"otree": self.otree.to_options()}),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> PoolConfig:
        return cls(
            id=d["id"],
            name=PoolName(d["namespace"], d["name"]),
            key=PoolKey(tuple(d["key"]), d["order"]),
            target_size=int(d["target_size"]),
            seek_stride=int(d.get("seek_stride", DEFAULT_SEEK_STRIDE)),
            partition_by=d.get("partition_by"),
            created=parse_iso(d["created"]) if d.get("created") else None,
            schema_mode=str(d.get("schema_mode", "merge")),
            txn_retention=(
                parse_retention_seconds(d["txn_retention_seconds"])
                if "txn_retention_seconds" in d
                else DEFAULT_TXN_RETENTION
            ),
            unique=bool(d.get("unique", False)),
            otree=OTreeLayout.from_options(d["otree"]) if d.get("otree") else None,
        )


def retention_seconds(retention: timedelta | None) -> int | None:
    """A transaction retention as whole seconds (None: forever)."""
    return None if retention is None else int(retention.total_seconds())


def parse_retention_seconds(value: object) -> timedelta | None:
    """The inverse of :func:`retention_seconds` (``None``/``"never"``: forever)."""
    if value is None or value == "never":
        return None
    return timedelta(seconds=int(str(value)))


class PoolRegistry(abc.ABC):
    """Names → pool settings. Implementations make create/drop atomic and race-safe."""

    @abc.abstractmethod
    def get(self, name: PoolName) -> PoolConfig:
        """Raises PoolNotFoundError."""

    @abc.abstractmethod
    def list(self) -> list[PoolConfig]:
        """Every pool, sorted by name."""

    @abc.abstractmethod
    def create(self, config: PoolConfig) -> None:
        """Raises AlreadyExistsError if the name is taken (even by a racing creator)."""

    @abc.abstractmethod
    def drop(self, name: PoolName) -> PoolConfig:
        """Remove the name; the pool's files stay. Raises PoolNotFoundError."""
