"""deploy/dagster.yaml against a real Postgres: a throwaway server (Debian's postgresql) on a
free port, the production instance file as is, and pool runs through the `dagster` CLI —
runs, events and concurrency slots land in Postgres."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from lake_core import Lake
from lake_core.maintenance import list_partitions

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
PG_BIN = Path("/usr/lib/postgresql/15/bin")
POOLS = """
pools:
  - {name: events, key: [ts], order: asc, landing: landing/events, formats: [ndjson]}
  - name: daily
    key: [ts]
    order: asc
    partition_by: day(ts)
    partitions: {start: 2024-01-01, end: 2024-02-01}
    landing: landing/daily
    formats: [ndjson]
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _as_postgres(args: list[str]) -> list[str]:
    return ["runuser", "-u", "postgres", "--", *args] if os.geteuid() == 0 else args


@pytest.fixture(scope="module")
def postgres() -> Iterator[dict[str, str]]:
    """A Postgres server for the module; yields the DAGSTER_PG_* environment."""
    # scripts/setup.sh installs Debian's postgresql when it is missing; no silent skip here.
    assert (PG_BIN / "initdb").exists(), "postgresql is not installed: run scripts/setup.sh"
    base = Path(tempfile.mkdtemp(prefix="lakepool-pg-"))
    base.chmod(0o755)
    data = base / "data"
    data.mkdir()
    if os.geteuid() == 0:
        shutil.chown(data, "postgres", "postgres")
    port = _free_port()
    run = {"check": True, "capture_output": True, "timeout": 120}
    subprocess.run(
        _as_postgres([str(PG_BIN / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres"]),
        **run,  # type: ignore[arg-type]
    )
    opts = f"-p {port} -k {data} -c listen_addresses=127.0.0.1 -c fsync=off"
    ctl = [str(PG_BIN / "pg_ctl"), "-D", str(data)]
    subprocess.run(_as_postgres([*ctl, "-o", opts, "-w", "-l", str(data / "log"), "start"]), **run)  # type: ignore[arg-type]
    try:
        subprocess.run(
            [
                "psql",
                "-h",
                "127.0.0.1",
                "-p",
                str(port),
                "-U",
                "postgres",
                "-c",
                "CREATE DATABASE dagster",
            ],
            **run,  # type: ignore[arg-type]
        )
        yield {
            "DAGSTER_PG_HOST": "127.0.0.1",
            "DAGSTER_PG_PORT": str(port),
            "DAGSTER_PG_USER": "postgres",
            "DAGSTER_PG_PASSWORD": "unused-with-trust-auth",
            "DAGSTER_PG_DB": "dagster",
        }
    finally:
        subprocess.run(_as_postgres([*ctl, "-m", "immediate", "stop"]), capture_output=True)
        shutil.rmtree(base, ignore_errors=True)


def test_production_instance_on_postgres(postgres: dict[str, str], tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    shutil.copy(ROOT / "deploy" / "dagster.yaml", home / "dagster.yaml")
    (tmp_path / "pools.yaml").write_text(POOLS)
    (tmp_path / "landing" / "events").mkdir(parents=True)
    (tmp_path / "landing" / "events" / "a.ndjson").write_text('{"ts": 1}\n{"ts": 2}\n')
    for day in ("2024-01-01", "2024-01-02"):
        p = tmp_path / "landing" / "daily" / day / "x.ndjson"
        p.parent.mkdir(parents=True)
        p.write_text(f'{{"ts": "{day}T01:00:00Z"}}\n')
    lake_uri = str(tmp_path / "lake")
    Lake.init(lake_uri)
    env = {
        **os.environ,
        **postgres,
        "DAGSTER_HOME": str(home),
        "LAKE_ROOT": lake_uri,
        "LAKE_POOLS_CONFIG": str(tmp_path / "pools.yaml"),
    }

    def dagster(*args: str) -> str:
        out = subprocess.run(
            [str(BIN / "dagster"), *args],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, f"{args}:\n{out.stdout[-3000:]}\n{out.stderr[-3000:]}"
        return out.stdout + out.stderr

    dagster("instance", "migrate")
    dagster("asset", "materialize", "-m", "lake_orchestration.definitions", "--select", "events")
    # The daily asset runs in the concurrency pool `lake/default.daily`: its slot is claimed in
    # Postgres and given back.
    dagster(
        "asset",
        "materialize",
        "-m",
        "lake_orchestration.definitions",
        "--select",
        "daily",
        "--partition-range",
        "2024-01-01...2024-01-02",
    )
    lake = Lake.open(lake_uri)
    assert lake.pool("events").read().num_rows == 2
    assert [p.value for p in list_partitions(lake.pool("daily"))] == ["2024-01-01", "2024-01-02"]
    pools = dagster("instance", "concurrency", "get", "--all")
    assert "lake/default.daily" in pools and "0 / 1" in pools, pools

    rows = subprocess.run(
        [
            "psql",
            "-h",
            "127.0.0.1",
            "-p",
            postgres["DAGSTER_PG_PORT"],
            "-U",
            "postgres",
            "-d",
            "dagster",
            "-tAc",
            "SELECT status FROM runs ORDER BY create_timestamp",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert rows == ["SUCCESS", "SUCCESS"]
