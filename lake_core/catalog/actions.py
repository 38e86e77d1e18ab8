"""Catalog actions: what a transaction did, how it is re-applied, and when it conflicts.

A transaction is its list of :class:`ActionDef` records. Each one names an object and, for a
create, alter or replace, the definition file it points the object at (written before the
action, under a fresh UUID, so it never changes). :func:`apply_action` performs one action on a
:class:`CatalogState`, checking its precondition against *that* state; a transaction that lost
the race for its version therefore re-applies ("replays") the same records on the newest root
instead of reusing its stale tree (the Olympia reference's lost update).

Conflict rules, per object, between a pending action and the actions of the versions committed
since the transaction began (:func:`find_conflict`):

- creating an object conflicts only if the object exists on the newest root
  (``apply_action`` reports it as already existing); a namespace created on first use
  (``if_not_exists``) never conflicts;
- altering, replacing or dropping an object conflicts if any of those versions touched it;
- a rollback conflicts with every version committed after it began;
- an export conflicts with another export of the same name;
- actions on different objects never conflict.
"""

from __future__ import annotations

from dataclasses import replace as dc_replace

from lake_core.catalog import btree
from lake_core.catalog.btree_keys import INDEX_RULE, KIND, NAMESPACE, TABLE, VIEW, ObjectRef
from lake_core.catalog.node import CATALOG_DEF, RootFile
from lake_core.catalog.proto import actions_pb2, objects_pb2
from lake_core.catalog.state import CatalogState
from lake_core.errors import (
    AlreadyExistsError,
    NotEmptyError,
    NotFoundError,
    PoolNotFoundError,
)

ActionDef = actions_pb2.ActionDef
T = actions_pb2

CREATES = frozenset({T.NAMESPACE_CREATE, T.TABLE_CREATE, T.VIEW_CREATE, T.INDEX_RULE_CREATE})
CHANGES = frozenset({T.NAMESPACE_ALTER, T.TABLE_ALTER, T.VIEW_REPLACE})
DROPS = frozenset({T.NAMESPACE_DROP, T.TABLE_DROP, T.VIEW_DROP, T.INDEX_RULE_DROP})
CATALOG_ACTIONS = frozenset({T.CATALOG_CREATE, T.CATALOG_ROLLBACK, T.CATALOG_EXPORT})

_OBJECT_OF: dict[int, int] = {
    T.NAMESPACE_CREATE: NAMESPACE,
    T.NAMESPACE_ALTER: NAMESPACE,
    T.NAMESPACE_DROP: NAMESPACE,
    T.TABLE_CREATE: TABLE,
    T.TABLE_ALTER: TABLE,
    T.TABLE_DROP: TABLE,
    T.VIEW_CREATE: VIEW,
    T.VIEW_REPLACE: VIEW,
    T.VIEW_DROP: VIEW,
    T.INDEX_RULE_CREATE: INDEX_RULE,
    T.INDEX_RULE_DROP: INDEX_RULE,
}


def make(
    action_type: int, ref: ObjectRef, def_path: str = "", *, if_not_exists: bool = False
) -> ActionDef:
    if _OBJECT_OF.get(action_type) != ref.type:
        raise ValueError(f"{T.ActionType.Name(action_type)} is not an action on a {ref.kind}")
    return ActionDef(
        type=action_type,  # type: ignore[arg-type]
        object_type=ref.type,  # type: ignore[arg-type]
        namespace_name=ref.namespace,
        object_name=ref.name,
        def_path=def_path,
        if_not_exists=if_not_exists,
    )


def object_ref(action: ActionDef) -> ObjectRef | None:
    """The object an action is on; None for catalog-wide actions."""
    if action.type in CATALOG_ACTIONS:
        return None
    return ObjectRef(int(action.object_type), action.namespace_name, action.object_name)


def row_key(action: ActionDef, state: CatalogState) -> str:
    """What a root's action row holds in its key column: the object key, or ``catalog_def``."""
    ref = object_ref(action)
    return CATALOG_DEF if ref is None else state.key(ref)


def _missing(ref: ObjectRef) -> NotFoundError:
    if ref.type == TABLE:
        return PoolNotFoundError(ref.display)
    return NotFoundError(ref.kind, ref.display)


#: Object types that share one name space per namespace (SQL reads either by name).
_SHARED_NAMES = {TABLE: VIEW, VIEW: TABLE}


