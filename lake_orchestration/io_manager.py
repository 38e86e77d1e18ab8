"""``LakePoolIOManager``: assets that return tables land in lake pools, and inputs read them.

An asset returning a pyarrow ``Table``, a pandas ``DataFrame`` or a Polars ``DataFrame`` (or
anything with a ``to_arrow()`` method) is written as ONE commit on the asset's pool::

    @dg.asset(metadata={"lake/key": "ts:asc", "lake/partition_by": "day(ts)"},
              partitions_def=dg.DailyPartitionsDefinition("2024-01-01"))
    def events(context) -> pa.Table: ...

    dg.Definitions(assets=[events], resources={"io_manager": LakePoolIOManager(lake=lake)})

Rules (docs/orchestration.md, "Assets that return tables"):

- The pool is the asset definition's ``lake/pool`` metadata, else the asset key joined with
  ``.`` (``["sales", "orders"]`` is pool ``sales.orders``). It is created on first write with
  ``lake/key`` (default ``ts:desc``) and ``lake/partition_by`` (optional) from the same
  metadata; an existing pool is used as it is.
- Unpartitioned asset: the table is appended in one commit (``pool.load``).
- Partitioned asset on a partitioned pool: each partition key of the run names a pool
  partition (a day ``2024-01-05`` of ``day(ts)``, a value of an identity partitioning), and
  its rows REPLACE that pool partition in one commit (``pool.rewrite_partition``, under the
  pool's maintenance lock), so re-materializing gives the same rows. Rows outside the run's
  partitions fail the run before anything is written. A range run (single-run backfill)
  makes one commit per partition.
- Partitioned asset on an unpartitioned pool: the pool cannot replace a slice atomically, so
  the rows are APPENDED in one commit (re-materializing appends again).
- Each commit is an application transaction (:mod:`lake_core.txn`): app id
  ``dagster:<run id>:<asset key>:<partition key, a range first..last, or ->``, version 0.
  A step retried within its run (a RetryPolicy after CommitStateUnknownError whose commit
  landed after all) finds it recorded and commits nothing again: it reports the landed
  commit. A new run (a re-materialization, a re-execution) has a new run id, so it appends or
  replaces again, as it must. Why not one app id per asset with a growing version: versions
  must rise in commit order, and two runs of one asset may commit in either order. The
  records expire with the pool's ``txn_retention`` (30 days by default), which bounds them.
- Inputs read the upstream pool at one commit — the input's ``lake/commit`` metadata when
  given (a pin), else the branch tip when the step starts — recorded as the input's
  ``lake/commit`` metadata; a partitioned input on a partitioned pool gets only its
  partitions' rows. The input's type annotation picks pandas or Polars; otherwise a pyarrow
  Table.
- Materialization metadata is what the pool assets report (``lake/commit``,
  ``dagster/row_count``, ``lake/objects``, bytes, key range, schema, rows added/removed).
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

import dagster as dg
import pyarrow as pa

from lake_core.commit import Commit
from lake_core.errors import EmptyTransactionError, PoolNotFoundError, TxnCommittedError
from lake_core.names import PoolName
from lake_core.pool import Pool
from lake_core.txn import Txn, commit_txns
from lake_orchestration.metadata import pool_metadata
from lake_orchestration.resources import LakeResource

POOL_META = "lake/pool"
KEY_META = "lake/key"
PARTITION_BY_META = "lake/partition_by"
COMMIT_META = "lake/commit"
DEFAULT_KEY = "ts:desc"


def to_arrow(obj: Any) -> pa.Table:
    """A pyarrow Table, pandas DataFrame (index dropped) or object with ``to_arrow()``
    (Polars) as an Arrow table."""
    if isinstance(obj, pa.Table):
        return obj
    if isinstance(obj, pa.RecordBatch):
        return pa.Table.from_batches([obj])
    # pandas comes with dagster; imported by name because it ships no type stubs.
    pd: Any = importlib.import_module("pandas")
    if isinstance(obj, pd.DataFrame):
        return pa.Table.from_pandas(obj, preserve_index=False)
    to = getattr(obj, "to_arrow", None)
    if callable(to):
        table = to()
        if isinstance(table, pa.Table):
            return table
    raise dg.DagsterInvariantViolationError(
        f"LakePoolIOManager stores pyarrow Tables and pandas/Polars DataFrames, "
        f"not {type(obj).__name__}"
    )


def pool_name(asset_key: dg.AssetKey, metadata: Mapping[str, Any]) -> str:
    """The pool of an asset: its ``lake/pool`` metadata, else its key joined with ``.``."""
    named = metadata.get(POOL_META)
    name = str(getattr(named, "value", named)) if named else ".".join(asset_key.path)
    try:
        PoolName.parse(name)
    except ValueError as e:
        raise dg.DagsterInvalidDefinitionError(
            f"asset {asset_key.to_user_string()} names no valid pool ({e}): set metadata "
            f"{POOL_META!r} to NAME or NAMESPACE.NAME"
        ) from None
    return name


#: How far back in the branch's log a retried step looks for the commit its transaction
#: names (the earlier attempt of the same run: normally the last few commits).
LANDED_LOOKBACK = 1000


def output_txn(run_id: str, asset_key: dg.AssetKey, partitions: list[str] | None) -> Txn:
    """The application transaction of one output commit: unique to the run, the asset and
    the partition(s), so retries within the run commit it once and every new run again."""
    if not partitions:
        part = "-"
    elif len(partitions) == 1:
        part = partitions[0]
    else:
        part = f"{partitions[0]}..{partitions[-1]}"  # a range run's keys are contiguous
    return Txn(f"dagster:{run_id}:{asset_key.to_user_string()}:{part}", 0)


def landed_commit(pool: Pool, branch: str, txn: Txn) -> Commit | None:
    """The commit on ``branch`` that recorded ``txn`` (None: not in the last
    LANDED_LOOKBACK commits)."""
    for i, c in enumerate(pool.log(branch)):
        if txn in commit_txns(c.extra):
            return c
        if i >= LANDED_LOOKBACK:
            break
    return None


def _text(metadata: Mapping[str, Any], key: str) -> str | None:
    value = metadata.get(key)
    value = getattr(value, "value", value)
    return str(value) if value else None


class LakePoolIOManager(dg.ConfigurableIOManager):
    """Stores asset outputs as commits on lake pools and loads inputs from pool snapshots."""

    lake: LakeResource
    #: The branch outputs commit to and inputs read.
    branch: str = "main"

    # -- pools --------------------------------------------------------------------------------

    def _pool(self, key: dg.AssetKey, metadata: Mapping[str, Any], create: bool) -> Pool | None:
        lake = self.lake.open()
        name = pool_name(key, metadata)
        try:
            return lake.pool(name)
        except PoolNotFoundError:
            if not create:
                return None
        from lake_core.errors import AlreadyExistsError

        try:
            return lake.create_pool(
                name,
                _text(metadata, KEY_META) or DEFAULT_KEY,
                partition_by=_text(metadata, PARTITION_BY_META),
            )
        except AlreadyExistsError:  # a concurrent step created it first
            return lake.pool(name)

    # -- outputs ------------------------------------------------------------------------------

    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        if obj is None:
            return  # the asset wrote nothing (for example, it returned MaterializeResult)
        table = to_arrow(obj)
        key = context.asset_key
        pool = self._pool(key, context.definition_metadata or {}, create=True)
        assert pool is not None
        what = key.to_user_string()
        meta: dict[str, Any] = {"dagster": {"run_id": context.run_id, "asset": what}}
        author = self.lake.user
        commits: list[Commit] = []
        partitions: list[str] | None = None
        if context.has_asset_partitions:
            partitions = list(context.asset_partition_keys)
            meta["dagster"]["partitions"] = partitions
        spec = pool.partition_spec
        if partitions is not None and spec is not None:
            groups = dict(spec.split(table)) if table.num_rows else {}
            stray = sorted(set(groups) - set(partitions))
            if stray:
                raise dg.Failure(
                    f"asset {what} partition(s) {', '.join(partitions[:3])}: the output has "
                    f"rows of pool partition {stray[0]}; nothing was committed"
                )
            for value in partitions:
                part = groups.get(value)
                txn = output_txn(context.run_id, key, [value])
                try:
                    commits.append(
                        pool.rewrite_partition(
                            value,
                            [part] if part is not None else [],
                            self.branch,
                            author=author,
                            meta=meta,
                            message=f"{what}: partition {value} (dagster run {context.run_id[:8]})",
                            txn=txn,
                        )
                    )
                except EmptyTransactionError:
                    context.log.info(f"partition {value}: no rows, none before: nothing to commit")
                except TxnCommittedError:
                    commits.extend(self._already(context, pool, txn))
        elif table.num_rows:
            suffix = f" partitions {', '.join(partitions)}" if partitions else ""
            txn = output_txn(context.run_id, key, partitions)
            try:
                commits.append(
                    pool.load(
                        table,
                        self.branch,
                        author=author,
                        meta=meta,
                        message=f"{what}{suffix} (dagster run {context.run_id[:8]})",
                        txn=txn,
                    )
                )
            except TxnCommittedError:
                commits.extend(self._already(context, pool, txn))
        else:
            context.log.info(f"{what}: the output has no rows: nothing to commit")
        last = commits[-1] if commits else None
        md = pool_metadata(
            pool,
            self.branch,
            last,
            partitions=partitions if spec is not None else None,
            changes=commits,
        )
        md["lake/commits"] = dg.MetadataValue.json([c.id for c in commits])
        context.add_output_metadata(md)
        for c in commits:
            context.log.info(f"{c.id} committed to {pool.name}@{self.branch}")

    def _already(self, context: dg.OutputContext, pool: Pool, txn: Txn) -> list[Commit]:
        """An earlier attempt of this step in this run committed ``txn`` (its answer was lost):
        nothing more is committed; the landed commit is reported."""
        landed = landed_commit(pool, self.branch, txn)
        context.log.info(
            f"{txn.app} was committed by an earlier attempt of this run"
            + (f" ({landed.id}): not committed again" if landed else ": not committed again")
        )
        return [landed] if landed is not None else []

    # -- inputs -------------------------------------------------------------------------------

    def load_input(self, context: dg.InputContext) -> Any:
        upstream = context.upstream_output
        key = context.asset_key
        definition = (upstream.definition_metadata if upstream is not None else None) or {}
        pool = self._pool(key, definition, create=False)
        if pool is None:
            raise dg.Failure(f"pool {pool_name(key, definition)} does not exist yet")
        pinned = _text(context.definition_metadata or {}, COMMIT_META)
        ref = pinned or pool.tip(self.branch)
        table = pool.read(ref) if ref is not None else pa.table({})
        spec = pool.partition_spec
        if context.has_asset_partitions and spec is not None and table.num_rows:
            wanted = set(context.asset_partition_keys)
            parts = [t for v, t in spec.split(table) if v in wanted]
            schema = table.schema
            table = pa.concat_tables(parts) if parts else schema.empty_table()
        context.add_input_metadata(
            {COMMIT_META: ref or "", "dagster/row_count": table.num_rows, POOL_META: pool.name}
        )
        typ = getattr(context.dagster_type, "typing_type", None)
        if getattr(typ, "__module__", "").startswith("pandas"):
            return table.to_pandas()
        if getattr(typ, "__module__", "").startswith("polars"):
            import polars as pl

            return pl.from_arrow(table)
        return table
