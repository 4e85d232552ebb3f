"""KafkaJS (pinned in compat_tests/js/package-lock.json) against a real `odradek serve`.

compat_tests/js/kafkajs.js runs each scenario and prints what it saw:

- produce: none, gzip, snappy (kafkajs-snappy), lz4 (@2l/kafkajs-lz4, prebuilt lz4-napi) and
  zstd (zstd-codec, WebAssembly, wrapped as a KafkaJS codec in kafkajs.js) with acks=all
  (idempotent) and gzip with acks=1; the records back through a consumer group in order with
  keys, headers (a repeated one) and timestamps; fetchTopicOffsets and fetchTopicOffsetsByTimestamp.
- group: two members, one with eachMessage and one with eachBatch, the partitions split
  between them before the records are written; together they read every record.
- txn: an aborted transaction, then a committed one with sendOffsets; a read_committed
  consumer sees only the committed records, a read_uncommitted one the aborted ones too.
- admin: createTopics (and again), createPartitions, describeConfigs / alterConfigs (and a
  bad value), fetchTopicOffsets, setOffsets / fetchOffsets, listGroups, deleteTopics.
- sasl: SASL_SSL with PLAIN and SCRAM: a round trip as a user; a wrong password is refused.
- acl: on a SASL_SSL PLAIN listener with StandardAuthorizer, createAcls / describeAcls /
  deleteAcls as the super user; the user's produce denied before the ACLs, allowed after.

KafkaJS ships no LZ4 or ZSTD codec; KafkaJS's own ZSTD package (@kafkajs/zstd) builds a native
addon that does not compile against Node 20's headers, hence zstd-codec.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from compat_tests import polyglot_checks as scenarios
from compat_tests.harness import BrokerProcess, unique_name
from compat_tests.polyglot_checks import check_records, expected, first_offset_at, sasl_spec
from compat_tests.polyglot_harness import NodePrograms, start_sasl_ssl_broker
from compat_tests.test_cluster import ClusterProcess
from odradek.testing.security import Security

pytestmark = pytest.mark.compat

SCRIPT = "kafkajs.js"
PARTITIONS = 3
COUNT = 40
CODEC_CASES = [(c, "all") for c in ("none", "gzip", "snappy", "lz4", "zstd")]
CASES = [*CODEC_CASES, ("gzip", "1")]
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def run_produce(
    node: NodePrograms,
    bootstrap: str,
    prefix: str,
    which: list[tuple[str, str]] | None = None,
    replicas: int = 1,
) -> dict[str, Any]:
    spec = scenarios.produce_spec(bootstrap, prefix, which or CASES, COUNT, PARTITIONS, replicas)
    out = node.run(SCRIPT, "produce", spec, timeout=150)
    out["base_ts"] = spec["base_ts"]
    return out


def check_produce_case(run: dict[str, Any], codec: str, acks: str) -> None:
    (case,) = [c for c in run["cases"] if c["codec"] == codec and c["acks"] == acks]
    assert sorted(case["sent"]) == [[p, 0] for p in range(PARTITIONS)]
    check_records(case["records"], f"{codec}-{acks}", COUNT, PARTITIONS, run["base_ts"])
    per_partition = {str(p): len(range(p, COUNT, PARTITIONS)) for p in range(PARTITIONS)}
    assert case["end"] == per_partition
    assert case["start"] == dict.fromkeys(per_partition, 0)
    for i, offsets in case["by_time"].items():
        assert offsets == [first_offset_at(int(i), p, COUNT, PARTITIONS) for p in range(PARTITIONS)]


def run_group(node: NodePrograms, bootstrap: str, name: str, replicas: int = 1) -> dict[str, Any]:
    return node.run(SCRIPT, "group", scenarios.group_spec(bootstrap, name, replicas), timeout=90)


def check_group(out: dict[str, Any]) -> None:
    scenarios.check_group_split(out)
    assert out["a_read"] > 0 and out["b_read"] > 0
    assert out["a_read"] + out["b_read"] == out["distinct"], (
        "a record read twice without a rebalance"
    )


def run_txn(node: NodePrograms, bootstrap: str, name: str, replicas: int = 1) -> dict[str, Any]:
    spec = scenarios.txn_spec(bootstrap, name, 24, PARTITIONS, replicas)
    out = node.run(SCRIPT, "txn", spec, timeout=90)
    out["base_ts"] = spec["base_ts"]
    return out


def check_txn(out: dict[str, Any]) -> None:
    scenarios.check_aborted_then_committed(out, 24, PARTITIONS)


@pytest.fixture(scope="module")
def produced(node_clients: NodePrograms, broker: BrokerProcess) -> dict[str, Any]:
    return run_produce(node_clients, broker.bootstrap, unique_name("kafkajs-produce"))


@pytest.mark.parametrize(("codec", "acks"), CASES, ids=[f"{c}-acks{a}" for c, a in CASES])
def test_produce_and_read_back(produced: dict[str, Any], codec: str, acks: str) -> None:
    check_produce_case(produced, codec, acks)


def test_group_each_message_and_each_batch(
    node_clients: NodePrograms, broker: BrokerProcess, topic_name: str
) -> None:
    check_group(run_group(node_clients, broker.bootstrap, topic_name))


def test_transaction_with_send_offsets(
    node_clients: NodePrograms, broker: BrokerProcess, topic_name: str
) -> None:
    check_txn(run_txn(node_clients, broker.bootstrap, topic_name))


def test_admin(node_clients: NodePrograms, broker: BrokerProcess, topic_name: str) -> None:
    out = node_clients.run(
        SCRIPT, "admin", {"brokers": [broker.bootstrap], "topic": topic_name, "group": topic_name}
    )
    assert out["create"] is True
    assert out["create_again"] is False
    assert out["listed"] is True
    assert out["partitions"] == 4
    assert out["configs"] == {"retention.ms": "3600000", "cleanup.policy": "delete"}
    # AlterConfigs (not incremental) replaces the topic's whole set: retention.ms goes back
    assert out["configs_after"]["cleanup.policy"] == "compact"
    assert out["configs_after"]["retention.ms"] == "604800000"
    assert out["alter_bad"] == "INVALID_CONFIG"
    assert out["end"] == {"0": 2, "1": 2, "2": 2, "3": 2}
    assert out["fetched"] == {"0": 1, "1": -1, "2": -1, "3": 2}
    assert out["groups"] is True
    assert out["listed_after_delete"] is False


@pytest.fixture(params=["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def sasl_ssl_broker(
    request: pytest.FixtureRequest, fresh_broker: Callable[..., BrokerProcess], tmp_path: Path
) -> tuple[BrokerProcess, Security]:
    return start_sasl_ssl_broker(fresh_broker, tmp_path / "security", request.param, None)


def test_sasl_plain_over_tls(
    node_clients: NodePrograms, sasl_ssl_broker: tuple[BrokerProcess, Security], topic_name: str
) -> None:
    broker, sec = sasl_ssl_broker
    spec = sasl_spec(broker.bootstrap, sec, topic_name)
    out = node_clients.run(SCRIPT, "sasl", spec)
    assert [bytes.fromhex(r["value"]) for r in out["records"]] == [b"over-sasl"]
    assert out["wrong_password"] == "KafkaJSSASLAuthenticationError"


def test_acls_as_kafka_answers(
    node_clients: NodePrograms, fresh_broker: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    broker, sec = start_sasl_ssl_broker(
        fresh_broker, tmp_path / "security", "PLAIN", {"authorizer.class.name": AUTHORIZER}
    )
    topic = unique_name("kafkajs-acl")
    spec = sasl_spec(
        broker.bootstrap, sec, topic, admin_user="admin", admin_password=sec.password("admin")
    )
    out = node_clients.run(SCRIPT, "acl", spec)
    assert out["produce_denied"] == "TOPIC_AUTHORIZATION_FAILED"
    # operation 4 WRITE, 8 DESCRIBE; permission 3 ALLOW
    assert out["described"] == [f"{topic}:User:alice:4:3", f"{topic}:User:alice:8:3"]
    assert out["produce_allowed"] == ""
    assert out["deleted"] == 2
    assert out["described_after"] == 0


@pytest.mark.cluster
def test_three_broker_cluster(node_clients: NodePrograms, tmp_path: Path) -> None:
    """Replication factor 3 topics on `odradek cluster --brokers 3`: zstd at acks=all and gzip
    at acks=1 read back through consumer groups, a transaction with sendOffsets. (The
    two-member split is left to franz-go's and sarama's cluster tests: KafkaJS's rebalances,
    paced by its 3 s heartbeats, take ~15 s of CI time here.)"""
    proc = ClusterProcess(tmp_path, 3)
    proc.start()
    try:
        name = unique_name("kafkajs-cluster")
        cases = [("zstd", "all"), ("gzip", "1")]
        produced = run_produce(node_clients, proc.bootstrap, name, cases, replicas=3)
        for codec, acks in cases:
            check_produce_case(produced, codec, acks)
        check_txn(run_txn(node_clients, proc.bootstrap, f"{name}-txn", replicas=3))
    finally:
        status = proc.stop()
    assert status == 0, proc.log_tail()


__all__ = ["check_group", "check_produce_case", "check_txn", "expected"]
