"""The package graph, checked: no upward imports, no circles, no private names across modules.

import-linter (run by ``make lint``) holds the layer contract in ``.importlinter``; these tests
check the two rules it cannot express: a module never imports another module's private
(underscore) names, and no two lakepool modules import each other at import time (a cycle
anywhere, not only between layers).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("lake_core", "lake_cli", "lake_spark", "lake_orchestration", "lake_service")


def _modules() -> Iterator[tuple[str, Path]]:
    for package in PACKAGES:
        base = ROOT / package
        if not base.is_dir():
            continue
        for path in sorted(base.rglob("*.py")):
            if "proto" in path.parts:
                continue  # protoc output
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            yield ".".join(parts), path


def _resolve(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - node.level + 1]
    return ".".join([*base, node.module] if node.module else base)


def private_imports() -> list[str]:
    """Every ``from X import _name`` (and ``X._name`` on an imported lakepool module) where X is
    another module: a private name is private to its module."""
    found = []
    for module, path in _modules():
        tree = ast.parse(path.read_text(), str(path))
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                source = _resolve(module, node, path.name == "__init__.py")
                if not source.startswith(PACKAGES) or source == module:
                    continue
                for name in node.names:
                    if name.name.startswith("_") and not name.name.startswith("__"):
                        found.append(f"{module}: from {source} import {name.name}")
                    aliases[name.asname or name.name] = f"{source}.{name.name}"
            elif isinstance(node, ast.Import):
                for name in node.names:
                    if name.name.startswith(PACKAGES):
                        aliases[name.asname or name.name.split(".")[0]] = name.asname and name.name or name.name.split(".")[0]
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Attribute)
                and isinstance(node.value, ast.Name)
                and node.value.id in aliases
                and node.attr.startswith("_")
                and not node.attr.startswith("__")
            ):
                found.append(f"{module}: {node.value.id}.{node.attr}")
    return sorted(set(found))


def test_no_private_name_is_imported_across_modules() -> None:
    assert private_imports() == []


def test_the_private_import_check_can_fail() -> None:
    """The checker sees an offending module (guards against a check that cannot fail)."""
    bad = ROOT / "lake_core" / "zz_private_import_probe.py"
    bad.write_text("from lake_core.pool import _LRU\n")
    try:
        assert "lake_core.zz_private_import_probe: from lake_core.pool import _LRU" in private_imports()
    finally:
        bad.unlink()


def import_cycles() -> list[str]:
    """Every direct import ``a -> b`` where ``b`` also leads back to ``a``. Deferred imports
    (inside a function) count: a circle hidden in a function is still a circle in the design.
    Only ``if TYPE_CHECKING:`` imports are left out; they never run."""
    graph = grimp.build_graph(
        *[p for p in PACKAGES if (ROOT / p).is_dir()], exclude_type_checking_imports=True
    )
    found = []
    for module in sorted(graph.modules):
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if graph.chain_exists(importer=imported, imported=module):
                chain = graph.find_shortest_chain(importer=imported, imported=module)
                found.append(f"{module} -> {' -> '.join(chain or ())}")
    return found


def test_no_import_cycles_between_lakepool_modules() -> None:
    assert import_cycles() == []
