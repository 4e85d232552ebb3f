"""A server.properties with TLS in Java key stores starts unchanged: `odradek serve` reads
`ssl.keystore.type=JKS` (Kafka's default) and PKCS12 stores made by Java's keytool, with
Kafka's keys (ssl.keystore.location / password, ssl.key.password, ssl.truststore.location /
password), and real clients (confluent-kafka) produce and consume over TLS, with a client
certificate checked against a JKS trust store too."""

from __future__ import annotations

import contextlib
import queue
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka
import pytest
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.harness import free_port
from odradek.testing.certs import TlsMaterial
from tests.cli.cli_run import run_odradek, start_odradek

pytestmark = pytest.mark.skipif(shutil.which("keytool") is None, reason="needs Java's keytool")

STORE_PASSWORD = "store-secret"
KEY_PASSWORD = "key-secret"
TRUST_PASSWORD = "trust-secret"
READY_S = 30.0


def keytool(*args: str) -> None:
    proc = subprocess.run(["keytool", *args], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def make_keystore(directory: Path, storetype: str) -> tuple[Path, Path]:
    """A broker key pair made by keytool in a `storetype` store (a JKS store's key has its own
    password), and its certificate as PEM for the clients."""
    store = directory / f"broker.{storetype.lower()}"
    key_password = KEY_PASSWORD if storetype == "JKS" else STORE_PASSWORD  # PKCS12: one password
    keytool(
        "-genkeypair", "-alias", "broker", "-keyalg", "RSA", "-keysize", "2048",
        "-validity", "2", "-dname", "CN=localhost", "-ext", "SAN=ip:127.0.0.1,dns:localhost",
        "-keystore", str(store), "-storetype", storetype,
        "-storepass", STORE_PASSWORD, "-keypass", key_password,
    )  # fmt: skip
    cert = directory / "broker-cert.pem"
    keytool(
        "-exportcert", "-rfc", "-alias", "broker", "-keystore", str(store),
        "-storetype", storetype, "-storepass", STORE_PASSWORD, "-file", str(cert),
    )  # fmt: skip
    return store, cert


def make_truststore(directory: Path, ca_pem: str) -> Path:
    store = directory / "truststore.jks"
    keytool(
        "-importcert", "-noprompt", "-alias", "client-ca", "-file", ca_pem,
        "-keystore", str(store), "-storetype", "JKS", "-storepass", TRUST_PASSWORD,
    )  # fmt: skip
    return store


@contextlib.contextmanager
def serve(properties: Path) -> Iterator[str]:
    """`odradek serve server.properties` until the test ends; yields its SSL bootstrap."""
    proc, lines = start_odradek("serve", str(properties))
    try:
        deadline = time.monotonic() + READY_S
        while True:
            assert proc.poll() is None, f"odradek serve ended with status {proc.returncode}"
            try:
                line = lines.get(timeout=max(deadline - time.monotonic(), 0.01))
            except queue.Empty:
                raise AssertionError("odradek serve did not get ready") from None
            if "odradek ready" in line:
                break
        yield line.split("SSL://", 1)[1].split()[0].split(",")[0]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def roundtrip(bootstrap: str, tls: dict[str, str], topic: str) -> list[bytes]:
    common = {"bootstrap.servers": bootstrap, "security.protocol": "SSL", **tls}
    admin = AdminClient(common)
    admin.create_topics([NewTopic(topic, 1, 1)])[topic].result(timeout=30)
    producer = confluent_kafka.Producer(common)
    for i in range(3):
        producer.produce(topic, b"v%d" % i)
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer(
        {**common, "group.id": "g", "auto.offset.reset": "earliest"}
    )
    got: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while len(got) < 3 and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None and message.error() is None:
                got.append(message.value())
    finally:
        consumer.close()
    return got


def write_properties(path: Path, data_dir: Path, **ssl: str) -> Path:
    lines = [
        f"listeners=SSL://127.0.0.1:{free_port()}",
        f"log.dirs={data_dir}",
        "group.initial.rebalance.delay.ms=0",
        *(f"{key.replace('_', '.')}={value}" for key, value in ssl.items()),
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("declared", "made"),
    [("JKS", "JKS"), ("PKCS12", "PKCS12"), ("JKS", "PKCS12")],
    ids=["jks", "pkcs12", "pkcs12-declared-jks"],
)
def test_broker_serves_tls_from_a_keytool_store(tmp_path: Path, declared: str, made: str) -> None:
    store, cert = make_keystore(tmp_path, made)
    props = write_properties(
        tmp_path / "server.properties",
        tmp_path / "data",
        ssl_keystore_type=declared,
        ssl_keystore_location=str(store),
        ssl_keystore_password=STORE_PASSWORD,
        ssl_key_password=KEY_PASSWORD if made == "JKS" else STORE_PASSWORD,
    )
    with serve(props) as bootstrap:
        assert roundtrip(bootstrap, {"ssl.ca.location": str(cert)}, "orders") == [
            b"v0",
            b"v1",
            b"v2",
        ]


def test_client_certificates_checked_against_a_jks_truststore(tmp_path: Path) -> None:
    store, cert = make_keystore(tmp_path, "JKS")
    clients = TlsMaterial(str(tmp_path / "clients"))
    alice = clients.client("alice")
    truststore = make_truststore(tmp_path, clients.ca)
    props = write_properties(
        tmp_path / "server.properties",
        tmp_path / "data",
        ssl_keystore_location=str(store),  # no ssl.keystore.type: Kafka's default, JKS
        ssl_keystore_password=STORE_PASSWORD,
        ssl_key_password=KEY_PASSWORD,
        ssl_truststore_location=str(truststore),
        ssl_truststore_password=TRUST_PASSWORD,
        ssl_client_auth="required",
    )
    with serve(props) as bootstrap:
        tls = {
            "ssl.ca.location": str(cert),
            "ssl.certificate.location": alice.cert,
            "ssl.key.location": alice.key,
        }
        assert roundtrip(bootstrap, tls, "payments") == [b"v0", b"v1", b"v2"]


def test_wrong_store_password_is_one_line(tmp_path: Path) -> None:
    store, _cert = make_keystore(tmp_path, "JKS")
    props = write_properties(
        tmp_path / "server.properties",
        tmp_path / "data",
        ssl_keystore_location=str(store),
        ssl_keystore_password="not-the-password",
        ssl_key_password=KEY_PASSWORD,
    )
    proc = run_odradek("serve", str(props), status=1)
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "password is wrong" in lines[0], proc.stderr


def test_cli_command_config_with_a_jks_truststore(tmp_path: Path) -> None:
    """A Kafka client.properties with a JKS trust store works as `--command-config`."""
    store, cert = make_keystore(tmp_path, "JKS")
    client_trust = make_truststore(tmp_path, str(cert))
    client_props = tmp_path / "client.properties"
    client_props.write_text(
        "security.protocol=SSL\n"
        f"ssl.truststore.location={client_trust}\n"
        f"ssl.truststore.password={TRUST_PASSWORD}\n"
    )
    props = write_properties(
        tmp_path / "server.properties",
        tmp_path / "data",
        ssl_keystore_location=str(store),
        ssl_keystore_password=STORE_PASSWORD,
        ssl_key_password=KEY_PASSWORD,
    )
    with serve(props) as bootstrap:
        run_odradek("topics", "create", "audit", "--command-config", str(client_props),
                    bootstrap=bootstrap)  # fmt: skip
        listed = run_odradek(
            "topics", "list", "--command-config", str(client_props), bootstrap=bootstrap
        )
        assert "audit" in listed.stdout.split()
