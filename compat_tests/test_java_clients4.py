"""kafka-clients 4.4.0 (from Maven, scripts/setup.sh) against a real `odradek serve` process over
PLAINTEXT and against an odradek broker over SASL_SSL (SCRAM-SHA-256, odradek.testing's
security set-up): Admin (createTopics, describeCluster, listOffsets, a share group's config
through incrementalAlterConfigs), the idempotent producer, a consumer group with the classic
protocol and one with `group.protocol=consumer` (KIP-848), and a `KafkaShareConsumer` (KIP-932),
all in compat_tests/java4/Clients4.java."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from compat_tests.harness import BrokerProcess
from compat_tests.java_harness import JavaPrograms, JavaResult, kafka_lib_classpath
from odradek.testing import Broker

pytestmark = pytest.mark.compat

SOURCES = Path(__file__).resolve().parent / "java4"
COUNT = 40
USERS = {"alice": "alice-secret"}


@pytest.fixture(scope="module")
def java4(tmp_path_factory: pytest.TempPathFactory) -> JavaPrograms:
    return JavaPrograms(
        tmp_path_factory.mktemp("java4"), kafka_lib_classpath("4.4.0"), source_dir=SOURCES
    )


def check(result: JavaResult) -> None:
    explain = (
        f"Clients4 exited {result.returncode}\n--- stdout ---\n{result.stdout}\n"
        f"--- stderr ---\n{result.stderr[-8000:]}"
    )
    lines = result.stdout.splitlines()
    assert result.returncode == 0 and lines[-1:] == ["DONE"], explain
    assert lines[0] == "OK admin nodes=1", explain
    assert lines[1:3] == [f"OK produce {COUNT}", f"OK listoffsets end={COUNT}"], explain
    assert lines[3] == f"OK classic records={COUNT} committed={COUNT}", explain
    assert lines[4] == f"OK consumer records={COUNT} committed={COUNT}", explain
    # every record delivered to the share consumer, each once (acknowledged as it goes)
    assert lines[5] == f"OK share records={COUNT} distinct={COUNT}", explain


def test_java4_clients_plaintext(java4: JavaPrograms, broker: BrokerProcess) -> None:
    name = f"j4-{uuid.uuid4().hex[:8]}"
    check(java4.run("Clients4", "-", broker.bootstrap, name, name, str(COUNT), timeout=240))


def test_java4_clients_sasl_ssl(java4: JavaPrograms, tmp_path: Path) -> None:
    broker = Broker(
        config={"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"},
        security="sasl_ssl",
        mechanism="SCRAM-SHA-256",
        users=USERS,
    ).start()
    try:
        props = broker.security.write_properties(
            str(tmp_path / "client.properties"), broker.bootstrap, "alice"
        )
        name = f"j4s-{uuid.uuid4().hex[:8]}"
        check(java4.run("Clients4", props, broker.bootstrap, name, name, str(COUNT), timeout=240))
    finally:
        broker.stop()
