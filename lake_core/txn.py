"""Application transactions: exactly-once writes by an (app id, version) recorded in the commit,
as Delta Lake's ``txn`` action does.

A writer that must not commit the same work twice (a retried ingest run, two schedulers
racing, a stream replaying its last batch) names the work ``Txn(app, version)``. The commit
that lands it records ``"txn": [{"app": APP, "version": N}, ...]`` in its fields, and the
branch's snapshot keeps, per app id, the highest version committed (``Snapshot.txns``).

Invariants:

- A commit carrying ``Txn(app, v)`` lands only if the parent it lands on records a version
  below ``v`` for ``app`` (or none). The check runs against *that* parent, at every attempt of
  the optimistic commit (``Pool.commit``): of two processes committing the same (app, version)
  at once, the one that loses the journal append re-reads the branch, finds the version
  recorded and raises :class:`~lake_core.errors.TxnCommittedError`; its objects are discarded.
  Exactly one commit lands.
- Versions only go up per app id and branch: once version N is in, N and anything below it
  are "committed". An app that can finish work out of order uses one app id per unit of work
  (the landing zones do: one app id per landing file, see :mod:`lake_core.landing`).
- The recorded versions live in the snapshot, so asking (:meth:`Pool.last_txn`) costs one
  snapshot open, and survives compaction and vacate (both carry the snapshot forward).
- A merge brings the source's changes since the merge base, so it records the transactions
  the source recorded since that base (git-like; the higher version per app id wins, never
  refused): a file ingested on a branch and merged is not ingested again on the target.
- A revert takes a commit's rows out but leaves its transactions recorded (as Delta does): the
  same work is not committed again by its app id; reloading it takes a new app id/version.

Expiry (Delta's ``delta.setTransactionRetentionDuration``). Each recorded app id keeps the
date of the commit that recorded its version (``Snapshot.txn_dates``). When a commit rebuilds
the map — one that records transactions, or one that caches its snapshot (every
:data:`~lake_core.commit.SNAPSHOT_INTERVAL` commits) — ids whose date is older than the
pool's retention (``PoolConfig.txn_retention``, default :data:`DEFAULT_TXN_RETENTION`; None
keeps them forever) *before that commit's date* are dropped. The commit's date, not the
reader's clock, is the reference, so a commit's snapshot is the same however it is built
(from a cached snapshot or by replay). Other commits share the parent's map as it is (no
copy). Consequences, as in Delta: an expired transaction can be committed again (its rows
land twice), so a writer must not replay work older than the retention — landing zones cover
that window by archiving landed files and by the sensor's cursor. Records written before
dates existed (undated) take the date of the next commit that rebuilds the map. A changed
retention applies from the next commit that rebuilds the map; cached snapshots keep what they
dropped already.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from types import MappingProxyType
from typing import Any

from lake_core.errors import TxnCommittedError, UsageError

#: The commit field that records a commit's application transactions.
TXN_FIELD = "txn"
#: How long a recorded transaction is remembered unless the pool says otherwise (Delta's
#: default ``delta.setTransactionRetentionDuration`` is unset, i.e. forever; 30 days bounds
#: the snapshots of a pool that ingests one transaction per landing file).
DEFAULT_TXN_RETENTION = timedelta(days=30)


@dataclass(frozen=True)
class Txn:
    """One unit of an application's work: ``app`` names the application (and stream), and
    ``version`` (>= 0) the unit; units commit in increasing versions."""

    app: str
    version: int

    def __post_init__(self) -> None:
        if not self.app:
            raise UsageError("a transaction needs an app id")
        if not isinstance(self.version, int) or self.version < 0:
            raise UsageError(f"transaction version must be an integer >= 0, not {self.version!r}")

    def to_json(self) -> dict[str, Any]:
        return {"app": self.app, "version": self.version}

    @classmethod
    def from_json(cls, doc: Mapping[str, Any]) -> Txn:
        return cls(str(doc["app"]), int(doc["version"]))


def as_txns(txn: Txn | Sequence[Txn] | None) -> tuple[Txn, ...]:
    """One or several transactions as a tuple; UsageError when an app id repeats."""
    if txn is None:
        return ()
    out = (txn,) if isinstance(txn, Txn) else tuple(txn)
    apps = [t.app for t in out]
    if len(set(apps)) < len(apps):
        raise UsageError("a commit records one version per app id")
    return out


def encode_txns(txns: Iterable[Txn]) -> list[dict[str, Any]]:
    return [t.to_json() for t in txns]


def commit_txns(fields: Mapping[str, Any]) -> tuple[Txn, ...]:
    """The transactions a commit's fields (``Commit.extra``) record."""
    raw = fields.get(TXN_FIELD)
    if not raw:
        return ()
    return tuple(Txn.from_json(d) for d in raw)


def check_txns(recorded: Mapping[str, int], txns: Iterable[Txn]) -> None:
    """Raise TxnCommittedError when any of ``txns`` is committed by ``recorded`` (a snapshot's
    app id -> highest version)."""
    for t in txns:
        last = recorded.get(t.app)
        if last is not None and t.version <= last:
            raise TxnCommittedError(t.app, t.version, last)


def pending(recorded: Mapping[str, int], txns: Iterable[Txn]) -> list[Txn]:
    """Those of ``txns`` that ``recorded`` does not hold yet, in order."""
    out = []
    for t in txns:
        last = recorded.get(t.app)
        if last is None or t.version > last:
            out.append(t)
    return out


def apply_txns(
    recorded: Mapping[str, int],
    dates: Mapping[str, datetime],
    fields: Mapping[str, Any],
    date: datetime,
    *,
    rebuild: bool = False,
    retention: timedelta | None = None,
) -> tuple[Mapping[str, int], Mapping[str, datetime]]:
    """``(recorded, dates)`` after a commit dated ``date`` with ``fields``: each app id at its
    highest version, dated by the commit that recorded that version.

    Unless the commit records transactions or ``rebuild`` is set (the commit caches its
    snapshot), the very same mappings come back: nothing is copied. Otherwise undated ids
    (snapshots from before dates) take ``date``, and with ``retention``, ids dated before
    ``date - retention`` are dropped."""
    txns = commit_txns(fields)
    if not txns and not rebuild:
        return recorded, dates
    out = dict(recorded)
    when = {app: dates.get(app, date) for app in out}
    for t in txns:
        if t.version > out.get(t.app, -1):
            out[t.app] = t.version
            when[t.app] = date
    if retention is not None:
        cutoff = date - retention
        for app in [a for a, d in when.items() if d < cutoff]:
            del out[app], when[app]
    return MappingProxyType(out), MappingProxyType(when)
