"""The lake's error hierarchy: one root, structured and picklable.

Every error the lake raises on purpose derives from :class:`LakeError`. Where the meaning
matches a built-in (a missing object, an existing one) the built-in is mixed in too, so callers
that know nothing of the lake can still ``except FileNotFoundError``.

Two kinds of commit failure are kept apart, as pyiceberg does: :class:`CommitConflictError`
means "nothing happened; refresh and try again (or give up)", while
:class:`CommitStateUnknownError` means "the outcome is not known" and must never be retried
blindly.

Errors carry their facts as attributes and pass them to ``Exception.__init__`` in order, so
they survive pickling across process boundaries (Spark tasks, multiprocessing tests).
"""

from __future__ import annotations


class LakeError(Exception):
    """Root of every deliberate lake error. ``str(err)`` is the one-line user message."""


class UsageError(LakeError, ValueError):
    """The caller asked for something malformed (bad flag value, bad name, bad expression)."""


class InvalidNameError(UsageError):
    """A pool, branch or namespace name breaks the naming rules."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(name, reason)
        self.name = name
        self.reason = reason

    def __str__(self) -> str:
        return f"invalid name {self.name!r}: {self.reason}"


class NotFoundError(LakeError, LookupError):
    """A named thing (pool, branch, commit, object, staged id) does not exist."""

    def __init__(self, kind: str, name: str, detail: str = "") -> None:
        super().__init__(kind, name, detail)
        self.kind = kind
        self.name = name
        self.detail = detail

    def __str__(self) -> str:
        # "<name>: pool not found" — the contract's wording, with the name first.
        msg = f"{self.name}: {self.kind} not found" if self.kind else f"{self.name}: not found"
        return f"{msg} ({self.detail})" if self.detail else msg


class PoolNotFoundError(NotFoundError):
    def __init__(self, name: str, detail: str = "") -> None:
        super().__init__("pool", name, detail)


class BranchNotFoundError(NotFoundError):
    def __init__(self, name: str, detail: str = "") -> None:
        super().__init__("branch", name, detail)


class NoCommitAtTimeError(NotFoundError):
    """``--as-of`` a time before the branch's first commit (or before the branch existed)."""

    def __init__(self, branch: str, when: str) -> None:
        LakeError.__init__(self, branch, when)
        self.kind = "commit"
        self.name = branch
        self.detail = when
        self.branch = branch
        self.when = when

    def __str__(self) -> str:
        return f"no commit on {self.branch} at or before {self.when}"


class KeyTypeError(LakeError):
    """Records cannot be ordered by a key field of this type (a list, a map …); nothing was
    written."""

    def __init__(self, field: str, type_: str) -> None:
        super().__init__(field, type_)
        self.field = field
        self.type = type_

    def __str__(self) -> str:
        return (
            f"cannot order records by key field {self.field!r}: it is {self.type}; key fields "
            "must be numbers, strings, booleans, timestamps, dates, or structs of them"
        )


class AlreadyExistsError(LakeError, FileExistsError):
    """Something that must be new (a lake, a pool, a branch) already exists."""

    def __init__(self, kind: str, name: str) -> None:
        super().__init__(kind, name)
        self.kind = kind
        self.name = name

    def __str__(self) -> str:
        return f"{self.kind} {self.name!r} already exists"


class ObjectStoreError(LakeError, OSError):
    """The object store failed (I/O, permissions, network). ``key`` names the object.
    ``transient``: whether trying again later may succeed (an outage, a timeout, a throttle);
    false for what stays failing until someone acts (access denied, a full disk)."""

    def __init__(self, key: str, detail: str, *, transient: bool = True) -> None:
        super().__init__(key, detail)
        self.key = key
        self.detail = detail
        self.transient = transient

    def __str__(self) -> str:
        return f"{self.key}: {self.detail}"


