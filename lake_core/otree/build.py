"""Building an OTree over one batch: which cube each row belongs to, and in what order rows
are written.

The construction is the exact level-wise one (anchor §6.2, "Phase 1"): at depth ``L`` every
cube with rows not yet assigned either

* holds at most ``C`` of them: it is a *leaf* (threshold :data:`MAX_WEIGHT`) and takes them
  all; a cube at the deepest level (:func:`~lake_core.otree.cubes.depth_limit`) is always a
  leaf, since its rows' coordinates cannot be told apart; or
* holds more: its threshold is the ``C``-th smallest weight among them, and it takes every
  one of them whose weight is at most that threshold (so ties stay together; a cube may
  take a few more than ``C``).

The rest descend to the children. Hence, for every row assigned to cube ``c``:
``threshold(parent(c)) < w <= threshold(c)``, and thresholds grow along every branch.

Rows are grouped by Morton code first (:mod:`lake_core.otree.cubes`), so each cube is a
contiguous run at every depth and a level costs one pass plus one ``np.partition`` per cube
that overflows (at most ``rows / C`` of them).

*Rollup* then packs cubes into objects: deepest first, a cube whose group holds fewer than
``rollup`` rows joins its parent's group (Qbeast's rule), so an object holds a subtree's
top and its small descendants. Within an object rows are ordered by (cube pre-order,
weight): each cube's rows are one block, one Parquet row group.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lake_core.otree.cubes import Cube, depth_limit, morton
from lake_core.otree.weights import MAX_WEIGHT


@dataclass(frozen=True)
class BuiltBlock:
    """One cube's rows of the batch: ``rows`` (indices into the batch, in weight order)."""

    cube: Cube
    rows: np.ndarray
    min_weight: int
    #: The cube's threshold for this write (:data:`MAX_WEIGHT` for a leaf).
    max_weight: int


@dataclass(frozen=True)
class BuiltTree:
    """The batch as objects: each a list of blocks in cube pre-order."""

    objects: list[list[BuiltBlock]]
    #: Every row's Morton code (int64), for ordering rows by place within a block.
    codes: np.ndarray

    @property
    def blocks(self) -> list[BuiltBlock]:
        return [b for obj in self.objects for b in obj]


def assign_cubes(
    q: np.ndarray, weights: np.ndarray, cube_size: int
) -> tuple[np.ndarray, np.ndarray, dict[tuple[int, int], int]]:
    """Cube of every row: ``(depth, code)`` per row (the cube is ``code >> shift(depth)``) and
    the threshold of every inner cube, keyed ``(depth, prefix)``.

    ``q``: lattice coordinates (rows, dims); ``weights``: int32; ``cube_size`` >= 1.
    """
    n, dims = q.shape
    limit = depth_limit(dims)
    codes = morton(q)
    order = np.argsort(codes, kind="stable")
    sorted_codes = codes[order]
    sorted_weights = weights[order].astype(np.int64)
    depth_of = np.full(n, -1, dtype=np.int64)
    thresholds: dict[tuple[int, int], int] = {}
    pending = np.arange(n)  # positions in sorted order not yet assigned, ascending
    for depth in range(limit + 1):
        if not len(pending):
            break
        shift = dims * (limit - depth)
        prefixes = sorted_codes[pending] >> shift
        starts = np.flatnonzero(np.r_[True, prefixes[1:] != prefixes[:-1]])
        ends = np.r_[starts[1:], len(pending)]
        sizes = ends - starts
        take = np.ones(len(pending), dtype=bool)
        if depth < limit:
            for s, e in zip(starts[sizes > cube_size], ends[sizes > cube_size], strict=True):
                w = sorted_weights[pending[s:e]]
                threshold = int(np.partition(w, cube_size - 1)[cube_size - 1])
                thresholds[(depth, int(prefixes[s]))] = threshold
                take[s:e] = w <= threshold
        depth_of[order[pending[take]]] = depth
        pending = pending[~take]
    return depth_of, codes, thresholds


def build_tree(
    q: np.ndarray, weights: np.ndarray, cube_size: int, rollup: int | None = None
) -> BuiltTree:
    """The batch's cubes, blocks and objects (see the module docstring). ``rollup``: rows
    below which a cube's group joins its parent's (default ``cube_size``)."""
    n, dims = q.shape
    rollup = cube_size if rollup is None else rollup
    depth_of, codes, thresholds = assign_cubes(q, weights, cube_size)
    limit = depth_limit(dims)
    prefix = codes >> (dims * (limit - depth_of))
    # Rows by (cube pre-order, weight): pre-order is (prefix << shift, depth).
    start_code = prefix << (dims * (limit - depth_of))
    order = np.lexsort((weights, depth_of, start_code))
    ordered_depth, ordered_prefix = depth_of[order], prefix[order]
    cut = np.flatnonzero(
        np.r_[
            True,
            (ordered_depth[1:] != ordered_depth[:-1]) | (ordered_prefix[1:] != ordered_prefix[:-1]),
        ]
    )
    bounds = np.r_[cut, n]
    blocks: dict[Cube, BuiltBlock] = {}
    for s, e in zip(bounds[:-1], bounds[1:], strict=True):
        depth, pre = int(ordered_depth[s]), int(ordered_prefix[s])
        cube = Cube(dims, depth, pre)
        rows = order[s:e]
        blocks[cube] = BuiltBlock(
            cube,
            rows,
            int(weights[rows[0]]),
            thresholds.get((depth, pre), MAX_WEIGHT),
        )
    return BuiltTree(rollup_objects(blocks, rollup), codes)


def rollup_objects(blocks: dict[Cube, BuiltBlock], rollup: int) -> list[list[BuiltBlock]]:
    """Pack blocks into objects (:func:`rollup_groups`)."""
    groups = rollup_groups({c: len(b.rows) for c, b in blocks.items()}, rollup)
    return [[blocks[c] for c in group] for group in groups]


def rollup_groups(rows: dict[Cube, int], rollup: int) -> list[list[Cube]]:
    """Pack cubes (with their row counts) into objects: deepest cube first, a group under
    ``rollup`` rows that is not the root joins its parent's group. Objects come out in
    pre-order of their top cube, and each object's cubes in pre-order."""
    group_of: dict[Cube, Cube] = {c: c for c in rows}
    members: dict[Cube, list[Cube]] = {c: [c] for c in rows}
    sizes: dict[Cube, int] = dict(rows)
    for cube in sorted(rows, key=lambda c: -c.depth):
        if group_of[cube] is not cube or cube.depth == 0 or sizes[cube] >= rollup:
            continue
        parent = cube.parent()
        while parent not in rows and parent.depth > 0:  # the tree is complete; defensive
            parent = parent.parent()
        head = group_of.get(parent, parent)
        if head not in members:
            members[head], sizes[head] = [], 0
            group_of[head] = head
        members[head] += members.pop(cube)
        sizes[head] += sizes.pop(cube)
        for member in members[head]:
            group_of[member] = head
    out = []
    for head in sorted(members, key=Cube.sort_key):
        cubes = sorted((c for c in members[head] if c in rows), key=Cube.sort_key)
        if cubes:
            out.append(cubes)
    return out


__all__ = [
    "BuiltBlock",
    "BuiltTree",
    "assign_cubes",
    "build_tree",
    "rollup_groups",
    "rollup_objects",
]
