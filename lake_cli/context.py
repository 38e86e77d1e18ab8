"""What every command shares: the lake the command line selected (``ctx.obj``), and the small
conversions and printing all commands do alike."""

from __future__ import annotations

import functools
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Concatenate, ParamSpec, TypeVar

import click

from lake_cli.startup import probe_pandas_without_importing
from lake_core.clock import parse_iso
from lake_core.config import LakeConfig
from lake_core.errors import UsageError
from lake_core.names import split_ref

if TYPE_CHECKING:
    from lake_core.lake import Lake
    from lake_core.pool import Pool

P = ParamSpec("P")
R = TypeVar("R")


def lake_class() -> type[Lake]:
    """:class:`Lake`, imported on first use: ``lake_core.lake`` pulls in pyarrow, the pool,
    scans and the catalog, which a command that opens no lake (``--help``, a usage error)
    never needs (see :mod:`lake_cli.startup`)."""
    probe_pandas_without_importing()  # before pyarrow's first conversion, at import below
    from lake_core.lake import Lake

    return Lake


@dataclass
class LakeContext:
    """``--lake`` and ``--zk`` as given (``None``: the environment decides). Nothing is opened
    until a command asks, so ``lake init``, usage errors and ``--help`` touch no store; a lake
    is opened at most once per author."""

    uri: str | None = None
    zookeeper: str | None = None
    #: The lake service's bearer token (``--token``, else ``LAKE_TOKEN``); only an
    #: ``http(s)://`` lake uses it.
    token: str | None = None
    _lakes: dict[str | None, Lake] = field(default_factory=dict, repr=False)

    def config(self, user: str | None = None) -> LakeConfig:
        return LakeConfig.resolve(uri=self.uri, zookeeper=self.zookeeper, user=user)

    def lake(self, user: str | None = None) -> Lake:
        if user not in self._lakes:
            self._lakes[user] = lake_class().open(self.config(user), token=self.token)
        return self._lakes[user]

    def pool_ref(self, text: str, user: str | None = None) -> tuple[Pool, str | None]:
        """``POOL[@REF]``: the pool, and the ref after ``@`` (``None`` without one)."""
        name, ref = split_ref(text)
        return self.lake(user).pool(name), ref

    def pool(self, text: str, user: str | None = None) -> Pool:
        """``POOL``; an ``@REF`` is ignored, as by the commands that take a bare pool."""
        return self.pool_ref(text, user)[0]


_pass_context = click.make_pass_decorator(LakeContext)


def pass_lake(f: Callable[Concatenate[LakeContext, P], R]) -> Callable[P, R]:
    """Hands a command the :class:`LakeContext` the ``lake`` group made. Before the command
    body runs (``--help`` and usage errors never get there), pyarrow's pandas probe is answered
    without importing pandas: see :func:`lake_cli.startup.probe_pandas_without_importing`."""
    passed = _pass_context(f)

    @functools.wraps(passed)
    def run(*args: P.args, **kwargs: P.kwargs) -> R:
        probe_pandas_without_importing()
        return passed(*args, **kwargs)

    return run


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


def parse_meta(text: str | None) -> dict[str, Any] | None:
    """``--meta JSON``: a JSON object stored in the commit. Anything else (a list, a number,
    a string, ``null``) is refused: commit metadata is named fields that ``lake log`` and the
    ``$commits`` table show, and scripts read it by key. ``NaN``/``Infinity``, which Python's
    parser takes but JSON lacks, are refused too, so ``lake log -f json`` stays JSON."""
    if text is None:
        return None
    from lake_core.ingest.formats import json_kind  # a light module: no pyarrow

    try:
        value = json.loads(text, parse_constant=_refuse_constant, parse_float=_finite_float)
    except json.JSONDecodeError as e:
        raise UsageError(f"--meta is not valid JSON: {e}") from None
    except RecursionError:
        raise UsageError("--meta is nested too deeply") from None
    if not isinstance(value, dict):
        raise UsageError(
            f'--meta must be a JSON object, e.g. \'{{"source": "demo"}}\', not {json_kind(value)}'
        )
    return value


def _refuse_constant(name: str) -> Any:
    raise UsageError(f"--meta is not valid JSON: {name} is not a JSON value (use null)")


def _finite_float(text: str) -> float:
    """A JSON number as a float; one beyond a float's range (``1e999``, which Python reads as
    infinity) is refused, as ``Infinity`` is."""
    value = float(text)
    if not math.isfinite(value):
        raise UsageError(f"--meta is not valid JSON: {text} is beyond a float's range")
    return value
