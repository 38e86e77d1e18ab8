"""The lake's routes under ``/v1`` (docs/service.md lists them with their scopes).

Each handler checks the token's scope first (a refused request runs no lake code), opens the
pool afresh, calls the same lake_core method a local user's command calls, and answers with
lake_core's own encodings (a commit as its stored JSON document, a snapshot as its cached
Arrow file, a pool as its catalog JSON), so the client rebuilds the very same objects.
Names (pools, branches) are checked by lake_core's validators: a traversal or absolute name is
an invalid name, 400. Uploaded file names are only labels in messages, never paths.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import timedelta
from typing import TYPE_CHECKING, Any, BinaryIO, cast

import pyarrow as pa
from fastapi import APIRouter, Depends, Request
from fastapi.responses import Response, StreamingResponse
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool
from starlette.datastructures import UploadFile

from lake_core.clock import parse_iso
from lake_core.commit import Commit
from lake_core.errors import UsageError
from lake_core.names import MAIN
from lake_core.objects import ObjectMeta
from lake_core.pool import Pool
from lake_core.remote.wire import (
    API_PREFIX,
    ARROW_FILE,
    ARROW_STREAM,
    EXPLAIN_HEADER,
    NDJSON,
    OBJECTS_HEADER,
)
from lake_core.snapshot import Snapshot
from lake_core.units import parse_size
from lake_service.auth import Scope
from lake_service.streams import arrow_stream, ndjson_stream

if TYPE_CHECKING:
    from lake_service.app import ServiceState

router = APIRouter(prefix=API_PREFIX, tags=["lake"])

#: Uploads a load may carry, and form fields beside them.
MAX_FILES = 1000


class UnsupportedMediaType(Exception):
    """A body of another media type than the route takes (415)."""

    def __init__(self, given: str, wanted: str) -> None:
        super().__init__(given, wanted)
        self.given = given
        self.wanted = wanted

    def __str__(self) -> str:
        return f"unsupported media type {self.given}: this route takes {self.wanted}"


def _media_type(request: Request) -> str:
    return request.headers.get("content-type", "").split(";")[0].strip().lower() or "none"


def _state(request: Request) -> ServiceState:
    return cast("ServiceState", request.app.state.service)


def needs(scope: Scope) -> Any:
    """A dependency refusing tokens below ``scope`` (401/403) before the handler runs."""

    def check(request: Request) -> None:
        _state(request).tokens.require(request.headers.get("authorization"), scope)

    return Depends(check)


def json_body(request: Request) -> None:
    """Refuse a body that is not ``application/json`` (415) before it is parsed."""
    if _media_type(request) != "application/json":
        raise UnsupportedMediaType(_media_type(request), "application/json")


def _pool(request: Request, name: str) -> Pool:
    return _state(request).pools.get(name)


def _commit_json(commit: Commit) -> dict[str, Any]:
    return cast(dict[str, Any], json.loads(commit.encode()))


def _counted(request: Request, operation: str, commit: Commit | None) -> None:
    if commit is not None:
        _state(request).metrics.commits.labels(operation).inc()


def _time(text: str | None, what: str = "as_of") -> Any:
    if text is None:
        return None
    try:
        return parse_iso(text)
    except ValueError:
        raise UsageError(f"invalid {what} {text!r}: use ISO 8601") from None


def _meta(text: str | None) -> Any:
    if text is None:
        return None
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        raise UsageError("meta is not valid JSON") from None


# -- the lake ---------------------------------------------------------------------------------


@router.get("/pools", dependencies=[needs(Scope.READ)])
def list_pools(
    request: Request, at_version: str | None = None, as_of: str | None = None
) -> dict[str, Any]:
    """Pools and views now, or at a catalog version or time (``lake ls``)."""
    pools, views = _state(request).lake.listing(at_version, _time(as_of))
    return {
        "pools": [p.to_json() for p in pools],
        "views": [
            {"name": str(v.name), "id": v.id, "created": v.created and v.created.isoformat()}
            for v in views
        ],
    }


class CreatePool(BaseModel):
    name: str
    orderby: str = "ts:desc"
    target_size: str = "128MB"
    partition_by: str | None = None
    schema_mode: str = "merge"
    unique: bool = False


@router.post("/pools", status_code=201, dependencies=[needs(Scope.WRITE), Depends(json_body)])
def create_pool(request: Request, body: CreatePool) -> dict[str, Any]:
    """A new pool with branch ``main`` (``lake create``)."""
    pool = _state(request).lake.create_pool(
        body.name,
        body.orderby,
        target_size=parse_size(body.target_size),
        partition_by=body.partition_by,
        schema_mode=body.schema_mode,
        unique=body.unique,
    )
    return {"pool": pool.config.to_json()}


@router.get("/catalog/log", dependencies=[needs(Scope.READ)])
def catalog_log(request: Request, limit: int | None = None) -> dict[str, Any]:
    """Catalog versions, newest first (``lake catalog log``)."""
    if limit is not None and limit < 0:
        raise UsageError("limit must be 0 or more")
    return {"versions": [v.to_json() for v in _state(request).lake.catalog_versions(limit)]}


class SqlQuery(BaseModel):
    sql: str
    as_of: str | None = None
    derived: bool = True


#: Rows per Arrow batch DuckDB hands the stream.
SQL_BATCH_ROWS = 64 * 1024


@router.post(
    "/sql",
    dependencies=[needs(Scope.READ), Depends(json_body)],
    response_class=StreamingResponse,
    responses={200: {"content": {ARROW_STREAM: {}, NDJSON: {}}}},
)
def sql(request: Request, body: SqlQuery, format: str = "arrow") -> Response:
    """Read-only SQL over the lake's pools (``lake query "SQL"``, docs/sql.md), streamed as
    a query's records are: the Arrow stream's trailer holds the per-pool read counters and
    ``answered_from``; the ``lake-explain`` header says whether a derived pool answered."""
    import duckdb

    from lake_core.sql import engine_error, run_sql

    if format not in ("arrow", "ndjson"):
        raise UsageError(f"format must be arrow or ndjson, not {format!r}")
    lake = _state(request).lake
    run = run_sql(body.sql, lake.pool, lake, as_of=_time(body.as_of), derived=body.derived)
    try:
        reader = run.relation.to_arrow_reader(SQL_BATCH_ROWS)
    except duckdb.Error as e:
        run.connection.close()
        raise engine_error(e) from None
    except BaseException:
        run.connection.close()
        raise

    def batches() -> Iterator[pa.RecordBatch]:
        try:
            yield from reader
        except duckdb.Error as e:
            raise engine_error(e) from None
        finally:
            run.connection.close()

    def stats() -> dict[str, Any]:
        return {**run.stats(), "answered_from": run.answered_from}

    reasons = run.derivation.reasons if run.derivation is not None else None
    headers = {EXPLAIN_HEADER: json.dumps(reasons)}
    if format == "ndjson":
        return StreamingResponse(ndjson_stream(batches()), media_type=NDJSON, headers=headers)
    stream = arrow_stream(reader.schema, batches(), stats)
    return StreamingResponse(stream, media_type=ARROW_STREAM, headers=headers)


# -- one pool: reads --------------------------------------------------------------------------


@router.get("/pools/{pool:path}/log", dependencies=[needs(Scope.READ)])
def log(request: Request, pool: str, ref: str | None = None) -> dict[str, Any]:
    """Commits from ``ref`` (branch or commit id; default main) back, newest first."""
    return {"commits": [_commit_json(c) for c in _pool(request, pool).log(ref)]}


@router.get("/pools/{pool:path}/resolve", dependencies=[needs(Scope.READ)])
def resolve(
    request: Request, pool: str, ref: str | None = None, as_of: str | None = None
) -> dict[str, Any]:
    """The commit id ``ref`` (as of a time) names; null for an empty branch."""
    return {"commit": _pool(request, pool).resolve(ref, _time(as_of))}


@router.get("/pools/{pool:path}/snapshot", dependencies=[needs(Scope.READ)])
def snapshot(request: Request, pool: str, commit: str | None = None) -> Response:
    """The snapshot at a commit id (none: the empty pool) in its cached Arrow file form."""
    target = _pool(request, pool)
    if commit is not None:
        target.resolve(commit)  # a commit of this pool, not vacated: else 404
    return Response(target.snapshot(commit).encode(), media_type=ARROW_FILE)


@router.get("/pools/{pool:path}/objects", dependencies=[needs(Scope.READ)])
def objects(
    request: Request, pool: str, ref: str | None = None, as_of: str | None = None
) -> dict[str, Any]:
    """The live data objects at ``ref`` as JSON (for clients without Arrow)."""
    target = _pool(request, pool)
    commit = target.resolve(ref, _time(as_of))
    snap: Snapshot = target.snapshot(commit)
    return {"commit": commit, "objects": [o.to_json() for o in snap.objects.values()]}


@router.get("/pools/{pool:path}/branches", dependencies=[needs(Scope.READ)])
def branches(request: Request, pool: str) -> dict[str, Any]:
    """Branch name → tip commit id (null: no commit yet)."""
    return {"branches": _pool(request, pool).branches()}


@router.get(
    "/pools/{pool:path}/query",
    dependencies=[needs(Scope.READ)],
    response_class=StreamingResponse,
    responses={200: {"content": {ARROW_STREAM: {}, NDJSON: {}}}},
)
def query(
    request: Request,
    pool: str,
    ref: str | None = None,
    as_of: str | None = None,
    where: str | None = None,
    columns: str | None = None,
    order: str | None = None,
    sample: float | None = None,
    format: str = "arrow",
) -> Response:
    """The records of a snapshot in pool-key order, streamed: ``format=arrow`` an Arrow IPC
    stream (its last, empty batch carries the read counters), ``format=ndjson`` one JSON
    object a line. Errors found while planning answer JSON before any record."""
    if format not in ("arrow", "ndjson"):
        raise UsageError(f"format must be arrow or ndjson, not {format!r}")
    names = [c.strip() for c in columns.split(",")] if columns else None
    scan = _pool(request, pool).scan(
        ref, as_of=_time(as_of), where=where, columns=names, order=order, sample=sample
    )
    headers = {OBJECTS_HEADER: str(len(scan.objects))}
    if format == "ndjson":
        return StreamingResponse(ndjson_stream(scan.batches()), media_type=NDJSON, headers=headers)
    stream = arrow_stream(scan.out_schema, scan.batches(), scan.stats.to_json)
    return StreamingResponse(stream, media_type=ARROW_STREAM, headers=headers)


@router.get("/pools/{pool:path}", dependencies=[needs(Scope.READ)])
def pool_config(request: Request, pool: str) -> dict[str, Any]:
    """The pool's settings as the catalog holds them."""
    return {"pool": _pool(request, pool).config.to_json()}


