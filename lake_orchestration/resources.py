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
from lake_core.locks import LockHandle
from lake_core.pool import Pool
from lake_core.stores.base import ObjectStore
from lake_orchestration.config import PoolSpec
from lake_orchestration.landing import LandingZone


class S3Settings(dg.Config):
    """Where S3 is and who we are to it. Every field is optional: what is left out comes from
    boto3's standard resolution (``AWS_*`` variables, profiles, instance roles). Give secrets as
    ``dg.EnvVar("AWS_SECRET_ACCESS_KEY")``, never as literals."""

    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None

    def client(self) -> Any:
        import boto3
        from botocore.config import Config

        return boto3.client(
            "s3",
            endpoint_url=self.endpoint_url or None,
            region_name=self.region or None,
            aws_access_key_id=self.access_key_id or None,
            aws_secret_access_key=self.secret_access_key or None,
            aws_session_token=self.session_token or None,
            config=Config(retries={"max_attempts": 8, "mode": "standard"}, max_pool_connections=32),
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

    def _store(self, uri: str) -> ObjectStore | None:
        """A store built with our S3 settings, or None to let lake_core open it."""
        if not uri.startswith("s3://") or self.s3 is None:
            return None
        from lake_core.stores.s3 import S3ObjectStore

        bucket, _, prefix = uri[len("s3://") :].partition("/")
        return S3ObjectStore(bucket, prefix, client=self.s3.client())

    def config(self) -> LakeConfig:
        return LakeConfig(
            uri=self.uri,
            zookeeper=self.zookeeper.hosts if self.zookeeper else None,
            user=self.user,
        )

    def open(self) -> Lake:
        """The lake (opened once per resource instance). Raises NotFoundError if there is none."""
        if self._lake is None:
            self._lake = Lake.open(self.config(), self._store(self.uri))
        return self._lake

    def pool(self, spec: PoolSpec, create: bool = False) -> Pool | None:
        """The lake pool of ``spec``; created from the spec when missing and ``create``."""
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
        store = self._store(spec.landing)
        if store is None:
            from lake_core.stores.factory import open_store

            store = open_store(spec.landing)
        return LandingZone(spec.landing, store, spec.formats)

    # -- engines ------------------------------------------------------------------------------

    def spark_session(self) -> Any:
        """The process's Spark session for the ``spark`` engine, built by lake_spark from the
        dagster-pyspark resource's ``spark_config`` (master and non-secret settings). lake_spark
        adds the executors' ``AWS_*`` environment at runtime, so secrets never enter Dagster's
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
        return spark_session(SparkSettings.resolve(master, app_name="lakepool-dagster", conf=conf))
