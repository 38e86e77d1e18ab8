"""What keeps ``lake`` quick to start: a process imports only what its command uses.

The rules (tests/cli/test_startup.py checks them on real processes):
- ``lake --help`` and usage errors import click and the light core modules (errors, names,
  units, clock, config) only: no pyarrow, numpy or pandas, no catalog, no store client.
  Command modules therefore import :mod:`lake_cli.output`, :mod:`lake_cli.textcols`,
  :mod:`lake_cli.progress` and the heavy core modules (``lake_core.lake``, ``.pool``,
  ``.catalog``, ``.commit``) inside the command functions that use them.
- A command that opens a lake pays for pyarrow, but not for pandas: see
  :func:`probe_pandas_without_importing`.
- A local lake never imports boto3; only the S3 store does (``lake_core.stores.factory``).
"""

from __future__ import annotations

import sys

#: Whether this process has answered the probe already.
_probed = False


def probe_pandas_without_importing() -> None:
    """Answer pyarrow's one question about pandas without importing pandas (~0.2 s).

    pyarrow (26) asks, on its first conversion of Python values (``pa.array``, ``pa.scalar``),
    whether pandas is installed, so it can recognise a pandas Series passed to it; asking
    imports pandas. The ``lake`` command never hands pyarrow a pandas object, so here the first
    conversion runs while ``import pandas`` fails: pyarrow records "no pandas" for that check
    only. Anything that really uses pandas still works: pyarrow's ``to_pandas``/``from_pandas``
    import it again on their own, and :func:`let_pyarrow_see_pandas` undoes this for code
    (Spark) that passes pandas objects to ``pa.array``.

    Does nothing when pandas is imported already (the probe has nothing to save)."""
    global _probed
    if _probed or "pandas" in sys.modules:
        return
    _probed = True
    import pyarrow as pa

    # A finder that fails `import pandas` (a None in sys.modules does not: pyarrow's compiled
    # import takes the None for the module).
    sys.meta_path.insert(0, _NoPandas)
    try:
        pa.array([0])  # untyped: type inference asks about pandas too
    finally:
        sys.meta_path.remove(_NoPandas)


class _NoPandas:
    """A meta path finder refusing ``pandas`` (and only it), for the probe above."""

    @staticmethod
    def find_spec(name: str, path: object = None, target: object = None) -> None:
        if name == "pandas":
            raise ImportError("pandas is not imported by lake (startup probe)", name=name)


def let_pyarrow_see_pandas() -> None:
    """Undo :func:`probe_pandas_without_importing`: pyarrow imports pandas and recognises its
    objects again (a pandas conversion retries the import pyarrow's probe gave up on)."""
    import pyarrow as pa

    pa.table({}).to_pandas()
