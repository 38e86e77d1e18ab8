"""The query stream's bytes: what pyarrow's stream reader reads back, batch for batch, with the
trailer last (stats, or the error of a read that failed mid-stream)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pyarrow as pa
import pytest

from lake_core.errors import NotFoundError
from lake_service.streams import arrow_stream, ndjson_stream

PLAIN = pa.schema([("ts", pa.int64()), ("msg", pa.string())])
DICT = pa.schema([("ts", pa.int64()), ("msg", pa.dictionary(pa.int32(), pa.string()))])


def batches(schema: pa.Schema, n: int) -> list[pa.RecordBatch]:
    out = []
    for i in range(n):
        msg = pa.array([f"m{i}-{k}" for k in range(1000)])
        if pa.types.is_dictionary(schema.field("msg").type):
            msg = msg.dictionary_encode()
        out.append(pa.record_batch([pa.array(range(i * 1000, (i + 1) * 1000)), msg], schema=schema))
    return out


def read(chunks: Iterator[bytes | memoryview]) -> tuple[list[pa.RecordBatch], dict[bytes, bytes]]:
    reader = pa.ipc.open_stream(b"".join(bytes(c) for c in chunks))
    got, trailer = [], {}
    while True:
        try:
            batch, meta = reader.read_next_batch_with_custom_metadata()
        except StopIteration:
            return got, trailer
        if meta is not None:
            trailer = dict(meta)
        else:
            got.append(batch)


@pytest.mark.parametrize("schema", [PLAIN, DICT], ids=["plain", "dictionary"])
def test_batches_and_stats_round_trip(schema: pa.Schema) -> None:
    sent = batches(schema, 3)
    got, trailer = read(arrow_stream(schema, iter(sent), lambda: {"rows_read": 3000}))
    assert pa.Table.from_batches(got).equals(pa.Table.from_batches(sent))
    assert json.loads(trailer[b"lake.stats"]) == {"rows_read": 3000}


@pytest.mark.parametrize("schema", [PLAIN, DICT], ids=["plain", "dictionary"])
def test_a_failure_mid_stream_is_the_trailer(schema: pa.Schema) -> None:
    def failing() -> Iterator[pa.RecordBatch]:
        yield batches(schema, 1)[0]
        raise NotFoundError("object", "x1")

    got, trailer = read(arrow_stream(schema, failing(), lambda: {}))
    assert len(got) == 1 and b"lake.stats" not in trailer
    body = json.loads(trailer[b"lake.error"])
    assert body["error"] == "x1: object not found" and body["type"] == "NotFoundError"


def test_an_empty_result_is_a_schema_and_a_trailer() -> None:
    got, trailer = read(arrow_stream(PLAIN, iter([]), lambda: {"rows_read": 0}))
    assert got == [] and json.loads(trailer[b"lake.stats"]) == {"rows_read": 0}


def test_ndjson_lines_are_strict_json_with_nan_and_infinities_as_null() -> None:
    """JSON has no NaN or Infinity: the service writes them as null, as ``lake query -f json``
    does, at any depth; finite floats and other values are unchanged."""
    nan, inf = float("nan"), float("inf")
    batch = pa.record_batch(
        {
            "x": pa.array([1.5, nan, inf, -inf, None]),
            "s": pa.array(
                [{"v": nan}, {"v": 2.0}, {"v": None}, {"v": -inf}, {"v": 0.5}],
                pa.struct([("v", pa.float64())]),
            ),
            "l": pa.array([[nan, 1.0], [], None, [inf], [2.5]], pa.list_(pa.float64())),
            "m": pa.array(
                [[("a", nan)], [], None, [("b", 1.0)], [("c", -inf)]],
                pa.map_(pa.string(), pa.float64()),
            ),
        }
    )

    def strict(text: str) -> object:
        return json.loads(text, parse_constant=lambda c: pytest.fail(f"bare {c} in {text}"))

    lines = b"".join(ndjson_stream(iter([batch]))).decode().splitlines()
    assert [strict(line) for line in lines] == [
        {"x": 1.5, "s": {"v": None}, "l": [None, 1.0], "m": [["a", None]]},
        {"x": None, "s": {"v": 2.0}, "l": [], "m": []},
        {"x": None, "s": {"v": None}, "l": None, "m": None},
        {"x": None, "s": {"v": None}, "l": [None], "m": [["b", 1.0]]},
        {"x": None, "s": {"v": 0.5}, "l": [2.5], "m": [["c", None]]},
    ]
