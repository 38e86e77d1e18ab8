"""The history invariant, by property test: over random histories on two branches (loads,
deletes by object and by predicate, compactions, partition drops, reverts, merges), the rows of
every branch equal a row-level model that knows nothing of objects or layout — on local disk
and on S3 (moto over HTTP).

The model is a multiset of rows per branch and per commit, and these plain rules:
- load adds rows; a delete removes the rows it names; compaction changes nothing;
- upsert (issue 14; also every load into a unique pool) replaces by the key ``id``: of the
  incoming rows with one key the last wins, and removes every row of that key (with
  ``delete_when``: a matching last row only removes them); null keys are inserted
  (:mod:`tests.upsert_model`);
- revert(c) removes the rows c added (those still there) and restores the rows c removed;
  a compaction, or a commit already reverted on the branch, has nothing to revert;
- merge is three-way per distinct row: only one side changed it → that side's count; both
  the same → once; both differently → conflict (``theirs``: the source's count, ``ours``:
  the target's).
"""

from __future__ import annotations

import os
import tempfile
import uuid
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lake_core import Lake, LakeConfig
from lake_core.changes import delete_objects, delete_where, merge, revert
from lake_core.errors import (
    CommitConflictError,
    DuplicateKeyError,
    EmptyTransactionError,
    NotFoundError,
)
from lake_core.history import read_rows
from lake_core.loading import load
from lake_core.maintenance.compact import compact
from lake_core.maintenance.partitions import drop_partition
from lake_core.pool import Pool
from tests.modelsettings import model_settings
from tests.upsert_model import upsert_rows

Row = tuple[int | None, str, str]  # (id, part, v)
BRANCHES = ("main", "dev")

rows_st = st.lists(
    st.tuples(st.integers(0, 12), st.sampled_from(["a", "b"]), st.sampled_from(["x", "y"])),
    min_size=1,
    max_size=6,
)
#: Upserted rows: a few null keys too (they never match: inserted).
upsert_rows_st = st.lists(
    st.tuples(
        st.one_of(st.integers(0, 12), st.integers(0, 12), st.none()),
        st.sampled_from(["a", "b"]),
        st.sampled_from(["x", "y"]),
    ),
    min_size=1,
    max_size=6,
)
#: ``v = 'y'`` rows are deletes when an upsert has ``delete_when``.
DELETE_WHEN = "v = 'y'"
branch_st = st.sampled_from(BRANCHES)
op_st = st.one_of(
    st.tuples(st.just("load"), branch_st, rows_st),
    st.tuples(st.just("upsert"), branch_st, upsert_rows_st, st.booleans()),
    st.tuples(st.just("delete_where"), branch_st, st.integers(0, 12), st.integers(0, 4)),
    st.tuples(st.just("delete_object"), branch_st, st.integers(0, 50)),
    st.tuples(st.just("compact"), branch_st),
    st.tuples(st.just("drop_partition"), branch_st, st.sampled_from(["a", "b"])),
    st.tuples(st.just("revert"), branch_st, st.integers(0, 50)),
    st.tuples(st.just("merge"), branch_st, st.sampled_from([None, "theirs", "ours"])),
)


@dataclass
class Model:
    """Rows per branch tip and per commit; lines of commits per branch (newest last)."""

    rows: dict[str, Counter[Row]] = field(default_factory=dict)
    at: dict[str | None, Counter[Row]] = field(default_factory=lambda: {None: Counter()})
    parent: dict[str, str | None] = field(default_factory=dict)
    merged: dict[str, str | None] = field(default_factory=dict)  # commit -> source tip merged
    reverts: dict[str, str] = field(default_factory=dict)  # revert commit -> reverted commit
    layout: set[str] = field(default_factory=set)
    tip: dict[str, str | None] = field(default_factory=dict)

    def record(self, branch: str, commit_id: str, rows: Counter[Row], **kw: Any) -> None:
        self.parent[commit_id] = self.tip[branch]
        self.tip[branch] = commit_id
        self.rows[branch] = rows
        self.at[commit_id] = rows
        if kw.get("merged"):
            self.merged[commit_id] = kw["merged"]
        if kw.get("reverts"):
            self.reverts[commit_id] = kw["reverts"]
        if kw.get("layout"):
            self.layout.add(commit_id)

    def line(self, branch: str) -> list[str]:
        out, c = [], self.tip[branch]
        while c is not None:
            out.append(c)
            c = self.parent[c]
        return out  # newest first

    def base(self, src: str, dst: str) -> str | None:
        dst_line = set(self.line(dst)) | {
            self.merged[c] for c in self.line(dst) if c in self.merged
        }
        for c in self.line(src):
            if c in dst_line:
                return c
            if self.merged.get(c) in dst_line:
                return self.merged[c]
        return None

    def reverted_by(self, branch: str, target: str) -> str | None:
        line = self.line(branch)
        after = line[: line.index(target)] if target in line else line
        undo: dict[str, list[str]] = {}
        for c in reversed(after):
            if c in self.reverts:
                undo.setdefault(self.reverts[c], []).append(c)

        def undoer(x: str) -> str | None:
            return next((r for r in undo.get(x, []) if undoer(r) is None), None)

        return undoer(target)


