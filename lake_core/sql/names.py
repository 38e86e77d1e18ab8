"""How SQL names tables: pools, their snapshots, and the lake's metadata tables.

Grammar of one table name (after DuckDB has parsed the SQL, so quoting is gone)::

    [NS.]POOL[@REF][$META]      a pool (or a metadata table of it) at a branch or commit
    lake$META                   a metadata table of the lake itself (``lake$pools``)

``flights`` and ``ns.flights`` are unquoted SQL; a name with ``@`` needs double quotes
(``"flights@dev"``, ``"flights@dev$objects"``); ``flights$commits`` parses unquoted. ``$``
splits at its last occurrence when an identifier follows it (pool and branch names may hold
``$``: ``"a$b@dev"`` is pool ``a$b``; the resolver reads ``a$b`` as a pool when no metadata
table ``b`` exists).
``lake$…`` with no namespace and no ref is always the lake's own; a pool called ``lake`` names
its metadata with a ref (``"lake@main$commits"``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from lake_core.errors import UsageError

__all__ = ["LAKE_WORD", "TableRef", "parse_table_name"]

_META = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

#: The word before ``$`` that names the lake itself rather than a pool.
LAKE_WORD = "lake"


@dataclass(frozen=True)
class TableRef:
    """One table name as SQL wrote it, split into its parts.

    ``pool`` None means the lake itself (then ``meta`` is set and ``namespace``/``ref`` are
    None). ``namespace`` None means the default namespace; ``ref`` None means ``main`` (or
    the time ``--as-of`` names); ``meta`` None means the pool's rows.
    """

    namespace: str | None
    pool: str | None
    ref: str | None = None
    meta: str | None = None

    @property
    def pool_name(self) -> str | None:
        """``NS.POOL`` or ``POOL``, as :meth:`lake_core.lake.Lake.pool` takes it."""
        if self.pool is None:
            return None
        return f"{self.namespace}.{self.pool}" if self.namespace else self.pool

    def __str__(self) -> str:
        text = self.pool_name or LAKE_WORD
        if self.ref is not None:
            text += f"@{self.ref}"
        if self.meta is not None:
            text += f"${self.meta}"
        return text


def parse_table_name(text: str) -> TableRef:
    """``[NS.]POOL[@REF][$META]`` or ``lake$META`` → :class:`TableRef`. Raises UsageError for
    an empty part (``flights@``, ``flights$``, ``.flights``). Pool and branch names are checked
    when they are looked up, not here."""
    base, dollar, meta = text.rpartition("$")
    if not dollar:
        base, meta = text, ""
    elif not meta:
        raise UsageError(f"table name {text!r}: nothing after '$'")
    elif not _META.match(meta):
        base, meta = text, ""  # "a$b@dev": the '$' belongs to a name, not a metadata table
    pool_text, at, ref = base.partition("@")
    if at and not ref:
        raise UsageError(f"table name {text!r}: nothing after '@'")
    if not pool_text:
        raise UsageError(f"table name {text!r}: no pool before '@' or '$'")
    namespace, dot, pool = pool_text.partition(".")
    if not dot:
        namespace, pool = "", pool_text
    if dot and (not namespace or not pool):
        raise UsageError(f"table name {text!r}: a pool is NAME or NAMESPACE.NAME")
    if meta and pool_text == LAKE_WORD and not at:
        return TableRef(None, None, None, meta)
    return TableRef(namespace or None, pool, ref or None, meta or None)
