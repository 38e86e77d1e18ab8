"""The lake service's wire protocol, shared by the server (:mod:`lake_service`) and the client
(:mod:`lake_core.remote.client`): route prefix, media types, HTTP statuses of lake errors, and
how an error crosses the wire.

Invariants:
- Every error response is JSON ``{"error": MESSAGE, "type": NAME, "args": [...], "attrs": {...}}``;
  ``error`` alone is the contract for other clients, the rest lets the Python client raise the
  very lake error the server caught, so the CLI prints the same ``error:`` line and exits with
  the same status as against a local lake.
- A decoded error whose message differs from the one sent is never used: the client then raises
  a generic :class:`RemoteError` (or :class:`RemoteUsageError`) carrying the sent message.
- Nothing here does I/O or imports a web framework.
"""

from __future__ import annotations

import json
from typing import Any, Final

from lake_core import errors as lake_errors
from lake_core.errors import (
    AlreadyExistsError,
    CommitConflictError,
    CommitStateUnknownError,
    DurabilityUnknownError,
    EmptyTransactionError,
    LakeError,
    LockError,
    NotFoundError,
    ObjectStoreError,
    UsageError,
)

#: Every lake route lives under this prefix; ``/health``, ``/metrics`` and ``/docs`` do not.
API_PREFIX: Final = "/v1"
#: The pools' routes, under API_PREFIX: ``/pools`` lists and creates, ``/pools/<pool>/…`` the
#: rest. (URL paths, not storage keys: those are lake_core.layout's alone.)
POOLS_ROUTE: Final = "/pools"
JSON: Final = "application/json"
#: Query results: an Arrow IPC stream (the Python client's format) …
ARROW_STREAM: Final = "application/vnd.apache.arrow.stream"
#: … or newline-delimited JSON (one record a line), for clients without Arrow.
NDJSON: Final = "application/x-ndjson"
#: A snapshot travels in its cached form, an Arrow IPC file (:meth:`Snapshot.encode`).
ARROW_FILE: Final = "application/vnd.apache.arrow.file"
#: Response header of a query: how many objects the scan plans to read (progress bars).
OBJECTS_HEADER: Final = "lake-objects-total"
#: Response header of a SQL query: JSON, the reasons a derived pool did or did not answer it
#: (``lake query --explain``), null when derived pools were not considered.
EXPLAIN_HEADER: Final = "lake-explain"
#: Custom metadata key of the last, empty batch of a query's Arrow stream: the read counters
#: (``lake query --stats``) as JSON, known only once every batch was sent.
STATS_METADATA_KEY: Final = b"lake.stats"
#: … or, when reading failed after the response started, the error body instead.
ERROR_METADATA_KEY: Final = b"lake.error"
#: Query parameter the client sends with a write: the commit author (``--user``, LAKE_USER).
AUTHOR_PARAM: Final = "author"


class RemoteError(LakeError):
    """A failure the service reported that this client cannot name more precisely (an HTTP
    status without a lake error, a server of another version). ``str()`` is the message."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message, status)
        self.message = message
        self.status = status

    def __str__(self) -> str:
        return self.message


class RemoteUsageError(UsageError):
    """A 4xx usage failure (bad request, unsupported media type, oversize body) without a
    more precise lake error: exit status 2 on the CLI, like any usage error."""

    def __init__(self, message: str, status: int = 400) -> None:
        super().__init__(message, status)
        self.message = message
        self.status = status

    def __str__(self) -> str:
        return self.message


def status_of(error: LakeError) -> int:
    """The HTTP status of a lake error: 404 not found, 409 conflicts, 400 usage, 503 a lock
    not available or the lake's store failing for now (an outage behind the service, not the
    request's fault: a client may retry), 500 an unknown commit outcome (the client must
    look) or a store failing until someone acts (access denied, a full disk: retrying does
    not help), else 422."""
    if isinstance(error, NotFoundError):
        return 404
    if isinstance(error, AlreadyExistsError | CommitConflictError | EmptyTransactionError):
        return 409
    if isinstance(error, UsageError):
        return 400
    if isinstance(error, CommitStateUnknownError | DurabilityUnknownError):
        return 500  # an outcome to look at, not a store to retry
    if isinstance(error, ObjectStoreError) and not error.transient:
        return 500
    if isinstance(error, LockError | ObjectStoreError):
        return 503
    return 422


def _jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def error_body(error: BaseException) -> dict[str, Any]:
    """The JSON body of a failed request. Lake errors carry their type and facts (their
    ``args`` and public attributes, when JSON can hold them); anything else only a message."""
    body: dict[str, Any] = {"error": str(error)}
    if isinstance(error, LakeError) and type(error).__module__ in ERROR_MODULES:
        args = list(error.args)
        attrs = {k: v for k, v in vars(error).items() if not k.startswith("_")}
        if _jsonable(args) and _jsonable(attrs):
            body.update(type=type(error).__name__, args=args, attrs=attrs)
    return body


def error_from_body(status: int, body: Any) -> LakeError:
    """The exception to raise for an error response: the lake error the server raised when
    the body names one this client knows and it rebuilds to the same message, else
    :class:`RemoteUsageError` for 400 and 415 (the request was malformed) and
    :class:`RemoteError` otherwise — 413 included: a body over the service's bound is a
    well-formed request that failed there (exit 1), as a load too big for a disk would."""
    message = body.get("error") if isinstance(body, dict) else None
    if not isinstance(message, str) or not message:
        message = f"the lake service answered HTTP {status}"
    rebuilt = _rebuild(body) if isinstance(body, dict) else None
    if rebuilt is not None and str(rebuilt) == message:
        return rebuilt
    if status in (400, 415):
        return RemoteUsageError(message, status)
    return RemoteError(message, status)


#: The modules whose lake errors cross the wire by type (the client can import them).
ERROR_MODULES: Final = ("lake_core.errors", "lake_core.sql.errors")


def _error_class(name: str) -> Any:
    found = getattr(lake_errors, name, None)
    if found is None and name.startswith("Sql"):
        # Only for SQL errors: importing lake_core.sql brings DuckDB.
        from lake_core.sql import errors as sql_errors

        found = getattr(sql_errors, name, None)
    return found


def _rebuild(body: dict[str, Any]) -> LakeError | None:
    name, args, attrs = body.get("type"), body.get("args"), body.get("attrs")
    cls = _error_class(name) if isinstance(name, str) else None
    if not (isinstance(cls, type) and issubclass(cls, LakeError)):
        return None
    if not isinstance(args, list) or not isinstance(attrs, dict):
        return None
    # Not cls(*args): several errors pass their parent's arguments up (PoolNotFoundError
    # hands NotFoundError its kind too). The facts are restored as they were.
    error = cls.__new__(cls)
    Exception.__init__(error, *args)
    try:
        error.__dict__.update(attrs)
        str(error)
    except Exception:  # noqa: BLE001 - a body from another version: fall back to the message
        return None
    return error