def duplicate_key(rows: Counter[Row]) -> bool:
    """Some non-null ``id`` held by two rows: what a unique pool refuses to become (a merge or
    revert that would make it fails with DuplicateKeyError and changes nothing)."""
    ids = Counter[int | None]()
    for r, n in rows.items():
        ids[r[0]] += n
    return any(n > 1 for i, n in ids.items() if i is not None)


def minus(a: Counter[Row], b: Counter[Row]) -> Counter[Row]:
    out = Counter(a)
    out.subtract(b)
    return out


def lake_rows(pool: Pool, branch: str) -> Counter[Row]:
    t = pool.read(branch)
    return Counter((r["id"], r["part"], r["v"]) for r in t.to_pylist())


def merged_rows(
    b: Counter[Row], s: Counter[Row], t: Counter[Row], resolve: str | None
) -> tuple[Counter[Row], list[Row]]:
    out: Counter[Row] = Counter()
    conflicts = []
    for r in set(b) | set(s) | set(t):
        nb, ns, nt = b[r], s[r], t[r]
        if ns in (nb, nt):
            n = nt
        elif nt == nb:
            n = ns
        else:
            conflicts.append(r)
            n = ns if resolve == "theirs" else nt
        if n:
            out[r] = n
    return out, conflicts


def as_table(rows: list[Row]) -> pa.Table:
    return pa.table(
        {
            "id": pa.array([r[0] for r in rows], pa.int64()),
            "part": [r[1] for r in rows],
            "v": [r[2] for r in rows],
        }
    )


def by_id(r: Row) -> int | None:
    return r[0]


