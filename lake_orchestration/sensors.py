"""Sensors: landing-zone ingest per pool, fragmentation-driven compaction per pool, and one
observer that turns commits made outside Dagster into observations of the pool assets.

The landing sensor's cursor is lake_core's :class:`~lake_core.landing.WatchState` (files
requested, and what the previous tick saw), and when a file is complete enough to take is
lake_core's rule (:func:`lake_core.landing.look`); this module only turns the complete files
into run requests. Run keys derive from the files (and, for a daily pool, the day), so a tick
replayed after a crash requests nothing new.
"""

import hashlib
import json
from collections.abc import Sequence
from datetime import UTC, date, datetime
from typing import Any

import dagster as dg

from lake_core.commit import Commit
from lake_core.errors import LakeError
from lake_core.landing import LandingFile, WatchState, look
from lake_core.maintenance import fragmentation
from lake_orchestration.assets import asset_key
from lake_orchestration.config import PoolsConfig, PoolSpec
from lake_orchestration.maintenance import compact_job_name
from lake_orchestration.metadata import commit_metadata
from lake_orchestration.resources import LakeResource

#: How many commits the observer reports when it first sees a pool, or after a gap.
OBSERVE_LIMIT = 50
_ACTIVE = [
    dg.DagsterRunStatus.QUEUED,
    dg.DagsterRunStatus.NOT_STARTED,
    dg.DagsterRunStatus.STARTING,
    dg.DagsterRunStatus.STARTED,
]


def request_unless_running(
    context: dg.SensorEvaluationContext,
    job_name: str,
    what: str,
    run_key: str,
    tags: dict[str, str],
    cursor: str,
) -> dg.SensorResult:
    """A maintenance sensor's request: run ``job_name`` (moving the cursor to ``cursor``)
    unless a run of it is queued or going; then skip and keep the cursor, so the sensor looks
    again once that run is done. ``what`` names the job in the skip reason."""
    active = context.instance.get_runs(
        filters=dg.RunsFilter(job_name=job_name, statuses=_ACTIVE), limit=1
    )
    if active:
        return dg.SensorResult(skip_reason=f"{what} {active[0].run_id} in progress")
    return dg.SensorResult(run_requests=[dg.RunRequest(run_key=run_key, tags=tags)], cursor=cursor)


def landing_sensor_name(spec: PoolSpec) -> str:
    return f"{spec.asset_name}_landing"


def fragmentation_sensor_name(spec: PoolSpec) -> str:
    return f"{spec.asset_name}_fragmentation"


def ingest_job_name(spec: PoolSpec) -> str:
    return f"ingest_{spec.asset_name}"


OBSERVER_NAME = "lake_commit_observer"


def _digest(files: Sequence[LandingFile]) -> str:
    text = "\n".join(f"{f.path}\t{f.size}" for f in sorted(files, key=lambda f: f.path))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def _status(running: bool) -> dg.DefaultSensorStatus:
    return dg.DefaultSensorStatus.RUNNING if running else dg.DefaultSensorStatus.STOPPED


def _in_partitions(spec: PoolSpec, day: str) -> bool:
    assert spec.partitions is not None
    try:
        d = date.fromisoformat(day)
    except ValueError:
        return False
    end = spec.partitions.end or datetime.now(UTC).date()
    return spec.partitions.start <= d < end


def plan_landing_tick(
    spec: PoolSpec, files: Sequence[LandingFile], cursor: str | None
) -> tuple[list[dg.RunRequest], str, str]:
    """Pure: the run requests, new cursor and a note for one tick over ``files``."""
    state = WatchState.from_text(cursor)
    seen = look(files, state)
    requests: list[dg.RunRequest] = []
    taken: list[LandingFile] = []
    tags = {"lake/pool": spec.name}
    if not spec.daily:
        n = spec.sensor.max_files_per_run
        for i in range(0, len(seen.stable), n):
            batch = seen.stable[i : i + n]
            requests.append(
                dg.RunRequest(
                    run_key=f"{spec.asset_name}:{_digest(batch)}",
                    run_config={
                        "ops": {spec.asset_name: {"config": {"files": [f.path for f in batch]}}}
                    },
                    tags={**tags, "lake/files": str(len(batch))},
                )
            )
            taken += batch
    else:
        waiting = {f.day for f in seen.settling}
        for day in sorted({f.day for f in seen.stable if f.day is not None}):
            if day in waiting or not _in_partitions(spec, day):
                continue  # a file of that day is still settling, or the day is out of range
            day_files = [f for f in files if f.day == day]
            requests.append(
                dg.RunRequest(
                    run_key=f"{spec.asset_name}:{day}:{_digest(day_files)}",
                    partition_key=day,
                    tags={**tags, "lake/files": str(len(day_files))},
                )
            )
            taken += day_files
    note = f"{len(requests)} runs requested, {len(seen.settling)} files settling"
    return requests, seen.next_state(state, taken).to_text(), note


