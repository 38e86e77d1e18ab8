"""A memo of the last few results of a pure function of Arrow schemas.

A stream of small loads sees the same schemas over and over: the input's, the pool's. Working
out what each load must do to them (normalize, unify, conform) walks every field in Python —
about 0.7 ms of a 10-row load's 6 ms. The answer depends on the schemas alone (field names,
types and nullability; metadata only where the answer keeps it), so it is kept for the last
:data:`MEMO_SIZE` distinct arguments, found again with ``Schema.equals`` (a C++ comparison, far
cheaper than hashing a schema; with metadata for an answer that keeps the fields' own). Errors are not kept: an argument that raised raises again, with
its own message.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

import pyarrow as pa

MEMO_SIZE = 8


class SchemaMemo:
    """The results of one function for its last :data:`MEMO_SIZE` argument tuples (schemas, or
    None). Thread-safe."""

    def __init__(self, check_metadata: bool = False) -> None:
        self._entries: deque[tuple[tuple[pa.Schema | None, ...], Any]] = deque(maxlen=MEMO_SIZE)
        self._lock = threading.Lock()
        #: Tell schemas apart by their metadata too, for a function whose answer carries it.
        self._check_metadata = check_metadata

    def get(self, *args: pa.Schema | None) -> tuple[bool, Any]:
        """(True, result) for arguments seen lately, else (False, None)."""
        with self._lock:
            for keys, result in self._entries:
                if all(_same(a, k, self._check_metadata) for a, k in zip(args, keys, strict=True)):
                    return True, result
        return False, None

    def put(self, args: tuple[pa.Schema | None, ...], result: Any) -> None:
        with self._lock:
            self._entries.append((args, result))


def _same(a: pa.Schema | None, b: pa.Schema | None, check_metadata: bool) -> bool:
    if a is None or b is None:
        return a is b
    # Field names, types and nullability (and, if asked, metadata).
    return a is b or a.equals(b, check_metadata=check_metadata)
