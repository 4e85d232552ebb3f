"""SCRAM-SHA-256/512 server and credentials (odradek.security.scram), checked against RFC 7677's
example exchange, kafka-python's independent SCRAM client, and Kafka's string format."""

from __future__ import annotations

import base64

import pytest
from kafka.net.sasl.scram import ScramClient as KafkaPythonScramClient

from odradek.security.credentials import InMemoryCredentialStore
from odradek.security.errors import AuthenticationError
from odradek.security.scram import (
    DelegationToken,
    ScramClient,
    ScramCredential,
    ScramMechanism,
    ScramServer,
    credential_from_string,
    credential_to_string,
    credentials_to_user_config,
    desanitize_user,
    format_credential_entry,
    generate_credential,
    sanitize_user,
    saslname_from_username,
    user_config_to_credentials,
    username_from_saslname,
)
from odradek.wire.errors import ErrorCode

SHA256 = ScramMechanism.SCRAM_SHA_256
SHA512 = ScramMechanism.SCRAM_SHA_512
TOKENAUTH = {"tokenauth": "true"}
GENERIC_256 = (
    "Authentication failed during authentication due to invalid credentials with SASL "
    "mechanism SCRAM-SHA-256"
)


def store_with(user: str, password: str, *mechanisms: ScramMechanism) -> InMemoryCredentialStore:
    store = InMemoryCredentialStore()
    for mechanism in mechanisms or (SHA256, SHA512):
        store.upsert(user, mechanism, generate_credential(mechanism, password))
    return store


def test_rfc7677_example_exchange() -> None:
    # RFC 7677 section 3 (also Kafka's ScramFormatterTest): user "user", password "pencil".
    salt = base64.b64decode("W22ZaJ0SNY7soEsUEjb6gQ==")
    credential = generate_credential(SHA256, "pencil", 4096, salt=salt)
    server = ScramServer(
        SHA256,
        lambda user, mech: credential if user == "user" else None,
        nonce=lambda: "%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0",
    )
    first = server.step(b"n,,n=user,r=rOprNGfwEbeRWgbNEkqO")
    assert first == (
        b"r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,s=W22ZaJ0SNY7soEsUEjb6gQ==,i=4096"
    )
    assert not server.complete
    final = server.step(
        b"c=biws,r=rOprNGfwEbeRWgbNEkqO%hvYDpWUa2RaTCAfuxFIlj)hNlF$k0,"
        b"p=dHzbZapWIk4jUhN+Ute9ytag9zjfMHgsqmmiz7AndVQ="
    )
    assert final == b"v=6rriTRBi23WpRR/wtup+mMhUZUn/dB5nLTJRsjl95G4="
    assert server.complete and server.principal == "user"
    assert server.credential_expiry_ms is None


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_kafka_python_client_authenticates(mechanism: ScramMechanism) -> None:
    store = store_with("alice", "alice-secret", mechanism)
    server = ScramServer(mechanism, store.get)
    client = KafkaPythonScramClient("alice", "alice-secret", mechanism.mechanism_name)
    server_first = server.step(client.first_message())
    client.process_server_first_message(server_first)
    server_final = server.step(client.final_message())
    client.process_server_final_message(server_final)  # raises on a wrong server signature
    assert server.complete and server.principal == "alice"


@pytest.mark.parametrize("mechanism", [SHA256, SHA512])
def test_wrong_password_gets_kafkas_generic_message(mechanism: ScramMechanism) -> None:
    store = store_with("alice", "alice-secret", mechanism)
    server = ScramServer(mechanism, store.get)
    client = KafkaPythonScramClient("alice", "wrong", mechanism.mechanism_name)
    client.process_server_first_message(server.step(client.first_message()))
    with pytest.raises(AuthenticationError) as info:
        server.step(client.final_message())
    error = info.value
    assert not error.public and error.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
    assert error.client_message() == (
        "Authentication failed during authentication due to invalid credentials with SASL "
        f"mechanism {mechanism.mechanism_name}"
    )
    assert error.client_message(reauthenticating=True).startswith(
        "Authentication failed during re-authentication due to"
    )
    assert "Invalid client credentials" in str(error)
    assert not server.complete and server.principal is not None
    with pytest.raises(AuthenticationError) as again:
        server.step(b"anything")
    assert again.value.error_code == ErrorCode.ILLEGAL_SASL_STATE


