"""Which source commit a derived pool reflects: recorded in the meta of every commit a refresh
makes (``{"lake.derived": {"source": POOL_ID, "commit": COMMIT_ID, "mode": …}}``), so "how
current is it" is a lookup (:mod:`lake_core.derived.maintain` writes it; the query answering
of :mod:`lake_core.derived.answer` reads it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from lake_core.names import MAIN

if TYPE_CHECKING:
    from lake_core.pool import Pool

#: The commit meta key and the application id of a derived pool's commits.
META_KEY = "lake.derived"
TXN_APP = "lake.derived"


def reflected(pool: Pool, ref: str | None = None) -> str | None:
    """The source commit the derived pool reflects at ``ref`` (default main); None before
    its first refresh."""
    tip = pool.resolve(ref)
    if tip is None:
        return None
    meta = pool.read_commit(tip).meta
    if isinstance(meta, dict) and isinstance(meta.get(META_KEY), dict):
        commit = meta[META_KEY].get("commit")
        return None if commit is None else str(commit)
    return None


def commit_reflecting(pool: Pool, source_commit: str) -> str | None:
    """The derived pool's latest main commit that reflects exactly ``source_commit``."""
    for commit in pool.log(MAIN):
        meta = commit.meta
        link = meta.get(META_KEY) if isinstance(meta, dict) else None
        if isinstance(link, dict) and link.get("commit") == source_commit:
            return commit.id
    return None


__all__ = ["META_KEY", "TXN_APP", "commit_reflecting", "reflected"]
