"""SASL listeners of a real broker (issue 14), through real clients.

PLAIN users come from the listener's JAAS config as Kafka reads them; OAUTHBEARER uses Kafka's
unsecured JWS validator. A wrong password is answered SASL_AUTHENTICATION_FAILED with Kafka's
message and the connection closed; a request before authentication closes the connection; an
unknown mechanism gets UNSUPPORTED_SASL_MECHANISM; none of it affects other clients."""

from __future__ import annotations

import confluent_kafka as ck
import pytest
from kafka import KafkaConsumer, KafkaProducer
from kafka.protocol.metadata import MetadataRequest

from odradek.testing import Broker
from odradek.testing.raw import RawClient
from odradek.wire import protocol
from odradek.wire.errors import ErrorCode
from tests.cli.cli_run import run_odradek

TIMEOUT_S = 20.0
JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    'username="admin" password="admin-secret" '
    'user_admin="admin-secret" user_alice="alice-secret";'
)


@pytest.fixture(scope="module")
def broker():
    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
    }
    with Broker(topics={"t": 1}, config=config) as b:
        yield b


def ck_conf(broker, mechanism: str = "PLAIN", **extra) -> dict:
    return {
        "bootstrap.servers": broker.bootstrap,
        "security.protocol": "SASL_PLAINTEXT",
        "sasl.mechanism": mechanism,
        **extra,
    }


def ck_produce(conf: dict, values: list[bytes], timeout_ms: int = 10_000) -> list[str]:
    errors: list[str] = []
    producer = ck.Producer({**conf, "message.timeout.ms": timeout_ms})
    for v in values:
        producer.produce("t", value=v, on_delivery=lambda e, m: e and errors.append(e.name()))
    producer.flush(TIMEOUT_S)
    return errors


def test_plain_users_produce_and_consume_with_confluent_kafka(broker):
    conf = ck_conf(broker, **{"sasl.username": "alice", "sasl.password": "alice-secret"})
    assert ck_produce(conf, [b"p1", b"p2"]) == []
    consumer = ck.Consumer({**conf, "group.id": "sasl-g", "auto.offset.reset": "earliest"})
    consumer.subscribe(["t"])
    got = set()
    try:
        for _ in range(200):
            msg = consumer.poll(0.1)
            if msg is not None and not msg.error():
                got.add(msg.value())
            if {b"p1", b"p2"} <= got:
                break
        # the consumer's connections carry its authenticated principal
        principals = broker.call(lambda b: {c.principal for c in b.connections})
    finally:
        consumer.close()
    assert {b"p1", b"p2"} <= got
    assert "User:alice" in principals


def test_kafka_python_plain(broker):
    kw = dict(
        bootstrap_servers=broker.bootstrap,
        security_protocol="SASL_PLAINTEXT",
        sasl_mechanism="PLAIN",
        sasl_plain_username="admin",
        sasl_plain_password="admin-secret",
    )
    producer = KafkaProducer(**kw)
    producer.send("t", b"kp-plain").get(timeout=TIMEOUT_S)
    producer.close()
    consumer = KafkaConsumer("t", auto_offset_reset="earliest", consumer_timeout_ms=10_000, **kw)
    values = []
    for msg in consumer:
        values.append(msg.value)
        if b"kp-plain" in values:
            break
    consumer.close()
    assert b"kp-plain" in values


