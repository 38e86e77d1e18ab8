"""The request body bound (``--max-body``), as ASGI middleware around the whole app.

A declared ``Content-Length`` over the bound is refused with 413 before the app runs. A body
sent without one (chunked) is counted as it arrives; once it passes the bound the app is told
the client went away (``http.disconnect``: it stops reading and runs no lake code, as for a
real disconnect), whatever it answers is dropped, and the client gets the 413 instead. Either
way the handler never had its whole body, so nothing was loaded or committed.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send


def too_large(limit: int) -> str:
    return f"request body larger than the service's limit of {limit} bytes"


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
            await _refuse(send, too_large(self.limit))
            return
        seen = 0
        exceeded = False
        started = False

        async def counted() -> Message:
            nonlocal seen, exceeded
            if exceeded:
                return {"type": "http.disconnect"}
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.limit:
                    exceeded = True
                    return {"type": "http.disconnect"}
            return message

        async def guarded(message: Message) -> None:
            nonlocal started
            if exceeded and not started:
                return  # the app's answer to the "disconnect"; the 413 below replaces it
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, counted, guarded)
        except Exception:
            if not exceeded or started:
                raise
        if exceeded and not started:
            await _refuse(send, too_large(self.limit))


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