def test_unknown_user_fails_at_client_first_with_the_same_message() -> None:
    server = ScramServer(SHA256, store_with("alice", "x").get)
    with pytest.raises(AuthenticationError) as info:
        server.step(ScramClient(SHA256, "mallory", "x").first())
    assert info.value.client_message() == GENERIC_256
    assert "Invalid user credentials" in str(info.value)


def test_our_client_round_trip_with_names_needing_escapes() -> None:
    user = "a,b=c"
    store = store_with(user, "pässword", SHA512)
    server = ScramServer(SHA512, store.get)
    client = ScramClient(SHA512, user, "pässword")
    assert b"n=a=2Cb=3Dc," in client.first()
    client.verify(server.step(client.final(server.step(client.first()))))
    assert server.principal == user


def test_client_detects_a_server_that_does_not_know_the_password() -> None:
    fake = generate_credential(SHA256, "other")
    server = ScramServer(SHA256, lambda u, m: fake)
    client = ScramClient(SHA256, "alice", "alice-secret")
    final = client.final(server.step(client.first()))
    with pytest.raises(AuthenticationError):
        server.step(final)  # the proof does not verify either
    forged = ScramCredential(fake.salt, fake.stored_key, b"\0" * 32, fake.iterations)
    with pytest.raises(AuthenticationError, match="Invalid server signature"):
        client.verify(b"v=" + base64.b64encode(forged.server_key))


def test_authzid_other_than_user_is_refused_with_a_public_message() -> None:
    server = ScramServer(SHA256, store_with("alice", "s").get)
    with pytest.raises(AuthenticationError) as info:
        server.step(ScramClient(SHA256, "alice", "s", authzid="admin").first())
    assert info.value.public
    assert info.value.client_message() == (
        "Authentication failed: Client requested an authorization id that is different from "
        "username"
    )
    same = ScramServer(SHA256, store_with("alice", "s").get)
    client = ScramClient(SHA256, "alice", "s", authzid="alice")
    client.verify(same.step(client.final(same.step(client.first()))))
    assert same.principal == "alice"


def test_tokenauth_refused_without_delegation_tokens_and_accepted_with_them() -> None:
    store = store_with("tokenid", "hmac")
    server = ScramServer(SHA256, store.get)
    with pytest.raises(AuthenticationError) as info:
        server.step(ScramClient(SHA256, "tokenid", "hmac", extensions=TOKENAUTH).first())
    assert info.value.client_message() == GENERIC_256
    assert "Token Authentication failed" in str(info.value)

    token = DelegationToken("owner", generate_credential(SHA256, "hmac"), 1234)
    server = ScramServer(SHA256, store.get, tokens=lambda t, m: token if t == "tokenid" else None)
    client = ScramClient(SHA256, "tokenid", "hmac", extensions=TOKENAUTH)
    client.verify(server.step(client.final(server.step(client.first()))))
    assert server.principal == "owner" and server.credential_expiry_ms == 1234
    assert server.extensions == {"tokenauth": "true"}


def test_credential_below_minimum_iterations_is_refused() -> None:
    weak = ScramCredential(b"salt", b"k" * 32, b"k" * 32, 1024)
    with pytest.raises(AuthenticationError, match="Iterations 1024 is less than the minimum 4096"):
        ScramServer(SHA256, lambda u, m: weak).step(b"n,,n=u,r=abc")
    with pytest.raises(ValueError, match="less than the minimum 4096"):
        generate_credential(SHA256, "p", 4095)


@pytest.mark.parametrize(
    "message",
    [
        b"",
        b"y,,n=u,r=abc",  # channel binding flag other than n
        b"p=tls-unique,,n=u,r=abc",
        b"n,,n=u",
        b"n,,n=u=x,r=abc",  # '=' not followed by 2C/3D
        b"n,,n=u,r=a,b",
    ],
)
def test_malformed_client_first(message: bytes) -> None:
    with pytest.raises(AuthenticationError) as info:
        ScramServer(SHA256, store_with("u", "p").get).step(message)
    assert info.value.client_message() == GENERIC_256


