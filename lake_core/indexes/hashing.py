"""64-bit hashes of canonical values (:mod:`lake_core.indexes.canonical`), for bloom indexes.

The hash is DuckDB's ``hash()`` over the canonical Arrow array: vectorised C++, about 0.07 s
for lineitem's six million comments where a NumPy polynomial hash took 1.5 s.

Stability: DuckDB does not promise ``hash()`` across its versions, and a bloom filter built
with one hash function says nothing about values hashed by another. So :data:`FINGERPRINT`
(computed on first use) digests :func:`hash64` over a fixed probe set covering every canonical
type; a bloom index records the fingerprint it was built under, and a lookup under another one
answers "cannot decide" (the object is read unpruned: results stay exact, only pruning is lost
until the index is rebuilt).

DuckDB is imported on first use only (``lake --help`` must start fast). One in-memory
database per process is kept (starting one costs ~20 ms); each call hashes in a cursor of its
own, so threads may hash at once. A forked child starts its own database and never touches
the parent's (its threads did not survive the fork).
"""

from __future__ import annotations

import hashlib
import os
import threading
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

if TYPE_CHECKING:
    import duckdb

__all__ = ["FINGERPRINT", "fingerprint", "hash64"]

_lock = threading.Lock()
_database: tuple[int, duckdb.DuckDBPyConnection] | None = None
#: A forked child's inherited databases: kept, never closed (closing one crashes the child).
_forked_off: list[duckdb.DuckDBPyConnection] = []


def _cursor() -> duckdb.DuckDBPyConnection:
    global _database
    with _lock:
        if _database is None or _database[0] != os.getpid():
            import duckdb  # deferred: only index builds and bloom lookups need it

            if _database is not None:
                _forked_off.append(_database[1])
            con = duckdb.connect(":memory:")
            # Nothing here reads files; rows must come back in input order (the default,
            # pinned because hash64's answer is positional).
            con.execute(
                "SET enable_external_access=false; SET preserve_insertion_order=true"
            ).fetchall()
            _database = (os.getpid(), con)
        return _database[1].cursor()


def hash64(canonical: pa.Array[Any]) -> np.ndarray[Any, np.dtype[np.uint64]]:
    """DuckDB's 64-bit hash of each canonical value, in order. A null's hash is some fixed
    value: callers drop nulls first."""
    if len(canonical) == 0:
        return np.zeros(0, dtype=np.uint64)
    cur = _cursor()
    try:
        cur.register("lakepool_hash_input", pa.table({"v": canonical}))
        out = cur.sql("SELECT hash(v) FROM lakepool_hash_input").to_arrow_table().column(0)
    finally:
        cur.close()
    return np.asarray(out.to_numpy(), dtype=np.uint64)


def _probes() -> tuple[pa.Array[Any], ...]:
    """A fixed probe of every canonical type (never change it: fingerprints would change)."""
    return (
        pa.array([0, 1, -1, 7, 2**40, -(2**62), 2**63 - 1, -(2**63)], pa.int64()),
        pa.array([0.0, 1.5, -2.25, 1e300, -1e-300, float("inf")], pa.float64()),
        pa.array(["", "a", "lakepool", "ünïcødé ✓ 漢字", "x" * 100], pa.large_string()),
        pa.array([b"", b"\x00", b"\x00\xff", b"bytes", bytes(range(256))], pa.large_binary()),
    )


_fingerprint: str | None = None


def fingerprint() -> str:
    """A short hex digest of :func:`hash64` over a fixed probe set (computed once)."""
    global _fingerprint
    if _fingerprint is None:
        digest = hashlib.sha256()
        for probe in _probes():
            digest.update(str(probe.type).encode())
            digest.update(hash64(probe).astype("<u8").tobytes())
        _fingerprint = digest.hexdigest()[:16]
    return _fingerprint


def __getattr__(name: str) -> str:
    # FINGERPRINT is computed lazily (it starts DuckDB): module attribute access does it.
    if name == "FINGERPRINT":
        return fingerprint()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


if TYPE_CHECKING:
    #: The current hash function's fingerprint (see the module docstring).
    FINGERPRINT: str
