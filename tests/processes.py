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
import queue
import tempfile
import time
import traceback
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


#: The file a worker appends its traceback to when it dies of an exception (set per context):
#: under ``pytest -n`` a forkserver's stderr is whatever the test that started it captured.
ERRORS_ENV = "LAKE_TEST_CHILD_ERRORS"


def _run(
    env: dict[str, str], target: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> None:
    os.environ.clear()
    os.environ.update(env)
    try:
        target(*args, **kwargs)
    except BaseException:
        errors = os.environ.get(ERRORS_ENV)
        if errors:
            with open(errors, "a") as f:
                f.write(f"worker {os.getpid()} ({getattr(target, '__name__', target)}):\n")
                f.write(traceback.format_exc() + "\n")
        raise


class WatchedQueue:
    """A queue of the context's workers whose ``get`` in the test process gives up as soon as
    nothing more can come — every worker has exited and the queue is empty — instead of
    waiting out its timeout, and says why: the workers' exit codes and the tracebacks of those
    that died of an exception. In a worker (it is pickled without the watch) a plain queue."""

    def __init__(self, inner: Any, workers: list[BaseProcess], errors: str) -> None:
        self._inner, self._workers, self._errors = inner, workers, errors

    def __getstate__(self) -> dict[str, Any]:
        return {"_inner": self._inner, "_workers": None, "_errors": self._errors}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def put(self, *args: Any, **kwargs: Any) -> None:
        self._inner.put(*args, **kwargs)

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        if self._workers is None or not block:
            return self._inner.get(block, timeout)
        deadline = None if timeout is None else time.monotonic() + timeout
        settled = 0  # polls in a row with every worker gone and nothing queued
        while True:
            left = 1.0 if deadline is None else max(0.0, min(1.0, deadline - time.monotonic()))
            try:
                return self._inner.get(True, left)
            except queue.Empty:
                if self._workers and all(w.exitcode is not None for w in self._workers):
                    settled += 1  # twice: a worker's last put may still be in the pipe
                if settled >= 2 or (deadline is not None and time.monotonic() >= deadline):
                    raise queue.Empty(self._why()) from None

    def _why(self) -> str:
        codes = ", ".join(f"{w.pid}: {w.exitcode}" for w in self._workers or [])
        try:
            with open(self._errors) as f:
                errors = f.read()
        except OSError:
            errors = ""
        return f"no report (worker exit codes {codes})\n{errors}".rstrip()

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name in ("_inner", "_workers", "_errors"):
            raise AttributeError(name)  # (while unpickling, before the state is set)
        return getattr(self._inner, name)


class Processes:
    """Like ``mp.get_context("spawn")`` for what the tests use (``Process``, ``Barrier``,
    ``Queue``, ``Event``, ``Value``), over a preloaded forkserver."""

    def __init__(self) -> None:
        ctx = mp.get_context("forkserver")
        ctx.set_forkserver_preload(PRELOAD)
        self._ctx: ForkServerContext = ctx
        #: Every worker this context started (its queues watch them).
        self._workers: list[BaseProcess] = []
        fd, self._errors = tempfile.mkstemp(prefix="lake-test-workers-", suffix=".log")
        os.close(fd)

    def Process(  # noqa: N802 - multiprocessing's name
        self,
        target: Callable[..., Any],
        args: Iterable[Any] = (),
        kwargs: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> BaseProcess:
        env = {**os.environ, ERRORS_ENV: self._errors}
        process = self._ctx.Process(
            target=_run, args=(env, target, tuple(args), dict(kwargs or {})), **options
        )
        self._workers.append(process)
        return process

    def Queue(self, *args: Any, **kwargs: Any) -> WatchedQueue:  # noqa: N802 - multiprocessing's name
        return WatchedQueue(self._ctx.Queue(*args, **kwargs), self._workers, self._errors)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ctx, name)


def context() -> Processes:
    """The context racing tests start their worker processes from."""
    return Processes()
