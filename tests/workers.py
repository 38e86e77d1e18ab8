"""Code that test subprocesses run (importable under the ``spawn`` start method).

Each worker opens the lake itself, as a separate user process would, and reports what it
committed on a queue or on stdout.
"""

from __future__ import annotations

import sys
from typing import Any

import pyarrow as pa

from lake_core import Lake, LakeConfig
from lake_core.loading import load


def rows_for(worker: int, i: int, n: int = 3) -> pa.Table:
    """Rows unique to (worker, i): ``ts`` orders them, ``w``/``i``/``j`` identify them."""
    base = worker * 100_000 + i * 100
    return pa.table(
        {
            "ts": pa.array([base + j for j in range(n)], pa.int64()),
            "w": pa.array([worker] * n, pa.int64()),
            "i": pa.array([i] * n, pa.int64()),
            "j": pa.array(list(range(n)), pa.int64()),
        }
    )


def commit_loads(uri: str, pool: str, worker: int, loads: int, start: Any, out: Any) -> None:
    """Commit ``loads`` small loads; put (worker, [commit ids]) on ``out``."""
    lake = Lake.open(LakeConfig(uri=uri, user=f"worker-{worker}"))
    p = lake.pool(pool)
    start.wait()
    ids = []
    for i in range(loads):
        ids.append(load(p, [rows_for(worker, i)], message=f"w{worker} load {i}").id)
    out.put((worker, ids))


def commit_loads_grouped(
    uri: str, pool: str, worker: int, threads: int, loads: int, start: Any, out: Any
) -> None:
    """``threads`` threads of one process each make ``loads`` small loads with group commit;
    put (worker, [(writer, i, commit id, [object ids])]) on ``out``. Writer ``worker *
    threads + t`` identifies a thread's rows."""
    import threading

    lake = Lake.open(LakeConfig(uri=uri, user=f"g{worker}"))
    p = lake.pool(pool)
    got: list[tuple[int, int, str, list[str]]] = []
    lock = threading.Lock()
    errors: list[BaseException] = []

    def run(t: int) -> None:
        w = worker * threads + t
        try:
            for i in range(loads):
                mine: list[str] = []
                c = p.load(
                    rows_for(w, i), group=True, on_object=lambda o, into=mine: into.append(o.id)
                )
                with lock:
                    got.append((w, i, c.id, mine))
        except BaseException as e:  # noqa: BLE001 - reported to the test
            errors.append(e)

    start.wait()
    ts = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise errors[0]
    out.put((worker, got))


def crash_writer(uri: str, pool: str, worker: int) -> None:
    """Load forever, printing ``committed <id> <i>`` after each acknowledged commit; the test
    kills this process with SIGKILL at a random moment.

    The test paces start-up through stdin, so the next writer can start while the last one
    still loads and the test checks what it left: imports, the store's client and a Parquet
    warm-up touch no lake; on ``open`` it opens the lake and reads the tip (reads only), then
    prints ``ready``; on ``go`` it loads."""
    import io

    import pyarrow.parquet as pq

    import lake_core.writer  # noqa: F401 - imported before "ready", as a long-lived writer has
    from lake_core.stores import open_store

    store = open_store(uri)  # builds the client; sends no request
    # Warm up what the first load would otherwise pay for after "ready" (imports, Parquet
    # encoding, the tip): the random kills should fall on loads, not on start-up — on a busy
    # machine a cold first load outlasted every kill delay and the test proved nothing.
    pq.write_table(rows_for(worker, 0), io.BytesIO())
    if sys.stdin.readline().strip() != "open":  # after the last writer's kill
        return  # stdin closed: the test ended (failed) before this trial
    lake = Lake.open(LakeConfig(uri=uri, user="crasher"), store=store)
    p = lake.pool(pool)
    p.snapshot(p.tip())
    print("ready", flush=True)
    if sys.stdin.readline().strip() != "go":  # the kill delay runs from "go"
        return
    i = 0
    while True:
        c = load(p, [rows_for(worker, i, n=50)], message=f"crash {worker} {i}")
        sys.stdout.write(f"committed {c.id} {i}\n")
        sys.stdout.flush()
        i += 1


if __name__ == "__main__":
    crash_writer(sys.argv[1], sys.argv[2], int(sys.argv[3]))


def commit_loads_locked(
    uri: str, zk: str, pool: str, worker: int, loads: int, start: Any, out: Any
) -> None:
    """Like commit_loads, on a store without conditional writes: journal appends take the
    pool's ZooKeeper journal lock."""
    lake = Lake.open(LakeConfig(uri=uri, zookeeper=zk, user=f"w{worker}", conditional_writes=False))
    p = lake.pool(pool)
    start.wait()
    ids = [load(p, [rows_for(worker, i)]).id for i in range(loads)]
    out.put((worker, ids))
