"""Where the ACLs live: the ACL part of the metadata store, behind a small interface.

`AclBackend`: `bindings()` (all ACLs), `apply(before, after)` (persist the change from one ACL set
to another), `subscribe(fn)` / `unsubscribe(fn)` (`fn()` is called on the event loop after any
broker changed them, this one included). `backend_of(store)` gives the one backend of a metadata
store, so every broker sharing a store (an in-process `LocalCluster`) shares it:

- `LocalAclBackend`: `acls.json` (odradek.security.acl_store.save_local: written atomically) in
  the store's directory: the first data dir of a standalone broker, the cluster's `metadata/`
  directory for an in-process cluster. Subscribers are called at once.
- `ZooKeeperAclBackend`: Kafka's AclAuthorizer layout (`/kafka-acl/<Type>/<name>`,
  `/kafka-acl-extended/prefixed/...`), written as `acl_store.zk_plan` says, with a change
  notification per changed resource under `/kafka-acl-changes` / `/kafka-acl-extended-changes`.
  Every broker watches those and re-reads the resources they name, so ACLs written by another
  broker (or by Kafka's own tools on the same ZooKeeper) are seen everywhere.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Callable
from typing import TYPE_CHECKING

from odradek.security import acl_store
from odradek.security.acl_types import AccessControlEntry, AclBinding, ResourcePattern

if TYPE_CHECKING:
    from odradek.broker.cluster.metadata_store import MetadataStore
    from odradek.broker.cluster.zk_session import ZooKeeperSession

log = logging.getLogger(__name__)

AclListener = Callable[[], None]


class AclBackend:
    """All ACLs, persisted; subscribers hear of every change."""

    def __init__(self) -> None:
        self._listeners: list[AclListener] = []

    def bindings(self) -> list[AclBinding]:
        raise NotImplementedError

    def apply(self, before: list[AclBinding], after: list[AclBinding]) -> None:
        """Persist the change from `before` to `after`; raises when it could not be stored."""
        raise NotImplementedError

    def subscribe(self, fn: AclListener) -> None:
        self._listeners.append(fn)

    def unsubscribe(self, fn: AclListener) -> None:
        if fn in self._listeners:
            self._listeners.remove(fn)

    def _changed(self) -> None:
        for fn in list(self._listeners):
            try:
                fn()
            except Exception:
                log.exception("ACL subscriber failed")


class LocalAclBackend(AclBackend):
    def __init__(self, directory: str) -> None:
        super().__init__()
        self.directory = directory
        self._bindings = acl_store.load_local(directory)

    def bindings(self) -> list[AclBinding]:
        return list(self._bindings)

    def apply(self, before: list[AclBinding], after: list[AclBinding]) -> None:
        acl_store.save_local(self.directory, after)
        self._bindings = list(after)
        self._changed()


class ZooKeeperAclBackend(AclBackend):
    def __init__(self, session: ZooKeeperSession) -> None:
        super().__init__()
        self.session = session
        self.zk = session.zk
        self._nodes: dict[ResourcePattern, list[AccessControlEntry]] = {}
        self._seen: dict[str, set[str]] = {}  # change root -> notification nodes handled
        for root in (acl_store.LITERAL_CHANGES_PATH, acl_store.EXTENDED_CHANGES_PATH):
            self.zk.ensure_path(root)
            self._seen[root] = set(self.zk.get_children(root))
        for root in acl_store.zk_acl_roots():
            self.zk.ensure_path(root)
        self._nodes = self._read_all()
        self._watching = False

    def _read_all(self) -> dict[ResourcePattern, list[AccessControlEntry]]:
        nodes: dict[ResourcePattern, list[AccessControlEntry]] = {}
        for root in acl_store.zk_acl_roots():
            for type_name in self.zk.get_children(root):
                for name in self.zk.get_children(f"{root}/{type_name}"):
                    path = f"{root}/{type_name}/{name}"
                    pattern, entries = self._read(path)
                    if entries:
                        nodes[pattern] = entries
        return nodes

    def _read(self, path: str) -> tuple[ResourcePattern, list[AccessControlEntry]]:
        from kazoo.exceptions import NoNodeError

        pattern = acl_store.zk_pattern_from_path(path)
        try:
            data, _ = self.zk.get(path)
        except NoNodeError:
            return pattern, []
        return pattern, acl_store.decode_zk_acls(data)

    def bindings(self) -> list[AclBinding]:
        return [AclBinding(p, e) for p, entries in self._nodes.items() for e in entries]

    def apply(self, before: list[AclBinding], after: list[AclBinding]) -> None:
        from kazoo.exceptions import NodeExistsError, NoNodeError

        writes, notifications = acl_store.zk_plan(before, after)
        for write in writes:
            pattern = acl_store.zk_pattern_from_path(write.path)
            if write.data is None:
                try:
                    self.zk.delete(write.path)
                except NoNodeError:
                    pass
                self._nodes.pop(pattern, None)
            else:
                try:
                    self.zk.set(write.path, write.data)
                except NoNodeError:
                    try:
                        self.zk.create(write.path, write.data, makepath=True)
                    except NodeExistsError:
                        self.zk.set(write.path, write.data)
                self._nodes[pattern] = acl_store.decode_zk_acls(write.data)
        for prefix, data in notifications:
            self.zk.create(prefix, data, sequence=True, makepath=True)
        if writes:
            self._changed()

    def subscribe(self, fn: AclListener) -> None:
        super().subscribe(fn)
        if self.session.loop is None:
            try:
                self.session.loop = asyncio.get_running_loop()
            except RuntimeError:  # made outside the event loop: the store's first subscriber
                pass  # sets it
        if not self._watching:
            self._watching = True
            for root in (acl_store.LITERAL_CHANGES_PATH, acl_store.EXTENDED_CHANGES_PATH):
                self.zk.ChildrenWatch(
                    root, lambda children, root=root: self._on_changes(root, children)
                )

    def _on_changes(self, root: str, children: list[str]) -> None:
        """kazoo's thread: re-read the resources new notifications name, then hand over."""
        if self.session.closed:
            return
        seen = self._seen[root]
        fresh = sorted(c for c in children if c not in seen)
        self._seen[root] = set(children)
        if not fresh:
            return
        updates: dict[ResourcePattern, list[AccessControlEntry]] = {}
        for child in fresh:
            try:
                data, _ = self.zk.get(f"{root}/{child}")
                pattern = acl_store.decode_acl_change(root, data)
                _, entries = self._read(acl_store.zk_acl_path(pattern))
            except Exception as exc:  # a deleted notification, a malformed one
                log.debug("ACL change %s/%s skipped: %s", root, child, exc)
                continue
            updates[pattern] = entries
        if updates:
            self.session.post(self._apply_updates, updates)

    def _apply_updates(self, updates: dict[ResourcePattern, list[AccessControlEntry]]) -> None:
        changed = False
        for pattern, entries in updates.items():
            if set(self._nodes.get(pattern, [])) != set(entries):
                changed = True
            if entries:
                self._nodes[pattern] = entries
            else:
                self._nodes.pop(pattern, None)
        if changed:
            self._changed()


_BACKEND_ATTR = "_acl_backend"  # on the store, so its brokers share one backend


def backend_of(store: MetadataStore) -> AclBackend:
    """The ACL backend of a metadata store, made on first use and shared by its brokers."""
    backend: AclBackend | None = getattr(store, _BACKEND_ATTR, None)
    if backend is not None:
        return backend
    session = getattr(store, "session", None)
    if session is not None:  # ZooKeeperMetadataStore
        backend = ZooKeeperAclBackend(session)
    else:
        path = getattr(store, "path", None)
        if path is None:
            raise TypeError(f"no ACL storage for {type(store).__name__}")
        backend = LocalAclBackend(os.path.dirname(path))
    setattr(store, _BACKEND_ATTR, backend)
    return backend
