"""Schema modes (``merge`` default, ``strict``) and loads in which no row has the pool key:
CLI and Python API, both stores."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import pyarrow as pa
import pytest

from lake_cli import main
from lake_core import Lake, LakeConfig
from lake_core.catalog.btree_keys import TABLE, ObjectRef
from lake_core.catalog.pools import pool_config_of, table_def_of
from lake_core.errors import (
    MissingKeyError,
    MissingKeyWarning,
    SchemaModeError,
    UsageError,
)
from lake_core.loading import commit_staged, load, stage
from lake_core.names import PoolName
from lake_core.registry import PoolConfig


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out, err = capsys.readouterr()
    return code, out, err


def write(path: Path, rows: list[dict[str, object]]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def data_files(lake: Lake, pool: str) -> set[str]:
    p = lake.pool(pool)
    return {i.key for i in lake.store.list(f"pools/{p.id}/data/")}


def test_strict_refuses_new_columns_and_changes_nothing(
    lake_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    L = ["--lake", lake_uri]
    run(capsys, *L, "init")
    code, out, _ = run(capsys, *L, "create", "s", "--orderby", "id:asc", "--schema-mode", "strict")
    assert (code, out) == (0, "pool s created\n")
    code, out, _ = run(capsys, *L, "ls", "-f", "json")
    assert json.loads(out)["schema_mode"] == "strict"
    # The first load into the empty pool defines the schema.
    code, out, err = run(
        capsys, *L, "load", "-p", "s", write(tmp_path / "a.ndjson", [{"id": 1, "a": "x"}])
    )
    assert code == 0 and err == ""
    lake = Lake.open(LakeConfig(uri=lake_uri))
    tip, files = lake.pool("s").tip(), data_files(lake, "s")
    bad = write(tmp_path / "b.ndjson", [{"id": 2, "a": "y", "zz": 1, "b": True}])
    code, out, err = run(capsys, *L, "load", "-p", "s", bad)
    assert code == 1 and out == "" and err.count("\n") == 1
    assert (
        err.startswith("error: schema mode strict") and "columns zz, b" in err and "b.ndjson" in err
    )
    assert lake.pool("s").tip() == tip and data_files(lake, "s") == files  # nothing written
    # Fewer columns are fine under strict (missing ones are null).
    code, out, err = run(capsys, *L, "load", "-p", "s", write(tmp_path / "c.ndjson", [{"id": 3}]))
    assert code == 0 and err == ""
    # merge (the default) unions new columns in.
    run(capsys, *L, "create", "m", "--orderby", "id:asc")
    code, out, _ = run(capsys, *L, "ls", "-f", "json")
    assert [json.loads(x)["schema_mode"] for x in out.splitlines()] == ["merge", "strict"]
    run(capsys, *L, "load", "-p", "m", write(tmp_path / "d.ndjson", [{"id": 1}]))
    assert run(capsys, *L, "load", "-p", "m", bad)[0] == 0
    assert set(lake.pool("m").snapshot(lake.pool("m").tip()).schema.names) == {"id", "a", "zz", "b"}
    with pytest.raises(SystemExit) as exit_:
        main([*L, "create", "x", "--schema-mode", "loose"])
    assert exit_.value.code == 2 and capsys.readouterr().err.startswith("error: ")


def test_missing_key_warns_and_strict_refuses(
    lake_uri: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    L = ["--lake", lake_uri]
    run(capsys, *L, "init")
    run(capsys, *L, "create", "flights", "--orderby", "time_hour:asc")
    lineitem = write(tmp_path / "lineitem.ndjson", [{"l_orderkey": i} for i in range(3)])
    code, out, err = run(capsys, *L, "load", "-p", "flights", lineitem)
    assert code == 0 and out.splitlines()[-1].endswith(" committed")
    assert err == (
        f"warning: no row of {lineitem} has the pool key time_hour of pool flights: its rows "
        "are stored with a null key\n"
    )
    # Some rows with the key: no warning.
    mixed = write(tmp_path / "m.ndjson", [{"time_hour": 5}, {"other": 1}])
    assert run(capsys, *L, "load", "-p", "flights", mixed)[2] == ""
    run(capsys, *L, "create", "strictf", "--orderby", "time_hour:asc", "--schema-mode", "strict")
    lake = Lake.open(LakeConfig(uri=lake_uri))
    code, out, err = run(capsys, *L, "load", "-p", "strictf", lineitem)
    assert code == 1 and out == "" and err.count("\n") == 1
    assert err.startswith("error: no row of") and "pool key time_hour" in err
    assert lake.pool("strictf").tip() is None and data_files(lake, "strictf") == set()
    # A key column that is present but null in every row counts as missing.
    nulls = write(tmp_path / "n.ndjson", [{"time_hour": None, "x": 1}])
    assert run(capsys, *L, "load", "-p", "strictf", nulls)[0] == 1


def test_python_api(lake_uri: str) -> None:
    lake = Lake.init(LakeConfig(uri=lake_uri))
    strict = lake.create_pool("s", "ts:asc", schema_mode="strict")
    assert lake.pool("s").config.schema_mode == "strict"
    load(strict, [pa.table({"ts": [1], "a": [1]})])
    with pytest.raises(SchemaModeError) as e:
        load(strict, [pa.table({"ts": [2], "b": [1]})])
    assert e.value.columns == ["b"]
    with pytest.raises(SchemaModeError):
        stage(strict, [pa.table({"ts": [2], "b": [1]})])  # lake add too
    with pytest.raises(MissingKeyError):
        load(strict, [pa.table({"a": [1]})])
    merge = lake.create_pool("m", "ts:asc")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        load(merge, [pa.table({"a": [1]})])
    assert [type(w.message) for w in caught] == [MissingKeyWarning]
    assert "pool key ts" in str(caught[0].message)
    with pytest.raises(UsageError):
        lake.create_pool("bad", schema_mode="loose")


def test_old_pool_definitions_read_as_merge() -> None:
    ref = ObjectRef(TABLE, "default", "p")
    config = PoolConfig(id="0" * 27, name=PoolName("default", "p"))
    definition = table_def_of(config)
    assert "schema_mode" not in definition.properties  # the default leaves old bytes alone
    assert pool_config_of(ref, definition).schema_mode == "merge"
    strict = PoolConfig(id="0" * 27, name=PoolName("default", "p"), schema_mode="strict")
    assert pool_config_of(ref, table_def_of(strict)).schema_mode == "strict"
    old_json = {k: v for k, v in config.to_json().items() if k != "schema_mode"}
    assert PoolConfig.from_json(old_json).schema_mode == "merge"


def test_racing_first_loads_into_a_strict_pool_cannot_union(lake_uri: str) -> None:
    """Both loads pass the early check against the empty pool; the commit point re-checks
    against the tip it lands on, so the second is refused."""
    lake = Lake.init(LakeConfig(uri=lake_uri))
    pool = lake.create_pool("s", "ts:asc", schema_mode="strict")
    first = stage(pool, [pa.table({"ts": [1], "a": [1]})])
    second = stage(pool, [pa.table({"ts": [2], "b": [1]})])
    commit_staged(pool, [first.id])
    with pytest.raises(SchemaModeError):
        commit_staged(pool, [second.id])
    assert pool.snapshot(pool.tip()).schema.names == ["ts", "a"]
