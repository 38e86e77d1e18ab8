"""A bounded load test on loopback: 8 client processes x 25 small loads through one server,
with 2 processes querying all along; then every acknowledged row is in the pool exactly once
and nothing else is. Latencies are printed (p50/p99), never asserted."""

from __future__ import annotations

import statistics
from collections import Counter
from pathlib import Path

import pytest

from lake_core import Lake
from tests.processes import context
from tests.service.conftest import Server, start_server, stop_server
from tests.service.load_workers import direct_loader, loader, querier

WORKERS = 8
LOADS = 25
QUERIERS = 2


def _pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000


@pytest.mark.slow
@pytest.mark.parametrize("lake_uri", ["local"], indirect=True)
def test_concurrent_loads_and_queries(server: Server, served_lake: Lake) -> None:
    served_lake.create_pool("load", "ts:asc")
    ctx = context()
    results = ctx.Queue()
    stop = ctx.Event()
    write, read = server.tokens["write"], server.tokens["read"]
    queriers = [ctx.Process(querier, (server.url, read, stop, results)) for _ in range(QUERIERS)]
    loaders = [ctx.Process(loader, (server.url, write, w, LOADS, results)) for w in range(WORKERS)]
    for p in queriers + loaders:
        p.start()
    reports = [results.get(timeout=600) for _ in loaders]
    stop.set()
    reports += [results.get(timeout=120) for _ in queriers]
    for p in queriers + loaders:
        p.join(timeout=60)
        assert p.exitcode == 0

    loads = [r for r in reports if r[0] == "load"]
    queries = [r for r in reports if r[0] == "query"]
    failures = [f for r in reports for f in r[4]]
    assert not failures, failures[:5]
    acked = [ts for r in loads for ts in r[2]]
    present = Counter(served_lake.pool("load").read(columns=["ts"])["ts"].to_pylist())
    assert len(acked) == WORKERS * LOADS * 4
    assert all(present[ts] == 1 for ts in acked)
    assert sum(present.values()) == len(acked)  # nothing unacknowledged, nothing twice
    assert len(list(served_lake.pool("load").log())) == WORKERS * LOADS

    load_lat = [x for r in loads for x in r[3]]
    query_lat = [x for r in queries for x in r[3]]
    print(
        f"\nservice load test: {len(load_lat)} loads, p50 {_pct(load_lat, 0.5):.1f} ms, "
        f"p99 {_pct(load_lat, 0.99):.1f} ms, mean {statistics.mean(load_lat) * 1000:.1f} ms; "
        f"{len(query_lat)} concurrent queries, p50 {_pct(query_lat, 0.5):.1f} ms, "
        f"p99 {_pct(query_lat, 0.99):.1f} ms"
    )


@pytest.mark.slow
@pytest.mark.parametrize("lake_uri", ["local", "s3"], indirect=True)
def test_two_servers_and_a_direct_writer_share_one_lake(
    server: Server, served_lake: Lake, tmp_path: Path
) -> None:
    """Stateless about commits: loads through two servers and straight into the lake, all at
    once, each land exactly once (the journal's put-if-missing orders them)."""
    served_lake.create_pool("load", "ts:asc")
    (tmp_path / "second").mkdir()
    second = start_server(served_lake.config.uri, tmp_path / "second")
    try:
        ctx = context()
        results = ctx.Queue()
        write = server.tokens["write"]
        jobs = [
            ctx.Process(loader, (server.url, write, 0, 8, results)),
            ctx.Process(loader, (second.url, write, 1, 8, results)),
            ctx.Process(loader, (second.url, write, 2, 8, results)),
            ctx.Process(direct_loader, (served_lake.config.uri, 3, 8, results)),
        ]
        for p in jobs:
            p.start()
        reports = [results.get(timeout=600) for _ in jobs]
        for p in jobs:
            p.join(timeout=60)
            assert p.exitcode == 0
    finally:
        stop_server(second)
    assert not [f for r in reports for f in r[4]]
    acked = [ts for r in reports for ts in r[2]]
    present = Counter(served_lake.pool("load").read(columns=["ts"])["ts"].to_pylist())
    assert len(acked) == 4 * 8 * 4 and all(present[ts] == 1 for ts in acked)
    assert sum(present.values()) == len(acked)
    assert len(list(served_lake.pool("load").log())) == 4 * 8
