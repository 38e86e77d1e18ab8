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
"""

from __future__ import annotations

import builtins
import threading
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import boto3
from botocore.exceptions import BotoCoreError, ClientError

from lake_core.errors import ObjectExistsError, ObjectNotFoundError, ObjectStoreError
from lake_core.stores.base import ObjectInfo, ObjectStore
from lake_core.stores.s3config import S3Config, retries

__all__ = ["S3Config", "S3ObjectStore", "retries"]

if TYPE_CHECKING:
    from mypy_boto3_s3 import S3Client

_NOT_FOUND = {"404", "NoSuchKey", "NotFound"}
_CONFLICT_RETRIES = 20


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
        rest = uri[len("s3://") :]
        bucket, _, prefix = rest.partition("/")
        if not bucket:
            raise ObjectStoreError(uri, "an S3 URI needs a bucket: s3://bucket/prefix")
        return cls(bucket, prefix, conditional_writes=conditional_writes, config=config)

    def _key(self, key: str) -> str:
        return f"{self.prefix}/{key}" if self.prefix else key

    def _error(self, key: str, err: Exception) -> ObjectStoreError:
        if isinstance(err, ClientError):
            detail = f"S3 {_code(err) or _status(err)} on s3://{self.bucket}/{self._key(key)}"
        else:
            detail = f"S3 request failed: {type(err).__name__}"
        return ObjectStoreError(key, detail)

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
        try:
            resp = self._client.get_object(Bucket=self.bucket, Key=self._key(key))
            return resp["Body"].read()
        except ClientError as e:
            if _code(e) in _NOT_FOUND:
                raise ObjectNotFoundError(key) from None
            raise self._error(key, e) from None
        except BotoCoreError as e:
            raise self._error(key, e) from None

    def get_range(self, key: str, start: int, length: int) -> bytes:
        if length <= 0:
            return b""
        try:
            resp = self._client.get_object(
                Bucket=self.bucket, Key=self._key(key), Range=f"bytes={start}-{start + length - 1}"
            )
            return resp["Body"].read()
        except ClientError as e:
            if _code(e) in _NOT_FOUND:
                raise ObjectNotFoundError(key) from None
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
        try:
            self._client.delete_object(Bucket=self.bucket, Key=self._key(key))
        except (ClientError, BotoCoreError) as e:
            raise self._error(key, e) from None

    def delete_many(self, keys: builtins.list[str]) -> None:
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

    def close(self) -> None:
        self._client.close()
