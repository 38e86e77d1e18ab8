"""Running the app: uvicorn on the address, with TLS when asked, access log lines redacted.

``serve`` opens the lake first (no lake, no server), refuses unsafe settings
(:meth:`ServiceSettings.check`), then blocks until interrupted. The first line on stdout,
``serving lake URI at http(s)://HOST:PORT``, carries the bound port (``--listen …:0`` asks
for any free one): tests and scripts wait for it.

With ``workers`` > 1 uvicorn starts that many processes on the one bound socket; each builds
its app with :func:`app_from_environment` from the settings this process put in
``LAKE_SERVICE_SETTINGS`` (the lake is stateless about commits, so workers are as safe as
separate servers), and their metrics are merged through ``PROMETHEUS_MULTIPROC_DIR``.
"""

from __future__ import annotations

import asyncio
import importlib
import json
import logging
import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path
from typing import Any

import uvicorn

from lake_core.config import LakeConfig
from lake_core.lake import Lake
from lake_service.app import create_app
from lake_service.auth import Tokens
from lake_service.logs import RedactSecrets
from lake_service.settings import ServiceSettings

#: What the first load and the first scan would import (about 0.5 s, most of it pandas, which
#: pyarrow imports the first time it turns Python values into arrays, as every snapshot's
#: encode does): imported when the server starts, so the first loads and scans cost what later
#: ones do. Not the SQL path (lake_core.sql and DuckDB, over a second more): a server that never
#: answers SQL never pays for it.
WARM_MODULES = (
    "lake_core.loading",
    "lake_core.inflight",
    "lake_core.scan",
    "pyarrow.dataset",
    "pyarrow.acero",
    "pandas",
)


def warm_up() -> None:
    """Import :data:`WARM_MODULES` (a server process pays it once, before it listens). A module
    that is not installed is skipped: pandas is optional (pyarrow works without it, and only
    the ``spark`` extra installs it)."""
    for name in WARM_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            continue


def build(config: LakeConfig, settings: ServiceSettings, tokens: Tokens | None = None) -> Any:
    """The app for ``settings`` over the lake at ``config``; UsageError/NotFoundError first.
    ``tokens``: the tokens file already read (by ``python -m lake_service``), else read here."""
    settings.check()
    if tokens is None:
        tokens = Tokens.read(settings.tokens) if settings.tokens is not None else Tokens.open()
    lake = Lake.open(config)
    warm_up()
    return create_app(lake, tokens, settings.max_body, settings.group_commit)


def serve(config: LakeConfig, settings: ServiceSettings, tokens: Tokens | None = None) -> None:
    """Serve until interrupted (Ctrl-C or SIGTERM: uvicorn finishes requests in flight)."""
    app = build(config, settings, tokens)
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
    options: dict[str, Any] = {
        "log_level": "info",
        "access_log": settings.access_log,
        "ssl_certfile": str(settings.tls_cert) if settings.tls_cert else None,
        "ssl_keyfile": str(settings.tls_key) if settings.tls_key else None,
        # Slow clients: a connection idle this long between requests is closed.
        "timeout_keep_alive": 5,
        "server_header": False,
    }
    sys.stdout.write(f"serving lake {config.uri} at {scheme}://{shown}:{port}\n")
    sys.stdout.flush()
    if settings.workers > 1:
        _serve_workers(config, settings, sock, options)
        return
    logging.getLogger("uvicorn.access").addFilter(RedactSecrets())
    server = uvicorn.Server(uvicorn.Config(app, **options))
    asyncio.run(server.serve(sockets=[sock]))


#: The environment variable that hands the settings to worker processes (JSON).
SETTINGS_VAR = "LAKE_SERVICE_SETTINGS"


def _serve_workers(
    config: LakeConfig, settings: ServiceSettings, sock: socket.socket, options: dict[str, Any]
) -> None:
    metrics_dir = tempfile.mkdtemp(prefix="lake-service-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = metrics_dir
    os.environ[SETTINGS_VAR] = json.dumps(
        {
            "uri": config.uri,
            "zookeeper": config.zookeeper,
            "user": config.user,
            "tokens": None if settings.tokens is None else str(settings.tokens),
            "max_body": settings.max_body,
            "group_commit": settings.group_commit,
        }
    )
    try:
        uvicorn.run(
            "lake_service.server:app_from_environment",
            factory=True,
            workers=settings.workers,
            fd=sock.fileno(),
            **options,
        )
    finally:
        shutil.rmtree(metrics_dir, ignore_errors=True)


def app_from_environment() -> Any:
    """A worker's app (uvicorn calls it in each worker process): the settings ``serve`` put in
    :data:`SETTINGS_VAR`, checked again, the lake opened in this process."""
    saved = json.loads(os.environ[SETTINGS_VAR])
    config = LakeConfig.resolve(uri=saved["uri"], zookeeper=saved["zookeeper"], user=saved["user"])
    tokens = saved["tokens"]
    settings = ServiceSettings(
        tokens=None if tokens is None else Path(tokens),
        max_body=int(saved["max_body"]),
        group_commit=bool(saved["group_commit"]),
    )
    logging.getLogger("uvicorn.access").addFilter(RedactSecrets())
    return build(config, settings)
