"""``S3ObjectStore``: the object-store contract on an S3 bucket prefix (AWS, MinIO, R2, moto).

Put-if-missing is S3's conditional write, ``PutObject`` with ``If-None-Match: *``: the server
creates the key only if it does not exist and answers 412 Precondition Failed otherwise, which
becomes :class:`ObjectExistsError`. A 409 ConditionalRequestConflict (a concurrent conditional
write still in flight) is retried: its outcome for *us* is not yet decided. Single-part PUTs are
atomic, so readers never see partial objects.

Endpoint, region, credentials and addressing style come from an :class:`S3Config` (the one
object the lake, Spark tasks and Dagster share); what it leaves out comes from boto3's standard
resolution (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``, ``AWS_REGION``/``AWS_DEFAULT_REGION``,
``AWS_ENDPOINT_URL``, profiles). They never appear in ``uri``, in errors or in logs: error
messages carry only the bucket, the key and the service's error code.

Background writes (see :mod:`lake_core.stores.base`, "Deferred durability"). A deferring view's
puts of small objects run on this store's writer threads, so a small commit's data object and
commit object are in flight together and the commit waits once (:meth:`S3ObjectStore.settle`)
before its journal entry; HEAD hints are written on one thread of their own, after the commit
has returned (coalesced per key, see ``_InFlight``). In-flight puts are kept by key: this
store's ``get``, ``get_range``, ``head``, ``delete`` and ``delete_many`` of such a key, and its
``list`` of a prefix, wait for those puts first. Puts are deferred only up to
:data:`DEFER_MAX_OBJECT` bytes each and :data:`DEFER_MAX_IN_FLIGHT` in all (larger ones are made
on the calling thread), so a large load never holds more than that in memory for them.
"""

from __future__ import annotations

import builtins
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from lake_core.errors import (
    ObjectExistsError,
    ObjectNotFoundError,
    ObjectStoreError,
    UsageError,
)
from lake_core.stores.base import DeferringView, ObjectInfo, ObjectStore, SyncBatch
from lake_core.stores.s3config import S3Config, refuse_credentials_in_uri, retries

__all__ = ["S3Config", "S3ObjectStore", "retries"]

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

_NOT_FOUND = {"404", "NoSuchKey", "NotFound"}
#: Answers that stay until someone changes credentials or policies (not transient).
_DENIED = {"AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch", "AllAccessDisabled"}
_CONFLICT_RETRIES = 20
#: Largest put a deferring view runs in the background; larger ones wait on the caller.
DEFER_MAX_OBJECT = 8 << 20
#: Bytes of background puts in flight at most (per store); beyond, puts wait on the caller.
DEFER_MAX_IN_FLIGHT = 64 << 20
_WRITER_THREADS = 8


class _InFlight:
    """A store's writes running in the background.

    Puts (of a deferring view) are kept by key. Invariant: a key maps to its latest put still
    running; a put waits for the one before it on the same key, so puts of one key land in
    the order they were made. Hints are not kept by key — nobody waits to read one (a hint is
    probed past when stale) — and they are coalesced: a hint queued for a key and not yet
    started takes the newest value instead of queueing another, so however many pools commit
    through the store, at most one hint per key waits for the one hint thread."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_key: dict[str, Future[None]] = {}
        self._bytes = 0
        self._writers: ThreadPoolExecutor | None = None
        self._hints: ThreadPoolExecutor | None = None  # one thread: hints land in order
        self._hint_values: dict[str, bytes] = {}  # queued, not started: the newest per key
        self._hint_tasks: set[Future[None]] = set()
        _ALL.add(self)

    def submit(self, key: str, size: int, fn: Callable[[], None]) -> Future[None] | None:
        """Run ``fn`` (the put of ``key``, ``size`` bytes) in the background; None when it is
        too large to defer now, or the interpreter is shutting down (the caller puts it)."""
        with self._lock:
            if size > DEFER_MAX_OBJECT or self._bytes + size > DEFER_MAX_IN_FLIGHT:
                return None
            if self._writers is None:
                self._writers = ThreadPoolExecutor(
                    _WRITER_THREADS, thread_name_prefix="lake-s3-put"
                )
            before = self._by_key.get(key)
            try:
                future = self._writers.submit(_after, before, key, fn)
            except RuntimeError:  # after interpreter shutdown began: no new threads
                return None
            self._by_key[key] = future
            self._bytes += size
        future.add_done_callback(lambda f: self._done(key, f, size))
        return future

    def submit_hint(self, key: str, data: bytes, put: Callable[[str, bytes], None]) -> bool:
        """Put hint ``data`` at ``key`` in the background (``put`` must not raise); False when
        it cannot be queued (the caller puts it or drops it)."""
        with self._lock:
            if key in self._hint_values:  # a put of this key is queued: it takes this value
                self._hint_values[key] = data
                return True
            if self._hints is None:
                self._hints = ThreadPoolExecutor(1, thread_name_prefix="lake-s3-hint")
            try:
                future = self._hints.submit(self._write_hint, key, put)
            except RuntimeError:  # after interpreter shutdown began
                return False
            self._hint_values[key] = data
            self._hint_tasks.add(future)
        future.add_done_callback(self._hint_done)
        return True

    def _write_hint(self, key: str, put: Callable[[str, bytes], None]) -> None:
        with self._lock:
            data = self._hint_values.pop(key)
        put(key, data)

    def _hint_done(self, future: Future[None]) -> None:
        with self._lock:
            self._hint_tasks.discard(future)

    def _done(self, key: str, future: Future[None], size: int) -> None:
        with self._lock:
            if self._by_key.get(key) is future:
                del self._by_key[key]
            self._bytes -= size

    def wait(self, key: str) -> None:
        """Return once no put of ``key`` is running (its outcome is the put's caller's). In
        the put's own task (a put-if-missing reading its key back) there is nothing to wait
        for: waiting there would wait for itself."""
        if getattr(_task, "key", None) == key:
            return
        with self._lock:
            future = self._by_key.get(key)
        if future is not None:
            wait_futures([future])

    def wait_all(self, prefix: str = "", hints: bool = False) -> None:
        """Return once no put of a key starting with ``prefix`` is running (and, with
        ``hints``, no hint is queued or being put)."""
        with self._lock:
            futures = [f for k, f in self._by_key.items() if k.startswith(prefix)]
            if hints:
                futures += self._hint_tasks
        wait_futures(futures)

    def forget(self) -> None:
        """In a forked child: the parent's threads and puts are not ours."""
        self._lock = threading.Lock()
        self._by_key = {}
        self._bytes = 0
        self._writers = self._hints = None
        self._hint_values = {}
        self._hint_tasks = set()


