"""An index entry of a snapshot: the index object of one data object under one rule."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class IndexMeta:
    """Data object ``object`` is indexed by rule ``rule`` (its name in the pool's namespace;
    ``rule_id`` the catalog id of the rule's definition, fresh at every ``create``) on
    ``field`` with ``kind``; the index object is ``id`` (a KSUID), ``size`` bytes, at
    :meth:`lake_core.layout.PoolLayout.index`.

    Invariant: a snapshot holds at most one entry per ``(object, rule)`` and only for live
    objects (:func:`lake_core.snapshot.apply_commit`)."""

    object: str
    rule: str
    rule_id: str
    kind: str
    field: str
    id: str
    size: int

    @property
    def slot(self) -> tuple[str, str]:
        """What a snapshot keys the entry by."""
        return (self.object, self.rule)

    def to_json(self) -> dict[str, Any]:
        return {
            "object": self.object,
            "rule": self.rule,
            "rule_id": self.rule_id,
            "kind": self.kind,
            "field": self.field,
            "id": self.id,
            "size": self.size,
        }

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> IndexMeta:
        """Raises KeyError/TypeError/ValueError on a malformed entry."""
        return cls(
            object=str(d["object"]),
            rule=str(d["rule"]),
            rule_id=str(d["rule_id"]),
            kind=str(d["kind"]),
            field=str(d["field"]),
            id=str(d["id"]),
            size=int(d["size"]),
        )