def build_landing_sensor(spec: PoolSpec, job: Any) -> dg.SensorDefinition:
    @dg.sensor(
        name=landing_sensor_name(spec),
        description=f"ingest new files of {spec.landing} into pool {spec.name}",
        job=job,
        minimum_interval_seconds=spec.sensor.interval_seconds,
        default_status=_status(spec.sensor.running),
    )
    def landing_sensor(context: dg.SensorEvaluationContext, lake: LakeResource) -> dg.SensorResult:
        zone = lake.landing(spec)
        if zone is None:
            return dg.SensorResult(skip_reason=f"pool {spec.name} has no landing zone")
        requests, cursor, note = plan_landing_tick(spec, zone.files(), context.cursor)
        context.log.info(f"{spec.name}: {note}")
        if not requests:
            return dg.SensorResult(skip_reason=f"no new stable files ({note})", cursor=cursor)
        return dg.SensorResult(run_requests=requests, cursor=cursor)

    return landing_sensor


def build_fragmentation_sensor(spec: PoolSpec, job: dg.JobDefinition) -> dg.SensorDefinition:
    policy = spec.maintenance.compaction

    @dg.sensor(
        name=fragmentation_sensor_name(spec),
        description=(
            f"compact pool {spec.name} when more than {policy.max_overlapping_objects} objects "
            f"overlap or more than {policy.max_small_objects} are small"
        ),
        job=job,
        minimum_interval_seconds=policy.sensor_interval_seconds or 60,
        default_status=_status(policy.sensor_running),
    )
    def fragmentation_sensor(
        context: dg.SensorEvaluationContext, lake: LakeResource
    ) -> dg.SensorResult:
        pool = lake.pool(spec)
        if pool is None:
            return dg.SensorResult(skip_reason=f"pool {spec.name} does not exist yet")
        tip = pool.tip(spec.branch)
        if tip is None or tip == context.cursor:
            return dg.SensorResult(skip_reason="no new commits")
        if pool.config.otree is not None:
            from lake_core.otree.optimize import pool_needs_optimize

            if not pool_needs_optimize(pool, spec.branch):
                return dg.SensorResult(skip_reason="nothing to optimize", cursor=tip)
            return request_unless_running(
                context,
                compact_job_name(spec),
                "optimize",
                f"{spec.asset_name}:compact:{tip}",
                {"lake/pool": spec.name, "lake/trigger": "otree"},
                tip,
            )
        frag = fragmentation(pool, spec.branch)
        over = (
            frag.overlapping_objects > policy.max_overlapping_objects
            or frag.small_objects > policy.max_small_objects
        )
        if not over or frag.pending_runs == 0:
            return dg.SensorResult(
                skip_reason=f"fragmentation under threshold: {frag.to_json()}", cursor=tip
            )
        return request_unless_running(
            context,
            compact_job_name(spec),
            "compaction",
            f"{spec.asset_name}:compact:{tip}",
            {"lake/pool": spec.name, "lake/trigger": "fragmentation"},
            tip,
        )

    return fragmentation_sensor


def _observed_commits(instance: dg.DagsterInstance, key: dg.AssetKey) -> set[str]:
    """Commits the latest observations of ``key`` reported."""
    out: set[str] = set()
    for record in instance.fetch_observations(key, limit=OBSERVE_LIMIT).records:
        obs = record.asset_observation
        if obs is not None and "lake/commit" in obs.metadata:
            out.add(str(obs.metadata["lake/commit"].value))
    return out


def build_observer_sensor(config: PoolsConfig, interval_seconds: int = 30) -> dg.SensorDefinition:
    """Commits whose author is not the lake resource's user (the CLI, other programs) become
    observations of their pool's asset, oldest first."""

    @dg.sensor(
        name=OBSERVER_NAME,
        description="report commits made outside Dagster as observations of the pool assets",
        minimum_interval_seconds=interval_seconds,
        default_status=dg.DefaultSensorStatus.RUNNING,
    )
    def observer(context: dg.SensorEvaluationContext, lake: LakeResource) -> dg.SensorResult:
        tips: dict[str, str] = json.loads(context.cursor) if context.cursor else {}
        events: list[dg.AssetObservation] = []
        for spec in config.pools:
            try:
                pool = lake.pool(spec)
                if pool is None:
                    continue
                tip = pool.tip(spec.branch)
                if tip is None or tips.get(spec.asset_name) == tip:
                    continue
                seen = tips.get(spec.asset_name)
                # Without a cursor (a new or reset sensor), the event log says what was
                # reported already, so nothing is observed twice.
                known = set() if seen else _observed_commits(context.instance, asset_key(spec))
                found: list[Commit] = []
                for commit in pool.log(spec.branch):
                    if commit.id == seen or commit.id in known or len(found) >= OBSERVE_LIMIT:
                        break
                    found.append(commit)
                for commit in reversed(found):
                    if commit.author == lake.user:
                        continue  # Dagster's own commit: already a materialization
                    events.append(
                        dg.AssetObservation(
                            asset_key(spec),
                            description=f"commit by {commit.author}: {commit.message}",
                            metadata=commit_metadata(pool, commit, tip),
                        )
                    )
                tips[spec.asset_name] = tip
            except LakeError as e:
                context.log.warning(f"pool {spec.name}: {e}")
        cursor = json.dumps(tips, sort_keys=True)
        if not events:
            return dg.SensorResult(skip_reason="no commits from outside Dagster", cursor=cursor)
        return dg.SensorResult(asset_events=events, cursor=cursor)

    return observer