class DurabilityUnknownError(ObjectStoreError):
    """The object's name exists (readers see it) but making it durable failed (the fsync of
    its directory): after a power loss it may be gone. A commit that ends this way is in an
    unknown state, never a success, however it reads back now."""


class ObjectNotFoundError(LakeError, FileNotFoundError):
    """The object store has no object under ``key``."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key

    def __str__(self) -> str:
        return f"{self.key}: no such object"


class ObjectExistsError(LakeError, FileExistsError):
    """Put-if-missing lost: an object already exists under ``key``. Nothing was written."""

    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key

    def __str__(self) -> str:
        return f"{self.key}: object already exists"


class CorruptObjectError(LakeError):
    """Lake metadata (journal entry, commit, snapshot, marker) exists but cannot be decoded."""

    def __init__(self, key: str, detail: str) -> None:
        super().__init__(key, detail)
        self.key = key
        self.detail = detail

    def __str__(self) -> str:
        return f"corrupt lake metadata {self.key}: {self.detail}"


class CorruptDataObjectError(LakeError):
    """A data object is not the one its commit recorded (size, row count, columns or checksum
    differ, or it does not decode): its rows are never returned."""

    def __init__(self, object_id: str, pool: str, detail: str) -> None:
        super().__init__(object_id, pool, detail)
        self.object_id = object_id
        self.pool = pool
        self.detail = detail

    def __str__(self) -> str:
        return f"data object {self.object_id} of pool {self.pool} is corrupt: {self.detail}"


class CommitConflictError(LakeError):
    """A commit could not be applied on the current tip; nothing was committed."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail

    def __str__(self) -> str:
        return f"commit conflict: {self.detail}"


class DuplicateKeyError(CommitConflictError):
    """A change to a unique pool (a merge, a revert) would leave two live rows with one pool
    key; nothing was committed."""


class RetriesExhaustedError(CommitConflictError):
    """Optimistic commit lost the race more times than its budget allows; nothing committed."""

    def __init__(self, what: str, attempts: int) -> None:
        LakeError.__init__(self, what, attempts)
        self.detail = f"{what}: gave up after {attempts} attempts under contention"
        self.what = what
        self.attempts = attempts


class CommitStateUnknownError(LakeError):
    """The commit may or may not have landed (e.g. the store failed mid-append). Do not retry
    blindly: re-read the branch (``pool@branch``) and look for the commit id. Nothing the
    operation wrote may be deleted while this is unresolved: the commit may be the tip."""

    def __init__(self, commit_id: str, detail: str, pool: str = "", branch: str = "") -> None:
        super().__init__(commit_id, detail, pool, branch)
        self.commit_id = commit_id
        self.detail = detail
        self.pool = pool
        self.branch = branch

    def __str__(self) -> str:
        return f"state of commit {self.commit_id} unknown: {self.detail}"


class EmptyTransactionError(LakeError):
    """The operation would change nothing; no commit was made."""

    def __init__(self, detail: str = "") -> None:
        super().__init__(detail)
        self.detail = detail

    def __str__(self) -> str:
        return f"empty transaction: {self.detail}" if self.detail else "empty transaction"


class NoRowsMatchedError(EmptyTransactionError):
    """A delete by predicate matched no row: nothing to do, no commit made. Scripts treat it
    as success (idempotent deletes); it stays an EmptyTransactionError for strict callers."""


def _names(columns: list[str] | tuple[str, ...]) -> str:
    return ", ".join(columns)


class SchemaModeError(LakeError):
    """A load into a ``strict`` pool brings columns the pool does not have."""

    def __init__(self, pool: str, columns: list[str], source: str = "") -> None:
        super().__init__(pool, columns, source)
        self.pool, self.columns, self.source = pool, columns, source

    def __str__(self) -> str:
        where = f" in {self.source}" if self.source else ""
        noun = "column" if len(self.columns) == 1 else "columns"
        return (
            f"schema mode strict: pool {self.pool} has no {noun} {_names(self.columns)}"
            f"{where}; nothing loaded (create the pool with --schema-mode merge to add columns)"
        )


