"""Worker processes of the service load test (importable by multiprocessing's forkserver)."""

from __future__ import annotations

import io
import json
import time
from typing import Any

ROWS_PER_LOAD = 4


def loader(url: str, token: str | None, worker: int, loads: int, results: Any) -> None:
    """``loads`` small loads through the service (or, for a lake URI, straight into the
    lake); report (worker, acked ts values, latencies, failures) on ``results``."""
    from lake_core import Lake

    pool = Lake.open(url, token=token).pool("load")
    acked: list[int] = []
    latencies: list[float] = []
    failures: list[str] = []
    for i in range(loads):
        ts = [(worker * 1000 + i) * ROWS_PER_LOAD + k for k in range(ROWS_PER_LOAD)]
        body = "".join(json.dumps({"ts": t, "worker": worker, "seq": i}) + "\n" for t in ts)
        stream = io.BytesIO(body.encode())
        stream.name = f"w{worker}-{i}.ndjson"
        t0 = time.perf_counter()
        try:
            pool.load([stream], message=f"worker {worker} load {i}")
        except Exception as e:  # noqa: BLE001 - counted and reported
            failures.append(f"{type(e).__name__}: {e}")
            continue
        latencies.append(time.perf_counter() - t0)
        acked.extend(ts)
    results.put(("load", worker, acked, latencies, failures))


def direct_loader(uri: str, worker: int, loads: int, results: Any) -> None:
    """As :func:`loader`, beside the service: a direct user of the lake."""
    loader(uri, None, worker, loads, results)


def querier(url: str, token: str, stop: Any, results: Any) -> None:
    """Query the pool again and again until ``stop`` is set; every result must be whole
    (no key twice, ascending)."""
    from lake_core import Lake

    pool = Lake.open(url, token=token).pool("load")
    latencies: list[float] = []
    problems: list[str] = []
    while not stop.is_set():
        t0 = time.perf_counter()
        try:
            keys = pool.read(columns=["ts"])["ts"].to_pylist()
        except Exception as e:  # noqa: BLE001 - reported
            problems.append(f"{type(e).__name__}: {e}")
            continue
        latencies.append(time.perf_counter() - t0)
        if keys != sorted(set(keys)):
            problems.append("a result with a key twice or out of order")
    results.put(("query", 0, [], latencies, problems))
