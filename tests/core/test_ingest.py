"""Tests for lake_core.ingest: format detection, readers, type normalization, schema union."""

from __future__ import annotations

import gzip
import io
import json
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.ipc as pa_ipc
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lake_core.errors import MalformedInputError, SchemaConflictError, UsageError
from lake_core.ingest import (
    FORMATS,
    conform_to,
    detect_format,
    normalize_table,
    read_input,
    readers,
    unify_schema,
)

TS = pa.timestamp("us", tz="UTC")


def utc(year: int, month: int, day: int, hour: int = 0, minute: int = 0, *rest: int) -> datetime:
    second, micro = (*rest, 0, 0)[:2]
    return datetime(year, month, day, hour, minute, second, micro, tzinfo=UTC)


def write(path: Path, text: str | bytes) -> Path:
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def write_parquet(path: Path, table: pa.Table) -> Path:
    pq.write_table(table, path)
    return path


# --- format detection ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "fmt"),
    [
        ("a.ndjson", "ndjson"),
        ("a.jsonl", "ndjson"),
        ("a.JSON", "json"),
        ("a.csv", "csv"),
        ("a.parquet", "parquet"),
        ("a.pq", "parquet"),
        ("a.arrow", "arrow"),
        ("a.ipc", "arrow"),
        ("a.feather", "arrow"),
        ("a.csv.gz", "csv"),
        ("dir.v2/a.ndjson.gz", "ndjson"),
    ],
)
def test_detect_format_by_extension_wins_over_content(name: str, fmt: str) -> None:
    assert detect_format(name, b"PAR1 whatever") == fmt


@pytest.mark.parametrize(
    ("head", "fmt"),
    [
        (b"PAR1\x15\x04", "parquet"),
        (b"ARROW1\x00\x00", "arrow"),
        (b"\xff\xff\xff\xff\x10\x00", "arrow"),
        (b'[{"a": 1}]', "json"),
        (b'  {"a": 1}\n{"a": 2}\n', "ndjson"),
        (b'{\n  "a": 1\n}\n', "json"),
        (b'{"a": "a very long first line cut sh', "json"),
        (b"a,b\n1,2\n", "csv"),
        (b"", "csv"),
    ],
)
def test_detect_format_by_content(head: bytes, fmt: str) -> None:
    assert detect_format("-", head) == fmt
    assert detect_format("data.unknown", head) == fmt


def test_formats_are_the_documented_ones() -> None:
    assert FORMATS == ("auto", "ndjson", "json", "csv", "parquet", "arrow")


# --- readers: round trips -----------------------------------------------------------------


def test_ndjson_round_trips_values(tmp_path: Path) -> None:
    records: list[dict[str, Any]] = [
        {"id": 1, "x": 1.5, "ok": True, "s": "héllo", "tags": ["a", "b"], "m": {"k": 2}},
        {"id": 2, "x": 2, "ok": False, "s": None, "tags": [], "m": {"k": None}},
    ]
    path = write(tmp_path / "in.ndjson", "\n".join(json.dumps(r) for r in records) + "\n\n")
    table = read_input(path)
    assert table.schema == pa.schema(
        [
            ("id", pa.int64()),
            ("x", pa.float64()),
            ("ok", pa.bool_()),
            ("s", pa.string()),
            ("tags", pa.list_(pa.string())),
            ("m", pa.struct([("k", pa.int64())])),
        ]
    )
    assert table.to_pylist() == [
        {**records[0]},
        {**records[1], "x": 2.0},
    ]


def test_json_array_single_object_and_concatenated_objects(tmp_path: Path) -> None:
    array = read_input(write(tmp_path / "a.json", '[{"a": 1}, {"a": 2, "b": "x"}]'))
    assert array.to_pylist() == [{"a": 1, "b": None}, {"a": 2, "b": "x"}]
    single = read_input(write(tmp_path / "b.json", '{\n  "a": 1,\n  "b": [1, 2]\n}\n'))
    assert single.to_pylist() == [{"a": 1, "b": [1, 2]}]
    pretty = '{\n "a": 1\n}\n{\n "a": 2\n}\n'
    assert read_input(write(tmp_path / "c.json", pretty)).column("a").to_pylist() == [1, 2]
    ndjson_in_json = read_input(write(tmp_path / "d.json", '{"a": 1}\n{"a": 2}\n'))
    assert ndjson_in_json.column("a").to_pylist() == [1, 2]


