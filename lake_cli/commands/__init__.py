"""The ``lake`` commands, one module per group of them: :mod:`.pool` (init, create, load,
query, log, branches, …), :mod:`.catalog` (``ls`` and ``lake catalog …``), :mod:`.inspect`
(schema, count, diff, verify), :mod:`.maintenance` (compact, retain, cleanup, vacate, purge,
partitions), :mod:`.view` (``lake view …``), :mod:`.index` (``lake index …``), :mod:`.derive` (``lake derive …``), :mod:`.serve` (``lake serve``) and :mod:`.spark` (the ``--spark`` paths of
load, compact and cleanup)."""

from __future__ import annotations

import click

from lake_cli.commands import catalog, derive, index, inspect, maintenance, pool, serve, view


def all_commands() -> list[click.Command]:
    """Every top-level command, in the order ``lake --help`` lists them (and a mistyped
    command's error names them)."""
    return [
        pool.init,
        pool.create,
        catalog.ls,
        pool.drop,
        pool.load,
        pool.upsert,
        pool.add,
        pool.status,
        pool.commit,
        pool.query,
        pool.objects,
        pool.log,
        pool.branch,
        pool.merge,
        pool.delete,
        pool.revert,
        maintenance.compact,
        maintenance.optimize,
        maintenance.dedupe,
        maintenance.retain,
        maintenance.cleanup,
        maintenance.vacate,
        maintenance.purge,
        maintenance.partitions,
        maintenance.drop_partition,
        inspect.schema,
        inspect.otree,
        inspect.count,
        inspect.diff,
        inspect.verify,
        catalog.catalog,
        view.view,
        index.index,
        derive.derive,
        derive.histogram,
        serve.serve,
    ]
