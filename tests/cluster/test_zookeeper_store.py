"""`ZooKeeperMetadataStore` against a real ZooKeeper: two stores stand for two brokers in
separate processes and must see each other's changes through watches."""

from __future__ import annotations

import itertools
import subprocess
import sys
import threading
import uuid

import pytest

from odradek.broker.cluster.metadata_store import (
    BrokerRegistration,
    MetadataChange,
    PartitionState,
    TopicExistsError,
    TopicInfo,
)
from odradek.broker.cluster.zk_store import ZooKeeperError, ZooKeeperMetadataStore
from odradek.testing.zookeeper import ZooKeeperServer
from tests.cluster.zk_helpers import eventually, run, two_stores

SESSION_MS = 2000
_chroots = itertools.count()


@pytest.fixture
def connect(zookeeper: ZooKeeperServer) -> str:
    return zookeeper.connect(f"/store-test-{next(_chroots)}")


def open_store(connect: str, node: int, **kwargs) -> ZooKeeperMetadataStore:
    return ZooKeeperMetadataStore(connect, node, session_timeout_ms=SESSION_MS, **kwargs)


def topic(name: str, partitions: int = 2) -> TopicInfo:
    states = [PartitionState([0, 1], p % 2, 0, [0, 1]) for p in range(partitions)]
    return TopicInfo(name, uuid.uuid4(), states, {"retention.ms": "1000"})


def test_a_topic_and_its_changes_reach_the_other_broker(connect: str) -> None:
    async def body() -> None:
        with two_stores(connect) as (a, b, heard):
            a.create_topic(topic("orders"))
            await eventually(lambda: "orders" in b.topics)
            seen = b.topics["orders"]
            assert seen.topic_id == a.topics["orders"].topic_id
            assert seen.configs == {"retention.ms": "1000"}
            assert [p.leader for p in seen.partitions] == [0, 1]
            assert MetadataChange("topic", "orders") in heard

            st = a.topics["orders"].partitions[0]
            new = PartitionState([0, 1], 1, st.leader_epoch + 1, [1])
            assert a.update_partitions([("orders", 0, new, st.leader_epoch, st.partition_epoch)])
            # the same expectation again is stale now: refused, whoever asks
            again = PartitionState([0, 1], 0, st.leader_epoch + 1, [0])
            stale = ("orders", 0, again, st.leader_epoch, st.partition_epoch)
            assert a.update_partitions([stale]) == [False]
            await eventually(lambda: b.topics["orders"].partitions[0].leader == 1)
            assert b.update_partitions([stale]) == [False]
            assert b.topics["orders"].partitions[0].isr == [1]

            info = a.topics["orders"]
            info.configs = {"cleanup.policy": "compact"}
            info.partitions.append(PartitionState([1, 0], 1, 0, [1, 0]))
            a.update_topic(info)
            await eventually(lambda: len(b.topics["orders"].partitions) == 3)
            await eventually(lambda: b.topics["orders"].configs == {"cleanup.policy": "compact"})

    run(body)


def test_deleted_and_recreated_topic_is_the_new_one_everywhere(connect: str) -> None:
    async def body() -> None:
        with two_stores(connect) as (a, b, _):
            a.create_topic(topic("t"))
            await eventually(lambda: "t" in b.topics)
            a.delete_topic("t")
            await eventually(lambda: "t" not in b.topics)
            second = topic("t", partitions=3)
            a.create_topic(second)
            await eventually(lambda: "t" in b.topics and len(b.topics["t"].partitions) == 3)
            assert b.topics["t"].topic_id == second.topic_id
            with pytest.raises(TopicExistsError):
                b.create_topic(topic("t"))

    run(body)


def test_the_first_broker_is_controller_and_a_survivor_takes_over(connect: str) -> None:
    async def body() -> None:
        with two_stores(connect) as (a, b, _):
            a.register_broker(BrokerRegistration(0, "127.0.0.1", 9001))
            b.register_broker(BrokerRegistration(1, "127.0.0.1", 9002))
            await eventually(lambda: b.live_brokers() == [0, 1] and a.live_brokers() == [0, 1])
            assert a.controller_id() == b.controller_id() == 0
            assert b.broker(0) == a.broker(0)
            assert b.broker(0).broker_epoch > 0  # the registration's creation zxid

            a.set_shutting_down(0)
            await eventually(lambda: b.broker(0).shutting_down)
            a.close()  # the session ends: its ephemeral nodes go at once
            await eventually(lambda: b.live_brokers() == [1] and b.controller_id() == 1)

    run(body)


def test_a_broker_id_waits_for_its_previous_session(connect: str) -> None:
    async def body() -> None:
        old, new = open_store(connect, 3), open_store(connect, 3)
        try:
            old.subscribe(lambda change: None)
            new.subscribe(lambda change: None)
            old.register_broker(BrokerRegistration(3, "127.0.0.1", 9003))
            timer = threading.Timer(0.5, old.close)  # the old process goes away meanwhile
            timer.start()
            new.register_broker(BrokerRegistration(3, "127.0.0.1", 9004))
            timer.join()
            await eventually(lambda: new.broker(3) is not None and new.broker(3).port == 9004)
        finally:
            old.close()
            new.close()

    run(body)


