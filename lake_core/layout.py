"""The storage layout: every key the lake writes, named and parsed in this one module.

Keys are relative to the lake's root (the store's URI). No other module formats or parses a
key: they ask a :class:`PoolLayout` (one pool's files), a :class:`JournalLayout` (one
journal's files) or a :class:`CatalogLayout` (the catalog's files), so the format is written
down once, here, and ``tests/core/test_layout.py`` keeps it that way. The format is on disk in
every existing lake: changing a pattern below breaks them.

Lake and pool files (``<pool>`` is the pool's KSUID, never its name, so a rename or a drop
moves nothing):

==================  ==================================================  ======================
file                key                                                 made by
==================  ==================================================  ======================
lake marker         ``lake.json``                                       :data:`LAKE_MARKER`
catalog             ``catalog/`` + a catalog path (table below)         :class:`CatalogLayout`
data object         ``pools/<pool>/data/<object>.parquet``              :meth:`PoolLayout.data`
index object        ``pools/<pool>/index/<object>-<rule>-<index>.parquet`` :meth:`PoolLayout.index`
commit object       ``pools/<pool>/commits/<commit>.json``              :meth:`PoolLayout.commit`
cached snapshot     ``pools/<pool>/commits/<commit>.snap``              ``PoolLayout.snapshot``
journal entry       ``pools/<pool>/branches/<n>.json`` (n = 1, 2, …)    :meth:`JournalLayout.entry`
journal hints       ``pools/<pool>/branches/HEAD``, ``…/TAIL``          :class:`JournalLayout`
staged load         ``pools/<pool>/staging/<staged>.json``              :meth:`PoolLayout.staged`
purge record        ``pools/<pool>/purged/<commit>.json``               ``PoolLayout.purge_record``
vacated-ids record  ``pools/<pool>/history/vacated-<record>.ids``       ``PoolLayout.vacated``
==================  ==================================================  ======================

An index object's name holds its data object, the id of its rule's definition and its own
KSUID (:mod:`lake_core.indexes`): each build writes a new file, so two racing builds never
collide, and cleanup ages an unreferenced one by its KSUID as it does data.

Catalog paths are relative to the catalog's root: ``catalog/`` in a lake, the destination's
root for an exported catalog. The tree and the definition files store these relative paths,
which is why an export is a plain copy:

===================  ===================================================================
file                 path
===================  ===================================================================
version root         ``vn/<version>``: the version's 64 binary digits, least significant
                     first (so consecutive versions spread over key prefixes)
hints                ``vn/latest``, ``vn/oldest`` (decimal text; readers probe past them)
tree node            ``node/<uuid4>.arrow``
catalog definition   ``def/catalog/<uuid4>.binpb``
namespace            ``def/ns/<uuid4>-<ns>.binpb``
pool (table)         ``def/table/<uuid4>-<ns>-<pool>.binpb``
view                 ``def/view/<uuid4>-<ns>-<view>.binpb``
index rule           ``def/index_rule/<uuid4>-<ns>-<rule>.binpb``
distributed txn      ``dtxn/<transaction-id>.binpb``
===================  ===================================================================

The names in a definition path are for people reading a listing; readers never parse them.

Parsing is strict: ``parse_*`` returns None for a key that is not exactly of its kind (another
directory, a nested path, a foreign extension), so a listing can be sorted into kinds without
guessing. Ids inside keys are not validated here (a commit id is a KSUID by convention only);
callers that care check them.
"""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

#: The lake marker (format, version, lake id), written once with put-if-missing.
LAKE_MARKER = "lake.json"
#: Where a lake keeps its catalog.
CATALOG_ROOT = "catalog"
#: Every pool's files sit under ``pools/<pool>/``.
POOLS_ROOT = "pools"

_DATA_SUFFIX = ".parquet"
_INDEX_SUFFIX = ".parquet"
_COMMIT_SUFFIX = ".json"
_SNAPSHOT_SUFFIX = ".snap"
_DOC_SUFFIX = ".json"
_VACATED_STEM = "vacated-"
_VACATED_SUFFIX = ".ids"


def _leaf(key: str, prefix: str, suffix: str) -> str | None:
    """The name between ``prefix`` and ``suffix`` when ``key`` is a direct child of
    ``prefix`` ending in ``suffix``, else None."""
    if not key.startswith(prefix) or not key.endswith(suffix):
        return None
    name = key[len(prefix) : len(key) - len(suffix)]
    return name if name and "/" not in name else None


