"""Objects split near the pool's target size, however small the target (issue 19)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lake_cli import main


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    out, _ = capsys.readouterr()
    return code, out


def test_small_target_splits_small_records(
    lake_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    L = ["--lake", lake_uri]
    assert run(capsys, *L, "init")[0] == 0
    assert (
        run(capsys, *L, "create", "small", "--orderby", "id:asc", "--target-size", "16KB")[0] == 0
    )
    f = tmp_path / "records.ndjson"
    f.write_text(
        "".join(
            json.dumps({"id": i, "msg": f"record {i}", "v": i % 7}) + "\n" for i in range(10_000)
        )
    )
    code, out = run(capsys, *L, "load", "-p", "small", str(f))
    assert code == 0
    code, out = run(capsys, *L, "objects", "-p", "small", "-f", "json")
    objects = sorted((json.loads(x) for x in out.splitlines()), key=lambda o: o["min"])
    target = 16 * 1024
    assert len(objects) >= 4, [o["size"] for o in objects]
    assert sum(o["count"] for o in objects) == 10_000
    for o in objects[:-1]:  # the last one holds what is left
        assert target * 0.6 <= o["size"] <= target * 1.25, [o["size"] for o in objects]
    for a, b in zip(objects, objects[1:], strict=False):
        assert a["max"] < b["min"]  # sorted, disjoint runs
    code, out = run(capsys, *L, "query", "-p", "small", "-f", "json", "--columns", "id")
    assert [json.loads(x)["id"] for x in out.splitlines()] == list(range(10_000))
