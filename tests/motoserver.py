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


def _cached_module_list() -> None:
    """moto's dispatcher asks, on every request, whether the host names one of its service
    modules — by listing its package directory and stat-ing every entry (a sixth of the
    server's time per request in a profile). The list never changes while it runs."""
    import functools

    from moto import backends

    listed = tuple(backends.list_of_moto_modules())
    backends.list_of_moto_modules = functools.cache(lambda: listed)  # type: ignore[assignment]


def _cached_timestamp_parsing() -> None:
    """moto's response serializer parses every timestamp it writes with dateutil — for a
    listing, every key's modification time, each time the key is listed (a quarter of a
    LIST's time in a profile). The same strings come back again and again: parse each once."""
    import functools
    from datetime import datetime

    from moto.core import serialize

    parse = serialize.parse_to_aware_datetime
    cached = functools.lru_cache(maxsize=1 << 17)(parse)

    def parse_to_aware_datetime(value: object) -> datetime:
        if isinstance(value, str | int | float):
            return cached(value)  # type: ignore[no-any-return]
        return parse(value)  # type: ignore[no-any-return]

    serialize.parse_to_aware_datetime = parse_to_aware_datetime  # type: ignore[assignment]


def _shared_error_lookup() -> None:
    """moto builds the table of a service's error shapes for every error it answers (a 404
    for each probe of a journal entry that is not there yet): its cache lives on a factory it
    makes anew each time. One factory for the server's life keeps the table."""
    from moto.core import errors

    shared = errors.ErrorLookupFactory()
    errors.ErrorLookupFactory = lambda: shared  # type: ignore[assignment,misc]


def main() -> None:
    import logging

    from moto.server import ThreadedMotoServer

    _atomic_conditional_puts()
    _cached_module_list()
    _cached_timestamp_parsing()
    _shared_error_lookup()

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
