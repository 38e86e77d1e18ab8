"""Landing zones: a folder or an S3 prefix where producers drop files for a pool, and the two
rules that make ingesting them safe: when a landed file is complete, and that each is
committed once.

Conventions producers follow (docs/orchestration.md): files are immutable once complete; names
starting with ``.`` or ``_`` are ignored (write under such a name, then rename); only the
zone's formats are taken (by extension); in a day-partitioned pool a file belongs to the day
its path names (``2013-01-05/part-1.csv`` or ``flights-2013-01-05.csv``).

Stability (:func:`look`): a file is complete once two consecutive looks at the zone agree on
its size and modification time, so a file still being written waits. What a watcher remembers
between looks is a :class:`WatchState` (JSON; a scheduler keeps it as its cursor). It records
files, never wall-clock time: a clock or an upload that preserves old modification times would
make a time cursor skip files.

Idempotency (:func:`ingest_once`): each landing file is one application transaction
(:mod:`lake_core.txn`), app id ``landing:<zone>/<path>``, version 0. A load of several files
records all of theirs in its commit, so a retried or racing run of the same files commits
nothing for them: exactly one commit holds each file, whatever runs at once. Records expire
after the pool's ``txn_retention``; a file older than that may be an ingested one whose record
expired, so a run over a whole zone leaves it (:func:`split_by_retention`) and it must be named.
"""

from __future__ import annotations

import io
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import PurePosixPath
from typing import Any

from lake_core.commit import Commit
from lake_core.errors import TxnCommittedError
from lake_core.ingest.formats import format_from_name
from lake_core.pool import MAIN, Pool
from lake_core.stores.base import ObjectStore
from lake_core.txn import Txn, pending

_DAY = re.compile(r"(?<!\d)(\d{4}-\d{2}-\d{2})(?!\d)")
WATCH_STATE_VERSION = 1
#: Version of every landing file's transaction: a path is committed once (files are immutable).
LANDING_TXN_VERSION = 0
#: The commit ``meta`` key that records which landing files a commit ingested (for people:
#: the transactions are what decides).
LANDING_META = "landing"


@dataclass(frozen=True)
class LandingFile:
    """One file of a landing zone: ``path`` relative to the zone."""

    path: str
    size: int
    mtime: float

    @property
    def day(self) -> str | None:
        """The last ``YYYY-MM-DD`` in the path (the file's daily partition), or None."""
        days = _DAY.findall(self.path)
        return days[-1] if days else None


def is_candidate(path: str, formats: Iterable[str]) -> bool:
    """A file to take: not hidden or in-progress, in one of ``formats``."""
    parts = PurePosixPath(path).parts
    if any(p.startswith((".", "_")) for p in parts):
        return False
    fmt = format_from_name(path)
    return fmt is not None and fmt in set(formats)


#: Slack between a landing store's modification times and the lake's clock.
RETENTION_MARGIN = timedelta(days=1)


def split_by_retention(
    files: Iterable[LandingFile], retention: timedelta | None, now: datetime
) -> tuple[list[LandingFile], list[LandingFile]]:
    """``(recent, old)``: ``old`` are the files modified longer than ``retention`` (less
    RETENTION_MARGIN) before ``now``. A transaction record is dated by its commit, which is
    after the file's modification, so a recent file's record, if any, has not expired; an old
    file may have been ingested and its record expired (:mod:`lake_core.txn`, "Expiry") —
    nothing tells it apart from a new one. A run over a whole zone takes only the recent
    ones; old files must be named. ``retention`` None: nothing is old."""
    out = list(files)
    if retention is None:
        return out, []
    cutoff = (now - retention + RETENTION_MARGIN).timestamp()
    return [f for f in out if f.mtime >= cutoff], [f for f in out if f.mtime < cutoff]


def files_by_day(files: Iterable[LandingFile]) -> dict[str, list[LandingFile]]:
    """Files grouped by the day their path names (files naming none are left out)."""
    out: dict[str, list[LandingFile]] = {}
    for f in files:
        if f.day is not None:
            out.setdefault(f.day, []).append(f)
    return out


class LandingZone:
    """The files under one landing location (``location``: its URI), read through a store."""

    def __init__(self, location: str, store: ObjectStore, formats: Iterable[str]) -> None:
        self.location = location
        self.store = store
        self.formats = tuple(formats)

    def __repr__(self) -> str:
        return f"LandingZone({self.location!r})"

    def files(self) -> list[LandingFile]:
        """Candidate files, sorted by path."""
        out = [
            LandingFile(i.key, i.size, i.mtime)
            for i in self.store.list("")
            if is_candidate(i.key, self.formats)
        ]
        return sorted(out, key=lambda f: f.path)

    def source(self, path: str) -> Any:
        """``path`` as a load source: the local file itself, or the object's bytes (named, so
        its format is detected from the extension and errors name the file)."""
        local = self.store.local_path(path)
        if local is not None:
            return local
        stream: Any = io.BytesIO(self.store.get(path))
        stream.name = self.uri(path)
        return stream

    def uri(self, path: str) -> str:
        return f"{self.location}/{path}"

    def txn(self, path: str) -> Txn:
        """The transaction that ingesting ``path`` is."""
        return Txn(f"landing:{self.uri(path)}", LANDING_TXN_VERSION)

    def pending(self, pool: Pool, paths: Iterable[str], branch: str = MAIN) -> list[str]:
        """Those of ``paths`` (deduplicated, in order) that ``branch`` holds no commit of."""
        wanted = list(dict.fromkeys(paths))
        recorded = pool.snapshot(pool.tip(branch)).txns
        left = {t.app for t in pending(recorded, [self.txn(p) for p in wanted])}
        return [p for p in wanted if self.txn(p).app in left]

    def meta(self, paths: Sequence[str]) -> dict[str, Any]:
        """What a commit of ``paths`` records under ``meta.landing``."""
        return {"location": self.location, "files": list(paths)}


