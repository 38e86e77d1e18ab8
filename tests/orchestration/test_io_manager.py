"""LakePoolIOManager: real assets materialized with ``dg.materialize`` on local and moto S3
lakes land as one commit per output (per partition for a partitioned pool), and inputs read
pool snapshots; rows are checked exactly."""


from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import dagster as dg
import pandas as pd
import pyarrow as pa
import pytest

from lake_core import Lake, LakeConfig
from lake_orchestration.io_manager import LakePoolIOManager
from lake_orchestration.resources import LakeResource
from tests.faultproxy import JOURNAL, FaultProxy, Rule, proxied


def ts(day: int, hour: int = 0) -> datetime:
    return datetime(2024, 1, day, hour, tzinfo=UTC)


def resources(lake_uri: str) -> dict[str, Any]:
    lake = LakeResource(uri=lake_uri, user="dagster")
    return {"lake": lake, "io_manager": LakePoolIOManager(lake=lake)}


def rows(lake_uri: str, pool: str, ref: str | None = None) -> list[dict[str, Any]]:
    table = Lake.open(LakeConfig(uri=lake_uri)).pool(pool).read(ref)
    return sorted(table.to_pylist(), key=lambda r: (str(r["ts"]), str(r.get("v"))))


def output_md(result: dg.ExecuteInProcessResult, name: str) -> dict[str, Any]:
    (event,) = [
        e
        for e in result.get_asset_materialization_events()
        if e.asset_key == dg.AssetKey(name.split("."))
    ]
    return {k: getattr(v, "value", v) for k, v in event.materialization.metadata.items()}


def test_tables_and_dataframes_land_as_one_commit_and_load_as_inputs(
    lake: Lake, lake_uri: str
) -> None:
    @dg.asset(key=["shop", "orders"], metadata={"lake/key": "ts:asc"})
    def orders() -> pa.Table:
        return pa.table({"ts": [ts(1), ts(2), ts(3)], "amount": [10, 20, 30]})

    @dg.asset(metadata={"lake/pool": "big_orders", "lake/key": "ts:asc"})
    def big(orders: pd.DataFrame) -> pd.DataFrame:
        assert isinstance(orders, pd.DataFrame)
        return orders[orders["amount"] >= 20].reset_index(drop=True)

    result = dg.materialize([orders, big], resources=resources(lake_uri))
    assert result.success
    pool = lake.pool("shop.orders")
    log = list(pool.log())
    assert len(log) == 1 and log[0].author == "dagster"
    md = output_md(result, "shop.orders")
    assert md["lake/commit"] == log[0].id == pool.tip()
    assert md["dagster/row_count"] == 3 and md["lake/rows_added"] == 3
    assert md["lake/objects"] == len(pool.snapshot(pool.tip()).objects)
    assert [r["amount"] for r in rows(lake_uri, "shop.orders")] == [10, 20, 30]
    assert [r["amount"] for r in rows(lake_uri, "big_orders")] == [20, 30]
    assert len(list(lake.pool("big_orders").log())) == 1
    # The input recorded which commit it read.
    (loaded,) = [e for e in result.all_events if e.event_type_value == "LOADED_INPUT"]
    read = loaded.event_specific_data.metadata  # type: ignore[union-attr]
    assert read["lake/commit"].value == log[0].id and read["dagster/row_count"].value == 3
    # Materializing again appends one more commit (an unpartitioned asset appends).
    again = dg.materialize([orders], resources=resources(lake_uri))
    assert output_md(again, "shop.orders")["dagster/row_count"] == 6
    assert len(list(pool.log())) == 2


