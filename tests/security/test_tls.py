"""SSL listeners (issue 14): TLS with a server certificate, and mutual TLS, through real clients.

Before: `listeners=SSL://...` was served as plaintext (a TLS client failed its handshake while
the broker logged a 369 MB frame). Now the listener speaks TLS with the configured key store;
a plaintext client on it gets a closed connection; with ssl.client.auth=required a client
without a certificate signed by the truststore's CA cannot connect."""

from __future__ import annotations

import socket
import ssl
from typing import Any

import confluent_kafka as ck
import confluent_kafka.admin
import pytest
from kafka import KafkaConsumer, KafkaProducer

from odradek.testing import Broker
from odradek.testing.certs import TlsMaterial
from tests.cli.cli_run import run_odradek

TIMEOUT_S = 20.0


@pytest.fixture
def tls(tmp_path) -> TlsMaterial:
    return TlsMaterial(str(tmp_path / "tls"))


def ssl_broker(tls: TlsMaterial, client_auth: str = "none") -> Broker:
    return Broker(
        topics={"t": 1},
        config={"listeners": "SSL://127.0.0.1:0", **tls.broker_config(client_auth)},
    )


def ck_round_trip(bootstrap: str, extra: dict[str, str]) -> list[bytes]:
    conf = {"bootstrap.servers": bootstrap, "security.protocol": "SSL", **extra}
    producer = ck.Producer(conf)
    for i in range(5):
        producer.produce("t", value=b"v%d" % i)
    assert producer.flush(TIMEOUT_S) == 0
    consumer = ck.Consumer({**conf, "group.id": "g", "auto.offset.reset": "earliest"})
    consumer.subscribe(["t"])
    got: list[bytes] = []
    try:
        for _ in range(200):
            msg = consumer.poll(0.1)
            if msg is not None and not msg.error():
                got.append(msg.value())
            if len(got) == 5:
                break
    finally:
        consumer.close()
    return got


def test_confluent_kafka_and_kafka_python_over_tls(tls):
    with ssl_broker(tls) as broker:
        got = ck_round_trip(broker.bootstrap, {"ssl.ca.location": tls.ca})
        assert got == [b"v%d" % i for i in range(5)]

        producer = KafkaProducer(
            bootstrap_servers=broker.bootstrap, security_protocol="SSL", ssl_cafile=tls.ca
        )
        producer.send("t", b"from kafka-python").get(timeout=TIMEOUT_S)
        producer.close()
        consumer = KafkaConsumer(
            "t",
            bootstrap_servers=broker.bootstrap,
            security_protocol="SSL",
            ssl_cafile=tls.ca,
            auto_offset_reset="earliest",
            consumer_timeout_ms=10_000,
        )
        values = []
        for msg in consumer:
            values.append(msg.value)
            if len(values) == 6:
                break
        consumer.close()
        assert values[-1] == b"from kafka-python"


def test_a_plaintext_client_on_a_tls_listener_is_closed_and_others_are_unaffected(tls):
    with ssl_broker(tls) as broker:
        host, port = broker.bootstrap.rsplit(":", 1)
        with socket.create_connection((host, int(port)), timeout=5) as sock:
            # an ApiVersions request in plaintext: not a TLS record, the broker closes
            sock.sendall(b"\x00\x00\x00\x0e\x00\x12\x00\x00\x00\x00\x00\x01\x00\x04test")
            sock.settimeout(5)
            try:
                data = sock.recv(4096)
            except ConnectionResetError:
                data = b""
            assert not data.startswith(b"\x00\x00"), data  # no Kafka response in plaintext
        got = ck_round_trip(broker.bootstrap, {"ssl.ca.location": tls.ca})
        assert len(got) == 5


def test_mutual_tls_requires_a_certificate_from_the_trusted_ca(tls, tmp_path):
    alice = tls.client("alice")
    with ssl_broker(tls, "required") as broker:
        got = ck_round_trip(
            broker.bootstrap,
            {
                "ssl.ca.location": tls.ca,
                "ssl.certificate.location": alice.cert,
                "ssl.key.location": alice.key,
            },
        )
        assert len(got) == 5
        host, port = broker.bootstrap.rsplit(":", 1)
        ctx = ssl.create_default_context(cafile=tls.ca)
        with socket.create_connection((host, int(port)), timeout=5) as raw:
            # TLS 1.3: the server checks the client certificate after the client's handshake
            # ends; the refusal arrives as an alert on the first read
            with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError)):
                with ctx.wrap_socket(raw, server_hostname=host) as tls_sock:
                    tls_sock.sendall(
                        b"\x00\x00\x00\x0e\x00\x12\x00\x00\x00\x00\x00\x01\x00\x04test"
                    )
                    tls_sock.settimeout(5)
                    if not tls_sock.recv(4096):
                        raise ConnectionResetError("closed")


