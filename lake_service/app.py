"""The ASGI app: FastAPI (OpenAPI at ``/docs``) over one open lake.

The app keeps no state about commits: every write goes through lake_core's journal and locks,
exactly as a direct user's, so several servers on one lake, and servers beside CLI users, are
safe. It keeps each pool's handle across requests (:mod:`lake_service.handles`: caches of
immutable commits and snapshots, re-checked against the catalog on every request), as a
long-lived direct user does.

Every failure answers JSON ``{"error": …}`` (:mod:`lake_core.remote.wire`) and the server keeps
serving: lake errors by their kind, auth 401/403, unknown routes 404, bad bodies 400, wrong
media types 415, oversize bodies 413, anything unexpected 500 (logged here, never with its
details in the response).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from lake_core.errors import LakeError
from lake_core.lake import Lake
from lake_core.remote.wire import error_body, status_of
from lake_service.auth import AuthError, Tokens
from lake_service.handles import PoolHandles
from lake_service.limits import BodyLimitMiddleware
from lake_service.metrics import CONTENT_TYPE, MetricsMiddleware, ServiceMetrics
from lake_service.routes import UnsupportedMediaType, router
from lake_service.settings import DEFAULT_MAX_BODY

log = logging.getLogger("lake_service")


@dataclass
class ServiceState:
    """What every request reads: the lake, its pools' handles, the accepted tokens, the
    metrics, and whether concurrent loads may share a commit (``--group-commit``)."""

    lake: Lake
    tokens: Tokens
    metrics: ServiceMetrics
    pools: PoolHandles
    group_commit: bool = False


def create_app(
    lake: Lake,
    tokens: Tokens | None = None,
    max_body: int = DEFAULT_MAX_BODY,
    group_commit: bool = False,
) -> Any:
    """The service for ``lake``; ``tokens`` None serves without auth (loopback use).
    ``group_commit``: loads of one pool and branch that arrive together may land as one
    commit (:mod:`lake_core.grouping`). Returns the ASGI app (the FastAPI app wrapped in the
    body bound)."""
    app = FastAPI(
        title="lakepool lake service",
        description="The lake's pools over HTTP: docs/service.md.",
        version="1",
    )
    metrics = ServiceMetrics()
    app.state.service = ServiceState(
        lake, tokens or Tokens.open(), metrics, PoolHandles(lake), group_commit
    )
    app.include_router(router)

    @app.get("/health", tags=["service"])
    def health() -> dict[str, str]:
        """Liveness: the server answers (no token needed)."""
        return {"status": "ok"}

    @app.get("/metrics", tags=["service"])
    def prometheus() -> Response:
        """Requests, latency, errors and commits in the Prometheus text format."""
        return Response(metrics.render(), media_type=CONTENT_TYPE)

    _add_error_handlers(app)
    # Innermost: an unexpected error is answered here and goes no further (see the class).
    app.add_middleware(UnexpectedErrorMiddleware)
    app.add_middleware(MetricsMiddleware, metrics=metrics)
    app.add_middleware(BodyLimitMiddleware, limit=max_body)
    return app


INTERNAL_ERROR = "internal error ({}); see the server log"


class UnexpectedErrorMiddleware:
    """Answer an exception no handler took (a bug) with 500 ``internal error (Type); see the
    server log`` and log its traceback, without passing it on.

    Starlette's handler for ``Exception`` answers too, then re-raises for the server to log,
    and uvicorn closes the connection of a request whose application raised: a client that
    had already sent its next request on that keep-alive connection saw it reset. Caught here,
    the connection is kept. An error after the response started (a query stream broken
    midway) is passed on: the client must see the stream end early, not a second answer."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def sending(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception as exc:
            if started:
                raise
            await _internal_error(exc, scope.get("path", ""))(scope, receive, send)


def _error(status: int, body: dict[str, Any], headers: Mapping[str, str] | None = None) -> Response:
    return JSONResponse(body, status_code=status, headers=headers)


def _internal_error(exc: Exception, path: str) -> Response:
    """The bare 500 for a bug, its traceback logged here and its details nowhere else."""
    log.error("unexpected %s serving %s", type(exc).__name__, path, exc_info=exc)
    return _error(500, {"error": INTERNAL_ERROR.format(type(exc).__name__)})


def _add_error_handlers(app: FastAPI) -> None:
    async def lake_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, LakeError)
        return _error(status_of(exc), error_body(exc))

    async def auth_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, AuthError)
        headers = {"WWW-Authenticate": "Bearer"} if exc.status == 401 else None
        return _error(exc.status, {"error": exc.message}, headers)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        detail = exc.detail if isinstance(exc.detail, str) else "bad request"
        return _error(exc.status_code, {"error": detail.lower()}, exc.headers)

    async def invalid_request(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        problems = []
        for err in exc.errors()[:3]:
            where = ".".join(str(p) for p in err.get("loc", ()) if p != "body")
            problems.append(f"{where}: {err.get('msg', 'invalid')}" if where else err.get("msg"))
        return _error(400, {"error": "invalid request: " + "; ".join(map(str, problems))})

    async def disconnected(request: Request, exc: Exception) -> Response:
        # Nobody is listening; what matters is that nothing was loaded (the body was never
        # complete, so the load never started).
        log.info("client disconnected before its request body was complete")
        return _error(400, {"error": "client disconnected before the request body was complete"})

    async def wrong_media_type(request: Request, exc: Exception) -> Response:
        return _error(415, {"error": str(exc)})

    async def unexpected(request: Request, exc: Exception) -> Response:
        # Errors of the outer middleware only: the app's own are UnexpectedErrorMiddleware's.
        return _internal_error(exc, request.url.path)

    app.add_exception_handler(LakeError, lake_error)
    app.add_exception_handler(AuthError, auth_error)
    app.add_exception_handler(HTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid_request)
    app.add_exception_handler(ClientDisconnect, disconnected)
    app.add_exception_handler(UnsupportedMediaType, wrong_media_type)
    app.add_exception_handler(Exception, unexpected)