def test_partitions_replace_pool_partitions_in_one_commit_each(
    lake: Lake, lake_uri: str
) -> None:
    days = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-05")
    version = {"v": "a"}

    @dg.asset(
        partitions_def=days,
        metadata={"lake/key": "ts:asc", "lake/partition_by": "day(ts)"},
    )
    def events(context: dg.AssetExecutionContext) -> pa.Table:
        day = int(context.partition_key[-2:])
        n = 2 if version["v"] == "a" else 3
        return pa.table(
            {"ts": [ts(day, h) for h in range(n)], "v": [version["v"]] * n}
        )

    @dg.asset(partitions_def=days, metadata={"lake/key": "ts:asc"})
    def counted(events: pa.Table) -> pa.Table:
        return pa.table({"ts": [events["ts"][0].as_py()], "n": [events.num_rows]})

    res = resources(lake_uri)
    for day in ("2024-01-01", "2024-01-02"):
        assert dg.materialize([events, counted], partition_key=day, resources=res).success
    pool = lake.pool("events")
    assert [p.value for p in pool.partitions()] == ["2024-01-01", "2024-01-02"]
    assert len(rows(lake_uri, "events")) == 4
    # The downstream input saw only its partition's rows.
    assert [r["n"] for r in rows(lake_uri, "counted")] == [2, 2]

    # Re-materializing day 1 with other rows replaces that partition in one commit.
    version["v"] = "b"
    tip = pool.tip()
    result = dg.materialize([events], partition_key="2024-01-01", resources=res)
    assert result.success
    md = output_md(result, "events")
    new = [c for c in pool.log() if c.id != tip and c.depth > pool.read_commit(tip).depth]
    assert len(new) == 1 and new[0].extra["kind"] == "partition-rewrite"
    assert md["lake/commit"] == new[0].id and md["dagster/row_count"] == 3
    got = [(r["ts"].day, r["v"]) for r in rows(lake_uri, "events")]
    assert got == [(1, "b"), (1, "b"), (1, "b"), (2, "a"), (2, "a")]


def test_rows_outside_the_partition_fail_and_commit_nothing(lake: Lake, lake_uri: str) -> None:
    days = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-05")

    @dg.asset(partitions_def=days, metadata={"lake/key": "ts:asc", "lake/partition_by": "day(ts)"})
    def misfiled() -> pa.Table:
        return pa.table({"ts": [ts(1), ts(3)]})

    result = dg.materialize(
        [misfiled], partition_key="2024-01-01", resources=resources(lake_uri), raise_on_error=False
    )
    assert not result.success
    assert lake.pool("misfiled").tip() is None


def test_static_partitions_on_an_unpartitioned_pool_append(lake: Lake, lake_uri: str) -> None:
    regions = dg.StaticPartitionsDefinition(["eu", "us"])

    @dg.asset(partitions_def=regions, metadata={"lake/key": "ts:asc"})
    def sales(context: dg.AssetExecutionContext) -> pd.DataFrame:
        day = 1 if context.partition_key == "eu" else 2
        return pd.DataFrame({"ts": [ts(day)], "region": [context.partition_key]})

    res = resources(lake_uri)
    for region in ("eu", "us", "eu"):
        assert dg.materialize([sales], partition_key=region, resources=res).success
    got = [r["region"] for r in rows(lake_uri, "sales")]
    assert got == ["eu", "eu", "us"]  # appended: the re-run of eu added its row again
    assert len(list(lake.pool("sales").log())) == 3


def test_an_input_can_be_pinned_to_a_commit(lake: Lake, lake_uri: str) -> None:
    pool = lake.create_pool("facts", "ts:asc")
    first = pool.load(pa.table({"ts": [ts(1)], "x": [1]}))
    pool.load(pa.table({"ts": [ts(2)], "x": [2]}))
    facts = dg.AssetSpec("facts")

    @dg.asset(
        ins={"facts": dg.AssetIn(metadata={"lake/commit": first.id})},
        metadata={"lake/key": "ts:asc"},
    )
    def pinned(facts: pa.Table) -> pa.Table:
        return facts

    @dg.asset(deps=[facts], metadata={"lake/key": "ts:asc"})
    def latest(context: dg.AssetExecutionContext) -> None:
        return None

    result = dg.materialize([pinned, latest, facts], resources=resources(lake_uri),
                            selection=[pinned])
    assert result.success
    assert [r["x"] for r in rows(lake_uri, "pinned")] == [1]


@pytest.mark.parametrize("bad", [{"a": 1}, "text"])
def test_other_outputs_are_refused(lake: Lake, lake_uri: str, bad: Any) -> None:
    @dg.asset
    def odd() -> Any:
        return bad

    result = dg.materialize([odd], resources=resources(lake_uri), raise_on_error=False)
    assert not result.success
    with pytest.raises(Exception, match="not found"):
        lake.pool("odd")


