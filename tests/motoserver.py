"""moto's S3 server in a process of its own, for the test session (``tests/conftest.py``).

In the pytest process, the server's request handling and the tests' own work took turns on
one GIL: every S3 request the tests made waited for the test process to be free, and the
suite's S3 half ran on one core. Here the server has its own interpreter (and core).

Run as ``python -m tests.motoserver``: it prints ``host port`` on one line once it listens,
then serves until its standard input closes (the parent ends, however it ends) and exits."""

from __future__ import annotations

import sys


def main() -> None:
    import logging

    from moto.server import ThreadedMotoServer

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
