"""The pool registry: which pools exist, under which names, with which settings.

:class:`PoolRegistry` is the interface; :class:`JournalPoolRegistry` is the interim
implementation, a :mod:`journal <lake_core.journal>` at ``<lake>/registry/`` whose table maps
``NS.NAME`` to a pool's settings. The Olympia catalog (``<lake>/catalog/``) replaces it behind
the same interface.
"""

from __future__ import annotations

import abc
import random
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from lake_core.clock import parse_iso, to_iso
from lake_core.config import LakeConfig
from lake_core.errors import (
    AlreadyExistsError,
    ObjectExistsError,
    PoolNotFoundError,
    RetriesExhaustedError,
)
from lake_core.journal import Journal
from lake_core.keys import PoolKey
from lake_core.names import PoolName
from lake_core.stores.base import ObjectStore
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
        )


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


class JournalPoolRegistry(PoolRegistry):
    """The interim registry: a journal at ``registry/``."""

    def __init__(self, store: ObjectStore, config: LakeConfig) -> None:
        self.journal = Journal(store, "registry", config.clock)
        self.retry = config.retry
        self.clock = config.clock
        self._rng = random.Random()

    def get(self, name: PoolName) -> PoolConfig:
        state = self.journal.read_head().state
        if name.qualified not in state:
            raise PoolNotFoundError(str(name))
        return PoolConfig.from_json(state[name.qualified])

    def list(self) -> list[PoolConfig]:
        state = self.journal.read_head().state
        return [PoolConfig.from_json(state[k]) for k in sorted(state)]

    def _update(self, name: PoolName, build: Any) -> Any:
        for attempt in range(self.retry.max_attempts):
            head = self.journal.read_head()
            actions, result = build(head.state)
            try:
                self.journal.append(head, actions)
                return result
            except ObjectExistsError:
                delay = min(self.retry.max_delay, self.retry.base_delay * 2**attempt)
                self.clock.sleep(self._rng.uniform(0, delay))
        raise RetriesExhaustedError(f"updating pool {name}", self.retry.max_attempts)

    def create(self, config: PoolConfig) -> None:
        def build(state: Any) -> Any:
            if config.name.qualified in state:
                raise AlreadyExistsError("pool", str(config.name))
            return [{"op": "set", "name": config.name.qualified, "value": config.to_json()}], None

        self._update(config.name, build)

    def drop(self, name: PoolName) -> PoolConfig:
        def build(state: Any) -> Any:
            if name.qualified not in state:
                raise PoolNotFoundError(str(name))
            return [{"op": "delete", "name": name.qualified}], PoolConfig.from_json(
                state[name.qualified]
            )

        result: PoolConfig = self._update(name, build)
        return result