@pytest.fixture
def proxy(s3_endpoint: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    """The fault proxy in front of moto; every S3 client made during the test goes through it."""
    with proxied(s3_endpoint, monkeypatch, seed=7) as px:
        yield px


@pytest.mark.parametrize("partitioned", [False, True], ids=["append", "partition"])
def test_a_step_retried_after_an_unknown_commit_outcome_lands_its_rows_once(
    proxy: FaultProxy, s3_bucket: str, partitioned: bool
) -> None:
    """The commit lands but its answer is lost and the read-back fails: the step fails with
    CommitStateUnknownError and Dagster retries it in the same run. The output's transaction
    (run id, asset, partition) is recorded by the landed commit, so the retry commits nothing
    and reports the landed commit; a new run commits again."""
    uri = f"s3://{s3_bucket}/lake"
    lake = Lake.init(LakeConfig(uri=uri))
    days = dg.DailyPartitionsDefinition(start_date="2024-01-01", end_date="2024-01-05")
    meta: dict[str, Any] = {"lake/key": "ts:asc"}
    if partitioned:
        meta["lake/partition_by"] = "day(ts)"
    pool = lake.create_pool("orders", "ts:asc", partition_by=meta.get("lake/partition_by"))
    tries: list[int] = []

    @dg.asset(
        metadata=meta,
        partitions_def=days if partitioned else None,
        retry_policy=dg.RetryPolicy(max_retries=2),
    )
    def orders(context: dg.AssetExecutionContext) -> pa.Table:
        tries.append(context.retry_number)
        return pa.table({"ts": [ts(1), ts(1, 5)], "amount": [10, 20]})

    # The journal append lands, its answer is lost; every read-back of it fails (boto3's
    # retried PUT answers 412, then 3 tries of each read-back: as in tests/core/test_faults.py).
    lost = proxy.add(Rule("lost", method="PUT", key=JOURNAL))
    down = proxy.add(Rule("error", method="GET", key=JOURNAL, after=lost, times=11))
    kw: dict[str, Any] = {"partition_key": "2024-01-01"} if partitioned else {}
    result = dg.materialize([orders], resources=resources(uri), **kw)
    proxy.clear()
    assert lost.fired == 1 and down.fired == 11
    assert result.success and tries == [0, 1]
    failures = [e for e in result.all_events if e.event_type_value == "STEP_RESTARTED"]
    assert len(failures) == 1
    log = list(pool.log())
    assert len(log) == 1  # one commit: the retry found its transaction recorded
    assert [r["amount"] for r in rows(uri, "orders")] == [10, 20]
    assert output_md(result, "orders")["lake/commit"] == log[0].id
    (txn,) = log[0].extra["txn"]
    part = "2024-01-01" if partitioned else "-"
    assert txn == {"app": f"dagster:{result.run_id}:orders:{part}", "version": 0}
    # A new run materializes again: appends again, or replaces the partition again.
    again = dg.materialize([orders], resources=resources(uri), **kw)
    assert again.success and len(list(pool.log())) == 2
    got = [r["amount"] for r in rows(uri, "orders")]
    assert got == ([10, 20] if partitioned else [10, 10, 20, 20])


def test_polars_frames_land_and_polars_inputs_read(lake: Lake, lake_uri: str) -> None:
    import polars as pl

    @dg.asset(metadata={"lake/key": "ts:asc"})
    def readings() -> pl.DataFrame:
        return pl.DataFrame({"ts": [ts(1), ts(2), ts(3)], "v": [1, 2, 3]})

    @dg.asset(metadata={"lake/key": "ts:asc"})
    def high(readings: pl.DataFrame) -> pl.DataFrame:
        assert isinstance(readings, pl.DataFrame)
        return readings.filter(pl.col("v") >= 2)

    result = dg.materialize([readings, high], resources=resources(lake_uri))
    assert result.success
    assert [r["v"] for r in rows(lake_uri, "readings")] == [1, 2, 3]
    assert [r["v"] for r in rows(lake_uri, "high")] == [2, 3]
    assert output_md(result, "high")["dagster/row_count"] == 2