def _missing_key(pool: str, key: tuple[str, ...], source: str) -> str:
    where = f" {source}" if source else " the input"
    return f"no row of{where} has the pool key {_names(key)} of pool {pool}"


class MissingKeyError(LakeError):
    """Under ``strict``: no row of a load has the pool key."""

    def __init__(self, pool: str, key: tuple[str, ...], source: str = "") -> None:
        super().__init__(pool, key, source)
        self.pool, self.key, self.source = pool, key, source

    def __str__(self) -> str:
        return f"{_missing_key(self.pool, self.key, self.source)} (schema mode strict); nothing loaded"


class LakeWarning(UserWarning):
    """Something worth telling the user that does not stop the operation."""


class MissingKeyWarning(LakeWarning):
    """No row of a load has the pool key: every row gets a null key (sorted last)."""

    def __init__(self, pool: str, key: tuple[str, ...], source: str = "") -> None:
        super().__init__(
            f"{_missing_key(pool, key, source)}: its rows are stored with a null key"
        )


class SchemaConflictError(LakeError):
    """A column arrives with a type that conflicts with the pool's accumulated schema."""

    def __init__(self, column: str, pool_type: str, new_type: str, source: str = "") -> None:
        super().__init__(column, pool_type, new_type, source)
        self.column = column
        self.pool_type = pool_type
        self.new_type = new_type
        self.source = source

    def __str__(self) -> str:
        where = f" in {self.source}" if self.source else ""
        return (
            f"schema conflict{where}: column {self.column!r} is {self.pool_type} in the pool "
            f"but {self.new_type} in the input"
        )


class MalformedInputError(LakeError, ValueError):
    """Input data could not be parsed. ``location`` is e.g. ``line 2`` or ``row 7``."""

    def __init__(self, source: str, location: str, problem: str) -> None:
        super().__init__(source, location, problem)
        self.source = source
        self.location = location
        self.problem = problem

    def __str__(self) -> str:
        where = f", {self.location}" if self.location else ""
        return f"malformed input {self.source}{where}: {self.problem}"