# -- journals ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class JournalLayout:
    """The files of one journal rooted at ``prefix`` (no trailing slash): numbered entries
    ``<n>.json`` and the ``HEAD`` and ``TAIL`` hints. See :mod:`lake_core.journal`."""

    prefix: str

    def __post_init__(self) -> None:
        object.__setattr__(self, "prefix", self.prefix.rstrip("/"))

    @property
    def dir(self) -> str:
        """The journal's directory with a trailing slash: list it to see every file."""
        return f"{self.prefix}/"

    def entry(self, n: int) -> str:
        return f"{self.prefix}/{n}{_DOC_SUFFIX}"

    def parse_entry(self, key: str) -> int | None:
        """The entry number of ``key``, or None if it is not an entry of this journal."""
        name = _leaf(key, self.dir, _DOC_SUFFIX)
        return int(name) if name is not None and name.isascii() and name.isdigit() else None

    @property
    def head(self) -> str:
        return f"{self.prefix}/HEAD"

    @property
    def tail(self) -> str:
        return f"{self.prefix}/TAIL"


# -- pools ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PoolLayout:
    """The keys of one pool's files (see the module's table). Cheap: build one wherever a pool
    id is at hand, or use ``Pool.layout``."""

    pool_id: str

    @property
    def root(self) -> str:
        """Everything of the pool is under this prefix (with a trailing slash)."""
        return f"{POOLS_ROOT}/{self.pool_id}/"

    # data objects

    @property
    def data_dir(self) -> str:
        return f"{self.root}data/"

    def data(self, object_id: str) -> str:
        """Where data object ``object_id`` lives."""
        return f"{self.data_dir}{object_id}{_DATA_SUFFIX}"

    def parse_data(self, key: str) -> str | None:
        """The object id of a data object's key, else None."""
        return _leaf(key, self.data_dir, _DATA_SUFFIX)

    # index objects (search indexes, :mod:`lake_core.indexes`)

    @property
    def index_dir(self) -> str:
        return f"{self.root}index/"

    def index(self, object_id: str, rule_id: str, index_id: str) -> str:
        """Where index object ``index_id`` of data object ``object_id`` under the rule whose
        definition is ``rule_id`` lives. None of the three holds a '-'."""
        for part in (object_id, rule_id, index_id):
            if "-" in part or not part:
                raise ValueError(f"an id is not empty and has no '-': {part!r}")
        return f"{self.index_dir}{object_id}-{rule_id}-{index_id}{_INDEX_SUFFIX}"

    def parse_index(self, key: str) -> tuple[str, str, str] | None:
        """``(object id, rule id, index id)`` of an index object's key, else None."""
        name = _leaf(key, self.index_dir, _INDEX_SUFFIX)
        if name is None:
            return None
        parts = name.split("-")
        return (parts[0], parts[1], parts[2]) if len(parts) == 3 and all(parts) else None

    # commits and their cached snapshots

    @property
    def commits_dir(self) -> str:
        return f"{self.root}commits/"

    def commit(self, commit_id: str) -> str:
        """The commit object of ``commit_id``."""
        return f"{self.commits_dir}{commit_id}{_COMMIT_SUFFIX}"

    def snapshot(self, commit_id: str) -> str:
        """The cached snapshot of the pool at ``commit_id``."""
        return f"{self.commits_dir}{commit_id}{_SNAPSHOT_SUFFIX}"

    def parse_commit(self, key: str) -> str | None:
        """The commit id of a commit object's key, else None."""
        return _leaf(key, self.commits_dir, _COMMIT_SUFFIX)

    def parse_snapshot(self, key: str) -> str | None:
        """The commit id of a cached snapshot's key, else None."""
        return _leaf(key, self.commits_dir, _SNAPSHOT_SUFFIX)

    # the branch journal

    @property
    def journal(self) -> JournalLayout:
        """The pool's branch journal (branch name → tip commit, vacate tails)."""
        return JournalLayout(f"{self.root}branches")

    # staged loads

    @property
    def staging_dir(self) -> str:
        return f"{self.root}staging/"

    def staged(self, staged_id: str) -> str:
        """The staging document of ``lake add`` ``staged_id``."""
        return f"{self.staging_dir}{staged_id}{_DOC_SUFFIX}"

    def parse_staged(self, key: str) -> str | None:
        """The staged id of a staging document's key, else None."""
        return _leaf(key, self.staging_dir, _DOC_SUFFIX)

    # purge records

    @property
    def purged_dir(self) -> str:
        return f"{self.root}purged/"

    def purge_record(self, commit_id: str) -> str:
        """The record of the purge of the objects ``commit_id`` added."""
        return f"{self.purged_dir}{commit_id}{_DOC_SUFFIX}"

    def parse_purge_record(self, key: str) -> str | None:
        """The purged commit's id of a purge record's key, else None."""
        return _leaf(key, self.purged_dir, _DOC_SUFFIX)

    # vacated-ids records

    @property
    def vacated_prefix(self) -> str:
        """Every vacated-ids record's key starts with this (list it to find them all)."""
        return f"{self.root}history/{_VACATED_STEM}"

    def vacated(self, record_id: str) -> str:
        """Vacated-ids record ``record_id`` (a KSUID, one per vacate)."""
        return f"{self.vacated_prefix}{record_id}{_VACATED_SUFFIX}"

    def parse_vacated(self, key: str) -> str | None:
        """The record id of a vacated-ids record's key, else None."""
        return _leaf(key, self.vacated_prefix, _VACATED_SUFFIX)


