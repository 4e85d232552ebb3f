"""SCRAM credentials from the cluster metadata store, as the broker's ``CredentialStore``.

``StoreCredentials(store)`` implements odradek.security.credentials.CredentialStore over
``MetadataStore.scram_credentials`` (user -> mechanism name -> Kafka's credential string), so
SCRAM logins and AlterUserScramCredentials / DescribeUserScramCredentials see what every broker
sees: the local store's JSON file, or ZooKeeper's ``/config/users/<user>`` (credentials written
by Kafka's own tools included).

``get`` parses a credential string once and keeps the parsed credential until the string in the
store changes (each lookup compares the stored string with the one parsed, so a change that
arrived from another broker is never served stale, with or without a "scram" notification). A
string that does not parse (a hand-edited node) is logged once and treated as no credential.

Writes go to the store one ``alter_scram_credentials`` call each; ``batch()`` collects the writes
of one request (an AlterUserScramCredentials with many users) into one persisted change, reads
inside it seeing the pending writes.

``for_store(store)`` gives the one ``StoreCredentials`` of a store (the handlers and the SASL
authenticator share its parsed-credential cache).
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from odradek.security.scram import (
    ScramCredential,
    ScramMechanism,
    credential_from_string,
    credential_to_string,
)

if TYPE_CHECKING:
    from odradek.broker.cluster.metadata_store import MetadataStore, ScramChanges

log = logging.getLogger(__name__)


class StoreCredentials:
    """A ``CredentialStore`` over a ``MetadataStore``'s SCRAM credentials."""

    def __init__(self, store: MetadataStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        # (user, mechanism) -> (the string parsed, its credential or None when it did not parse)
        self._parsed: dict[tuple[str, ScramMechanism], tuple[str, ScramCredential | None]] = {}
        self._pending: dict[str, dict[str, str | None]] | None = None

    # -- reads -------------------------------------------------------------------------------

    def _string(self, user: str, mechanism: ScramMechanism) -> str | None:
        name = mechanism.mechanism_name
        pending = self._pending
        if pending is not None and name in pending.get(user, {}):
            return pending[user][name]
        return self.store.scram_credentials.get(user, {}).get(name)

    def get(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        text = self._string(user, mechanism)
        key = (user, mechanism)
        with self._lock:
            if text is None:
                self._parsed.pop(key, None)
                return None
            cached = self._parsed.get(key)
            if cached is not None and cached[0] == text:
                return cached[1]
        try:
            credential: ScramCredential | None = credential_from_string(text)
        except ValueError:
            log.warning(
                "the stored %s credential of user %r is not valid; ignoring it",
                mechanism.mechanism_name,
                user,
            )
            credential = None
        with self._lock:
            self._parsed[key] = (text, credential)
        return credential

    def describe(self) -> dict[str, dict[ScramMechanism, int]]:
        """Every user with a (valid) credential: user -> mechanism -> iterations."""
        users = set(self.store.scram_credentials)
        if self._pending is not None:
            users |= set(self._pending)
        out: dict[str, dict[ScramMechanism, int]] = {}
        for user in users:
            for mechanism in ScramMechanism:
                credential = self.get(user, mechanism)
                if credential is not None:
                    out.setdefault(user, {})[mechanism] = credential.iterations
        return out

    # -- writes ------------------------------------------------------------------------------

    def upsert(self, user: str, mechanism: ScramMechanism, credential: ScramCredential) -> None:
        self._change(user, mechanism, credential_to_string(credential))

    def delete(self, user: str, mechanism: ScramMechanism) -> bool:
        if self._string(user, mechanism) is None:
            return False
        self._change(user, mechanism, None)
        return True

    def _change(self, user: str, mechanism: ScramMechanism, text: str | None) -> None:
        if self._pending is not None:
            self._pending.setdefault(user, {})[mechanism.mechanism_name] = text
        else:
            self.store.alter_scram_credentials([(user, {mechanism.mechanism_name: text})])

    @contextmanager
    def batch(self) -> Iterator[None]:
        """Collect the writes made inside into one ``alter_scram_credentials`` at the end (none
        when the block raises). Not reentrant; one batch at a time (handlers run on the event
        loop and do not await inside one)."""
        if self._pending is not None:
            raise RuntimeError("a SCRAM credential batch is already open")
        self._pending = {}
        try:
            yield
            changes: ScramChanges = list(self._pending.items())
        finally:
            self._pending = None
        if changes:
            self.store.alter_scram_credentials(changes)


_BY_STORE: weakref.WeakKeyDictionary[MetadataStore, StoreCredentials] = weakref.WeakKeyDictionary()
_BY_STORE_LOCK = threading.Lock()


def for_store(store: MetadataStore) -> StoreCredentials:
    """The shared ``StoreCredentials`` of ``store``."""
    with _BY_STORE_LOCK:
        credentials = _BY_STORE.get(store)
        if credentials is None:
            credentials = _BY_STORE[store] = StoreCredentials(store)
        return credentials
