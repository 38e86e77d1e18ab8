"""``lake serve``: the lake over HTTP.

The server is the ``lake_service`` face; faces never import each other, so this command
checks its flags and then replaces its own process with ``python -m lake_service`` (same
interpreter, same environment), which opens the lake and runs uvicorn. Signals and the exit
status are the server's own.
"""

from __future__ import annotations

import importlib.util
import os
import sys

from lake_cli.context import LakeContext, pass_lake
from lake_cli.options import command, option
from lake_core.errors import UsageError
from lake_core.remote.uri import is_remote_uri
from lake_core.units import parse_size

#: The packages the server needs (the ``service`` extra).
_NEEDS = ("lake_service", "fastapi", "uvicorn", "prometheus_client", "multipart")


@command(
    "serve",
    "serve the lake over HTTP (bearer tokens with read, write or admin scope; docs/service.md)",
    "  lake serve --listen 127.0.0.1:9867\n"
    "  lake serve --listen 0.0.0.0:9867 --tokens tokens.txt --tls-cert c.pem --tls-key k.pem\n"
    "  lake serve --group-commit          # many small loads at once: fewer, shared commits\n"
    "  lake --lake http://127.0.0.1:9867 --token T query -p logs -f json   # a client\n"
    "\nFILE holds one `TOKEN SCOPE` pair a line (SCOPE read, write or admin). Without\n"
    "--tokens the service only listens on a loopback address, unless --insecure.\n"
    "OpenAPI docs at /docs; /health; /metrics in the Prometheus text format.\n",
)
@option(
    "--listen",
    default="127.0.0.1:9867",
    metavar="HOST:PORT",
    help="address to serve on (port 0: any free port)",
)
@option("--tokens", metavar="FILE", help="bearer tokens and their scopes, `TOKEN SCOPE` a line")
@option("--tls-cert", metavar="FILE", help="serve HTTPS with this certificate (PEM)")
@option("--tls-key", metavar="FILE", help="the certificate's private key (PEM)")
@option(
    "--max-body",
    default="1GB",
    metavar="SIZE",
    help="refuse request bodies (uploads) larger than SIZE with 413 (default 1GB)",
)
@option(
    "--insecure",
    is_flag=True,
    help="allow serving a non-loopback address without --tokens (anyone reaching it can "
    "read and change the lake)",
)
@option("--no-access-log", is_flag=True, help="no access log line per request")
@option(
    "--workers",
    default="1",
    metavar="N",
    help="server processes sharing the address (default 1); each opens the lake itself",
)
@option(
    "--group-commit",
    is_flag=True,
    help="loads into one pool and branch that arrive together may land as one commit (each "
    "client is told that commit's id; its message lists every load)",
)
@pass_lake
def serve(
    lk: LakeContext,
    listen: str,
    tokens: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    max_body: str,
    insecure: bool,
    no_access_log: bool,
    workers: str,
    group_commit: bool,
) -> None:
    config = lk.config()
    if is_remote_uri(config.uri):
        raise UsageError("lake serve serves a lake on disk or S3, not another lake service")
    parse_size(max_body)
    missing = [name for name in _NEEDS if importlib.util.find_spec(name) is None]
    if missing:
        raise UsageError(f"lake serve needs {', '.join(missing)}: pip install 'lakepool[service]'")
    argv = [sys.executable, "-m", "lake_service", "--lake", config.uri, "--listen", listen]
    argv += ["--max-body", max_body]
    if config.zookeeper:
        argv += ["--zk", config.zookeeper]
    for flag, value in (("--tokens", tokens), ("--tls-cert", tls_cert), ("--tls-key", tls_key)):
        if value is not None:
            argv += [flag, value]
    if insecure:
        argv.append("--insecure")
    if no_access_log:
        argv.append("--no-access-log")
    if not workers.isdigit() or not 1 <= int(workers) <= 64:
        raise UsageError(f"--workers must be 1 to 64, not {workers!r}")
    argv += ["--workers", workers]
    if group_commit:
        argv.append("--group-commit")
    sys.stdout.flush()
    sys.stderr.flush()
    os.execv(sys.executable, argv)
