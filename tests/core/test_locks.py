"""Per-pool locks: file locks and ZooKeeper (a real server), contended by real processes.

What must hold: two holders never overlap; a lost ZooKeeper session makes ``check()`` fail
before a commit; an unreachable ZooKeeper is an error, never a silent fallback to file locks;
a timed-out wait names the holder.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lake_core import LakeConfig
from lake_core.errors import (
    LockError,
    LockLostError,
    LockServiceUnavailableError,
    LockTimeoutError,
    UsageError,
)
from lake_core.locks import FileLockProvider, LockProvider, lock_dir_for, open_lock_provider
from tests import processes
from tests.zk import ZooKeeperServer, expire_session, free_port

LAKE_ID = "2qLakeTestLakeId0000000001"
POOL = "2qPoolTestPoolId0000000001"


# -- helpers run in spawned processes (module level, so ``spawn`` can import them) -------------


def _provider(kind: str, target: str, identifier: str) -> LockProvider:
    if kind == "zookeeper":
        from lake_core.locks.zookeeper import ZooKeeperLockProvider

        return ZooKeeperLockProvider(target, LAKE_ID, identifier=identifier, connect_timeout=10)
    return FileLockProvider(target, identifier=identifier)


def _append(path: str, line: str) -> None:
    # One small O_APPEND write per line: atomic with respect to the other process's lines.
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def contend(
    kind: str, target: str, rounds: int, timeout: float | None, log: str, marker: str, start: Any
) -> None:
    """Take the pool's maintenance lock ``rounds`` times, logging enter/exit around a critical
    section that also claims ``marker`` with O_EXCL (fails if another holder is inside)."""
    pid = os.getpid()
    with _provider(kind, target, f"worker@test:{pid}") as locks:
        start.wait(timeout=60)
        for _ in range(rounds):
            with locks.maintenance_lock(POOL, timeout=timeout) as held:
                _append(log, f"{pid} enter {time.monotonic_ns()}")
                try:
                    os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
                except FileExistsError:
                    _append(log, f"{pid} overlap {time.monotonic_ns()}")
                else:
                    time.sleep(0.004)
                    held.check()
                    os.unlink(marker)
                _append(log, f"{pid} exit {time.monotonic_ns()}")
            time.sleep(0.001)


def hold_forever(target: str, ready: Any) -> None:
    with FileLockProvider(target, identifier="doomed@test:1").maintenance_lock(POOL):
        ready.set()
        time.sleep(600)


# -- the overlap checker, and a check that it can fail -----------------------------------------


def intervals_from(log: Path) -> list[tuple[int, int, str]]:
    """``(enter, exit, pid)`` per critical section; fails on an ``overlap`` line."""
    open_at: dict[str, int] = {}
    out = []
    for line in log.read_text().splitlines():
        pid, what, ns = line.split()
        assert what != "overlap", f"process {pid} found another holder inside the lock"
        if what == "enter":
            assert pid not in open_at
            open_at[pid] = int(ns)
        else:
            out.append((open_at.pop(pid), int(ns), pid))
    assert not open_at
    return out


def assert_disjoint(intervals: list[tuple[int, int, str]]) -> int:
    """No two critical sections overlap in time (CLOCK_MONOTONIC is one clock for every
    process on the machine). Returns how often the holder changed."""
    ordered = sorted(intervals)
    for (_, prev_exit, prev_pid), (enter, _, pid) in zip(ordered, ordered[1:], strict=False):
        assert enter > prev_exit, f"{pid} entered before {prev_pid} left"
    return sum(a[2] != b[2] for a, b in zip(ordered, ordered[1:], strict=False))


def test_overlap_checker_detects_overlap(tmp_path: Path) -> None:
    log = tmp_path / "log"
    log.write_text("1 enter 10\n2 enter 15\n1 exit 20\n2 exit 30\n")
    with pytest.raises(AssertionError, match="entered before"):
        assert_disjoint(intervals_from(log))
    log.write_text("1 enter 10\n2 overlap 11\n1 exit 20\n")
    with pytest.raises(AssertionError, match="another holder"):
        intervals_from(log)


def run_two_contenders(kind: str, target: str, tmp_path: Path, rounds: int) -> None:
    ctx = processes.context()
    start = ctx.Barrier(2)
    log, marker = tmp_path / "log", tmp_path / "inside"
    # One waits without a timeout, one with: both ways of waiting are exercised.
    procs = [
        ctx.Process(
            target=contend, args=(kind, target, rounds, timeout, str(log), str(marker), start)
        )
        for timeout in (None, 30.0)
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    intervals = intervals_from(log)
    for p in procs:
        assert sum(pid == str(p.pid) for _, _, pid in intervals) == rounds
    switches = assert_disjoint(intervals)
    assert switches >= 1  # they really took turns, so the lock was contended


# -- file locks ---------------------------------------------------------------------------------


@pytest.mark.slow
def test_two_processes_never_overlap_under_file_locks(tmp_path: Path) -> None:
    run_two_contenders("file", str(tmp_path / "locks"), tmp_path, rounds=30)


class FakeClock:
    """Time advances only when the code under test sleeps."""

    def __init__(self) -> None:
        self.t = datetime(2026, 1, 1, tzinfo=UTC)
        self.slept = 0.0

    def now(self) -> datetime:
        return self.t

    def sleep(self, seconds: float) -> None:
        self.slept += seconds
        self.t += timedelta(seconds=seconds)


def test_file_lock_timeout_names_the_holder_without_real_waiting(tmp_path: Path) -> None:
    holder = FileLockProvider(tmp_path, identifier="alice@host-a:41")
    clock = FakeClock()
    waiter = FileLockProvider(tmp_path, identifier="bob@host-a:42", clock=clock)
    began = time.monotonic()
    with (
        holder.maintenance_lock(POOL),
        pytest.raises(LockTimeoutError) as err,
        waiter.maintenance_lock(POOL, timeout=30),
    ):
        pytest.fail("entered a held lock")
    assert time.monotonic() - began < 5  # 30 "seconds" passed on the fake clock only
    assert clock.slept == pytest.approx(30)
    assert err.value.holder == "alice@host-a:41"
    assert str(err.value) == (
        f"lock error: maintenance lock of pool {POOL} not acquired within 30s "
        "(held by alice@host-a:41)"
    )
    # Released: the holder's name is cleared and the waiter gets in at once.
    with waiter.maintenance_lock(POOL, timeout=0) as held:
        held.check()
        assert (tmp_path / f"{POOL}.maintenance.lock").read_text() == "bob@host-a:42"


def test_file_locks_exclude_within_one_process_and_kinds_are_independent(tmp_path: Path) -> None:
    a, b = FileLockProvider(tmp_path), FileLockProvider(tmp_path)
    with a.maintenance_lock(POOL):
        with pytest.raises(LockTimeoutError), b.maintenance_lock(POOL, timeout=0):
            pass
        with b.journal_lock(POOL, timeout=0) as j:
            j.check()
        with b.maintenance_lock("another-pool", timeout=0) as other:
            other.check()


def test_file_lock_check_fails_when_released_or_file_replaced(tmp_path: Path) -> None:
    locks = FileLockProvider(tmp_path)
    with locks.maintenance_lock(POOL) as held:
        held.check()
        path = tmp_path / f"{POOL}.maintenance.lock"
        path.unlink()  # someone "cleaned up" the lock file: a newcomer could lock a new one
        with pytest.raises(LockLostError, match="was removed"):
            held.check()
        path.write_text("")
        with pytest.raises(LockLostError, match="was replaced"):
            held.check()
    with pytest.raises(LockLostError, match="already released"):
        held.check()


def test_file_lock_is_freed_when_its_holder_is_killed(tmp_path: Path) -> None:
    ctx = processes.context()
    ready = ctx.Event()
    p = ctx.Process(target=hold_forever, args=(str(tmp_path), ready))
    p.start()
    try:
        assert ready.wait(30)
        with (
            pytest.raises(LockTimeoutError, match="held by doomed@test:1"),
            FileLockProvider(tmp_path).maintenance_lock(POOL, timeout=0),
        ):
            pass
    finally:
        p.kill()
        p.join(10)
    with FileLockProvider(tmp_path).maintenance_lock(POOL, timeout=5) as held:
        held.check()


def test_lock_dir_for_local_and_s3_lakes(tmp_path: Path) -> None:
    assert lock_dir_for(str(tmp_path / "lake")) == tmp_path / "lake" / "locks"
    assert lock_dir_for(f"file://{tmp_path}/lake") == tmp_path / "lake" / "locks"
    s3 = lock_dir_for("s3://bucket/lake", temp_root=tmp_path)
    assert s3.parent.parent == tmp_path / f"lakepool-{os.getuid()}"
    assert s3.name == "locks"
    assert lock_dir_for("s3://bucket/lake/", temp_root=tmp_path) == s3
    assert lock_dir_for("s3://bucket/other", temp_root=tmp_path) != s3


def test_bad_ids_and_timeouts_are_usage_errors(tmp_path: Path) -> None:
    locks = FileLockProvider(tmp_path)
    for bad in ["", "..", "a/b"]:
        with pytest.raises(UsageError):
            locks.maintenance_lock(bad)
    with pytest.raises(UsageError), locks.maintenance_lock(POOL, timeout=-1):
        pass


def test_lock_errors_survive_pickling() -> None:
    for err in [
        LockTimeoutError("maintenance lock of pool p", 2.5, "a@h:1"),
        LockLostError("maintenance lock of pool p", "session expired"),
        LockServiceUnavailableError("127.0.0.1:1", "no connection within 1s"),
    ]:
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is type(err) and str(back) == str(err)
        assert isinstance(back, LockError)


def test_factory_picks_file_locks_without_zookeeper_and_never_imports_kazoo(tmp_path: Path) -> None:
    uri = str(tmp_path / "lake")
    locks = open_lock_provider(LakeConfig(uri=uri, user="carol"), LAKE_ID, uri)
    assert isinstance(locks, FileLockProvider)
    with locks.maintenance_lock(POOL) as held:
        assert held.identifier.startswith("carol@")
        assert (tmp_path / "lake" / "locks" / f"{POOL}.maintenance.lock").exists()
    code = (
        "import sys; from lake_core.locks import open_lock_provider; "
        "from lake_core import LakeConfig; "
        f"p = open_lock_provider(LakeConfig(uri={uri!r}), 'x', {uri!r}); "
        "ctx = p.maintenance_lock('y'); ctx.__enter__(); ctx.__exit__(None, None, None); "
        "assert 'kazoo' not in sys.modules, 'kazoo imported'"
    )
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


# -- ZooKeeper ----------------------------------------------------------------------------------


def zk_provider(server: ZooKeeperServer, identifier: str = "", **kw: Any) -> Any:
    from lake_core.locks.zookeeper import ZooKeeperLockProvider

    return ZooKeeperLockProvider(server.hosts, LAKE_ID, identifier=identifier or None, **kw)


@pytest.mark.slow
def test_two_processes_never_overlap_under_zookeeper(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    run_two_contenders("zookeeper", zookeeper.hosts, tmp_path, rounds=30)


def test_zookeeper_records_holder_at_the_documented_path(zookeeper: ZooKeeperServer) -> None:
    from kazoo.client import KazooClient

    pool = "records-holder"
    with zk_provider(zookeeper, "alice@host-a:7") as locks, locks.maintenance_lock(pool) as held:
        held.check()
        raw = KazooClient(hosts=zookeeper.hosts)
        raw.start(timeout=10)
        try:
            path = f"/lakepool/{LAKE_ID}/pools/{pool}/maintenance"
            (child,) = raw.get_children(path)
            assert raw.get(f"{path}/{child}")[0] == b"alice@host-a:7"
            assert held.node_path == f"{path}/{child}"
        finally:
            raw.stop()
            raw.close()


def test_zookeeper_lock_timeout_names_the_holder(zookeeper: ZooKeeperServer) -> None:
    pool = "timeout"
    with zk_provider(zookeeper, "alice@host-a:7") as a, zk_provider(zookeeper) as b:
        with a.maintenance_lock(pool):
            began = time.monotonic()
            with (
                pytest.raises(LockTimeoutError) as err,
                b.maintenance_lock(pool, timeout=0.5),
            ):
                pytest.fail("entered a held lock")
            assert 0.5 <= time.monotonic() - began < 5
            assert err.value.holder == "alice@host-a:7"
            assert "held by alice@host-a:7" in str(err.value)
            with (
                pytest.raises(LockTimeoutError, match="held by alice@host-a:7"),
                b.maintenance_lock(pool, timeout=0),
            ):
                pass
            with b.journal_lock(pool, timeout=0) as j:  # the journal lock is a separate lock
                j.check()
        with b.maintenance_lock(pool, timeout=5) as held:  # released: b gets it
            held.check()


def test_zookeeper_session_expiry_makes_check_fail(zookeeper: ZooKeeperServer) -> None:
    pool = "expiry"
    with zk_provider(zookeeper) as locks, zk_provider(zookeeper, "rival@test:2") as rival:
        with locks.maintenance_lock(pool) as held:
            held.check()
            # Test-only reach into the provider for the session's id and password.
            expire_session(zookeeper.hosts, locks._client.client_id)
            deadline = time.monotonic() + 10
            while held.lost_reason() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            with pytest.raises(LockLostError, match="session|suspended|gone"):
                held.check()
            # It really is lost: another session takes the lock while we are still "inside".
            with rival.maintenance_lock(pool, timeout=5) as theirs:
                theirs.check()
                with pytest.raises(LockLostError):
                    held.check()  # stays lost, whatever the connection does meanwhile
        # The provider recovers (new session) for the next operation.
        with locks.maintenance_lock(pool, timeout=10) as again:
            again.check()


@pytest.mark.slow
def test_zookeeper_unresponsive_server_makes_check_fail(tmp_path: Path) -> None:
    """SIGSTOP keeps the TCP connection open while nothing answers (a partition, a long GC
    pause): only the heartbeat timeout reveals it. This needs its own server."""
    server = ZooKeeperServer(tmp_path / "zk")
    server.start()
    try:
        locks = zk_provider(server, session_timeout=2.0, verify_timeout=1.0)
        with locks:
            held_ctx = locks.maintenance_lock("paused")
            held = held_ctx.__enter__()
            held.check()
            server.pause()
            try:
                deadline = time.monotonic() + 10
                while locks._client.state == "CONNECTED" and time.monotonic() < deadline:
                    time.sleep(0.05)
                with pytest.raises(LockLostError, match="suspended"):
                    held.check()
            finally:
                server.resume()
            time.sleep(1.0)  # let the client reconnect (or learn its session expired)
            with pytest.raises(LockLostError, match="suspended"):
                held.check()  # SUSPENDED is sticky: never trusted again
            began = time.monotonic()
            held_ctx.__exit__(None, None, None)
            assert time.monotonic() - began < 8  # release is bounded, never hangs
            with locks.maintenance_lock("paused", timeout=10) as again:
                again.check()
    finally:
        server.stop()


def test_unreachable_zookeeper_fails_fast_and_never_falls_back(tmp_path: Path) -> None:
    from lake_core.locks.zookeeper import ZooKeeperLockProvider

    port = free_port()  # nothing listens: connections are refused
    uri = str(tmp_path / "lake")
    config = LakeConfig(uri=uri, zookeeper=f"127.0.0.1:{port}")
    locks = open_lock_provider(config, LAKE_ID, uri)
    assert isinstance(locks, ZooKeeperLockProvider)
    locks.connect_timeout = 1.0
    entered = False
    began = time.monotonic()
    with (
        pytest.raises(LockServiceUnavailableError) as err,
        locks.maintenance_lock(POOL, timeout=1),
    ):
        entered = True
    assert time.monotonic() - began < 5
    assert not entered
    assert f"ZooKeeper at 127.0.0.1:{port} cannot be reached" in str(err.value)
    assert not (tmp_path / "lake" / "locks").exists()  # no file lock was taken instead
    locks.close()
