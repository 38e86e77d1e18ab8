"""Open an object store from a lake URI: a directory path, ``file://…`` or ``s3://bucket/prefix``.

Backends are imported lazily so that a local-only user never imports boto3.
"""

from __future__ import annotations

from urllib.parse import unquote, urlparse

from lake_core.errors import UsageError
from lake_core.stores.base import ObjectStore
from lake_core.stores.s3config import S3Config


def open_store(
    uri: str, conditional_writes: bool = True, s3: S3Config | None = None
) -> ObjectStore:
    """The store for ``uri``. Raises UsageError for an unsupported scheme.
    ``conditional_writes=False`` is for S3 look-alikes without ``If-None-Match`` (local disk
    always has an atomic exclusive create). ``s3``: how to reach S3 (default: boto3's
    standard resolution)."""
    if not uri:
        raise UsageError("no lake given: pass --lake URI or set LAKE_ROOT")
    if uri.startswith("s3://"):
        from lake_core.stores.s3 import S3ObjectStore

        return S3ObjectStore.from_uri(uri, conditional_writes, s3)
    from lake_core.stores.local import LocalObjectStore

    if uri.startswith("file://"):
        return LocalObjectStore(unquote(urlparse(uri).path))
    if "://" in uri:
        scheme = uri.split("://")[0]
        if scheme.lower() in ("http", "https"):
            # The CLI and Lake.open take a service URL to a lake client before this; what
            # reaches here wants the storage itself (lake init, a store of its own).
            raise UsageError(
                f"{scheme}://… is a lake service, which serves a lake that exists: create or "
                "open the lake where it is stored (a path, file:// or s3://) and serve that"
            )
        raise UsageError(
            f"unsupported lake URI scheme in {scheme}://…: use a path, file://, s3:// "
            "(or http(s):// for a lake service)"
        )
    return LocalObjectStore(uri)