#: Loads ``paths`` of a zone as one commit recording ``txns`` (the engine's load), or returns
#: None when the files change nothing and no commit records them (an upsert with ``txns``
#: always commits, recording them even when its rows only delete keys that are not live).
Loader = Callable[[Sequence[str], Sequence[Txn]], Commit | None]


@dataclass(frozen=True)
class Ingested:
    """What :func:`ingest_once` did: ``commits`` it made (usually one) with the files each
    holds, ``skipped``: files another commit holds already, and ``unchanged``: files whose
    load changed nothing and committed nothing — no commit records their transactions, so a
    later run takes them again."""

    commits: list[tuple[Commit, list[str]]] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)

    @property
    def files(self) -> list[str]:
        return [f for _, fs in self.commits for f in fs]


def ingest_once(
    pool: Pool, zone: LandingZone, paths: Iterable[str], load: Loader, branch: str = MAIN
) -> Ingested:
    """Commit each of ``paths`` exactly once on ``branch``: the files no commit holds yet go
    into one commit through ``load`` with their transactions. When a racing writer commits
    some of them first, the load commits nothing (TxnCommittedError) and the files still left
    are loaded again, so every file ends in exactly one commit. Bounded: each retry follows a
    commit that took at least one of the files."""
    wanted = list(dict.fromkeys(paths))
    todo = zone.pending(pool, wanted, branch)
    skipped = [p for p in wanted if p not in set(todo)]
    made: list[tuple[Commit, list[str]]] = []
    unchanged: list[str] = []
    while todo:
        try:
            commit = load(todo, [zone.txn(p) for p in todo])
            if commit is None:
                unchanged = todo
            else:
                made.append((commit, todo))
            break
        except TxnCommittedError:
            left = zone.pending(pool, todo, branch)
            if len(left) == len(todo):
                raise  # not a race on these files: refuse rather than loop
            skipped += [p for p in todo if p not in set(left)]
            todo = left
    return Ingested(made, skipped, unchanged)


# -- stability --------------------------------------------------------------------------------


@dataclass(frozen=True)
class WatchState:
    """What a watcher remembers between two looks at a zone: ``taken`` (path -> size) of every
    file already handed out (files that left the zone are forgotten, so it follows the zone's
    contents, not its history), and ``looked`` (path -> (size, mtime)) of files seen at the
    previous look and not taken yet."""

    taken: Mapping[str, int] = field(default_factory=dict)
    looked: Mapping[str, tuple[int, float]] = field(default_factory=dict)

    def to_text(self) -> str:
        looked = {p: [s, m] for p, (s, m) in self.looked.items()}
        doc = {"v": WATCH_STATE_VERSION, "seen": dict(self.taken), "look": looked}
        return json.dumps(doc, sort_keys=True)

    @classmethod
    def from_text(cls, text: str | None) -> WatchState:
        if not text:
            return cls()
        doc = json.loads(text)
        looked = {str(p): (int(v[0]), float(v[1])) for p, v in doc.get("look", {}).items()}
        return cls({str(p): int(s) for p, s in doc.get("seen", {}).items()}, looked)


@dataclass(frozen=True)
class Look:
    """One look at a zone: ``fresh`` files (new, or changed since taken), those of them that
    are ``stable`` (complete: the previous look saw the same size and modification time), and
    those still ``settling``."""

    files: list[LandingFile]
    fresh: list[LandingFile]
    stable: list[LandingFile]

    @property
    def settling(self) -> list[LandingFile]:
        ok = set(self.stable)
        return [f for f in self.fresh if f not in ok]

    def next_state(self, state: WatchState, taken: Iterable[LandingFile]) -> WatchState:
        """The state after handing out ``taken``: files gone from the zone are forgotten, and
        every file not taken is remembered as looked at now."""
        now = {f.path for f in self.files}
        kept = {p: s for p, s in state.taken.items() if p in now}
        kept.update({f.path: f.size for f in taken})
        looked = {f.path: (f.size, f.mtime) for f in self.files if kept.get(f.path) != f.size}
        return WatchState(kept, looked)


def look(files: Sequence[LandingFile], state: WatchState) -> Look:
    """Pure: which of ``files`` are new and which of those are complete, given ``state``."""
    fresh = [f for f in files if state.taken.get(f.path) != f.size]
    stable = [f for f in fresh if state.looked.get(f.path) == (f.size, f.mtime)]
    return Look(list(files), fresh, stable)
