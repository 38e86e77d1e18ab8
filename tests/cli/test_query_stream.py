"""``lake query`` streams: output batch by batch, ``--limit``, quiet on a closed pipe, and the
vectorized CSV/JSON/table encoders agree value for value with the per-row contract."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from datetime import UTC, date, datetime
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pytest

from lake_cli import main
from lake_cli.output import write_records
from lake_cli.textcols import jsonable
from lake_core import Lake, LakeConfig
from lake_core.loading import load

ROOT = Path(__file__).resolve().parents[2]


def typed_table() -> pa.Table:
    return pa.table(
        {
            "ts": pa.array(
                [
                    datetime(2026, 1, 5, 11, 0, 0, 123, tzinfo=UTC),
                    None,
                    datetime(1970, 1, 1, tzinfo=UTC),
                ],
                pa.timestamp("us", tz="UTC"),
            ),
            "naive_ns": pa.array(
                [datetime(2026, 1, 5, 11), None, datetime(2000, 2, 29, 23, 59, 59, 999999)],
                pa.timestamp("ns"),
            ),
            "s": ["b", 'x,"y\\\n\t\r', "ünï \x01 \u2028"],
            "i": [1, None, -3],
            "f": [1.0, float("nan"), -2.5e-7],
            "b": [True, None, False],
            "d": pa.array([date(2026, 1, 2), None, date(1, 1, 1)]),
            "l": [[1, 2], None, []],
            "st": [{"a": 1, "t": "x"}, None, {"a": None, "t": '"'}],
            "bin": [b"\x00\xff", None, b""],
            "dec": pa.array([Decimal("1.50"), None, Decimal("-3")], pa.decimal128(5, 2)),
        }
    )


def expected_rows(table: pa.Table) -> list[dict[str, object]]:
    """What the contract says each row prints as (the per-row Python formatting)."""
    rows = []
    for r in table.to_pylist():
        ns = r["naive_ns"]
        # pyarrow gives a pandas Timestamp for timestamp[ns] when pandas is loaded, else a
        # datetime (which of the two depends on what earlier tests imported).
        r["naive_ns"] = ns.to_pydatetime() if hasattr(ns, "to_pydatetime") else ns
        r["naive_ns"] = r["naive_ns"] and r["naive_ns"].replace(tzinfo=UTC)
        rows.append(jsonable(r))
    return rows


def test_json_matches_the_per_row_contract() -> None:
    out = io.StringIO()
    write_records(typed_table(), "json", out=out)
    lines = out.getvalue().split("\n")  # not splitlines(): U+2028 stays raw, as JSON allows
    assert lines.pop() == ""
    got = [strict_json(x) for x in lines]
    assert got == expected_rows(typed_table())
    assert got[1]["f"] is None  # NaN: JSON has no spelling for it
    assert got[0]["ts"] == "2026-01-05T11:00:00.000123Z"
    assert got[2]["naive_ns"] == "2000-02-29T23:59:59.999999Z"  # naive is UTC
    assert '"f":1.0,' in lines[0] and '"i":null' in lines[1]  # floats stay floats; null
    assert list(json.loads(lines[0])) == typed_table().schema.names  # keys in column order


def strict_json(line: str) -> object:
    """``json.loads`` that refuses Python's ``NaN``/``Infinity``/``-Infinity``, as strict
    parsers (jq, JavaScript's ``JSON.parse``) do."""

    def refuse(name: str) -> object:
        raise ValueError(f"{name} is not JSON")

    return json.loads(line, parse_constant=refuse)


def test_json_writes_nan_and_infinities_as_null_at_any_depth() -> None:
    """NaN and the infinities are null in ``-f json``, top-level or nested, from Arrow data
    (query results) and from lists of dicts (metadata listings) alike; finite floats keep
    their fraction."""
    nan, inf = float("nan"), float("inf")
    table = pa.table(
        {
            "f": [nan, inf, -inf, 1.0],
            "f32": pa.array([inf, nan, None, -2.5], pa.float32()),
            "l": [[nan, 1.5], [-inf], None, []],
            "st": [{"a": nan}, {"a": inf}, None, {"a": 2.0}],
        }
    )
    out = io.StringIO()
    write_records(table, "json", out=out)
    assert [strict_json(x) for x in out.getvalue().splitlines()] == [
        {"f": None, "f32": None, "l": [None, 1.5], "st": {"a": None}},
        {"f": None, "f32": None, "l": [None], "st": {"a": None}},
        {"f": None, "f32": None, "l": None, "st": None},
        {"f": 1.0, "f32": -2.5, "l": [], "st": {"a": 2.0}},
    ]
    assert '"f":1.0,' in out.getvalue()
    listed = io.StringIO()
    write_records([{"x": nan, "meta": {"m": [inf, -inf, 0.5]}}], "json", out=listed)
    assert strict_json(listed.getvalue()) == {"x": None, "meta": {"m": [None, None, 0.5]}}


def test_table_and_csv_still_spell_nan_and_infinities() -> None:
    """Only JSON lacks a spelling: a table shows NaN, CSV writes what ``lake load`` reads back
    as the float (see test_csv_output_loads_back_with_nan_inf_null_and_marker_strings)."""
    table = pa.table({"f": [float("nan"), float("inf"), -float("inf")]})
    out = io.StringIO()
    write_records(table, "table", out=out)
    assert out.getvalue().split() == ["f", "NaN", "Infinity", "-Infinity"]
    listed = io.StringIO()
    write_records([{"f": float("nan")}], "table", out=listed)
    assert listed.getvalue().split() == ["f", "nan"]
    # Nested values too: only JSON output makes them null.
    nested = pa.table({"l": pa.array([[float("nan"), 1.0]], pa.list_(pa.float64()))})
    for fmt in ("table", "csv"):
        text = io.StringIO()
        write_records(nested, fmt, out=text)
        assert "[NaN,1.0]" in text.getvalue(), fmt
    rows = io.StringIO()
    write_records([{"m": {"x": float("inf")}}], "csv", out=rows)
    assert "Infinity" in rows.getvalue()
    as_json = io.StringIO()
    write_records(nested, "json", out=as_json)
    assert strict_json(as_json.getvalue()) == {"l": [None, 1.0]}


def test_query_and_log_json_lines_parse_strictly(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``lake query -f json`` of NaN and infinities (from CSV), and ``lake log -f json`` of a
    commit whose metadata holds a NaN (the Python API accepts one), print lines every JSON
    parser reads."""
    uri = str(tmp_path / "lake")
    pool = Lake.init(LakeConfig(uri=uri)).create_pool("nums", "k:asc")
    src = _write(tmp_path / "nums.csv", "k,f\n1,NaN\n2,inf\n3,-inf\n4,0.5\n")
    load(pool, [src], meta={"ratio": float("nan")})
    capsys.readouterr()
    assert main(["--lake", uri, "query", "-p", "nums", "-f", "json"]) == 0
    rows = [strict_json(x) for x in capsys.readouterr().out.splitlines()]
    assert rows == [
        {"k": 1, "f": None},
        {"k": 2, "f": None},
        {"k": 3, "f": None},
        {"k": 4, "f": 0.5},
    ]
    assert main(["--lake", uri, "query", "SELECT f FROM nums ORDER BY k", "-f", "json"]) == 0
    assert [strict_json(x) for x in capsys.readouterr().out.splitlines()][:2] == [
        {"f": None},
        {"f": None},
    ]
    assert main(["--lake", uri, "log", "-p", "nums", "-f", "json"]) == 0
    (commit,) = [strict_json(x) for x in capsys.readouterr().out.splitlines()]
    assert isinstance(commit, dict) and commit["meta"] == {"ratio": None}


def test_csv_quotes_only_what_needs_it_and_reads_back() -> None:
    out = io.StringIO()
    write_records(typed_table(), "csv", out=out)
    text = out.getvalue()
    assert text.splitlines()[1].startswith(
        "2026-01-05T11:00:00.000123Z,2026-01-05T11:00:00.000000Z,b,1,"
    )
    rows = list(csv.reader(io.StringIO(text)))
    assert rows[0] == typed_table().schema.names
    assert rows[2][2] == 'x,"y\\\n\t\r'  # quoted, quotes doubled
    assert rows[2][0] == "" and rows[2][3] == ""  # null: the empty field
    assert rows[1][7] == "[1,2]" and json.loads(rows[3][8]) == {"a": None, "t": '"'}
    assert rows[1][9] == "00ff" and rows[1][10] == "1.50" and rows[1][5] == "true"


def test_csv_output_loads_back_with_nan_inf_null_and_marker_strings(tmp_path: Path) -> None:
    """``lake load`` of ``-f csv`` output gives the same values: a float NaN (written ``nan``)
    is NaN again, not null; infinities, nulls and strings that spell null markers survive."""
    from lake_core.ingest import read_input

    table = pa.table(
        {
            "k": [1, 2, 3, 4],
            "f": [float("nan"), float("inf"), None, -float("inf")],
            "s": ["NaN", "NA", None, ""],
        }
    )
    out = io.StringIO()
    write_records(table, "csv", out=out)
    back = read_input(_write(tmp_path / "back.csv", out.getvalue()))
    f = back.column("f").to_pylist()
    assert f[0] != f[0] and f[1:] == [float("inf"), None, -float("inf")]
    assert back.column("s").to_pylist() == ["NaN", "NA", None, ""]


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_table_prints_nulls_and_aligns() -> None:
    out = io.StringIO()
    write_records(typed_table().select(["i", "s", "b"]), "table", out=out)
    lines = out.getvalue().splitlines()
    assert lines[0].split() == ["i", "s", "b"]
    assert lines[1].split() == ["1", "b", "true"]
    assert lines[2].startswith("null")


def test_output_is_written_before_the_input_ends() -> None:
    """Each batch is printed before the next is read: a reader that fails after its first
    batch still leaves that batch's records printed, in every text format."""
    schema = pa.schema([("n", pa.int64())])

    def batches() -> Iterator[pa.RecordBatch]:
        yield pa.record_batch([pa.array([1, 2])], schema=schema)
        raise RuntimeError("stop here")

    for fmt, first in (("json", '{"n":1}'), ("csv", "1"), ("table", "1")):
        out = io.StringIO()
        with pytest.raises(RuntimeError, match="stop here"):
            write_records(pa.RecordBatchReader.from_batches(schema, batches()), fmt, out=out)
        assert first in out.getvalue().splitlines()[:3], fmt


@pytest.fixture
def big_pool(lake_uri: str) -> str:
    lake = Lake.init(LakeConfig(uri=lake_uri))
    pool = lake.create_pool("big", "id:asc", target_size=64 * 1024)
    n = 60_000
    load(pool, [pa.table({"id": list(range(n)), "msg": [f"row {i}" for i in range(n)]})])
    return lake_uri


def test_limit_stops_reading(big_pool: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["--lake", big_pool, "query", "-p", "big", "--limit", "3", "-f", "json", "--stats"])
    out, err = capsys.readouterr()
    assert code == 0
    assert [json.loads(x)["id"] for x in out.splitlines()] == [0, 1, 2]
    stats = json.loads(err)
    assert stats["objects_total"] > 2 and stats["objects_read"] == 1
    code = main(["--lake", big_pool, "query", "-p", "big", "--limit", "0", "-f", "csv"])
    assert (code, capsys.readouterr().out) == (0, "id,msg\n")
    code = main(["--lake", big_pool, "query", "-p", "big", "--limit", "-1"])
    _, err = capsys.readouterr()
    assert code == 2 and err.startswith("error: ")


def test_csv_and_json_to_a_file(
    big_pool: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for fmt in ("csv", "json"):
        dest = tmp_path / f"out.{fmt}"
        code = main(["--lake", big_pool, "query", "-p", "big", "-f", fmt, "-o", str(dest)])
        assert code == 0 and capsys.readouterr().out == ""
        lines = dest.read_text().splitlines()
        assert len(lines) == 60_000 + (fmt == "csv")
        assert lines[-1] in ("59999,row 59999", '{"id":59999,"msg":"row 59999"}')


def test_closed_pipe_is_quiet(big_pool: str) -> None:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for fmt in ("table", "csv", "json"):
        proc = subprocess.run(
            f"{sys.executable} -m lake_cli --lake {big_pool} query -p big -f {fmt} | head -2",
            shell=True,
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert proc.returncode == 0 and proc.stderr == "", (fmt, proc.stderr)
        assert len(proc.stdout.splitlines()) == 2


def test_progress_passes_batches_through_and_draws_on_stderr(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from lake_cli import progress

    monkeypatch.setattr(progress, "_DELAY_SECONDS", 0.0)
    schema = pa.schema([("n", pa.int64())])
    batches = [
        pa.record_batch([pa.array(range(i * 10, i * 10 + 10))], schema=schema) for i in range(3)
    ]
    with progress.batch_progress(iter(batches), 3, lambda: 2, enabled=True) as shown:
        assert list(shown) == batches
    out, err = capsys.readouterr()
    assert out == "" and "30 rows" in err
    with progress.batch_progress(iter(batches), 3, lambda: 2, enabled=False) as shown:
        assert list(shown) == batches
    assert capsys.readouterr() == ("", "")


def test_many_dates_and_long_batches_format_like_the_cast() -> None:
    """The large-batch paths (dates formatted once per distinct day, quoting decided from the
    value bytes) print what the plain per-value formatting prints."""
    from datetime import timedelta

    n = 5000
    days = [None if i % 97 == 0 else date(1992, 1, 1) + timedelta(days=i % 400) for i in range(n)]
    texts = ["plain" if i % 3 else f'say "hi", {i}' for i in range(n)]
    table = pa.table({"d": pa.array(days, pa.date32()), "t": texts})
    out = io.StringIO()
    write_records(table, "csv", out=out)
    rows = list(csv.reader(io.StringIO(out.getvalue())))[1:]
    assert [r[0] for r in rows] == ["" if d is None else d.isoformat() for d in days]
    assert [r[1] for r in rows] == texts
    out = io.StringIO()
    write_records(table, "json", out=out)
    got = [json.loads(x) for x in out.getvalue().splitlines()]
    assert got == [
        {"d": None if d is None else d.isoformat(), "t": t}
        for d, t in zip(days, texts, strict=True)
    ]


def test_table_widths_come_from_the_first_page_of_records_not_the_first_batch() -> None:
    """A scan yields a batch per object: a short first object must not set the widths."""
    schema = pa.schema([("id", pa.int64()), ("v", pa.string())])
    batches = [
        pa.record_batch([pa.array([7]), pa.array(["again"])], schema=schema),
        pa.record_batch(
            [pa.array([None, 1]), pa.array(["n1", "a much longer value"])], schema=schema
        ),
    ]
    out = io.StringIO()
    write_records(pa.RecordBatchReader.from_batches(schema, iter(batches)), "table", out=out)
    assert out.getvalue().splitlines() == [
        "id    v",
        "7     again",
        "null  n1",
        "1     a much longer value",
    ]


def test_table_cells_show_newlines_and_tabs_escaped_so_rows_stay_one_line() -> None:
    table = pa.table({"id": [1, 2], "s": ["two\nlines\tand tab\r", "C:\\path"]})
    out = io.StringIO()
    write_records(table, "table", out=out)
    assert out.getvalue().splitlines() == [
        "id  s",
        "1   two\\nlines\\tand tab\\r",
        "2   C:\\path",
    ]
    listed = io.StringIO()
    write_records(table.to_pylist(), "table", out=listed)
    assert listed.getvalue() == out.getvalue()
    exact = io.StringIO()
    write_records(table, "json", out=exact)
    assert [json.loads(line)["s"] for line in exact.getvalue().splitlines()] == table[
        "s"
    ].to_pylist()
