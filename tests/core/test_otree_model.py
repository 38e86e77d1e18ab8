"""The OTree history invariant, by property test: over random histories of an OTree pool —
loads inside and outside the current revision's range (new revisions), deletes by predicate
(which rewrite objects unindexed), a branch loaded and merged, reverts of earlier loads — every
branch's rows equal a row-level model that knows nothing of cubes or revisions, and every sample
and box query equals the brute-force filter over the model's rows, with weights the model
computes itself from the indexed columns (Spark's hash). Local disk and S3 (moto over HTTP).

A tree walk that stops early (Qbeast #226) would miss rows of later appends under a cube whose
threshold fell: the histories here append many batches into one revision, so such a walk fails.
"""

from __future__ import annotations

import os
import tempfile
import uuid
from typing import Any

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from lake_core import Lake, LakeConfig
from lake_core.errors import EmptyTransactionError
from lake_core.expr import parse_predicate, to_arrow_expression
from lake_core.otree.settings import parse_layout
from lake_core.otree.weights import WEIGHT_COLUMN, sample_range, weights_for
from lake_core.pool import Pool
from tests.modelsettings import model_settings
from tests.otreecheck import check_otree_invariants

INDEX = ("x", "y")
#: A row of the model: id (unique over the whole history), x, y, tag.
Row = tuple[int, float, float, str]

op_st = st.one_of(
    st.tuples(
        st.just("load"),
        st.sampled_from(["main", "dev"]),
        st.integers(1, 400),
        st.sampled_from([0.5, 1.0, 4.0]),
    ),
    st.tuples(st.just("delete"), st.sampled_from(["main", "dev"]), st.floats(-2.0, 2.0)),
    st.tuples(st.just("merge")),
    st.tuples(st.just("revert"), st.integers(0, 20)),
)
EXAMPLES = int(os.environ.get("LAKE_MODEL_EXAMPLES", "120")) // 6
FRACTIONS = (0.003, 0.02, 0.1, 0.45, 1.0)
BOXES = ("x BETWEEN -0.3 AND 0.4 AND y > 0.5", "x > 1.5 OR y < 0.05", "y = 0.5", "tag = 't3'")


