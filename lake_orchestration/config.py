"""The pools config: one YAML entry per pool, validated into frozen pydantic models.

A pools file looks like this (see ``lake_orchestration/pools.yaml`` and docs/orchestration.md)::

    observer_interval_seconds: 30     # how often commits made outside Dagster are looked for
    pools:
      - name: flights                 # a lake pool name (NAME or NS.NAME)
        key: [time_hour]              # pool key fields
        order: asc                    # asc | desc
        partition_by: day(time_hour)  # optional; day(...) makes a daily-partitioned asset
        partitions: {start: 2013-01-01, end: 2014-01-01}   # daily partitions (end exclusive)
        target_size: 4MB
        landing: ${LAKE_LANDING:-landing}/flights          # a folder or s3://bucket/prefix
        formats: [csv]                # input formats the sensor takes (by file extension)
        mode: load                    # load (append) | upsert (a row replaces the live row
                                      # of its key; docs/orchestration.md, "Upsert pools")
        delete_when: "op = 'd'"       # mode upsert only: input rows that delete their key
        sensor: {interval_seconds: 30, running: false, max_files_per_run: 100}
        maintenance:
          lock_timeout: 600s
          compaction: {cron: "0 * * * *", max_overlapping_objects: 8, max_small_objects: 16,
                       running: false, sensor_running: false}
          retention: {cron: "0 3 * * *", data_older_than: 365d, keep: 30d, grace: 1d,
                      running: false}

``${VAR}`` and ``${VAR:-default}`` are expanded from the environment when the file is read (the
edge); a relative landing folder is relative to the pools file. Nothing else reads the
environment.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import date, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

import yaml  # type: ignore[import-untyped]
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from lake_core.expr import ExpressionError, parse_predicate
from lake_core.ingest.formats import FORMATS
from lake_core.names import PoolName
from lake_core.otree.settings import OTreeLayout, parse_layout
from lake_core.partitions import PartitionSpec
from lake_core.poolkey import PoolKey
from lake_core.txn import DEFAULT_TXN_RETENTION
from lake_core.units import parse_duration, parse_size
from lake_core.writer import DEFAULT_TARGET_SIZE

_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")
#: Asset names: Dagster allows letters, digits and underscores only.
_ASSET_NAME = re.compile(r"[^A-Za-z0-9_]")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class SensorPolicy(_Frozen):
    """How the landing sensor of a pool runs."""

    interval_seconds: Annotated[int, Field(ge=1)] = 30
    #: Sensors start stopped in Dagster unless declared running.
    running: bool = False
    max_files_per_run: Annotated[int, Field(ge=1)] = 100


class CompactionPolicy(_Frozen):
    """When to compact: on a cron, and when fragmentation passes a threshold."""

    cron: str | None = "0 * * * *"
    max_overlapping_objects: Annotated[int, Field(ge=0)] = 8
    max_small_objects: Annotated[int, Field(ge=0)] = 16
    #: How often the fragmentation sensor looks (None: no fragmentation sensor).
    sensor_interval_seconds: Annotated[int | None, Field(ge=1)] = 60
    #: Whether the schedule and the fragmentation sensor start running.
    running: bool = False
    sensor_running: bool = False


class RetentionPolicy(_Frozen):
    """Retain data newer than ``data_older_than`` (``lake retain``; None: keep all data), then
    vacate history older than ``keep``, then clean up files tombstoned longer than ``grace``."""

    cron: str | None = "0 3 * * *"
    data_older_than: timedelta | None = None
    keep: timedelta = timedelta(days=30)
    grace: timedelta = timedelta(days=1)
    running: bool = False

    @field_validator("data_older_than", "keep", "grace", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> Any:
        return parse_duration(v) if isinstance(v, str) else v


class MaintenancePolicy(_Frozen):
    lock_timeout: timedelta = timedelta(minutes=10)
    compaction: CompactionPolicy = CompactionPolicy()
    retention: RetentionPolicy = RetentionPolicy()

    @field_validator("lock_timeout", mode="before")
    @classmethod
    def _duration(cls, v: Any) -> Any:
        return parse_duration(v) if isinstance(v, str) else v


class Partitions(_Frozen):
    """The daily partitions of a day-partitioned pool: ``start`` to ``end`` (exclusive; None:
    up to today)."""

    start: date
    end: date | None = None


class PoolSpec(_Frozen):
    """One pool of the pools config."""

    name: str
    key: tuple[str, ...] = ("ts",)
    order: Literal["asc", "desc"] = "desc"
    partition_by: str | None = None
    partitions: Partitions | None = None
    target_size: int = DEFAULT_TARGET_SIZE
    landing: str | None = None
    formats: tuple[str, ...] = ("ndjson", "json", "csv", "parquet", "arrow")
    #: ``load`` appends every landed row; ``upsert`` merges them by the pool key: a row whose
    #: key is live replaces it, the last row of a key in a run's input wins.
    mode: Literal["load", "upsert"] = "load"
    #: A SQL boolean over the input rows (the ``--where`` language): with ``mode: upsert``,
    #: matching rows delete their key instead of being inserted (a change feed).
    delete_when: str | None = None
    branch: str = "main"
    description: str = ""
    sensor: SensorPolicy = SensorPolicy()
    maintenance: MaintenancePolicy = MaintenancePolicy()
    #: How long the pool remembers ingested files' transactions (``never``: forever); set
    #: when the pool is created (lake_core.txn, "Expiry").
    txn_retention: timedelta | None = DEFAULT_TXN_RETENTION
    #: ``sorted`` (by the key) or ``otree`` over ``index`` (docs/otree.md): the pool's
    #: compaction job and sensor then run ``lake optimize`` instead of LSM compaction.
    layout: Literal["sorted", "otree"] = "sorted"
    index: tuple[str, ...] = ()
    cube_size: int | None = None

    @field_validator("index", mode="before")
    @classmethod
    def _index(cls, v: Any) -> Any:
        return tuple(f.strip() for f in v.split(",")) if isinstance(v, str) else v

    @model_validator(mode="after")
    def _otree(self) -> PoolSpec:
        if self.layout == "otree":
            parse_layout(self.index, self.cube_size)  # the CLI's checks
            if self.mode == "upsert" or self.partition_by is not None:
                raise ValueError(
                    f"pool {self.name}: an OTree pool cannot be upserted into or partitioned"
                )
        elif self.index or self.cube_size is not None:
            raise ValueError(f"pool {self.name}: index and cube_size go with layout: otree")
        return self

    @property
    def otree(self) -> OTreeLayout | None:
        """The OTree settings a new pool of this spec is created with (None: sorted)."""
        return parse_layout(self.index, self.cube_size) if self.layout == "otree" else None

    @field_validator("txn_retention", mode="before")
    @classmethod
    def _txn_retention(cls, v: Any) -> Any:
        if v == "never":
            return None
        value = parse_duration(v) if isinstance(v, str) else v
        if isinstance(value, int | float) and not isinstance(value, bool):
            value = timedelta(seconds=value)
        if isinstance(value, timedelta) and value < timedelta(seconds=1):
            raise ValueError("txn_retention must be at least 1s, or never")
        return value

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        PoolName.parse(v)
        return v

    @field_validator("key", mode="before")
    @classmethod
    def _key(cls, v: Any) -> Any:
        return tuple(f.strip() for f in v.split(",")) if isinstance(v, str) else v

    @field_validator("target_size", mode="before")
    @classmethod
    def _size(cls, v: Any) -> Any:
        return parse_size(v) if isinstance(v, str) else v

    @field_validator("partition_by")
    @classmethod
    def _partition_by(cls, v: str | None) -> str | None:
        return None if v is None else str(PartitionSpec.parse(v))

    @field_validator("formats")
    @classmethod
    def _formats(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        bad = [f for f in v if f not in FORMATS or f == "auto"]
        if bad:
            raise ValueError(f"unknown format {bad[0]!r}; use {', '.join(FORMATS[1:])}")
        return v

    @field_validator("delete_when")
    @classmethod
    def _delete_when(cls, v: str | None) -> str | None:
        if v is None:
            return None
        try:
            parse_predicate(v)
        except ExpressionError as e:
            raise ValueError(f"delete_when {v!r} is not a valid predicate: {e}") from e
        return v

    @model_validator(mode="after")
    def _daily(self) -> PoolSpec:
        if self.daily and self.partitions is None:
            raise ValueError(
                f"pool {self.name}: partition_by {self.partition_by} needs "
                "partitions: {start: YYYY-MM-DD}"
            )
        return self

    @model_validator(mode="after")
    def _upsert(self) -> PoolSpec:
        if self.delete_when is not None and self.mode != "upsert":
            raise ValueError(
                f"pool {self.name}: delete_when applies only with mode: upsert "
                f"(this pool's mode is {self.mode})"
            )
        if self.mode == "upsert" and self.daily:
            # A daily run replaces its whole partition with the day's files: there is no
            # live row for an upsert to merge with that the rewrite would not drop anyway.
            raise ValueError(
                f"pool {self.name}: mode: upsert does not apply to a day-partitioned pool "
                f"(partition_by {self.partition_by}: each run rewrites its day's partition)"
            )
        return self

    @property
    def pool_key(self) -> PoolKey:
        return PoolKey(self.key, self.order)

    @property
    def daily(self) -> bool:
        """True when the pool is partitioned by day: a daily-partitioned asset."""
        spec = PartitionSpec.parse(self.partition_by) if self.partition_by else None
        return spec is not None and spec.transform == "day"

    @property
    def asset_name(self) -> str:
        """The pool's asset name (and the prefix of its jobs, sensors and schedules):
        ``flights`` for pool ``flights``, ``sales__orders`` for pool ``sales.orders``."""
        return _ASSET_NAME.sub("_", self.name.replace(".", "__"))

    @property
    def concurrency_pool(self) -> str:
        """The Dagster concurrency pool every maintenance step of this lake pool runs in."""
        return f"lake/{PoolName.parse(self.name).qualified}"


class DerivedPoolSpec(_Frozen):
    """One derived pool (docs/derived.md): an asset downstream of its source pool's asset,
    refreshed by a sensor when the source's main branch moves."""

    name: str
    #: The source pool: one of ``pools``.
    source: str = Field(alias="from")
    #: The aggregate query it keeps (``lake derive create … --as``).
    sql: str
    description: str = ""
    sensor: SensorPolicy = SensorPolicy()
    lock_timeout: timedelta = timedelta(minutes=10)

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        PoolName.parse(v)
        return v

    @field_validator("sql")
    @classmethod
    def _sql(cls, v: str) -> str:
        from lake_core.derived.spec import parse_definition

        parse_definition(v)  # the CLI's checks, when the config is read
        return v

    @field_validator("lock_timeout", mode="before")
    @classmethod
    def _lock_timeout(cls, v: Any) -> Any:
        return parse_duration(v) if isinstance(v, str) else v

    @property
    def asset_name(self) -> str:
        return _ASSET_NAME.sub("_", self.name.replace(".", "__"))


