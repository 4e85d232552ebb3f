"""network/scram_store.StoreCredentials over a LocalMetadataStore: the CredentialStore the broker
uses (core semantics of odradek.security.credentials apply to it), one persisted write per
batch, a stored string that does not parse treated as no credential, a change made through
another handle seen at once, and the local store's persistence and "scram" notification."""

from __future__ import annotations

from pathlib import Path

import pytest

from odradek.broker.cluster.metadata_store import LocalMetadataStore, MetadataChange
from odradek.broker.network.scram_store import StoreCredentials, for_store
from odradek.security.credentials import (
    ScramDeletion,
    ScramUpsertion,
    alter_user_scram_credentials,
)
from odradek.security.scram import ScramMechanism, credential_to_string, generate_credential

SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512


class CountingStore(LocalMetadataStore):
    def __init__(self, data_dir: str) -> None:
        super().__init__(data_dir, 0)
        self.writes = 0

    def alter_scram_credentials(self, changes):  # type: ignore[no-untyped-def]
        self.writes += 1
        super().alter_scram_credentials(changes)


def test_a_request_is_one_persisted_write_and_survives_reopening(tmp_path: Path) -> None:
    store = CountingStore(str(tmp_path))
    heard: list[MetadataChange] = []
    store.subscribe(heard.append)
    credentials = StoreCredentials(store)
    salt = b"salt"
    upsertions = [
        ScramUpsertion(user, SHA256.wire_type, 4096, salt, SHA256.salted_password("p", salt, 4096))
        for user in ("alice", "bob", "carol")
    ]
    with credentials.batch():
        results = alter_user_scram_credentials(credentials, [], upsertions)
        assert store.writes == 0 and store.scram_credentials == {}
        assert credentials.get("bob", SHA256) is not None  # reads see the pending writes
    assert [r.error_code for r in results] == [0, 0, 0]
    assert store.writes == 1 and heard == [MetadataChange("scram")]
    assert sorted(store.scram_credentials) == ["alice", "bob", "carol"]

    with credentials.batch():
        results = alter_user_scram_credentials(
            credentials, [ScramDeletion("bob", SHA256.wire_type)], []
        )
    assert store.writes == 2 and "bob" not in store.scram_credentials

    reopened = LocalMetadataStore(str(tmp_path), 0)
    assert reopened.scram_credentials == store.scram_credentials
    assert StoreCredentials(reopened).describe() == {
        "alice": {SHA256: 4096},
        "carol": {SHA256: 4096},
    }


def test_a_failed_batch_writes_nothing(tmp_path: Path) -> None:
    store = CountingStore(str(tmp_path))
    credentials = StoreCredentials(store)
    with pytest.raises(RuntimeError), credentials.batch():
        credentials.upsert("alice", SHA256, generate_credential(SHA256, "p"))
        raise RuntimeError("boom")
    assert store.writes == 0 and store.scram_credentials == {}
    credentials.upsert("alice", SHA256, generate_credential(SHA256, "p"))  # outside: one write
    assert store.writes == 1


def test_stored_strings_are_parsed_once_and_followed(tmp_path: Path) -> None:
    store = LocalMetadataStore(str(tmp_path), 0)
    credentials = for_store(store)
    assert for_store(store) is credentials
    first = generate_credential(SHA512, "one")
    store.alter_scram_credentials([("alice", {"SCRAM-SHA-512": credential_to_string(first)})])
    got = credentials.get("alice", SHA512)
    assert got == first and credentials.get("alice", SHA512) is got  # cached
    second = generate_credential(SHA512, "two", 8192)
    store.alter_scram_credentials([("alice", {"SCRAM-SHA-512": credential_to_string(second)})])
    assert credentials.get("alice", SHA512) == second  # the new string, not the cache
    assert credentials.get("alice", SHA256) is None

    # a hand-edited string that does not parse: no credential, not a crash
    store.alter_scram_credentials([("bob", {"SCRAM-SHA-256": "salt=c2FsdA==,iterations=4096"})])
    assert credentials.get("bob", SHA256) is None
    assert credentials.describe() == {"alice": {SHA512: 8192}}
    assert not credentials.delete("carol", SHA256)
    assert credentials.delete("alice", SHA512)
    assert store.scram_credentials == {"bob": {"SCRAM-SHA-256": "salt=c2FsdA==,iterations=4096"}}
