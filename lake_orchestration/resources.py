"""Dagster resources: the lake (with its S3 settings and ZooKeeper), resolved once from
configuration and handed to assets, sensors and ops.

Secrets (S3 keys) are configured as ``dg.EnvVar`` so the Dagster UI shows the variable's name,
never its value; nothing here puts them in metadata or logs.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal

import dagster as dg
from dagster_pyspark import LazyPySparkResource
from pydantic import PrivateAttr

from lake_core import Lake, LakeConfig
from lake_core.errors import AlreadyExistsError, PoolNotFoundError
from lake_core.landing import LandingZone
from lake_core.locks import LockHandle
from lake_core.pool import Pool
from lake_core.stores import S3Config, open_store
from lake_orchestration.config import PoolSpec

_SECRETS = frozenset({"secret_access_key", "session_token"})


class S3Settings(dg.Config):
    """Where S3 is and who we are to it, as Dagster config: turned into lake_core's
    :class:`~lake_core.stores.S3Config`, the one object the lake's store, the landing zones and
    Spark's tasks all use (nothing here builds an S3 client). Every field is optional: what is
    left out comes from boto3's standard resolution (``AWS_*`` variables, profiles, instance
    roles). Give secrets as ``dg.EnvVar("AWS_SECRET_ACCESS_KEY")``, never as literals; their
    values never show in ``repr``/``str``."""

    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None
    addressing_style: Literal["auto", "path", "virtual"] = "auto"

    def __repr_args__(self) -> Iterator[tuple[str | None, Any]]:
        for name, value in super().__repr_args__():
            hidden = name in _SECRETS and value is not None
            yield name, "***" if hidden else value

    def to_config(self) -> S3Config:
        return S3Config(
            endpoint_url=self.endpoint_url or None,
            region=self.region or None,
            access_key_id=self.access_key_id or None,
            secret_access_key=self.secret_access_key or None,
            session_token=self.session_token or None,
            addressing_style=self.addressing_style,
        )


class ZooKeeperResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The ZooKeeper ensemble holding the lake's per-pool maintenance locks.

    Example::

        LakeResource(uri=dg.EnvVar("LAKE_ROOT"),
                     zookeeper=ZooKeeperResource(hosts=dg.EnvVar("LAKE_ZOOKEEPER")))

    Without it, locks are local file locks, which exclude processes of one machine only.
    """

    hosts: str


class LakeResource(dg.ConfigurableResource):  # type: ignore[type-arg]
    """The lake a code location works on, and how heavy work runs on it.

    Example::

        defs = dg.Definitions(resources={"lake": LakeResource(
            uri=dg.EnvVar("LAKE_ROOT"),
            zookeeper=ZooKeeperResource(hosts=dg.EnvVar("LAKE_ZOOKEEPER")),
            s3=S3Settings(secret_access_key=dg.EnvVar("AWS_SECRET_ACCESS_KEY"), ...),
            engine="spark",
            spark=LazyPySparkResource(spark_config={"spark.master": "local[2]"}),
        )})

    ``engine`` picks where ingest and compaction run: ``local`` (lake_core in the run's
    process) or ``spark`` (lake_spark on ``spark``'s session). Commits made here carry
    ``user`` as their author, which is how observations tell them from outside commits.
    """

    uri: str
    user: str = "dagster"
    engine: Literal["local", "spark"] = "local"
    zookeeper: ZooKeeperResource | None = None
    s3: S3Settings | None = None
    spark: LazyPySparkResource | None = None

    _lake: Lake | None = PrivateAttr(default=None)

    # -- the lake -----------------------------------------------------------------------------

    def s3_config(self) -> S3Config | None:
        """The S3 config the lake, the landing zones and Spark share (None: boto3's standard
        resolution)."""
        return self.s3.to_config() if self.s3 is not None else None

    def config(self) -> LakeConfig:
        return LakeConfig(
            uri=self.uri,
            zookeeper=self.zookeeper.hosts if self.zookeeper else None,
            user=self.user,
            s3=self.s3_config(),
        )

    def open(self) -> Lake:
        """The lake (opened once per resource instance). Raises NotFoundError if there is none."""
        if self._lake is None:
            self._lake = Lake.open(self.config())
        return self._lake

    def pool(self, spec: PoolSpec, create: bool = False) -> Pool | None:
        """The lake pool of ``spec``; created from the spec when missing and ``create`` (an
        upsert pool is created unique: every load into it upserts, whoever makes it)."""
        lake = self.open()
        try:
            return lake.pool(spec.name)
        except PoolNotFoundError:
            if not create:
                return None
        try:
            return lake.create_pool(
                spec.name,
                spec.pool_key,
                target_size=spec.target_size,
                partition_by=spec.partition_by,
                txn_retention=spec.txn_retention,
                unique=spec.mode == "upsert",
                otree=spec.otree,
            )
        except AlreadyExistsError:  # a concurrent run created it first
            return lake.pool(spec.name)

    @contextmanager
    def maintenance_lock(self, pool: Pool, timeout: float | None) -> Iterator[LockHandle]:
        """Hold ``pool``'s maintenance lock (ZooKeeper when configured, else a file lock)."""
        with self.open().locks() as locks, locks.maintenance_lock(pool.id, timeout=timeout) as h:
            yield h

    # -- landing zones ------------------------------------------------------------------------

    def landing(self, spec: PoolSpec) -> LandingZone | None:
        """The pool's landing zone, or None when the spec has none."""
        if not spec.landing:
            return None
        return LandingZone(
            spec.landing, open_store(spec.landing, s3=self.s3_config()), spec.formats
        )

    # -- engines ------------------------------------------------------------------------------

    def spark_session(self) -> Any:
        """The process's Spark session for the ``spark`` engine, built by lake_spark from the
        dagster-pyspark resource's ``spark_config`` (master and non-secret settings). lake_spark
        passes the lake's S3 config to the executors at runtime, so secrets never enter Dagster's
        config."""
        if self.spark is None:
            raise dg.DagsterInvariantViolationError(
                "LakeResource(engine='spark') needs spark=LazyPySparkResource(spark_config=...)"
            )
        try:
            from lake_spark import SparkSettings, spark_session
        except ImportError as e:
            raise dg.DagsterInvariantViolationError(
                f"the spark engine needs lake_spark and pyspark: {e}"
            ) from e
        conf = {str(k): str(v) for k, v in (self.spark.spark_config or {}).items()}
        master = conf.pop("spark.master", None)
        settings = SparkSettings.resolve(
            master, app_name="lakepool-dagster", conf=conf, s3=self.s3_config()
        )
        return spark_session(settings)
