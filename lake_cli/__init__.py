"""The ``lake`` command (contract: shared/design/CLI.md), on click.

lake_cli sits on top of lake_core (and, for ``--spark``, lake_spark's public API); lake_core
knows nothing of it. ``python -m lake_cli`` is the same command.
"""

import os

# numpy's OpenBLAS starts a thread per core when numpy is imported and lets them spin for a
# while: about a tenth of a CPU-second of every command (docs/benchmarks.md, "CLI start-up"),
# which a busy machine pays in wall time. lakepool makes no BLAS call. Set before anything
# imports numpy; a value the user chose is kept.
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")

from lake_cli.app import main  # noqa: E402 - after the environment default above

__all__ = ["main"]
