"""The distributed threshold construction of ``lake load --spark`` (lake_spark.otree_load),
without Spark: the rows split over several tasks (one of them empty, with tied weights), the
level loop's candidates merged as the driver merges them, equal lake_core's single-process
``assign_cubes`` — every row's depth and every cube's threshold."""

from __future__ import annotations

import numpy as np
import pytest

from lake_core.otree.build import assign_cubes
from lake_core.otree.cubes import depth_limit, morton
from lake_spark.otree_load import Level, advance, candidates, merge_candidates


@pytest.mark.parametrize(
    ("dims", "rows", "cube_size", "tasks"), [(1, 3000, 50, 3), (2, 5000, 37, 4), (3, 8000, 100, 5)]
)
def test_levels_over_tasks_equal_the_single_process_build(
    dims: int, rows: int, cube_size: int, tasks: int
) -> None:
    rng = np.random.default_rng(dims)
    q = rng.integers(0, 1 << depth_limit(dims), size=(rows, dims))
    weights = rng.integers(-(2**31), 2**31 - 1, rows).astype(np.int32)
    weights[:200] = 7  # ties straddle a cube's threshold
    codes = morton(q)
    want_depths, _, want_thresholds = assign_cubes(q, weights, cube_size)
    state = []
    for rows_of_task in [*np.array_split(np.arange(rows), tasks), np.zeros(0, np.int64)]:
        order = np.argsort(codes[rows_of_task], kind="stable")
        ids = rows_of_task[order]
        state.append([codes[ids], weights[ids], np.full(len(ids), -1, np.int8), ids])
    levels = []
    for depth in range(depth_limit(dims) + 1):
        if depth == depth_limit(dims):
            level = Level(np.zeros(0, np.int64), np.zeros(0, np.int64))
        else:
            reports = [candidates(c, w, d, depth, dims, cube_size) for c, w, d, _ in state]
            level = merge_candidates(reports, cube_size)
        levels.append(level)
        for task in state:
            task[2] = advance(task[0], task[1], task[2], level, depth, dims)
        if not len(level.prefixes):
            break
    got = np.full(rows, -2)
    for _, _, depths, ids in state:
        got[ids] = depths
    assert (got == want_depths).all()
    thresholds = {
        (d, int(p)): int(t)
        for d, level in enumerate(levels)
        for p, t in zip(level.prefixes, level.thresholds, strict=True)
    }
    assert thresholds == want_thresholds
