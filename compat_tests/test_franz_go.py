"""franz-go (kgo and kadm, pinned in compat_tests/go/go.mod) against a real `odradek serve`.

The Go program (compat_tests/go/franz.go) runs each scenario and prints what it saw; the
checks here (and in polyglot_checks.py) decide whether it is right:

- produce: every codec with acks=all (kgo's idempotent default), and acks=1 / acks=0 without
  idempotence; the records back in order with keys, headers and timestamps; ListOffsets at
  the start, the end and by timestamp.
- txn: an aborted transaction, then consume-transform-produce through a GroupTransactSession;
  a read_committed reader sees exactly the transformed records, the group's offsets are the
  input's end.
- group: two members of one group, classic (cooperative-sticky, range) and KIP-848 (the
  broker assigns); the partitions are split and every record is read.
- share: two members of a KIP-932 share group (kgo.ShareGroup) with
  share.auto.offset.reset=earliest set as a GROUP config; every record accepted exactly once,
  a released record delivered again with delivery count 2; DescribeShareGroups/ListGroups.
- admin: kadm topics, partitions, configs (incremental alter, a bad value), offsets, groups.
- admin_ops: kadm client quotas (alter, describe, remove, an unknown key), DescribeProducers,
  DescribeTransactions and ListTransactions around an open and a committed transaction,
  DescribeLogDirs and AlterReplicaLogDirs to an unknown dir; on the three-broker cluster a
  partition reassignment (AlterPartitionAssignments, ListPartitionReassignments).
- tls: every record back over an SSL listener (no SASL), the broker's CA trusted.
- acl: on a SASL_SSL listener (PLAIN, SCRAM-SHA-512, OAUTHBEARER with unsecured JWS tokens as
  Kafka's default validator takes them) with StandardAuthorizer, a user without ACLs is denied
  produce and CreateTopics as Kafka answers them; after CreateACLs the produce succeeds.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from compat_tests.harness import HOST, BrokerProcess, free_port, unique_name
from compat_tests.polyglot_checks import (
    CODECS,
    check_group_split,
    check_records,
    expected,
    first_offset_at,
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
COUNT = 45
CASES = [(codec, "all") for codec in CODECS] + [("gzip", "1"), ("lz4", "0")]
SHARE_COUNT = 30
AUTHORIZER = "org.apache.kafka.metadata.authorizer.StandardAuthorizer"


def run_produce(go: GoPrograms, bootstrap: str, prefix: str, replicas: int = 1) -> dict[str, Any]:
    spec = produce_spec(bootstrap, prefix, CASES, COUNT, PARTITIONS, replicas)
    out = go.run("franz", "produce", spec, timeout=180)
    out["base_ts"] = spec["base_ts"]
    return out


def check_produce_case(run: dict[str, Any], codec: str, acks: str) -> None:
    (case,) = [c for c in run["cases"] if c["codec"] == codec and c["acks"] == acks]
    assert not case.get("error"), case["error"]
    if acks != "0":  # acks=0 has no offsets to report
        sent = sorted(tuple(s) for s in case["sent"])
        want = sorted(
            (p, k) for p in range(PARTITIONS) for k in range(len(range(p, COUNT, PARTITIONS)))
        )
        assert sent == want
    check_records(case["records"], f"{codec}-{acks}", COUNT, PARTITIONS, run["base_ts"])
    per_partition = {p: len(range(p, COUNT, PARTITIONS)) for p in range(PARTITIONS)}
    assert {int(p): o for p, o in case["start"].items()} == dict.fromkeys(per_partition, 0)
    assert {int(p): o for p, o in case["end"].items()} == per_partition
    for i, offsets in case["by_time"].items():
        want_offsets = [first_offset_at(int(i), p, COUNT, PARTITIONS) for p in range(PARTITIONS)]
        assert offsets == want_offsets, f"offsets for the timestamp of record {i}"


def run_txn(go: GoPrograms, bootstrap: str, name: str, replicas: int = 1) -> dict[str, Any]:
    spec = txn_spec(bootstrap, name, 30, PARTITIONS, replicas, topic=f"{name}-in")
    return go.run("franz", "txn", spec, timeout=120)


def check_txn(out: dict[str, Any], count: int = 30) -> None:
    values = sorted(bytes.fromhex(r["value"]) for r in out["committed"])
    inputs = [bytes.fromhex(expected("in", i, PARTITIONS, 0)["value"]) for i in range(count)]
    assert values == sorted(b"T:" + v for v in inputs), "each input transformed exactly once"
    uncommitted = [bytes.fromhex(r["value"]) for r in out["uncommitted"]]
    assert sorted(v for v in uncommitted if v.startswith(b"aborted-")) == [
        f"aborted-{p}".encode() for p in range(PARTITIONS)
    ]
    per_partition = {str(p): len(range(p, count, PARTITIONS)) for p in range(PARTITIONS)}
    assert out["group_offsets"] == per_partition
    assert out["transactions"] >= 1


def run_group(
    go: GoPrograms, bootstrap: str, name: str, protocol: str, balancer: str, replicas: int = 1
) -> Any:
    spec = group_spec(bootstrap, name, replicas, protocol=protocol, balancer=balancer)
    return go.run("franz", "group", spec, timeout=60)


def check_group(out: dict[str, Any]) -> None:
    check_group_split(out)
    assert out["a_owns"] and out["b_owns"]
    assert out["b_read"] > 0, "the second member read nothing after the split"


# -- odradek ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def produced(go_clients: GoPrograms, broker: BrokerProcess) -> dict[str, Any]:
    return run_produce(go_clients, broker.bootstrap, unique_name("franz-produce"))


@pytest.mark.parametrize(("codec", "acks"), CASES, ids=[f"{c}-acks{a}" for c, a in CASES])
def test_produce_and_read_back(produced: dict[str, Any], codec: str, acks: str) -> None:
    check_produce_case(produced, codec, acks)


def test_group_transact_session(
    go_clients: GoPrograms, broker: BrokerProcess, topic_name: str
) -> None:
    check_txn(run_txn(go_clients, broker.bootstrap, topic_name))


@pytest.mark.parametrize(
    ("protocol", "balancer"),
    [("classic", "cooperative-sticky"), ("classic", "range"), ("consumer", "range")],
    ids=["classic-cooperative-sticky", "classic-range", "kip848"],
)
def test_consumer_group_split(
    go_clients: GoPrograms, broker: BrokerProcess, topic_name: str, protocol: str, balancer: str
) -> None:
    out = run_group(go_clients, broker.bootstrap, topic_name, protocol, balancer)
    check_group(out)
    assert out["group_type"] == protocol  # ListGroups: "classic" or "consumer" (KIP-848)


def run_share(go: GoPrograms, bootstrap: str, name: str) -> dict[str, Any]:
    base_ts = int(time.time() * 1000) - 60_000
    spec = {
        "brokers": [bootstrap],
        "topic": name,
        "group": f"{name}-share",
        "count": SHARE_COUNT,
        "partitions": PARTITIONS,
        "base_ts": base_ts,
    }
    out = go.run("franz", "share", spec, timeout=90)
    out["base_ts"] = base_ts
    return out


def check_share(out: dict[str, Any]) -> None:
    accepted = out["a_accepted"] + out["b_accepted"]
    accepted.sort(key=lambda r: (r["p"], r["o"]))
    check_records(accepted, "share", SHARE_COUNT, PARTITIONS, out["base_ts"])
    ((released,),) = [out["a_released"]]
    assert [released["p"], released["o"]] in [[r["p"], r["o"]] for r in accepted]
    assert 2 in out["a_redelivered"] + out["b_redelivered"], "the released record came back"
    assert out["described_err"] == ""
    assert out["members"] == 2
    assert out["state"] == "Stable"
    assert out["listed_as_share"] is True


def test_share_group_consumption(
    go_clients: GoPrograms, broker: BrokerProcess, topic_name: str
) -> None:
    check_share(run_share(go_clients, broker.bootstrap, topic_name))


def test_kadm_admin(go_clients: GoPrograms, broker: BrokerProcess, topic_name: str) -> None:
    out = go_clients.run(
        "franz", "admin", {"brokers": [broker.bootstrap], "topic": topic_name, "group": topic_name}
    )
    assert out["create"] == ""
    assert out["create_again"] == "TOPIC_ALREADY_EXISTS"
    assert out["partitions"] == 2
    assert out["configs"]["retention.ms"] == "3600000/DYNAMIC_TOPIC_CONFIG"
    assert out["configs"]["cleanup.policy"] == "delete/DEFAULT_CONFIG"
    assert out["alter"] == ""
    assert out["configs_after"]["max.message.bytes"] == "200000/DYNAMIC_TOPIC_CONFIG"
    assert out["configs_after"]["retention.ms"].endswith("/DEFAULT_CONFIG")
    assert out["alter_bad"] == "INVALID_CONFIG"
    assert out["create_partitions"] == ""
    assert out["partitions_after"] == 4
    assert out["end"] == {"0": 2, "1": 2, "2": 2, "3": 2}
    assert out["commit"] == ""
    assert out["fetched"] == {"0": ["1", "m0"], "3": ["2", ""]}
    assert out["group_listed"] is True
    assert out["delete"] == ""
    assert out["delete_missing"] == "UNKNOWN_TOPIC_OR_PARTITION"


def run_admin_ops(go: GoPrograms, bootstrap: str, name: str) -> dict[str, Any]:
    spec = {
        "brokers": [bootstrap],
        "topic": name,
        "txn_id": f"{name}-txn",
        "count": 6,
        "partitions": PARTITIONS,
        "base_ts": int(time.time() * 1000),
    }
    return go.run("franz", "admin_ops", spec)


def check_admin_ops(out: dict[str, Any], name: str) -> None:
    user, client = f"user={name}-user", f"client-id={name}-client"
    assert out["quota_alter"] == ""
    assert out["quotas"] == {
        f"{client};{user};producer_byte_rate": 1024,
        f"{user};consumer_byte_rate": 2048,
    }
    assert out["quota_remove"] == ""
    assert out["quotas_after"] == {f"{user};consumer_byte_rate": 2048}
    assert out["quota_bad_key"] == "INVALID_REQUEST"
    opened, committed = out["txn_open"], out["txn_committed"]
    assert (opened["state"], opened["partitions"], opened["err"]) == ("Ongoing", [0, 1, 2], "")
    assert out["listed_ongoing"] is True
    assert (committed["state"], committed["partitions"]) == ("CompleteCommit", [])
    assert out["listed_ongoing_after"] is False
    pid = opened["pid"]
    # two records per partition (sequences 0, 1), the transaction opened at offset 0
    want = [{"p": p, "pid": pid, "epoch": 0, "last_seq": 1, "txn_start": 0} for p in range(3)]
    assert out["producers_open"] == want
    if out["transaction_version"] >= 2:
        # KIP-890 part 2: every EndTxn bumps the epoch and the marker carries the new one,
        # which restarts the producer's sequences
        done = [{**w, "epoch": 1, "last_seq": -1, "txn_start": -1} for w in want]
    else:
        done = [{**w, "txn_start": -1} for w in want]
    assert out["producers_committed"] == done
    assert out["log_dirs"] >= 1
    assert sorted(out["log_dir_sizes"]) == ["0", "1", "2"]
    assert all(size > 0 for size in out["log_dir_sizes"].values())
    assert out["move_unknown_dir"] == "LOG_DIR_NOT_FOUND"


def test_kadm_admin_ops(go_clients: GoPrograms, broker: BrokerProcess, topic_name: str) -> None:
    check_admin_ops(run_admin_ops(go_clients, broker.bootstrap, topic_name), topic_name)


@pytest.fixture(params=["PLAIN", "SCRAM-SHA-512", "OAUTHBEARER"])
def sasl_ssl_broker(
    request: pytest.FixtureRequest, fresh_broker: Callable[..., BrokerProcess], tmp_path: Path
) -> tuple[BrokerProcess, Security]:
    return start_sasl_ssl_broker(
        fresh_broker, tmp_path / "security", request.param, {"authorizer.class.name": AUTHORIZER}
    )


def test_acl_denial_as_kafka_answers(
    go_clients: GoPrograms, sasl_ssl_broker: tuple[BrokerProcess, Security], topic_name: str
) -> None:
    broker, sec = sasl_ssl_broker
    spec = sasl_spec(
        broker.bootstrap, sec, topic_name, admin_user="admin", admin_password=sec.password("admin")
    )
    out = go_clients.run("franz", "acl", spec)
    assert out["produce_denied"] == "TOPIC_AUTHORIZATION_FAILED"
    assert out["create_denied"] == "TOPIC_AUTHORIZATION_FAILED"
    assert out["acls_described"] == 2
    assert out["produce_allowed"] == ""


def test_tls_without_sasl(
    go_clients: GoPrograms, fresh_broker: Callable[..., BrokerProcess], tmp_path: Path
) -> None:
    sec = Security("ssl", directory=str(tmp_path / "security"))
    assert sec.tls is not None
    port = free_port()
    settings = {**sec.broker_config(), "listeners": sec.listeners(HOST, {sec.listener: port})}
    broker = fresh_broker(settings, port=port)
    base_ts = int(time.time() * 1000)
    name = unique_name("franz-tls")
    spec = {
        "brokers": [broker.bootstrap],
        "ca_file": sec.tls.ca,
        "cases": [{"codec": "zstd", "acks": "all", "topic": name}],
        "count": COUNT,
        "partitions": PARTITIONS,
        "base_ts": base_ts,
    }
    out = go_clients.run("franz", "produce", spec)
    out["base_ts"] = base_ts
    check_produce_case(out, "zstd", "all")


@pytest.mark.cluster
def test_three_broker_cluster(go_clients: GoPrograms, tmp_path: Path) -> None:
    """Replication factor 3 topics on `odradek cluster --brokers 3`: every codec at acks=all
    and acks=1, a GroupTransactSession (replicated transaction and offsets topics), and a
    KIP-848 group split."""
    proc = ClusterProcess(tmp_path, 3)
    proc.start()
    try:
        name = unique_name("franz-cluster")
        produced = run_produce(go_clients, proc.bootstrap, name, replicas=3)
        for codec, acks in CASES:
            if acks != "0":  # acks=0 may land before a new partition's leader is known
                check_produce_case(produced, codec, acks)
        check_txn(run_txn(go_clients, proc.bootstrap, f"{name}-txn", replicas=3))
        out = run_group(go_clients, proc.bootstrap, f"{name}-g", "consumer", "range", replicas=3)
        check_group(out)
        base_ts = int(time.time() * 1000)
        spec = {
            "brokers": [proc.bootstrap],
            "topic": f"{name}-move",
            "count": 20,
            "base_ts": base_ts,
        }
        moved = go_clients.run("franz", "reassign", spec)
        assert moved["brokers"] == 3 and moved["alter"] == ""
        assert moved["after"] == sorted(moved["target"]) == moved["isr_after"]
        assert moved["after"] != moved["before"]
        check_records(moved["records"], "move", 20, 1, base_ts)
    finally:
        status = proc.stop()
    assert status == 0, proc.log_tail()
