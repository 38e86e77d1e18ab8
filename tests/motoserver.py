"""moto's S3 server in a process of its own, for the test session (``tests/conftest.py``).

In the pytest process, the server's request handling and the tests' own work took turns on
one GIL: every S3 request the tests made waited for the test process to be free, and the
suite's S3 half ran on one core. Here the server has its own interpreter (and core).

Run as ``python -m tests.motoserver``: it prints ``host port`` on one line once it listens,
then serves until its standard input closes (the parent ends, however it ends) and exits."""

from __future__ import annotations

import sys


def _atomic_conditional_puts() -> None:
    """Make moto's conditional PUT atomic, as S3's is: moto checks ``If-None-Match: *``
    (does the key exist?) and only later stores the object, in whichever of its request
    threads runs, so two racing PUTs of one new key could both "succeed" — the later
    silently replacing the earlier — which S3 never does and the lake's commit protocol
    (put-if-missing of journal entries and catalog roots) relies on. Found when racing
    tests ran beside other work (``pytest -n 2``): a catalog create acknowledged and then
    missing. One lock around moto's PUT and POST (multipart completion) handling closes it."""
    import functools
    import threading

    from moto.s3.responses import S3Response

    lock = threading.Lock()
    for name in ("put_object", "_key_response_post"):
        original = getattr(S3Response, name)

        @functools.wraps(original)
        def locked(*args: object, __original=original, **kwargs: object) -> object:  # type: ignore[no-untyped-def]
            with lock:
                return __original(*args, **kwargs)

        setattr(S3Response, name, locked)


def main() -> None:
    import logging

    from moto.server import ThreadedMotoServer

    _atomic_conditional_puts()

    # werkzeug logs every request (hundreds a test) to stderr, which is the test session's:
    # errors only.
    logging.getLogger("werkzeug").setLevel(logging.ERROR)

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    print(host, port, flush=True)
    sys.stdin.read()  # until the parent closes it (or dies)
    server.stop()


if __name__ == "__main__":
    main()
