"""The schema work of a load is memoized per schema (``lake_core.ingest.memo``): a memo hit must
give exactly what the work itself gives, errors are never remembered, and different schemas
never share an answer."""

from __future__ import annotations

import threading

import pyarrow as pa
import pytest

from lake_core.errors import MalformedInputError, SchemaConflictError
from lake_core.ingest import conform_to, normalize_table, unify_schema
from lake_core.ingest.memo import MEMO_SIZE


def test_a_remembered_answer_is_the_answer_and_errors_are_not_remembered() -> None:
    pool = pa.schema([("a", pa.int64()), ("b", pa.string())])
    ints = pa.schema([("a", pa.int64()), ("c", pa.float64())])
    floats = pa.schema([("a", pa.float64())])
    for _ in range(3):
        assert unify_schema(pool, ints, "x").names == ["a", "b", "c"]
        for source in ("first.csv", "second.csv"):  # each error names its own input
            with pytest.raises(SchemaConflictError, match=source):
                unify_schema(pool, floats, source)
    # The same names with other types: another answer.
    assert unify_schema(None, floats, "y") == floats
    assert unify_schema(None, pa.schema([("a", pa.int64())]), "y").field("a").type == pa.int64()
    assert unify_schema(None, ints, "y") == ints


def test_normalize_and_conform_drop_metadata_and_nullability_as_before() -> None:
    table = pa.table(
        {"a": pa.array([1, 2], pa.int32()), "s": pa.array(["x", None], pa.large_string())}
    ).replace_schema_metadata({"pandas": "{}"})
    for _ in range(2):
        out = normalize_table(table, "t")
        assert out.schema == pa.schema([("a", pa.int64()), ("s", pa.string())])
        assert out.schema.metadata is None
        assert out.column("a").to_pylist() == [1, 2]
    strict = pa.table(
        {"a": pa.array([1], pa.int64())}, schema=pa.schema([pa.field("a", pa.int64(), False)])
    )
    normalized = normalize_table(strict, "t")
    assert normalized.schema.field("a").nullable
    # Already normalized, no metadata: the very table comes back.
    plain = pa.table({"a": pa.array([1], pa.int64())})
    assert normalize_table(plain, "t") is plain
    # conform_to (an input about to be written) casts into the pool's type and drops metadata.
    pool = pa.schema([("a", pa.float64())])
    with_meta = plain.replace_schema_metadata({"k": "v"})
    for t in (plain, with_meta, plain):
        fitted = conform_to(t, pool, exact=False)
        assert fitted.schema == pool and fitted.schema.metadata is None
        assert fitted.column("a").to_pylist() == [1.0]


def test_duplicate_columns_are_refused_every_time() -> None:
    dup = pa.Table.from_arrays([pa.array([1]), pa.array([2])], names=["a", "a"])
    for _ in range(2):
        with pytest.raises(MalformedInputError, match="duplicate column name"):
            normalize_table(dup, "dup.parquet")


def test_threads_with_many_schemas_get_their_own_answers() -> None:
    """More distinct schemas than the memo holds, from several threads at once."""
    schemas = [pa.schema([(f"c{i}", pa.int64())]) for i in range(MEMO_SIZE * 3)]
    base = pa.schema([("k", pa.string())])
    errors: list[BaseException] = []

    def work(offset: int) -> None:
        try:
            for n in range(300):
                s = schemas[(n + offset) % len(schemas)]
                assert unify_schema(base, s, "in").names == ["k", s.names[0]]
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i * 5,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