#: The key whose background put this thread is running (see ``_InFlight.wait``).
_task = threading.local()


def _after(before: Future[None] | None, key: str, fn: Callable[[], None]) -> None:
    if before is not None:
        wait_futures([before])
    _task.key = key
    try:
        fn()
    finally:
        _task.key = None


_ALL: weakref.WeakSet[_InFlight] = weakref.WeakSet()


def _forget_all() -> None:
    for inflight in list(_ALL):
        inflight.forget()


os.register_at_fork(after_in_child=_forget_all)


def _code(err: ClientError) -> str:
    return str(err.response.get("Error", {}).get("Code", ""))


def _status(err: ClientError) -> int:
    return int(err.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0))


class S3ObjectStore(ObjectStore):
    """Objects under ``s3://bucket/prefix``. One boto3 client per store (thread-safe), built
    from ``config`` (default: boto3's standard resolution) unless ``client`` is given."""

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        client: Any = None,
        conditional_writes: bool = True,
        config: S3Config | None = None,
    ) -> None:
        self.bucket = bucket
        self.config = config or S3Config()
        #: False for a store without ``If-None-Match`` (some S3 look-alikes): ``put_if_missing``
        #: then checks and writes, which is atomic only for names nobody else writes (KSUIDs)
        #: or under a lock; the lake serialises journal appends with a ZooKeeper lock then.
        self.conditional_writes = conditional_writes
        self.prefix = prefix.strip("/")
        self.uri = f"s3://{bucket}/{self.prefix}" if self.prefix else f"s3://{bucket}"
        self._client: S3Client = client or self.config.client()
        self._sent = 0
        self._sent_lock = threading.Lock()
        # Every HTTP request this store's client sends, SDK retries included (boto3 emits
        # before-send per attempt): the round trips, for benchmarks and tests. A client
        # shared between stores counts for each of them.
        self._client.meta.events.register("before-send.s3", self._count_request)
        self._inflight = _InFlight()

    def _count_request(self, **_: Any) -> None:
        with self._sent_lock:
            self._sent += 1

    @property
    def requests(self) -> int:
        """HTTP requests (round trips) sent so far through this store's client."""
        return self._sent

    @classmethod
    def from_uri(
        cls, uri: str, conditional_writes: bool = True, config: S3Config | None = None
    ) -> S3ObjectStore:
        refuse_credentials_in_uri(uri)
        if "?" in uri or "#" in uri:
            # Never echoed: a query string is where people paste tokens and secrets.
            plain = uri.split("?")[0].split("#")[0]
            raise UsageError(
                f"an s3:// lake URI takes no query string or fragment: use {plain} and give "
                "settings in the environment (AWS_ENDPOINT_URL, AWS_REGION, credentials)"
            )
        rest = uri[len("s3://") :]
        bucket, _, prefix = rest.partition("/")
        if not bucket:
            raise ObjectStoreError(uri, "an S3 URI needs a bucket: s3://bucket/prefix")
        return cls(bucket, prefix, conditional_writes=conditional_writes, config=config)

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _endpoint(self) -> str:
        """The endpoint the client talks to, as ``scheme://host[:port]`` (never a user or
        password someone put in the URL, nor its path)."""
        url = urlsplit(str(self._client.meta.endpoint_url or ""))
        # The network location after any user info, as written (``url.port`` raises on a port
        # that is out of range or not a number, which botocore lets through to the request).
        return f"{url.scheme}://{url.netloc.rpartition('@')[2] or '?'}"

    def _error(self, key: str, err: Exception) -> ObjectStoreError:
        if isinstance(err, ClientError):
            detail = f"S3 {_code(err) or _status(err)} on s3://{self.bucket}/{self._key(key)}"
            if _code(err) in _DENIED or _status(err) == 403:
                # Credentials or a policy: trying again later fails the same way.
                return ObjectStoreError(key, detail, transient=False)
        else:
            # The endpoint is named: a connection that fails is most often a wrong or
            # unreachable AWS_ENDPOINT_URL.
            detail = f"S3 request to {self._endpoint()} failed: {type(err).__name__}"
        return ObjectStoreError(key, detail)

    def _not_found(self, key: str, err: ClientError) -> Exception:
        """What a GET answered 404 means: the object is missing when S3 says so (NoSuchKey);
        a 404 without an S3 error code is an endpoint that is not S3 (a web server at
        AWS_ENDPOINT_URL), which must not read as "no such object" (a lake not found)."""
        if _code(err) != "404":  # botocore's code when the body held no S3 error
            return ObjectNotFoundError(key)
        return ObjectStoreError(
            key,
            f"the endpoint {self._endpoint()} answered HTTP 404 without an S3 error for "
            f"s3://{self.bucket}/{self._key(key)}: is it an S3 service (AWS_ENDPOINT_URL)?",
        )

    def arrow_location(self, key: str) -> tuple[Any, str]:
        """An Arrow S3 filesystem with the same endpoint, region and credentials as the
        store's client (its config's, else boto3's standard resolution), and
        ``bucket/prefix/key``."""
        import pyarrow.fs as pafs

        creds = boto3.Session(
            aws_access_key_id=self.config.access_key_id,
            aws_secret_access_key=self.config.secret_access_key,
            aws_session_token=self.config.session_token,
        ).get_credentials()
        frozen = creds.get_frozen_credentials() if creds is not None else None
        endpoint = self._client.meta.endpoint_url
        kwargs: dict[str, Any] = {"region": self._client.meta.region_name or "us-east-1"}
        if frozen is not None:
            kwargs.update(
                access_key=frozen.access_key,
                secret_key=frozen.secret_key,
                session_token=frozen.token,
            )
        if endpoint and "amazonaws.com" not in endpoint:
            kwargs["endpoint_override"] = endpoint
            kwargs["scheme"] = "https" if endpoint.startswith("https") else "http"
        return pafs.S3FileSystem(**kwargs), f"{self.bucket}/{self._key(key)}"

    def get(self, key: str) -> bytes:
        self._inflight.wait(key)
        try:
            resp = self._client.get_object(Bucket=self.bucket, Key=self._key(key))
            return resp["Body"].read()
        except ClientError as e:
            if _code(e) in _NOT_FOUND:
                raise self._not_found(key, e) from None
            raise self._error(key, e) from None
        except BotoCoreError as e:
            raise self._error(key, e) from None

    def get_range(self, key: str, start: int, length: int) -> bytes:
        self._inflight.wait(key)
        if length <= 0:
            return b""
        try:
            resp = self._client.get_object(
                Bucket=self.bucket, Key=self._key(key), Range=f"bytes={start}-{start + length - 1}"
            )
            return resp["Body"].read()
        except ClientError as e:
            if _code(e) in _NOT_FOUND:
                raise self._not_found(key, e) from None
            if _code(e) == "InvalidRange":
                return b""
            raise self._error(key, e) from None
        except BotoCoreError as e:
            raise self._error(key, e) from None

    def put(self, key: str, data: bytes) -> None:
        try:
            self._client.put_object(Bucket=self.bucket, Key=self._key(key), Body=data)
        except (ClientError, BotoCoreError) as e:
            raise self._error(key, e) from None

    def put_if_missing(self, key: str, data: bytes) -> None:
        if not self.conditional_writes:
            if self.exists(key):
                raise ObjectExistsError(key)
            self.put(key, data)
            return
        for attempt in range(_CONFLICT_RETRIES):
            try:
                self._client.put_object(
                    Bucket=self.bucket, Key=self._key(key), Body=data, IfNoneMatch="*"
                )
                return
            except ClientError as e:
                code, status = _code(e), _status(e)
                if status == 412 or code == "PreconditionFailed":
                    raise ObjectExistsError(key) from None
                if status == 409 or code == "ConditionalRequestConflict":
                    # Another conditional write to this key is in flight; ask again shortly.
                    time.sleep(min(0.005 * 2**attempt, 0.5))
                    continue
                raise self._error(key, e) from None
            except BotoCoreError as e:
                raise self._error(key, e) from None
        raise ObjectStoreError(key, "S3 conditional write kept conflicting")

    def head(self, key: str) -> ObjectInfo:
        self._inflight.wait(key)
        try:
            resp = self._client.head_object(Bucket=self.bucket, Key=self._key(key))
        except ClientError as e:
            if _code(e) in _NOT_FOUND or _status(e) == 404:
                raise ObjectNotFoundError(key) from None
            raise self._error(key, e) from None
        except BotoCoreError as e:
            raise self._error(key, e) from None
        return ObjectInfo(key, int(resp["ContentLength"]), resp["LastModified"].timestamp())

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        self._inflight.wait_all(prefix)  # this process lists what it put
        strip = len(self.prefix) + 1 if self.prefix else 0
        paginator = self._client.get_paginator("list_objects_v2")
        try:
            for page in paginator.paginate(Bucket=self.bucket, Prefix=self._key(prefix)):
                for obj in page.get("Contents", []):
                    yield ObjectInfo(
                        obj["Key"][strip:], int(obj["Size"]), obj["LastModified"].timestamp()
                    )
        except (ClientError, BotoCoreError) as e:
            raise self._error(prefix, e) from None

    def delete(self, key: str) -> None:
        self._inflight.wait(key)
        try:
            self._client.delete_object(Bucket=self.bucket, Key=self._key(key))
        except (ClientError, BotoCoreError) as e:
            raise self._error(key, e) from None

    def delete_many(self, keys: builtins.list[str]) -> None:
        for key in keys:
            self._inflight.wait(key)
        for i in range(0, len(keys), 1000):
            batch = keys[i : i + 1000]
            try:
                resp = self._client.delete_objects(
                    Bucket=self.bucket,
                    Delete={"Objects": [{"Key": self._key(k)} for k in batch], "Quiet": True},
                )
            except (ClientError, BotoCoreError) as e:
                raise self._error(batch[0], e) from None
            errors = resp.get("Errors", [])
            if errors:
                raise ObjectStoreError(batch[0], f"S3 batch delete failed for {len(errors)} keys")

    # -- background writes (see the module docstring) -----------------------------------------

    def deferring(self, batch: SyncBatch) -> ObjectStore:
        return _Deferred(self, batch)

    def settle(self, batch: SyncBatch) -> None:
        pending = list(batch.pending)
        batch.pending.clear()
        wait_futures([f for _, f in pending])
        for key, future in pending:
            error = future.exception()
            if error is None:
                continue
            if isinstance(error, ObjectExistsError) or not isinstance(error, ObjectStoreError):
                # Never ObjectExistsError here: a caller would take it for a lost race.
                raise ObjectStoreError(key, f"a background put failed: {error}") from error
            raise error

    def sync(self, batch: SyncBatch) -> None:
        self.settle(batch)  # a PUT that returned is durable
        batch.clear()

    def put_hint(self, key: str, data: bytes) -> None:
        if not self._inflight.submit_hint(key, data, self._put_quietly):
            self._put_quietly(key, data)

    def _put_quietly(self, key: str, data: bytes) -> None:
        try:
            self.put(key, data)
        except ObjectStoreError:
            pass  # a hint: readers probe past a stale one

    def flush(self) -> None:
        self._inflight.wait_all(hints=True)

    def close(self) -> None:
        self.flush()
        self._client.close()


class _Deferred(DeferringView):
    """An S3 store's puts run in the background, noted in a batch (:meth:`S3ObjectStore.deferring`).
    A plain ``put_if_missing`` is the store's own, made now: its ObjectExistsError is the
    caller's answer. Everything else is the store's own too."""

    store: S3ObjectStore

    def _defer(self, key: str, size: int, fn: Callable[[], None]) -> None:
        future = self.store._inflight.submit(key, size, fn)
        if future is None:
            fn()
        else:
            self.batch.pending.append((key, future))

    def put(self, key: str, data: bytes) -> None:
        self._defer(key, len(data), lambda: self.store.put(key, data))

    def put_if_missing_idempotent(
        self, key: str, data: bytes, after: SyncBatch | None = None
    ) -> None:
        if after:
            self.store.put_if_missing_idempotent(key, data, after)
        else:
            self._defer(key, len(data), lambda: self.store.put_if_missing_idempotent(key, data))
