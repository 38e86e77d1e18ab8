"""Dagster resources: the lake, resolved once from configuration and handed to assets."""

from __future__ import annotations

import dagster as dg

from lake_core import Lake, LakeConfig


class LakeResource(dg.ConfigurableResource):  # type: ignore[misc]
    """The lake a code location works on.

    Example::

        defs = dg.Definitions(resources={"lake": LakeResource(uri=dg.EnvVar("LAKE_ROOT"))})

    S3 credentials come from the standard ``AWS_*`` environment of the run worker; they are
    never part of this resource's config, so they never show in the Dagster UI.
    """

    uri: str
    zookeeper: str | None = None
    user: str = "dagster"

    def open(self) -> Lake:
        return Lake.open(LakeConfig(uri=self.uri, zookeeper=self.zookeeper, user=self.user))
