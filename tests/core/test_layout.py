"""The storage layout (lake_core/layout.py): every key kind round-trips through its parser, the
keys are byte-for-byte the ones existing lakes hold, and no other module formats a key."""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from lake_core.layout import (
    LAKE_MARKER,
    MAX_VERSION,
    CatalogLayout,
    JournalLayout,
    PoolLayout,
    parse_version_name,
    version_name,
)

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("lake_core", "lake_cli", "lake_spark", "lake_orchestration")
POOL = "2kBZJ3EYqOr2rMJzXwYCPqSdbxK"
OBJ = "2kBZJ5kpDsl0Qd1kGyR5cZ4n6tS"
COMMIT = "2kBZJ7Hh2YxXzNQh1GW2cIqBqLd"


# -- the format, frozen -----------------------------------------------------------------------


def test_pool_keys_are_the_ones_existing_lakes_hold() -> None:
    layout = PoolLayout(POOL)
    base = f"pools/{POOL}"
    assert LAKE_MARKER == "lake.json"
    assert layout.root == f"{base}/"
    assert layout.data(OBJ) == f"{base}/data/{OBJ}.parquet"
    assert layout.index(OBJ, "rule1", "idx1") == f"{base}/index/{OBJ}-rule1-idx1.parquet"
    assert layout.commit(COMMIT) == f"{base}/commits/{COMMIT}.json"
    assert layout.snapshot(COMMIT) == f"{base}/commits/{COMMIT}.snap"
    assert layout.journal.entry(7) == f"{base}/branches/7.json"
    assert layout.journal.head == f"{base}/branches/HEAD"
    assert layout.journal.tail == f"{base}/branches/TAIL"
    assert layout.staged(OBJ) == f"{base}/staging/{OBJ}.json"
    assert layout.purge_record(COMMIT) == f"{base}/purged/{COMMIT}.json"
    assert layout.vacated(OBJ) == f"{base}/history/vacated-{OBJ}.ids"


def test_catalog_paths_are_the_ones_existing_catalogs_hold() -> None:
    uuid4 = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"
    lay = CatalogLayout
    assert lay().key("vn/latest") == "catalog/vn/latest"
    assert lay("").key("vn/latest") == "vn/latest"
    assert lay("/exp/").key("node/x.arrow") == "exp/node/x.arrow"
    assert lay().uri("s3://b/lake/") == "s3://b/lake/catalog"
    assert lay("").uri("s3://b/out") == "s3://b/out"
    assert (lay.LATEST_HINT, lay.OLDEST_HINT) == ("vn/latest", "vn/oldest")
    assert lay.version_root(1) == "vn/1" + "0" * 63
    assert lay.version_root(6) == "vn/011" + "0" * 61
    assert re.fullmatch(rf"node/{uuid4}\.arrow", lay.new_node())
    assert re.fullmatch(rf"def/catalog/{uuid4}\.binpb", lay.new_catalog_def())
    assert re.fullmatch(rf"def/ns/{uuid4}-ns1\.binpb", lay.new_namespace_def("ns1"))
    assert re.fullmatch(rf"def/table/{uuid4}-ns1-t1\.binpb", lay.new_table_def("ns1", "t1"))
    assert re.fullmatch(rf"def/view/{uuid4}-ns1-v1\.binpb", lay.new_view_def("ns1", "v1"))
    assert re.fullmatch(
        rf"def/index_rule/{uuid4}-ns1-r1\.binpb", lay.new_index_rule_def("ns1", "r1")
    )
    assert lay.dtxn("tid1") == "dtxn/tid1.binpb"
    assert lay.new_node() != lay.new_node()  # fresh every call: written once, never replaced


# -- every kind round-trips, and only its own kind parses --------------------------------------


def _pool_kinds(layout: PoolLayout) -> dict[str, tuple[str, Callable[[str], object], object]]:
    """kind → (a key of that kind, its parser, what the parser must return)."""
    return {
        "data": (layout.data(OBJ), layout.parse_data, OBJ),
        "index": (layout.index(OBJ, "r1", "i1"), layout.parse_index, (OBJ, "r1", "i1")),
        "commit": (layout.commit(COMMIT), layout.parse_commit, COMMIT),
        "snapshot": (layout.snapshot(COMMIT), layout.parse_snapshot, COMMIT),
        "journal entry": (layout.journal.entry(12), layout.journal.parse_entry, 12),
        "staged": (layout.staged(OBJ), layout.parse_staged, OBJ),
        "purge record": (layout.purge_record(COMMIT), layout.parse_purge_record, COMMIT),
        "vacated": (layout.vacated(OBJ), layout.parse_vacated, OBJ),
    }


def test_every_pool_key_kind_round_trips_and_no_other_kind_parses() -> None:
    layout = PoolLayout(POOL)
    kinds = _pool_kinds(layout)
    for kind, (key, parse, expected) in kinds.items():
        assert parse(key) == expected, kind
        others = [k for other, (k, _, _) in kinds.items() if other != kind]
        others += [layout.journal.head, layout.journal.tail, LAKE_MARKER]
        assert [k for k in others if parse(k) is not None] == [], kind


