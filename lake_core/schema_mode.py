"""Schema modes: what a load may do to a pool's schema, and loads that lack the pool key.

- ``merge`` (the default): new columns union into the pool schema (records of different
  shapes side by side).
- ``strict``: a load that brings a column the pool does not have is refused, naming the
  columns, and nothing is written. The first load into a pool without a schema (an empty
  pool, or a branch with no columns yet) defines it.

A load in which no row has the pool key (its first field absent or null in every row) is
almost always the wrong file or the wrong pool: :func:`check_key_present` warns
(:class:`~lake_core.errors.MissingKeyWarning`, which the CLI prints as ``warning: …``) and,
under ``strict``, refuses it.

The checks run before any object is written, and the strict column check runs again at the
commit point, against the schema of the tip the commit lands on, so two racing first loads
cannot union their columns into a strict pool.
"""

from __future__ import annotations

import warnings

import pyarrow as pa

from lake_core.errors import MissingKeyError, MissingKeyWarning, SchemaModeError, UsageError
from lake_core.poolkey import PoolKey

MERGE = "merge"
STRICT = "strict"
SCHEMA_MODES = (MERGE, STRICT)


def validate_schema_mode(mode: str) -> str:
    if mode not in SCHEMA_MODES:
        raise UsageError(f"invalid schema mode {mode!r}: use merge or strict")
    return mode


def check_new_columns(
    mode: str, pool: str, base: pa.Schema | None, incoming: pa.Schema | None, source: str = ""
) -> None:
    """Under ``strict``, raise SchemaModeError if ``incoming`` has columns ``base`` lacks.
    No schema yet (``base`` None or empty): the incoming columns define it."""
    if mode != STRICT or base is None or len(base) == 0 or incoming is None:
        return
    known = set(base.names)
    new = [n for n in incoming.names if n not in known]
    if new:
        raise SchemaModeError(pool, new, source)


def check_key_present(mode: str, pool: str, key: PoolKey, table: pa.Table, source: str) -> None:
    """Warn (or, under ``strict``, raise MissingKeyError) when no row of ``table`` has the
    pool key."""
    if table.num_rows == 0 or key.is_this:  # the whole record is never missing
        return
    first = key.fields[0]
    if first in table.schema.names and table.column(first).null_count < table.num_rows:
        return
    if mode == STRICT:
        raise MissingKeyError(pool, key.fields, source)
    warnings.warn(MissingKeyWarning(pool, key.fields, source), stacklevel=3)
