"""The code location `workspace.yaml` loads. Pools as assets, sensors and schedules are added
by the orchestration issue; for now it provides the lake resource."""

from __future__ import annotations

import dagster as dg

from lake_orchestration.resources import LakeResource

defs = dg.Definitions(
    resources={"lake": LakeResource(uri=dg.EnvVar("LAKE_ROOT"))},
)
