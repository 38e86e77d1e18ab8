"""The row-level meaning of an upsert, in plain Python: what the race, fault and property tests
replay acknowledged operations through, knowing nothing of objects, layout or commits.

Rows are any hashable values; ``key`` gives a row's pool key (``None``: a null key) and
``is_delete`` whether an incoming row is a ``--delete-when`` row. The rules (issue 14):
- of the incoming rows with one non-null key, the last in input order wins: a delete row
  removes every live row of that key, any other row replaces every live row of that key;
- rows with a null key never match anything: they are inserted (and a null-key delete row
  deletes nothing and is not inserted);
- a plain load (a pool that is not unique) adds its rows as they are.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Hashable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

R = TypeVar("R", bound=Hashable)


@dataclass(frozen=True)
class Counts:
    """What an upsert reports: keys inserted, live rows replaced, live rows deleted."""

    inserted: int
    updated: int
    deleted: int


def upsert_rows(
    live: Counter[R],
    incoming: Sequence[R],
    key: Callable[[R], Any],
    is_delete: Callable[[R], bool] | None = None,
) -> tuple[Counter[R], Counts]:
    """``live`` after upserting ``incoming``, and the counts the upsert should report."""
    last: dict[Any, R] = {}
    nulls: list[R] = []
    for r in incoming:
        k = key(r)
        deleting = is_delete is not None and is_delete(r)
        if k is None:
            if not deleting:
                nulls.append(r)
            continue
        last.pop(k, None)  # re-insert: the last row of a key decides
        last[k] = r
    by_key: dict[Any, int] = {}
    for r, n in live.items():
        k = key(r)
        if k is not None and k in last:
            by_key[k] = by_key.get(k, 0) + n
    out = Counter({r: n for r, n in live.items() if key(r) is None or key(r) not in last})
    inserted = updated = deleted = 0
    for k, r in last.items():
        had = by_key.get(k, 0)
        if is_delete is not None and is_delete(r):
            deleted += had
            continue
        out[r] += 1
        if had:
            updated += had
        else:
            inserted += 1
    for r in nulls:
        out[r] += 1
    inserted += len(nulls)
    return out, Counts(inserted, updated, deleted)


def load_rows(live: Counter[R], incoming: Iterable[R]) -> Counter[R]:
    """A plain load into a pool that is not unique: every row added as it is."""
    return live + Counter(incoming)
