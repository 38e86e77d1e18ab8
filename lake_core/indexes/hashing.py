"""64-bit hashes of canonical values, for the bloom index kind.

The hash is DuckDB's ``hash()`` (vectorised C++: about 0.07 s for lineitem's six million
comments here, where a NumPy polynomial hash took 1.5 s) over the canonical Arrow arrays of
:mod:`lake_core.indexes.canonical`. DuckDB does not promise that function across its versions,
so :func:`fingerprint` hashes a fixed probe of every canonical type; a bloom index records the
fingerprint it was built with, and a lookup under a different one answers "cannot tell" (the
object is read unpruned: results stay exact, only the pruning is lost, until ``lake index
apply`` after ``--remove`` rebuilds it).
"""

from __future__ import annotations

import functools
import hashlib
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa

_local = threading.local()


def hash64(
    values: pa.Array[Any] | Sequence[pa.Array[Any]],
) -> np.ndarray[Any, np.dtype[np.uint64]]:
    """DuckDB's 64-bit hash of each of ``values`` (canonical, without nulls; or consecutive
    arrays of one type, hashed as one without copying them together), in order."""
    import duckdb  # deferred: only index builds and bloom lookups need it

    if isinstance(values, pa.ChunkedArray):
        values = values.chunks
    chunks = [values] if isinstance(values, pa.Array) else [v for v in values if len(v)]
    if not chunks or sum(len(c) for c in chunks) == 0:
        return np.zeros(0, dtype=np.uint64)
    con = getattr(_local, "con", None)
    if con is None:
        # One in-memory connection per thread (a connection is not shared between threads;
        # opening one per call costs more than hashing a row group).
        con = _local.con = duckdb.connect()
        con.execute("SET threads = 1")  # the callers run their own threads
    name = "lakepool_hash_input"
    con.register(name, pa.table({"v": pa.chunked_array(chunks)}))
    try:
        # One thread (above), so rows come back in input order; as Arrow, which costs a
        # third less than fetchnumpy here.
        out = con.sql(f"SELECT hash(v) AS h FROM {name}").to_arrow_table().column(0)
    finally:
        con.unregister(name)
    return np.asarray(out.to_numpy(), dtype=np.uint64)


_PROBES: tuple[pa.Array[Any], ...] = (
    pa.array([0, 1, -1, 2**40, -(2**62), 7], pa.int64()),
    pa.array([0.0, 1.5, -2.25, 1e300], pa.float64()),
    pa.array(["", "a", "lakepool", "ünïcødé ✓", "x" * 100], pa.large_string()),
    pa.array([b"", b"\x00\xff", b"bytes"], pa.large_binary()),
)


@functools.cache
def fingerprint() -> str:
    """A short digest of :func:`hash64` over a fixed probe of every canonical type."""
    digest = hashlib.sha256()
    for probe in _PROBES:
        digest.update(hash64(probe).tobytes())
    return digest.hexdigest()[:16]
