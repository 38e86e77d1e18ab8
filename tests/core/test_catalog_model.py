"""Property test: random sequences of catalog operations (create, alter, drop pools, drop
namespaces, roll back, interleaved transactions) against an in-memory model, with every
version read back at the end (time travel). Runs over an in-memory object store, so thousands
of commits take seconds; the store contract tests and the other catalog tests cover the real
backends."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from lake_core.catalog import Catalog
from lake_core.catalog.btree import check
from lake_core.catalog.proto import objects_pb2
from lake_core.errors import (
    AlreadyExistsError,
    CatalogConflictError,
    EmptyTransactionError,
    NotEmptyError,
    NotFoundError,
    ObjectExistsError,
    ObjectNotFoundError,
    ObjectStoreError,
)
from lake_core.stores import ObjectStore
from lake_core.stores.base import ObjectInfo

Model = tuple[frozenset[str], dict[tuple[str, str], int]]  # namespaces, pool -> target size


class MemoryStore(ObjectStore):
    """The object-store contract in a dict (put-if-missing under a lock)."""

    def __init__(self) -> None:
        self.uri = "memory://catalog-model"
        self.data: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def get(self, key: str) -> bytes:
        try:
            return self.data[key]
        except KeyError:
            raise ObjectNotFoundError(key) from None

    def get_range(self, key: str, start: int, length: int) -> bytes:
        return self.get(key)[start : start + length]

    def put(self, key: str, data: bytes) -> None:
        self.data[key] = data

    def put_if_missing(self, key: str, data: bytes) -> None:
        with self._lock:
            if key in self.data:
                raise ObjectExistsError(key)
            self.data[key] = data

    def head(self, key: str) -> ObjectInfo:
        return ObjectInfo(key, len(self.get(key)), time.time())

    def list(self, prefix: str) -> Iterator[ObjectInfo]:
        for key in list(self.data):
            if key.startswith(prefix):
                yield ObjectInfo(key, len(self.data[key]), 0.0)

    def delete(self, key: str) -> None:
        self.data.pop(key, None)

    def arrow_location(self, key: str) -> tuple[Any, str]:
        raise ObjectStoreError(key, "the in-memory test store has no Arrow filesystem")


NAMESPACES = ["a", "b", "ccc"]
POOLS = ["p", "q", "r", "s", "t", "u"]

ops = st.one_of(
    st.tuples(st.just("create"), st.sampled_from(NAMESPACES), st.sampled_from(POOLS)),
    st.tuples(
        st.just("alter"),
        st.sampled_from(NAMESPACES),
        st.sampled_from(POOLS),
        st.integers(1, 99),
    ),
    st.tuples(st.just("drop"), st.sampled_from(NAMESPACES), st.sampled_from(POOLS)),
    st.tuples(st.just("drop_ns"), st.sampled_from(NAMESPACES)),
    st.tuples(st.just("rollback"), st.integers(0, 1000)),
    st.tuples(
        st.just("race"),
        st.sampled_from(NAMESPACES),
        st.sampled_from(POOLS),
        st.sampled_from(NAMESPACES),
        st.sampled_from(POOLS),
    ),
)


def _definition(size: int) -> objects_pb2.TableDef:
    return objects_pb2.TableDef(
        id=f"id{size}", key_fields=["ts"], key_order=objects_pb2.KEY_ORDER_DESC, target_size=size
    )


def _read(catalog: Catalog, version: int) -> Model:
    state = catalog.snapshot(version).state
    pools = {(r.namespace, r.name): int(d.target_size) for r, d in state.pools()}
    return frozenset(state.namespaces()), pools


@settings(max_examples=200, deadline=None)
@given(order=st.integers(3, 5), steps=st.lists(ops, min_size=1, max_size=40))
def test_random_operations_match_the_model_at_every_version(
    order: int, steps: list[tuple[Any, ...]]
) -> None:
    catalog = Catalog(MemoryStore(), cache_entries=64)
    catalog.initialize(order=order)
    history: list[Model] = [(frozenset(), {})]
    size = 0
    for step in steps:
        namespaces, pools = history[-1]
        pools = dict(pools)
        op = step[0]
        size += 1
        txn = catalog.begin()
        try:
            if op == "create":
                _, ns, name = step
                txn.create_namespace(ns, if_not_exists=True)
                txn.create_pool(ns, name, _definition(size))
                assert (ns, name) not in pools
                namespaces, pools[(ns, name)] = namespaces | {ns}, size
            elif op == "alter":
                _, ns, name, _ = step
                txn.alter_pool(ns, name, _definition(size))
                assert (ns, name) in pools
                pools[(ns, name)] = size
            elif op == "drop":
                _, ns, name = step
                txn.drop_pool(ns, name)
                assert (ns, name) in pools
                del pools[(ns, name)]
            elif op == "drop_ns":
                txn.drop_namespace(step[1])
                assert step[1] in namespaces
                assert not any(ns == step[1] for ns, _ in pools)
                namespaces = namespaces - {step[1]}
            elif op == "rollback":
                target = step[1] % len(history)
                txn.roll_back_to(catalog.snapshot(target))
                namespaces, pools = history[target][0], dict(history[target][1])
            elif op == "race":
                # Two transactions from one base: the second is replayed on the first, and
                # conflicts exactly when both touch the same existing pool.
                _, ns1, n1, ns2, n2 = step
                other = catalog.begin()
                for t, ns, n in ((txn, ns1, n1), (other, ns2, n2)):
                    t.create_namespace(ns, if_not_exists=True)
                    if (ns, n) in pools:
                        t.drop_pool(ns, n)
                    else:
                        t.create_pool(ns, n, _definition(size))
                txn.commit()
                _apply_race(pools, ns1, n1, size)
                history.append((namespaces | {ns1}, dict(pools)))
                try:
                    other.commit()
                except (CatalogConflictError, AlreadyExistsError):
                    assert (ns1, n1) == (ns2, n2)
                    continue
                assert (ns1, n1) != (ns2, n2)
                _apply_race(pools, ns2, n2, size)
                history.append((namespaces | {ns1, ns2}, pools))
                continue
            version = txn.commit()
        except (AlreadyExistsError, NotFoundError, NotEmptyError, EmptyTransactionError) as e:
            txn.abort()
            _expect_refusal(e, step, history)
            continue
        assert version == len(history)
        history.append((namespaces, pools))

    assert catalog.latest_version() == len(history) - 1
    for version, model in enumerate(history):
        assert _read(catalog, version) == model, f"version {version}"
    snap = catalog.snapshot()
    check(snap.root.tree, order, catalog.files.read_node)


def _apply_race(pools: dict[tuple[str, str], int], ns: str, name: str, size: int) -> None:
    if (ns, name) in pools:
        del pools[(ns, name)]
    else:
        pools[(ns, name)] = size


def _expect_refusal(error: Exception, step: tuple[Any, ...], history: list[Model]) -> None:
    """The model agrees the operation had to be refused."""
    namespaces, pools = history[-1]
    op = step[0]
    if op == "create":
        assert isinstance(error, AlreadyExistsError) and (step[1], step[2]) in pools
    elif op in ("alter", "drop"):
        assert isinstance(error, NotFoundError) and (step[1], step[2]) not in pools
    elif op == "drop_ns":
        if isinstance(error, NotEmptyError):
            assert any(ns == step[1] for ns, _ in pools)
        else:
            assert isinstance(error, NotFoundError) and step[1] not in namespaces
    elif op == "rollback":
        assert isinstance(error, EmptyTransactionError)
        assert step[1] % len(history) == len(history) - 1
    else:
        raise AssertionError(f"{op} refused: {error}")
