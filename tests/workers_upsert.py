"""Code that the upsert race and fault tests' subprocesses run (importable under ``spawn``).

Each worker opens the lake itself and runs a fixed, seeded plan of upserts (some with
``delete_when``) and plain loads on overlapping keys; it reports every outcome with the
operation's input so the test can replay the acknowledged ones in commit order
(:mod:`tests.upsert_model`). Rows are ``(k, w, i, j, op)``: ``k`` the pool key (``None``: a
null key), ``w``/``i``/``j`` unique to (worker, operation, row) so every row is told apart.
"""

from __future__ import annotations

import random
from typing import Any

import pyarrow as pa

from lake_core import Lake, LakeConfig
from lake_core.errors import CommitStateUnknownError, LakeError

Row = tuple[int | None, int, int, int, str]
SCHEMA = pa.schema(
    [
        ("k", pa.int64()),
        ("w", pa.int64()),
        ("i", pa.int64()),
        ("j", pa.int64()),
        ("op", pa.string()),
    ]
)
DELETE_WHEN = "op = 'd'"
KINDS = ("upsert", "upsert_delete", "load")


def table_of(rows: list[Row]) -> pa.Table:
    return pa.table({name: [r[n] for r in rows] for n, name in enumerate(SCHEMA.names)}, SCHEMA)


def plan(
    seed: int, worker: int, ops: int, keys: int, kinds: tuple[str, ...] = KINDS
) -> list[tuple[str, list[Row]]]:
    """``ops`` operations of one worker: (kind, rows). Keys come from ``0..keys-1`` (every
    worker draws from the same range: the key ranges overlap) in a narrow window per
    operation, so an upsert touches a few objects, not all; duplicates inside one operation
    happen (the last row wins); a few rows have a null key (never as a delete)."""
    rnd = random.Random(seed * 1_000_003 + worker)
    out: list[tuple[str, list[Row]]] = []
    for i in range(ops):
        kind = kinds[rnd.randrange(len(kinds))]
        lo = rnd.randrange(keys)
        rows: list[Row] = []
        for j in range(rnd.randint(1, 8)):
            op = "d" if rnd.random() < 0.3 else "u"
            k: int | None = min(keys - 1, lo + rnd.randrange(8))
            if op == "u" and rnd.random() < 0.05:
                k = None
            rows.append((k, worker, i, j, op))
        out.append((kind, rows))
    return out


def run_op(pool: Any, kind: str, rows: list[Row], message: str) -> tuple[str, str | None]:
    """Run one planned operation; (status, commit id): ``ok`` with the commit (None when the
    upsert changed nothing), ``unknown`` with the commit id that may have landed, ``failed``."""
    try:
        if kind == "load":
            return "ok", pool.load(table_of(rows), message=message).id
        result = pool.upsert(
            [table_of(rows)],
            delete_when=DELETE_WHEN if kind == "upsert_delete" else None,
            message=message,
        )
        return "ok", result.commit.id if result.commit is not None else None
    except CommitStateUnknownError as e:
        return "unknown", e.commit_id
    except LakeError:
        return "failed", None


def _open(uri: str, pool: str, user: str) -> Any:
    # Through the fault proxy, opening reads the catalog through the faults too: retry.
    for _ in range(50):
        try:
            return Lake.open(LakeConfig(uri=uri, user=user)).pool(pool)
        except LakeError:
            continue
    raise RuntimeError("could not open the lake")


def upserter(
    uri: str, pool: str, seed: int, worker: int, ops: int, keys: int, start: Any, out: Any
) -> None:
    """Run worker ``worker``'s plan; put ("ops", worker, [(i, status, commit id)])."""
    p = _open(uri, pool, f"u{worker}")
    steps = plan(seed, worker, ops, keys)
    start.wait()
    got = []
    for i, (kind, rows) in enumerate(steps):
        status, cid = run_op(p, kind, rows, f"w{worker} {kind} {i}")
        got.append((i, status, cid))
    out.put(("ops", worker, got))


def compactor(uri: str, pool: str, start: Any, stop: Any, out: Any) -> None:
    """Compact whatever the policy picks until ``stop``; put ("compactions", -1, [ids])."""
    from lake_core.maintenance.compact import compact

    p = _open(uri, pool, "compactor")
    start.wait()
    done: list[tuple[str, str | None]] = []
    while not stop.is_set():
        try:
            result = compact(p, "main")
            if result.commit is not None:
                done.append(("ok", result.commit.id))
        except CommitStateUnknownError as e:
            done.append(("unknown", e.commit_id))
        except LakeError:
            done.append(("failed", None))
        stop.wait(0.05)
    out.put(("compactions", -1, done))
