"""Settings resolved once at the edge (flags > environment > defaults) into frozen objects.

Nothing below the CLI or the orchestration adapter reads the environment: they build a
:class:`LakeConfig` and pass it down.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from lake_core.clock import SYSTEM_CLOCK, Clock
from lake_core.stores.s3config import S3Config, refuse_credentials_in_uri


@dataclass(frozen=True)
class RetryPolicy:
    """Budget for optimistic commits: ``max_attempts`` tries, jittered exponential backoff
    from ``base_delay`` up to ``max_delay`` seconds."""

    max_attempts: int = 64
    base_delay: float = 0.002
    max_delay: float = 0.25


@dataclass(frozen=True)
class LakeConfig:
    """Everything the lake needs to know about its surroundings."""

    uri: str
    zookeeper: str | None = None
    user: str = "lake"
    #: False for an object store without conditional writes: journal appends then take the
    #: pool's journal lock (ZooKeeper) instead of relying on put-if-missing.
    conditional_writes: bool = True
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    clock: Clock = SYSTEM_CLOCK
    #: How to reach S3 for an ``s3://`` lake (None: boto3's standard resolution).
    s3: S3Config | None = None

    @classmethod
    def resolve(
        cls,
        uri: str | None = None,
        zookeeper: str | None = None,
        user: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> LakeConfig:
        """Flags first, then ``LAKE_ROOT`` / ``LAKE_ZOOKEEPER`` / ``LAKE_USER`` /
        ``LAKE_CONDITIONAL_WRITES`` (``false`` for a store without If-None-Match), then
        defaults."""
        env = os.environ if env is None else env
        from lake_core.errors import UsageError

        resolved_uri = uri or env.get("LAKE_ROOT") or ""
        if not resolved_uri:
            raise UsageError("no lake given: pass --lake URI or set LAKE_ROOT")
        # Before anything passes the URI on (`lake serve` hands it to a child's argv).
        refuse_credentials_in_uri(resolved_uri)
        conditional = env.get("LAKE_CONDITIONAL_WRITES", "true").strip().lower()
        return cls(
            uri=resolved_uri,
            zookeeper=zookeeper or env.get("LAKE_ZOOKEEPER") or None,
            user=user or env.get("LAKE_USER") or _default_user(),
            conditional_writes=conditional not in ("0", "false", "no", "off"),
        )


def shown_uri(uri: str) -> str:
    """``uri`` as errors may show it: the password of any user info replaced by ``***``
    (``file://user:secret@host/x``); URIs without one unchanged."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(uri)
        if parts.password is None:
            return uri
    except ValueError:  # not a URL urllib can split: show nothing of its user info
        return uri.rpartition("@")[2] if "@" in uri else uri
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


def _default_user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # noqa: BLE001 - no passwd entry in some containers
        return "lake"
