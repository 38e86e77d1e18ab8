"""Search indexes per pool (issue 15): the ``objects_indexed`` check's answer, a job that
indexes what the rules covering the pool have not indexed, and a sensor that requests it.

What counts as unindexed is lake_core's one rule (:func:`lake_core.indexes.coverage.unindexed`,
the same objects :func:`lake_core.indexes.apply.apply_rule` builds for), so the job always
brings the check to zero. The job runs in the pool's Dagster concurrency pool; it takes no
maintenance lock, as ``lake index apply`` does not: an index commit plans against the tip it
lands on, so a racing compaction only leaves an orphan index file for cleanup.

Metadata holds counts and rule names only (never object contents or secrets).
"""

from collections import Counter
from typing import Any

import dagster as dg

from lake_core.indexes.apply import apply_rule
from lake_core.indexes.coverage import unindexed
from lake_core.pool import Pool
from lake_orchestration.assets import asset_key
from lake_orchestration.config import PoolSpec
from lake_orchestration.resources import LakeResource
from lake_orchestration.sensors import request_unless_running

#: How often the index sensor looks at the pool's tip and rules (seconds).
SENSOR_INTERVAL = 120


def index_job_name(spec: PoolSpec) -> str:
    return f"index_{spec.asset_name}"


def index_op_name(spec: PoolSpec) -> str:
    return f"{spec.asset_name}_index"


def index_sensor_name(spec: PoolSpec) -> str:
    return f"{spec.asset_name}_index_sensor"


def check_indexed(pool: Pool, branch: str) -> tuple[bool, dict[str, Any]]:
    """No live object of ``branch`` lacks an index a rule covering the pool would build."""
    snap = pool.snapshot(pool.tip(branch))
    rules = pool.index_rules
    missing = unindexed(snap, rules)
    by_rule = Counter(rule.full_name for _, rule in missing)
    md: dict[str, Any] = {
        "lake/index_rules": dg.MetadataValue.json(sorted(r.full_name for r in rules)),
        "lake/objects": len(snap.objects),
        "lake/index_entries": len(snap.indexes),
        "lake/unindexed": len(missing),
        "lake/unindexed_objects": len({obj.id for obj, _ in missing}),
    }
    if missing:
        md["lake/unindexed_by_rule"] = dg.MetadataValue.json(dict(sorted(by_rule.items())))
    return not missing, md


def build_index_job(spec: PoolSpec) -> dg.JobDefinition:
    key = asset_key(spec)

    @dg.op(name=index_op_name(spec), pool=spec.concurrency_pool, tags={"kind": "lakepool"})
    def index_op(context: dg.OpExecutionContext, lake: LakeResource) -> dg.Output[Any]:
        pool = lake.pool(spec)
        if pool is None:
            raise dg.Failure(f"pool {spec.name} does not exist yet (materialize its asset first)")
        commits: list[str] = []
        indexed = bytes_ = 0
        for rule in pool.index_rules:
            result = apply_rule(pool, rule, branch=spec.branch, author=lake.user)
            if result.commit is not None:
                commits.append(result.commit.id)
                indexed += result.indexed
                bytes_ += result.bytes
                context.log.info(
                    f"{result.commit.id} committed: indexed {result.indexed} object(s) by "
                    f"{rule.full_name} ({result.bytes:,} bytes)"
                )
        _, after = check_indexed(pool, spec.branch)
        md: dict[str, Any] = {
            "lake/commits": dg.MetadataValue.json(commits),
            "lake/indexed": indexed,
            "lake/index_bytes": bytes_,
            "lake/unindexed": after["lake/unindexed"],
            "lake/index_rules": after["lake/index_rules"],
        }
        if commits:
            context.log_event(
                dg.AssetObservation(
                    key, description="index", metadata=md, tags={"lake/maintenance": "index"}
                )
            )
        else:
            context.log.info(f"{spec.name}: nothing to index")
        return dg.Output(commits, metadata=md)

    @dg.job(
        name=index_job_name(spec),
        description=f"index the objects of pool {spec.name} its index rules have not indexed",
        tags={"lake/pool": spec.name},
    )
    def index_job() -> None:
        index_op()

    return index_job


def build_index_sensor(spec: PoolSpec, job: dg.JobDefinition) -> dg.SensorDefinition:
    """Requests the index job when the pool has unindexed objects. The cursor is the tip and
    the covering rules' ids, so a new rule is noticed without a new commit, and one state is
    asked for once."""

    @dg.sensor(
        name=index_sensor_name(spec),
        description=f"index pool {spec.name}'s objects when its index rules left some out",
        job=job,
        minimum_interval_seconds=SENSOR_INTERVAL,
        default_status=dg.DefaultSensorStatus.RUNNING,
    )
    def index_sensor(context: dg.SensorEvaluationContext, lake: LakeResource) -> dg.SensorResult:
        pool = lake.pool(spec)
        if pool is None:
            return dg.SensorResult(skip_reason=f"pool {spec.name} does not exist yet")
        tip = pool.tip(spec.branch)
        state = f"{tip}:{','.join(sorted(r.id for r in pool.index_rules))}"
        if tip is None or state == context.cursor:
            return dg.SensorResult(skip_reason="no new commits or index rules")
        passed, _ = check_indexed(pool, spec.branch)
        if passed:
            return dg.SensorResult(skip_reason="every object is indexed", cursor=state)
        return request_unless_running(
            context,
            index_job_name(spec),
            "indexing",
            f"{spec.asset_name}:index:{state}",
            {"lake/pool": spec.name, "lake/trigger": "unindexed"},
            state,
        )

    return index_sensor
