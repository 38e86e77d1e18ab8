"""A fault-injecting HTTP proxy between boto3 and a real S3 server (moto), on loopback.

Point ``AWS_ENDPOINT_URL`` at :attr:`FaultProxy.endpoint` and every S3 request of every process
that inherits the environment passes through it. By :class:`Rule` (method, key pattern, nth
matching request, probability from a seeded RNG) it injects:

- ``error``: a 5xx answer (S3's XML error body) without forwarding: nothing happened;
- ``drop``: the connection closed without an answer, without forwarding: nothing happened;
- ``lost``: forward (the write happens), then close the connection without the answer;
- ``lost_error``: forward (the write happens), then answer 500 instead of the real answer;
- ``delay``: sleep, then forward normally;

and outages: after a rule fires, the next ``then_outage`` requests (any method, any key) get
``outage_action`` (``error`` or ``drop``) — "S3 unavailable for N requests".

Hand-written rather than a library (toxiproxy, mitmproxy): those are either TCP-level and
blind to S3 keys and methods, or a heavy dependency whose request rewriting we would have to
audit; what the tests need is ~200 lines of ``http.server`` + ``http.client``. The proxy
passes the request line, every header (the ``Host`` header unchanged, so boto3's SigV4
signature, made for the proxy's address, still matches what the server sees; moto does not
check it, real S3 behind it would not be used) and the body byte-exact, chunked or not, so
``If-None-Match: *`` and checksums reach the server as boto3 sent them. ``Expect:
100-continue`` is answered here and not forwarded (boto3 does not sign it).

Every request is recorded in :attr:`FaultProxy.events` ``(method, path, action)`` so a test can
assert that its fault really fired: a fault test that injected nothing proves nothing.
"""

from __future__ import annotations

import http.client
import random
import re
import socket
import threading
import time
import urllib.parse
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ACTIONS = ("error", "drop", "lost", "lost_error", "delay")
#: A rule's ``key`` for a branch journal entry (``pools/<id>/branches/<n>.json``): the PUT that
#: is a commit's commit point.
JOURNAL = r"/branches/\d+\.json$"
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "proxy-connection", "expect"}


@dataclass
class Rule:
    """Which requests to hit and how. A request *matches* when ``method`` (if given) equals
    its method and ``key`` (a regex, if given) is found in its URL-decoded path with the query
    (``/bucket/lake/pools/…/branches/3.json``, ``/bucket?delete``). Among matching requests the
    rule fires on the ``nth`` and later ones (1-based; default the first), at most ``times``
    times (None: no limit), each with ``probability`` (drawn from the proxy's seeded RNG).
    With ``after``, requests match only once that other rule has fired (a sequence: "the PUT
    lands, its answer is lost, then the read-back fails")."""

    action: str
    method: str | None = None
    key: str | None = None
    nth: int = 1
    times: int | None = 1
    probability: float = 1.0
    status: int = 503
    delay: float = 0.0
    then_outage: int = 0
    outage_action: str = "error"
    after: Rule | None = None
    matched: int = 0
    fired: int = 0
    fired_on: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.action not in ACTIONS:
            raise ValueError(f"unknown fault action {self.action!r}")
        if self.outage_action not in ("error", "drop"):
            raise ValueError(f"outage_action must be error or drop, not {self.outage_action!r}")

    def matches(self, method: str, path: str) -> bool:
        if self.after is not None and self.after.fired == 0:
            return False
        if self.method is not None and self.method != method:
            return False
        return self.key is None or re.search(self.key, path) is not None


class FaultProxy:
    """The proxy: ``start()``, add rules, point clients at ``endpoint``, ``stop()``."""

    def __init__(self, upstream: str, seed: int = 0) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        self.upstream_host = parsed.hostname or "127.0.0.1"
        self.upstream_port = parsed.port or 80
        self.rules: list[Rule] = []
        self.events: list[tuple[str, str, str]] = []
        #: Every request's arrival and answer in the order they happened: ``("arrived" |
        #: "answered", method, path)`` (a dropped request is "answered" when dropped), so a
        #: test can tell which requests were in flight together.
        self.timeline: list[tuple[str, str, str]] = []
        self._outage = 0
        self._outage_action = "error"
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- control ----------------------------------------------------------------------------

    def start(self) -> str:
        proxy = self

        class Handler(_Handler):
            owner = proxy

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        server.daemon_threads = True
        self._server = server
        # stop()'s shutdown() waits for the serve loop to look up: every poll_interval (0.5 s
        # by default, a quarter second per test on average).
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True
        )
        self._thread.start()
        return self.endpoint

    @property
    def endpoint(self) -> str:
        assert self._server is not None, "start() the proxy first"
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def add(self, rule: Rule) -> Rule:
        with self._lock:
            self.rules.append(rule)
        return rule

    def clear(self) -> None:
        """Remove every rule and end any outage (requests pass again)."""
        with self._lock:
            self.rules.clear()
            self._outage = 0

    def outage(self, requests: int, action: str = "error") -> None:
        """Fail the next ``requests`` requests, whatever they are."""
        with self._lock:
            self._outage, self._outage_action = requests, action

    def count(self, action: str | None = None) -> int:
        """Requests seen (with ``action``: those that got that treatment; ``pass`` for none,
        ``outage-error``/``outage-drop`` for outages)."""
        with self._lock:
            return sum(1 for e in self.events if action is None or e[2] == action)

    # -- deciding ---------------------------------------------------------------------------

    def note(self, what: str, method: str, path: str) -> None:
        with self._lock:
            self.timeline.append((what, method, path))

    def decide(self, method: str, path: str) -> tuple[str, Rule | None]:
        with self._lock:
            self.timeline.append(("arrived", method, path))
            if self._outage > 0:
                self._outage -= 1
                action = f"outage-{self._outage_action}"
                self.events.append((method, path, action))
                return action, None
            for rule in self.rules:
                if not rule.matches(method, path):
                    continue
                rule.matched += 1
                if rule.matched < rule.nth:
                    continue
                if rule.times is not None and rule.fired >= rule.times:
                    continue
                if rule.probability < 1.0 and self._rng.random() >= rule.probability:
                    continue
                rule.fired += 1
                rule.fired_on.append(f"{method} {path}")
                if rule.then_outage:
                    self._outage, self._outage_action = rule.then_outage, rule.outage_action
                self.events.append((method, path, rule.action))
                return rule.action, rule
            self.events.append((method, path, "pass"))
            return "pass", None


