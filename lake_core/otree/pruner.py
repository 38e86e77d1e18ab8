"""The OTree pruning rule: skip objects and row groups whose blocks cannot hold a matching row.

A block (one row group; :mod:`lake_core.otree.blocks`) is kept when

* its weight range meets the predicate's interval on ``_lake_weight`` (a sample's cut, or a
  user's own condition on it): ``minWeight <= hi`` (strictly below for ``<``) and
  ``maxWeight >= lo``; and
* its cube's region meets one of the predicate's *boxes* in its revision's coordinates: the
  predicate split on top-level OR, each branch bounded per indexed column by
  :func:`lake_core.expr.key_range` and mapped to lattice coordinates with the revision's own
  transformation (:func:`~lake_core.otree.revisions.bound_coordinates`).

Every block is tested on its own (no tree walk that stops early, the defect of Qbeast #226):
since each row lies in its block's cube and weight range, a vetoed block holds no row the
predicate can select — the soundness rule of :mod:`lake_core.planning`. Objects without OTree
tags, of a revision the catalog does not know, or whose tags do not match their row groups,
are kept whole.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow as pa

from lake_core.expr import Expr, ExpressionError, Or, key_range
from lake_core.objects import ObjectMeta
from lake_core.otree.blocks import Block, blocks_of, revision_of, uid_of
from lake_core.otree.revisions import Revision, bound_coordinates
from lake_core.otree.settings import OTreeLayout
from lake_core.otree.weights import MAX_WEIGHT, MIN_WEIGHT, WEIGHT_COLUMN
from lake_core.planning import Pruner, RowGroupView

#: A box: per dimension an inclusive lattice range, or None for the whole axis.
Box = tuple[tuple[int, int] | None, ...]
#: Boxes beyond this many (an OR of many branches) are not worth testing: keep the hull.
_MAX_BOXES = 64


class OTreePruner(Pruner):
    """Block-level pruning of an OTree pool for ``predicate`` (see the module docstring)."""

    name = "otree"
    reported = True
    beyond_statistics = True

    def __init__(self, predicate: Expr, schema: pa.Schema, layout: OTreeLayout) -> None:
        self.layout = layout
        self.schema = schema
        self.weights = _weight_interval(predicate, schema)
        branches = _or_branches(predicate)
        self.boxes: dict[int, list[Box] | None] = {}
        for revision in layout.revisions:
            boxes = (
                None
                if len(branches) > _MAX_BOXES
                else [_box(b, revision, schema) for b in branches]
            )
            if boxes is not None and any(all(r is None for r in box) for box in boxes):
                boxes = None  # one branch bounds nothing: every cube may match
            self.boxes[revision.id] = boxes
        self._decided: dict[str, list[bool] | None] = {}

    @property
    def active(self) -> bool:
        """Whether the rule can veto anything (else callers leave it out)."""
        return bool(self.layout.revisions) and (
            self.weights != (MIN_WEIGHT, MAX_WEIGHT)
            or any(b is not None for b in self.boxes.values())
        )

    def _blocks(self, obj: ObjectMeta) -> list[bool] | None:
        """Per block of ``obj``, whether it is kept; None: the object is kept whole."""
        if obj.id in self._decided:
            return self._decided[obj.id]
        verdicts: list[bool] | None = None
        revision = self.layout.revision(revision_of(obj), uid_of(obj))
        if revision is not None:
            blocks = blocks_of(obj, revision.dims)
            if blocks is not None and sum(b.count for b in blocks) == obj.count:
                boxes = self.boxes.get(revision.id)
                verdicts = [self._keep(b, boxes) for b in blocks]
        self._decided[obj.id] = verdicts
        return verdicts

    def _keep(self, block: Block, boxes: list[Box] | None) -> bool:
        lo, hi = self.weights
        if block.max_weight < lo or block.min_weight > hi:
            return False
        if boxes is None:
            return True
        cube_box = block.cube.lattice_box()
        return any(
            all(
                r is None or (r[0] <= c_hi and c_lo <= r[1])
                for r, (c_lo, c_hi) in zip(box, cube_box, strict=True)
            )
            for box in boxes
        )

    def keep_object(self, obj: ObjectMeta) -> bool:
        verdicts = self._blocks(obj)
        return verdicts is None or any(verdicts)

    def keep_row_group(self, group: RowGroupView) -> bool:
        verdicts = self._blocks(group.obj)
        if verdicts is None or len(verdicts) != group.metadata.num_row_groups:
            return True
        return verdicts[group.index]


def _or_branches(predicate: Expr) -> list[Expr]:
    """The top-level OR branches of ``predicate`` (itself when it is no OR)."""
    if isinstance(predicate, Or):
        return _or_branches(predicate.left) + _or_branches(predicate.right)
    return [predicate]


def _weight_interval(predicate: Expr, schema: pa.Schema) -> tuple[int, int]:
    """The inclusive weight range a matching row can have (whole range when unbounded)."""
    if WEIGHT_COLUMN not in schema.names:
        return MIN_WEIGHT, MAX_WEIGHT
    try:
        interval = key_range(predicate, WEIGHT_COLUMN, schema)
    except ExpressionError:
        return MIN_WEIGHT, MAX_WEIGHT
    if interval is None:
        return MIN_WEIGHT, MAX_WEIGHT
    lo, lo_inclusive, hi, hi_inclusive = interval
    low = MIN_WEIGHT if lo is None else int(lo) + (0 if lo_inclusive else 1)
    high = MAX_WEIGHT if hi is None else int(hi) - (0 if hi_inclusive else 1)
    return low, high


def _box(branch: Expr, revision: Revision, schema: pa.Schema) -> Box:
    """The lattice box of one OR branch in ``revision`` (None per unbounded axis)."""
    out: list[tuple[int, int] | None] = []
    for dim, column in enumerate(revision.columns):
        if column not in schema.names:
            out.append(None)
            continue
        try:
            interval = key_range(branch, column, schema)
        except ExpressionError:
            interval = None
        if interval is None:
            out.append(None)
            continue
        out.append(bound_coordinates(revision, dim, interval, schema.field(column).type))
    return tuple(out)


def otree_rules(
    predicate: Expr | None, schema: pa.Schema, layout: OTreeLayout | None
) -> Sequence[Pruner]:
    """The OTree rule for a read, when it can veto anything."""
    if predicate is None or layout is None:
        return []
    rule = OTreePruner(predicate, schema, layout)
    return [rule] if rule.active else []


__all__ = ["OTreePruner", "otree_rules"]
