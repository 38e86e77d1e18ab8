"""Assertions about a lake's integrity that several tests share."""

from __future__ import annotations

import pyarrow as pa

from lake_core.pool import Pool


def journal_numbers(pool: Pool) -> list[int]:
    prefix = f"pools/{pool.id}/branches/"
    nums = []
    for info in pool.store.list(prefix):
        name = info.key[len(prefix) :]
        if name.endswith(".json"):
            nums.append(int(name[: -len(".json")]))
    return sorted(nums)


def assert_journal_dense(pool: Pool) -> int:
    """Entries are exactly 1..HEAD, and HEAD (probed) is the last. Returns HEAD."""
    nums = journal_numbers(pool)
    head = pool.journal.read_head().n
    assert nums == list(range(1, head + 1)), (
        f"journal not dense: {nums[:5]}…{nums[-5:]} head={head}"
    )
    return head


def read_all(pool: Pool, ref: str | None = None) -> pa.Table:
    return pool.read(ref)


def assert_objects_intact(
    pool: Pool, ref: str | None = None, *, checked: set[str] | None = None
) -> None:
    """Every live object is readable and holds exactly the rows its metadata says.

    ``checked``: ids of objects already found intact, skipped and extended with the ones
    checked now — for a test that checks after every step of a run that only adds objects
    (data objects are immutable). Such a test ends with a full check (no ``checked``), which
    catches any object a later step damaged."""
    from lake_core.reader import open_object

    snap = pool.snapshot(pool.resolve(ref))
    for obj in snap.objects.values():
        if checked is not None and obj.id in checked:
            continue
        opened = open_object(pool.store, pool.layout.data(obj.id), obj.size)
        assert opened.metadata.num_rows == obj.count, obj.id
        assert pool.store.head(pool.layout.data(obj.id)).size == obj.size, obj.id
        if checked is not None:
            checked.add(obj.id)
