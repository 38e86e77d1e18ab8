"""End to end: the real `dagster dev` (webserver + daemon + code server) over the shipped code
location, a temp DAGSTER_HOME and a temp lake.

One server for the module; the tests run in order against it: the landing sensor is turned on
through GraphQL and ingests files dropped into the landing folder; a partition range is
backfilled from the CLI (`dagster asset materialize --partition-range`) and the ingest job
through the daemon (`dagster job backfill`); headless Chromium renders the asset graph.
The whole process group is killed at the end, whatever happened.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from lake_core import Lake
from lake_core.maintenance import list_partitions

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
LOCATION = "lakepool"
POOLS = """
observer_interval_seconds: 2
pools:
  - name: events
    key: [ts]
    order: asc
    landing: landing/events
    formats: [ndjson]
    sensor: {interval_seconds: 2}
  - name: ops.daily
    key: [ts]
    order: asc
    partition_by: day(ts)
    partitions: {start: 2024-01-01, end: 2024-02-01}
    landing: landing/daily
    formats: [ndjson]
"""
INSTANCE = """
telemetry: {enabled: false}
nux: {enabled: false}
concurrency:
  pools: {default_limit: 1}
  runs: {max_concurrent_runs: 4}
run_monitoring: {enabled: true, free_slots_after_run_end_seconds: 30}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for(what: str, probe: Callable[[], Any], timeout: float, every: float = 1.0) -> Any:
    deadline = time.monotonic() + timeout
    last: Any = None
    while time.monotonic() < deadline:
        try:
            last = probe()
            if last:
                return last
        except (requests.RequestException, OSError, ValueError) as e:
            last = e
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")


