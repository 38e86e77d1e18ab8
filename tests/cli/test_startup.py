"""``lake`` imports only what its command uses (lake_cli/startup.py states the rules).

Each test runs the command in a fresh interpreter, as a user's shell would, and reads
``sys.modules`` when the command has finished: start-up cost is paid per process, so only a
real process shows it. No timing assertions: the times are bench/cli_startup_bench.py's.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa

from lake_core import Lake, LakeConfig

ROOT = Path(__file__).resolve().parents[2]

#: Never imported by a command that does not need them.
FACES = ("pyspark", "dagster")
HEAVY = ("pandas", *FACES)
CATALOG_PROTO = ("google.protobuf", "lake_core.catalog.proto")
STORE_CLIENTS = ("boto3", "botocore")

PROBE = """
import runpy, sys
{before}
sys.argv = ["lake", *sys.argv[1:]]
status = 0
try:
    runpy.run_module("lake_cli", run_name="__main__", alter_sys=True)
except SystemExit as e:
    status = e.code
print("MODULES " + " ".join(sorted(sys.modules)), file=sys.stderr)
print("STATUS " + str(status), file=sys.stderr)
"""


def run_lake(args: list[str], cwd: Path, lake: Path | None = None, before: str = "") -> tuple[int, set[str], str]:
    """Run ``lake ARGS`` in a new interpreter: its exit status, every module it had imported
    when the command finished, and its stdout. Runs in ``cwd`` so the working directory never
    shadows this checkout on sys.path."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env.pop("LAKE_ZOOKEEPER", None)
    if lake is not None:
        env["LAKE_ROOT"] = str(lake)
    done = subprocess.run(
        [sys.executable, "-c", PROBE.format(before=before), *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = done.stderr.splitlines()
    modules = next(x for x in lines if x.startswith("MODULES ")).split()[1:]
    status = next(x for x in lines if x.startswith("STATUS ")).split()[1]
    return int(status) if status.isdigit() else 1, set(modules), done.stdout


def imported(modules: set[str], packages: tuple[str, ...]) -> list[str]:
    """The ``packages`` (or modules below them) among ``modules``."""
    return sorted(m for m in modules if any(m == p or m.startswith(p + ".") for p in packages))


def test_help_imports_no_data_library_no_catalog_and_no_store_client(tmp_path: Path) -> None:
    status, modules, out = run_lake(["--help"], tmp_path)
    assert status == 0
    assert "lake load" in out  # the help itself was printed
    assert imported(modules, HEAVY + CATALOG_PROTO + STORE_CLIENTS) == []
    # Nor the libraries every data command needs: --help touches no data.
    assert imported(modules, ("pyarrow", "numpy", "rich", "duckdb", "kazoo")) == []


def test_a_command_s_help_and_a_usage_error_stay_as_light(tmp_path: Path) -> None:
    status, modules, out = run_lake(["load", "--help"], tmp_path)
    assert status == 0 and "-p POOL" in out
    assert imported(modules, HEAVY + CATALOG_PROTO + STORE_CLIENTS + ("pyarrow",)) == []
    status, modules, _ = run_lake(["load", "nothing.ndjson"], tmp_path)  # no -p
    assert status == 2
    assert imported(modules, HEAVY + CATALOG_PROTO + STORE_CLIENTS + ("pyarrow",)) == []


def test_load_into_a_local_lake_imports_no_pandas_and_no_s3_client(tmp_path: Path) -> None:
    lake_dir = tmp_path / "lake"
    Lake.init(LakeConfig(uri=str(lake_dir))).create_pool("logs", "ts:asc")
    rows = tmp_path / "rows.ndjson"
    rows.write_text("".join(json.dumps({"ts": i, "user": f"u{i}"}) + "\n" for i in range(10)))

    status, modules, out = run_lake(["load", "-p", "logs", "-q", str(rows)], tmp_path, lake_dir)

    assert status == 0, out
    assert out.splitlines()[-1].endswith(" committed")
    assert imported(modules, HEAVY + STORE_CLIENTS) == []
    # It did load: the rows are there, read back through the Python API.
    pool = Lake.open(LakeConfig(uri=str(lake_dir))).pool("logs")
    assert pool.read().column("ts").to_pylist() == list(range(10))


def test_the_check_sees_a_library_the_process_did_import(tmp_path: Path) -> None:
    """The checks above can fail: a process that imports pandas is reported as such."""
    status, modules, _ = run_lake(["--help"], tmp_path, before="import pandas")
    assert status == 0
    assert "pandas" in imported(modules, HEAVY)


PANDAS_STILL_WORKS = """
import sys
from lake_cli.startup import let_pyarrow_see_pandas, probe_pandas_without_importing
import pyarrow as pa

probe_pandas_without_importing()
pa.array([1, None]); pa.scalar("x")
print("after conversions:", "pandas" in sys.modules)
frame = pa.table({"a": [1, 2]}).to_pandas()  # pyarrow imports pandas when asked for it
print("to_pandas:", type(frame).__name__, list(frame["a"]))
import pandas as pd
let_pyarrow_see_pandas()
print("series:", pa.array(pd.Series(pd.Categorical(["a", "b", "a"]))).type)
"""


def test_the_pandas_probe_leaves_pandas_usable(tmp_path: Path) -> None:
    """:func:`probe_pandas_without_importing` keeps pandas out of pyarrow's first conversion
    only: pandas conversions still work, and after :func:`let_pyarrow_see_pandas` pyarrow
    recognises a pandas Series again (a categorical converts to a dictionary array)."""
    done = subprocess.run(
        [sys.executable, "-c", PANDAS_STILL_WORKS],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    assert done.stdout.splitlines() == [
        "after conversions: False",
        "to_pandas: DataFrame [1, 2]",
        f"series: {pa.dictionary(pa.int8(), pa.string())}",
    ]


def test_the_command_keeps_numpy_blas_to_one_thread_unless_told(tmp_path: Path) -> None:
    """numpy's OpenBLAS spins a thread per core at import (CPU a busy machine pays; lakepool
    makes no BLAS call): ``lake`` runs it on one thread, unless OPENBLAS_NUM_THREADS says
    otherwise. Read from the environment numpy saw, after a command that imported it."""
    probe = (
        "import os, runpy, sys\n"
        "sys.argv = ['lake', 'ls']\n"
        "try:\n"
        "    runpy.run_module('lake_cli', run_name='__main__', alter_sys=True)\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('NUMPY', 'numpy' in sys.modules, file=sys.stderr)\n"
        "print('BLAS', os.environ.get('OPENBLAS_NUM_THREADS'), file=sys.stderr)\n"
    )
    Lake.init(str(tmp_path / "lake"))
    for given, expected in ((None, "1"), ("3", "3")):
        env = {**os.environ, "PYTHONPATH": str(ROOT), "LAKE_ROOT": str(tmp_path / "lake")}
        env.pop("OPENBLAS_NUM_THREADS", None)
        if given is not None:
            env["OPENBLAS_NUM_THREADS"] = given
        done = subprocess.run(
            [sys.executable, "-c", probe],
            cwd=tmp_path,
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert "NUMPY True" in done.stderr, done.stderr[-2000:]  # numpy was imported after it
        assert f"BLAS {expected}" in done.stderr, done.stderr[-2000:]
