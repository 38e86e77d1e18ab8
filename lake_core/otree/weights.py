"""TEMPORARY stand-in (lead's testing only; the helper's real module replaces it)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pyarrow as pa

WEIGHT_COLUMN = "_lake_weight"
MIN_WEIGHT = -(2**31)
MAX_WEIGHT = 2**31 - 1


def spark_hash(columns, seed=42):
    n = len(columns[0])
    h = np.full(n, seed & 0xFFFFFFFF, dtype=np.uint64)
    for c in columns:
        s = pd.Series(c.to_pylist() if not isinstance(c, pa.ChunkedArray) else c.to_pylist())
        v = pd.util.hash_array(s.astype(str).to_numpy(), hash_key="0123456789123456").astype(
            np.uint64
        )
        h = (h * np.uint64(1000003)) ^ v
    return (h & np.uint64(0xFFFFFFFF)).astype(np.uint32).view(np.int32)


def weight_cut(f):
    return int(f * (2**32 - 1) - 2**31)


def sample_range(f):
    import math

    from lake_core.errors import UsageError

    if not (isinstance(f, (int, float)) and not math.isnan(f) and 0 < f <= 1):
        raise UsageError(f"bad sample fraction {f}")
    if f >= 1:
        return None
    return MIN_WEIGHT, weight_cut(f)


def weights_for(table, columns, mode):
    cols = [
        table.column(c) if c in table.schema.names else pa.nulls(table.num_rows) for c in columns
    ]
    return pa.array(spark_hash(cols), pa.int32())
