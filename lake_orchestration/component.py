"""Pools as a Dagster component: the same definitions as :mod:`lake_orchestration.definitions`,
declared in a ``defs.yaml`` of a ``dg`` project's defs folder::

    type: lake_orchestration.component.LakePoolsComponent
    attributes:
      pools_file: pools.yaml        # relative to this defs.yaml; or inline:
      pools:
        - {name: flights, key: [time_hour], order: asc, landing: landing/flights}

Pool entries follow the pools config (:mod:`lake_orchestration.config`); relative landing
folders are relative to the component's folder. The lake resource comes from the environment
(``LAKE_ROOT``, ``LAKE_ZOOKEEPER``, ``LAKE_ENGINE``, ``AWS_*``), as for the code location.
"""

import os
from typing import Any

import dagster as dg
import yaml  # type: ignore[import-untyped]

from lake_orchestration.config import PoolsConfig, load_pools_config, parse_pools_config
from lake_orchestration.definitions import build_definitions, lake_resource_from_env


class LakePoolsComponent(dg.Component, dg.Model, dg.Resolvable):
    """Lake pools as assets, with their sensors, schedules, jobs and checks."""

    pools_file: str | None = None
    pools: list[dict[str, Any]] = []

    def pools_config(self, folder: Any) -> PoolsConfig:
        if self.pools_file:
            return load_pools_config(folder / self.pools_file)
        return parse_pools_config(yaml.safe_dump({"pools": self.pools}), folder)

    def build_defs(self, context: dg.ComponentLoadContext) -> dg.Definitions:
        return build_definitions(
            self.pools_config(context.path), lake_resource_from_env(os.environ)
        )