_ERROR_CODES = {
    403: "AccessDenied",
    500: "InternalError",
    502: "BadGateway",
    503: "ServiceUnavailable",
}


class _Handler(BaseHTTPRequestHandler):
    owner: FaultProxy
    protocol_version = "HTTP/1.1"  # keep-alive, as boto3 expects
    disable_nagle_algorithm = True  # headers and body go out in separate sends

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    def _read_body(self) -> bytes:
        """The request body exactly as sent (chunk framing included when chunked)."""
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            raw = bytearray()
            while True:
                line = self.rfile.readline()
                raw += line
                size = int(line.split(b";", 1)[0].strip() or b"0", 16)
                if size == 0:
                    while True:  # trailers, up to the blank line
                        trailer = self.rfile.readline()
                        raw += trailer
                        if trailer in (b"\r\n", b"\n", b""):
                            return bytes(raw)
                raw += self.rfile.read(size + 2)
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _drop(self) -> None:
        self.close_connection = True
        try:
            self.connection.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass

    def _send_error(self, status: int) -> None:
        code = _ERROR_CODES.get(status, "InternalError")
        body = (
            f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code>'
            f"<Message>injected by faultproxy</Message></Error>"
        ).encode()
        self.send_response_only(status)
        self.send_header("Content-Type", "application/xml")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)
        self.wfile.flush()

    def _forward(self, body: bytes) -> tuple[int, str, list[tuple[str, str]], bytes]:
        conn = http.client.HTTPConnection(
            self.owner.upstream_host, self.owner.upstream_port, timeout=60
        )
        try:
            conn.putrequest(self.command, self.path, skip_host=True, skip_accept_encoding=True)
            for name, value in self.headers.items():
                if name.lower() in ("expect", "connection", "proxy-connection", "keep-alive"):
                    continue
                conn.putheader(name, value)
            # Headers and body in one send: Nagle + delayed ACKs would add ~40 ms otherwise.
            conn.endheaders(body or None)
            resp = conn.getresponse()
            data = resp.read()
            return resp.status, resp.reason, resp.getheaders(), data
        finally:
            conn.close()

    def _handle(self) -> None:
        body = self._read_body()
        path = urllib.parse.unquote(self.path)
        answered = False

        def answer() -> None:
            # Noted before the answer goes out: a client that acts on the answer acts after
            # the note (the timeline's order is then the order the client saw).
            nonlocal answered
            answered = True
            self.owner.note("answered", self.command, path)

        try:
            self._answer(body, path, answer)
        finally:
            if not answered:
                answer()

    def _answer(self, body: bytes, path: str, answer: Any) -> None:
        action, rule = self.owner.decide(self.command, path)
        if action == "drop" or action == "outage-drop":
            answer()
            self._drop()
            return
        if action == "error" or action == "outage-error":
            answer()
            self._send_error(rule.status if rule is not None else 503)
            return
        if action == "delay" and rule is not None:
            time.sleep(rule.delay)
        status, reason, headers, data = self._forward(body)
        answer()
        if action == "lost":
            self._drop()
            return
        if action == "lost_error":
            self._send_error(500)
            return
        self.send_response_only(status, reason)
        for name, value in headers:
            if name.lower() in _HOP_BY_HOP or name.lower() == "content-length":
                continue
            self.send_header(name, value)
        if self.command == "HEAD":
            length = dict((k.lower(), v) for k, v in headers).get("content-length", "0")
            self.send_header("Content-Length", length)
        else:
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD" and data:
            self.wfile.write(data)
        self.wfile.flush()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = _handle


@contextmanager
def proxied(
    s3_endpoint: str, monkeypatch: Any, *, seed: int, tries: int = 3
) -> Iterator[FaultProxy]:
    """A proxy in front of moto (``s3_endpoint``) that every S3 client made meanwhile goes
    through (``AWS_ENDPOINT_URL``, set with ``monkeypatch``), boto3 making ``tries`` tries per
    request so faults bite within a few requests; stopped on exit."""
    px = FaultProxy(s3_endpoint, seed=seed)
    monkeypatch.setenv("AWS_ENDPOINT_URL", px.start())
    monkeypatch.setenv("AWS_MAX_ATTEMPTS", str(tries))
    try:
        yield px
    finally:
        px.stop()
