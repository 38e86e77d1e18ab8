"""Running the app: uvicorn on the address, with TLS when asked, access log lines redacted.

``serve`` opens the lake first (no lake, no server), refuses unsafe settings
(:meth:`ServiceSettings.check`), then blocks until interrupted. The first line on stdout,
``serving lake URI at http(s)://HOST:PORT``, carries the bound port (``--listen …:0`` asks
for any free one): tests and scripts wait for it.
"""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
from typing import Any

import uvicorn

from lake_core.config import LakeConfig
from lake_core.lake import Lake
from lake_service.app import create_app
from lake_service.auth import Tokens
from lake_service.logs import RedactSecrets
from lake_service.settings import ServiceSettings


def build(config: LakeConfig, settings: ServiceSettings) -> Any:
    """The app for ``settings`` over the lake at ``config``; UsageError/NotFoundError first."""
    settings.check()
    tokens = Tokens.read(settings.tokens) if settings.tokens is not None else Tokens.open()
    lake = Lake.open(config)
    return create_app(lake, tokens, settings.max_body)


def serve(config: LakeConfig, settings: ServiceSettings) -> None:
    """Serve until interrupted (Ctrl-C or SIGTERM: uvicorn finishes requests in flight)."""
    app = build(config, settings)
    family = socket.AF_INET6 if ":" in settings.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit it (Linux): a response's headers and body go out as two
    # writes, and with Nagle's algorithm the body would wait for the client's delayed ACK of
    # the headers, 40 ms on every keep-alive request.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((settings.host, settings.port))
    # Listening before the line below: a client that read it connects at once and waits in
    # the backlog until uvicorn accepts, instead of being refused.
    sock.listen(2048)
    port = sock.getsockname()[1]
    scheme = "https" if settings.tls_cert else "http"
    shown = f"[{settings.host}]" if ":" in settings.host else settings.host
    logging.getLogger("uvicorn.access").addFilter(RedactSecrets())
    server = uvicorn.Server(
        uvicorn.Config(
            app,
            log_level="info",
            access_log=settings.access_log,
            ssl_certfile=str(settings.tls_cert) if settings.tls_cert else None,
            ssl_keyfile=str(settings.tls_key) if settings.tls_key else None,
            # Slow clients: a connection idle this long between requests is closed.
            timeout_keep_alive=5,
            server_header=False,
        )
    )
    sys.stdout.write(f"serving lake {config.uri} at {scheme}://{shown}:{port}\n")
    sys.stdout.flush()
    asyncio.run(server.serve(sockets=[sock]))
