"""Catalog transactions: begin on a version, change objects, commit the next version.

Commit protocol (optimistic, lock-free):

1. Write the transaction's new nodes (fresh ``node/<uuid4>.arrow`` files, unreachable so far),
   then the new root at ``vn/<base + 1>`` with put-if-missing. Winning that put is the commit
   point; ``vn/latest`` is then updated as a hint.
2. Losing it means another transaction committed ``base + 1`` first. Read every root committed
   since ``base`` and check their recorded actions against this transaction's
   (:func:`~lake_core.catalog.actions.find_conflict`). On a conflict, abort with
   :class:`~lake_core.errors.CatalogConflictError`. Otherwise re-apply this transaction's
   actions on the newest root (their preconditions are checked again there), delete the
   now-useless nodes, and try the next version, with jittered exponential backoff, at most
   ``RetryPolicy.max_attempts`` times.
3. A put whose response was lost but which landed is recognised by the root's
   ``transaction_id``.

A failed or abandoned transaction leaves only unreachable files, which it deletes on a best
effort basis.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from google.protobuf.message import Message

from lake_core.catalog import btree
from lake_core.catalog.actions import ActionDef, apply_action, find_conflict, make, row_key
from lake_core.catalog.btree_keys import INDEX_RULE, NAMESPACE, TABLE, VIEW, ObjectRef, parse_key
from lake_core.catalog.defs import encode_def, object_def_path
from lake_core.catalog.node import Action, RootFile, encode_node, encode_root
from lake_core.catalog.proto import actions_pb2, objects_pb2
from lake_core.catalog.state import CatalogSnapshot, CatalogState
from lake_core.errors import (
    CatalogConflictError,
    CommitStateUnknownError,
    EmptyTransactionError,
    LakeError,
    NotFoundError,
    ObjectExistsError,
    ObjectNotFoundError,
    PoolNotFoundError,
    RetriesExhaustedError,
    UsageError,
)
from lake_core.layout import CatalogLayout

if TYPE_CHECKING:
    from lake_core.catalog.catalog import Catalog

T = actions_pb2


@dataclass(frozen=True)
class _Rollback:
    """What a rollback transaction restores."""

    to_version: int
    from_path: str


class Transaction:
    """Changes to the catalog, applied to a private copy of the tree until :meth:`commit`.

    Reads (``state.pool(...)`` etc.) see the transaction's own changes. Use one transaction
    from one thread.
    """

    def __init__(
        self,
        catalog: Catalog,
        base: CatalogSnapshot,
        *,
        transaction_id: str | None = None,
        began_at_millis: int | None = None,
    ) -> None:
        self.catalog = catalog
        self.base = base
        self.state: CatalogState = base.state
        self.id = transaction_id or str(uuid.uuid4())
        self.began_at_millis = catalog.now_millis() if began_at_millis is None else began_at_millis
        #: What was asked, replayed on a newer root after a lost race.
        self.intents: list[ActionDef] = []
        #: What was done to ``state`` (no-ops left out); recorded in the committed root.
        self.actions: list[ActionDef] = []
        self._written: list[str] = []
        self._rollback: _Rollback | None = None
        self.committed_version: int | None = None
        self._saved = False
        #: Set when a commit's outcome is unknown: the root may have landed and name what this
        #: transaction wrote, so abort must delete nothing.
        self._outcome_unknown = False
        self._rng = catalog.rng

    def __enter__(self) -> Transaction:
        return self

    def __exit__(self, *exc: object) -> None:
        """Leaving the block without committing aborts (deletes what was written)."""
        self.abort()

    # -- changes -------------------------------------------------------------------------

    def _perform(self, action: ActionDef) -> None:
        self._check_open()
        if self._rollback is not None:
            raise UsageError("a rollback transaction makes no other changes")
        try:
            state, done = apply_action(self.state, action)
        except LakeError:
            if action.def_path in self._written:  # refused: its definition is of no use
                self._written.remove(action.def_path)
                self.catalog.files.delete_quietly([action.def_path])
            raise
        self.intents.append(action)
        self.state = state
        if done is not None:
            self.actions.append(done)

    def _write_def(self, ref: ObjectRef, message: Message) -> str:
        self.state.key(ref)  # validates the names before anything is written
        path = object_def_path(ref)
        self.catalog.files.write_new(path, encode_def(message))
        self._written.append(path)
        return path

    def create_namespace(
        self,
        namespace: str,
        properties: dict[str, str] | None = None,
        *,
        if_not_exists: bool = False,
    ) -> None:
        """Raises AlreadyExistsError unless ``if_not_exists``."""
        ref = ObjectRef(NAMESPACE, namespace)
        if if_not_exists and self.state.exists(ref):
            # Nothing to write now; a replay writes the definition if the namespace is gone.
            self._perform(make(T.NAMESPACE_CREATE, ref, if_not_exists=True))
            return
        path = self._write_def(ref, self._namespace_def(properties))
        self._perform(make(T.NAMESPACE_CREATE, ref, path, if_not_exists=if_not_exists))

    def _namespace_def(self, properties: dict[str, str] | None = None) -> objects_pb2.NamespaceDef:
        return objects_pb2.NamespaceDef(
            id=str(uuid.uuid4()),
            properties=properties or {},
            created_at_millis=self.catalog.now_millis(),
        )

    def _concrete(self, intent: ActionDef, state: CatalogState) -> ActionDef:
        """``intent`` ready to apply on ``state``: an export gets a new catalog definition, a
        namespace created on first use gets its definition if ``state`` lacks the namespace."""
        if intent.type == T.CATALOG_EXPORT:
            return self._export_action(intent, state)
        if intent.type == T.NAMESPACE_CREATE and not intent.def_path:
            ref = ObjectRef(NAMESPACE, intent.namespace_name)
            if not state.exists(ref):
                concrete = ActionDef()
                concrete.CopyFrom(intent)
                concrete.def_path = self._write_def(ref, self._namespace_def())
                return concrete
        return intent

    def alter_namespace(self, namespace: str, properties: dict[str, str]) -> None:
        ref = ObjectRef(NAMESPACE, namespace)
        current = self.state.namespace(namespace)
        if current is None:
            raise NotFoundError("namespace", namespace)
        definition = objects_pb2.NamespaceDef()
        definition.CopyFrom(current)
        definition.properties.clear()
        definition.properties.update(properties)
        self._perform(make(T.NAMESPACE_ALTER, ref, self._write_def(ref, definition)))

    def drop_namespace(self, namespace: str) -> None:
        """Raises NotFoundError, NotEmptyError (a namespace must be empty to drop)."""
        self._perform(make(T.NAMESPACE_DROP, ObjectRef(NAMESPACE, namespace)))

    def create_pool(self, namespace: str, name: str, definition: objects_pb2.TableDef) -> None:
        """Raises AlreadyExistsError, or NotFoundError if the namespace does not exist."""
        ref = ObjectRef(TABLE, namespace, name)
        self._perform(make(T.TABLE_CREATE, ref, self._write_def(ref, definition)))

    def create_pools(self, pools: list[tuple[str, str, objects_pb2.TableDef]]) -> None:
        """The bulk path: create many pools, their definition files written in parallel.
        Their namespaces must exist (or be created in this transaction first)."""
        refs = [ObjectRef(TABLE, ns, name) for ns, name, _ in pools]
        for ref in refs:
            self.state.key(ref)
        paths = [object_def_path(ref) for ref in refs]
        self.catalog.files.write_many(
            (path, encode_def(d)) for path, (_, _, d) in zip(paths, pools, strict=True)
        )
        self._written.extend(paths)
        for ref, path in zip(refs, paths, strict=True):
            self._perform(make(T.TABLE_CREATE, ref, path))

    def alter_pool(self, namespace: str, name: str, definition: objects_pb2.TableDef) -> None:
        """Point the pool at a new definition. Raises PoolNotFoundError."""
        ref = ObjectRef(TABLE, namespace, name)
        if not self.state.exists(ref):
            raise PoolNotFoundError(ref.display)
        self._perform(make(T.TABLE_ALTER, ref, self._write_def(ref, definition)))

    def drop_pool(self, namespace: str, name: str) -> objects_pb2.TableDef:
        """Remove the pool's name; its files stay. Returns its definition."""
        ref = ObjectRef(TABLE, namespace, name)
        definition = self.state.pool(namespace, name)
        if definition is None:
            raise PoolNotFoundError(ref.display)
        self._perform(make(T.TABLE_DROP, ref))
        return definition

    def create_view(self, namespace: str, name: str, definition: objects_pb2.ViewDef) -> None:
        ref = ObjectRef(VIEW, namespace, name)
        self._perform(make(T.VIEW_CREATE, ref, self._write_def(ref, definition)))

    def replace_view(self, namespace: str, name: str, definition: objects_pb2.ViewDef) -> None:
        ref = ObjectRef(VIEW, namespace, name)
        if not self.state.exists(ref):
            raise NotFoundError("view", ref.display)
        self._perform(make(T.VIEW_REPLACE, ref, self._write_def(ref, definition)))

    def drop_view(self, namespace: str, name: str) -> None:
        self._perform(make(T.VIEW_DROP, ObjectRef(VIEW, namespace, name)))

    def create_index_rule(
        self, namespace: str, name: str, definition: objects_pb2.IndexRuleDef
    ) -> None:
        ref = ObjectRef(INDEX_RULE, namespace, name)
        self._perform(make(T.INDEX_RULE_CREATE, ref, self._write_def(ref, definition)))

    def drop_index_rule(self, namespace: str, name: str) -> None:
        self._perform(make(T.INDEX_RULE_DROP, ObjectRef(INDEX_RULE, namespace, name)))

    def record_export(self, name: str, root_path: str) -> None:
        """Record in the catalog definition that ``name`` exports the root at ``root_path``."""
        self._check_open()
        action = T.ActionDef(type=T.CATALOG_EXPORT, export_name=name, export_root=root_path)
        self._perform(self._export_action(action, self.state))

    def _export_action(self, intent: ActionDef, state: CatalogState) -> ActionDef:
        """``intent`` made concrete against ``state``: a new catalog definition file, a copy
        of ``state``'s with the export added (each replay writes a new one)."""
        definition = objects_pb2.CatalogDef()
        definition.CopyFrom(state.catalog_def)
        definition.exported_snapshots[intent.export_name] = intent.export_root
        path = CatalogLayout.new_catalog_def()
        self.catalog.files.write_new(path, encode_def(definition))
        self._written.append(path)
        return T.ActionDef(
            type=T.CATALOG_EXPORT,
            export_name=intent.export_name,
            export_root=intent.export_root,
            def_path=path,
            previous_def_path=state.catalog_def_path,
        )

    def roll_back_to(self, target: CatalogSnapshot) -> None:
        """Make this transaction restore ``target``'s objects (roll forward): its tree, with
        the current catalog definition (exports stay recorded), and one action per object
        that differs, so concurrent transactions see what changed."""
        self._check_open()
        if self.intents:
            raise UsageError("a rollback transaction makes no other changes")
        now = dict(self.state.all_entries())
        then = dict(target.state.all_entries())
        widths = self.state.widths
        rollback = T.ActionDef(type=T.CATALOG_ROLLBACK, rollback_to_version=target.version)
        done: list[ActionDef] = [rollback]
        for key in sorted(now.keys() | then.keys()):
            if now.get(key) == then.get(key):
                continue
            ref = parse_key(key, widths)
            done.extend(_restore_actions(ref, now.get(key), then.get(key)))
        self.intents = [rollback]
        self.actions = done
        self.state = self.state.with_tree(target.state.tree)
        self._rollback = _Rollback(target.version, self.base.path)

    # -- commit --------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self.committed_version is not None:
            raise UsageError(f"transaction {self.id} was already committed")

    def commit(self) -> int:
        """Commit as the next catalog version and return it. Raises EmptyTransactionError,
        CatalogConflictError, RetriesExhaustedError, and the errors of replayed actions."""
        self._check_open()
        if not self.actions:
            self.abort()
            raise EmptyTransactionError("no catalog changes")
        files = self.catalog.files
        retry = self.catalog.retry
        for attempt in range(retry.max_attempts):
            target = self.base.version + 1
            created = max(self.catalog.now_millis(), self.base.root.created_at_millis)
            tree, nodes = btree.unwritten(self.state.tree, CatalogLayout.new_node)
            files.write_many((path, encode_node(node, created)) for path, node in nodes)
            root = RootFile(
                tree=tree,
                created_at_millis=created,
                catalog_def=self.state.catalog_def_path,
                previous_root=self.base.path,
                rollback_from_root=self._rollback.from_path if self._rollback else None,
                transaction_id=self.id,
                actions=tuple(Action(row_key(a, self.state), a) for a in self.actions),
            )
            try:
                files.write_new(CatalogLayout.version_root(target), encode_root(root))
            except ObjectExistsError:
                if self._landed(target):
                    return self._finish(target)
                files.delete_quietly(path for path, _ in nodes)
                self._rebase(target)
                delay = min(retry.max_delay, retry.base_delay * 2**attempt)
                self.catalog.clock.sleep(self._rng.uniform(0, delay))
                continue
            except BaseException as e:
                # The root may have landed (its answer lost, then the retries failed, or
                # Ctrl-C): it would name our nodes and definitions. Only a read-back decides.
                landed = self._read_back(target) if isinstance(e, Exception) else None
                if landed is True:
                    return self._finish(target)
                if landed is False:
                    files.delete_quietly(path for path, _ in nodes)
                    self._rebase(target)
                    continue
                self._outcome_unknown = True
                raise CommitStateUnknownError(
                    f"catalog-{self.id}",
                    f"writing catalog version {target} failed ({e or type(e).__name__}); "
                    f"whether it landed shows in the catalog's history (transaction {self.id})",
                ) from e
            return self._finish(target)
        self.abort()
        raise RetriesExhaustedError("committing catalog changes", retry.max_attempts)

    def _read_back(self, version: int) -> bool | None:
        """After a failed root write: True (ours landed), False (another transaction's root
        holds ``version``: proven lost), None (missing — a request in flight may still write
        it — unreadable, or the read failing: unknown)."""
        try:
            root = self.catalog.files.read_root(version)
        except Exception:  # noqa: BLE001 - missing, unreadable or failing: all unknown
            return None
        return root.transaction_id == self.id

    def _landed(self, version: int) -> bool:
        """Whether the root at ``version`` is this transaction's own (a lost response)."""
        try:
            return self.catalog.files.read_root(version).transaction_id == self.id
        except ObjectNotFoundError:
            return False

    def _rebase(self, lost: int) -> None:
        """Move onto the newest root after losing ``lost``: check conflicts, then replay."""
        committed = self.catalog.roots_since(lost)
        reason = find_conflict(self.intents, committed, self.state)
        if reason is not None:
            self.abort()
            raise CatalogConflictError(reason)
        newest, root = committed[-1]
        base = self.catalog.snapshot_of(newest, root)
        state = base.state
        performed: list[ActionDef] = []
        replayed: list[ActionDef] = []
        try:
            for intent in self.intents:
                intent = self._concrete(intent, state)
                replayed.append(intent)
                state, done = apply_action(state, intent)
                if done is not None:
                    performed.append(done)
        except LakeError:
            self.abort()
            raise
        self.base, self.state, self.intents, self.actions = base, state, replayed, performed

    def _finish(self, version: int) -> int:
        self.committed_version = version
        self.catalog.files.write_hint(CatalogLayout.LATEST_HINT, version)
        used = {a.def_path for a in self.actions}
        self.catalog.files.delete_quietly(p for p in self._written if p not in used)
        if self._saved:
            self.catalog.files.delete_quietly([CatalogLayout.dtxn(self.id)])
        return version

    def abort(self) -> None:
        """Give up: delete what this transaction wrote (nothing else can reach it)."""
        if self.committed_version is None and not self._outcome_unknown:
            self.catalog.files.delete_quietly(self._written)
            self._written = []

    # -- distributed transactions ----------------------------------------------------------

    def save(self) -> str:
        """Save this transaction so another process can resume it (:meth:`Catalog.resume`):
        its running tree as a root-format node file holding its actions, and
        ``dtxn/<id>.binpb`` pointing at that file and at the root it began on. Returns the id.
        The ``dtxn`` file is this transaction's own and is overwritten by each save."""
        self._check_open()
        if self._rollback is not None:
            raise UsageError("a rollback cannot be distributed")
        files = self.catalog.files
        now = self.catalog.now_millis()
        tree, nodes = btree.unwritten(self.state.tree, CatalogLayout.new_node)
        files.write_many((path, encode_node(node, now)) for path, node in nodes)
        running = RootFile(
            tree=tree,
            created_at_millis=now,
            catalog_def=self.state.catalog_def_path,
            previous_root=self.base.path,
            transaction_id=self.id,
            actions=tuple(Action(row_key(a, self.state), a) for a in self.intents),
        )
        running_path = CatalogLayout.new_node()
        files.write_new(running_path, encode_root(running))
        self.state = self.state.with_tree(tree)
        ttl = int(self.state.catalog_def.txn_ttl_millis)
        definition = objects_pb2.DistributedTransactionDef(
            id=self.id,
            isolation_level=self.state.catalog_def.txn_isolation_level,
            beginning_root_node_file_path=self.base.path,
            running_root_node_file_path=running_path,
            began_at_millis=self.began_at_millis,
            expire_at_millis=self.began_at_millis + ttl if ttl else 0,
        )
        files.store.put(files.key(CatalogLayout.dtxn(self.id)), encode_def(definition))
        self._saved = True
        return self.id

    def _resume(self, running: RootFile) -> None:
        """Re-apply a saved transaction's actions on the root it began on."""
        state = self.base.state
        for row in running.actions:
            intent = self._concrete(row.action, state)
            state, done = apply_action(state, intent)
            self.intents.append(intent)
            if done is not None:
                self.actions.append(done)
            if intent.def_path:
                self._written.append(intent.def_path)
        self.state = state
        self._saved = True


def _restore_actions(ref: ObjectRef, now: str | None, then: str | None) -> list[ActionDef]:
    """The actions that take ``ref`` from definition ``now`` to ``then`` (None: absent)."""
    kinds: dict[int, tuple[int, int | None, int]] = {
        NAMESPACE: (T.NAMESPACE_CREATE, T.NAMESPACE_ALTER, T.NAMESPACE_DROP),
        TABLE: (T.TABLE_CREATE, T.TABLE_ALTER, T.TABLE_DROP),
        VIEW: (T.VIEW_CREATE, T.VIEW_REPLACE, T.VIEW_DROP),
        INDEX_RULE: (T.INDEX_RULE_CREATE, None, T.INDEX_RULE_DROP),
    }
    create, change, drop = kinds[ref.type]
    if now is None and then is not None:
        return [make(create, ref, then)]
    if then is None and now is not None:
        dropped = make(drop, ref)
        dropped.previous_def_path = now
        return [dropped]
    assert now is not None and then is not None
    if change is None:
        dropped = make(drop, ref)
        dropped.previous_def_path = now
        return [dropped, make(create, ref, then)]
    changed = make(change, ref, then)
    changed.previous_def_path = now
    return [changed]