def test_csv_unquoted_empty_and_na_are_null_quoted_ones_are_strings(tmp_path: Path) -> None:
    """As DuckDB reads CSV: an unquoted empty field (or NA, NULL…) is null in every column,
    a quoted one is the string, so nulls and empty strings both survive a CSV round trip."""
    path = write(
        tmp_path / "in.csv",
        'id,x,s,flag\n1,1.5,a,true\n2,,,false\n3,2,c,\n4,NA,"",true\n5,3,"NA",\n6,4,NA,\n',
    )
    table = read_input(path)
    assert table.schema == pa.schema(
        [("id", pa.int64()), ("x", pa.float64()), ("s", pa.string()), ("flag", pa.bool_())]
    )
    assert table.to_pylist() == [
        {"id": 1, "x": 1.5, "s": "a", "flag": True},
        {"id": 2, "x": None, "s": None, "flag": False},
        {"id": 3, "x": 2.0, "s": "c", "flag": None},
        {"id": 4, "x": None, "s": "", "flag": True},
        {"id": 5, "x": 3.0, "s": "NA", "flag": None},
        {"id": 6, "x": 4.0, "s": None, "flag": None},
    ]


def test_parquet_round_trips_values(tmp_path: Path) -> None:
    source = pa.table(
        {
            "id": pa.array([1, 2], pa.int64()),
            "d": pa.array([date(2026, 1, 5), None], pa.date32()),
            "dec": pa.array([1, 2], pa.decimal128(10, 2)),
            "b": pa.array([b"\x00", b"x"], pa.binary()),
        }
    )
    table = read_input(write_parquet(tmp_path / "in.parquet", source))
    assert table.equals(source)


def test_parquet_string_view_loads_as_string(tmp_path: Path) -> None:
    path = write_parquet(
        tmp_path / "sv.parquet", pa.table({"s": pa.array(["a"], pa.string_view())})
    )
    table = read_input(path)
    assert table.schema == pa.schema([("s", pa.string())])
    assert table.column("s").to_pylist() == ["a"]


def test_parquet_strings_are_never_parsed_as_timestamps(tmp_path: Path) -> None:
    path = write_parquet(tmp_path / "t.parquet", pa.table({"t": ["2026-01-05T10:00:00Z"]}))
    assert read_input(path).schema.field("t").type == pa.string()


@pytest.mark.parametrize("kind", ["file", "stream"])
def test_arrow_file_and_stream_round_trip(tmp_path: Path, kind: str) -> None:
    source = pa.table({"a": [1, 2, 3], "s": ["x", None, "z"]})
    path = tmp_path / f"in.{kind}"  # no known extension: detected by content
    with pa.OSFile(str(path), "wb") as sink:
        open_writer = pa_ipc.new_file if kind == "file" else pa_ipc.new_stream
        with open_writer(sink, source.schema) as writer:
            writer.write_table(source)
    assert read_input(path).equals(source)
    assert read_input(path, fmt="arrow").equals(source)


def test_gzip_input_is_decompressed(tmp_path: Path) -> None:
    path = write(tmp_path / "in.ndjson.gz", gzip.compress(b'{"a": 1}\n{"a": 2}\n'))
    assert read_input(path).column("a").to_pylist() == [1, 2]


def test_stdin_as_bytesio_and_dash(monkeypatch: pytest.MonkeyPatch) -> None:
    table = read_input(io.BytesIO(b'{"a": 1}\n{"a": 2}\n'))
    assert table.column("a").to_pylist() == [1, 2]
    csv_table = read_input(io.BytesIO(b"a,b\n1,x\n"))
    assert csv_table.to_pylist() == [{"a": 1, "b": "x"}]

    class FakeStdin:
        buffer = io.BytesIO(b"a\n7\n")

    monkeypatch.setattr("sys.stdin", FakeStdin())
    assert read_input("-").to_pylist() == [{"a": 7}]


def test_stream_errors_are_named_stdin_or_the_given_name() -> None:
    with pytest.raises(MalformedInputError) as err:
        read_input(io.BytesIO(b'{"a": 1}\n{"a": \n'))
    assert err.value.source == "stdin"
    assert err.value.location == "line 2"
    with pytest.raises(MalformedInputError, match="upload.ndjson"):
        read_input(io.BytesIO(b'{"a": 1}\nnope\n'), name="upload.ndjson")


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("e.ndjson", ""),
        ("e.ndjson", "\n\n  \n"),
        ("e.json", "[]"),
        ("e.json", "  "),
        ("e.csv", ""),
        ("e.csv", "a,b\n"),
    ],
)
def test_empty_text_input_gives_an_empty_table_with_an_empty_schema(
    tmp_path: Path, name: str, content: str
) -> None:
    table = read_input(write(tmp_path / name, content))
    assert table.num_rows == 0
    assert len(table.schema) == 0