def test_a_wrong_password_fails_with_kafkas_message_and_nothing_is_written(broker):
    before = broker.call(lambda b: b.topics.get("t", 0).log.log_end_offset)
    reported: list[ck.KafkaError] = []
    conf = ck_conf(
        broker,
        **{"sasl.username": "alice", "sasl.password": "wrong", "error_cb": reported.append},
    )
    # the record times out rather than being refused: 3 s of librdkafka's retries, not 10
    errors = ck_produce(conf, [b"never"], timeout_ms=3_000)
    assert errors, "a producer with a wrong password must not deliver"
    assert any(
        e.code() == ck.KafkaError._AUTHENTICATION
        and "Authentication failed: Invalid username or password" in e.str()
        for e in reported
    ), reported
    assert broker.call(lambda b: b.topics.get("t", 0).log.log_end_offset) == before

    with RawClient(broker.bootstrap) as raw:
        hs = raw.request(protocol.SaslHandshakeRequest(mechanism="PLAIN"), 1)
        assert hs.error_code == ErrorCode.NONE
        auth = raw.request(protocol.SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00wrong"), 2)
        assert auth.error_code == ErrorCode.SASL_AUTHENTICATION_FAILED
        assert auth.error_message == "Authentication failed: Invalid username or password"
        assert raw.outcome(5.0) == "closed"


def test_requests_before_authentication_close_the_connection(broker):
    with RawClient(broker.bootstrap) as raw:
        # ApiVersions is answered before authentication, with the SASL keys advertised
        versions = raw.request(protocol.ApiVersionsRequest(), 0)
        keys = {k[0] if isinstance(k, tuple) else k.api_key for k in versions.api_keys}
        assert {17, 36} <= keys
        _cid, data = raw.encode(MetadataRequest(topics=None), 4)
        raw.send(data)
        assert raw.outcome(5.0) == "closed"


def test_an_unknown_mechanism_gets_the_enabled_list(broker):
    with RawClient(broker.bootstrap) as raw:
        hs = raw.request(protocol.SaslHandshakeRequest(mechanism="GSSAPI"), 1)
        assert hs.error_code == ErrorCode.UNSUPPORTED_SASL_MECHANISM
        assert sorted(hs.mechanisms) == ["OAUTHBEARER", "PLAIN"]
        assert raw.outcome(5.0) == "closed"


def test_oauthbearer_with_the_unsecured_validator(broker):
    conf = ck_conf(
        broker,
        "OAUTHBEARER",
        **{
            "sasl.oauthbearer.config": "principal=bob",
            "enable.sasl.oauthbearer.unsecure.jwt": True,
        },
    )
    assert ck_produce(conf, [b"oauth"]) == []


def test_a_sasl_listener_without_plain_users_stops_the_broker(tmp_path):
    out = run_odradek(
        "serve",
        "--override",
        "listeners=SASL_PLAINTEXT://127.0.0.1:0",
        "--override",
        "sasl.enabled.mechanisms=PLAIN",
        "--override",
        "sasl.mechanism.inter.broker.protocol=PLAIN",
        "--override",
        f"log.dirs={tmp_path}",
        status=1,
    )
    assert "PLAIN needs users" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_sessions_expire_and_clients_reauthenticate_kip_368(tmp_path):
    """connections.max.reauth.ms: the session lifetime is announced in SaslAuthenticate v1+,
    the client may re-authenticate on the same connection, and a request after the session
    ended closes the connection (Kafka's expired-session rule)."""
    import time

    config = {
        "listeners": "SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "PLAIN",
        "sasl.mechanism.inter.broker.protocol": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS,
        "connections.max.reauth.ms": 1500,
    }

    def login(raw: RawClient) -> int:
        hs = raw.request(protocol.SaslHandshakeRequest(mechanism="PLAIN"), 1)
        assert hs.error_code == ErrorCode.NONE
        auth = raw.request(
            protocol.SaslAuthenticateRequest(auth_bytes=b"\x00alice\x00alice-secret"), 1
        )
        assert auth.error_code == ErrorCode.NONE, auth
        return auth.session_lifetime_ms

    with Broker(config=config) as broker, RawClient(broker.bootstrap) as raw:
        assert 0 < login(raw) <= 1500
        assert raw.request(MetadataRequest(topics=[]), 4).brokers
        time.sleep(1.1)  # re-authentication is allowed once a second (KIP-368)
        assert 0 < login(raw) <= 1500  # the same connection, a fresh session
        assert raw.request(MetadataRequest(topics=[]), 4).brokers
        time.sleep(1.7)  # past the session's end
        _cid, data = raw.encode(MetadataRequest(topics=[]), 4)
        raw.send(data)
        assert raw.outcome(5.0) == "closed"


def test_a_v0_handshake_takes_bare_sasl_tokens(broker):
    """SaslHandshake v0 (Kafka before 1.0): the token that follows is a size-prefixed frame
    without a request header, and so is the answer; the connection is then authenticated."""
    import struct

    with RawClient(broker.bootstrap) as raw:
        hs = raw.request(protocol.SaslHandshakeRequest(mechanism="PLAIN"), 0)
        assert hs.error_code == ErrorCode.NONE
        token = b"\x00alice\x00alice-secret"
        raw.send(struct.pack(">i", len(token)) + token)
        assert raw.read_frame(5.0) == b""  # PLAIN's (empty) server token
        assert raw.request(MetadataRequest(topics=[]), 4).brokers
