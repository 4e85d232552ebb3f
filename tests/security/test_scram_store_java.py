"""SCRAM credential management checked against Kafka's own Java classes (kafka-clients 3.9 via
the Java harness, tests/security/java/ScramStoreOracle.java): the Java Admin client's
alterUserScramCredentials / describeUserScramCredentials against a broker get Kafka's answers
(DuplicateResourceException for two changes of one user, UnacceptableCredentialException for
too few iterations, ResourceNotFoundException for a missing credential); the credential string
the broker stores for an upsertion is exactly what Kafka's ScramFormatter and
ScramCredentialUtils make of the same salt, password and iterations; and the Java client then
logs in with SCRAM-SHA-256 on the broker's SASL_PLAINTEXT listener (a wrong password fails)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.java_harness import JavaPrograms
from odradek.testing import Broker

JAVA_SOURCES = Path(__file__).resolve().parent / "java"


@pytest.fixture(scope="module")
def oracle(tmp_path_factory: pytest.TempPathFactory) -> JavaPrograms:
    return JavaPrograms(tmp_path_factory.mktemp("scram-oracle"), source_dir=JAVA_SOURCES)


@pytest.fixture
def broker() -> Iterator[Broker]:
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0",
        "sasl.enabled.mechanisms": "SCRAM-SHA-256,SCRAM-SHA-512",
    }
    with Broker(config=config) as b:
        yield b


def test_java_admin_manages_credentials_in_kafkas_format(
    oracle: JavaPrograms, broker: Broker
) -> None:
    assert broker.server is not None
    sasl = broker.server.bound[1]
    assert sasl.name == "SASL_PLAINTEXT"
    rc, out, err = oracle.run(
        "ScramStoreOracle", broker.bootstrap, f"127.0.0.1:{sasl.port}", timeout=120
    )
    assert rc == 0, err
    lines = out.splitlines()
    credential = next(line for line in lines if line.startswith("credential "))
    assert [line for line in lines if not line.startswith("credential ")] == [
        "alter alice ok",
        "alter bob ok",
        "alter carol DuplicateResourceException",
        "alter dave UnacceptableCredentialException",
        "alter erin ResourceNotFoundException",
        "alter bob ok",
        "alter bob ok",
        "describe alice SCRAM-SHA-256 8192",
        "describe bob SCRAM-SHA-256 4096",
        "describe-one alice ok",
        "describe-one nobody ResourceNotFoundException",
        "login alice:alice-secret ok",
        "login alice:wrong SaslAuthenticationException",
    ]
    stored = broker.server.store.scram_credentials
    assert stored["alice"] == {"SCRAM-SHA-256": credential.removeprefix("credential ")}
    assert set(stored) == {"alice", "bob"}
