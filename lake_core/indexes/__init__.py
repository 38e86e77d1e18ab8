"""Search indexes (issue 15; the Zed lake's index rules and index objects, seeds 000 and 001).

An *index rule* lives in the catalog (versioned with it): it names one top-level field, a kind
(``exact``: every value → the row groups holding it; ``bloom``: per row group, "maybe / no" at
a bounded false-positive rate) and the pools of its namespace it covers (all, or those listed).
An *index object* is the index of one data object under one rule: an immutable file at
``pools/<pool>/index/<object>-<rule id>-<index id>.parquet`` written before the commit that
adds it (:mod:`lake_core.indexes.kinds` builds and reads it).

A commit makes an index part of a snapshot with an ``AddIndex`` action and takes it out with
``DeleteIndex``; deleting a data object deletes its index entries in the same commit. So time
travel sees the indexes of that snapshot, and an index entry never outlives its object.

Modules: :mod:`.meta` (an index entry), :mod:`.rules` (rules in the catalog),
:mod:`.canonical`, :mod:`.hashing`, :mod:`.sbbf` (Parquet's bloom filters) and :mod:`.kinds`
(the index objects' bytes),
:mod:`.building` (indexing data objects), :mod:`.values` (which values a predicate pins a
field to), :mod:`.pruner` (the read planner's rule), :mod:`.apply` (``lake index apply``).

The package itself imports nothing: :mod:`lake_core.commit` needs :mod:`.meta` and must not
pull in the catalog (protobuf) or DuckDB, so that ``lake --help`` starts fast.
"""
