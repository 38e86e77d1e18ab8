"""Which live objects of a snapshot the rules covering its pool have not indexed yet.

``lake index ls -p POOL``, the ``objects_indexed`` asset check and the Dagster index job all
ask this one question, and answer it as :func:`lake_core.indexes.apply.apply_rule` decides
what to build: an object is *unindexed* by a rule when it has the rule's field and the
snapshot holds no entry of that rule built for the rule's current definition (its ``id``;
an entry of a dropped rule of the same name does not count). An object without the field, or
in a pool whose type of the field indexes do not cover (a struct), is never unindexed:
``apply`` skips it (:func:`wants_index`), so counting it would never reach zero.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from lake_core.indexes.canonical import indexable

if TYPE_CHECKING:
    from lake_core.indexes.meta import IndexMeta
    from lake_core.indexes.rules import IndexRule
    from lake_core.objects import ObjectMeta
    from lake_core.snapshot import Snapshot


def is_current(entry: IndexMeta, rules: Sequence[IndexRule]) -> bool:
    """``entry`` was built for the current definition of a rule in ``rules`` (the rules
    covering its pool); False for an entry of a dropped or re-created rule."""
    return any(r.name == entry.rule and r.id == entry.rule_id for r in rules)


def wants_index(obj: ObjectMeta, rule: IndexRule, schema: pa.Schema | None) -> bool:
    """Whether ``rule`` can index ``obj``: the object holds the field, and the pool's type of
    it (``schema``) is one indexes cover."""
    if rule.field not in obj.columns:
        return False
    if schema is None or rule.field not in schema.names:
        return True
    kind = schema.field(rule.field).type
    return indexable(kind) or pa.types.is_null(kind)  # all null: an empty index


def unindexed(snapshot: Snapshot, rules: Sequence[IndexRule]) -> list[tuple[ObjectMeta, IndexRule]]:
    """``(object, rule)`` for every live object of ``snapshot`` (in snapshot order) and rule
    of ``rules`` (the rules covering the pool) that ``apply_rule`` would index."""
    out = []
    for obj in snapshot.objects.values():
        for rule in rules:
            held = snapshot.indexes.get((obj.id, rule.name))
            if wants_index(obj, rule, snapshot.schema) and (
                held is None or held.rule_id != rule.id
            ):
                out.append((obj, rule))
    return out
