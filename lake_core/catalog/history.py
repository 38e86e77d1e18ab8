"""The catalog's versions as plain records (``lake catalog log``): what a version did, in a
form that needs neither the catalog's protobuf nor its files, so it travels over the lake
service unchanged."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from lake_core.catalog.actions import describe, summary
from lake_core.catalog.catalog import Catalog
from lake_core.clock import parse_iso, to_iso


@dataclass(frozen=True)
class CatalogVersion:
    """One catalog version: its number, time, the version a rollback restored (or None), and
    its actions, each described (``lake catalog log -f json``) and summed up in a few words."""

    version: int
    time: datetime
    rollback_from: int | None
    actions: tuple[dict[str, Any], ...]
    summaries: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "version": self.version,
            "time": to_iso(self.time),
            "rollback_from": self.rollback_from,
            "actions": list(self.actions),
            "summaries": list(self.summaries),
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> CatalogVersion:
        rollback = d.get("rollback_from")
        return cls(
            version=int(d["version"]),
            time=parse_iso(str(d["time"])),
            rollback_from=None if rollback is None else int(rollback),
            actions=tuple(dict(a) for a in d.get("actions", [])),
            summaries=tuple(str(s) for s in d.get("summaries", [])),
        )


def catalog_versions(catalog: Catalog, limit: int | None = None) -> Iterator[CatalogVersion]:
    """The catalog's versions, newest first (only the newest ``limit`` when given)."""
    for snap in catalog.log(limit):
        actions = [row.action for row in snap.root.actions]
        yield CatalogVersion(
            version=snap.version,
            time=snap.created_at,
            rollback_from=snap.rollback_from,
            actions=tuple(describe(a) for a in actions),
            summaries=tuple(summary(a) for a in actions),
        )
