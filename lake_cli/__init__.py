"""The ``lake`` command (contract: shared/design/CLI.md), on click.

lake_cli sits on top of lake_core (and, for ``--spark``, lake_spark's public API); lake_core
knows nothing of it. ``python -m lake_cli`` is the same command.
"""

from lake_cli.app import main

__all__ = ["main"]
