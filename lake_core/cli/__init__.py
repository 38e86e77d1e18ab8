"""The ``lake`` command (contract: shared/design/CLI.md)."""

from lake_core.cli.app import main

__all__ = ["main"]