# --- type normalization -------------------------------------------------------------------


def test_integers_floats_and_timestamps_are_normalized(tmp_path: Path) -> None:
    source = pa.table(
        {
            "u8": pa.array([255], pa.uint8()),
            "u64": pa.array([2**63 - 1], pa.uint64()),
            "i16": pa.array([-5], pa.int16()),
            "f32": pa.array([1.5], pa.float32()),
            "ns": pa.array([1_767_607_200_123_456_789], pa.timestamp("ns")),
            "s": pa.array([1_767_607_200], pa.timestamp("s", tz="Europe/Paris")),
            "dict": pa.array(["a"]).dictionary_encode(),
            "big": pa.array(["x"], pa.large_string()),
            "nested": pa.array(
                [{"l": [1]}], pa.struct([("l", pa.large_list(pa.field("x", pa.uint16())))])
            ),
        }
    )
    table = read_input(write_parquet(tmp_path / "n.parquet", source))
    assert table.schema == pa.schema(
        [
            ("u8", pa.int64()),
            ("u64", pa.int64()),
            ("i16", pa.int64()),
            ("f32", pa.float64()),
            ("ns", TS),
            ("s", TS),
            ("dict", pa.string()),
            ("big", pa.string()),
            ("nested", pa.struct([("l", pa.list_(pa.int64()))])),
        ]
    )
    row = table.to_pylist()[0]
    assert row["u8"] == 255 and row["u64"] == 2**63 - 1 and row["f32"] == 1.5
    # Nanoseconds are truncated to microseconds; a naive timestamp is UTC.
    assert table.column("ns").cast(pa.int64()).to_pylist() == [1_767_607_200_123_456]
    assert row["s"] == utc(2026, 1, 5, 10, 0)
    assert row["nested"] == {"l": [1]}


def test_uint64_above_int64_max_is_malformed_naming_the_column() -> None:
    table = pa.table({"ok": [1], "big": pa.array([2**63], pa.uint64())})
    with pytest.raises(MalformedInputError, match="'big'") as err:
        normalize_table(table, "x.parquet")
    assert err.value.source == "x.parquet"


@pytest.mark.parametrize(
    ("name", "text", "where", "column", "value"),
    [
        (
            "a.ndjson",
            '{"k": 1, "id": 5}\n{"k": 2, "id": 9223372036854775808}\n',
            "line 2",
            "id",
            2**63,
        ),
        ("b.ndjson", '{"k": 1, "id": -9223372036854775809}\n', "line 1", "id", -(2**63) - 1),
        (
            "c.json",
            '[{"k": 1, "n": {"x": [1, 123456789012345678901]}}]',
            "row 1",
            "n.x[]",
            123456789012345678901,
        ),
        ("d.csv", 'k,id,f\n1,7,"0.5\n"\n\n2,18446744073709551615,1.5\n', "line 5", "id", 2**64 - 1),
    ],
)
def test_text_integers_beyond_int64_are_malformed_not_rounded(
    tmp_path: Path, name: str, text: str, where: str, column: str, value: int
) -> None:
    """pyarrow's readers type such an integer float64, which would keep 16 of its digits (an
    id or a hash silently changed): the load refuses it, naming the column, the value and where
    it is."""
    with pytest.raises(MalformedInputError) as err:
        read_input(write(tmp_path / name, text))
    assert err.value.location == where
    assert f"column {column!r}: the integer {value} does not fit int64" in str(err.value)


def test_csv_nan_is_nan_in_float_columns_and_null_elsewhere(tmp_path: Path) -> None:
    """``lake query -f csv`` writes a float NaN as ``nan``: it loads back as NaN. Files that
    mark missing values ``NaN`` in int, timestamp or all-missing columns load as before (null,
    the column keeping its type); a padded big integer and a duplicate header are refused."""
    text = (
        "k,n,t,f,e\n"
        "1,NaN,2024-01-02T00:00:00Z,nan,NaN\n"
        "2,7,NaN,1.5,\n"
        '3,8,2024-01-03T00:00:00Z,"NaN",nan\n'
    )
    table = read_input(write(tmp_path / "m.csv", text))
    assert table.schema.types == [pa.int64(), pa.int64(), TS, pa.float64(), pa.null()]
    assert table.column("n").to_pylist() == [None, 7, 8]
    assert table.column("t").to_pylist()[1] is None
    f = table.column("f").to_pylist()
    assert f[0] != f[0] and f[1] == 1.5 and f[2] != f[2]
    with pytest.raises(MalformedInputError, match="'id': the integer 99999999999999999999"):
        read_input(write(tmp_path / "pad.csv", "k,id\n1, 99999999999999999999\n"))
    with pytest.raises(MalformedInputError, match="duplicate column name 'x'"):
        read_input(write(tmp_path / "dup.csv", "x,x,s\n1.5,2.5,id1234567890123456789\n"))


