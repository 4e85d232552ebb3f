"""KIP-932 share groups with confluent-kafka 2.16's ShareConsumer (librdkafka's share consumer
speaks ShareGroupHeartbeat, ShareFetch and ShareAcknowledge v1, as Kafka 4.1 serves them).

A new share-partition starts at the log end (Kafka's `share.auto.offset.reset` default,
latest), so each test first "warms up": it writes marker records until a consumer of the group
receives one, which shows the share-partition exists; the records written afterwards are the
test's. Markers are accepted and otherwise ignored.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from confluent_kafka import AcknowledgeType, Message, Producer, ShareConsumer
from confluent_kafka.admin import AdminClient, NewTopic

from compat_tests.harness import BrokerProcess, unique_name
from odradek.testing.cluster import Cluster
from odradek.testing.raw import RawClient
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey

# Short locks where a test waits for one to expire; elsewhere Kafka's 30 s, so that a consumer
# slowed down by a loaded machine never loses its records to a lock that expired (a duplicate).
LOCK_MS = 4000
SHARE_CONFIG = {
    "group.share.record.lock.duration.ms": str(LOCK_MS),
    "group.share.session.timeout.ms": "8000",
    "group.share.heartbeat.interval.ms": "500",
    "share.coordinator.state.topic.num.partitions": "3",
    "offsets.topic.num.partitions": "3",  # closing 50 logs after a kill -9 restart takes seconds
}
WAIT_S = 30.0
WARM = b"warm-up"

LONG_LOCKS = {**SHARE_CONFIG, "group.share.record.lock.duration.ms": "30000"}
share_broker = pytest.mark.parametrize("broker", [SHARE_CONFIG], indirect=True)
long_lock_broker = pytest.mark.parametrize("broker", [LONG_LOCKS], indirect=True)


def create_topic(bootstrap: str, name: str, partitions: int = 1) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics([NewTopic(name, partitions, 1)]).values():
        fut.result(timeout=WAIT_S)


def share_consumer(bootstrap: str, group: str, topic: str, explicit: bool = False) -> Any:
    c = ShareConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "share.acknowledgement.mode": "explicit" if explicit else "implicit",
        }
    )
    c.subscribe([topic])
    return c


def produce(bootstrap: str, topic: str, values: Iterable[bytes]) -> None:
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for v in values:
        p.produce(topic, value=v)
    assert p.flush(WAIT_S) == 0


def real(msgs: Iterable[Message]) -> list[Message]:
    out = []
    for m in msgs:
        assert m.error() is None, m.error()
        if m.value() != WARM:
            out.append(m)
    return out


def warm_up(bootstrap: str, topic: str, consumers: list[Any], explicit: bool = False) -> None:
    """Write markers until one of `consumers` gets one (the share-partition then exists)."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        produce(bootstrap, topic, [WARM])
        for c in consumers:
            msgs = list(c.poll(0.3))
            if explicit:
                for m in msgs:
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
            if any(m.value() == WARM for m in msgs):
                if explicit:
                    c.commit_sync(WAIT_S)
                return
    pytest.fail("no consumer of the share group received a warm-up record")


def poll_until(
    c: Any, done: Callable[[list[Message]], bool], on_batch: Callable[[list[Message]], None]
) -> list[Message]:
    got: list[Message] = []
    deadline = time.monotonic() + WAIT_S
    while not done(got):
        assert time.monotonic() < deadline, f"timed out with {[m.value() for m in got]}"
        msgs = list(c.poll(0.5))
        on_batch(msgs)
        got += real(msgs)
    return got


def describe_share_group(bootstrap: str, group: str) -> Any:
    """ShareGroupDescribe v1 (no client of ours sends it yet)."""
    req = protocol.request_class(77)(group_ids=[group], include_authorized_operations=False)
    with RawClient(bootstrap) as raw:
        _cid, data = raw.encode(req, 1)
        raw.send(data)
        resp = protocol.response_class(77).decode(raw.read_frame(), version=1, header=True)
    (described,) = resp.groups
    return described


def values(msgs: Iterable[Message]) -> list[bytes]:
    return [m.value() for m in msgs]