class Model:
    """Rows per branch; ``base`` is main's rows when ``dev`` was (re)made from it."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[int, Row]] = {"main": {}, "dev": {}}
        self.base: dict[int, Row] = {}
        self.loads: list[tuple[str, list[int]]] = []  # main's load commits, oldest first
        self.next_id = 0


def _batch(model: Model, n: int, scale: float) -> list[Row]:
    rng = np.random.default_rng(model.next_id + n)
    rows = [
        (model.next_id + i, float(rng.normal(0, scale)), float(rng.random() * scale), f"t{i % 7}")
        for i in range(n)
    ]
    model.next_id += n
    return rows


def _table(rows: list[Row]) -> pa.Table:
    cols = list(zip(*rows, strict=True)) if rows else [[], [], [], []]
    return pa.table(
        {
            "id": pa.array(cols[0], pa.int64()),
            "x": pa.array(cols[1], pa.float64()),
            "y": pa.array(cols[2], pa.float64()),
            "tag": pa.array(cols[3], pa.string()),
        }
    )


def _check(pool: Pool, model: Model, branch: str) -> None:
    expected = _table(sorted(model.rows[branch].values()))
    weights = weights_for(expected, INDEX, "hash").to_numpy(zero_copy_only=False)
    got = pool.read(branch)
    assert sorted(got["id"].to_pylist()) == expected["id"].to_pylist()
    by_id = dict(zip(got["id"].to_pylist(), got[WEIGHT_COLUMN].to_pylist(), strict=True))
    assert [by_id[i] for i in expected["id"].to_pylist()] == weights.tolist()
    ids = np.array(expected["id"].to_pylist(), dtype=np.int64)
    for f in FRACTIONS:
        cut = sample_range(f)
        want = ids if cut is None else ids[(weights >= cut[0]) & (weights < cut[1])]
        sampled = pool.scan(branch, sample=f).to_table()
        assert sorted(sampled["id"].to_pylist()) == sorted(want.tolist()), (branch, f)
    for where in BOXES:
        mask = to_arrow_expression(parse_predicate(where), expected.schema)
        want_rows = expected.filter(mask)
        got_rows = pool.scan(branch, where=where, sample=0.3).to_table()
        w = weights_for(want_rows, INDEX, "hash").to_numpy(zero_copy_only=False)
        cut = sample_range(0.3)
        assert cut is not None
        keep = np.array(want_rows["id"].to_pylist(), dtype=np.int64)[(w >= cut[0]) & (w < cut[1])]
        assert sorted(got_rows["id"].to_pylist()) == sorted(keep.tolist()), (branch, where)


def run_history(lake: Lake, ops: list[tuple[Any, ...]]) -> None:
    pool = lake.create_pool("m", "id:asc", otree=parse_layout(list(INDEX), 40))
    model = Model()
    seed = _batch(model, 300, 1.0)  # a schema on both branches before any delete
    model.loads.append((pool.load(_table(seed)).id, [r[0] for r in seed]))
    model.rows["main"] = {r[0]: r for r in seed}
    pool.create_branch("dev")
    model.rows["dev"] = dict(model.rows["main"])
    model.base = dict(model.rows["main"])
    for op in ops:
        pool = lake.pool("m")  # a fresh handle: revisions come from the catalog
        kind = op[0]
        if kind == "load":
            _, branch, n, scale = op
            rows = _batch(model, n, scale)
            commit = pool.load(_table(rows), branch)
            model.rows[branch].update({r[0]: r for r in rows})
            if branch == "main":
                model.loads.append((commit.id, [r[0] for r in rows]))
        elif kind == "delete":
            _, branch, bound = op
            gone = [i for i, r in model.rows[branch].items() if r[1] < bound]
            try:
                pool.delete(f"x < {bound!r}", branch)
            except EmptyTransactionError:
                assert not gone
                continue
            for i in gone:
                del model.rows[branch][i]
        elif kind == "merge":
            dev, main = model.rows["dev"], model.rows["main"]
            if dev == model.base:
                continue
            removed = set(model.base) - set(dev)
            added = {i: r for i, r in dev.items() if i not in model.base}
            merged = {i: r for i, r in main.items() if i not in removed} | added
            if merged == main:  # both sides made the same change: nothing to merge
                with pytest.raises(EmptyTransactionError):
                    pool.merge("dev", "main")
                continue
            pool.merge("dev", "main")
            model.rows["main"] = merged
            pool.delete_branch("dev")
            pool.create_branch("dev", "main")
            model.rows["dev"] = dict(model.rows["main"])
            model.base = dict(model.rows["main"])
        elif kind == "revert":
            if not model.loads:
                continue
            commit_id, ids = model.loads.pop(op[1] % len(model.loads))
            present = [i for i in ids if i in model.rows["main"]]
            try:
                pool.revert(commit_id, "main")
            except EmptyTransactionError:
                assert not present
                continue
            for i in present:
                del model.rows["main"][i]
    pool = lake.pool("m")
    for branch in ("main", "dev"):
        _check(pool, model, branch)
        check_otree_invariants(pool, branch)


OPS = st.lists(op_st, min_size=3, max_size=10)


@model_settings(max(8, EXAMPLES))
@given(ops=OPS)
def test_otree_history_equals_row_model_local(ops: list[tuple[Any, ...]]) -> None:
    with tempfile.TemporaryDirectory() as d:
        run_history(Lake.init(LakeConfig(uri=d + "/lake", user="model")), ops)


@pytest.mark.slow
@model_settings(max(4, EXAMPLES // 3))
@given(ops=OPS)
def test_otree_history_equals_row_model_s3(s3_bucket: str, ops: list[tuple[Any, ...]]) -> None:
    uri = f"s3://{s3_bucket}/lake-{uuid.uuid4().hex[:8]}"
    run_history(Lake.init(LakeConfig(uri=uri, user="model")), ops)


def test_many_appends_into_one_revision_keep_samples_exact(tmp_path: Any) -> None:
    """Fifteen appends of the same distribution into one revision (cube thresholds fall with
    each): a sample must still find the rows of every append (Qbeast #226's trap)."""
    lake = Lake.init(LakeConfig(uri=str(tmp_path / "lake")))
    pool = lake.create_pool("a", "id:asc", otree=parse_layout(list(INDEX), 50))
    model = Model()
    first = _batch(model, 2_000, 1.0)
    # The widest batch first: the later ones fall inside revision 1.
    first[0] = (first[0][0], -50.0, 0.0, "t0")
    first[1] = (first[1][0], 50.0, 50.0, "t1")
    pool.load(_table(first))
    model.rows["main"].update({r[0]: r for r in first})
    for _ in range(15):
        rows = _batch(model, 200, 1.0)
        pool.load(_table(rows))
        model.rows["main"].update({r[0]: r for r in rows})
    pool = lake.pool("a")
    assert len(pool.config.otree.revisions) == 1  # type: ignore[union-attr]
    _check(pool, model, "main")
    check_otree_invariants(pool)