def test_long_digit_runs_that_are_not_big_integers_load(tmp_path: Path) -> None:
    """Twenty digits inside a string, a long fraction and int64's extremes next to a float
    column take the slower check and load exactly."""
    text = (
        '{"k": 1, "s": "12345678901234567890", "f": 0.12345678901234567890,'
        ' "i": 9223372036854775807}\n'
        '{"k": 2, "s": "x", "f": 1.5, "i": -9223372036854775808}\n'
    )
    table = read_input(write(tmp_path / "ok.ndjson", text))
    assert table.column("i").type == pa.int64()
    assert table.column("i").to_pylist() == [2**63 - 1, -(2**63)]
    assert table.column("s").to_pylist() == ["12345678901234567890", "x"]
    assert table.column("f").to_pylist() == [0.12345678901234568, 1.5]
    # CSV has no string type: pyarrow reads even a quoted run of digits as a number, so there
    # it is refused too (it would have been rounded).
    with pytest.raises(MalformedInputError, match="'s': the integer 12345678901234567890"):
        read_input(write(tmp_path / "q.csv", 'k,s,f\n1,"12345678901234567890",0.5\n'))
    csv_table = read_input(write(tmp_path / "ok.csv", "k,f\n1,0.12345678901234567890\n"))
    assert csv_table.column("f").to_pylist() == [0.12345678901234568]


def test_list_views_and_run_end_encoding_normalize() -> None:
    views = pa.ListViewArray.from_arrays(
        pa.array([2, 0, 1], pa.int32()), pa.array([1, 2, 2], pa.int32()), pa.array([10, 20, 30])
    )
    runs = pc.run_end_encode(pa.array(["a", "a", "b"]))  # type: ignore[attr-defined]
    table = normalize_table(pa.table({"v": views, "r": runs}), "t")
    assert table.schema == pa.schema([("v", pa.list_(pa.int64())), ("r", pa.string())])
    assert table.to_pylist() == [
        {"v": [30], "r": "a"},
        {"v": [10, 20], "r": "a"},
        {"v": [20, 30], "r": "b"},
    ]


def test_normalize_drops_metadata_and_refuses_duplicate_names() -> None:
    table = pa.table({"a": [1]}).replace_schema_metadata({"pandas": "{}"})
    assert normalize_table(table, "t").schema.metadata is None
    duplicate = pa.Table.from_arrays([pa.array([1]), pa.array([2])], names=["a", "a"])
    with pytest.raises(MalformedInputError, match="duplicate column name 'a'"):
        normalize_table(duplicate, "t")


def test_iso_strings_in_json_become_utc_timestamps_with_offsets_applied(tmp_path: Path) -> None:
    lines = [
        {"t": "2026-01-05T10:00:00Z", "d": "2026-01-05", "n": {"at": "2026-01-05 10:00"}},
        {"t": "2026-01-05T10:00:00.123456+02:00", "d": None, "n": {"at": None}},
        {"t": "2026-01-05 10:00:00.5", "d": "2026-01-06", "n": None},
        {"t": None, "d": "2026-01-07", "n": {"at": "2026-01-05T23:30:00-01:30"}},
    ]
    path = write(tmp_path / "t.ndjson", "\n".join(json.dumps(r) for r in lines))
    table = read_input(path)
    assert table.schema == pa.schema([("t", TS), ("d", TS), ("n", pa.struct([("at", TS)]))])
    micros = table.column("t").cast(pa.int64()).to_pylist()
    base = int(utc(2026, 1, 5, 10).timestamp()) * 1_000_000
    assert micros == [base, base - 2 * 3600 * 1_000_000 + 123_456, base + 500_000, None]
    # A pure date is a timestamp at midnight UTC.
    assert table.column("d").to_pylist()[0] == utc(2026, 1, 5)
    assert table.column("n").to_pylist()[3] == {"at": utc(2026, 1, 6, 1, 0)}


