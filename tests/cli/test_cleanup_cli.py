"""``lake cleanup`` says what it reclaimed, what it kept and how to release it (local and S3)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from lake_cli import main
from lake_core import Lake, LakeConfig
from lake_core.loading import load
from lake_core.units import human_size


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def data_files(lake_uri: str, pool: str) -> set[str]:
    p = Lake.open(LakeConfig(uri=lake_uri)).pool(pool)
    return {i.key for i in p.store.list(f"pools/{p.id}/data/")}


def test_human_sizes() -> None:
    assert [human_size(n) for n in (0, 1023, 1024, 1536, 50_648_269, 3 * 1024**4)] == [
        "0 B",
        "1023 B",
        "1.0 KiB",
        "1.5 KiB",
        "48.3 MiB",
        "3.0 TiB",
    ]


def test_cleanup_reports_reclaimed_held_and_how_to_release(
    lake_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    L = ["--lake", lake_uri]
    assert run(capsys, *L, "init")[0] == 0
    assert run(capsys, *L, "create", "c", "--orderby", "ts:asc")[0] == 0
    for i in range(3):
        f = tmp_path / f"{i}.ndjson"
        f.write_text(f'{{"ts": {i}, "v": "{"x" * 200}"}}\n')
        assert run(capsys, *L, "load", "-p", "c", str(f))[0] == 0
    assert run(capsys, *L, "compact", "-p", "c")[0] == 0  # tombstones the three sources

    # --grace 0 is accepted; history still references the compacted-away files: say so, and
    # how to release them.
    before = data_files(lake_uri, "c")
    code, out, err = run(capsys, *L, "cleanup", "-p", "c", "--grace", "0")
    assert code == 0, err
    first, hint = out.splitlines()
    assert first == "nothing to remove"
    m = re.fullmatch(
        r"3 deleted files are still referenced by retained history \((\d+ B|[\d.]+ KiB)\); "
        r"release them with `lake vacate -p c --before (\S+)`, then clean up again",
        hint,
    )
    assert m, hint
    assert data_files(lake_uri, "c") == before

    # Doing what it says releases them; the report is one readable line.
    code, out, err = run(capsys, *L, "vacate", "-p", "c", "--before", m.group(2))
    assert code == 0, err
    code, out, err = run(capsys, *L, "cleanup", "-p", "c", "--grace", "0", "--dry-run")
    assert code == 0 and re.fullmatch(r"would remove \d+ files, \S+ (B|KiB)\n", out), out
    code, out, err = run(capsys, *L, "cleanup", "-p", "c", "--grace", "0")
    assert code == 0, err
    (line,) = out.splitlines()
    m = re.fullmatch(r"removed (\d+) files, (\S+ (?:B|KiB))", line)
    assert m and int(m.group(1)) >= 3  # the three sources, plus the cut history's metadata
    assert len(data_files(lake_uri, "c")) == 1
    rows = [json.loads(x) for x in run(capsys, *L, "query", "-p", "c", "-f", "json")[1].split()]
    assert [r["ts"] for r in rows] == [0, 1, 2]

    # JSON keeps raw byte counts.
    code, out, _ = run(capsys, *L, "cleanup", "-p", "c", "--grace", "0", "-f", "json")
    doc = json.loads(out)
    assert code == 0 and doc["files"] == 0 and doc["bytes"] == 0 and doc["held"] == 0
    assert doc["min_orphan_age_seconds"] == 86400 and isinstance(doc["pending_bytes"], int)


def test_cleanup_keeps_a_fresh_orphan_and_says_why(
    lake_uri: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lake = Lake.init(LakeConfig(uri=lake_uri))
    pool = lake.create_pool("o", "ts:asc")
    import pyarrow as pa

    def boom(_: object) -> None:
        raise RuntimeError("killed")

    with pytest.raises(RuntimeError):
        load(pool, [pa.table({"ts": [1]})], on_object=boom)
    code, out, err = run(capsys, "--lake", lake_uri, "cleanup", "-p", "o", "--grace", "0")
    assert code == 0, err
    assert out.splitlines() == [
        "nothing to remove",
        "kept 1 unreachable file ("
        + out.split("(")[1].split(")")[0]
        + ") younger than the grace period or than the 24h minimum age of unreferenced files",
    ]


@pytest.mark.parametrize("grace", ["-1d", "soon", "99999999999d"])
def test_bad_grace_is_one_error_line_and_changes_nothing(
    lake_uri: str, grace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    lake = Lake.init(LakeConfig(uri=lake_uri))
    pool = lake.create_pool("g", "ts:asc")
    import pyarrow as pa

    load(pool, [pa.table({"ts": [1]})])
    before = {i.key for i in pool.store.list("")}
    code, out, err = run(capsys, "--lake", lake_uri, "cleanup", "-p", "g", f"--grace={grace}")
    assert code == 2 and out == ""
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert {i.key for i in pool.store.list("")} == before
