"""Upsert pools in Dagster (``mode: upsert`` in pools.yaml): the config's rules, a change feed
landed and materialized through the landing sensor's run request, exact rows and the counts in
the materialization, an idempotent re-run, and upserts made outside Dagster as observations."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import dagster as dg
import pyarrow as pa
import pytest

from lake_core import Lake, LakeConfig
from lake_core.errors import TxnCommittedError
from lake_orchestration.config import PoolsConfig, parse_pools_config
from lake_orchestration.definitions import build_definitions, lake_resource_from_env
from lake_orchestration.engine import upsert_sources
from lake_orchestration.resources import LakeResource
from tests import processes
from tests.workers_dagster import ingest_run

POOLS_YAML = """
pools:
  - name: customers
    key: [id]
    order: asc
    landing: landing/customers
    formats: [ndjson]
    mode: upsert
    delete_when: "op = 'd'"
"""


def ndjson(rows: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in rows)


def materialization(result: Any) -> dict[str, Any]:
    (event,) = result.get_asset_materialization_events()
    return dict(event.materialization.metadata)


def values(md: dict[str, Any], *names: str) -> tuple[Any, ...]:
    return tuple(md[f"lake/{n}"].value for n in names)


class Env:
    def __init__(self, base: Path, yaml_text: str = POOLS_YAML) -> None:
        self.lake_uri = str(base / "lake")
        self.lake = Lake.init(LakeConfig(uri=self.lake_uri, user="tester"))
        self.config: PoolsConfig = parse_pools_config(yaml_text, base, env={})
        self.resource = LakeResource(uri=self.lake_uri)
        self.defs = build_definitions(self.config, self.resource)
        self.landing = Path(self.config.pool("customers").landing or "")
        self.landing.mkdir(parents=True)

    def drop(self, name: str, rows: list[dict[str, Any]]) -> None:
        (self.landing / name).write_text(ndjson(rows))

    def rows(self) -> list[dict[str, Any]]:
        return self.lake.pool("customers").read().to_pylist()  # type: ignore[no-any-return]

    def sensor_requests(self, cursor: str | None) -> tuple[list[dg.RunRequest], str | None]:
        sensor = self.defs.resolve_sensor_def("customers_landing")
        with dg.build_sensor_context(
            cursor=cursor, resources={"lake": self.resource}, definitions=self.defs
        ) as ctx:
            result = sensor(ctx)
        assert isinstance(result, dg.SensorResult)
        return list(result.run_requests or []), result.cursor


@pytest.fixture
def env(tmp_path: Path) -> Env:
    return Env(tmp_path)


@pytest.fixture(scope="module")
def instance() -> Iterator[dg.DagsterInstance]:
    with dg.instance_for_test() as inst:
        yield inst


# -- the config -------------------------------------------------------------------------------


def test_mode_and_delete_when_are_validated(tmp_path: Path) -> None:
    def parse(entry: str) -> PoolsConfig:
        return parse_pools_config(f"pools: [{{name: p, {entry}}}]", tmp_path, env={})

    assert parse("key: [id]").pools[0].mode == "load"  # the default: append
    spec = parse("mode: upsert, delete_when: \"op = 'd'\"").pools[0]
    assert (spec.mode, spec.delete_when) == ("upsert", "op = 'd'")
    assert parse("mode: upsert").pools[0].delete_when is None
    with pytest.raises(ValueError, match="delete_when applies only with mode: upsert"):
        parse("delete_when: \"op = 'd'\"")
    with pytest.raises(ValueError, match="delete_when applies only with mode: upsert"):
        parse("mode: load, delete_when: \"op = 'd'\"")
    with pytest.raises(ValueError, match="delete_when 'op = ' is not a valid predicate"):
        parse("mode: upsert, delete_when: 'op = '")
    with pytest.raises(ValueError, match="mode"):
        parse("mode: merge")
    with pytest.raises(ValueError, match="upsert does not apply to a day-partitioned pool"):
        parse("mode: upsert, partition_by: 'day(ts)', partitions: {start: 2024-01-01}")


# -- materializing a change feed --------------------------------------------------------------


def test_sensor_run_upserts_a_change_feed_with_exact_rows_and_counts(
    env: Env, instance: dg.DagsterInstance
) -> None:
    env.drop("1-snapshot.ndjson", [{"id": i, "name": f"c{i}", "op": "c"} for i in range(1, 6)])
    requests, cursor = env.sensor_requests(None)
    assert not requests  # first look: the file may still be growing
    (request,), cursor = env.sensor_requests(cursor)
    job = env.defs.resolve_job_def("ingest_customers")
    first = job.execute_in_process(instance=instance, run_config=request.run_config)
    assert first.success
    md = materialization(first)
    assert values(md, "inserted", "updated", "deleted") == (5, 0, 0)
    assert md["dagster/row_count"].value == 5
    # Created unique: a `lake load` into it from outside upserts as well.
    assert env.lake.pool("customers").config.unique
    # New keys only: an object of their own, no live object read.
    env.drop("1b-more.ndjson", [{"id": i, "name": f"c{i}", "op": "c"} for i in (100, 101)])
    more = job.execute_in_process(
        instance=instance,
        run_config={"ops": {"customers": {"config": {"files": ["1b-more.ndjson"]}}}},
    )
    md = materialization(more)
    assert values(md, "inserted", "objects_read", "objects_skipped") == (2, 0, 1)

    # A change feed: updates (the last row of a key wins), deletes (one of an absent key),
    # an insert, and a row without the key (never matches: inserted).
    env.drop(
        "2-changes.ndjson",
        [
            {"id": 2, "name": "two", "op": "u"},
            {"id": 3, "op": "d"},
            {"id": 4, "name": "four?", "op": "u"},
            {"id": 6, "name": "c6", "op": "c"},
            {"id": 99, "op": "d"},
            {"id": 4, "name": "four", "op": "u"},
            {"name": "keyless", "op": "c"},
        ],
    )
    requests, cursor = env.sensor_requests(cursor)
    assert not requests
    (request,), cursor = env.sensor_requests(cursor)
    # 1b-more.ndjson was ingested by a run the sensor did not request: its transaction says so.
    assert request.run_config["ops"]["customers"]["config"]["files"] == [
        "1b-more.ndjson",
        "2-changes.ndjson",
    ]
    second = job.execute_in_process(instance=instance, run_config=request.run_config)
    assert second.success
    md = materialization(second)
    assert values(md, "inserted", "updated", "deleted") == (2, 2, 1)
    # Only the object whose key range holds an incoming key is read and rewritten.
    assert values(md, "objects_read", "objects_skipped") == (1, 1)
    assert md["lake/bytes_rewritten"].value > 0 and md["lake/bytes_written"].value > 0
    expected = [
        {"id": 1, "name": "c1", "op": "c"},
        {"id": 2, "name": "two", "op": "u"},
        {"id": 4, "name": "four", "op": "u"},
        {"id": 5, "name": "c5", "op": "c"},
        {"id": 6, "name": "c6", "op": "c"},
        {"id": 100, "name": "c100", "op": "c"},
        {"id": 101, "name": "c101", "op": "c"},
        {"id": None, "name": "keyless", "op": "c"},  # null keys sort last
    ]
    assert env.rows() == expected
    assert md["dagster/row_count"].value == len(expected)
    pool = env.lake.pool("customers")
    commit = pool.read_commit(pool.tip())
    assert md["lake/commit"].value == commit.id
    assert commit.extra["upsert"] == {"inserted": 2, "updated": 2, "deleted": 1}
    assert commit.author == "dagster" and commit.message.startswith("upserted 1 landing files")
    # rows_removed counts every row of the objects the upsert rewrote, as for a delete.
    assert md["lake/rows_removed"].value == commit.rows_removed
    assert md["lake/rows_added"].value - md["lake/rows_removed"].value == 1  # +2 new, -1 gone

    # The same file again (a retried or manual run naming it): nothing is committed, though
    # applying it twice would insert the keyless row twice.
    tip = pool.tip()
    again = job.execute_in_process(instance=instance, run_config=request.run_config)
    assert again.success
    md = materialization(again)
    assert md["lake/files"].value == 0 and "lake/inserted" not in md
    assert pool.tip() == tip and env.rows() == expected


def test_the_upsert_commit_lands_the_files_transactions(env: Env) -> None:
    """The guard that holds under any race: the upsert's commit carries each file's
    transaction, so an upsert of a file already in commits nothing."""
    env.drop("a.ndjson", [{"id": 1, "name": "a", "op": "c"}, {"id": 2, "name": "b", "op": "c"}])
    job = env.defs.resolve_job_def("ingest_customers")
    assert job.execute_in_process().success
    spec = env.config.pool("customers")
    zone = env.resource.landing(spec)
    pool = env.resource.pool(spec)
    assert zone is not None and pool is not None
    tip = pool.tip()
    assert pool.read_commit(tip).extra["txn"] == [{"app": zone.txn("a.ndjson").app, "version": 0}]
    with pytest.raises(TxnCommittedError):
        upsert_sources(
            env.resource,
            pool,
            [zone.source("a.ndjson")],
            branch="main",
            delete_when=spec.delete_when,
            message="again",
            meta=None,
            txn=[zone.txn("a.ndjson")],
        )
    assert pool.tip() == tip and len(env.rows()) == 2


def test_upserts_made_outside_dagster_are_observed_with_their_counts(
    env: Env, instance: dg.DagsterInstance
) -> None:
    pool = env.lake.create_pool("customers", "id:asc")
    pool.load(pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"]}), author="alice")
    pool.upsert(
        [pa.table({"id": [2, 3, 4], "name": ["B", None, "d"], "op": ["u", "d", "c"]})],
        delete_when="op = 'd'",
        author="alice",
    )
    sensor = env.defs.resolve_sensor_def("lake_commit_observer")
    with dg.build_sensor_context(
        instance=instance, resources={"lake": env.resource}, definitions=env.defs
    ) as ctx:
        result = sensor(ctx)
    assert isinstance(result, dg.SensorResult)
    load_obs, upsert_obs = result.asset_events
    assert isinstance(upsert_obs, dg.AssetObservation)
    assert "lake/inserted" not in load_obs.metadata  # a load is no upsert
    assert values(upsert_obs.metadata, "inserted", "updated", "deleted") == (1, 1, 1)
    assert upsert_obs.metadata["dagster/row_count"].value == 3


def test_s3_lake_and_landing_upsert(
    tmp_path: Path, s3_bucket: str, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
) -> None:
    uri = f"s3://{s3_bucket}/lake"
    monkeypatch.setenv("LAKE_ROOT", uri)  # the resource reads it at run time, as deployed
    Lake.init(uri)
    yaml_text = (
        f"pools:\n  - {{name: cdc, key: [id], order: asc, landing: 's3://{s3_bucket}/in',"
        " mode: upsert, delete_when: \"op = 'd'\"}\n"
    )
    defs = build_definitions(
        parse_pools_config(yaml_text, tmp_path, env={}),
        lake_resource_from_env({**os.environ, "LAKE_ROOT": uri}),
    )
    s3 = boto3.client("s3")
    s3.put_object(
        Bucket=s3_bucket, Key="in/1.ndjson", Body=ndjson([{"id": i, "op": "c"} for i in range(4)])
    )
    job = defs.resolve_job_def("ingest_cdc")
    assert job.execute_in_process(instance=instance).success
    s3.put_object(
        Bucket=s3_bucket,
        Key="in/2.ndjson",
        Body=ndjson([{"id": 0, "op": "d"}, {"id": 2, "op": "u"}, {"id": 7, "op": "c"}]),
    )
    result = job.execute_in_process(instance=instance)
    assert result.success
    assert values(materialization(result), "inserted", "updated", "deleted") == (1, 1, 1)
    rows = Lake.open(uri).pool("cdc").read().to_pylist()
    assert rows == [
        {"id": 1, "op": "c"},
        {"id": 2, "op": "u"},
        {"id": 3, "op": "c"},
        {"id": 7, "op": "c"},
    ]


def test_a_file_that_changes_nothing_still_records_its_transaction(env: Env) -> None:
    """Deletes of keys that are not live change no row, but the commit (without actions)
    records the file's transaction: a later run never takes it again, where it would delete
    keys a newer file inserted meanwhile (tests/core/test_upsert_review.py)."""
    env.drop("1.ndjson", [{"id": 1, "name": "a", "op": "c"}])
    job = env.defs.resolve_job_def("ingest_customers")
    assert job.execute_in_process().success
    tip = env.lake.pool("customers").tip()
    env.drop("2.ndjson", [{"id": 7, "op": "d"}, {"id": 8, "op": "d"}])
    result = job.execute_in_process()
    assert result.success
    md = materialization(result)
    assert md["lake/files"].value == 1
    assert values(md, "inserted", "updated", "deleted") == (0, 0, 0)
    pool = env.lake.pool("customers")
    assert pool.tip() != tip
    assert pool.read_commit(pool.tip()).actions == ()
    assert env.rows() == [{"id": 1, "name": "a", "op": "c"}]
    spec = env.config.pool("customers")
    zone = env.resource.landing(spec)
    assert zone is not None
    assert zone.pending(pool, ["1.ndjson", "2.ndjson"]) == []


@pytest.mark.slow  # three processes start Dagster: about 25 s on 2 busy cores
def test_racing_runs_upsert_each_change_file_once(env: Env, tmp_path: Path) -> None:
    """Three processes run the ingest job at once over overlapping windows of change files
    (each file named by one to three runs): every file lands in exactly one commit, and the
    rows are exact — each file's keyless row is there once, which a second application of the
    file would double."""
    env.drop("0-base.ndjson", [{"id": i, "name": f"c{i}", "op": "c"} for i in range(30)])
    assert env.defs.resolve_job_def("ingest_customers").execute_in_process().success
    names = [f"{i}-changes.ndjson" for i in range(1, 6)]
    for i, name in enumerate(names, start=1):
        env.drop(
            name,
            [{"id": 5 * i + j, "name": f"u{i}", "op": "u"} for j in range(3)]
            + [{"id": 5 * i + 3, "op": "d"}, {"id": 100 + i, "name": f"n{i}", "op": "c"}]
            + [{"name": f"k{i}", "op": "c"}],
        )
    workers = 3
    ctx = processes.context()
    start = ctx.Barrier(workers)
    out = ctx.Queue()
    procs = [
        ctx.Process(
            target=ingest_run,
            args=(
                env.lake_uri,
                POOLS_YAML,
                str(tmp_path),
                "customers",
                names[w : w + 3],
                start,
                out,
            ),
        )
        for w in range(workers)
    ]
    for p in procs:
        p.start()
    results = [out.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert all(ok for ok, _ in results)
    assert sum(n for _, n in results) == len(names)  # each file committed by one run
    pool = Lake.open(env.lake_uri).pool("customers")
    apps = [t["app"] for c in pool.log() for t in c.extra.get("txn", [])]
    assert sorted(apps) == sorted(set(apps)) and len(apps) == len(names) + 1
    expected: dict[Any, dict[str, Any]] = {
        i: {"id": i, "name": f"c{i}", "op": "c"} for i in range(30)
    }
    for i in range(1, 6):
        expected.update(
            {5 * i + j: {"id": 5 * i + j, "name": f"u{i}", "op": "u"} for j in range(3)}
        )
        del expected[5 * i + 3]
        expected[100 + i] = {"id": 100 + i, "name": f"n{i}", "op": "c"}
    keyless = [r for r in env.rows() if r["id"] is None]
    assert sorted(r["name"] for r in keyless) == [f"k{i}" for i in range(1, 6)]
    assert [r for r in env.rows() if r["id"] is not None] == [expected[k] for k in sorted(expected)]