def test_iso_strings_in_csv_become_timestamps_and_dates_midnight(tmp_path: Path) -> None:
    text = (
        "t,d,mixed,word\n"
        "2026-01-05T10:00:00+02:00,2026-01-05,2026-01-05T10:00:00Z,2026-01-05\n"
        "2026-01-05T12:00:00.000001Z,2026-01-06,2026-01-05 10:00:00,hello\n"
    )
    table = read_input(write(tmp_path / "t.csv", text))
    assert table.schema == pa.schema([("t", TS), ("d", TS), ("mixed", TS), ("word", pa.string())])
    assert table.column("t").to_pylist() == [utc(2026, 1, 5, 8), utc(2026, 1, 5, 12, 0, 0, 1)]
    assert table.column("d").to_pylist() == [utc(2026, 1, 5), utc(2026, 1, 6)]
    assert table.column("mixed").to_pylist() == [utc(2026, 1, 5, 10), utc(2026, 1, 5, 10)]


def test_strings_that_are_not_all_iso_stay_strings(tmp_path: Path) -> None:
    text = '{"a": "2026-01-05T10:00:00Z"}\n{"a": "2026-02-30T10:00:00Z"}\n{"a": "20260105"}\n'
    table = read_input(write(tmp_path / "s.ndjson", text))
    assert table.schema.field("a").type == pa.string()


def test_more_than_six_fractional_digits_are_truncated(tmp_path: Path) -> None:
    table = read_input(write(tmp_path / "f.ndjson", '{"t": "2026-01-05T10:00:00.123456789Z"}\n'))
    assert table.column("t").to_pylist() == [utc(2026, 1, 5, 10, 0, 0, 123456)]


# --- readers: shapes and malformed input --------------------------------------------------


def test_ndjson_records_of_different_shapes_unify(tmp_path: Path) -> None:
    text = '{"a": 1}\n{"b": "x", "n": {"p": 1}}\n{"a": 2.5, "n": {"q": [true]}}\n{"n": null}\n'
    table = read_input(write(tmp_path / "shapes.ndjson", text))
    assert table.column_names == ["a", "b", "n"]
    assert table.schema.field("n").type == pa.struct(
        [("p", pa.int64()), ("q", pa.list_(pa.bool_()))]
    )
    assert table.to_pylist() == [
        {"a": 1.0, "b": None, "n": None},
        {"a": None, "b": "x", "n": {"p": 1, "q": None}},
        {"a": 2.5, "b": None, "n": {"p": None, "q": [True]}},
        {"a": None, "b": None, "n": None},
    ]


def test_stdlib_fallback_agrees_with_the_fast_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    text = (
        '{"id": 1, "x": 1, "t": "2026-01-05T10:00:00Z", "n": {"a": [1, 2]}, "z": null}\n'
        '{"id": 2, "x": 2.5, "t": "2026-01-05T11:00:00Z", "n": {"b": "q"}, "extra": false}\n'
        '{"id": 3, "t": null, "n": null, "z": null}\n'
    )
    path = write(tmp_path / "same.ndjson", text)
    fast = read_input(path)
    # Lines longer than the block make pyarrow fail, which forces the stdlib path.
    monkeypatch.setattr(readers, "_JSON_BLOCK_SIZE", 16)
    slow = read_input(path)
    assert slow.equals(fast)
    assert fast.schema.field("t").type == TS and fast.schema.field("x").type == pa.float64()


def test_ndjson_mixed_types_name_the_column_the_line_and_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "mixed.ndjson", '{"a": 1}\n\n{"a": 2}\n{"a": "x"}\n')
    with pytest.raises(MalformedInputError) as err:
        read_input(path)
    assert err.value.location == "line 4"
    assert str(path) in str(err.value) and "line 4" in str(err.value)
    assert "mixed types for column 'a'" in str(err.value)


def test_ndjson_nested_field_changing_type_is_malformed(tmp_path: Path) -> None:
    path = write(tmp_path / "n.ndjson", '{"a": {"b": 1}}\n{"a": {"b": "x"}}\n')
    with pytest.raises(MalformedInputError, match=r"line 2.*'a\.b'"):
        read_input(path)


