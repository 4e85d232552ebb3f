"""Per-group configs (ConfigResource GROUP, KIP-848 / KIP-932) as Kafka 4.1 serves them:
kafka-python's admin client describes, alters (with Kafka's bounds) and lists them, `odradek
configs --entity-type groups` too; the coordinators apply them (share.auto.offset.reset makes a
confluent-kafka ShareConsumer read what was written before it came; the heartbeat intervals
come back in the heartbeat responses); they survive a restart and travel through ZooKeeper."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import ShareConsumer
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import AlterConfigOp, ConfigResource, ConfigResourceType

from odradek.broker.cluster.zk_store import ZooKeeperMetadataStore
from odradek.testing import Broker
from odradek.testing.raw import RawClient
from odradek.testing.zookeeper import ZooKeeperServer
from odradek.wire import protocol

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 30.0
GROUP = ConfigResourceType.GROUP
CONFIG = {"share.coordinator.state.topic.num.partitions": "2", "offsets.topic.num.partitions": "2"}


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(config=CONFIG) as b:
        yield b


def describe(admin: KafkaAdminClient, group: str) -> dict[str, tuple[str, int]]:
    found = admin.describe_configs([ConfigResource(GROUP, group)], config_filter="all")
    return {k: (v["value"], v["config_source"]) for k, v in found["group"][group].items()}


def alter(admin: KafkaAdminClient, group: str, ops: dict[str, Any]) -> Any:
    result = admin.alter_configs(
        [ConfigResource(GROUP, group, ops)], raise_on_unknown=False, incremental=True
    )
    return result["group"][group]


def raw_call(bootstrap: str, api: int, version: int, **fields: Any) -> Any:
    req = protocol.request_class(api)(**fields)
    with RawClient(bootstrap) as raw:
        _cid, data = raw.encode(req, version)
        raw.send(data)
        return protocol.response_class(api).decode(raw.read_frame(), version=version, header=True)


def test_describe_alter_validate_and_list(broker: Broker) -> None:
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        before = describe(admin, "cfg-a")
        assert before["share.auto.offset.reset"] == ("latest", "DEFAULT_CONFIG")
        assert before["consumer.session.timeout.ms"] == ("45000", "DEFAULT_CONFIG")
        assert set(before) == {
            "consumer.session.timeout.ms",
            "consumer.heartbeat.interval.ms",
            "share.session.timeout.ms",
            "share.heartbeat.interval.ms",
            "share.record.lock.duration.ms",
            "share.auto.offset.reset",
            "share.delivery.count.limit",
            "share.partition.max.record.locks",
            "share.isolation.level",
            "share.renew.acknowledge.enable",
            "streams.session.timeout.ms",
            "streams.heartbeat.interval.ms",
            "streams.num.standby.replicas",
            "streams.initial.rebalance.delay.ms",
            "streams.assignment.interval.ms",
            "streams.assignor.name",
            "streams.rack.aware.assignment.tags",
        }
        assert before["share.isolation.level"] == ("read_uncommitted", "DEFAULT_CONFIG")
        assert before["share.partition.max.record.locks"] == ("2000", "DEFAULT_CONFIG")
        # Kafka 4.2's share keys are set and checked like the others
        ok = alter(
            admin,
            "cfg-42",
            {
                "share.isolation.level": (AlterConfigOp.SET, "read_committed"),
                "share.partition.max.record.locks": (AlterConfigOp.SET, "100"),
                "share.delivery.count.limit": (AlterConfigOp.SET, "3"),
                "share.renew.acknowledge.enable": (AlterConfigOp.SET, "false"),
            },
        )
        assert ok == "OK", ok
        got = describe(admin, "cfg-42")
        assert got["share.isolation.level"] == ("read_committed", "DYNAMIC_GROUP_CONFIG")
        assert got["share.partition.max.record.locks"] == ("100", "DYNAMIC_GROUP_CONFIG")
        for bad in (
            {"share.isolation.level": (AlterConfigOp.SET, "serializable")},
            {"share.partition.max.record.locks": (AlterConfigOp.SET, "99")},
            {"share.delivery.count.limit": (AlterConfigOp.SET, "11")},
            {"share.renew.acknowledge.enable": (AlterConfigOp.SET, "maybe")},
        ):
            refused = alter(admin, "cfg-42", bad)
            assert str(refused).startswith("[Error 40] InvalidConfiguration"), (bad, refused)
        ok = alter(
            admin,
            "cfg-a",
            {
                "share.record.lock.duration.ms": (AlterConfigOp.SET, "20000"),
                "consumer.heartbeat.interval.ms": (AlterConfigOp.SET, "6000"),
            },
        )
        assert ok == "OK", ok
        after = describe(admin, "cfg-a")
        assert after["share.record.lock.duration.ms"] == ("20000", "DYNAMIC_GROUP_CONFIG")
        assert after["consumer.heartbeat.interval.ms"] == ("6000", "DYNAMIC_GROUP_CONFIG")
        # Kafka's bounds: group.share.min.record.lock.duration.ms is 15000, names unknown
        for ops in (
            {"share.record.lock.duration.ms": (AlterConfigOp.SET, "1000")},
            {"consumer.session.timeout.ms": (AlterConfigOp.SET, "90000")},
            {"share.auto.offset.reset": (AlterConfigOp.SET, "middle")},
            {"share.auto.offset.reset": (AlterConfigOp.SET, "by_duration:-PT1H")},
            {"no.such.key": (AlterConfigOp.SET, "1")},
        ):
            refused = alter(admin, "cfg-a", ops)
            assert str(refused).startswith("[Error 40] InvalidConfiguration"), (ops, refused)
        assert describe(admin, "cfg-a") == after
        by_time = {"share.auto.offset.reset": (AlterConfigOp.SET, "by_duration:P1DT2H")}
        assert alter(admin, "cfg-a", by_time) == "OK"
        reset = describe(admin, "cfg-a")["share.auto.offset.reset"]
        assert reset == ("by_duration:P1DT2H", "DYNAMIC_GROUP_CONFIG")
        alter(admin, "cfg-a", {"share.auto.offset.reset": (AlterConfigOp.DELETE, None)})
        assert "cfg-a" in admin.list_config_resources(["GROUP"])["group"]
        alter(
            admin,
            "cfg-a",
            {
                "share.record.lock.duration.ms": (AlterConfigOp.DELETE, None),
                "consumer.heartbeat.interval.ms": (AlterConfigOp.DELETE, None),
            },
        )
        assert describe(admin, "cfg-a") == before
        assert "cfg-a" not in admin.list_config_resources(["GROUP"]).get("group", [])
    finally:
        admin.close()


def test_streams_keys_and_the_rack_tags_list(broker: Broker) -> None:
    """Kafka 4.4's streams.* keys: bounded by the broker's group.streams.min/max.* keys with
    Kafka's messages; streams.rack.aware.assignment.tags is a LIST (APPEND / SUBTRACT work,
    duplicates are refused)."""
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        assert describe(admin, "cfg-s")["streams.session.timeout.ms"] == ("45000", "DEFAULT_CONFIG")
        for value in ("30000", "0"):
            refused = alter(
                admin, "cfg-s", {"streams.session.timeout.ms": (AlterConfigOp.SET, value)}
            )
            assert str(refused).startswith("[Error 40] InvalidConfiguration"), refused
        tags = "streams.rack.aware.assignment.tags"
        assert alter(admin, "cfg-s", {tags: (AlterConfigOp.APPEND, "zone,rack")}) == "OK"
        assert alter(admin, "cfg-s", {tags: (AlterConfigOp.APPEND, "rack,host")}) == "OK"
        assert alter(admin, "cfg-s", {tags: (AlterConfigOp.SUBTRACT, "zone")}) == "OK"
        assert describe(admin, "cfg-s")[tags] == ("rack,host", "DYNAMIC_GROUP_CONFIG")
        refused = alter(admin, "cfg-s", {tags: (AlterConfigOp.SET, "a,a")})
        assert str(refused).startswith("[Error 40] InvalidConfiguration"), refused
        both = {"streams.session.timeout.ms": "50000", "streams.num.standby.replicas": "2"}
        assert alter(admin, "cfg-s", {k: (AlterConfigOp.SET, v) for k, v in both.items()}) == "OK"
        got = describe(admin, "cfg-s")
        assert {k: got[k] for k in both} == {
            k: (v, "DYNAMIC_GROUP_CONFIG") for k, v in both.items()
        }
    finally:
        admin.close()


def test_coordinators_apply_group_configs(broker: Broker) -> None:
    env = {**os.environ, "PYTHONPATH": str(REPO), "ODRADEK_BOOTSTRAP": broker.bootstrap}

    def cli(*args: str) -> str:
        proc = subprocess.run(
            [sys.executable, "-m", "odradek", "configs", *args],
            text=True,
            capture_output=True,
            timeout=60,
            env=env,
            cwd=REPO,
        )
        assert proc.returncode == 0, (proc.stdout, proc.stderr)
        return proc.stdout

    cli(
        "alter",
        "--entity-type",
        "groups",
        "--entity-name",
        "sg",
        "--add-config",
        "share.auto.offset.reset=earliest,share.heartbeat.interval.ms=6000",
    )
    cli("alter", "--group", "cg", "--add-config", "consumer.heartbeat.interval.ms=7000")
    shown = json.loads(cli("describe", "--group", "sg", "--json"))
    assert {c["name"]: c["value"] for c in shown["configs"]} == {
        "share.auto.offset.reset": "earliest",
        "share.heartbeat.interval.ms": "6000",
    }
    assert "Dynamic configs for group cg are:" in cli("describe", "--entity-type", "groups")

    # the heartbeat intervals the coordinators give are the groups' own
    raw_call(broker.bootstrap, 10, 1, key="cg", key_type=0)  # FindCoordinator: the offsets topic
    deadline = time.monotonic() + WAIT_S
    while True:
        hb = raw_call(
            broker.bootstrap,
            68,
            0,
            group_id="cg",
            member_id="m-1",
            member_epoch=0,
            instance_id=None,
            rack_id=None,
            rebalance_timeout_ms=30000,
            subscribed_topic_names=["x"],
            server_assignor=None,
            topic_partitions=[],
        )
        if hb.error_code == 0 or time.monotonic() > deadline:
            break
    assert hb.error_code == 0 and hb.heartbeat_interval_ms == 7000, hb
    share_hb = raw_call(
        broker.bootstrap,
        76,
        1,
        group_id="sg",
        member_id="s-1",
        member_epoch=0,
        rack_id=None,
        subscribed_topic_names=["x"],
    )
    assert share_hb.error_code == 0 and share_hb.heartbeat_interval_ms == 6000, share_hb
    left = raw_call(
        broker.bootstrap,
        76,
        1,
        group_id="sg",
        member_id="s-1",
        member_epoch=-1,
        rack_id=None,
        subscribed_topic_names=None,
    )
    assert left.error_code == 0

    # share.auto.offset.reset=earliest: a new share consumer gets what was written before
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    from kafka.admin import NewTopic

    admin.create_topics([NewTopic("early", 1, 1)])
    admin.close()
    producer = KafkaProducer(bootstrap_servers=broker.bootstrap)
    for i in range(5):
        producer.send("early", value=b"e%d" % i)
    producer.flush(10)
    producer.close()
    c = ShareConsumer({"bootstrap.servers": broker.bootstrap, "group.id": "sg"})
    got: list[bytes] = []
    try:
        c.subscribe(["early"])
        deadline = time.monotonic() + WAIT_S
        while len(got) < 5:
            assert time.monotonic() < deadline, got
            got += [m.value() for m in c.poll(0.5) if m.error() is None]
    finally:
        c.close()
    assert sorted(got) == [b"e%d" % i for i in range(5)]


def test_group_configs_survive_a_restart(tmp_path: Path) -> None:
    with Broker(config=CONFIG, data_dir=str(tmp_path)) as b:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        try:
            alter(admin, "kept", {"share.session.timeout.ms": (AlterConfigOp.SET, "50000")})
        finally:
            admin.close()
        b.restart()
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        try:
            assert describe(admin, "kept")["share.session.timeout.ms"] == (
                "50000",
                "DYNAMIC_GROUP_CONFIG",
            )
        finally:
            admin.close()


def test_group_configs_through_zookeeper(tmp_path: Path) -> None:
    async def body(connect: str) -> None:
        a = ZooKeeperMetadataStore(connect, 0, session_timeout_ms=2000)
        b = ZooKeeperMetadataStore(connect, 1, session_timeout_ms=2000)
        try:
            a.subscribe(lambda change: None)
            b.subscribe(lambda change: None)
            a.alter_group_configs("g 1", {"share.auto.offset.reset": "earliest"})
            deadline = time.monotonic() + WAIT_S
            while b.group_configs != {"g 1": {"share.auto.offset.reset": "earliest"}}:
                assert time.monotonic() < deadline, b.group_configs
                await asyncio.sleep(0.01)
            data, _ = a.zk.get("/config/groups/g%201")
            assert json.loads(data) == {
                "version": 1,
                "config": {"share.auto.offset.reset": "earliest"},
            }
            b.alter_group_configs("g 1", {})
            while a.group_configs:
                assert time.monotonic() < deadline, a.group_configs
                await asyncio.sleep(0.01)
        finally:
            a.close()
            b.close()

    with ZooKeeperServer(str(tmp_path)) as zk:
        asyncio.run(asyncio.wait_for(body(zk.connect("/group-configs")), 60))


def test_without_acls_group_configs_and_share_offsets_are_refused(tmp_path: Path) -> None:
    config = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
    with Broker(config=config, data_dir=str(tmp_path)) as b:  # no ACLs: all denied
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        try:
            refused = alter(
                admin, "g", {"share.auto.offset.reset": (AlterConfigOp.SET, "earliest")}
            )
            assert str(refused).startswith("[Error 30]"), refused  # GROUP_AUTHORIZATION_FAILED
        finally:
            admin.close()
        D: Any = protocol.request_class(90)
        described = raw_call(
            b.bootstrap,
            90,
            1,
            groups=[D.DescribeShareGroupOffsetsRequestGroup(group_id="g", topics=None)],
        )
        assert described.groups[0].error_code == 30
        altered = raw_call(b.bootstrap, 91, 0, group_id="g", topics=[])
        deleted = raw_call(b.bootstrap, 92, 0, group_id="g", topics=[])
        assert (altered.error_code, deleted.error_code) == (30, 30)
        assert b.call(lambda s: dict(s.store.group_configs)) == {}


def test_confluent_kafka_admin_alters_and_describes_group_configs(broker: Broker) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient, AlterConfigOpType, ConfigEntry, ResourceType
    from confluent_kafka.admin import ConfigResource as CkResource

    admin = AdminClient({"bootstrap.servers": broker.bootstrap})

    def change(name: str, value: str) -> Any:
        entry = ConfigEntry(name, value, incremental_operation=AlterConfigOpType.SET)
        res = CkResource(ResourceType.GROUP, "ck", incremental_configs=[entry])
        return next(iter(admin.incremental_alter_configs([res]).values()))

    change("share.record.lock.duration.ms", "45000").result(timeout=WAIT_S)
    (described,) = admin.describe_configs([CkResource(ResourceType.GROUP, "ck")]).values()
    entry = described.result(timeout=WAIT_S)["share.record.lock.duration.ms"]
    assert (entry.value, entry.source) == ("45000", 8)  # DYNAMIC_GROUP_CONFIG
    with pytest.raises(KafkaException) as refused:
        change("share.record.lock.duration.ms", "90000").result(timeout=WAIT_S)
    assert "share.record.lock.duration.ms must be in the range 15000 to 60000 inclusive." in str(
        refused.value
    )
