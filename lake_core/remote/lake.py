"""A lake behind the lake service: :class:`RemoteLake` and :class:`RemotePool` answer the
calls the ``lake`` command and Python readers make of :class:`~lake_core.lake.Lake` and
:class:`~lake_core.pool.Pool`, over HTTP, with the same return types (commits, snapshots, pool
configs and maintenance results are rebuilt from lake_core's own encodings) and the same
errors (:mod:`lake_core.remote.wire`).

What is served: listing pools, creating one, a pool's settings, load, scan/read (Arrow
stream), log, resolve, snapshot, branches, merge, delete, revert, compact, cleanup, catalog
log. Anything else (SQL, staging, verify, vacate, purge, partitions, upsert, …) raises
:class:`NotServedError` naming it, instead of failing somewhere deep (docs/service.md).
Invariant: a remote handle holds no lake state between calls; every call asks the server.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, BinaryIO

import pyarrow as pa

from lake_core.catalog.history import CatalogVersion
from lake_core.clock import parse_iso, to_iso
from lake_core.commit import Commit
from lake_core.errors import NotServedError, UsageError
from lake_core.names import MAIN, PoolName
from lake_core.objects import ObjectMeta
from lake_core.registry import PoolConfig
from lake_core.remote.client import ServiceClient, pool_path
from lake_core.remote.wire import (
    ERROR_METADATA_KEY,
    EXPLAIN_HEADER,
    OBJECTS_HEADER,
    POOLS_ROUTE,
    STATS_METADATA_KEY,
    RemoteError,
    error_from_body,
)
from lake_core.snapshot import Snapshot
from lake_core.txn import DEFAULT_TXN_RETENTION
from lake_core.writer import DEFAULT_SEEK_STRIDE, DEFAULT_TARGET_SIZE

__all__ = ["NotServedError", "RemoteLake", "RemotePool"]


def _commit(doc: Any, where: str) -> Commit:
    return Commit.decode(where, json.dumps(doc).encode())


class RemoteLake:
    """The lake served at ``url`` (``http(s)://HOST:PORT``). ``user``: the author of the
    commits this handle makes, as ``LakeConfig.user`` is locally."""

    def __init__(self, url: str, token: str | None = None, user: str = "lake") -> None:
        self.url = url.rstrip("/")
        self.user = user
        self.client = ServiceClient(self.url, token)

    def __repr__(self) -> str:
        return f"RemoteLake({self.url!r})"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise NotServedError(f"Lake.{name}", method=True)

    def close(self) -> None:
        self.client.close()

    def pool(self, name: str) -> RemotePool:
        """The pool ``name``; PoolNotFoundError (and InvalidNameError) as locally."""
        pool_name = PoolName.parse(name)
        doc = self.client.get_json(pool_path(str(pool_name)))
        return RemotePool(self, PoolConfig.from_json(doc["pool"]))

    def pools(self) -> list[PoolConfig]:
        return self.listing()[0]

    def listing(
        self, at_version: int | str | None = None, as_of: datetime | None = None
    ) -> tuple[list[PoolConfig], list[Any]]:
        """Pools and views, as :meth:`Lake.listing` (views as :class:`lake_core.views.View`)."""
        from lake_core.views import View

        doc = self.client.get_json(
            POOLS_ROUTE,
            {
                "at_version": None if at_version is None else str(at_version),
                "as_of": None if as_of is None else to_iso(as_of),
            },
        )
        pools = [PoolConfig.from_json(p) for p in doc["pools"]]
        views = [
            View(
                name=PoolName.parse(v["name"]),
                sql="",
                created=parse_iso(v["created"]) if v.get("created") else None,
                id=v.get("id", ""),
            )
            for v in doc.get("views", [])
        ]
        return pools, views

    def catalog_versions(self, limit: int | None = None) -> list[CatalogVersion]:
        doc = self.client.get_json("/catalog/log", {"limit": limit})
        return [CatalogVersion.from_json(v) for v in doc["versions"]]

    def sql_run(
        self, sql: str, *, as_of: datetime | None = None, derived: bool = True
    ) -> RemoteScan:
        """Read-only SQL over the served lake (``lake query "SQL"``): its records stream as a
        scan's do; ``stats.to_json()`` then holds the per-pool counters and
        ``answered_from``, ``reasons`` what ``--explain`` prints."""
        body = {"sql": sql, "as_of": None if as_of is None else to_iso(as_of), "derived": derived}
        return RemoteScan(self.client, "/sql", {"format": "arrow"}, body)

    def create_pool(
        self,
        name: str,
        key: str | None = None,
        *,
        target_size: int = DEFAULT_TARGET_SIZE,
        seek_stride: int = DEFAULT_SEEK_STRIDE,
        partition_by: str | None = None,
        schema_mode: str = "merge",
        txn_retention: timedelta | None = DEFAULT_TXN_RETENTION,
        unique: bool = False,
        otree: Any = None,
    ) -> RemotePool:
        """A new pool (the settings ``lake create`` takes, except the OTree layout, the seek
        stride and the transaction retention, which keep their defaults remotely)."""
        if otree is not None:
            raise NotServedError("an OTree pool layout")
        if seek_stride != DEFAULT_SEEK_STRIDE or txn_retention != DEFAULT_TXN_RETENTION:
            raise NotServedError("--seek-stride and --txn-retention")
        doc = self.client.send_json(
            "POST",
            POOLS_ROUTE,
            {
                "name": name,
                "orderby": key or "ts:desc",
                "target_size": str(target_size),
                "partition_by": partition_by,
                "schema_mode": schema_mode,
                "unique": unique,
            },
        )
        return RemotePool(self, PoolConfig.from_json(doc["pool"]))


class RemoteReadStats:
    """A remote scan's counters: zero until the stream ended, then the server's."""

    def __init__(self) -> None:
        self.counters: dict[str, Any] = {}

    @property
    def objects_read(self) -> int:
        return int(self.counters.get("objects_read", 0))

    def to_json(self) -> dict[str, Any]:
        return dict(self.counters)


class _ResponseFile(io.RawIOBase):
    """An HTTP response body as a readable binary file (what pyarrow's IPC reader wants)."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._pending: memoryview | bytes = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._pending:
            chunk = next(self._chunks, None)
            if chunk is None:
                return 0
            self._pending = memoryview(chunk)
        n = min(len(buffer), len(self._pending))
        buffer[:n] = self._pending[:n]
        self._pending = self._pending[n:]
        return n


def _response_reader(chunks: Iterator[bytes]) -> io.BufferedReader:
    """The body as a buffered file: ``read(n)`` returns n bytes unless the body ended (a raw
    read returns what one chunk holds, which pyarrow would take for the end of the stream)."""
    return io.BufferedReader(_ResponseFile(chunks), buffer_size=1 << 20)


class RemoteScan:
    """A scan read from the service's Arrow stream: :attr:`out_schema` and :attr:`objects`
    (its length: the objects the server plans to read) are known once the response started;
    :meth:`batches` yields the records once, then :attr:`stats` holds the server's counters.
    A stream that ends without its trailer (the connection cut) raises RemoteError: a cut
    result is never taken for a whole one."""

    def __init__(
        self, client: ServiceClient, path: str, params: dict[str, Any], body: Any = None
    ) -> None:
        self._stack = ExitStack()
        try:
            response = self._stack.enter_context(client.stream(path, params, body))
            total = int(response.headers.get(OBJECTS_HEADER, "0"))
            explain = response.headers.get(EXPLAIN_HEADER)
            self._reader = pa.ipc.open_stream(_response_reader(response.iter_bytes()))
        except BaseException:
            self._stack.close()
            raise
        self.out_schema: pa.Schema = self._reader.schema
        self.objects: list[None] = [None] * total
        #: For SQL: why a derived pool did or did not answer (None: not considered).
        self.reasons: list[str] | None = None if explain is None else json.loads(explain)
        self.stats = RemoteReadStats()
        self._done = False

    def batches(self) -> Iterator[pa.RecordBatch]:
        try:
            while True:
                try:
                    batch, meta = self._reader.read_next_batch_with_custom_metadata()
                except StopIteration:
                    raise RemoteError("the query's result stream ended early") from None
                if meta is not None and ERROR_METADATA_KEY in meta:
                    raise error_from_body(500, json.loads(meta[ERROR_METADATA_KEY]))
                if meta is not None and STATS_METADATA_KEY in meta:
                    self.stats.counters = json.loads(meta[STATS_METADATA_KEY])
                    self._done = True
                    return
                yield batch
        except pa.ArrowInvalid as e:
            raise RemoteError(f"the query's result stream is broken: {e}") from None
        finally:
            self._stack.close()

    def reader(self) -> pa.RecordBatchReader:
        return pa.RecordBatchReader.from_batches(self.out_schema, self.batches())

    def to_table(self) -> pa.Table:
        return pa.Table.from_batches(list(self.batches()), schema=self.out_schema)


class RemotePool:
    """One pool behind the service, with :class:`~lake_core.pool.Pool`'s signatures for the
    operations the service serves."""

    def __init__(self, lake: RemoteLake, config: PoolConfig) -> None:
        self.lake = lake
        self.config = config

    @property
    def id(self) -> str:
        return self.config.id

    @property
    def name(self) -> str:
        return str(self.config.name)

    def __repr__(self) -> str:
        return f"RemotePool({self.name!r}, {self.lake.url})"

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        raise NotServedError(f"Pool.{name}", method=True)

    def _path(self, *rest: str) -> str:
        return pool_path(self.name, *rest)

    def _where(self, commit_id: str) -> str:
        return f"commit {commit_id} from {self.lake.url}"

    def _author(self, author: str | None) -> str:
        return author or self.lake.user

    # -- reads --------------------------------------------------------------------------------

    def branches(self) -> dict[str, str | None]:
        return dict(self.lake.client.get_json(self._path("branches"))["branches"])

    def resolve(self, ref: str | None = None, as_of: datetime | None = None) -> str | None:
        doc = self.lake.client.get_json(
            self._path("resolve"), {"ref": ref, "as_of": None if as_of is None else to_iso(as_of)}
        )
        commit = doc["commit"]
        return None if commit is None else str(commit)

    def snapshot(self, commit_id: str | None) -> Snapshot:
        data = self.lake.client.get_bytes(self._path("snapshot"), {"commit": commit_id})
        return Snapshot.decode(f"snapshot of {self.name} from {self.lake.url}", data)

    def log(self, ref: str | None = None) -> Iterator[Commit]:
        doc = self.lake.client.get_json(self._path("log"), {"ref": ref})
        for c in doc["commits"]:
            yield _commit(c, self._where(str(c.get("id"))))

    def scan(
        self,
        ref: str | None = None,
        *,
        as_of: datetime | None = None,
        where: str | None = None,
        columns: list[str] | None = None,
        order: str | None = None,
        sample: float | None = None,
    ) -> RemoteScan:
        params = {
            "ref": ref,
            "as_of": None if as_of is None else to_iso(as_of),
            "where": where,
            "columns": ",".join(columns) if columns else None,
            "order": order,
            "sample": sample,
            "format": "arrow",
        }
        return RemoteScan(self.lake.client, self._path("query"), params)

    def read(self, ref: str | None = None, **kwargs: Any) -> pa.Table:
        return self.scan(ref, **kwargs).to_table()

    # -- writes -------------------------------------------------------------------------------

    def load(
        self,
        sources: str | Path | BinaryIO | Sequence[str | Path | BinaryIO],
        branch: str = MAIN,
        *,
        fmt: str = "auto",
        author: str | None = None,
        message: str = "",
        meta: Any = None,
        on_object: Callable[[Any], None] | None = None,
    ) -> Commit:
        """Upload ``sources`` (paths, ``-`` for stdin, binary streams) and load them in one
        commit. Files stream from disk; a path that cannot be opened fails before anything is
        sent, as locally. ``on_object`` is called, once the server answers, with each object
        this load wrote (a server with ``--group-commit`` may land it in a commit holding other
        loads' objects too)."""
        items = (
            [sources] if isinstance(sources, str | Path) or hasattr(sources, "read") else sources
        )
        with ExitStack() as stack:
            files: list[tuple[str, Any]] = []
            for i, src in enumerate(items):
                if isinstance(src, str | Path):
                    if str(src) == "-":
                        files.append(("-", sys.stdin.buffer))
                        continue
                    try:
                        files.append((str(src), stack.enter_context(open(src, "rb"))))  # noqa: SIM115
                    except OSError as e:
                        raise UsageError(f"cannot read {src}: {e.strerror or e}") from None
                else:
                    files.append((getattr(src, "name", None) or f"stream #{i + 1}", src))
            params = {
                "branch": branch,
                "format": fmt,
                "message": message,
                "meta": None if meta is None else json.dumps(meta),
                "author": self._author(author),
            }
            doc = self.lake.client.upload(self._path("load"), files, params)
        if on_object is not None:
            for obj in doc.get("objects", []):
                on_object(ObjectMeta.from_json(obj))
        commit = doc["commit"]
        return _commit(commit, self._where(str(commit.get("id"))))

    def _committing(self, route: str, body: dict[str, Any]) -> Commit:
        doc = self.lake.client.send_json("POST", self._path(route), body)
        commit = doc["commit"]
        return _commit(commit, self._where(str(commit.get("id"))))

    def create_branch(self, name: str, from_ref: str | None = None) -> str | None:
        doc = self.lake.client.send_json(
            "POST", self._path("branches"), {"name": name, "from": from_ref}
        )
        tip = doc["commit"]
        return None if tip is None else str(tip)

    def delete_branch(self, name: str) -> None:
        self.lake.client.send_json("DELETE", self._path("branches", name))

    def merge(
        self,
        source: str,
        into: str = MAIN,
        *,
        resolve: str | None = None,
        author: str | None = None,
        message: str = "",
        meta: Any = None,
    ) -> Commit:
        return self._committing(
            "merge",
            {
                "source": source,
                "into": into,
                "resolve": resolve,
                "author": self._author(author),
                "message": message,
                "meta": meta,
            },
        )

    def delete(
        self,
        where: str | None = None,
        branch: str = MAIN,
        *,
        ids: Sequence[str] | None = None,
        author: str | None = None,
        message: str = "",
        meta: Any = None,
    ) -> Commit:
        if (where is None) == (ids is None):
            raise UsageError("give either where or ids, not both or neither")
        return self._committing(
            "delete",
            {
                "where": where,
                "ids": None if ids is None else list(ids),
                "branch": branch,
                "author": self._author(author),
                "message": message,
                "meta": meta,
            },
        )

    def revert(
        self,
        commit_id: str,
        branch: str = MAIN,
        *,
        author: str | None = None,
        message: str = "",
        meta: Any = None,
    ) -> Commit:
        return self._committing(
            "revert",
            {
                "commit": commit_id,
                "branch": branch,
                "author": self._author(author),
                "message": message,
                "meta": meta,
            },
        )

    # -- maintenance --------------------------------------------------------------------------

    def compact(
        self,
        branch: str = MAIN,
        object_ids: Sequence[str] | None = None,
        *,
        lock_timeout: float | None = 600.0,
        author: str | None = None,
        on_run: Callable[..., None] | None = None,
    ) -> Any:
        """As :meth:`Pool.compact`; returns a CompactionResult (``on_run`` is not called)."""
        from lake_core.maintenance.compact import CompactionResult

        doc = self.lake.client.send_json(
            "POST",
            self._path("compact"),
            {
                "branch": branch,
                "ids": list(object_ids or []),
                "lock_timeout": 600.0 if lock_timeout is None else lock_timeout,
                "author": self._author(author),
            },
        )
        commit = doc.pop("commit")
        done = None if commit is None else _commit(commit, self._where(str(commit.get("id"))))
        return CompactionResult(commit=done, **{k: int(v) for k, v in doc.items()})

    def cleanup(
        self, grace: timedelta, *, dry_run: bool = False, lock_timeout: float | None = 600.0
    ) -> Any:
        """As :meth:`Pool.cleanup`; returns a CleanupResult (without the deleted ids)."""
        from dataclasses import fields, replace

        from lake_core.maintenance.cleanup import CleanupResult

        doc = self.lake.client.send_json(
            "POST",
            self._path("cleanup"),
            {
                "grace_seconds": grace.total_seconds(),
                "dry_run": dry_run,
                "lock_timeout": 600.0 if lock_timeout is None else lock_timeout,
            },
        )
        counts: dict[str, Any] = {
            f.name: int(doc[f.name])
            for f in fields(CleanupResult)
            if f.name not in ("dry_run", "now", "grace", "release_before", "objects")
            and f.name in doc
        }
        release = doc.get("release_before")
        result = CleanupResult(
            dry_run=bool(doc["dry_run"]),
            now=parse_iso(str(doc["now"])),
            grace=timedelta(seconds=float(doc["grace_seconds"])),
            release_before=parse_iso(str(release)) if release else None,
        )
        return replace(result, **counts)
