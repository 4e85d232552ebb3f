"""SCRAM credentials against a running broker: AlterUserScramCredentials (51) and
DescribeUserScramCredentials (50) as raw requests (kafka-python's admin client has no SCRAM
calls), Kafka's per-user errors, ApiVersions advertising both at v0, the stored credential
logging a user in (ScramClient against ScramServer over the broker's StoreCredentials),
credentials surviving a restart and seen by every broker of an in-process cluster, and the
CLUSTER ALTER / DESCRIBE checks with an authorizer."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kafka.protocol.admin import (
    AlterUserScramCredentialsRequest,
    DescribeUserScramCredentialsRequest,
)
from kafka.protocol.metadata import ApiVersionsRequest

from odradek.broker.network.scram_store import StoreCredentials, for_store
from odradek.security.scram import (
    ScramClient,
    ScramMechanism,
    ScramServer,
    credential_from_salted_password,
    credential_to_string,
)
from odradek.testing import Broker, Cluster
from odradek.testing.raw import RawClient
from odradek.wire.errors import ErrorCode

A = AlterUserScramCredentialsRequest
D = DescribeUserScramCredentialsRequest
SHA256, SHA512 = ScramMechanism.SCRAM_SHA_256, ScramMechanism.SCRAM_SHA_512
SALT = b"fixed-salt-for-the-test"
NO_SUCH_CREDENTIAL = "Attempt to delete a user credential that does not exist"


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker() as b:
        yield b


def upsertion(
    user: str, password: str, mechanism: ScramMechanism = SHA256, iterations: int = 4096
) -> Any:
    return A.ScramCredentialUpsertion(
        name=user,
        mechanism=mechanism.wire_type,
        iterations=iterations,
        salt=SALT,
        salted_password=mechanism.salted_password(password, SALT, iterations),
    )


def deletion(user: str, mechanism: ScramMechanism = SHA256) -> Any:
    return A.ScramCredentialDeletion(name=user, mechanism=mechanism.wire_type)


def alter(
    bootstrap: str, upsertions: list[Any] | None = None, deletions: list[Any] | None = None
) -> dict[str, tuple[int, str | None]]:
    with RawClient(bootstrap) as c:
        resp = c.request(A(deletions=deletions or [], upsertions=upsertions or []), 0)
    return {r.user: (r.error_code, r.error_message) for r in resp.results}


def describe(bootstrap: str, users: list[str] | None = None) -> Any:
    with RawClient(bootstrap) as c:
        names = None if users is None else [D.UserName(name=u) for u in users]
        return c.request(D(users=names), 0)


def described(bootstrap: str, users: list[str] | None = None) -> dict[str, Any]:
    resp = describe(bootstrap, users)
    assert resp.error_code == 0
    return {
        r.user: (r.error_code, [(i.mechanism, i.iterations) for i in r.credential_infos])
        for r in resp.results
    }


def login(
    credentials: StoreCredentials, user: str, password: str, mechanism: ScramMechanism = SHA256
) -> bool:
    """A full SCRAM exchange against the stored credential; True when the server accepts."""
    server = ScramServer(mechanism, credentials.get)
    client = ScramClient(mechanism, user, password)
    try:
        server_first = server.step(client.first())
        server_final = server.step(client.final(server_first))
        client.verify(server_final)
    except Exception:
        return False
    return server.complete and server.principal == user


def test_api_versions_advertises_50_and_51_at_v0(broker: Broker) -> None:
    with RawClient(broker.bootstrap) as c:
        resp = c.request(ApiVersionsRequest(), 0)
    keys = {k[0]: (k[1], k[2]) for k in resp.api_keys}
    assert keys[50] == (0, 0) and keys[51] == (0, 0)


def test_alter_stores_kafkas_credential_and_describe_shows_iterations(broker: Broker) -> None:
    assert alter(broker.bootstrap, [upsertion("alice", "alice-secret", iterations=8192)]) == {
        "alice": (0, None)
    }
    assert alter(broker.bootstrap, [upsertion("alice", "other", SHA512)]) == {"alice": (0, None)}
    assert described(broker.bootstrap) == {"alice": (0, [(1, 8192), (2, 4096)])}
    assert described(broker.bootstrap, ["alice"]) == {"alice": (0, [(1, 8192), (2, 4096)])}

    # the broker keeps salt, StoredKey, ServerKey and iterations, in Kafka's string form
    assert broker.server is not None
    stored = broker.server.store.scram_credentials["alice"]
    salted = SHA256.salted_password("alice-secret", SALT, 8192)
    assert stored["SCRAM-SHA-256"] == credential_to_string(
        credential_from_salted_password(SHA256, SALT, salted, 8192)
    )
    assert "alice-secret" not in repr(stored)

    credentials = for_store(broker.server.store)
    assert login(credentials, "alice", "alice-secret")
    assert login(credentials, "alice", "other", SHA512)
    assert not login(credentials, "alice", "wrong")
    assert not login(credentials, "nobody", "alice-secret")

    # a new password replaces the old one at once (the parsed-credential cache follows)
    assert alter(broker.bootstrap, [upsertion("alice", "new-secret")]) == {"alice": (0, None)}
    assert login(credentials, "alice", "new-secret")
    assert not login(credentials, "alice", "alice-secret")

    assert alter(broker.bootstrap, deletions=[deletion("alice", SHA512)]) == {"alice": (0, None)}
    assert described(broker.bootstrap) == {"alice": (0, [(1, 4096)])}
    assert not login(credentials, "alice", "other", SHA512)
    assert alter(broker.bootstrap, deletions=[deletion("alice")]) == {"alice": (0, None)}
    assert described(broker.bootstrap) == {}
    assert broker.server.store.scram_credentials == {}


def test_kafkas_errors_per_user(broker: Broker) -> None:
    alter(broker.bootstrap, [upsertion("bob", "x")])
    results = alter(
        broker.bootstrap,
        upsertions=[
            upsertion("carol", "x"),
            upsertion("carol", "y", SHA512),  # the same user twice, even another mechanism
            upsertion("dave", "x", iterations=4095),
            upsertion("erin", "x", iterations=16385),
            upsertion("", "x"),
            A.ScramCredentialUpsertion(
                name="frank", mechanism=0, iterations=4096, salt=SALT, salted_password=b"x"
            ),
            upsertion("grace", "x"),
        ],
        deletions=[deletion("bob", SHA512), deletion("heidi")],
    )
    assert results == {
        "grace": (0, None),
        "bob": (
            ErrorCode.RESOURCE_NOT_FOUND,
            "Attempt to delete a user credential that does not exist",
        ),
        "heidi": (
            ErrorCode.RESOURCE_NOT_FOUND,
            "Attempt to delete a user credential that does not exist",
        ),
        "carol": (
            ErrorCode.DUPLICATE_RESOURCE,
            "A user credential cannot be altered twice in the same request",
        ),
        "dave": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "erin": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "frank": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
    }
    assert described(broker.bootstrap) == {"bob": (0, [(1, 4096)]), "grace": (0, [(1, 4096)])}
    resp = describe(broker.bootstrap, ["bob", "zed", "bob"])
    assert resp.error_code == 0
    assert [(r.user, r.error_code, r.error_message) for r in resp.results] == [
        (
            "bob",
            ErrorCode.DUPLICATE_RESOURCE,
            "Cannot describe SCRAM credentials for the same user twice in a single request: bob",
        ),
        (
            "zed",
            ErrorCode.RESOURCE_NOT_FOUND,
            "Attempt to describe a user credential that does not exist: zed",
        ),
    ]
    assert described(broker.bootstrap, []) == described(broker.bootstrap, None)


def test_credentials_survive_a_restart(broker: Broker) -> None:
    alter(broker.bootstrap, [upsertion("alice", "alice-secret", SHA512, 5000)])
    broker.restart()
    assert described(broker.bootstrap) == {"alice": (0, [(2, 5000)])}
    assert broker.server is not None
    assert login(for_store(broker.server.store), "alice", "alice-secret", SHA512)
    broker.restart(abrupt=True)
    assert described(broker.bootstrap) == {"alice": (0, [(2, 5000)])}


def test_every_broker_of_a_cluster_sees_credentials_altered_on_one() -> None:
    with Cluster(brokers=3) as cluster:
        assert alter(cluster.address(1), [upsertion("alice", "alice-secret")]) == {
            "alice": (0, None)
        }
        for node in (0, 1, 2):
            assert described(cluster.address(node)) == {"alice": (0, [(1, 4096)])}
        assert alter(cluster.address(2), deletions=[deletion("alice")]) == {"alice": (0, None)}
        for node in (0, 1, 2):
            assert described(cluster.address(node)) == {}


AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"
DENIED = "Cluster authorization failed."


def test_with_an_authorizer_alter_needs_cluster_alter_and_describe_cluster_describe() -> None:
    with Broker(config={"authorizer.class.name": AUTHORIZER}) as b:  # no ACLs: denied
        results = alter(
            b.bootstrap, [upsertion("zoe", "x"), upsertion("amy", "x")], [deletion("zoe")]
        )
        assert results == {
            "amy": (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, DENIED),
            "zoe": (ErrorCode.CLUSTER_AUTHORIZATION_FAILED, DENIED),
        }
        with RawClient(b.bootstrap) as c:  # sorted, once per user, as Kafka's error response
            resp = c.request(A(deletions=[deletion("zoe")], upsertions=[upsertion("amy", "x")]), 0)
        assert [r.user for r in resp.results] == ["amy", "zoe"]
        assert b.server is not None and b.server.store.scram_credentials == {}
        denied = describe(b.bootstrap, ["amy"])
        assert (denied.error_code, denied.error_message) == (
            ErrorCode.CLUSTER_AUTHORIZATION_FAILED,
            DENIED,
        )
        assert [(r.user, r.error_code) for r in denied.results] == [
            ("amy", ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
        ]
        assert describe(b.bootstrap).error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED
    config = {"authorizer.class.name": AUTHORIZER, "super.users": "User:ANONYMOUS"}
    with Broker(config=config) as b:
        assert alter(b.bootstrap, [upsertion("amy", "x")]) == {"amy": (0, None)}
        assert described(b.bootstrap) == {"amy": (0, [(1, 4096)])}
