"""The Go (franz-go, sarama) and KafkaJS scenarios of compat_tests/ against odradek and
Apache Kafka 4.4 side by side: the same program and the same checks on both, so a failure on
odradek alone is odradek's, and one on both is the test's."""

from __future__ import annotations

import pytest

from compat_tests import test_kafkajs as kjs
from compat_tests import test_sarama as srm
from compat_tests.harness import BrokerProcess, unique_name
from compat_tests.polyglot_harness import GoPrograms, NodePrograms
from compat_tests.reference.kafka_ref import KafkaReference
from compat_tests.test_franz_go import (
    check_admin_ops,
    check_group,
    check_produce_case,
    check_share,
    check_txn,
    run_admin_ops,
    run_group,
    run_produce,
    run_share,
    run_txn,
)


@pytest.fixture(params=["odradek", "kafka-4.4"])
def bootstrap(request: pytest.FixtureRequest, odradek_broker: BrokerProcess) -> str:
    if request.param == "odradek":
        return odradek_broker.bootstrap
    kafka: KafkaReference = request.getfixturevalue("kafka44")
    return kafka.bootstrap


def test_franz_go_produce_txn_group(go_clients: GoPrograms, bootstrap: str) -> None:
    name = unique_name("franz-ref")
    check_group(run_group(go_clients, bootstrap, f"{name}-grp", "classic", "range"))
    produced = run_produce(go_clients, bootstrap, name)
    for codec, acks in [("zstd", "all"), ("gzip", "1")]:
        check_produce_case(produced, codec, acks)
    check_txn(run_txn(go_clients, bootstrap, f"{name}-txn"))


def test_franz_go_share_group(go_clients: GoPrograms, bootstrap: str) -> None:
    check_share(run_share(go_clients, bootstrap, unique_name("franz-share-ref")))


def test_kadm_admin_ops(go_clients: GoPrograms, bootstrap: str) -> None:
    name = unique_name("kadm-ops-ref")
    check_admin_ops(run_admin_ops(go_clients, bootstrap, name), name)


def test_kafkajs_produce_txn_group(node_clients: NodePrograms, bootstrap: str) -> None:
    name = unique_name("kafkajs-ref")
    kjs.check_group(kjs.run_group(node_clients, bootstrap, f"{name}-grp"))
    cases = [("lz4", "all"), ("zstd", "all"), ("gzip", "1")]  # the codec packages, acks=1
    produced = kjs.run_produce(node_clients, bootstrap, name, cases)
    for codec, acks in cases:
        kjs.check_produce_case(produced, codec, acks)
    kjs.check_txn(kjs.run_txn(node_clients, bootstrap, f"{name}-txn"))


@pytest.mark.parametrize("version", srm.VERSIONS)
def test_sarama_produce_txn_group(go_clients: GoPrograms, bootstrap: str, version: str) -> None:
    name = unique_name(f"sarama-ref-{version}")
    srm.check_group(srm.run_group(go_clients, bootstrap, f"{name}-grp", "sticky", version))
    produced = srm.run_produce(go_clients, bootstrap, name, version)
    for codec, acks in srm.CASES:
        srm.check_produce_case(produced, codec, acks)
    srm.check_txn(srm.run_txn(go_clients, bootstrap, f"{name}-txn", version))
