"""The ``lake`` command as users and scripts call it: outputs, errors and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lake_cli import main

ROOT = Path(__file__).resolve().parents[2]


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def cli_lake(lake_uri: str, capsys: pytest.CaptureFixture[str]) -> str:
    code, out, _ = run(capsys, "--lake", lake_uri, "init")
    assert code == 0 and out == f"initialized lake at {lake_uri}\n"
    return lake_uri


def test_walkthrough(cli_lake: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    L = ["--lake", cli_lake]
    assert run(capsys, *L, "create", "logs")[1] == "pool logs created\n"
    f = tmp_path / "a.ndjson"
    f.write_text(
        '{"ts":"2026-01-05T10:00:00Z","msg":"a"}\n{"ts":"2026-01-05T11:00:00Z","msg":"b"}\n'
        '{"msg":"no key"}\n'
    )
    code, out, _ = run(capsys, *L, "load", "-p", "logs", str(f), "-m", "first", "--user", "ann",
                       "--meta", '{"batch": 1}')
    assert code == 0
    commit_id = out.strip().splitlines()[-1].split()[0]
    assert out.strip().endswith(" committed") and len(commit_id) == 27
    code, out, _ = run(capsys, *L, "query", "-p", "logs", "-f", "json")
    rows = [json.loads(x) for x in out.splitlines()]
    assert rows == [
        {"ts": "2026-01-05T11:00:00.000000Z", "msg": "b"},
        {"ts": "2026-01-05T10:00:00.000000Z", "msg": "a"},
        {"ts": None, "msg": "no key"},
    ]
    code, out, _ = run(capsys, *L, "log", "-p", "logs", "-f", "json")
    entry = json.loads(out.splitlines()[0])
    assert entry["id"] == commit_id and entry["author"] == "ann" and entry["meta"] == {"batch": 1}
    assert entry["message"] == "first" and entry["parent"] is None
    assert entry["actions"][0]["op"] == "add"
    code, out, _ = run(capsys, *L, "objects", "-p", "logs", "-f", "json")
    obj = json.loads(out)
    assert obj["min"] == "2026-01-05T10:00:00.000000Z" and obj["count"] == 3
    code, out, _ = run(capsys, *L, "ls", "-f", "json")
    assert json.loads(out)["name"] == "logs"
    code, out, err = run(capsys, *L, "query", "-p", "logs", "--where",
                         "ts > '2026-01-05T10:30:00Z'", "--stats", "-f", "csv")
    assert out == "ts,msg\n2026-01-05T11:00:00.000000Z,b\n"
    assert json.loads(err)["objects_total"] == 1


def test_errors_are_one_line_with_exit_codes(
    cli_lake: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    L = ["--lake", cli_lake]
    code, _, err = run(capsys, *L, "query", "-p", "nope")
    assert code == 1 and err == "error: nope: pool not found\n"
    assert err.count("\n") == 1
    code, _, err = run(capsys, *L, "init")
    assert code == 1 and "already exists" in err
    code, _, err = run(capsys, *L, "create", "bad name")
    assert code == 2 and err.startswith("error: ")
    code, _, err = run(capsys, *L, "drop", "logs")
    assert code == 2 and "--force" in err
    run(capsys, *L, "create", "p")
    bad = tmp_path / "bad.ndjson"
    bad.write_text('{"ts": 1}\n{"ts": \n')
    code, _, err = run(capsys, *L, "load", "-p", "p", str(bad))
    assert code == 1 and "bad.ndjson" in err and "line 2" in err
    code, _, err = run(capsys, *L, "load", "-p", "p@nobranch", str(bad))
    assert code == 1 and "nobranch: branch not found" in err
    with pytest.raises(SystemExit) as exc:
        main([*L, "query"])
    assert exc.value.code == 2
    assert capsys.readouterr().err.startswith("error: ")


def test_corrupt_metadata_names_the_object(
    cli_lake: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from lake_core import Lake

    L = ["--lake", cli_lake]
    run(capsys, *L, "create", "c")
    f = tmp_path / "a.ndjson"
    f.write_text('{"ts": 1}\n')
    run(capsys, *L, "load", "-p", "c", str(f))
    run(capsys, *L, "load", "-p", "c", str(f))
    lake = Lake.open(cli_lake)
    pool = lake.pool("c")
    # Truncate the journal's last entry: an error naming it, not a traceback.
    key = f"pools/{pool.id}/branches/3.json"
    data = lake.store.get(key)
    lake.store.put(key, data[: len(data) // 2])
    code, _, err = run(capsys, *L, "log", "-p", "c")
    assert code == 1 and err.startswith("error: corrupt lake metadata") and key in err
    lake.store.put(key, data)
    # Truncate a commit object.
    tip = pool.tip()
    ckey = f"pools/{pool.id}/commits/{tip}.json"
    cdata = lake.store.get(ckey)
    lake.store.put(ckey, cdata[:40])
    code, _, err = run(capsys, *L, "query", "-p", "c")
    assert code == 1 and ckey in err and "Traceback" not in err


def test_the_command_in_its_own_process_and_help() -> None:
    """``python -m lake_cli`` is the ``lake`` console script's entry point (pyproject)."""
    lake = [sys.executable, "-m", "lake_cli"]
    env = {k: v for k, v in os.environ.items() if k != "LAKE_ROOT"}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run(
        [*lake, "load", "--help"], capture_output=True, text=True, check=True, env=env
    )
    assert "examples:" in out.stdout and "-p POOL[@BRANCH]" in out.stdout
    res = subprocess.run([*lake, "ls"], capture_output=True, text=True, env=env)
    assert res.returncode == 2 and res.stderr.startswith("error: no lake given")
    assert res.stderr.count("\n") == 1 and res.stdout == ""


def test_the_cli_imports_no_spark_until_asked() -> None:
    """lake_cli registers the --spark paths itself and imports lake_spark (and pyspark) only
    when a command runs with --spark."""
    code = (
        "import sys\n"
        "from lake_cli import main\n"
        "for argv in (['--help'], ['load', '--help'], ['compact', '--help']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit as e:\n"
        "        assert e.code == 0, e.code\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'lake_spark')))\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True
    )
    assert out.stdout.splitlines()[-1] == "[]"
