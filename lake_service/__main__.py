"""``python -m lake_service``: what ``lake serve`` runs (the CLI starts this module in its
own process, since the faces never import each other). Same flags as ``lake serve``, plus
``--lake``/``--zk`` (else ``LAKE_ROOT``/``LAKE_ZOOKEEPER``). Errors: one ``error:`` line,
exit 2 for a usage error, 1 otherwise."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from lake_core.config import LakeConfig
from lake_core.errors import LakeError, UsageError
from lake_core.units import parse_size
from lake_service.auth import Tokens
from lake_service.settings import DEFAULT_LISTEN, ServiceSettings, parse_listen


def parse(argv: Sequence[str]) -> tuple[LakeConfig, ServiceSettings]:
    p = argparse.ArgumentParser(prog="lake serve", description="serve the lake over HTTP")
    p.add_argument("--lake", metavar="URI")
    p.add_argument("--zk", metavar="HOST:PORT[,…]")
    p.add_argument("--listen", default=DEFAULT_LISTEN, metavar="HOST:PORT")
    p.add_argument("--tokens", type=Path, metavar="FILE")
    p.add_argument("--tls-cert", type=Path, metavar="FILE")
    p.add_argument("--tls-key", type=Path, metavar="FILE")
    p.add_argument("--max-body", default="1GB", metavar="SIZE")
    p.add_argument("--insecure", action="store_true")
    p.add_argument("--no-access-log", action="store_true")
    p.add_argument("--workers", type=int, default=1, metavar="N")
    p.add_argument("--group-commit", action="store_true")
    args = p.parse_args(list(argv))
    host, port = parse_listen(args.listen)
    settings = ServiceSettings(
        host=host,
        port=port,
        tokens=args.tokens,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        max_body=parse_size(args.max_body),
        insecure=args.insecure,
        access_log=not args.no_access_log,
        workers=args.workers,
        group_commit=args.group_commit,
    )
    return LakeConfig.resolve(uri=args.lake, zookeeper=args.zk), settings


def main(argv: Sequence[str] | None = None) -> int:
    try:
        config, settings = parse(sys.argv[1:] if argv is None else argv)
        # The refusals first, before the second or so of importing the server (FastAPI,
        # uvicorn, pyarrow): a mistyped flag or a bad tokens file answers at once.
        settings.check()
        tokens = Tokens.read(settings.tokens) if settings.tokens is not None else None
        from lake_service.server import serve

        serve(config, settings, tokens)
    except UsageError as e:
        sys.stderr.write(f"error: {e}\n")
        return 2
    except LakeError as e:
        sys.stderr.write(f"error: {e}\n")
        return 1
    except OSError as e:  # the address is taken, or the certificate cannot be read
        sys.stderr.write(f"error: cannot serve: {e.strerror or e}\n")
        return 1
    except KeyboardInterrupt:
        return 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