class DagsterDev:
    """A running `dagster dev` and what the tests need to talk to it."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.home = base / "dagster_home"
        self.lake_uri = str(base / "lake")
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = base / "dagster-dev.log"
        self.env = {
            **os.environ,
            "DAGSTER_HOME": str(self.home),
            "LAKE_ROOT": self.lake_uri,
            "LAKE_POOLS_CONFIG": str(base / "pools.yaml"),
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        }
        self.env.pop("LAKE_ZOOKEEPER", None)
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.home.mkdir(parents=True)
        (self.home / "dagster.yaml").write_text(INSTANCE)
        (self.base / "pools.yaml").write_text(POOLS)
        for d in ("events", "daily"):
            (self.base / "landing" / d).mkdir(parents=True)
        Lake.init(self.lake_uri)
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [str(BIN / "dagster"), "dev", "-h", "127.0.0.1", "-p", str(self.port)]
                + ["-w", "workspace.yaml"],
                cwd=ROOT,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        wait_for(
            "the webserver", lambda: requests.get(self.url + "/server_info", timeout=5).ok, 120
        )
        wait_for("the code location", self._loaded, 120)

    def _loaded(self) -> bool:
        data = self.gql(
            "{ workspaceOrError { ... on Workspace { locationEntries { name loadStatus } } } }"
        )
        entries = data["workspaceOrError"]["locationEntries"]
        return any(e["name"] == LOCATION and e["loadStatus"] == "LOADED" for e in entries)

    def stop(self) -> None:
        """SIGKILL the whole process group (webserver, daemon, code servers, run workers): the
        tests have checked what they needed, and nothing of the instance outlives the module
        (its DAGSTER_HOME and lake are temp directories). A graceful SIGTERM only made the
        teardown wait ~20 s for `dagster dev` to wind its children down."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=30)
        self.proc = None

    def gql(self, query: str, variables: dict[str, Any] | None = None) -> Any:
        r = requests.post(
            self.url + "/graphql", json={"query": query, "variables": variables or {}}, timeout=30
        )
        r.raise_for_status()
        body = r.json()
        if body.get("errors"):
            raise AssertionError(f"GraphQL errors: {body['errors']}")
        return body["data"]

    def runs(self, job: str) -> list[dict[str, Any]]:
        data = self.gql(
            "query($f: RunsFilter) { runsOrError(filter: $f) { ... on Runs { results "
            "{ runId status jobName tags { key value } } } } }",
            {"f": {"pipelineName": job}},
        )
        return data["runsOrError"]["results"]  # type: ignore[no-any-return]

    def cli(self, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(
            [str(BIN / "dagster"), *args],
            cwd=ROOT,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        assert out.returncode == 0, f"dagster {' '.join(args)} failed:\n{out.stdout}\n{out.stderr}"
        return out

    def lake(self) -> Lake:
        return Lake.open(self.lake_uri)


@pytest.fixture(scope="module")
def dev(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DagsterDev]:
    server = DagsterDev(tmp_path_factory.mktemp("dagster-e2e"))
    try:
        server.start()
        yield server
    except BaseException:
        if server.log.exists():
            sys.stderr.write(server.log.read_text()[-6000:])
        raise
    finally:
        server.stop()


def ndjson(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def finished(runs: list[dict[str, Any]], n: int) -> list[dict[str, Any]] | None:
    done = [r for r in runs if r["status"] in ("SUCCESS", "FAILURE", "CANCELED")]
    return done if len(done) >= n and len(done) == len(runs) else None


def test_sensor_ingests_dropped_files(dev: DagsterDev) -> None:
    started = dev.gql(
        "mutation($s: SensorSelector!) { startSensor(sensorSelector: $s) { __typename "
        "... on Sensor { sensorState { status } } ... on PythonError { message } } }",
        {
            "s": {
                "repositoryLocationName": LOCATION,
                "repositoryName": "__repository__",
                "sensorName": "events_landing",
            }
        },
    )
    assert started["startSensor"]["sensorState"]["status"] == "RUNNING", started
    landing = dev.base / "landing" / "events"
    for i in range(3):
        (landing / f"batch-{i}.ndjson").write_text(
            ndjson([{"ts": i * 10 + j, "v": f"b{i}"} for j in range(10)])
        )
    runs = wait_for("ingest runs", lambda: finished(dev.runs("ingest_events"), 1), 180, 2)
    assert all(r["status"] == "SUCCESS" for r in runs), runs
    pool = dev.lake().pool("events")
    wait_for("30 rows in the lake", lambda: pool.read().num_rows == 30, 30)
    assert sorted(pool.read().column("ts").to_pylist()) == list(range(30))
    commit = pool.read_commit(pool.tip() or "")
    assert commit.author == "dagster" and len(commit.meta["landing"]["files"]) == 3

    # A late file: a new run for it alone; nothing is ingested twice.
    (landing / "late.ndjson").write_text(ndjson([{"ts": 100, "v": "late"}]))
    wait_for("the late file", lambda: pool.read().num_rows == 31, 120, 2)
    runs = wait_for("ingest runs", lambda: finished(dev.runs("ingest_events"), 2), 60, 2)
    assert all(r["status"] == "SUCCESS" for r in runs) and len(runs) == 2, runs
    assert sorted(pool.read().column("ts").to_pylist()) == [*range(30), 100]


def drop_days(dev: DagsterDev, days: list[str]) -> None:
    for day in days:
        rows = [{"ts": f"{day}T{h:02d}:00:00Z", "v": h} for h in range(3)]
        path = dev.base / "landing" / "daily" / day / "part-0.ndjson"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(ndjson(rows))


def test_cli_partition_range_backfill(dev: DagsterDev) -> None:
    drop_days(dev, ["2024-01-01", "2024-01-02", "2024-01-03"])
    dev.cli(
        "asset",
        "materialize",
        "-m",
        "lake_orchestration.definitions",
        "--select",
        "ops__daily",
        "--partition-range",
        "2024-01-01...2024-01-03",
    )
    pool = dev.lake().pool("ops.daily")
    parts = {p.value: p.rows for p in list_partitions(pool)}
    assert parts == {"2024-01-01": 3, "2024-01-02": 3, "2024-01-03": 3}
    kinds = [c.extra.get("kind") for c in pool.log()]
    assert kinds == ["partition-rewrite"] * 3
    # One run covered the whole range (single-run backfill policy).
    runs = dev.runs("__ASSET_JOB")
    assert len(runs) == 1 and runs[0]["status"] == "SUCCESS"
    tags = {t["key"]: t["value"] for t in runs[0]["tags"]}
    assert tags["dagster/asset_partition_range_start"] == "2024-01-01"
    assert tags["dagster/asset_partition_range_end"] == "2024-01-03"


def test_job_backfill_through_the_daemon(dev: DagsterDev) -> None:
    drop_days(dev, ["2024-01-04", "2024-01-05"])
    dev.cli(
        "job",
        "backfill",
        "-w",
        "workspace.yaml",
        "-l",
        LOCATION,
        "-j",
        "ingest_ops__daily",
        "--from",
        "2024-01-04",
        "--to",
        "2024-01-05",
        "--noprompt",
    )
    runs = wait_for("backfill runs", lambda: finished(dev.runs("ingest_ops__daily"), 2), 180, 2)
    assert [r["status"] for r in runs] == ["SUCCESS", "SUCCESS"], runs
    partitions = sorted(
        t["value"] for r in runs for t in r["tags"] if t["key"] == "dagster/partition"
    )
    assert partitions == ["2024-01-04", "2024-01-05"]
    pool = dev.lake().pool("ops.daily")
    assert [p.value for p in list_partitions(pool)] == [f"2024-01-0{d}" for d in range(1, 6)]
    assert pool.read().num_rows == 15
    # Maintenance ran in the lake pool's concurrency pool, limited to one slot by the instance.
    pools = dev.cli("instance", "concurrency", "get", "--all").stdout
    assert "lake/ops.daily" in pools and "0 / 1" in pools, pools


def test_cli_commit_is_observed(dev: DagsterDev) -> None:
    extra = dev.base / "by-hand.ndjson"
    extra.write_text(ndjson([{"ts": 500, "v": "by hand"}]))
    out = subprocess.run(
        [sys.executable, "-m", "lake_cli", "load", "-p", "events", str(extra), "--user", "analyst"]
        + ["-m", "loaded by hand"],
        env=dev.env,
        capture_output=True,
        text=True,
        check=True,
    )
    commit_id = out.stdout.split()[-2]
    query = (
        '{ assetOrError(assetKey: {path: ["events"]}) { ... on Asset { assetObservations(limit: 10)'
        " { description metadataEntries { label ... on TextMetadataEntry { text } } } } } }"
    )

    def observed() -> bool:
        obs = dev.gql(query)["assetOrError"]["assetObservations"]
        return any({"label": "lake/commit", "text": commit_id} in o["metadataEntries"] for o in obs)

    wait_for("an observation of the CLI commit", observed, 120, 2)
    obs = dev.gql(query)["assetOrError"]["assetObservations"]
    assert sum(o["description"] == "commit by analyst: loaded by hand" for o in obs) == 1


def png_summary(path: Path) -> tuple[int, int, int]:
    """(width, height, distinct byte values in the decompressed image data) of a PNG."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width, height = 8, b"", 0, 0
    while pos < len(data):
        length = int.from_bytes(data[pos : pos + 4], "big")
        kind = data[pos + 4 : pos + 8]
        body = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height = int.from_bytes(body[:4], "big"), int.from_bytes(body[4:8], "big")
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    return width, height, len(set(zlib.decompress(idat)))


def chromium(dev: DagsterDev, *args: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    if exe is None:
        subprocess.run(["bash", "scripts/setup.sh"], cwd=ROOT, check=True, timeout=900)
        exe = shutil.which("chromium")
    assert exe, "chromium is not installed (bash scripts/setup.sh installs it)"
    profile = dev.base / f"chromium-{time.monotonic_ns()}"
    return subprocess.run(
        [
            exe,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={profile}",
            "--window-size=1400,900",
            "--virtual-time-budget=20000",
            *args,
            f"{dev.url}/asset-groups",
        ],
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_asset_graph_renders_the_pools(dev: DagsterDev) -> None:
    assert dev.gql("mutation { setNuxSeen }")["setNuxSeen"] is True
    nodes = dev.gql("{ assetNodes { assetKey { path } isPartitioned } }")["assetNodes"]
    assert {tuple(n["assetKey"]["path"]): n["isPartitioned"] for n in nodes} == {
        ("events",): False,
        ("ops__daily",): True,
    }
    dom = chromium(dev, "--dump-dom").stdout
    assert "events" in dom and "ops__daily" in dom, dom[-2000:]
    assert "Join the Dagster community" not in dom
    shot = dev.base / "asset-graph.png"
    chromium(dev, f"--screenshot={shot}")
    width, height, distinct = png_summary(shot)
    assert (width, height) == (1400, 900)
    assert shot.stat().st_size > 20_000 and distinct > 64, (shot.stat().st_size, distinct)
    keep = os.environ.get("LAKE_SCREENSHOT_DIR")
    if keep:
        shutil.copy(shot, Path(keep) / "asset-graph.png")