def test_client_final_with_a_wrong_nonce_or_bad_format() -> None:
    for case, tamper in enumerate(
        (
            lambda final: final.replace(b",r=", b",r=x"),  # still ends with the nonce
            lambda final: final.replace(b",p=", b"zz,p="),
            lambda final: final[: final.index(b",p=")],
        )
    ):
        store = store_with("u", "p")
        server = ScramServer(SHA256, store.get)
        client = ScramClient(SHA256, "u", "p")
        final = tamper(client.final(server.step(client.first())))
        if case == 0:  # (a random nonce may itself start with "x": tell the cases by index)
            # Kafka checks that the nonce ends with the combined nonce; the auth message then
            # differs, so the proof fails.
            with pytest.raises(AuthenticationError, match="Invalid client credentials"):
                server.step(final)
            continue
        with pytest.raises(AuthenticationError) as info:
            server.step(final)
        assert info.value.client_message() == GENERIC_256


def test_credential_lookup_failure_is_not_disclosed() -> None:
    def broken(user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        raise OSError("zookeeper down")

    with pytest.raises(AuthenticationError) as info:
        ScramServer(SHA256, broken).step(b"n,,n=u,r=abc")
    assert info.value.client_message() == GENERIC_256
    assert "zookeeper down" in str(info.value)


def test_credential_string_is_kafkas_format() -> None:
    credential = ScramCredential(b"\x01\x02", b"stored", b"server", 8192)
    text = credential_to_string(credential)
    assert text == "salt=AQI=,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=8192"
    assert credential_from_string(text) == credential
    assert format_credential_entry(SHA256, credential) == "SCRAM-SHA-256=" + text
    for bad in (
        "salt=AQI=,stored_key=c3RvcmVk,server_key=c2VydmVy",
        "salt=AQI=,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=x",
        "salt=AQI=,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=1,extra=1",
        "=AQI=,stored_key=c3RvcmVk,server_key=c2VydmVy,iterations=1",
    ):
        with pytest.raises(ValueError, match="Credentials not valid"):
            credential_from_string(bad)


def test_user_config_round_trip_and_other_keys_ignored() -> None:
    creds = {SHA256: generate_credential(SHA256, "a"), SHA512: generate_credential(SHA512, "b")}
    config = credentials_to_user_config(creds)
    assert set(config) == {"SCRAM-SHA-256", "SCRAM-SHA-512"}
    config["producer_byte_rate"] = "1024"
    assert user_config_to_credentials(config) == creds


def test_generated_credential_verifies_with_kafka_python_salted_password() -> None:
    # What kafka-python's admin client sends (salt + SaltedPassword) gives the same keys.
    from kafka.admin._users import ScramMechanism as KpMechanism
    from kafka.admin._users import UserScramCredentialUpsertion

    upsertion = UserScramCredentialUpsertion("bob", KpMechanism.SCRAM_SHA_512, "pw", 8192)
    ours = generate_credential(SHA512, "pw", 8192, salt=upsertion.salt)
    assert SHA512.salted_password("pw", upsertion.salt, 8192) == upsertion.salted_password
    assert ours.iterations == 8192


def test_saslname_and_sanitizer() -> None:
    assert saslname_from_username("a=b,c") == "a=3Db=2Cc"
    assert username_from_saslname("a=3Db=2Cc") == "a=b,c"
    with pytest.raises(ValueError):
        username_from_saslname("a=b")
    # Java's URLEncoder: space '+', then Kafka turns it into %20; '*' %2A; '~' encoded.
    assert sanitize_user("user 1*x~é.-_") == "user%201%2Ax%7E%C3%A9.-_"
    assert desanitize_user("user%201%2Ax%7E%C3%A9.-_") == "user 1*x~é.-_"
    assert repr(generate_credential(SHA256, "secret")).count("hidden") == 2