# -- one pool: writes -------------------------------------------------------------------------


class _Upload:
    """An uploaded file as lake_core's readers take a stream: ``read`` and the ``name`` the
    client gave (errors and format detection use it; it is never opened as a path)."""

    def __init__(self, upload: UploadFile) -> None:
        name = upload.filename or "upload"
        self.name = "stdin" if name == "-" else name
        self._file = upload.file

    def read(self, size: int = -1) -> bytes:
        return self._file.read(size)


@router.post(
    "/pools/{pool:path}/load",
    dependencies=[needs(Scope.WRITE)],
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"multipart/form-data": {"schema": {"type": "object"}}},
            "description": "one part a file; the part's filename names it (format, errors)",
        }
    },
)
async def load(
    request: Request,
    pool: str,
    branch: str = MAIN,
    format: str = "auto",
    message: str = "",
    meta: str | None = None,
    author: str | None = None,
) -> dict[str, Any]:
    """Load the uploaded files into ``branch`` in one commit (``lake load``). The body is
    read whole (spooled to temporary files past 1 MiB) before anything is written: a client
    that disconnects mid-upload, or a body over the limit, commits nothing."""
    if _media_type(request) != "multipart/form-data":
        raise UnsupportedMediaType(_media_type(request), "multipart/form-data")
    meta_value = _meta(meta)
    async with request.form(max_files=MAX_FILES, max_fields=MAX_FILES) as form:
        uploads = [v for _, v in form.multi_items() if isinstance(v, UploadFile)]
        if not uploads:
            raise UsageError("no file in the request: send one multipart part a file")
        sources = [cast(BinaryIO, _Upload(u)) for u in uploads]

        written: list[ObjectMeta] = []

        def run() -> Commit:
            target = _pool(request, pool)
            return target.load(
                sources,
                branch,
                fmt=format,
                author=author,
                message=message,
                meta=meta_value,
                on_object=written.append,
                group=_state(request).group_commit,
            )

        commit = await run_in_threadpool(run)
    _counted(request, "load", commit)
    # The objects this load wrote: with --group-commit the commit holds other loads' too.
    return {"commit": _commit_json(commit), "objects": [o.to_json() for o in written]}


