"""A numbered, append-only journal of a small mutable table (name → JSON value).

Used for a pool's branches (branch name → tip commit; plus vacate tails, see pool.py).

Files under ``<dir>/`` (named by :class:`~lake_core.layout.JournalLayout`): entries ``1.json`` … ``N.json``, each immutable once written; ``HEAD``
(a hint: decimal N, maybe stale) and ``TAIL`` (the first entry kept; 1 until vacate moves it).

Each entry holds the whole table after its actions, plus the actions and a timestamp, so the
table at any entry costs one read, and "the table as of time T" is a binary search over entries
(timestamps are made monotonic by the writers: an entry's time is never before its
predecessor's).

Appends are lock-free: a writer that has read entry N writes N+1 with put-if-missing. Exactly one
writer wins each number; the losers re-read and try again. HEAD is written after the append
with a plain put (on local disk only after every 8th entry), so it may lag (or even go back)
under races; readers therefore treat it as a hint and probe forward (N+1, N+2, …) until an
entry is missing. A writer that dies between the
append and the HEAD update leaves a committed entry that the next reader finds by probing.

A journal object remembers the last entry it read or appended (entries are immutable), so the
next :meth:`Journal.read_head` starts there: it reads TAIL and probes forward, instead of
reading HEAD, TAIL and the entry it already holds. TAIL is read because cleanup deletes entries
below TAIL-1: if TAIL moved past the remembered entry, the remembered entry's successor may
have been deleted, not never written, and the read starts from HEAD again.

A writer may skip even that read (:meth:`Journal.fresh_head`): it appends N+1 right after the
entry N it last saw as the head, if it saw it less than :data:`TRUST_HEAD_FOR` ago, and the
put-if-missing is the check — taken means someone appended meanwhile (the writer re-reads and
retries, as after any lost race). What makes this sound is that N+1, had it been written and
then deleted, would have to be a vacated entry: cleanup deletes an entry below TAIL-1 only once
its time is older than ``cleanup.VACATED_ENTRY_AGE`` (24 h), and an N+1 written after the
writer saw N absent is younger than TRUST_HEAD_FOR, plus the seconds from that check to the
put, plus the writers' clock skew. "Saw N absent" counts only from the walk of
:meth:`Journal.read_head` (TAIL read after the probe) and from this object's own appends, on
both the monotonic and the wall clock (see :class:`Mark`). So a put of N+1 that succeeds lands
right after the real head, never into deleted history.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass
from datetime import datetime
from types import MappingProxyType
from typing import Any, overload

from lake_core.clock import SYSTEM_CLOCK, Clock, parse_iso, to_iso
from lake_core.codec import decode_doc, encode_doc
from lake_core.errors import (
    CorruptObjectError,
    DurabilityUnknownError,
    HistoryVacatedError,
    ObjectExistsError,
    ObjectNotFoundError,
    ObjectStoreError,
)
from lake_core.layout import JournalLayout
from lake_core.stores.base import ObjectStore, SyncBatch

#: On local disk HEAD is rewritten after every this many entries (see ``Journal``).
LOCAL_HEAD_EVERY = 8
JOURNAL_FORMAT = "lakepool.journal"
JOURNAL_VERSION = 1
#: How many entries a handle walks forward from the last entry it saw before it reads the HEAD
#: hint instead: a handle far behind pays one GET for HEAD, not one per entry it missed.
WALK_LIMIT = 4
#: Seconds a handle trusts the head it saw to append after it without reading the journal
#: first (see the module docstring): far below the minimum orphan age. Measured on both the
#: monotonic clock and the wall clock (the monotonic one stops while the machine sleeps).
TRUST_HEAD_FOR = 600.0
#: Seconds after a refused append without a read during which the handle reads first: other
#: writers are committing to this journal, and a first try would mostly lose.
CONTENDED_FOR = 10.0


@dataclass(frozen=True)
class Mark:
    """When something was seen, on the monotonic and the wall clock (see ``fresh_head``)."""

    monotonic: float
    wall: float

    @staticmethod
    def now() -> Mark:
        return Mark(time.monotonic(), time.time())

    def within(self, seconds: float) -> bool:
        """Less than ``seconds`` ago on both clocks (a wall clock set back counts as long)."""
        return (
            time.monotonic() - self.monotonic < seconds and 0 <= time.time() - self.wall < seconds
        )


#: Never trusted: a head found without reading TAIL after the probe (``Journal.read_head``).
_UNTRUSTED = Mark(float("-inf"), float("-inf"))


@dataclass(frozen=True)
class JournalEntry:
    """Entry ``n`` (0 is the empty journal): the table after it, its actions, its time."""

    n: int
    ts: datetime | None
    state: Mapping[str, Any]
    actions: tuple[dict[str, Any], ...] = ()


def apply_actions(state: Mapping[str, Any], actions: list[dict[str, Any]]) -> dict[str, Any]:
    """Pure: the table after ``actions`` (``{"op": "set", "name", "value"}`` or ``delete``)."""
    out = dict(state)
    for a in actions:
        if a["op"] == "set":
            out[a["name"]] = a["value"]
        elif a["op"] == "delete":
            out.pop(a["name"], None)
        else:
            raise ValueError(f"unknown journal action {a['op']!r}")
    return out


class Journal:
    """One journal in ``store``, its files named by ``layout`` (a pool's is
    ``PoolLayout.journal``)."""

    def __init__(
        self,
        store: ObjectStore,
        layout: JournalLayout,
        clock: Clock = SYSTEM_CLOCK,
        append_lock: Callable[[], AbstractContextManager[Any]] | None = None,
    ) -> None:
        self.store = store
        self.layout = layout
        self.clock = clock
        #: For a store without conditional writes: a lock (Zed's third strategy) held around
        #: "is N+1 free? write it", which put-if-missing otherwise does atomically.
        self.append_lock = append_lock
        #: HEAD is rewritten after every entry on a remote store (a probe there is a round
        #: trip), every LOCAL_HEAD_EVERY-th on local disk: a probe is a failed open, while a
        #: HEAD rewrite is a create and a rename in the journal directory, which wait on the
        #: file system's journal behind the commit's fsyncs.
        self._head_every = LOCAL_HEAD_EVERY if store.local_path(layout.head) else 1
        #: The newest entry this object read or wrote (see the module docstring), and when
        #: entry ``_last.n + 1`` was known not to exist (nor to have been deleted).
        self._last: JournalEntry | None = None
        self._last_at = _UNTRUSTED
        #: When ``_last`` was last seen to be the head, trusted or not (for ``recent``).
        self._seen_at = _UNTRUSTED
        self._refused_at: Mark | None = None
        self._last_lock = threading.Lock()

    def _note(self, entry: JournalEntry, seen_at: Mark, trusted: bool = True) -> JournalEntry:
        """Remember ``entry`` as the head at ``seen_at`` (taken before the read or the append
        that showed it). ``trusted``: no entry after it existed then, and none had been
        deleted (see the module docstring); else it is only a recent sighting."""
        with self._last_lock:
            if self._last is None or entry.n > self._last.n:
                self._last, self._seen_at = entry, seen_at
                self._last_at = seen_at if trusted else _UNTRUSTED
            elif entry.n == self._last.n:
                if seen_at.monotonic > self._seen_at.monotonic:
                    self._seen_at = seen_at
                if trusted and seen_at.monotonic > self._last_at.monotonic:
                    self._last_at = seen_at
        return entry

    def note_head(self, entry: JournalEntry, seen_at: Mark) -> None:
        """Remember ``entry``, found by reading it back, as appended by this object: a retried
        append whose first try landed (``seen_at`` taken before the append started)."""
        self._note(entry, seen_at)

    def note_refused(self) -> None:
        """An append after :meth:`fresh_head` was refused (another writer came first): read
        before appending for the next :data:`CONTENDED_FOR` seconds."""
        with self._last_lock:
            self._refused_at = Mark.now()

    def last_known(self) -> JournalEntry | None:
        """The newest entry this object has seen, read from nothing: it may be stale. For
        pre-checks that the commit point re-checks against the real head."""
        return self._last

    def recent(self, seconds: float = TRUST_HEAD_FOR) -> JournalEntry | None:
        """:meth:`last_known` if it was seen to be the head less than ``seconds`` ago."""
        with self._last_lock:
            return self._last if self._seen_at.within(seconds) else None

    def fresh_head(self) -> JournalEntry | None:
        """The head this object saw less than :data:`TRUST_HEAD_FOR` ago, or None: an
        :meth:`append` after it needs no read first (its put-if-missing fails if another
        entry came meanwhile; see the module docstring). None too while other writers were
        seen committing lately (:meth:`note_refused`)."""
        with self._last_lock:
            if self._refused_at is not None and self._refused_at.within(CONTENDED_FOR):
                return None
            if self._last is not None and self._last_at.within(TRUST_HEAD_FOR):
                return self._last
        return None

    # -- reading ------------------------------------------------------------------------------

    def _read_int_hint(self, key: str, default: int) -> int:
        try:
            text = self.store.get(key).decode("ascii").strip()
            return int(text) if text else default
        except ObjectNotFoundError:
            return default
        except (UnicodeDecodeError, ValueError):
            return default  # a torn or garbled hint is just a bad hint: probe instead

    def read_tail(self) -> int:
        """The first retained entry (1 unless history was vacated)."""
        return max(1, self._read_int_hint(self.layout.tail, 1))

    def read_entry(self, n: int) -> JournalEntry:
        """Entry ``n``. Raises ObjectNotFoundError if it does not exist."""
        if n == 0:
            return JournalEntry(0, None, MappingProxyType({}))
        key = self.layout.entry(n)
        doc = decode_doc(key, self.store.get(key), JOURNAL_FORMAT, JOURNAL_VERSION)
        try:
            if int(doc["n"]) != n:
                raise CorruptObjectError(key, f"entry says it is number {doc['n']}")
            state = doc["state"]
            if not isinstance(state, dict):
                raise CorruptObjectError(key, "state is not an object")
            return JournalEntry(
                n, parse_iso(doc["ts"]), MappingProxyType(state), tuple(doc.get("actions", []))
            )
        except CorruptObjectError:
            raise
        except (KeyError, TypeError, ValueError) as e:
            raise CorruptObjectError(key, f"malformed journal entry ({type(e).__name__})") from None

    def read_head(self) -> JournalEntry:
        """The last entry: start at the HEAD hint (or the last entry this object saw) and
        probe forward past a stale one."""
        started = Mark.now()
        known = self._last
        if known is not None:
            found = self._probe_from(known, limit=WALK_LIMIT)
            # TAIL is read *after* the walk: entries from TAIL-1 on are never deleted and TAIL
            # only grows, so if found.n + 1 >= TAIL - 1 now, the missing found.n + 1 was never
            # written (not vacated and cleaned up while we walked): found is the head.
            if found is not None and self.read_tail() <= found.n + 2:
                return self._note(found, started)
            # Walked too far (a handle far behind: HEAD is one GET away) or history moved on.
        tail = self.read_tail()
        # Entries below TAIL may be gone (vacated and cleaned up); entry TAIL never is.
        hint = max(self._read_int_hint(self.layout.head, 0), tail if tail > 1 else 0)
        entry = JournalEntry(0, None, MappingProxyType({}))
        if hint > 0:
            try:
                entry = self.read_entry(hint)
            except ObjectNotFoundError:
                if tail > 1:
                    entry = self.read_entry(tail)
        # Not trusted for fresh_head: TAIL was read before the probe, so an old entry after
        # ``entry`` vacated and deleted meanwhile would pass for never written. The next
        # commit reads the journal (the walk above, TAIL read after it) and trusts that.
        return self._note(self._probe_from(entry), started, trusted=False)

    @overload
    def _probe_from(self, entry: JournalEntry) -> JournalEntry: ...

    @overload
    def _probe_from(self, entry: JournalEntry, limit: int) -> JournalEntry | None: ...

    def _probe_from(self, entry: JournalEntry, limit: int | None = None) -> JournalEntry | None:
        """The last entry from ``entry`` on, probing one number at a time; None when more
        than ``limit`` entries were found (the caller reads HEAD instead of walking on)."""
        steps = 0
        while True:
            try:
                entry = self.read_entry(entry.n + 1)
            except ObjectNotFoundError:
                return entry
            steps += 1
            if limit is not None and steps > limit:
                return None

    def entry_as_of(self, when: datetime) -> JournalEntry:
        """The last entry written at or before ``when``. Raises HistoryVacatedError if that
        lies before the tail, or NotFound-like empty entry 0 before the first entry."""
        head = self.read_head()
        tail = self.read_tail()
        if head.n == 0:
            return head
        if head.ts is not None and head.ts <= when:
            return head
        lo, hi = tail, head.n  # invariant: entries > hi are after `when`
        first = self.read_entry(tail)
        if first.ts is not None and first.ts > when:
            if tail > 1:
                raise HistoryVacatedError(
                    f"{to_iso(when)} is before the oldest retained history ({to_iso(first.ts)})"
                )
            return JournalEntry(0, None, MappingProxyType({}))
        found = first
        while lo < hi:
            mid = (lo + hi + 1) // 2
            e = self.read_entry(mid)
            if e.ts is not None and e.ts <= when:
                found, lo = e, mid
            else:
                hi = mid - 1
        return found if found.n == lo else self.read_entry(lo)

    # -- writing ------------------------------------------------------------------------------

    def _put_entry(self, key: str, data: bytes, after: SyncBatch | None) -> None:
        """Put-if-missing of an entry whose bytes are ours alone (the nonce). A failure that
        leaves the outcome open is settled by reading the entry back where possible: our
        bytes → it landed; other bytes → ObjectExistsError (another writer took the number,
        so ours never can land); missing or unreadable → the original error (unknown)."""
        try:
            self.store.put_if_missing_idempotent(key, data, after)
        except (ObjectExistsError, DurabilityUnknownError):
            raise  # a durability failure is not settled by reading our bytes back
        except ObjectStoreError as e:
            try:
                existing = self.store.get(key)
            except (ObjectNotFoundError, ObjectStoreError):
                raise e from None
            if existing != data:
                raise ObjectExistsError(key) from None

    def append(
        self,
        after: JournalEntry,
        actions: list[dict[str, Any]],
        at: datetime | None = None,
        durable_first: SyncBatch | None = None,
    ) -> JournalEntry:
        """Write entry ``after.n + 1`` with put-if-missing; return it. ``at`` is the entry's
        time (default now; a commit passes its own date so ``--as-of <commit date>`` finds it),
        raised to the previous entry's time if earlier.

        Raises ObjectExistsError when another writer took that number first (nothing was
        written: re-read and retry; our own first try of a retried request counts as
        success), ObjectStoreError on failure — then the entry may or may not have landed.

        ``durable_first``: objects written without fsync that the entry names (the commit's
        data and commit objects): made durable before the entry's name exists
        (:meth:`~lake_core.stores.base.ObjectStore.put_if_missing_after`)."""
        n = after.n + 1
        now = at or self.clock.now()
        if after.ts is not None and now < after.ts:
            now = after.ts  # keep journal time monotonic under clock skew
        state = apply_actions(after.state, actions)
        # The nonce makes the entry's bytes this append's alone, so a 412 on a retried request
        # whose first try landed is recognised by reading the entry back (see
        # ObjectStore.put_if_missing_idempotent). Readers ignore it.
        data = encode_doc(
            JOURNAL_FORMAT,
            JOURNAL_VERSION,
            {
                "n": n,
                "ts": to_iso(now),
                "actions": actions,
                "state": state,
                "nonce": uuid.uuid4().hex,
            },
        )
        started = Mark.now()  # entry n + 1 cannot exist before ours does
        if self.append_lock is None:
            self._put_entry(self.layout.entry(n), data, durable_first)
        else:
            if durable_first:
                self.store.sync(durable_first)
            with self.append_lock() as held:
                if self.store.exists(self.layout.entry(n)):
                    raise ObjectExistsError(self.layout.entry(n))
                check = getattr(held, "check", None)
                if check is not None:
                    check()  # a lost lock must not write
                self.store.put(self.layout.entry(n), data)
        entry = self._note(JournalEntry(n, now, MappingProxyType(state), tuple(actions)), started)
        if n % self._head_every:
            return entry  # readers probe the few entries past the hint
        try:
            self.store.put_hint(self.layout.head, str(n).encode("ascii"))
        except Exception:  # noqa: BLE001 - HEAD is a hint; readers probe past a stale one
            pass
        return entry