def test_parsers_refuse_other_pools_nested_paths_and_foreign_names() -> None:
    layout = PoolLayout(POOL)
    other = PoolLayout("2kBZJAAAAAAAAAAAAAAAAAAAAAA")
    ours = _pool_kinds(layout)
    for kind, (key, _, _) in _pool_kinds(other).items():
        assert ours[kind][1](key) is None, kind
    assert layout.parse_data(f"{layout.data_dir}sub/{OBJ}.parquet") is None
    assert layout.parse_data(f"{layout.data_dir}.parquet") is None
    assert layout.parse_data(f"{layout.data_dir}{OBJ}.parquet.tmp") is None
    assert layout.parse_commit(f"{layout.commits_dir}{COMMIT}.snap") is None
    assert layout.parse_snapshot(f"{layout.commits_dir}{COMMIT}.json") is None
    assert layout.parse_index(f"{layout.index_dir}{OBJ}.parquet") is None  # no rule
    assert layout.journal.parse_entry(layout.journal.head) is None
    assert layout.journal.parse_entry(f"{layout.journal.dir}x1.json") is None
    assert layout.journal.parse_entry(f"{layout.journal.dir}-1.json") is None
    assert layout.journal.parse_entry(f"{layout.journal.dir}007.json") == 7
    with pytest.raises(ValueError):
        layout.index("has-dash", "r", "i")


def test_journal_layout_takes_any_root() -> None:
    journal = JournalLayout("scratch/j/")
    assert journal.prefix == "scratch/j"
    assert journal.entry(3) == "scratch/j/3.json"
    assert journal.parse_entry("scratch/j/3.json") == 3
    assert PoolLayout(POOL).journal == JournalLayout(f"pools/{POOL}/branches")


@pytest.mark.parametrize("version", [0, 1, 2, 6, 100, 12345678, 2**40 + 3, MAX_VERSION])
def test_catalog_version_roots_round_trip(version: int) -> None:
    path = CatalogLayout.version_root(version)
    assert CatalogLayout.is_version_root(path)
    assert CatalogLayout.parse_version_root(path) == version
    assert parse_version_name(version_name(version)) == version


@pytest.mark.parametrize(
    "bad", ["vn/latest", "vn/oldest", "vn/" + "2" * 64, "vn/" + "0" * 63, "node/" + "0" * 64]
)
def test_catalog_paths_that_are_not_version_roots(bad: str) -> None:
    assert not CatalogLayout.is_version_root(bad)
    with pytest.raises(ValueError):
        CatalogLayout.parse_version_root(bad)


def test_version_names_out_of_range() -> None:
    with pytest.raises(ValueError):
        version_name(-1)
    with pytest.raises(ValueError):
        version_name(MAX_VERSION + 1)


# -- nobody else formats a key ----------------------------------------------------------------

#: Pieces of storage keys. A string literal (or the literal part of an f-string) holding one,
#: outside layout.py, is a key being formatted by hand. Docstrings are documentation and may
#: show keys. Chosen so that no message or format name matches (``lakepool.snapshot`` is not
#: ``.snap``).
KEY_FRAGMENTS = re.compile(
    r"pools/"
    r"|/(?:data|index|commits|staging|purged|history)/"
    r"|/branches\b|/(?:HEAD|TAIL)\b"
    r"|\.snap\b|vacated-|\.ids\b"
    r"|\blake\.json\b"
    r"|(?:^|/)(?:vn|node|def|dtxn)/|\.binpb\b"
)
#: (module path, fragment) pairs that are not storage keys, and why.
ALLOWED = {
    ("lake_core/locks/zookeeper.py", "pools/"): "ZooKeeper lock node paths, not store keys",
}


def _docstrings(tree: ast.AST) -> set[int]:
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            first = node.body[0] if node.body else None
            if (
                isinstance(first, ast.Expr)
                and isinstance(first.value, ast.Constant)
                and isinstance(first.value.value, str)
            ):
                found.add(id(first.value))
    return found


def key_literals(paths: Iterable[Path], root: Path = ROOT) -> list[str]:
    """``path:line: fragment in 'literal'`` for every string literal in ``paths`` that holds a
    storage-key fragment (f-strings are checked piece by piece)."""
    found = []
    for path in paths:
        rel = path.relative_to(root).as_posix()
        tree = ast.parse(path.read_text(), rel)
        docs = _docstrings(tree)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Constant) or not isinstance(node.value, str):
                continue
            if id(node) in docs:
                continue
            for m in KEY_FRAGMENTS.finditer(node.value):
                if (rel, m.group(0)) not in ALLOWED:
                    found.append(f"{rel}:{node.lineno}: {m.group(0)!r} in {node.value!r}")
    return found


def _modules() -> list[Path]:
    out = []
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            if "proto" in path.parts or path == ROOT / "lake_core" / "layout.py":
                continue  # protoc output; the layout itself
            out.append(path)
    return out


def test_no_module_but_layout_formats_a_storage_key() -> None:
    assert len(_modules()) > 50
    assert key_literals(_modules()) == []


def test_the_key_literal_check_can_fail(tmp_path: Path) -> None:
    probe = tmp_path / "lake_core" / "probe.py"
    probe.parent.mkdir()
    probe.write_text(
        '"""Docs may say pools/<id>/commits/<id>.snap."""\n'
        "def f(pool_id: str, c: str, n: int) -> list[str]:\n"
        '    """So may a function: lake.json."""\n'
        '    return [f"pools/{pool_id}/data/{c}.parquet", "pools/" + c, c + ".snap",\n'
        '            f"{c}/branches/{n}.json", "vn/latest", f"def/ns/{c}.binpb",\n'
        '            "lakepool.snapshot", "delete branch main", "history was vacated"]\n'
    )
    found = key_literals([probe], tmp_path)
    assert sorted(line.split(" in ")[0] for line in found) == sorted(
        [
            "lake_core/probe.py:4: 'pools/'",
            "lake_core/probe.py:4: '/data/'",
            "lake_core/probe.py:4: 'pools/'",
            "lake_core/probe.py:4: '.snap'",
            "lake_core/probe.py:5: '/branches'",
            "lake_core/probe.py:5: 'vn/'",
            "lake_core/probe.py:5: 'def/'",
            "lake_core/probe.py:5: '.binpb'",
        ]
    )
