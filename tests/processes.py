"""Worker processes for the racing tests: real OS processes, forked from a ``forkserver`` that
imported lake_core, pyarrow and boto3 once, instead of a fresh interpreter each (``spawn``),
which re-imports all of it: ~0.25 s of CPU a process, 2 s and more for a test of eight on two
cores.

The children are still separate processes with nothing of the test's: the server is a clean
interpreter started for this purpose (not a fork of pytest, its threads and its open
clients), and every child opens its lake itself. Each gets the test process's environment as
it is when the child is created, as under ``spawn`` — a forkserver's children would otherwise
inherit the server's, from whenever it started (another test's fault-proxy endpoint, say).
"""

from __future__ import annotations

import multiprocessing as mp
import os
from collections.abc import Callable, Iterable, Mapping
from multiprocessing.context import ForkServerContext
from multiprocessing.process import BaseProcess
from typing import Any

PRELOAD = [
    "pyarrow",
    "pyarrow.parquet",
    "boto3",
    "lake_core",
    "lake_core.loading",
    "lake_core.writer",
    "lake_core.stores.s3",
    "tests.workers",
]


def _run(
    env: dict[str, str], target: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    os.environ.clear()
    os.environ.update(env)
    target(*args, **kwargs)


class Processes:
    """Like ``mp.get_context("spawn")`` for what the tests use (``Process``, ``Barrier``,
    ``Queue``, ``Event``, ``Value``), over a preloaded forkserver."""

    def __init__(self) -> None:
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        self._ctx: ForkServerContext = ctx

    def Process(  # noqa: N802 - multiprocessing's name
        self,
        target: Callable[..., Any],
        args: Iterable[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> BaseProcess:
        env = dict(os.environ)
        return self._ctx.Process(
            target=_run, args=(env, target, tuple(args), dict(kwargs or {})), **options
        )

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)


def context() -> Processes:
    """The context racing tests start their worker processes from."""
    return Processes()
