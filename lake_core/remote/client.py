"""The HTTP transport of the lake service's client, over httpx.

httpx rather than urllib: it streams multipart uploads from open files in chunks (a large
file is never read whole into memory, stdin goes chunked), streams responses for Arrow
query results, keeps connections alive between requests, and verifies TLS by default (honouring
``SSL_CERT_FILE``). It is imported only by this package, so a local lake never loads it.

Invariants: the token travels only in the ``Authorization`` header and appears in no
exception or message; every error response becomes the lake error the server raised
(:func:`lake_core.remote.wire.error_from_body`); a write whose connection fails after it was
sent is reported as possibly committed, never as "nothing happened".
"""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any
from urllib.parse import quote, urlsplit, urlunsplit

import httpx

from lake_core.remote.wire import API_PREFIX, JSON, POOLS_ROUTE, RemoteError, error_from_body

#: Seconds to connect; reads wait as long as a compaction or a large load may take.
CONNECT_TIMEOUT = 10.0
READ_TIMEOUT = 3600.0


def pool_path(pool: str, *rest: str) -> str:
    """``/pools/<pool>/<rest>``, every segment percent-encoded (a name is never a path)."""
    parts = [POOLS_ROUTE, quote(pool, safe="")] + [quote(r, safe="") for r in rest]
    return "/".join(parts)


def _masked(url: str) -> str:
    """``url`` with the password of its user info replaced by ``***``."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{parts.username}:***@{host}"))


class ServiceClient:
    """One lake service at ``base_url``, with an optional bearer ``token``."""

    def __init__(self, base_url: str, token: str | None = None) -> None:
        base = base_url.rstrip("/")
        # The service's address with its API prefix pasted on (``http://host:9867/v1``, as
        # its routes read) means the service itself: the prefix is added to every request.
        self.base_url = base[: -len(API_PREFIX)] if base.endswith(API_PREFIX) else base
        #: The URL as messages show it: a password in it (``http://user:pw@host``) masked.
        self.shown_url = _masked(self.base_url)
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        self._http = httpx.Client(
            base_url=self.base_url + API_PREFIX,
            headers=headers,
            timeout=httpx.Timeout(READ_TIMEOUT, connect=CONNECT_TIMEOUT),
        )

    def close(self) -> None:
        self._http.close()

    def _unreachable(self, e: httpx.HTTPError, write: bool) -> RemoteError:
        what = type(e).__name__
        if write and not isinstance(e, httpx.ConnectError | httpx.ConnectTimeout):
            return RemoteError(
                f"lost the connection to the lake service at {self.shown_url} ({what}) before "
                "it answered: the change may or may not have been committed; check with "
                "`lake log`"
            )
        # The reason (refused, a certificate that does not verify) helps; it holds no header.
        reason = str(e).strip()
        detail = f"{what}: {reason}" if reason else what
        return RemoteError(f"cannot reach the lake service at {self.shown_url} ({detail})")

    def _raise_for(self, response: httpx.Response) -> None:
        if response.status_code < 400:
            return
        try:
            body = json.loads(response.read())
        except ValueError:
            body = None
        if response.status_code == 404 and not (isinstance(body, dict) and "type" in body):
            # Not a lake error (those name their type): no such route, so the URL is not the
            # service's address (a path too many, another server on that port).
            raise RemoteError(
                f"no lake service route {response.request.url.path} at {self.shown_url} "
                "(HTTP 404): give the service's address, as `lake serve` printed it",
                404,
            )
        raise error_from_body(response.status_code, body)

    def get_json(self, path: str, params: Mapping[str, Any] | None = None) -> Any:
        try:
            response = self._http.get(path, params=_params(params))
        except httpx.HTTPError as e:
            raise self._unreachable(e, write=False) from None
        self._raise_for(response)
        return response.json()

    def get_bytes(self, path: str, params: Mapping[str, Any] | None = None) -> bytes:
        try:
            response = self._http.get(path, params=_params(params))
        except httpx.HTTPError as e:
            raise self._unreachable(e, write=False) from None
        self._raise_for(response)
        return response.content

    def send_json(
        self, method: str, path: str, body: Any = None, params: Mapping[str, Any] | None = None
    ) -> Any:
        content = None if body is None else json.dumps(body).encode()
        headers = {"Content-Type": JSON} if content is not None else {}
        try:
            response = self._http.request(
                method, path, content=content, headers=headers, params=_params(params)
            )
        except httpx.HTTPError as e:
            raise self._unreachable(e, write=True) from None
        self._raise_for(response)
        return response.json()

    def upload(
        self,
        path: str,
        files: Sequence[tuple[str, Any]],
        params: Mapping[str, Any] | None = None,
    ) -> Any:
        """POST ``files`` (name, open binary file) as multipart parts, streamed. A file whose
        size is not known up front (a pipe, stdin) goes chunked, never read whole first."""
        parts = [("file", (name, _sized(f), "application/octet-stream")) for name, f in files]
        try:
            response = self._http.post(path, files=parts, params=_params(params))
        except httpx.HTTPError as e:
            raise self._unreachable(e, write=True) from None
        self._raise_for(response)
        return response.json()

    @contextmanager
    def stream(
        self, path: str, params: Mapping[str, Any] | None = None, body: Any = None
    ) -> Iterator[httpx.Response]:
        """A GET (a POST of JSON ``body`` when given) whose answer is read as it arrives;
        error responses raise before the yield."""
        method, content = ("GET", None) if body is None else ("POST", json.dumps(body).encode())
        headers = {"Content-Type": JSON} if content is not None else None
        try:
            with self._http.stream(
                method, path, params=_params(params), content=content, headers=headers
            ) as response:
                self._raise_for(response)
                yield response
        except httpx.HTTPError as e:
            raise self._unreachable(e, write=False) from None


class _Unsized:
    """A stream httpx cannot size (it would take a pipe's ``fstat`` size, 0 or what is
    buffered, for its Content-Length): only ``read``, so the body is sent chunked."""

    def __init__(self, stream: Any) -> None:
        self._stream = stream

    def read(self, size: int = -1) -> bytes:
        data: bytes = self._stream.read(size)
        return data


def _sized(stream: Any) -> Any:
    """``stream`` itself when it is a regular file (sent with its length), else unsized."""
    try:
        return stream if stat.S_ISREG(os.fstat(stream.fileno()).st_mode) else _Unsized(stream)
    except (AttributeError, OSError, ValueError):
        return _Unsized(stream)


def _params(params: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if params is None:
        return None
    return {k: v for k, v in params.items() if v is not None}