def apply_action(state: CatalogState, action: ActionDef) -> tuple[CatalogState, ActionDef | None]:
    """Perform ``action`` on ``state``: the new state, and the action as performed (its
    ``previous_def_path`` filled in), or None when it changed nothing (a namespace created on
    first use that already exists). Raises AlreadyExistsError, NotFoundError, NotEmptyError."""
    if action.type == T.CATALOG_EXPORT:
        catalog_def = state.files.read_def(objects_pb2.CatalogDef, action.def_path)
        return dc_replace(state, catalog_def=catalog_def, catalog_def_path=action.def_path), action
    ref = object_ref(action)
    if ref is None:
        raise ValueError(f"{T.ActionType.Name(action.type)} cannot be applied to a tree")
    key = state.key(ref)
    current = btree.lookup(state.tree, key, state.files.read_node)
    done = ActionDef()
    done.CopyFrom(action)
    if action.type in CREATES:
        if current is not None:
            if action.if_not_exists:
                return state, None
            raise AlreadyExistsError(ref.kind, ref.display)
        if not action.def_path:
            raise ValueError(f"{T.ActionType.Name(action.type)} of {ref.display} has no definition")
        if ref.type != NAMESPACE and not state.exists(ObjectRef(NAMESPACE, ref.namespace)):
            raise NotFoundError("namespace", ref.namespace)
        if ref.type in _SHARED_NAMES:
            # A pool and a view are named alike in SQL: one name, one of them. Checked here,
            # so a create replayed after a racing commit is refused too.
            other = ObjectRef(_SHARED_NAMES[ref.type], ref.namespace, ref.name)
            if state.exists(other):
                raise AlreadyExistsError(other.kind, other.display)
        tree = btree.insert(state.tree, key, action.def_path, state.order, state.files.read_node)
    elif action.type in CHANGES:
        if current is None:
            raise _missing(ref)
        done.previous_def_path = current
        tree = btree.insert(state.tree, key, action.def_path, state.order, state.files.read_node)
    elif action.type in DROPS:
        if current is None:
            raise _missing(ref)
        if ref.type == NAMESPACE and not state.is_empty_namespace(ref.namespace):
            raise NotEmptyError("namespace", ref.namespace, "drop its pools, views and rules first")
        done.previous_def_path = current
        tree = btree.delete(state.tree, key, state.order, state.files.read_node)
    else:
        raise ValueError(f"unknown action {action.type}")
    return state.with_tree(tree), done


def find_conflict(
    pending: list[ActionDef], committed: list[tuple[int, RootFile]], state: CatalogState
) -> str | None:
    """Why ``pending`` cannot be replayed after the ``(version, root)`` pairs in
    ``committed``, or None if it can."""
    touched: dict[str, int] = {}
    exports: dict[str, int] = {}
    for version, root in committed:
        for row in root.actions:
            touched[row.key] = version
            if row.action.type == T.CATALOG_EXPORT:
                exports[row.action.export_name] = version
    for action in pending:
        if action.type == T.CATALOG_ROLLBACK and committed:
            return f"catalog version {committed[0][0]} was committed while rolling back"
        if action.type == T.CATALOG_EXPORT and action.export_name in exports:
            v = exports[action.export_name]
            return f"export {action.export_name!r} was recorded by catalog version {v}"
        ref = object_ref(action)
        if ref is None or action.type in CREATES:
            continue
        key = state.key(ref)
        if key in touched:
            return f"{ref.kind} {ref.display} was changed by catalog version {touched[key]}"
    return None


_VERBS: dict[int, str] = {
    T.CATALOG_CREATE: "create",
    T.CATALOG_ROLLBACK: "rollback",
    T.CATALOG_EXPORT: "export",
    T.NAMESPACE_CREATE: "create",
    T.NAMESPACE_ALTER: "alter",
    T.NAMESPACE_DROP: "drop",
    T.TABLE_CREATE: "create",
    T.TABLE_ALTER: "alter",
    T.TABLE_DROP: "drop",
    T.VIEW_CREATE: "create",
    T.VIEW_REPLACE: "replace",
    T.VIEW_DROP: "drop",
    T.INDEX_RULE_CREATE: "create",
    T.INDEX_RULE_DROP: "drop",
}


def describe(action: ActionDef) -> dict[str, object]:
    """An action as ``lake catalog log -f json`` prints it."""
    ref = object_ref(action)
    out: dict[str, object] = {
        "action": _VERBS.get(action.type, T.ActionType.Name(action.type).lower()),
        "object": "catalog" if ref is None else KIND[ref.type],
        "name": "" if ref is None else ref.display,
    }
    if action.type == T.CATALOG_ROLLBACK:
        out["to_version"] = int(action.rollback_to_version)
    if action.type == T.CATALOG_EXPORT:
        out["name"] = action.export_name
    return out


def summary(action: ActionDef) -> str:
    """One action in a few words: ``create pool ns1.logs``, ``rollback catalog to 3``."""
    d = describe(action)
    if action.type == T.CATALOG_ROLLBACK:
        return f"rollback catalog to {d['to_version']}"
    if action.type == T.CATALOG_EXPORT:
        return f"export catalog to {d['name']}"
    if action.type == T.CATALOG_CREATE:
        return "create catalog"
    return f"{d['action']} {d['object']} {d['name']}"