@long_lock_broker
def test_three_share_consumers_receive_each_record_once(broker: BrokerProcess) -> None:
    topic = unique_name("share-three")
    group = topic
    create_topic(broker.bootstrap, topic, partitions=1)  # one partition, shared by all three
    consumers = [share_consumer(broker.bootstrap, group, topic) for _ in range(3)]
    try:
        warm_up(broker.bootstrap, topic, consumers)
        n = 300
        expected = [b"r%03d" % i for i in range(n)]
        got: list[list[bytes]] = [[] for _ in consumers]
        stop = threading.Event()
        errors: list[BaseException] = []

        def run(i: int) -> None:
            try:
                while not stop.is_set():
                    got[i] += values(real(consumers[i].poll(0.2)))
                consumers[i].commit_sync(WAIT_S)  # the last poll's records, accepted
            except BaseException as exc:  # reported by the main thread
                errors.append(exc)

        threads = [threading.Thread(target=run, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for start in range(0, n, 30):  # in rounds, while the consumers poll
            produce(broker.bootstrap, topic, expected[start : start + 30])
        deadline = time.monotonic() + WAIT_S
        while sum(len(g) for g in got) < n and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        for t in threads:
            t.join(WAIT_S)
        assert not errors, errors
        everything = [v for g in got for v in g]
        assert sorted(everything) == expected  # every record, none twice
        described = describe_share_group(broker.bootstrap, group)
        assert (described.error_code, described.group_state) == (0, "Stable")
        assert described.assignor_name == "simple" and len(described.members) == 3
        for m in described.members:  # one partition: all three share it
            assert [(tp.topic_name, tp.partitions) for tp in m.assignment.topic_partitions] == [
                (topic, [0])
            ]
        listed = subprocess.run(
            [sys.executable, "-m", "odradek", "groups", "list", "--json"],
            env={**os.environ, "ODRADEK_BOOTSTRAP": broker.bootstrap},
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert listed.returncode == 0, listed.stderr
        assert {"group": group, "protocol_type": "share", "state": "Stable", "type": "share"} in (
            json.loads(listed.stdout)
        )
    finally:
        for c in consumers:
            c.close()


@share_broker
def test_released_and_expired_records_come_back_rejected_do_not(broker: BrokerProcess) -> None:
    topic = unique_name("share-acks")
    create_topic(broker.bootstrap, topic)
    a = share_consumer(broker.bootstrap, topic, topic, explicit=True)
    try:
        warm_up(broker.bootstrap, topic, [a], explicit=True)
        produce(broker.bootstrap, topic, [b"release", b"reject", b"accept"])

        def ack(msgs: list[Message]) -> None:
            for m in msgs:
                kind = {
                    b"release": AcknowledgeType.RELEASE,
                    b"reject": AcknowledgeType.REJECT,
                }.get(m.value(), AcknowledgeType.ACCEPT)
                if m.value() == b"release" and m.delivery_count() > 1:
                    kind = AcknowledgeType.ACCEPT
                a.acknowledge(m, kind)

        first = poll_until(a, lambda got: len(got) >= 3, ack)
        assert values(first) == [b"release", b"reject", b"accept"]
        assert [m.delivery_count() for m in first] == [1, 1, 1]
        a.commit_sync(WAIT_S)
        again = poll_until(a, lambda got: len(got) >= 1, ack)
        assert values(again) == [b"release"] and again[0].delivery_count() == 2
        a.commit_sync(WAIT_S)
        # nothing else comes back: the rejected and accepted records are done
        produce(broker.bootstrap, topic, [b"last"])
        tail = poll_until(a, lambda got: b"last" in values(got), ack)
        assert values(tail) == [b"last"]
        a.commit_sync(WAIT_S)

        # a record whose acquisition lock expires goes to another member, delivered twice
        produce(broker.bootstrap, topic, [b"held"])
        held = poll_until(a, lambda got: len(got) >= 1, lambda msgs: None)
        assert values(held) == [b"held"]  # and not acknowledged
        b = share_consumer(broker.bootstrap, topic, topic)
        try:
            later = poll_until(b, lambda got: len(got) >= 1, lambda msgs: None)
            assert values(later) == [b"held"] and later[0].delivery_count() == 2
            b.commit_sync(WAIT_S)
        finally:
            b.close()
    finally:
        a.close()


@long_lock_broker
def test_acknowledgements_sent_by_close_are_kept(broker: BrokerProcess) -> None:
    """An explicit-mode consumer acknowledges its records and closes without commit_sync:
    librdkafka sends the leave heartbeat to the coordinator and the acknowledgements
    (ShareAcknowledge, epoch -1) on another connection, in no fixed order. Round after round,
    the next consumer of the group gets only the records written for it: none that an earlier
    one accepted or rejected comes back."""
    topic = unique_name("share-close")
    create_topic(broker.bootstrap, topic)
    first = share_consumer(broker.bootstrap, topic, topic, explicit=True)
    try:
        warm_up(broker.bootstrap, topic, [first], explicit=True)
    finally:
        first.close()
    for r in range(8):
        batch = [b"c%d-%d" % (r, i) for i in range(4)]
        produce(broker.bootstrap, topic, batch)
        c = share_consumer(broker.bootstrap, topic, topic, explicit=True)
        try:

            def ack(msgs: list[Message], c: Any = c) -> None:
                for m in msgs:
                    rejected = m.value() is not None and m.value().endswith(b"-3")
                    c.acknowledge(m, AcknowledgeType.REJECT if rejected else AcknowledgeType.ACCEPT)

            got = poll_until(c, lambda got: len(got) >= 4, ack)
            assert values(got) == batch, f"round {r}"
            assert {m.delivery_count() for m in got} == {1}
        finally:
            c.close()  # the acknowledgements of the last poll go with it


@share_broker
def test_a_consumer_byte_rate_quota_throttles_a_share_consumer(broker: BrokerProcess) -> None:
    """consumer_byte_rate applies to ShareFetch as to Fetch: librdkafka's ShareConsumer reports
    the broker's throttle time through throttle_cb, having received at most one quota window's
    worth of records (1000 B/s x 10 s) before it."""
    topic = unique_name("share-quota")
    create_topic(broker.bootstrap, topic)
    Alter = protocol.request_class(ApiKey.ALTER_CLIENT_QUOTAS)
    E = Alter.EntryData
    quota = E(
        entity=[E.EntityData(entity_type="client-id", entity_name=topic)],
        ops=[E.OpData(key="consumer_byte_rate", value=1000.0, remove=False)],
    )
    with RawClient(broker.bootstrap) as admin:
        resp = admin.request(Alter(entries=[quota], validate_only=False), 1)
        assert resp.entries[0].error_code == 0
    throttles: list[float] = []
    c = ShareConsumer(
        {
            "bootstrap.servers": broker.bootstrap,
            "group.id": topic,
            "client.id": topic,
            "throttle_cb": lambda event: throttles.append(event.throttle_time),
        }
    )
    c.subscribe([topic])
    try:
        warm_up(broker.bootstrap, topic, [c])
        p = Producer({"bootstrap.servers": broker.bootstrap})
        for i in range(12):  # 12 batches of about 1.1 KB: more than one window holds
            p.produce(topic, value=b"q%02d" % i + b"x" * 1000)
            p.flush(WAIT_S)
        got: list[Message] = []
        deadline = time.monotonic() + WAIT_S
        while not any(t > 0 for t in throttles):
            assert time.monotonic() < deadline, f"no throttle after {len(got)} records"
            got += real(c.poll(0.3))
        assert 0 < len(got) <= 10  # no more than one quota window's bytes
    finally:
        c.close()


CHILD = textwrap.dedent(
    """
    import sys, time
    from confluent_kafka import AcknowledgeType, ShareConsumer
    c = ShareConsumer({"bootstrap.servers": sys.argv[1], "group.id": sys.argv[2],
                       "share.acknowledgement.mode": "explicit"})
    c.subscribe([sys.argv[3]])
    while True:
        msgs = list(c.poll(0.3))
        held = [m.offset() for m in msgs if m.value() != b"warm-up"]
        for m in msgs:
            if m.value() == b"warm-up":
                c.acknowledge(m, AcknowledgeType.ACCEPT)
        if msgs and not held:
            c.commit_sync(30)
            print("WARM", flush=True)
        if held:
            print("HELD", " ".join(map(str, held)), flush=True)
            time.sleep(600)  # killed here, holding its records
    """
)


@share_broker
def test_a_killed_consumers_records_go_to_the_others(broker: BrokerProcess) -> None:
    topic = unique_name("share-killed")
    create_topic(broker.bootstrap, topic)
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, broker.bootstrap, topic, topic],
        stdout=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()
    reader = threading.Thread(
        target=lambda: [lines.put(line) for line in child.stdout or []], daemon=True
    )
    reader.start()

    def next_line(timeout: float) -> str | None:
        try:
            return lines.get(timeout=timeout)
        except queue.Empty:
            return None

    survivors: list[Any] = []
    try:
        deadline = time.monotonic() + WAIT_S
        while next_line(0.3) != "WARM\n":
            assert time.monotonic() < deadline and child.poll() is None, "child never warmed up"
            produce(broker.bootstrap, topic, [WARM])
        expected = [b"k%02d" % i for i in range(20)]
        produce(broker.bootstrap, topic, expected)
        line = None
        while line is None or not line.startswith("HELD"):
            assert time.monotonic() < deadline and child.poll() is None, "child held nothing"
            line = next_line(0.5)
        held = [int(x) for x in line.split()[1:]]
        assert held
        child.send_signal(signal.SIGKILL)  # mid-batch: nothing acknowledged, nothing closed
        child.wait(WAIT_S)
        survivors = [
            share_consumer(broker.bootstrap, topic, topic, explicit=True) for _ in range(2)
        ]
        got: list[Message] = []
        deadline = time.monotonic() + WAIT_S
        while len(got) < len(expected):
            assert time.monotonic() < deadline, values(got)
            for c in survivors:
                msgs = list(c.poll(0.3))
                for m in msgs:  # accepted at once: no lock of a survivor runs out
                    c.acknowledge(m, AcknowledgeType.ACCEPT)
                if msgs:
                    c.commit_sync(WAIT_S)
                got += real(msgs)
        assert sorted(values(got)) == expected  # each once, among the survivors
        redelivered = {m.offset(): m.delivery_count() for m in got if m.offset() in held}
        assert set(redelivered) == set(held)
        assert all(count == 2 for count in redelivered.values())
    finally:
        if child.poll() is None:
            child.kill()
            child.wait(WAIT_S)
        for c in survivors:
            c.close()


def test_broker_restart_keeps_acknowledged_state(
    fresh_broker: Callable[..., BrokerProcess],
) -> None:
    b = fresh_broker(LONG_LOCKS)
    topic = unique_name("share-restart")
    create_topic(b.bootstrap, topic)
    a = share_consumer(b.bootstrap, topic, topic, explicit=True)
    try:
        warm_up(b.bootstrap, topic, [a], explicit=True)
        expected = [b"s%d" % i for i in range(10)]
        produce(b.bootstrap, topic, expected)

        def ack(msgs: list[Message]) -> None:  # accept the first five, release the rest
            for m in msgs:
                keep = m.value() in expected[:5] or m.value() == WARM
                a.acknowledge(m, AcknowledgeType.ACCEPT if keep else AcknowledgeType.RELEASE)

        poll_until(a, lambda got: len(got) >= 10, ack)
        a.commit_sync(WAIT_S)
    finally:
        a.close()
    b.restart(hard=True)  # killed: only what was written to __share_group_state survives
    c = share_consumer(b.bootstrap, topic, topic)
    try:
        got = poll_until(c, lambda got: len(got) >= 5, lambda msgs: None)
        c.commit_sync(WAIT_S)
        assert values(got) == expected[5:]
        assert [m.delivery_count() for m in got] == [2] * 5
    finally:
        c.close()


def test_three_broker_cluster_keeps_acknowledged_state_across_a_restart(tmp_path: Any) -> None:
    """Each partition's share state goes to the broker leading its __share_group_state
    partition (WriteShareGroupState), and is read back from there after a restart
    (ReadShareGroupState), whichever brokers lead what then."""
    config = LONG_LOCKS
    data = str(tmp_path / "cluster")
    topic = "share-cluster"
    expected = {p: [b"c%d-%d" % (p, i) for i in range(6)] for p in range(3)}
    with Cluster(3, config=config, data_dir=data) as cluster:
        cluster.create_topic(topic, 3, 3)
        a = share_consumer(cluster.bootstrap, topic, topic, explicit=True)
        try:
            warm = set()
            p = Producer({"bootstrap.servers": cluster.bootstrap})
            deadline = time.monotonic() + WAIT_S
            while warm != {0, 1, 2}:  # every share-partition exists
                assert time.monotonic() < deadline, warm
                for i in range(3):
                    p.produce(topic, value=WARM, partition=i)
                p.flush(WAIT_S)
                for m in a.poll(0.3):
                    a.acknowledge(m, AcknowledgeType.ACCEPT)
                    warm.add(m.partition())
            a.commit_sync(WAIT_S)
            for part, vals in expected.items():
                for v in vals:
                    p.produce(topic, value=v, partition=part)
            assert p.flush(WAIT_S) == 0

            def ack(msgs: list[Message]) -> None:  # accept the first half of each partition
                for m in msgs:
                    keep = m.value() == WARM or m.value() in expected[m.partition()][:3]
                    a.acknowledge(m, AcknowledgeType.ACCEPT if keep else AcknowledgeType.RELEASE)

            poll_until(a, lambda got: len(got) >= 18, ack)
            a.commit_sync(WAIT_S)
        finally:
            a.close()
    with Cluster(3, config=config, data_dir=data) as cluster:
        c = share_consumer(cluster.bootstrap, topic, topic)
        try:
            got = poll_until(c, lambda got: len(got) >= 9, lambda msgs: None)
            c.commit_sync(WAIT_S)
        finally:
            c.close()
    assert sorted(values(got)) == sorted(v for vals in expected.values() for v in vals[3:])
    assert {m.delivery_count() for m in got} == {2}


@long_lock_broker
def test_a_read_committed_share_group_never_gets_aborted_records(broker: BrokerProcess) -> None:
    """Kafka 4.2's `share.isolation.level=read_committed` on the group (IncrementalAlterConfigs
    on a GROUP resource): the share consumer gets the committed transactions' records and none
    of the aborted one's; the read_uncommitted default would deliver all three."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ConfigResource, ResourceType

    bs, topic, group = broker.bootstrap, unique_name("share-rc"), unique_name("share-rc-g")
    create_topic(bs, topic)
    admin = AdminClient({"bootstrap.servers": bs})
    resource = ConfigResource(
        ResourceType.GROUP,
        group,
        incremental_configs=[
            ConfigEntry(
                "share.isolation.level",
                "read_committed",
                incremental_operation=AlterConfigOpType.SET,
            ),
            ConfigEntry(
                "share.auto.offset.reset", "earliest", incremental_operation=AlterConfigOpType.SET
            ),
        ],
    )
    for fut in admin.incremental_alter_configs([resource]).values():
        fut.result(WAIT_S)
    p = Producer({"bootstrap.servers": bs, "transactional.id": topic})
    p.init_transactions(WAIT_S)
    for name, commit in (("c1", True), ("ab", False), ("c2", True)):
        p.begin_transaction()
        for i in range(3):
            p.produce(topic, value=f"{name}-{i}".encode())
        p.flush(WAIT_S)
        if commit:
            p.commit_transaction(WAIT_S)
        else:
            p.abort_transaction(WAIT_S)
    c = share_consumer(bs, group, topic)
    try:
        got = poll_until(c, lambda g: len(g) >= 6, lambda _m: None)
        got += real(c.poll(1.0))  # anything beyond would come with or right after them
    finally:
        c.close()
    assert sorted(values(got)) == sorted(
        f"{n}-{i}".encode() for n in ("c1", "c2") for i in range(3)
    )