class CreateBranch(BaseModel):
    name: str
    from_ref: str | None = Field(default=None, alias="from")


@router.post(
    "/pools/{pool:path}/branches",
    status_code=201,
    dependencies=[needs(Scope.WRITE), Depends(json_body)],
)
def create_branch(request: Request, pool: str, body: CreateBranch) -> dict[str, Any]:
    """A new branch at ``from`` (branch or commit; default main)."""
    tip = _pool(request, pool).create_branch(body.name, body.from_ref)
    return {"branch": body.name, "commit": tip}


@router.delete("/pools/{pool:path}/branches/{branch}", dependencies=[needs(Scope.WRITE)])
def delete_branch(request: Request, pool: str, branch: str) -> dict[str, Any]:
    """Delete a branch (its commits stay until cleanup)."""
    _pool(request, pool).delete_branch(branch)
    return {"branch": branch, "deleted": True}


class CommitOptions(BaseModel):
    message: str = ""
    meta: Any = None
    author: str | None = None


class Merge(CommitOptions):
    source: str
    into: str = MAIN
    resolve: str | None = None


@router.post("/pools/{pool:path}/merge", dependencies=[needs(Scope.WRITE), Depends(json_body)])
def merge(request: Request, pool: str, body: Merge) -> dict[str, Any]:
    """Merge ``source`` into ``into`` in one commit, three-way by rows."""
    commit = _pool(request, pool).merge(
        body.source,
        body.into,
        resolve=body.resolve,
        author=body.author,
        message=body.message,
        meta=body.meta,
    )
    _counted(request, "merge", commit)
    return {"commit": _commit_json(commit)}


