"""Client-level scenarios, each written once and run against odradek and Apache Kafka 4.4.

What is compared is what the client library reports: delivered offsets, consumed records
(offset, key, value, headers, timestamp and its type), offsets looked up by time, config
entries with their sources and synonyms, error codes of refused operations, group states and
committed offsets, transaction errors. Names get the `ref_<label>_<hex>` form the comparison
masks, so the same scenario creates differently named topics on the two brokers.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable

import pytest
from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import (
    AdminClient,
    ConfigResource,
    NewPartitions,
    NewTopic,
)

from compat_tests.harness import BrokerProcess
from compat_tests.reference.diff import Checker
from compat_tests.reference.kafka_ref import KafkaReference

TS0 = 1_700_000_000_000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]


def fresh(label: str) -> str:
    return f"ref_{label}_{uuid.uuid4().hex[:8]}"


def both(
    odradek: BrokerProcess, kafka: KafkaReference, scenario: Callable[[str], object]
) -> tuple[object, object]:
    return scenario(odradek.bootstrap), scenario(kafka.bootstrap)


def create(bootstrap: str, topic: str, partitions: int = 1, **config: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    config.setdefault("retention.ms", "-1")  # TS0 is years old
    fut = admin.create_topics([NewTopic(topic, partitions, 1, config=config)])[topic]
    fut.result(30)


def consume_all(bootstrap: str, topic: str, count: int, **conf: str) -> list[tuple]:
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": fresh("c"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            **conf,
        }
    )
    consumer.subscribe([topic])
    got: list[tuple] = []
    deadline = time.monotonic() + 30
    try:
        while len(got) < count and time.monotonic() < deadline:
            msg = consumer.poll(0.2)
            if msg is None or msg.error() is not None:
                continue
            got.append(
                (
                    msg.partition(),
                    msg.offset(),
                    msg.key(),
                    msg.value(),
                    msg.headers(),
                    msg.timestamp(),
                )
            )
    finally:
        consumer.close()
    return got


@pytest.mark.parametrize("acks", ["0", "1", "all"])
@pytest.mark.parametrize("codec", CODECS)
def test_produce_and_fetch_per_codec_and_acks(
    odradek_broker: BrokerProcess, kafka44: KafkaReference, codec: str, acks: str
) -> None:
    def scenario(bootstrap: str) -> object:
        topic = fresh("codec")
        create(bootstrap, topic)
        producer = Producer(
            {
                "bootstrap.servers": bootstrap,
                "compression.type": codec,
                "acks": acks,
                "linger.ms": 50,
                "enable.idempotence": False,
            }
        )
        reports: list[tuple] = []

        def on_delivery(err: KafkaError | None, msg: object) -> None:
            reports.append((err.name() if err else None, msg.offset()))  # type: ignore[attr-defined]

        for i in range(6):
            producer.produce(
                topic,
                value=None if i == 3 else f"value-{i}".encode() * (i + 1),
                key=None if i == 0 else f"k{i}".encode(),
                headers=[("h", f"{i}".encode()), ("empty", b"")] if i % 2 else None,
                timestamp=TS0 + i,
                on_delivery=on_delivery,
            )
        assert producer.flush(30) == 0
        return {
            "delivered": sorted(reports, key=repr),
            "consumed": consume_all(bootstrap, topic, 6),
        }

    ours, theirs = both(odradek_broker, kafka44, scenario)
    Checker("4.4").check(f"client produce/fetch codec={codec} acks={acks}", ours, theirs)


def test_list_offsets_by_time_and_special_offsets(
    odradek_broker: BrokerProcess, kafka44: KafkaReference
) -> None:
    def scenario(bootstrap: str) -> object:
        topic = fresh("times")
        create(bootstrap, topic, 2)
        producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
        for i, ts in enumerate([TS0 + 10, TS0 + 5, TS0 + 20, TS0 + 20, TS0 + 30]):
            producer.produce(topic, value=f"{i}".encode(), partition=0, timestamp=ts)
            producer.flush(30)
        consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": fresh("g")})
        try:
            out: dict[str, object] = {}
            for label, ts in [
                ("before all", TS0),
                ("exact 5", TS0 + 5),
                ("between", TS0 + 11),
                ("duplicate 20", TS0 + 20),
                ("last", TS0 + 30),
                ("after all", TS0 + 31),
            ]:
                found = consumer.offsets_for_times([TopicPartition(topic, 0, ts)], timeout=15)
                out[label] = found[0].offset
            empty = consumer.offsets_for_times([TopicPartition(topic, 1, TS0)], timeout=15)
            out["empty partition"] = empty[0].offset
            out["watermarks p0"] = consumer.get_watermark_offsets(TopicPartition(topic, 0), 15)
            out["watermarks p1"] = consumer.get_watermark_offsets(TopicPartition(topic, 1), 15)
        finally:
            consumer.close()
        return out

    ours, theirs = both(odradek_broker, kafka44, scenario)
    Checker("4.4").check("client offsets_for_times and watermarks", ours, theirs)


def _configs(bootstrap: str, resource: ConfigResource) -> dict[str, object]:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = admin.describe_configs([resource], request_timeout=30)[resource].result(30)
    return {
        name: {
            "value": e.value,
            "source": e.source,
            "is_read_only": e.is_read_only,
            "is_default": e.is_default,
            "is_sensitive": e.is_sensitive,
            "synonyms": [(s.name, s.value, s.source) for s in e.synonyms.values()],
        }
        for name, e in entries.items()
    }


def test_topic_configs_with_synonyms_sources_and_defaults(
    odradek_broker: BrokerProcess, kafka44: KafkaReference
) -> None:
    def scenario(bootstrap: str) -> object:
        topic = fresh("cfg")
        create(bootstrap, topic, 1, **{"cleanup.policy": "compact", "segment.bytes": "1048576"})
        return _configs(bootstrap, ConfigResource(ConfigResource.Type.TOPIC, topic))

    ours, theirs = both(odradek_broker, kafka44, scenario)
    Checker("4.4").check("client describe_configs topic", ours, theirs)


def test_admin_validation_errors(odradek_broker: BrokerProcess, kafka44: KafkaReference) -> None:
    def code(fut: object) -> str | None:
        try:
            fut.result(30)  # type: ignore[attr-defined]
        except KafkaException as exc:
            return str(exc.args[0].name())
        return None

    def scenario(bootstrap: str) -> object:
        admin = AdminClient({"bootstrap.servers": bootstrap})
        topic = fresh("val")
        create(bootstrap, topic, 2)
        out: dict[str, object] = {}
        for label, spec in [
            ("zero partitions", NewTopic(fresh("z"), 0, 1)),
            ("rf 2 on one broker", NewTopic(fresh("z"), 1, 2)),
            ("bad config", NewTopic(fresh("z"), 1, 1, config={"retention.ms": "x"})),
            ("unknown config", NewTopic(fresh("z"), 1, 1, config={"nope.nope": "1"})),
            ("existing", NewTopic(topic, 1, 1)),
            ("bad name", NewTopic("a/b", 1, 1)),
        ]:
            out[f"create {label}"] = code(admin.create_topics([spec])[spec.topic])
        for label, count in [("same", 2), ("fewer", 1), ("more", 4)]:
            fut = admin.create_partitions([NewPartitions(topic, count)])[topic]
            out[f"partitions {label}"] = code(fut)
        nope = fresh("nope")
        fut = admin.create_partitions([NewPartitions(nope, 3)])[nope]
        out["partitions unknown topic"] = code(fut)
        md = admin.list_topics(topic, timeout=15)
        out["partitions after"] = sorted(md.topics[topic].partitions)
        return out

    ours, theirs = both(odradek_broker, kafka44, scenario)
    Checker("4.4").check("client admin validation", ours, theirs)


def test_auto_creation_and_deletion_seen_in_metadata(
    odradek_broker: BrokerProcess, kafka44: KafkaReference
) -> None:
    def scenario(bootstrap: str) -> object:
        topic = fresh("auto")
        producer = Producer({"bootstrap.servers": bootstrap})
        producer.produce(topic, value=b"v", timestamp=TS0)
        assert producer.flush(30) == 0
        admin = AdminClient({"bootstrap.servers": bootstrap})
        md = admin.list_topics(topic, timeout=15).topics[topic]
        out: dict[str, object] = {
            "auto-created partitions": sorted(md.partitions),
            "auto-created error": md.error.name() if md.error else None,
            "replicas": [p.replicas for p in md.partitions.values()],
        }
        admin.delete_topics([topic])[topic].result(30)
        after = admin.list_topics(topic, timeout=15).topics.get(topic)
        out["right after deletion"] = after.error.name() if after and after.error else after
        return out

    ours, theirs = both(odradek_broker, kafka44, scenario)
    Checker("4.4").check("client auto-creation and deletion", ours, theirs)


def _group_state(
    admin: AdminClient, group: str, members: int | None = None, wait_s: float = 30
) -> dict[str, object]:
    """The group as DescribeGroups / ConsumerGroupDescribe shows it; with `members`, once it is
    stable with that many (polled, bounded: a rebalance in flight is not compared)."""
    deadline = time.monotonic() + wait_s
    while True:
        desc = admin.describe_consumer_groups([group], request_timeout=15)[group].result(30)
        settled = members is None or (
            str(desc.state).endswith("STABLE") and len(desc.members) == members
        )
        if settled or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    return {
        "state": str(desc.state),
        "type": str(getattr(desc, "type", None)),
        "members": len(desc.members),
        "assigned": sorted(
            (tp.topic, tp.partition) for m in desc.members for tp in m.assignment.topic_partitions
        ),
        "protocol": desc.partition_assignor,
    }


@pytest.mark.parametrize("protocol", ["classic", "consumer"])
def test_group_states_and_offsets_around_rebalances(
    odradek_broker: BrokerProcess, kafka44: KafkaReference, protocol: str
) -> None:
    def scenario(bootstrap: str) -> object:
        topic, group = fresh("grp"), fresh("g")
        create(bootstrap, topic, 2)
        admin = AdminClient({"bootstrap.servers": bootstrap})
        conf = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.protocol": protocol,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
        if protocol == "classic":
            conf["partition.assignment.strategy"] = "range"
            conf["session.timeout.ms"] = 10_000
        out: dict[str, object] = {}
        first = Consumer(conf)
        first.subscribe([topic])
        _poll_until(first, lambda c: len(c.assignment()) == 2)
        out["one member"] = _group_state(admin, group, 1)
        first.commit(
            offsets=[TopicPartition(topic, 0, 5), TopicPartition(topic, 1, 7)], asynchronous=False
        )
        second = Consumer(conf)
        second.subscribe([topic])
        _poll_until_both(first, second)
        out["two members"] = _group_state(admin, group, 2)
        committed = second.committed(
            [TopicPartition(topic, 0), TopicPartition(topic, 1)], timeout=15
        )
        out["committed seen by the second"] = [(tp.partition, tp.offset) for tp in committed]
        first.close()
        second.close()
        out["after close"] = _group_state(admin, group)
        offsets = admin.list_consumer_group_offsets([_request(group)], request_timeout=15)[
            group
        ].result(30)
        out["listed offsets"] = sorted((tp.partition, tp.offset) for tp in offsets.topic_partitions)
        return out

    ours, theirs = both(odradek_broker, kafka44, scenario)
    Checker("4.4").check(f"client group {protocol}", ours, theirs)


def _request(group: str) -> object:
    from confluent_kafka import ConsumerGroupTopicPartitions

    return ConsumerGroupTopicPartitions(group)


def _poll_until(consumer: Consumer, done: Callable[[Consumer], bool], wait_s: float = 45) -> None:
    deadline = time.monotonic() + wait_s
    while not done(consumer):
        assert time.monotonic() < deadline, "no assignment in time"
        consumer.poll(0.2)


def _poll_until_both(a: Consumer, b: Consumer, wait_s: float = 60) -> None:
    deadline = time.monotonic() + wait_s
    while not (len(a.assignment()) == 1 and len(b.assignment()) == 1):
        assert time.monotonic() < deadline, (a.assignment(), b.assignment())
        a.poll(0.1)
        b.poll(0.1)


def test_transaction_error_paths(odradek_broker: BrokerProcess, kafka44: KafkaReference) -> None:
    def err_name(call: Callable[[], object]) -> str | None:
        try:
            call()
        except KafkaException as exc:
            return str(exc.args[0].name())
        return None

    def scenario(bootstrap: str) -> object:
        topic, txid = fresh("txn"), fresh("tx")
        create(bootstrap, topic)
        conf = {"bootstrap.servers": bootstrap, "transactional.id": txid}
        out: dict[str, object] = {}
        first = Producer(conf)
        first.init_transactions(30)
        out["commit without begin"] = err_name(lambda: first.commit_transaction(10))
        first.begin_transaction()
        first.produce(topic, value=b"a", timestamp=TS0)
        first.flush(30)
        second = Producer(conf)
        second.init_transactions(30)  # fences the first
        out["fenced commit"] = err_name(lambda: first.commit_transaction(10))
        second.begin_transaction()
        second.produce(topic, value=b"b", timestamp=TS0 + 1)
        out["second commit"] = err_name(lambda: second.commit_transaction(30))
        out["read committed"] = [
            (r[1], r[3])
            for r in consume_all(bootstrap, topic, 1, **{"isolation.level": "read_committed"})
        ]
        return out

    ours, theirs = both(odradek_broker, kafka44, scenario)
    Checker("4.4").check("client transaction errors", ours, theirs)
