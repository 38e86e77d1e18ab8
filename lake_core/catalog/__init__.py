"""The Olympia catalog: the lake's namespaces, pools, views and index rules in a versioned,
copy-on-write B-tree on the object store (``<lake>/catalog/``). See ``docs/catalog.md``.

Modules, one noun each: :mod:`btree_keys` (object keys in the tree), :mod:`node` (Arrow IPC
node files), :mod:`btree` (the pure B-tree), :mod:`defs` (protobuf definition files),
:mod:`files` (reading and writing them), :mod:`state` (typed reads of one tree),
:mod:`actions` (apply_action, conflicts), :mod:`transaction` (commit and replay),
:mod:`catalog` (the facade), :mod:`export` (snapshot export), :mod:`pools` (the pool registry).
Where every file lives (version roots, hints, nodes, definitions) is
:class:`lake_core.layout.CatalogLayout`'s.
"""

from lake_core.catalog.btree_keys import KeyWidths, ObjectRef
from lake_core.catalog.catalog import Catalog
from lake_core.catalog.export import ExportResult
from lake_core.catalog.pools import CatalogPoolRegistry, pool_config_of, table_def_of
from lake_core.catalog.state import CatalogSnapshot, CatalogState
from lake_core.catalog.transaction import Transaction

__all__ = [
    "Catalog",
    "CatalogPoolRegistry",
    "CatalogState",
    "ExportResult",
    "KeyWidths",
    "ObjectRef",
    "CatalogSnapshot",
    "Transaction",
    "pool_config_of",
    "table_def_of",
]