class Delete(CommitOptions):
    branch: str = MAIN
    where: str | None = None
    ids: list[str] | None = None


@router.post("/pools/{pool:path}/delete", dependencies=[needs(Scope.WRITE), Depends(json_body)])
def delete(request: Request, pool: str, body: Delete) -> dict[str, Any]:
    """Delete objects (``ids``) or rows (``where``) in one commit."""
    commit = _pool(request, pool).delete(
        body.where,
        body.branch,
        ids=body.ids,
        author=body.author,
        message=body.message,
        meta=body.meta,
    )
    _counted(request, "delete", commit)
    return {"commit": _commit_json(commit)}


class Revert(CommitOptions):
    commit: str
    branch: str = MAIN


@router.post("/pools/{pool:path}/revert", dependencies=[needs(Scope.WRITE), Depends(json_body)])
def revert(request: Request, pool: str, body: Revert) -> dict[str, Any]:
    """Undo one commit's rows in a new commit."""
    commit = _pool(request, pool).revert(
        body.commit, body.branch, author=body.author, message=body.message, meta=body.meta
    )
    _counted(request, "revert", commit)
    return {"commit": _commit_json(commit)}


# -- one pool: maintenance (admin) ------------------------------------------------------------


class Compact(BaseModel):
    branch: str = MAIN
    ids: list[str] = []
    lock_timeout: float = 600.0
    author: str | None = None


@router.post("/pools/{pool:path}/compact", dependencies=[needs(Scope.ADMIN), Depends(json_body)])
def compact(request: Request, pool: str, body: Compact) -> dict[str, Any]:
    """LSM-compact the given objects, or what the policy picks; ``commit`` null: nothing to
    compact."""
    result = _pool(request, pool).compact(
        body.branch, body.ids or None, lock_timeout=body.lock_timeout, author=body.author
    )
    _counted(request, "compact", result.commit)
    return {
        "commit": None if result.commit is None else _commit_json(result.commit),
        "runs": result.runs,
        "objects_in": result.objects_in,
        "objects_out": result.objects_out,
        "bytes_in": result.bytes_in,
        "bytes_out": result.bytes_out,
        "duplicates_removed": result.duplicates_removed,
    }


class Cleanup(BaseModel):
    grace_seconds: float = 7 * 86400.0
    dry_run: bool = True
    lock_timeout: float = 600.0


@router.post("/pools/{pool:path}/cleanup", dependencies=[needs(Scope.ADMIN), Depends(json_body)])
def cleanup(request: Request, pool: str, body: Cleanup) -> dict[str, Any]:
    """What cleanup would delete (``dry_run``, the default) or deletes."""
    if body.grace_seconds < 0:
        raise UsageError("grace_seconds must be 0 or more")
    result = _pool(request, pool).cleanup(
        timedelta(seconds=body.grace_seconds), dry_run=body.dry_run, lock_timeout=body.lock_timeout
    )
    return result.to_json()
