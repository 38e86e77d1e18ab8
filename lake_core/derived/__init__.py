"""Derived pools: partial aggregations of a source pool kept exact commit by commit, and the
queries they answer (seed 001, "Derived Analytics"; docs/derived.md).

* :mod:`lake_core.derived.spec` — what a derived pool computes, parsed from its SQL;
* :mod:`lake_core.derived.maintain` — create, refresh (incremental), list, drop;
* :mod:`lake_core.derived.answer` — whether a query can be answered from a derived pool, and
  the query that does.
"""