def test_broken_json_line_2_names_line_and_file(tmp_path: Path) -> None:
    path = write(tmp_path / "broken.ndjson", '{"a": 1}\n{"a": \n{"a": 3}\n')
    with pytest.raises(MalformedInputError) as err:
        read_input(path)
    assert err.value.location == "line 2"
    assert "broken.ndjson" in str(err.value) and "line 2" in str(err.value)
    json_path = write(tmp_path / "broken.json", '{"a": 1}\n{"a": \n{"a": 3}\n')
    with pytest.raises(MalformedInputError, match=r"broken\.json, line 2"):
        read_input(json_path)


@pytest.mark.parametrize("line", ["[1, 2]", "3", '"text"'])
def test_ndjson_non_object_line_is_malformed(tmp_path: Path, line: str) -> None:
    path = write(tmp_path / "x.ndjson", f'{{"a": 1}}\n{line}\n')
    with pytest.raises(MalformedInputError, match="expected a JSON object") as err:
        read_input(path)
    assert err.value.location == "line 2"


@pytest.mark.parametrize(
    ("name", "content"),
    [
        ("u.ndjson", b'{"a": "x"}\n{"a": "\xff"}\n'),
        ("u.json", b'[{"a": "x"},\n{"a": "\xff"}]'),
        ("u.csv", b"a,b\n1,x\n2,\xff\n"),
    ],
)
def test_invalid_utf8_is_malformed_with_its_line(tmp_path: Path, name: str, content: bytes) -> None:
    with pytest.raises(MalformedInputError, match="invalid UTF-8") as err:
        read_input(write(tmp_path / name, content))
    assert err.value.location == ("line 3" if name == "u.csv" else "line 2")


def test_json_array_errors_name_the_line_or_row(tmp_path: Path) -> None:
    bad_syntax = write(tmp_path / "a.json", '[\n {"a": 1},\n {"a" 2}\n]')
    with pytest.raises(MalformedInputError) as err:
        read_input(bad_syntax)
    assert err.value.location == "line 3"
    not_object = write(tmp_path / "b.json", '[{"a": 1}, 5]')
    with pytest.raises(MalformedInputError) as err:
        read_input(not_object)
    assert err.value.location == "row 2"


def test_csv_wrong_arity_names_the_physical_line(tmp_path: Path) -> None:
    path = write(tmp_path / "arity.csv", "a,b,c\n1,2,3\n4,5\n6,7,8\n")
    with pytest.raises(MalformedInputError) as err:
        read_input(path)
    assert err.value.location == "line 3"
    assert err.value.problem == "expected 3 fields, saw 2"
    assert "arity.csv" in str(err.value)


def test_csv_arity_line_counts_blank_lines_and_multiline_fields(tmp_path: Path) -> None:
    path = write(tmp_path / "q.csv", 'a,b\n\n1,"two\nlines"\n2,x,extra\n')
    with pytest.raises(MalformedInputError) as err:
        read_input(path)
    assert err.value.location == "line 5"
    assert err.value.problem == "expected 2 fields, saw 3"


@pytest.mark.parametrize(
    ("text", "location", "hint"),
    [
        ('{"ts": 1, "x": 1.5}\n{"ts": 2, "x": 2.5}\n', "line 1", "-i ndjson"),
        # One line: read as CSV it was a header alone, and the load said "empty transaction".
        ('{"ts": 1}\n', "line 1", "-i ndjson"),
        ('[{"ts": 1}, {"ts": 2}]', "line 1", "-i json"),
        ('\ufeff\n\n{\n  "ts": 1\n}\n', "line 3", "-i json"),
    ],
)
def test_json_read_as_csv_is_malformed_naming_the_file_and_line(
    tmp_path: Path, text: str, location: str, hint: str
) -> None:
    """``-i csv`` on JSON (or a ``.csv`` name on it): the header line would be JSON fragments,
    so the reader refuses the file instead of loading columns named ``{"ts": 1``."""
    path = write(tmp_path / "rows.ndjson", text)
    with pytest.raises(MalformedInputError) as err:
        read_input(path, fmt="csv")
    assert err.value.source == str(path)
    assert err.value.location == location
    assert err.value.problem.startswith("not CSV: the header is JSON")
    assert hint in err.value.problem
    with pytest.raises(MalformedInputError, match="not CSV"):
        read_input(write(tmp_path / "named.csv", text))


def test_csv_headers_with_brackets_are_still_csv(tmp_path: Path) -> None:
    """Only a header line that is JSON is refused: brackets in column names are fine."""
    table = read_input(write(tmp_path / "b.csv", "[a],{b}\n1,2\n"))
    assert table.to_pylist() == [{"[a]": 1, "{b}": 2}]


