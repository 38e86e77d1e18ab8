"""Checks shared by the OTree tests: the layout's invariants, read back from the files, and the
brute-force sample every sampled read must equal."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lake_core.otree.blocks import blocks_of, revision_of, uid_of
from lake_core.otree.revisions import coordinates
from lake_core.otree.weights import WEIGHT_COLUMN, sample_range
from lake_core.pool import Pool


def read_object(pool: Pool, object_id: str) -> pq.ParquetFile:
    import io

    return pq.ParquetFile(io.BytesIO(pool.store.get(pool.layout.data(object_id))))


def check_otree_invariants(
    pool: Pool, ref: str | None = None, *, forgotten_ok: bool = False
) -> dict[str, int]:
    """Assert, for every live object of ``ref`` with OTree tags: its blocks match its row
    groups one to one (count), every row of a block lies in the block's cube (recomputed with
    the object's revision) and weight range, the block's minWeight is its smallest weight, and blocks come in cube pre-order. Returns counts."""
    layout = pool.config.otree
    assert layout is not None
    snap = pool.snapshot(pool.resolve(ref))
    counts = {"indexed": 0, "unindexed": 0, "blocks": 0}
    for obj in snap.objects.values():
        revision = layout.revision(revision_of(obj), uid_of(obj))
        if revision_of(obj) == 0:
            counts["unindexed"] += 1
            continue
        if revision is None and forgotten_ok:
            counts["forgotten"] = counts.get("forgotten", 0) + 1
            continue
        assert revision is not None, f"object {obj.id}: revision {revision_of(obj)} unknown"
        blocks = blocks_of(obj, revision.dims)
        assert blocks is not None, f"object {obj.id}: unreadable blocks tag"
        f = read_object(pool, obj.id)
        assert f.metadata.num_row_groups == len(blocks), obj.id
        previous = None
        for i, block in enumerate(blocks):
            rg = f.read_row_group(i)
            assert rg.num_rows == block.count, (obj.id, i)
            w = rg.column(WEIGHT_COLUMN).to_numpy()
            assert w.min() == block.min_weight, (obj.id, i)
            assert w.max() <= block.max_weight, (obj.id, i)
            q = coordinates(rg, revision)
            for dim, (lo, hi) in enumerate(block.cube.lattice_box()):
                assert q[:, dim].min() >= lo and q[:, dim].max() <= hi, (obj.id, i, dim)
            key = block.cube.sort_key()
            assert previous is None or previous <= key, (obj.id, i, "blocks not in pre-order")
            previous = key
            counts["blocks"] += 1
        counts["indexed"] += 1
    return counts


def brute_sample(table: pa.Table, fraction: float) -> pa.Table:
    """The rows of ``table`` a ``fraction`` sample must return: the weight filter, applied to
    everything."""
    cut = sample_range(fraction)
    if cut is None:
        return table
    w = table.column(WEIGHT_COLUMN)
    return table.filter(pc.and_(pc.greater_equal(w, cut[0]), pc.less(w, cut[1])))


def rows_of(table: pa.Table, columns: list[str]) -> list[tuple[object, ...]]:
    """The table's rows as sorted tuples of ``columns`` (a multiset to compare)."""
    cols = [table.column(c).to_pylist() for c in columns]
    return sorted(zip(*cols, strict=True), key=repr)


__all__ = ["brute_sample", "check_otree_invariants", "read_object", "rows_of"]
