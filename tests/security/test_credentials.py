"""AlterUserScramCredentials / DescribeUserScramCredentials semantics over a CredentialStore
(odradek.security.credentials), as Kafka's controller answers them."""

from __future__ import annotations

from odradek.security.credentials import (
    AlterResult,
    CredentialInfo,
    DescribeResult,
    InMemoryCredentialStore,
    ScramDeletion,
    ScramUpsertion,
    alter_user_scram_credentials,
    describe_user_scram_credentials,
)
from odradek.security.scram import ScramClient, ScramMechanism, ScramServer, random_salt
from odradek.wire.errors import ErrorCode

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512


def upsertion(
    name: str, password: str, mechanism: int = 1, iterations: int = 4096
) -> ScramUpsertion:
    salt = random_salt()
    hashed = ScramMechanism.from_type(mechanism) or SHA256
    salted = hashed.salted_password(password, salt, iterations)
    return ScramUpsertion(name, mechanism, iterations, salt, salted)


def test_upserted_credential_authenticates_and_is_described() -> None:
    store = InMemoryCredentialStore()
    results = alter_user_scram_credentials(
        store, [], [upsertion("alice", "pw"), upsertion("bob", "pw2", 2, 8192)]
    )
    assert results == [AlterResult("alice"), AlterResult("bob")]
    server = ScramServer(SHA256, store.get)
    client = ScramClient(SHA256, "alice", "pw")
    client.verify(server.step(client.final(server.step(client.first()))))
    assert server.principal == "alice"
    assert describe_user_scram_credentials(store, None) == [
        DescribeResult("alice", credential_infos=[CredentialInfo(1, 4096)]),
        DescribeResult("bob", credential_infos=[CredentialInfo(2, 8192)]),
    ]
    assert "hidden" in repr(upsertion("x", "secret-pw")) and "secret" not in repr(
        upsertion("x", "secret-pw")
    )


def test_validation_errors() -> None:
    store = InMemoryCredentialStore()
    results = alter_user_scram_credentials(
        store,
        [ScramDeletion("ghost", 1), ScramDeletion("weird", 7)],
        [
            upsertion("", "pw"),
            upsertion("low", "pw", 1, 4095),
            upsertion("high", "pw", 2, 16385),
            upsertion("edge", "pw", 2, 16384),
            ScramUpsertion("unknown-mech", 0, 4096, b"s", b"x" * 32),
        ],
    )
    by_user = {r.user: (r.error_code, r.error_message) for r in results}
    assert by_user == {
        "ghost": (
            ErrorCode.RESOURCE_NOT_FOUND,
            "Attempt to delete a user credential that does not exist",
        ),
        "weird": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
        "": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty"),
        "low": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        "high": (ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations"),
        "edge": (ErrorCode.NONE, None),
        "unknown-mech": (ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism"),
    }
    assert results[0] == AlterResult("edge")  # successes first, as Kafka lists them
    assert set(store.describe()) == {"edge"}


def test_user_altered_twice_in_one_request_is_duplicate_and_unchanged() -> None:
    store = InMemoryCredentialStore()
    alter_user_scram_credentials(store, [], [upsertion("carol", "old"), upsertion("dave", "d")])
    results = alter_user_scram_credentials(
        store,
        [ScramDeletion("carol", 1)],
        [upsertion("carol", "new", 2), upsertion("dave", "x"), upsertion("dave", "y", 2)],
    )
    assert {(r.user, r.error_code) for r in results} == {
        ("carol", ErrorCode.DUPLICATE_RESOURCE),
        ("dave", ErrorCode.DUPLICATE_RESOURCE),
    }
    assert all(
        r.error_message == "A user credential cannot be altered twice in the same request"
        for r in results
    )
    assert store.describe() == {"carol": {SHA256: 4096}, "dave": {SHA256: 4096}}
    server = ScramServer(SHA256, store.get)
    client = ScramClient(SHA256, "carol", "old")  # the old password still works
    client.verify(server.step(client.final(server.step(client.first()))))


def test_delete_then_describe() -> None:
    store = InMemoryCredentialStore()
    alter_user_scram_credentials(store, [], [upsertion("erin", "pw"), upsertion("frank", "pw")])
    assert alter_user_scram_credentials(store, [ScramDeletion("erin", 1)], []) == [
        AlterResult("erin")
    ]
    assert store.get("erin", SHA256) is None
    results = describe_user_scram_credentials(store, ["erin", "frank", "frank", "frank"])
    assert results == [
        DescribeResult(
            "erin",
            ErrorCode.RESOURCE_NOT_FOUND,
            "Attempt to describe a user credential that does not exist: erin",
        ),
        DescribeResult(
            "frank",
            ErrorCode.DUPLICATE_RESOURCE,
            "Cannot describe SCRAM credentials for the same user twice in a single request: frank",
        ),
    ]
    assert describe_user_scram_credentials(InMemoryCredentialStore(), []) == []