def test_truncated_parquet_is_malformed_naming_the_file(tmp_path: Path) -> None:
    whole = write_parquet(tmp_path / "whole.parquet", pa.table({"a": list(range(1000))}))
    data = whole.read_bytes()
    cut = write(tmp_path / "cut.parquet", data[: len(data) // 2])
    with pytest.raises(MalformedInputError, match="not a valid Parquet file") as err:
        read_input(cut)
    assert err.value.source == str(cut)
    assert "cut.parquet" in str(err.value)


def test_garbage_arrow_is_malformed(tmp_path: Path) -> None:
    path = write(tmp_path / "junk.arrow", b"ARROW1\x00\x00garbage")
    with pytest.raises(MalformedInputError, match="junk.arrow"):
        read_input(path)


def test_missing_file_and_unknown_format_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="nope.csv"):
        read_input(tmp_path / "nope.csv")
    with pytest.raises(UsageError, match="unknown input format 'xml'"):
        read_input(write(tmp_path / "a.csv", "a\n1\n"), fmt="xml")


def test_explicit_format_overrides_the_extension(tmp_path: Path) -> None:
    path = write(tmp_path / "data.txt", '{"a": 1}\n')
    assert read_input(path, fmt="ndjson").to_pylist() == [{"a": 1}]


# --- schema union -------------------------------------------------------------------------


def test_first_schema_becomes_the_pool_and_new_columns_are_appended() -> None:
    pool = unify_schema(None, pa.schema([("a", pa.int64()), ("b", pa.string())]), "f1")
    pool = unify_schema(pool, pa.schema([("c", pa.bool_()), ("a", pa.int64())]), "f2")
    assert pool.names == ["a", "b", "c"]


def test_int_versus_string_conflict_names_column_and_both_types() -> None:
    pool = pa.schema([("a", pa.int64())])
    with pytest.raises(SchemaConflictError) as err:
        unify_schema(pool, pa.schema([("a", pa.string())]), "in.ndjson")
    assert (err.value.column, err.value.pool_type, err.value.new_type) == ("a", "int64", "string")
    message = str(err.value)
    assert "'a'" in message and "int64" in message and "string" in message
    assert "in.ndjson" in message


def test_int_into_float_pool_is_allowed_and_conformed() -> None:
    pool = pa.schema([("x", pa.float64()), ("y", pa.string())])
    incoming = pa.table({"x": pa.array([1, 2], pa.int64())})
    assert unify_schema(pool, incoming.schema, "f") == pool
    conformed = conform_to(incoming, pool, exact=False)
    assert conformed.schema == pa.schema([("x", pa.float64())])  # y is not added
    assert conformed.column("x").to_pylist() == [1.0, 2.0]


def test_float_into_int_pool_is_refused() -> None:
    with pytest.raises(SchemaConflictError) as err:
        unify_schema(pa.schema([("x", pa.int64())]), pa.schema([("x", pa.float64())]), "f")
    assert (err.value.pool_type, err.value.new_type) == ("int64", "double")


def test_nested_struct_conflict_names_the_dotted_path() -> None:
    pool = pa.schema([("a", pa.struct([("b", pa.struct([("c", pa.int64())]))]))])
    incoming = pa.schema([("a", pa.struct([("b", pa.struct([("c", pa.string())]))]))])
    with pytest.raises(SchemaConflictError) as err:
        unify_schema(pool, incoming, "f")
    assert err.value.column == "a.b.c"
    assert (err.value.pool_type, err.value.new_type) == ("int64", "string")


def test_struct_fields_union_and_conform_keeps_the_tables_fields() -> None:
    pool = unify_schema(None, pa.schema([("s", pa.struct([("a", pa.float64())]))]), "f1")
    incoming = pa.table(
        {"s": pa.array([{"b": "x", "a": 1}], pa.struct([("b", pa.string()), ("a", pa.int64())]))}
    )
    pool = unify_schema(pool, incoming.schema, "f2")
    assert pool.field("s").type == pa.struct([("a", pa.float64()), ("b", pa.string())])
    conformed = conform_to(incoming, pool, exact=False)
    assert conformed.schema.field("s").type == pa.struct([("b", pa.string()), ("a", pa.float64())])
    assert conformed.to_pylist() == [{"s": {"b": "x", "a": 1.0}}]


def test_list_element_conflict_reports_the_list_types() -> None:
    with pytest.raises(SchemaConflictError) as err:
        unify_schema(
            pa.schema([("l", pa.list_(pa.int64()))]), pa.schema([("l", pa.list_(pa.string()))]), "f"
        )
    assert err.value.column == "l"
    assert err.value.pool_type == "list<item: int64>"
    assert err.value.new_type == "list<item: string>"
    widened = unify_schema(
        pa.schema([("l", pa.list_(pa.float64()))]), pa.schema([("l", pa.list_(pa.int64()))]), "f"
    )
    assert widened.field("l").type == pa.list_(pa.float64())


def test_null_columns_unify_with_anything_and_conform_to_the_pool_type() -> None:
    pool = pa.schema([("a", pa.int64()), ("s", pa.struct([("t", TS)]))])
    nulls = pa.table({"a": pa.nulls(2), "s": pa.nulls(2)})
    assert unify_schema(pool, nulls.schema, "f") == pool
    conformed = conform_to(nulls, pool, exact=False)
    assert conformed.schema == pool
    assert conformed.column("a").to_pylist() == [None, None]
    # A null pool column takes the first real type.
    grown = unify_schema(pa.schema([("a", pa.null())]), pa.schema([("a", pa.string())]), "f")
    assert grown == pa.schema([("a", pa.string())])


def test_string_kinds_are_not_conflicts() -> None:
    pool = pa.schema([("s", pa.string())])
    for kind in (pa.large_string(), pa.string_view()):
        assert unify_schema(pool, pa.schema([("s", kind)]), "f") == pool


def test_conform_refuses_a_conflicting_column() -> None:
    with pytest.raises(SchemaConflictError):
        conform_to(pa.table({"a": ["x"]}), pa.schema([("a", pa.int64())]), exact=False)


def test_conform_exact_gives_exactly_the_schemas_columns() -> None:
    """The read side: an object's rows as the pool's schema — its column order, nulls for the
    columns and struct fields the object lacks, extras dropped, int64 read as float64."""
    pool = pa.schema(
        [
            ("k", pa.float64()),
            ("s", pa.struct([("a", pa.int64()), ("b", pa.string())])),
            ("m", pa.string()),
        ]
    )
    obj = pa.table(
        {
            "x": ["dropped"],
            "s": pa.array([{"a": 7}], pa.struct([("a", pa.int64())])),
            "k": pa.array([2**53 + 1], pa.int64()),
        }
    )
    read = conform_to(obj, pool)
    assert read.schema == pool
    assert read.to_pylist() == [{"k": float(2**53), "s": {"a": 7, "b": None}, "m": None}]
    with pytest.raises(SchemaConflictError) as err:
        conform_to(pa.table({"m": [1]}), pool)
    assert err.value.column == "m"


def test_loaded_files_unify_end_to_end(tmp_path: Path) -> None:
    first = read_input(write(tmp_path / "1.ndjson", '{"x": 1.5, "n": null}\n'))
    second = read_input(write(tmp_path / "2.csv", "x,n,t\n2,,2026-01-05T10:00:00Z\n"))
    pool = unify_schema(unify_schema(None, first.schema, "1"), second.schema, "2")
    assert pool == pa.schema([("x", pa.float64()), ("n", pa.null()), ("t", TS)])
    assert conform_to(second, pool, exact=False).to_pylist() == [
        {"x": 2.0, "n": None, "t": utc(2026, 1, 5, 10)}
    ]


_COLUMN_TYPES = {
    "i": pa.int64(),
    "f": pa.float64(),
    "s": pa.string(),
    "t": TS,
    "st": pa.struct([("a", pa.int64())]),
    "st2": pa.struct([("b", pa.string())]),
    "l": pa.list_(pa.int64()),
}

_schemas = st.lists(
    st.tuples(st.sampled_from(sorted(_COLUMN_TYPES)), st.booleans()),
    unique_by=lambda pair: pair[0],
).map(
    lambda pairs: pa.schema(
        [(name, pa.null() if is_null else _COLUMN_TYPES[name]) for name, is_null in pairs]
    )
)


@settings(database=None)
@given(_schemas, _schemas)
def test_unify_is_idempotent_and_order_insensitive_on_compatible_schemas(
    a: pa.Schema, b: pa.Schema
) -> None:
    ab = unify_schema(unify_schema(None, a, "a"), b, "b")
    ba = unify_schema(unify_schema(None, b, "b"), a, "a")
    assert unify_schema(ab, a, "a") == ab
    assert unify_schema(ab, b, "b") == ab
    assert unify_schema(ab, ab, "ab") == ab
    assert {f.name: f.type for f in ab} == {f.name: f.type for f in ba}
