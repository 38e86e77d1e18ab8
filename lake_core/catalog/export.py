"""Snapshot export: copy one catalog version to another prefix.

The destination becomes a catalog of its own, readable with ``Catalog(store, prefix="")``:

- **full**: the root file byte for byte at ``vn/<version>``, and every file it reaches (catalog
  definition, nodes, object definitions) at the same relative paths. Self-contained: it stays
  readable whatever happens to the source.
- **minimal**: only the root, rewritten with one more system row, ``export_base``, the URI of
  the source catalog, against which its relative pointers resolve. Cheap, but it depends on the
  source keeping those files (the reason the source records its exports).

Both write ``vn/oldest`` and ``vn/latest`` (= the version) at the destination, and then commit
a version of the source whose catalog definition records ``exported_snapshots[name] =
vn/<version>``. Copies use put-if-missing; a file already there under the same immutable path
is the same file. A destination that already holds this version's root is refused.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from lake_core.catalog.files import CatalogFiles
from lake_core.catalog.node import decode_node, encode_root
from lake_core.errors import AlreadyExistsError, ObjectExistsError
from lake_core.layout import CatalogLayout
from lake_core.stores.base import ObjectStore

if (
    TYPE_CHECKING
):  # the Catalog calls in here (Catalog.export); at run time only its instance is used
    from lake_core.catalog.catalog import Catalog


@dataclass(frozen=True)
class ExportResult:
    """What an export did: the version exported, how many files it wrote at the destination,
    and the source version that records it."""

    version: int
    files: int
    full: bool
    destination: str
    recorded_version: int


def export_snapshot(
    catalog: Catalog, dest: ObjectStore, *, full: bool = False, name: str | None = None
) -> ExportResult:
    """Export the latest version of ``catalog`` to the root of ``dest``."""
    snap = catalog.snapshot()
    source = snap.state.files
    target = CatalogFiles(dest, "", cache_entries=0)
    written = 0
    if full:
        tree = snap.root.tree
        written = _copy_reachable(source, target, snap.root.catalog_def, tree.children, tree.values)
        if snap.root.export_base is None:
            root_bytes = catalog.files.get(snap.path)
        else:  # exporting an export: now everything is here
            root_bytes = encode_root(replace(snap.root, export_base=None))
    else:
        base = snap.root.export_base or source.uri
        root_bytes = encode_root(replace(snap.root, export_base=base))
    try:
        target.write_new(snap.path, root_bytes)
    except ObjectExistsError:
        raise AlreadyExistsError("catalog export", f"{dest.uri} ({snap.path})") from None
    written += 1
    target.write_hint(CatalogLayout.OLDEST_HINT, snap.version)
    target.write_hint(CatalogLayout.LATEST_HINT, snap.version)
    txn = catalog.begin()
    txn.record_export(name or dest.uri, snap.path)
    recorded = txn.commit()
    return ExportResult(snap.version, written, full, dest.uri, recorded)


def _copy_reachable(
    source: CatalogFiles,
    target: CatalogFiles,
    catalog_def: str,
    children: tuple[object, ...],
    values: tuple[str, ...],
) -> int:
    """Copy the catalog definition, then the tree level by level (each level in parallel)
    with the definitions its rows point to. Returns the number of files copied."""

    def copy(path: str) -> bytes:
        data = source.get(path)
        try:
            target.write_new(path, data)
        except ObjectExistsError:
            pass
        return data

    copy(catalog_def)
    count = 1
    source.map(copy, list(values))
    count += len(values)
    level = [str(c) for c in children]
    while level:
        datas = source.map(copy, level)
        count += len(level)
        nxt: list[str] = []
        defs: list[str] = []
        for path, data in zip(level, datas, strict=True):
            node = decode_node(path, data)
            nxt.extend(str(c) for c in node.children)
            defs.extend(node.values)
        source.map(copy, defs)
        count += len(defs)
        level = nxt
    return count
