"""IBM/sarama (pinned in compat_tests/go/go.mod) against a real `odradek serve`.

compat_tests/go/sarama.go runs each scenario with sarama's Version at "min" (V2_1_0_0, the
oldest client Kafka 4 serves: KIP-896 removed the older request versions that
sarama.MinVersion, 0.8.2, would send) and "max" (sarama.MaxVersion):

- produce: the sync producer at every codec with acks=all (idempotent) and acks=1, and the
  async producer; records back through partition consumers in order with keys, headers and
  timestamps.
- group: two members with the range, sticky and round-robin strategies; the partitions split
  between them and every record read, the marked offsets committed.
- txn: an aborted transaction, then a committed one with AddOffsetsToTxn; read_committed and
  read_uncommitted consumers.
- admin: ClusterAdmin topics, partitions, configs (incremental alter), and the offset manager.
- sasl: SASL_SSL with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 (sarama's framing around a
  SCRAMClient; sarama.go wraps franz-go's SCRAM exchange), and a wrong password refused.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from compat_tests.harness import BrokerProcess, unique_name
from compat_tests.polyglot_checks import (
    CODECS,
    check_aborted_then_committed,
    check_group_split,
    check_records,
    group_spec,
    produce_spec,
    sasl_spec,
    txn_spec,
)
from compat_tests.polyglot_harness import GoPrograms, start_sasl_ssl_broker
from compat_tests.test_cluster import ClusterProcess
from odradek.testing.security import Security

pytestmark = pytest.mark.compat

PARTITIONS = 3
COUNT = 30
CASES = [(codec, "all") for codec in CODECS] + [("gzip", "1"), ("lz4", "async")]
VERSIONS = ["min", "max"]


def run_produce(
    go: GoPrograms,
    bootstrap: str,
    prefix: str,
    version: str,
    which: list[tuple[str, str]] | None = None,
    replicas: int = 1,
) -> dict[str, Any]:
    spec = produce_spec(
        bootstrap, prefix, which or CASES, COUNT, PARTITIONS, replicas, version=version
    )
    out = go.run("sarama", "produce", spec, timeout=150)
    out["base_ts"] = spec["base_ts"]
    return out


def check_produce_case(run: dict[str, Any], codec: str, acks: str) -> None:
    (case,) = [c for c in run["cases"] if c["codec"] == codec and c["acks"] == acks]
    assert not case.get("error"), case["error"]
    want = sorted(
        [p, k] for p in range(PARTITIONS) for k in range(len(range(p, COUNT, PARTITIONS)))
    )
    assert sorted(case["sent"]) == want
    check_records(case["records"], f"{codec}-{acks}", COUNT, PARTITIONS, run["base_ts"])


def run_group(
    go: GoPrograms, bootstrap: str, name: str, balancer: str, version: str, replicas: int = 1
) -> Any:
    spec = group_spec(bootstrap, name, replicas, balancer=balancer, version=version)
    return go.run("sarama", "group", spec, timeout=90)


def check_group(out: dict[str, Any]) -> None:
    check_group_split(out)
    assert out["a_read"] > 0 and out["b_read"] > 0


def run_txn(
    go: GoPrograms, bootstrap: str, name: str, version: str, replicas: int = 1
) -> dict[str, Any]:
    spec = txn_spec(bootstrap, name, 24, PARTITIONS, replicas, version=version)
    out = go.run("sarama", "txn", spec, timeout=90)
    out["base_ts"] = spec["base_ts"]
    return out


def check_txn(out: dict[str, Any]) -> None:
    check_aborted_then_committed(out, 24, PARTITIONS)


@pytest.fixture(scope="module", params=VERSIONS)
def produced(
    request: pytest.FixtureRequest, go_clients: GoPrograms, broker: BrokerProcess
) -> dict[str, Any]:
    version = request.param
    out = run_produce(go_clients, broker.bootstrap, unique_name(f"sarama-{version}"), version)
    out["version"] = version
    return out


@pytest.mark.parametrize(("codec", "acks"), CASES, ids=[f"{c}-acks{a}" for c, a in CASES])
def test_produce_and_read_back(produced: dict[str, Any], codec: str, acks: str) -> None:
    check_produce_case(produced, codec, acks)


@pytest.mark.parametrize("balancer", ["range", "sticky", "roundrobin"])
def test_consumer_group_split(
    go_clients: GoPrograms, broker: BrokerProcess, topic_name: str, balancer: str
) -> None:
    check_group(run_group(go_clients, broker.bootstrap, topic_name, balancer, "max"))


@pytest.mark.parametrize("version", VERSIONS)
def test_transaction_with_offsets(
    go_clients: GoPrograms, broker: BrokerProcess, topic_name: str, version: str
) -> None:
    check_txn(run_txn(go_clients, broker.bootstrap, topic_name, version))


@pytest.mark.parametrize("version", VERSIONS)
def test_cluster_admin_and_offset_manager(
    go_clients: GoPrograms, broker: BrokerProcess, topic_name: str, version: str
) -> None:
    spec = {"brokers": [broker.bootstrap], "topic": topic_name, "group": topic_name}
    out = go_clients.run("sarama", "admin", {**spec, "version": version})
    assert out["create"] == "0"
    assert out["create_again"] == "36"  # TOPIC_ALREADY_EXISTS
    assert out["create_partitions"] == "0"
    assert out["partitions"] == 3
    assert out["configs"]["retention.ms"] == "3600000"
    assert out["alter"] == "0"
    assert out["configs_after"]["max.message.bytes"] == "200000"
    assert out["fetched"] == {"0": ["-1", ""], "1": ["5", "meta"]}
    assert out["delete"] == "0"
    assert out["delete_missing"] == "3"  # UNKNOWN_TOPIC_OR_PARTITION


@pytest.fixture(params=["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def sasl_ssl_broker(
    request: pytest.FixtureRequest, fresh_broker: Callable[..., BrokerProcess], tmp_path: Path
) -> tuple[BrokerProcess, Security]:
    return start_sasl_ssl_broker(fresh_broker, tmp_path / "security", request.param, None)


def test_sasl_over_tls(
    go_clients: GoPrograms, sasl_ssl_broker: tuple[BrokerProcess, Security], topic_name: str
) -> None:
    broker, sec = sasl_ssl_broker
    spec = sasl_spec(broker.bootstrap, sec, topic_name, version="max")
    out = go_clients.run("sarama", "sasl", spec)
    assert [bytes.fromhex(r["value"]) for r in out["records"]] == [b"over-sasl"]
    assert out["wrong_password"] == "SASL_AUTHENTICATION_FAILED"


@pytest.mark.cluster
def test_three_broker_cluster(go_clients: GoPrograms, tmp_path: Path) -> None:
    """Replication factor 3 topics on `odradek cluster --brokers 3` at sarama's highest
    version: the sync and async producers, a sticky group split, a transaction."""
    proc = ClusterProcess(tmp_path, 3)
    proc.start()
    try:
        name = unique_name("sarama-cluster")
        cases = [("zstd", "all"), ("gzip", "1"), ("lz4", "async")]
        produced = run_produce(go_clients, proc.bootstrap, name, "max", cases, replicas=3)
        for codec, acks in cases:
            check_produce_case(produced, codec, acks)
        check_group(run_group(go_clients, proc.bootstrap, f"{name}-g", "sticky", "max", 3))
        check_txn(run_txn(go_clients, proc.bootstrap, f"{name}-txn", "max", replicas=3))
    finally:
        status = proc.stop()
    assert status == 0, proc.log_tail()
