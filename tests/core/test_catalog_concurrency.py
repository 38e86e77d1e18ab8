"""Eight real OS processes create, alter and drop pools in one catalog at once, on local disk
and on moto S3: every non-conflicting change lands, every conflict is reported, nothing is
lost, and no stray file is left behind."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from lake_core import Lake, LakeConfig
from lake_core.catalog import Catalog, CatalogPoolRegistry, table_def_of
from lake_core.catalog.btree import check, paths
from lake_core.catalog.proto import actions_pb2
from lake_core.errors import AlreadyExistsError, CatalogConflictError
from lake_core.names import PoolName
from lake_core.poolkey import PoolKey
from lake_core.registry import PoolConfig
from lake_core.stores import ObjectStore
from tests import processes

WORKERS = 8
ROUNDS = 3
CREATES = 2
ORDER = 4  # small, so that concurrent commits split and merge nodes
HOT = PoolName("hot", "h")
SHARED = PoolName("hot", "shared")


def _own(w: int, r: int, i: int) -> PoolConfig:
    return PoolConfig(
        id=f"w{w}r{r}i{i}",
        name=PoolName(f"ns{(w + i) % 3}", f"w{w}_r{r}_{i}"),
        key=PoolKey(("ts",), "asc" if i % 2 else "desc"),
        target_size=1000 * w + 10 * r + i,
    )


def catalog_worker(uri: str, w: int, barrier: Any, out: Any) -> None:
    """Per round: create own pools (never conflict), then, in lockstep with the others, alter
    the hot pool from the same base (one wins). Then all create one shared name (one wins),
    and each drops one own pool and alters another."""
    lake = Lake.open(LakeConfig(uri=uri, user=f"w{w}"))
    registry = lake.registry
    assert isinstance(registry, CatalogPoolRegistry)
    log: list[tuple[Any, ...]] = []
    try:
        for r in range(ROUNDS):
            for i in range(CREATES):
                registry.create(_own(w, r, i))
                log.append(("create", r, i))
            barrier.wait(120)
            txn = lake.catalog.begin()
            hot = registry.get(HOT)
            txn.alter_pool("hot", "h", table_def_of(replace(hot, target_size=100 * r + w)))
            barrier.wait(120)  # every alter began before any commits
            try:
                log.append(("alter", r, txn.commit()))
            except CatalogConflictError as e:
                log.append(("conflict", r, str(e)))
        barrier.wait(120)
        try:
            registry.create(PoolConfig(id=f"shared-{w}", name=SHARED))
            log.append(("shared", True))
        except AlreadyExistsError:
            log.append(("shared", False))
        registry.drop(_own(w, 0, 0).name)
        log.append(("alter-own", registry.alter(replace(_own(w, 1, 1), target_size=7))))
        out.put((w, log, None))
    except BaseException as e:
        out.put((w, log, repr(e)))
        raise


def _reachable(catalog: Catalog) -> tuple[set[str], set[str]]:
    """Node and definition files reachable from any version (trees, actions, catalog defs)."""
    nodes: set[str] = set()
    defs: set[str] = set()
    for snap in catalog.log():
        nodes.update(paths(snap.root.tree, catalog.files.read_node))
        defs.add(snap.root.catalog_def)
        defs.update(value for _, value in snap.state.all_entries())
        defs.update(a.action.def_path for a in snap.root.actions if a.action.def_path)
    return nodes, defs


@pytest.mark.slow
def test_eight_processes_create_and_alter_pools_concurrently(
    lake_uri: str, store: ObjectStore
) -> None:
    Catalog(store).initialize(order=ORDER)
    lake = Lake.init(LakeConfig(uri=lake_uri))
    registry = lake.registry
    assert isinstance(registry, CatalogPoolRegistry)
    registry.create(PoolConfig(id="hot-id", name=HOT))
    setup_version = lake.catalog.latest_version()
    assert setup_version == 1

    ctx = processes.context()
    barrier = ctx.Barrier(WORKERS)
    out = ctx.Queue()
    procs = [
        ctx.Process(target=catalog_worker, args=(lake_uri, w, barrier, out)) for w in range(WORKERS)
    ]
    for p in procs:
        p.start()
    reports = {}
    for _ in procs:
        w, log, error = out.get(timeout=300)
        reports[w] = log
        assert error is None, f"worker {w} failed: {error}"
    for p in procs:
        p.join(60)
        assert p.exitcode == 0

    # Lockstep alters of one pool: exactly one winner a round, the other seven told why.
    alters: dict[int, tuple[int, int]] = {}
    for w, log in reports.items():
        for entry in log:
            if entry[0] == "alter":
                assert entry[1] not in alters, f"two alters won round {entry[1]}"
                alters[entry[1]] = (w, entry[2])
            elif entry[0] == "conflict":
                assert "pool hot.h was changed by catalog version" in entry[2]
    assert sorted(alters) == list(range(ROUNDS))
    conflicts = sum(1 for log in reports.values() for e in log if e[0] == "conflict")
    assert conflicts == ROUNDS * (WORKERS - 1)
    shared_winners = [w for w, log in reports.items() if ("shared", True) in log]
    assert len(shared_winners) == 1

    # The exact final state: every acknowledged change, nothing else.
    expected: dict[PoolName, PoolConfig] = {}
    expected[HOT] = PoolConfig(
        id="hot-id", name=HOT, target_size=100 * (ROUNDS - 1) + alters[ROUNDS - 1][0]
    )
    expected[SHARED] = PoolConfig(id=f"shared-{shared_winners[0]}", name=SHARED)
    for w in range(WORKERS):
        for r in range(ROUNDS):
            for i in range(CREATES):
                expected[_own(w, r, i).name] = _own(w, r, i)
        del expected[_own(w, 0, 0).name]
        expected[_own(w, 1, 1).name] = replace(_own(w, 1, 1), target_size=7)
    fresh = Lake.open(LakeConfig(uri=lake_uri))
    assert {p.name: p for p in fresh.pools()} == expected

    # One version per acknowledged change, dense, each recording exactly its own actions.
    catalog = Catalog(store)
    history = list(catalog.log())
    latest = history[0].version
    assert [s.version for s in history] == list(range(latest, -1, -1))
    changes = WORKERS * ROUNDS * CREATES + ROUNDS + 1 + 2 * WORKERS
    assert latest == setup_version + changes
    for r, (_, version) in alters.items():
        (action,) = [a.action for a in catalog.snapshot(version).root.actions]
        assert action.type == actions_pb2.TABLE_ALTER
        assert (action.namespace_name, action.object_name) == ("hot", "h")
        assert (
            catalog.snapshot(version).state.pool("hot", "h").target_size == 100 * r + alters[r][0]
        )
    creates = [
        a.action
        for s in history
        for a in s.root.actions
        if a.action.type == actions_pb2.TABLE_CREATE
    ]
    assert len(creates) == WORKERS * ROUNDS * CREATES + 2
    assert sorted(s.created_at for s in history) == [s.created_at for s in reversed(history)]

    # The tree is a valid B-tree, and every file under catalog/ is reachable: the losers of
    # each race removed the nodes and definitions they wrote.
    snap = catalog.snapshot()
    check(snap.root.tree, ORDER, catalog.files.read_node)
    nodes, defs = _reachable(catalog)
    on_store = {i.key[len("catalog/") :] for i in store.list("catalog/")}
    assert {k for k in on_store if k.startswith("node/")} == nodes
    assert {k for k in on_store if k.startswith("def/")} == defs