class HistoryVacatedError(LakeError):
    """Time travel reached history that ``vacate`` has cut."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail

    def __str__(self) -> str:
        return f"history was vacated: {self.detail}"


class LockError(LakeError):
    """A maintenance or journal lock could not be taken, or was lost while held."""

    def __init__(self, detail: str) -> None:
        super().__init__(detail)
        self.detail = detail

    def __str__(self) -> str:
        return f"lock error: {self.detail}"


class LockTimeoutError(LockError):
    """The lock was not free within ``timeout`` seconds. ``holder`` is the holder's identifier
    (``user@host:pid``) when the provider knows it, else ``""``."""

    def __init__(self, lock: str, timeout: float, holder: str = "") -> None:
        LakeError.__init__(self, lock, timeout, holder)
        who = f"held by {holder}" if holder else "holder unknown"
        self.detail = f"{lock} not acquired within {timeout:g}s ({who})"
        self.lock = lock
        self.timeout = timeout
        self.holder = holder


class LockLostError(LockError):
    """A lock held by this process can no longer be trusted (ZooKeeper session suspended or
    expired, lock file replaced, lock released). The operation must abort before committing."""

    def __init__(self, lock: str, reason: str) -> None:
        LakeError.__init__(self, lock, reason)
        self.detail = f"{lock} lost: {reason}"
        self.lock = lock
        self.reason = reason


class LockServiceUnavailableError(LockError):
    """The lock service (ZooKeeper) cannot be reached. Never answered by falling back to
    local locks: they would not exclude processes on other machines."""

    def __init__(self, hosts: str, reason: str) -> None:
        LakeError.__init__(self, hosts, reason)
        self.detail = f"ZooKeeper at {hosts} cannot be reached: {reason}"
        self.hosts = hosts
        self.reason = reason


class CatalogConflictError(CommitConflictError):
    """A catalog transaction changes an object (pool, namespace, view, index rule) that a
    concurrent catalog commit changed or dropped; nothing was committed."""


class NotEmptyError(LakeError):
    """A container (a catalog namespace) still holds objects and cannot be dropped."""

    def __init__(self, kind: str, name: str, detail: str = "") -> None:
        super().__init__(kind, name, detail)
        self.kind = kind
        self.name = name
        self.detail = detail

    def __str__(self) -> str:
        msg = f"{self.kind} {self.name!r} is not empty"
        return f"{msg}: {self.detail}" if self.detail else msg


class PurgedObjectError(LakeError):
    """A snapshot names a data object that is no longer in the store: deleted by ``lake purge``
    of ``commit_id`` (when a purge record names it), else removed by cleanup or lost."""

    def __init__(self, object_id: str, commit_id: str | None = None) -> None:
        super().__init__(object_id, commit_id)
        self.object_id = object_id
        self.commit_id = commit_id

    def __str__(self) -> str:
        if self.commit_id:
            return (
                f"data object {self.object_id} was purged (lake purge of commit {self.commit_id})"
            )
        return f"data object {self.object_id} is missing (removed by cleanup or lost)"


class WriteWindowExpiredError(CommitConflictError):
    """A writer reached its commit point more than the write window after it began writing
    objects. Cleanup may already treat such objects as orphans (see
    :mod:`lake_core.inflight`), so the commit is refused; nothing was committed."""

    def __init__(self, started: str, window: str) -> None:
        LakeError.__init__(self, started, window)
        self.started = started
        self.window = window
        self.detail = (
            f"this write began at {started}, more than {window} ago; its objects may already "
            "count as orphans, so it was not committed (run it again)"
        )


class TxnCommittedError(LakeError):
    """The application transaction (``app``, ``version``) is already committed on the branch
    (it records ``recorded`` for ``app``): nothing was committed now (see
    :mod:`lake_core.txn`). Not a failure for a retried or racing writer: its work is in."""

    def __init__(self, app: str, version: int, recorded: int) -> None:
        super().__init__(app, version, recorded)
        self.app = app
        self.version = version
        self.recorded = recorded

    def __str__(self) -> str:
        return (
            f"transaction {self.app!r} version {self.version} is already committed "
            f"(the branch records version {self.recorded}); nothing was committed"
        )


class LossyRewriteError(LakeError):
    """Rewriting an object would change a stored value: its ``column`` holds ``stored`` values
    (int64 beyond 2**53) that the pool's ``pool_type`` (float64) cannot hold exactly. Reads
    round them (the type rules), but a rewrite (compaction, revert or merge by rows) must keep
    rows as they are, so it stops; nothing is committed."""

    def __init__(self, column: str, stored: str, pool_type: str) -> None:
        super().__init__(column, stored, pool_type)
        self.column = column
        self.stored = stored
        self.pool_type = pool_type

    def __str__(self) -> str:
        return (
            f"column {self.column!r} holds {self.stored} values that the pool's {self.pool_type} "
            "cannot hold exactly; rewriting its objects would change them, so nothing was "
            "committed"
        )


class NotServedError(LakeError):
    """An operation the lake service does not offer; run it beside the lake instead.
    ``method``: ``what`` is the Python name of the method asked for (``Pool.verify``), which a
    face may replace with its own name for the operation (:meth:`naming`)."""

    def __init__(self, what: str, *, method: bool = False) -> None:
        super().__init__(what)
        self.what = what
        self.method = method

    def naming(self, what: str) -> NotServedError:
        """The same refusal, the operation called ``what`` (``lake verify``)."""
        return NotServedError(what)

    def __str__(self) -> str:
        return (
            f"{self.what} is not available through the lake service; run it with --lake set "
            "to the lake's own location (docs/service.md lists what the service serves)"
        )
