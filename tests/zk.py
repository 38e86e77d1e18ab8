"""A real ZooKeeper server for tests: Debian's ``zookeeper`` package run standalone.

``java -cp '/usr/share/java/*' org.apache.zookeeper.server.ZooKeeperServerMain <cfg>`` with a
temp ``dataDir``, a free ``clientPort`` on 127.0.0.1 and the admin server off. The server runs
in its own session (so a Ctrl-C of pytest does not reach it half-way) and is stopped by pid.

``tickTime`` is 500 ms, so the server grants session timeouts between 1 s and 10 s, which keeps
session-loss tests short.
"""

from __future__ import annotations

import atexit
import contextlib
import glob
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

CLASSPATH = "/usr/share/java/*"
MAIN = "org.apache.zookeeper.server.ZooKeeperServerMain"
TICK_MS = 500


def zookeeper_installed() -> bool:
    return bool(glob.glob("/usr/share/java/zookeeper*.jar"))


def free_port() -> int:
    """A TCP port nothing listens on right now (also used as a port that refuses connections)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class ZooKeeperServer:
    """One standalone server under ``workdir``. ``hosts`` is what clients pass to kazoo."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.port = free_port()
        self.hosts = f"127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> None:
        if not zookeeper_installed():
            raise RuntimeError("ZooKeeper is not installed: run `bash scripts/setup.sh`")
        data = self.workdir / "data"
        data.mkdir(parents=True, exist_ok=True)
        cfg = self.workdir / "zoo.cfg"
        cfg.write_text(
            f"tickTime={TICK_MS}\n"
            f"dataDir={data}\n"
            f"clientPort={self.port}\n"
            "clientPortAddress=127.0.0.1\n"
            "admin.enableServer=false\n"
            "maxClientCnxns=0\n"
        )
        log = open(self.workdir / "server.log", "ab")  # noqa: SIM115 - handed to the child
        try:
            self.proc = subprocess.Popen(
                # Client-VM-like flags: a test server needs a fast start, not peak throughput.
                [
                    "java",
                    "-Xmx256m",
                    "-XX:+UseSerialGC",
                    "-XX:TieredStopAtLevel=1",
                    "-cp",
                    CLASSPATH,
                    MAIN,
                    str(cfg),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        finally:
            log.close()
        atexit.register(self.stop)
        self._wait_until_serving(timeout)

    def _wait_until_serving(self, timeout: float) -> None:
        from kazoo.client import KazooClient

        deadline = time.monotonic() + timeout
        while True:
            assert self.proc is not None
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"ZooKeeper exited with {self.proc.returncode}: {self.log_tail()}"
                )
            client = KazooClient(hosts=self.hosts, timeout=2.0)
            try:
                client.start(timeout=1.0)
            except Exception:  # noqa: BLE001 - not up yet; kazoo already closed the client
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(
                        f"ZooKeeper did not serve within {timeout}s: {self.log_tail()}"
                    ) from None
                time.sleep(0.1)
                continue
            client.stop()
            client.close()
            return

    def log_tail(self, n: int = 2000) -> str:
        try:
            return (self.workdir / "server.log").read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def pause(self) -> None:
        """SIGSTOP: the TCP connections stay open but nothing answers, like a partition or a
        long GC pause. Clients notice only when their heartbeats time out."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        self._signal(signal.SIGCONT)

    def _signal(self, sig: signal.Signals) -> None:
        assert self.proc is not None and self.proc.poll() is None
        os.kill(self.proc.pid, sig)

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc is None or proc.poll() is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.kill(proc.pid, signal.SIGCONT)  # a stopped JVM cannot act on SIGTERM
            proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def expire_session(hosts: str, client_id: tuple[int, bytes], timeout: float = 10.0) -> None:
    """Make the server end the session ``client_id`` (``KazooClient.client_id``): a second
    client attaches to the same session with its id and password, then closes it. This is a
    real server-side expiry — the server deletes the session's ephemeral nodes and the first
    client is told SESSION_EXPIRED — without stopping a server other tests share."""
    from kazoo.client import KazooClient

    hijacker = KazooClient(hosts=hosts, client_id=client_id, timeout=timeout)
    hijacker.start(timeout=timeout)
    if hijacker.client_id is None or hijacker.client_id[0] != client_id[0]:
        raise RuntimeError("could not attach to the session to expire it")
    hijacker.stop()  # sends closeSession: the server ends the session now
    hijacker.close()
