"""Index rules in the catalog: create, drop, list, and which rules cover a pool.

A rule is an ``IndexRuleDef`` under the namespace it covers (``NS.RULE``; a bare name lives in
``default``), so creating and dropping one are catalog versions: ``lake catalog rollback``
restores the rules of that version, like pools and views. The definition: ``kind`` is
``"field"``, ``fields`` holds the one indexed top-level field, and ``properties`` hold
``index`` (``exact`` or ``bloom``), ``fpp`` (the bloom kind's target false-positive rate) and
``pools`` (a comma-separated list of pool names in the namespace; absent: every pool there).

Invariants: a rule's ``id`` is fresh at every create, so an index object built for a dropped
rule is never taken for one of a new rule of the same name; a rule names only pools that exist
when it is created (a pool created later is covered only by a rule without a pool list).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass
from datetime import UTC, datetime

from lake_core.catalog import Catalog
from lake_core.catalog.btree_keys import INDEX_RULE, ObjectRef
from lake_core.catalog.proto import objects_pb2
from lake_core.catalog.state import CatalogState
from lake_core.errors import AlreadyExistsError, NotFoundError, PoolNotFoundError, UsageError
from lake_core.ids import new_id
from lake_core.names import PoolName, validate_name

EXACT = "exact"
BLOOM = "bloom"
KINDS = (EXACT, BLOOM)
DEFAULT_FPP = 0.01


@dataclass(frozen=True)
class IndexRule:
    """One index rule: ``field`` of the pools of ``namespace`` it covers, indexed as ``kind``."""

    namespace: str
    name: str
    id: str
    field: str
    kind: str
    fpp: float = DEFAULT_FPP
    #: Pool names in ``namespace`` the rule covers; empty: all of them.
    pools: tuple[str, ...] = ()
    created: datetime | None = None

    @property
    def full_name(self) -> str:
        return str(PoolName(self.namespace, self.name))

    def covers(self, pool: PoolName) -> bool:
        return pool.namespace == self.namespace and (not self.pools or pool.name in self.pools)

    def definition(self) -> objects_pb2.IndexRuleDef:
        props = {"index": self.kind, "fpp": repr(self.fpp)}
        if self.pools:
            props["pools"] = ",".join(self.pools)
        millis = int(self.created.timestamp() * 1000) if self.created else 0
        return objects_pb2.IndexRuleDef(
            id=self.id,
            kind="field",
            fields=[self.field],
            properties=props,
            created_at_millis=millis,
        )

    @classmethod
    def of(cls, ref: ObjectRef, d: objects_pb2.IndexRuleDef) -> IndexRule | None:
        """The rule a catalog definition holds; None for one this lakepool does not build (a
        ``type`` rule, several fields, an unknown kind): such rules are listed, never used."""
        props = dict(d.properties)
        kind = props.get("index", EXACT)
        if d.kind != "field" or len(d.fields) != 1 or kind not in KINDS:
            return None
        try:
            fpp = float(props.get("fpp", DEFAULT_FPP))
        except ValueError:
            fpp = DEFAULT_FPP
        pools = tuple(p for p in props.get("pools", "").split(",") if p)
        created = (
            datetime.fromtimestamp(d.created_at_millis / 1000, UTC) if d.created_at_millis else None
        )
        return cls(ref.namespace, ref.name, _key_safe_id(ref, d), d.fields[0], kind, fpp, pools, created)


def _key_safe_id(ref: ObjectRef, d: objects_pb2.IndexRuleDef) -> str:
    """The rule's id as index object names use it: the catalog id when it is letters and
    digits (every rule ``create_rule`` makes: a KSUID); otherwise (a rule another writer
    stored without one, or with a '-' or '/') a digest of what identifies the definition,
    stable across reads."""
    if d.id and d.id.isascii() and d.id.isalnum():
        return d.id
    seed = "\0".join([ref.namespace, ref.name, d.id, str(d.created_at_millis), *d.fields])
    return "r" + hashlib.sha256(seed.encode()).hexdigest()[:26]


def rules_in(state: CatalogState, namespace: str | None = None) -> list[IndexRule]:
    """The usable rules of one catalog version (of ``namespace``), in key order."""
    out = []
    for ref, d in state.index_rules(namespace):
        rule = IndexRule.of(ref, d)
        if rule is not None:
            out.append(rule)
    return out


def rules_for(state: CatalogState, pool: PoolName) -> tuple[IndexRule, ...]:
    """The rules of one catalog version that cover ``pool``."""
    return tuple(r for r in rules_in(state, pool.namespace) if r.covers(pool))


def parse_rule_name(text: str) -> PoolName:
    """``NS.RULE`` or ``RULE`` (namespace ``default``); InvalidNameError otherwise."""
    return PoolName.parse(text, "index rule")


def check_field(field: str) -> str:
    """UsageError unless ``field`` names one top-level field."""
    if not field or "." in field:
        raise UsageError(f"an index rule names one top-level field, not {field!r}")
    return field


#: The lowest false-positive rate a bloom rule may ask for: 1e-6 already costs 29 bits per
#: value (about 20 hash functions); lower rates make indexes larger than the data.
MIN_FPP = 1e-6


def check_fpp(fpp: float) -> float:
    if not (math.isfinite(fpp) and MIN_FPP <= fpp < 0.5):
        raise UsageError(f"--fpp must be a rate from {MIN_FPP:g} to 0.5 (exclusive), not {fpp}")
    return fpp


def create_rule(
    catalog: Catalog,
    name: str,
    field: str,
    kind: str = EXACT,
    *,
    fpp: float = DEFAULT_FPP,
    pools: tuple[str, ...] = (),
) -> tuple[IndexRule, int]:
    """Commit a new rule; returns it and the catalog version. Raises InvalidNameError,
    UsageError (kind, fpp, a field with a dot), AlreadyExistsError (a rule of that name),
    PoolNotFoundError (a listed pool is not in the rule's namespace). Nothing changes then.
    Whether ``field`` has an indexable type is checked by the caller that can see the pools'
    schemas (:meth:`lake_core.lake.Lake.create_index_rule`)."""
    rule_name = parse_rule_name(name)
    if kind not in KINDS:
        raise UsageError(f"--kind must be one of {', '.join(KINDS)}, not {kind!r}")
    check_field(field)
    check_fpp(fpp)
    for p in pools:
        validate_name(p, "pool")
    with catalog.begin() as txn:
        state = txn.state
        ref = ObjectRef(INDEX_RULE, rule_name.namespace, rule_name.name)
        if state.get(ref, objects_pb2.IndexRuleDef) is not None:
            raise AlreadyExistsError("index rule", str(rule_name))
        for p in pools:
            if state.pool(rule_name.namespace, p) is None:
                raise PoolNotFoundError(f"{rule_name.namespace}.{p}", f"named by index rule {rule_name}")
        rule = IndexRule(
            rule_name.namespace,
            rule_name.name,
            new_id(),
            field,
            kind,
            fpp,
            tuple(dict.fromkeys(pools)),
            # Milliseconds, as the catalog stores it: the rule read back equals this one.
            datetime.fromtimestamp(catalog.now_millis() / 1000, UTC),
        )
        txn.create_namespace(rule_name.namespace, if_not_exists=True)
        txn.create_index_rule(rule_name.namespace, rule_name.name, rule.definition())
        return rule, txn.commit()


def drop_rule(catalog: Catalog, name: str) -> tuple[IndexRule | None, int]:
    """Drop rule ``name``; returns its definition (None if this lakepool could not read it)
    and the catalog version. Raises NotFoundError. Index objects already built stay in the
    snapshots that hold them until ``lake index apply --remove`` or their objects go."""
    rule_name = parse_rule_name(name)
    with catalog.begin() as txn:
        ref = ObjectRef(INDEX_RULE, rule_name.namespace, rule_name.name)
        d = txn.state.get(ref, objects_pb2.IndexRuleDef)
        if d is None:
            raise NotFoundError("index rule", str(rule_name))
        txn.drop_index_rule(rule_name.namespace, rule_name.name)
        return IndexRule.of(ref, d), txn.commit()


def find_rule(state: CatalogState, name: str) -> IndexRule:
    """The usable rule called ``name``; NotFoundError otherwise."""
    rule_name = parse_rule_name(name)
    ref = ObjectRef(INDEX_RULE, rule_name.namespace, rule_name.name)
    d = state.get(ref, objects_pb2.IndexRuleDef)
    rule = None if d is None else IndexRule.of(ref, d)
    if rule is None:
        raise NotFoundError("index rule", str(rule_name))
    return rule
