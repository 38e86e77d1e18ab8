"""A streamed scan reads consecutive small row groups together (lake_core/scan.py
``_stream_steps``): an OTree pool's appends leave many row groups of a few rows, and one read
per group cost about a millisecond each. Large groups are still read one at a time."""

from __future__ import annotations

import io

import pyarrow as pa
import pyarrow.parquet as pq

from lake_core.scan import STREAM_ROWS, _stream_steps


def _meta(rows: int, group: int) -> pq.FileMetaData:
    buf = io.BytesIO()
    pq.write_table(pa.table({"i": list(range(rows))}), buf, row_group_size=group)
    return pq.ParquetFile(io.BytesIO(buf.getvalue())).metadata


def test_small_groups_are_read_together_up_to_the_bound() -> None:
    meta = _meta(40_000, 1_000)
    steps = list(_stream_steps(meta, range(meta.num_row_groups)))
    per_step = STREAM_ROWS // 1_000
    assert [len(s) for s in steps] == [per_step, per_step, 40 - 2 * per_step]
    assert [g for s in steps for g in s] == list(range(40))  # every group once, in order


def test_large_groups_and_a_selection_keep_their_order() -> None:
    meta = _meta(3 * STREAM_ROWS, STREAM_ROWS + 10)
    assert list(_stream_steps(meta, range(meta.num_row_groups))) == [[0], [1], [2]]
    small = _meta(10_000, 100)
    assert list(_stream_steps(small, [3, 7, 50])) == [[3, 7, 50]]
    assert list(_stream_steps(small, [])) == []
