"""``/metrics`` in the Prometheus text format: requests, latency, errors, commits.

Each app has its own registry (two apps in one process, as in tests, never share counters).
With several worker processes (``lake serve --workers N``) each writes its values to files in
``PROMETHEUS_MULTIPROC_DIR`` (prometheus_client's multiprocess mode, chosen when that
variable is set before the worker starts) and ``/metrics`` sums every worker's. Requests are
labelled by route template (``/v1/pools/{pool}/log``), never by the raw path, so
a client cannot grow the label set, and no label holds a pool name, token or query string.
"""

from __future__ import annotations

import os
import time

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from starlette.types import ASGIApp, Message, Receive, Scope, Send

CONTENT_TYPE = CONTENT_TYPE_LATEST


class ServiceMetrics:
    """The counters and histogram of one app."""

    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self.requests = Counter(
            "lake_requests",
            "HTTP requests served",
            ["method", "route", "status"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "lake_request_seconds",
            "Time to the end of the response",
            ["method", "route"],
            registry=self.registry,
        )
        self.errors = Counter(
            "lake_errors",
            "Responses with status 400 or more",
            ["route", "status"],
            registry=self.registry,
        )
        self.commits = Counter(
            "lake_commits",
            "Commits made through the service",
            ["operation"],
            registry=self.registry,
        )

    def render(self) -> bytes:
        if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
            from prometheus_client import multiprocess

            merged = CollectorRegistry()
            multiprocess.MultiProcessCollector(merged)  # type: ignore[no-untyped-call]
            return generate_latest(merged)
        return generate_latest(self.registry)


class MetricsMiddleware:
    """Count every HTTP request and time it to the end of its response body."""

    def __init__(self, app: ASGIApp, metrics: ServiceMetrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            route = scope.get("route")
            template = getattr(route, "path", None) or "unmatched"
            method = scope.get("method", "")
            self.metrics.requests.labels(method, template, str(status)).inc()
            self.metrics.latency.labels(method, template).observe(time.perf_counter() - start)
            if status >= 400:
                self.metrics.errors.labels(template, str(status)).inc()