# -- the catalog ------------------------------------------------------------------------------

#: Bits in a catalog version's name; versions are below ``2**63``.
VERSION_BITS = 64
MAX_VERSION = 2**63 - 1
_VERSION_DIR = "vn/"
_VERSION_NAME = re.compile(rf"^[01]{{{VERSION_BITS}}}$")
_DEF = ".binpb"


def version_name(version: int) -> str:
    """``12345678`` → ``0111001010000110001111010000…`` (64 characters)."""
    if version < 0:
        raise ValueError(f"version must be non-negative, not {version}")
    if version > MAX_VERSION:
        raise ValueError(f"version {version} does not fit in 63 bits")
    return format(version, f"0{VERSION_BITS}b")[::-1]


def parse_version_name(name: str) -> int:
    """Inverse of :func:`version_name`. Raises ValueError for anything else."""
    if not _VERSION_NAME.match(name):
        raise ValueError(f"{name!r} must match pattern ^[01]{{{VERSION_BITS}}}$")
    return int(name[::-1], 2)


@dataclass(frozen=True)
class CatalogLayout:
    """The catalog's files under ``prefix`` of a store (``catalog`` in a lake; empty for an
    exported catalog at the root of its destination). The path methods return paths relative
    to the catalog, which is what the tree records; :meth:`key` turns one into a store key."""

    prefix: str = CATALOG_ROOT

    def __post_init__(self) -> None:
        object.__setattr__(self, "prefix", self.prefix.strip("/"))

    def key(self, path: str) -> str:
        """The store key of catalog path ``path``."""
        return f"{self.prefix}/{path}" if self.prefix else path

    def uri(self, store_uri: str) -> str:
        """The catalog's location as a URI another process can open as a catalog root."""
        base = store_uri.rstrip("/")
        return f"{base}/{self.prefix}" if self.prefix else base

    # version roots and hints

    #: Hint: the newest version a writer saw committed.
    LATEST_HINT = f"{_VERSION_DIR}latest"
    #: Hint: the oldest version guaranteed to exist.
    OLDEST_HINT = f"{_VERSION_DIR}oldest"

    @staticmethod
    def version_root(version: int) -> str:
        """The root node file of ``version``: ``vn/<name>``."""
        return _VERSION_DIR + version_name(version)

    @staticmethod
    def parse_version_root(path: str) -> int:
        """Inverse of :meth:`version_root`. Raises ValueError for a path that is not a root."""
        if not path.startswith(_VERSION_DIR):
            raise ValueError(f"{path!r} is not a root node path (vn/<64 binary digits>)")
        return parse_version_name(path[len(_VERSION_DIR) :])

    @staticmethod
    def is_version_root(path: str) -> bool:
        return path.startswith(_VERSION_DIR) and bool(
            _VERSION_NAME.match(path[len(_VERSION_DIR) :])
        )

    # fresh files (a new UUID each call: written once, never replaced)

    @staticmethod
    def new_node() -> str:
        return f"node/{uuid.uuid4()}.arrow"

    @staticmethod
    def new_catalog_def() -> str:
        return f"def/catalog/{uuid.uuid4()}{_DEF}"

    @staticmethod
    def new_namespace_def(namespace: str) -> str:
        return f"def/ns/{uuid.uuid4()}-{namespace}{_DEF}"

    @staticmethod
    def new_table_def(namespace: str, pool: str) -> str:
        return f"def/table/{uuid.uuid4()}-{namespace}-{pool}{_DEF}"

    @staticmethod
    def new_view_def(namespace: str, view: str) -> str:
        return f"def/view/{uuid.uuid4()}-{namespace}-{view}{_DEF}"

    @staticmethod
    def new_index_rule_def(namespace: str, rule: str) -> str:
        return f"def/index_rule/{uuid.uuid4()}-{namespace}-{rule}{_DEF}"

    @staticmethod
    def dtxn(transaction_id: str) -> str:
        """A saved distributed transaction's definition."""
        return f"dtxn/{transaction_id}{_DEF}"


__all__ = [
    "CATALOG_ROOT",
    "LAKE_MARKER",
    "MAX_VERSION",
    "POOLS_ROOT",
    "VERSION_BITS",
    "CatalogLayout",
    "JournalLayout",
    "PoolLayout",
    "parse_version_name",
    "version_name",
]
