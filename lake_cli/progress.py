"""Progress of long reads and exports on a terminal: rows written and objects read, drawn by
rich on stderr, and only when stderr is a terminal (scripts and pipes see nothing).

The bar wraps the stream of record batches, so it costs one update per batch.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

#: A read shorter than this never shows a bar (rich draws nothing before it is refreshed).
_DELAY_SECONDS = 1.0


@contextmanager
def batch_progress(
    batches: Iterator[pa.RecordBatch],
    objects_total: int,
    objects_read: Callable[[], int],
    enabled: bool,
) -> Iterator[Iterator[pa.RecordBatch]]:
    """``batches`` wrapped so each one advances a bar of objects read (of ``objects_total``)
    with a running row count; ``batches`` itself when not ``enabled``."""
    if not enabled:
        yield batches
        return
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn("objects"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[rows]:,} rows"),
        TimeElapsedColumn(),
        # The caller enables progress only for a terminal on stderr.
        console=Console(file=sys.stderr, force_terminal=True),
        transient=True,
        auto_refresh=False,
    )
    task = progress.add_task("read", total=objects_total or None, rows=0)
    state: dict[str, Any] = {"rows": 0, "shown": False, "start": None}

    def wrapped() -> Iterator[pa.RecordBatch]:
        import time

        state["start"] = time.monotonic()
        for batch in batches:
            state["rows"] += batch.num_rows
            progress.update(task, completed=objects_read(), rows=state["rows"])
            if not state["shown"] and time.monotonic() - state["start"] >= _DELAY_SECONDS:
                progress.start()
                state["shown"] = True
            if state["shown"]:
                progress.refresh()
            yield batch

    try:
        yield wrapped()
    finally:
        if state["shown"]:
            progress.stop()


@contextmanager
def engine_progress(percent: Callable[[], float], enabled: bool) -> Iterator[None]:
    """A bar of a query engine's own progress (``percent()``: 0-100, negative when it does not
    know), polled on a thread while the body runs; nothing when not ``enabled``. DuckDB's own
    bar is not used: it writes to stdout, where the records go."""
    if not enabled:
        yield
        return
    import threading
    import time

    from rich.console import Console
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn("query"),
        BarColumn(),
        TextColumn("{task.percentage:>3.0f}%"),
        TimeElapsedColumn(),
        console=Console(file=sys.stderr, force_terminal=True),
        transient=True,
        auto_refresh=False,
    )
    task = progress.add_task("query", total=100)
    done = threading.Event()

    def poll() -> None:
        start, shown = time.monotonic(), False
        while not done.wait(0.2):
            if not shown and time.monotonic() - start >= _DELAY_SECONDS:
                progress.start()
                shown = True
            if shown:
                try:
                    value = percent()
                except Exception:  # the engine is between states: try again next tick
                    continue
                if value >= 0:
                    progress.update(task, completed=value)
                progress.refresh()
        if shown:
            progress.stop()

    thread = threading.Thread(target=poll, name="query-progress", daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()


@contextmanager
def count_progress(what: str, enabled: bool) -> Iterator[Callable[[int, int], None]]:
    """A bar of ``what`` done out of a total, advanced by calling the yielded
    ``progress(done, total)`` (``lake index apply``: objects indexed); the calls do nothing
    when not ``enabled``. Shown, as the read bar, only once the work has run a second."""
    if not enabled:
        yield lambda done, total: None
        return
    import time

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(
        TextColumn(what),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        console=Console(file=sys.stderr, force_terminal=True),
        transient=True,
        auto_refresh=False,
    )
    task = progress.add_task(what, total=None)
    state: dict[str, Any] = {"shown": False, "start": time.monotonic()}

    def advance(done: int, total: int) -> None:
        progress.update(task, completed=done, total=total or None)
        if not state["shown"] and time.monotonic() - state["start"] >= _DELAY_SECONDS:
            progress.start()
            state["shown"] = True
        if state["shown"]:
            progress.refresh()

    try:
        yield advance
    finally:
        if state["shown"]:
            progress.stop()
