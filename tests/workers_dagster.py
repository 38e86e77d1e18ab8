"""Code that the Dagster race tests' subprocesses run (importable under ``spawn``).

Each worker builds the code location from a pools YAML as a deployment would, waits at a
barrier so all run at once, executes the pool's ingest job for the files it was given, and
reports on a queue.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg

from lake_orchestration.config import parse_pools_config
from lake_orchestration.definitions import build_definitions
from lake_orchestration.resources import LakeResource


def ingest_run(
    uri: str, yaml_text: str, base: str, pool: str, files: list[str], start: Any, out: Any
) -> None:
    """Run ``ingest_<pool>`` for ``files``; report (success, lake/files of its materialization)."""
    config = parse_pools_config(yaml_text, Path(base), env={})
    defs = build_definitions(config, LakeResource(uri=uri))
    job = defs.resolve_job_def(f"ingest_{config.pool(pool).asset_name}")
    run_config = {"ops": {config.pool(pool).asset_name: {"config": {"files": files}}}}
    with dg.instance_for_test() as instance:
        start.wait()
        result = job.execute_in_process(instance=instance, run_config=run_config)
        (event,) = result.get_asset_materialization_events()
        out.put((result.success, event.materialization.metadata["lake/files"].value))
