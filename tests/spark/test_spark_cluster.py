"""A real standalone Spark cluster: a master and a worker started from pyspark's own jars
(``bin/spark-class org.apache.spark.deploy.master.Master`` / ``...worker.Worker``) on free
ports, and a driver process that loads and compacts through it, on local disk and on moto S3.

The executors run in the worker's JVMs and their Python workers, not in the driver: they must
find lake_core (``spark.pyspark.python``) and reach S3 with settings the worker itself lacks —
its environment has no ``AWS_*`` at all, so they can only arrive through the application's
``spark.executorEnv.*``. One SparkContext per process: the driver is a subprocess of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pyarrow as pa
import pyspark
import pytest

from lake_core import Lake, LakeConfig
from lake_core.loading import load
from lake_core.maintenance import compact

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _wait(what: str, check: Any, procs: list[subprocess.Popen[bytes]], logs: list[Path]) -> None:
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if check():
            return
        for p, log in zip(procs, logs, strict=True):
            if p.poll() is not None:
                raise RuntimeError(f"{what}: process exited\n{log.read_text()[-3000:]}")
        time.sleep(0.5)
    raise RuntimeError(f"{what}: timed out\n" + "\n".join(log.read_text()[-2000:] for log in logs))


def _master_state(web_port: int) -> dict[str, Any]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{web_port}/json/", timeout=2) as r:
            return dict(json.load(r))
    except OSError:
        return {}


def _stop(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL the daemon's whole process group (its session: the JVM, and for the worker the
    executor JVMs and their Python workers). The test has checked what it needed by then, and
    nothing of the cluster's state outlives the test: a graceful SIGTERM bought nothing but a
    wait (the master and the worker each outlasted a 20 s grace)."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.wait(timeout=20)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """A master and one worker (1 core, 1 GB), yielding the master URL and the worker's pid."""
    home = Path(pyspark.__file__).parent
    root = tmp_path_factory.mktemp("spark-cluster")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYSPARK_"))}
    env.update(SPARK_HOME=str(home), SPARK_LOCAL_IP="127.0.0.1", SPARK_WORKER_DIR=str(root))
    port, web, worker_web = _free_port(), _free_port(), _free_port()
    spark_class = str(home / "bin" / "spark-class")
    logs = [root / "master.log", root / "worker.log"]
    procs: list[subprocess.Popen[bytes]] = []
    try:
        with logs[0].open("wb") as out:
            procs.append(
                subprocess.Popen(
                    [spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                     "--port", str(port), "--webui-port", str(web)],
                    stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                )
            )  # fmt: skip
        _wait("master", lambda: _master_state(web).get("status") == "ALIVE", procs, logs[:1])
        with logs[1].open("wb") as out:
            procs.append(
                subprocess.Popen(
                    [spark_class, "org.apache.spark.deploy.worker.Worker",
                     f"spark://127.0.0.1:{port}", "--host", "127.0.0.1", "--cores", "1",
                     "--memory", "1g", "--webui-port", str(worker_web), "--work-dir", str(root)],
                    stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                )
            )  # fmt: skip
        _wait(
            "worker",
            lambda: any(w.get("state") == "ALIVE" for w in _master_state(web).get("workers", [])),
            procs,
            logs,
        )
        yield {"master": f"spark://127.0.0.1:{port}", "worker_pid": procs[1].pid, "logs": logs}
    finally:
        for p in reversed(procs):
            _stop(p)


SQL = "SELECT k % 3 AS r, count(*) AS n, sum(v) AS s FROM spark WHERE k < 100 GROUP BY 1 ORDER BY 1"


