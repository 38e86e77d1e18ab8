"""The record of commits cut by ``vacate``: which ids were history, so that after cleanup has
reclaimed them a lookup can still tell "vacated" from "never existed".

Each vacate writes one immutable record, ``pools/<pool>/history/vacated-<ksuid>.ids``: the ids
(one a line) of the commits it cut that no earlier vacate had recorded. The record lands before
the journal entry that makes the vacate visible, so every id a committed vacate cut is in some
record; a record left by a vacate that died before its commit point names commits that are
still readable (lookups consult records only for ids whose commit object is gone).

Records are read only on that error path, and are small: 28 bytes per cut commit.
"""

from __future__ import annotations

from collections.abc import Iterable

from lake_core.clock import Clock
from lake_core.errors import ObjectNotFoundError
from lake_core.ids import new_id
from lake_core.layout import PoolLayout
from lake_core.stores.base import ObjectStore


def write_vacated(store: ObjectStore, pool_id: str, ids: Iterable[str], clock: Clock) -> None:
    """Record ``ids`` as cut by a vacate (nothing is written for none)."""
    body = "".join(f"{i}\n" for i in sorted(ids))
    if body:
        store.put_if_missing(PoolLayout(pool_id).vacated(new_id(clock)), body.encode("ascii"))


def read_vacated(store: ObjectStore, pool_id: str) -> set[str] | None:
    """Every commit id a vacate recorded as cut; None when no vacate wrote a record (lakes
    vacated before records existed)."""
    found: set[str] | None = None
    layout = PoolLayout(pool_id)
    for info in store.list(layout.vacated_prefix):
        if layout.parse_vacated(info.key) is None:
            continue
        try:
            data = store.get(info.key)
        except ObjectNotFoundError:
            continue
        found = found or set()
        found.update(line for line in data.decode("ascii", "replace").split() if line)
    return found
