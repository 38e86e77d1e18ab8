"""The request body bound (``--max-body``), as ASGI middleware around the whole app.

A declared ``Content-Length`` over the bound is refused with 413 before the app runs; a body
sent without one (chunked) is counted as it arrives and the read that crosses the bound raises
:class:`BodyTooLarge`, which the app answers with 413. Either way the handler has not finished
reading its body, so nothing was loaded or committed.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send


class BodyTooLarge(Exception):
    """The request body passed the bound while it was being read."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.limit = limit

    def __str__(self) -> str:
        return f"request body larger than the service's limit of {self.limit} bytes"


class BodyLimitMiddleware:
    """Refuse request bodies over ``limit`` bytes (413, JSON ``{"error": …}``)."""

    def __init__(self, app: ASGIApp, limit: int) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        declared = _content_length(scope)
        if declared is not None and declared > self.limit:
            await _refuse(send, str(BodyTooLarge(self.limit)))
            return
        seen = 0

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    raise BodyTooLarge(self.limit)
            return message

        await self.app(scope, counted, send)


def _content_length(scope: Scope) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            try:
                return int(value)
            except ValueError:
                return None
    return None


async def _refuse(send: Send, message: str) -> None:
    body = json.dumps({"error": message}).encode()
    headers: list[Any] = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        (b"connection", b"close"),
    ]
    await send({"type": "http.response.start", "status": 413, "headers": headers})
    await send({"type": "http.response.body", "body": body})