def run_history(lake: Lake, ops: list[tuple[Any, ...]], unique: bool = False) -> None:
    """``unique``: the pool is unique by ``id``, so every load is an upsert."""
    pool = lake.create_pool("h", "id:asc", partition_by="part", target_size=4096, unique=unique)
    m = Model()
    m.tip = {"main": None}
    first = load(pool, [pa.table({"id": [0], "part": ["a"], "v": ["x"]})])
    m.record("main", first.id, Counter({(0, "a", "x"): 1}))
    pool.create_branch("dev")
    m.tip["dev"], m.rows["dev"] = m.tip["main"], Counter(m.rows["main"])
    for op in ops:
        kind, branch = op[0], op[1]
        cur = m.rows[branch]
        if kind == "load":
            rows = op[2]
            c = pool.load(as_table(rows), branch)  # a unique pool: Pool.load upserts
            after = upsert_rows(cur, rows, by_id)[0] if unique else cur + Counter(rows)
            m.record(branch, c.id, after)
        elif kind == "upsert":
            rows, deleting = op[2], op[3]
            after, counts = upsert_rows(
                cur, rows, by_id, (lambda r: r[2] == "y") if deleting else None
            )
            result = pool.upsert(
                [as_table(rows)], branch, delete_when=DELETE_WHEN if deleting else None
            )
            got = (result.inserted, result.updated, result.deleted)
            assert got == (counts.inserted, counts.updated, counts.deleted), op
            if result.commit is None:
                assert after == cur, op
                continue
            m.record(branch, result.commit.id, after)
        elif kind == "delete_where":
            lo, hi = op[2], op[2] + op[3]
            gone = Counter({r: n for r, n in cur.items() if r[0] is not None and lo <= r[0] <= hi})
            try:
                c = delete_where(pool, f"id BETWEEN {lo} AND {hi}", branch)
            except EmptyTransactionError:
                assert not gone, op
                continue
            m.record(branch, c.id, minus(cur, gone) + Counter())
        elif kind == "delete_object":
            snap = pool.snapshot(pool.tip(branch))
            if not snap.objects:
                continue
            obj = sorted(snap.objects.values(), key=lambda o: o.id)[op[2] % len(snap.objects)]
            got = read_rows(pool, [obj], snap.schema or pa.schema([])).to_pylist()
            gone = Counter((r["id"], r["part"], r["v"]) for r in got)
            c = delete_objects(pool, [obj.id], branch)
            m.record(branch, c.id, minus(cur, gone) + Counter())
        elif kind == "compact":
            done = compact(pool, branch).commit
            if done is not None:
                m.record(branch, done.id, Counter(cur), layout=True)
        elif kind == "drop_partition":
            gone = Counter({r: n for r, n in cur.items() if r[1] == op[2]})
            try:
                c = drop_partition(pool, op[2], branch)
            except NotFoundError:
                assert not gone, op
                continue
            m.record(branch, c.id, minus(cur, gone) + Counter())
        elif kind == "revert":
            line = m.line(branch)
            target = line[op[2] % len(line)]
            if target == first.id:
                continue  # its parent is the empty pool: fine, but keeps the model simple
            delta = minus(m.at[target], m.at[m.parent[target]])
            after = Counter(cur)
            for r, n in delta.items():
                if n > 0:
                    after[r] -= min(n, after[r])
                elif n < 0:
                    after[r] += -n
            after = +after
            expect_empty = target in m.layout or m.reverted_by(branch, target) is not None
            try:
                c = revert(pool, target, branch)
            except EmptyTransactionError:
                assert expect_empty or after == cur, (op, delta)
                continue
            except DuplicateKeyError:
                assert unique and duplicate_key(after), op
                continue
            assert not expect_empty, op
            assert not (unique and duplicate_key(after)), op
            m.record(branch, c.id, after, reverts=target)
        elif kind == "merge":
            src = "dev" if branch == "main" else "main"
            resolve = op[2]
            base = m.base(src, branch)
            after, conflicts = merged_rows(m.at[base], m.rows[src], cur, resolve)
            try:
                c = merge(pool, src, branch, resolve=resolve)
            except DuplicateKeyError:
                assert unique and duplicate_key(after), op
                assert not (conflicts and resolve is None), op
                continue
            except CommitConflictError:
                assert conflicts and resolve is None, op
                continue
            except EmptyTransactionError:
                assert after == cur and not (conflicts and resolve is None), op
                continue
            assert not (conflicts and resolve is None), (op, conflicts)
            assert not (unique and duplicate_key(after)), op
            m.record(branch, c.id, after, merged=m.tip[src])
        for b in BRANCHES:
            assert lake_rows(pool, b) == m.rows[b], (op, b)


EXAMPLES = int(os.environ.get("LAKE_MODEL_EXAMPLES", "120"))
OPS = st.lists(op_st, min_size=3, max_size=14)


@model_settings(EXAMPLES)
@given(ops=OPS)
def test_history_equals_row_model_local(ops: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as d:
        run_history(Lake.init(LakeConfig(uri=d + "/lake", user="model")), ops)


@model_settings(max(10, EXAMPLES // 3))
@given(ops=OPS)
def test_unique_pool_history_equals_row_model_local(ops: list[tuple[Any, ...]]) -> None:
    """The same histories on a pool unique by ``id``: every load upserts."""
    with tempfile.TemporaryDirectory() as d:
        run_history(Lake.init(LakeConfig(uri=d + "/lake", user="model")), ops, unique=True)


@pytest.mark.slow
@model_settings(max(5, EXAMPLES // 6))
@given(ops=OPS)
def test_history_equals_row_model_s3(s3_bucket: str, ops: list[tuple[Any, ...]]) -> None:
    uri = f"s3://{s3_bucket}/lake-{uuid.uuid4().hex[:8]}"
    run_history(Lake.init(LakeConfig(uri=uri, user="model")), ops)
