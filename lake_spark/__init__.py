"""lakepool on Spark: ingest, compaction, cleanup and reads spread over Spark tasks.

Spark distributes; lake_core does all lake I/O inside the tasks (pyarrow for Parquet, boto3
for S3), so no Hadoop S3A jars are needed and local disk and S3 behave the same. The driver
plans and commits once. pyspark is imported only here, never by lake_core::

    from lake_spark import SparkSettings, spark_session, spark_load, spark_compact, spark_upsert
    spark = spark_session(SparkSettings.resolve())        # local[*] or $LAKE_SPARK_MASTER
    commit = spark_load(spark, pool, ["s3://landing/day1.ndjson"])
    result = spark_compact(spark, pool)
    result = spark_upsert(spark, pool, ["s3://landing/cdc.ndjson"], delete_when="op = 'd'")
"""

from lake_spark.cleanup import (
    SPARK_DELETE_THRESHOLD,
    spark_cleanup,
    spark_delete_keys,
    spark_retention,
)
from lake_spark.compact import spark_compact
from lake_spark.ingest import spark_load
from lake_spark.session import SparkSettings, spark_session
from lake_spark.upsert import spark_upsert

__all__ = [
    "SPARK_DELETE_THRESHOLD",
    "SparkSettings",
    "spark_cleanup",
    "spark_compact",
    "spark_delete_keys",
    "spark_load",
    "spark_retention",
    "spark_session",
    "spark_upsert",
]