class PoolsConfig(_Frozen):
    pools: tuple[PoolSpec, ...] = ()
    #: Derived pools of the pools above (docs/derived.md, "In Dagster").
    derived: tuple[DerivedPoolSpec, ...] = ()
    #: How often the observer looks for commits made outside Dagster.
    observer_interval_seconds: Annotated[int, Field(ge=1)] = 30

    @model_validator(mode="after")
    def _unique(self) -> PoolsConfig:
        seen: set[str] = set()
        for p in self.pools:
            if p.asset_name in seen:
                raise ValueError(f"pool {p.name} appears twice (asset name {p.asset_name})")
            seen.add(p.asset_name)
        names = {p.name for p in self.pools}
        for d in self.derived:
            if d.asset_name in seen:
                raise ValueError(f"pool {d.name} appears twice (asset name {d.asset_name})")
            seen.add(d.asset_name)
            if d.source not in names:
                raise ValueError(f"derived pool {d.name}: its source {d.source} is not in pools")
        return self

    def pool(self, name: str) -> PoolSpec:
        for p in self.pools:
            if p.name == name or p.asset_name == name:
                return p
        raise KeyError(name)


def expand_vars(text: str, env: Mapping[str, str]) -> str:
    """``${VAR}`` and ``${VAR:-default}`` from ``env`` (an unset ``${VAR}`` becomes empty)."""
    return _VAR.sub(lambda m: env.get(m.group(1)) or (m.group(2) or ""), text)


def _resolve_landing(value: str, base: Path) -> str:
    if "://" in value:
        return value.rstrip("/")
    path = Path(value).expanduser()
    return str(path if path.is_absolute() else (base / path).resolve())


def parse_pools_config(
    text: str, base: Path | None = None, env: Mapping[str, str] | None = None
) -> PoolsConfig:
    """Validate a pools YAML document; ``base`` anchors relative landing folders."""
    env = os.environ if env is None else env
    doc = yaml.safe_load(expand_vars(text, env)) or {}
    if not isinstance(doc, dict):
        raise ValueError("a pools config is a mapping with a `pools:` list")
    base = base or Path.cwd()
    for entry in doc.get("pools") or []:
        if isinstance(entry, dict) and entry.get("landing"):
            entry["landing"] = _resolve_landing(str(entry["landing"]), base)
    return PoolsConfig.model_validate(doc)


def load_pools_config(path: str | Path, env: Mapping[str, str] | None = None) -> PoolsConfig:
    path = Path(path)
    return parse_pools_config(path.read_text(), path.parent.resolve(), env)


#: The pools config shipped with the code location (the demo's pools).
DEFAULT_POOLS_FILE = Path(__file__).with_name("pools.yaml")
