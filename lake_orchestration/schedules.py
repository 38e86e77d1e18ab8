"""Schedules per pool: compaction on its cron, and retention (retain, vacate, then cleanup).

The retention schedule computes the data cut and the vacate time from the tick's scheduled
time, not from the clock when the run happens to start, so a delayed or retried run cuts the
same data and history.
"""

from typing import Any

import dagster as dg

from lake_core.clock import to_iso
from lake_orchestration.config import PoolSpec
from lake_orchestration.maintenance import cleanup_op_name, retain_op_name, vacate_op_name


def compaction_schedule_name(spec: PoolSpec) -> str:
    return f"{spec.asset_name}_compaction_schedule"


def retention_schedule_name(spec: PoolSpec) -> str:
    return f"{spec.asset_name}_retention_schedule"


def _status(running: bool) -> dg.DefaultScheduleStatus:
    return dg.DefaultScheduleStatus.RUNNING if running else dg.DefaultScheduleStatus.STOPPED


def build_compaction_schedule(spec: PoolSpec, job: Any) -> dg.ScheduleDefinition | None:
    policy = spec.maintenance.compaction
    if not policy.cron:
        return None
    return dg.ScheduleDefinition(
        name=compaction_schedule_name(spec),
        cron_schedule=policy.cron,
        job=job,
        execution_timezone="UTC",
        default_status=_status(policy.running),
        tags={"lake/pool": spec.name, "lake/trigger": "schedule"},
        description=f"compact pool {spec.name} on {policy.cron}",
    )


def build_retention_schedule(spec: PoolSpec, job: Any) -> dg.ScheduleDefinition | None:
    policy = spec.maintenance.retention
    if not policy.cron:
        return None

    @dg.schedule(
        name=retention_schedule_name(spec),
        cron_schedule=policy.cron,
        job=job,
        execution_timezone="UTC",
        default_status=_status(policy.running),
        description=(
            (
                f"remove pool {spec.name}'s data older than {policy.data_older_than}, "
                if policy.data_older_than
                else ""
            )
            + f"vacate pool {spec.name}'s history older than {policy.keep}, then clean up files "
            f"tombstoned longer than {policy.grace}"
        ),
    )
    def retention_schedule(context: dg.ScheduleEvaluationContext) -> dg.RunRequest:
        before = context.scheduled_execution_time - policy.keep
        return dg.RunRequest(
            run_key=f"{spec.asset_name}:retention:{to_iso(context.scheduled_execution_time)}",
            run_config={
                "ops": {
                    retain_op_name(spec): {
                        "config": {"now": to_iso(context.scheduled_execution_time)}
                    },
                    vacate_op_name(spec): {"config": {"before": to_iso(before)}},
                    cleanup_op_name(spec): {
                        "config": {"grace_seconds": policy.grace.total_seconds()}
                    },
                }
            },
            tags={"lake/pool": spec.name, "lake/trigger": "schedule"},
        )

    return retention_schedule