def principals_of_a_tls_client(broker: Broker, tls: TlsMaterial, client: Any) -> list[str]:
    """Connect with `client`'s certificate, have ApiVersions answered over TLS, and return the
    principals of the broker's connections meanwhile."""
    host, port = broker.bootstrap.rsplit(":", 1)
    ctx = ssl.create_default_context(cafile=tls.ca)
    ctx.load_cert_chain(client.cert, client.key)
    with socket.create_connection((host, int(port)), timeout=5) as raw:
        with ctx.wrap_socket(raw, server_hostname=host) as s:
            s.sendall(b"\x00\x00\x00\x0e\x00\x12\x00\x00\x00\x00\x00\x01\x00\x04test")
            s.settimeout(5)
            assert s.recv(4096)[:4] != b""  # ApiVersions answered over TLS
            return broker.call(lambda b: sorted(c.principal for c in b.connections))


def test_a_client_certificate_names_the_principal(tls):
    alice = tls.client("alice")
    with ssl_broker(tls, "requested") as broker:
        principals = principals_of_a_tls_client(broker, tls, alice)
        assert principals == [f"User:{alice.subject}"]


def test_an_ssl_listener_without_a_certificate_stops_the_broker_with_one_line(tmp_path):
    out = run_odradek(
        "serve",
        "--override",
        "listeners=SSL://127.0.0.1:0",
        "--override",
        f"log.dirs={tmp_path}",
        status=1,
    )
    assert "no server certificate" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1, out.stderr


def test_principal_mapping_rules_shorten_the_subject(tls):
    alice = tls.client("Alice")
    broker = Broker(
        config={
            "listeners": "SSL://127.0.0.1:0",
            **tls.broker_config("required"),
            "ssl.principal.mapping.rules": "RULE:^.*CN=([a-zA-Z]+).*$/$1/L,DEFAULT",
        }
    )
    with broker:
        principals = principals_of_a_tls_client(broker, tls, alice)
    assert principals == ["User:alice"]


def test_several_listeners_each_answer_with_their_own_endpoints(tls):
    """Metadata names the brokers by the listener the client came in on (Kafka's
    listener-name routing): a TLS client is never sent to the plaintext port, nor back."""
    config = {
        "listeners": "INTERNAL://127.0.0.1:0,EXTERNAL://127.0.0.1:0",
        "listener.security.protocol.map": "INTERNAL:PLAINTEXT,EXTERNAL:SSL",
        "inter.broker.listener.name": "INTERNAL",
        **tls.broker_config(),
    }
    with Broker(topics={"t": 1}, config=config) as broker:
        bound = broker.call(lambda b: {x.name: x.port for x in b.bound})
        assert set(bound) == {"INTERNAL", "EXTERNAL"}
        for name, extra in (
            ("INTERNAL", {}),
            ("EXTERNAL", {"security.protocol": "SSL", "ssl.ca.location": tls.ca}),
        ):
            admin = ck.admin.AdminClient({"bootstrap.servers": f"127.0.0.1:{bound[name]}", **extra})
            brokers = admin.list_topics(timeout=TIMEOUT_S).brokers
            assert [(b.host, b.port) for b in brokers.values()] == [("127.0.0.1", bound[name])]


def test_a_pkcs12_keystore_serves_tls(tls, tmp_path):
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import (
        BestAvailableEncryption,
        load_pem_private_key,
        pkcs12,
    )

    key = load_pem_private_key(tls.server_key_pem.encode(), None)
    cert = x509.load_pem_x509_certificate(tls.server_cert_pem.encode())
    store = tmp_path / "server.p12"
    store.write_bytes(
        pkcs12.serialize_key_and_certificates(
            b"broker", key, cert, None, BestAvailableEncryption(b"store-secret")
        )
    )
    config = {
        "listeners": "SSL://127.0.0.1:0",
        "ssl.keystore.type": "PKCS12",
        "ssl.keystore.location": str(store),
        "ssl.keystore.password": "store-secret",
    }
    with Broker(topics={"t": 1}, config=config) as broker:
        assert len(ck_round_trip(broker.bootstrap, {"ssl.ca.location": tls.ca})) == 5
    bad = {**config, "ssl.keystore.password": "wrong"}
    with pytest.raises(Exception, match="wrong password"):
        Broker(config=bad).start()
