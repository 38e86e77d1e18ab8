"""The Spark session lakepool runs on: where it comes from and how it is configured.

Settings are resolved once at the edge (:meth:`SparkSettings.resolve`: argument, then
``LAKE_SPARK_MASTER``, then ``local[*]``) and the session is built from them
(:func:`spark_session`). What the session guarantees, and why:

- Python workers run the driver's interpreter (``spark.pyspark.python`` and ``PYSPARK_PYTHON``
  are ``sys.executable``), so executors import the same lake_core, pyarrow and boto3. On a
  cluster the same path must hold an identical environment on every node.
- Executors see the driver's S3 settings (``SparkSettings.s3``, an :class:`S3Config`, over the
  driver's ``AWS_*`` environment): tasks rebuild the same config (``S3Config.from_env``) and
  open the lake's S3 store themselves. They travel as
  ``spark.executorEnv.*`` entries for the keys that are set; their values are never logged, and
  ``spark.redaction.regex`` hides them from the Spark UI and event logs. The config's entries
  override the driver's whole, including ``AWS_SESSION_TOKEN=""`` when the config has keys
  and no token: an executor never pairs the config's keys with another identity's token.
- Arrow is on; timestamps are UTC (the lake stores instants); shuffle partitions are kept
  small, since the lake's jobs size their own partitions; Spark's shuffle compression is off,
  since the lake's shuffles carry compressed Arrow (set ``spark.shuffle.compress`` back in
  ``SparkSettings.conf`` if the same session runs other shuffle-heavy work).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from lake_core.stores.s3config import S3Config

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

DEFAULT_MASTER = "local[*]"
MASTER_ENV = "LAKE_SPARK_MASTER"

#: The environment variables executors need to reach S3 exactly as the driver does.
AWS_ENV_KEYS = (
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_S3",
    "AWS_PROFILE",
    "AWS_CONFIG_FILE",
    "AWS_SHARED_CREDENTIALS_FILE",
    "AWS_CA_BUNDLE",
    "LAKE_S3_ADDRESSING_STYLE",
)

# Spark's default hides "secret", "password" and "token"; access key ids too.
_REDACTION = r"(?i)secret|password|token|access[._]?key|credential"

_BASE_CONF: dict[str, str] = {
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.shuffle.partitions": "8",
    "spark.ui.showConsoleProgress": "false",
    "spark.redaction.regex": _REDACTION,
    "spark.python.worker.reuse": "true",
    # The lake's shuffles carry Arrow IPC that is lz4-compressed already (see ingest.py);
    # compressing it again in the JVM costs a third of the JVM's time for nothing.
    "spark.shuffle.compress": "false",
    # The lake's jobs size their partitions themselves (one per file chunk, key range or
    # compaction run); adaptive coalescing would only merge what was split on purpose.
    "spark.sql.adaptive.coalescePartitions.enabled": "false",
}


@dataclass(frozen=True)
class SparkSettings:
    """How to get a session: ``master`` URL, application name, extra Spark conf, and the S3
    config executors use (None: the driver's ``AWS_*`` environment)."""

    master: str = DEFAULT_MASTER
    app_name: str = "lakepool"
    conf: Mapping[str, str] = field(default_factory=dict)
    s3: S3Config | None = None

    @classmethod
    def resolve(
        cls,
        master: str | None = None,
        *,
        app_name: str = "lakepool",
        conf: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        s3: S3Config | None = None,
    ) -> SparkSettings:
        """``master`` if given, else ``$LAKE_SPARK_MASTER``, else ``local[*]``."""
        env = os.environ if env is None else env
        return cls(
            master=master or env.get(MASTER_ENV) or DEFAULT_MASTER,
            app_name=app_name,
            conf=dict(conf or {}),
            s3=s3,
        )


def _parallelism(master: str) -> str | None:
    """Default parallelism for ``local[N]`` / ``local[*]``; None lets a cluster decide."""
    if not master.startswith("local"):
        return None
    inside = master[master.find("[") + 1 : master.find("]")] if "[" in master else "1"
    cores = inside.split(",")[0].strip()
    if cores == "*":
        return str(os.cpu_count() or 1)
    return cores if cores.isdigit() else None


def executor_env(env: Mapping[str, str]) -> dict[str, str]:
    """``spark.executorEnv.*`` entries for the S3 settings present in ``env``."""
    return {f"spark.executorEnv.{k}": env[k] for k in AWS_ENV_KEYS if env.get(k)}


def session_conf(settings: SparkSettings, env: Mapping[str, str] | None = None) -> dict[str, str]:
    """The full Spark conf :func:`spark_session` applies (settings.conf wins)."""
    env = os.environ if env is None else env
    conf = dict(_BASE_CONF)
    parallelism = _parallelism(settings.master)
    if parallelism is not None:
        conf["spark.default.parallelism"] = parallelism
        conf["spark.sql.shuffle.partitions"] = str(max(2, 2 * int(parallelism)))
    if settings.master.startswith("local"):
        conf["spark.ui.enabled"] = "false"
        # Local tasks run in the driver's JVM, which carries the shuffle's records.
        conf["spark.driver.memory"] = "2g"
    conf["spark.pyspark.python"] = sys.executable
    conf["spark.pyspark.driver.python"] = sys.executable
    conf["spark.executorEnv.PYSPARK_PYTHON"] = sys.executable
    log_config = Path(__file__).with_name("log4j2.properties")
    conf["spark.driver.extraJavaOptions"] = f"-Dlog4j2.configurationFile=file:{log_config}"
    conf.update(executor_env(env))
    if settings.s3 is not None:
        # Verbatim, empty values included: "" unsets an inherited variable that would mix
        # another identity's session token (or endpoint) into the config's (S3Config.to_env).
        conf.update({f"spark.executorEnv.{k}": v for k, v in settings.s3.to_env().items()})
        conf.update(executor_env({"LAKE_S3_ADDRESSING_STYLE": settings.s3.addressing_style}))
    conf.update(settings.conf)
    return conf


def spark_session(
    settings: SparkSettings | None = None, env: Mapping[str, str] | None = None
) -> SparkSession:
    """Get or create the process's Spark session from ``settings`` (default: resolved from
    the environment). One SparkContext per process: if one is running, it is returned as is
    and ``settings`` only apply to what Spark lets change at runtime."""
    from pyspark.sql import SparkSession

    settings = settings or SparkSettings.resolve(env=env)
    # Python workers started by the JVM inherit this; spark.pyspark.python covers clusters.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.master(settings.master).appName(settings.app_name)
    for key, value in session_conf(settings, env).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel(settings.conf.get("spark.log.level", "ERROR"))
    return spark
