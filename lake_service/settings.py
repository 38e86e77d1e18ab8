"""How ``lake serve`` was asked to run, resolved once into a frozen object: where to listen,
the tokens file, TLS, the request body bound. Parsing the address and deciding whether it is
loopback live here so the refusal rule (no tokens off loopback without ``--insecure``) has
one home."""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path

from lake_core.errors import UsageError

DEFAULT_LISTEN = "127.0.0.1:9867"
#: Request bodies (uploads) larger than this are refused with 413 unless --max-body says more.
DEFAULT_MAX_BODY = 1024**3


@dataclass(frozen=True)
class ServiceSettings:
    """``lake serve``'s settings. Invariant (:meth:`check`): a non-loopback ``host`` has a
    tokens file or ``insecure``; TLS needs both the certificate and the key."""

    host: str = "127.0.0.1"
    port: int = 9867
    tokens: Path | None = None
    tls_cert: Path | None = None
    tls_key: Path | None = None
    max_body: int = DEFAULT_MAX_BODY
    insecure: bool = False
    #: Write one access log line a request (never with tokens or secrets: :mod:`.logs`).
    access_log: bool = True
    #: Server processes on the one socket (uvicorn's workers); each opens the lake itself.
    workers: int = 1
    #: Loads of one pool and branch that arrive together may land as one commit.
    group_commit: bool = False

    def check(self) -> None:
        """Refuse settings that would serve the lake open or half-configured."""
        if (self.tls_cert is None) != (self.tls_key is None):
            raise UsageError("--tls-cert and --tls-key go together")
        if self.tls_cert is not None and self.tls_key is not None:
            check_tls(self.tls_cert, self.tls_key)
        if self.max_body < 1:
            raise UsageError("--max-body must be at least 1 byte")
        if not 1 <= self.workers <= 64:
            raise UsageError(f"--workers must be 1 to 64, not {self.workers}")
        if self.tokens is None and not self.insecure and not is_loopback(self.host):
            raise UsageError(
                f"refusing to serve the lake on {self.host} without --tokens: anyone who can "
                "reach it could read and change it (pass --insecure to do so anyway)"
            )


def check_tls(cert: Path, key: Path) -> None:
    """Refuse, before the server says it is serving, a certificate and key it could not use:
    a file missing, a certificate that is not PEM, a key that is not the certificate's."""
    import ssl

    for flag, path in (("--tls-cert", cert), ("--tls-key", key)):
        if not path.is_file():
            raise UsageError(f"{flag} {path}: no such file")
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_verify_locations(cafile=str(cert))
    except ssl.SSLError as e:
        raise UsageError(f"--tls-cert {cert} is not a PEM certificate ({e.reason})") from None
    except OSError as e:
        raise UsageError(f"--tls-cert {cert}: {e.strerror or e}") from None
    try:
        context.load_cert_chain(str(cert), str(key))
    except ssl.SSLError as e:
        raise UsageError(
            f"--tls-key {key} is not the private key of --tls-cert {cert} ({e.reason})"
        ) from None
    except OSError as e:
        raise UsageError(f"--tls-key {key}: {e.strerror or e}") from None


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) → host and port (0: any free port)."""
    host, sep, port_text = text.rpartition(":")
    if not sep or not host or not port_text.isdigit():
        raise UsageError(f"--listen must be HOST:PORT, not {text!r}")
    port = int(port_text)
    if port > 65535:
        raise UsageError(f"--listen port must be 0 to 65535, not {port}")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return host, port


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and loopback addresses (127.0.0.0/8, ::1)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
