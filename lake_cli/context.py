"""What every command shares: the lake the command line selected (``ctx.obj``), and the small
conversions and printing all commands do alike."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import click

from lake_core.clock import parse_iso
from lake_core.config import LakeConfig
from lake_core.errors import UsageError
from lake_core.lake import Lake
from lake_core.names import split_ref
from lake_core.pool import Pool


@dataclass
class LakeContext:
    """``--lake`` and ``--zk`` as given (``None``: the environment decides). Nothing is opened
    until a command asks, so ``lake init``, usage errors and ``--help`` touch no store; a lake
    is opened at most once per author."""

    uri: str | None = None
    zookeeper: str | None = None
    _lakes: dict[str | None, Lake] = field(default_factory=dict, repr=False)

    def config(self, user: str | None = None) -> LakeConfig:
        return LakeConfig.resolve(uri=self.uri, zookeeper=self.zookeeper, user=user)

    def lake(self, user: str | None = None) -> Lake:
        if user not in self._lakes:
            self._lakes[user] = Lake.open(self.config(user))
        return self._lakes[user]

    def pool_ref(self, text: str, user: str | None = None) -> tuple[Pool, str | None]:
        """``POOL[@REF]``: the pool, and the ref after ``@`` (``None`` without one)."""
        name, ref = split_ref(text)
        return self.lake(user).pool(name), ref

    def pool(self, text: str, user: str | None = None) -> Pool:
        """``POOL``; an ``@REF`` is ignored, as by the commands that take a bare pool."""
        return self.pool_ref(text, user)[0]


#: ``@pass_lake`` hands a command the :class:`LakeContext` the ``lake`` group made.
pass_lake = click.make_pass_decorator(LakeContext)


def say(line: str) -> None:
    """One line on stdout, flushed (a line a script waits for is not held in a buffer)."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def parse_time(text: str | None) -> datetime | None:
    """An ISO 8601 ``TIME`` (``None`` stays ``None``)."""
    if text is None:
        return None
    try:
        return parse_iso(text)
    except ValueError:
        raise UsageError(
            f"invalid time {text!r}: use ISO 8601, e.g. 2026-01-05T10:00:00Z"
        ) from None


def parse_meta(text: str | None) -> Any:
    """``--meta JSON``: any JSON value stored in the commit."""
    if text is None:
        return None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UsageError(f"--meta is not valid JSON: {e}") from None
    except RecursionError:
        raise UsageError("--meta is nested too deeply") from None