def test_a_connection_lost_while_the_paths_are_made_is_retried(
    connect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kazoo.client import KazooClient
    from kazoo.exceptions import ConnectionLoss

    from odradek.broker.cluster import zk_layout as zl
    from odradek.broker.cluster.zk_session import ZooKeeperSession

    real = KazooClient.ensure_path
    lost = []

    def ensure_path(self: KazooClient, path: str, acl: object = None) -> bool:
        if not lost:  # the first request meets a dropped connection
            lost.append(path)
            raise ConnectionLoss()
        return real(self, path, acl)

    monkeypatch.setattr(KazooClient, "ensure_path", ensure_path)
    session = ZooKeeperSession(connect, 0, 6000, 6000)
    try:
        assert lost
        assert all(session.zk.exists(path) for path in zl.PERSISTENT_PATHS)
    finally:
        session.close()


def test_a_connection_lost_while_the_start_reads_run_is_retried(
    connect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every read of the broker's start (cluster id, topics, configs, features) and its
    registration meet a dropped connection once; the start goes on on the same session, as
    Kafka's retryRequestsUntilConnected (a Jepsen broker restarted under load exited with a
    ConnectionLoss traceback from the cluster id read)."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import ConnectionLoss

    open_store(connect, 9).close()  # the cluster id and paths exist: the next start reads them
    lost: set[str] = set()
    for name in ("get", "get_children", "exists", "create"):
        real = getattr(KazooClient, name)

        def once(self: KazooClient, path: str, *args: object, _real=real, _name=name, **kw: object):
            if (_name, path) not in lost:  # each first request of a kind and path is lost
                lost.add((_name, path))
                raise ConnectionLoss()
            return _real(self, path, *args, **kw)

        monkeypatch.setattr(KazooClient, name, once)
    store = open_store(connect, 0)
    try:
        store.register_broker(BrokerRegistration(0, "127.0.0.1", 9092))
        monkeypatch.undo()
        assert {("get", "/cluster/id"), ("create", "/brokers/ids/0")} <= lost
        assert ("create", "/controller") in lost
        assert store.cluster_id and 0 in store.live_brokers()
        assert store.zk.exists("/brokers/ids/0") is not None
        # the election's create was retried: this broker is the controller, with an epoch
        assert store.registrar.controller_epoch >= 1
        assert store.session.read_controller() == 0
    finally:
        store.close()


def test_a_connection_that_stays_lost_at_start_fails_cleanly(
    connect: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past zookeeper.connection.timeout.ms the start fails with a ZooKeeperError (the CLI's
    clean exit with its message), not kazoo's ConnectionLoss."""
    from kazoo.client import KazooClient
    from kazoo.exceptions import ConnectionLoss

    open_store(connect, 9).close()

    def lost(self: KazooClient, path: str, *args: object, **kw: object) -> object:
        raise ConnectionLoss()

    monkeypatch.setattr(KazooClient, "get", lost)
    with pytest.raises(ZooKeeperError, match="did not answer again within 1000 ms"):
        open_store(connect, 0, connection_timeout_ms=1000)


def test_producer_id_blocks_never_overlap(connect: str) -> None:
    a, b = open_store(connect, 0), open_store(connect, 1)
    try:
        blocks = [s.allocate_producer_ids() for s in (a, b, a, b)]
    finally:
        a.close()
        b.close()
    ids = [set(range(start, end)) for start, end in blocks]
    assert all(len(block) == 1000 for block in ids)
    assert len(set().union(*ids)) == 4000


def test_cluster_id_is_shared_and_checked(connect: str) -> None:
    a = open_store(connect, 0)
    b = open_store(connect, 1)
    try:
        assert a.cluster_id == b.cluster_id
        with pytest.raises(ZooKeeperError, match="does not match"):
            open_store(connect, 2, cluster_id="not-this-cluster").close()
    finally:
        a.close()
        b.close()


def test_serve_without_a_reachable_zookeeper_exits_with_one_line(tmp_path) -> None:
    from odradek.testing.zookeeper import _free_port

    port = _free_port("127.0.0.1")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "odradek",
            "serve",
            "--override",
            f"log.dirs={tmp_path}",
            "--override",
            "listeners=PLAINTEXT://127.0.0.1:0",
            "--override",
            f"zookeeper.connect=127.0.0.1:{port}/odradek",
            "--override",
            "zookeeper.connection.timeout.ms=1000",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert f"cannot connect to ZooKeeper at 127.0.0.1:{port}/odradek" in proc.stderr


def test_the_fixture_zookeeper_keeps_a_log(zookeeper: ZooKeeperServer) -> None:
    """The test ZooKeeper logs through a real SLF4J binding to a file in its directory (without
    one it logs nothing, and a session it failed to open leaves no trace)."""
    text = zookeeper.log_path.read_text(encoding="utf-8", errors="replace")
    assert "INFO org.apache.zookeeper.server.ZooKeeperServer" in text, zookeeper.log_tail()
    assert "PrepRequestProcessor (sid:0) started" in text, zookeeper.log_tail()