def drive(master: str, plan_json: str) -> None:
    """The driver process: load and compact each lake through the cluster, then report."""
    from lake_spark import SparkSettings, spark_compact, spark_load, spark_session
    from lake_spark.sql import spark_sql

    plan = json.loads(plan_json)
    spark = spark_session(
        SparkSettings.resolve(
            master,
            app_name="lakepool-cluster-test",
            conf={
                "spark.driver.host": "127.0.0.1",
                "spark.driver.bindAddress": "127.0.0.1",
                "spark.executor.memory": "768m",
            },
        )
    )
    report: dict[str, Any] = {}
    try:
        for uri, sources in plan.items():
            lake = Lake.open(LakeConfig(uri=uri, user="cluster"))
            pool = lake.pool("spark")
            loaded = spark_load(spark, pool, sources, chunk_bytes=4_000)
            for _ in range(2):  # two more overlapping loads, then compact them all
                spark_load(spark, pool, sources[:1])
            result = spark_compact(spark, pool)
            # lake query --spark's path: the lake's tasks read in the worker's executors.
            query = spark_sql(spark, SQL, lake.pool, lake)
            rows = [list(r.values()) for r in query.to_arrow().to_pylist()]
            report[uri] = {
                "load": loaded.id,
                "compacted": result.objects_in,
                "commit": result.commit.id if result.commit else None,
                "sql": rows,
                "sql_stats": query.stats()["spark"],
            }

        def where_am_i(_: int) -> dict[str, Any]:
            # Nested, so it is shipped by value: executors cannot import this test module.
            ancestors, pid = [], os.getpid()
            while pid > 1:
                with open(f"/proc/{pid}/stat") as f:
                    pid = int(f.read().rsplit(")", 1)[1].split()[1])
                ancestors.append(pid)
            aws = sorted(k for k in os.environ if k.startswith("AWS_"))
            return {"ancestors": ancestors, "aws": aws, "python": sys.executable}

        report["task"] = spark.sparkContext.parallelize([0], 1).map(where_am_i).collect()[0]
    finally:
        spark.stop()
    print("REPORT " + json.dumps(report))


def _sources(folder: Path) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    a = folder / "a.ndjson"
    a.write_text("".join(json.dumps({"k": (i * 37) % 400, "v": i}) + "\n" for i in range(2000)))
    b = folder / "b.parquet"
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"k": [i % 123 for i in range(1500)], "x": ["y"] * 1500}), b,
                   row_group_size=300)  # fmt: skip
    return [a, b]


def test_ingest_and_compaction_on_a_standalone_cluster(
    cluster: dict[str, Any], tmp_path: Path, s3_bucket: str
) -> None:
    files = _sources(tmp_path / "in")
    s3 = boto3.client("s3")
    s3_sources = []
    for f in files:
        s3.upload_file(str(f), s3_bucket, f"landing/{f.name}")
        s3_sources.append(f"s3://{s3_bucket}/landing/{f.name}")
    plan = {str(tmp_path / "lake"): [str(f) for f in files], f"s3://{s3_bucket}/lake": s3_sources}
    expected = {}
    for uri in plan:
        lake = Lake.init(LakeConfig(uri=uri))
        lake.create_pool("spark", "k:asc", target_size=6_000, seek_stride=2048)
        local = lake.create_pool("local", "k:asc", target_size=6_000, seek_stride=2048)
        load(local, files)
        for _ in range(2):
            load(local, files[:1])
        compact(local)
        expected[uri] = local.read()

    out = subprocess.run(
        [sys.executable, "-c",
         "import sys; from tests.spark.test_spark_cluster import drive; drive(sys.argv[1], sys.argv[2])",
         cluster["master"], json.dumps(plan)],
        capture_output=True, text=True, timeout=420, cwd=Path(__file__).resolve().parents[2],
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-5000:]
    line = [x for x in out.stdout.splitlines() if x.startswith("REPORT ")][-1]
    report = json.loads(line[len("REPORT ") :])

    # The tasks ran in the worker's executor, with the S3 settings from the application.
    task = report.pop("task")
    assert cluster["worker_pid"] in task["ancestors"]
    assert "AWS_ENDPOINT_URL" in task["aws"] and "AWS_SECRET_ACCESS_KEY" in task["aws"]
    assert task["python"] == sys.executable
    for uri, done in report.items():
        pool = Lake.open(LakeConfig(uri=uri)).pool("spark")
        assert done["compacted"] > 0 and done["commit"] == pool.tip()
        assert [c.id for c in pool.log()][-1] == done["load"]
        got = pool.read()
        # The local path's rows in key order (rows with equal keys from different loads
        # follow object ids, which are random within a second: compare them as a multiset).
        assert got["k"].equals(expected[uri]["k"]), uri
        assert sorted(map(str, got.to_pylist())) == sorted(map(str, expected[uri].to_pylist()))
        # The same SQL on DuckDB: the same rows; the executors' counters reached the driver.
        duck = Lake.open(LakeConfig(uri=uri)).sql(SQL).fetchall()
        assert [tuple(r) for r in done["sql"]] == duck and len(duck) == 3
        assert 0 < done["sql_stats"]["objects_read"] < done["sql_stats"]["objects_total"]
