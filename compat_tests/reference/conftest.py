"""Fixtures for tests that compare odradek with Apache Kafka itself (the `reference` marker).

- `kafka44`: one Apache Kafka 4.4.0 node (KRaft, combined broker and controller) for the
  whole session, started the first time a test asks for it and stopped at the session's end.
- `kafka39`: the same with Kafka 3.9.2 (the protocol versions 4.x removed, KIP-896).
- `kafka44_cluster`: three combined 4.4.0 nodes (replication factor 3 for internal topics).
- `reference_kafka`: a factory for other set-ups, `reference_kafka("4.4", nodes=1,
  overrides={...}, sasl_users={"admin": ..., "alice": ...})`, each distinct set-up started
  once per session (with users: SASL_PLAINTEXT/PLAIN listeners and StandardAuthorizer, admin
  the super user).
- `odradek_broker`: one `odradek serve` process for the session, configured like `kafka44`
  (same group delay, one partition per new topic), the other side of every comparison.
- `odradek_three_brokers`: one `odradek cluster --brokers 3` process for the session, its
  internal topics at replication factor 3 with min.insync.replicas 2 (the JVM applications'
  three-broker runs).

The jars come from `scripts/setup.sh test` (.cache/kafka-<version>/); without them the tests
fail, naming the command, rather than skip. When a test fails, the tail of every reference
node's log it used is attached to the report. Memory: at most 1 GB heap per Kafka node
(ODRADEK_REFERENCE_HEAP, Kafka's default); the session keeps `kafka44`, `kafka39` and
`kafka44_cluster` (five JVMs, each growing its heap only as used), while a module's special
set-up (fast retention, SASL) is module-scoped through `reference_pool.get(...)` and
`reference_pool.release(...)`.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator, Mapping
from pathlib import Path

import pytest

from compat_tests.harness import BrokerProcess
from compat_tests.reference.jvm_apps import STREAMS, JvmApps
from compat_tests.reference.kafka_ref import KafkaReference, ReferenceUnavailable

_HERE = Path(__file__).resolve().parent
_USED = pytest.StashKey[list[KafkaReference]]()

# The odradek side of the comparison: Kafka's defaults where odradek's test defaults differ.
ODRADEK_OVERRIDES: dict[str, str] = {
    "group.initial.rebalance.delay.ms": "0",
    "num.partitions": "1",
    "node.id": "1",
}

# A Kafka 4.4 node for group tests that need a dead member gone in seconds: Kafka's floors for
# group session timeouts and heartbeat intervals (45 s and 5 s for consumer and streams groups,
# 6 s for classic ones) lowered, and consumer groups' own defaults short. One node, started on
# first use and kept for the session, serves every module asking for these overrides.
KAFKA_FAST_GROUPS: dict[str, str] = {
    "group.min.session.timeout.ms": "1000",
    "group.consumer.session.timeout.ms": "3000",
    "group.consumer.heartbeat.interval.ms": "500",
    "group.consumer.min.session.timeout.ms": "3000",
    "group.consumer.min.heartbeat.interval.ms": "500",
    "group.streams.min.session.timeout.ms": "6000",
    "group.streams.min.heartbeat.interval.ms": "1000",
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.reference)


class ReferencePool:
    """Reference clusters started on first use, keyed by (version, nodes, overrides)."""

    def __init__(self, factory: pytest.TempPathFactory) -> None:
        self.factory = factory
        self.clusters: dict[tuple[object, ...], KafkaReference] = {}

    def get(
        self,
        version: str = "4.4",
        nodes: int = 1,
        overrides: Mapping[str, str] | None = None,
        sasl_users: Mapping[str, str] | None = None,
    ) -> KafkaReference:
        key = (
            version,
            nodes,
            tuple(sorted((overrides or {}).items())),
            tuple(sorted((sasl_users or {}).items())),
        )
        cluster = self.clusters.get(key)
        if cluster is None:
            try:
                cluster = KafkaReference(
                    version,
                    self.factory.mktemp(f"kafka-{version}-{nodes}n"),
                    nodes=nodes,
                    overrides=overrides,
                    sasl_users=sasl_users,
                )
            except ReferenceUnavailable as exc:
                pytest.fail(str(exc), pytrace=False)
            self.clusters[key] = cluster
            cluster.start()
        dead = [node for node in cluster.nodes if not node.running]
        if dead:
            # a node of a shared set-up exited under an earlier test (no test stops them): say
            # so with its output, rather than let every later test meet a refused connection
            logs = "\n".join(
                (node.dir / "stdout.log").read_text("utf-8", "replace")[-3000:] for node in dead
            )
            pytest.fail(f"{cluster!r}: node(s) {[n.node_id for n in dead]} exited\n{logs}")
        return cluster

    def release(self, cluster: KafkaReference) -> None:
        """Stop one cluster before the session ends (a module's special set-up: its memory
        goes back at once); a later get() of the same set-up starts a new one."""
        for key, known in list(self.clusters.items()):
            if known is cluster:
                del self.clusters[key]
        cluster.stop()

    def stop_all(self) -> None:
        for cluster in self.clusters.values():
            cluster.stop()
        self.clusters.clear()


_POOL = pytest.StashKey[ReferencePool]()


@pytest.fixture(scope="session")
def reference_pool(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[ReferencePool]:
    """One pool for the whole run, even where another conftest imports these fixtures
    (spark_examples/tests): a second pool would start a second `kafka44` JVM."""
    pool = request.config.stash.get(_POOL, None)
    if pool is None:
        pool = request.config.stash[_POOL] = ReferencePool(tmp_path_factory)
    yield pool
    pool.stop_all()


@pytest.fixture
def reference_kafka(
    request: pytest.FixtureRequest, reference_pool: ReferencePool
) -> Callable[..., KafkaReference]:
    def get(
        version: str = "4.4",
        nodes: int = 1,
        overrides: Mapping[str, str] | None = None,
        sasl_users: Mapping[str, str] | None = None,
    ) -> KafkaReference:
        cluster = reference_pool.get(version, nodes, overrides, sasl_users)
        request.node.stash.setdefault(_USED, []).append(cluster)
        return cluster

    return get


@pytest.fixture
def kafka44(reference_kafka: Callable[..., KafkaReference]) -> KafkaReference:
    return reference_kafka("4.4")


@pytest.fixture
def kafka39(reference_kafka: Callable[..., KafkaReference]) -> KafkaReference:
    return reference_kafka("3.9")


@pytest.fixture
def kafka44_cluster(reference_kafka: Callable[..., KafkaReference]) -> KafkaReference:
    return reference_kafka("4.4", nodes=3)


@pytest.fixture(params=["odradek", "kafka-4.4"])
def either_broker(request: pytest.FixtureRequest) -> str:
    """The bootstrap of the session's odradek broker, then of a Kafka 4.4 node: a test that
    takes it runs once on each."""
    if request.param == "odradek":
        broker: BrokerProcess = request.getfixturevalue("odradek_broker")
        return broker.bootstrap
    kafka: KafkaReference = request.getfixturevalue("kafka44")
    return kafka.bootstrap


@pytest.fixture(scope="session")
def odradek_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(tmp_path_factory.mktemp("odradek-ref"), overrides=ODRADEK_OVERRIDES)
    proc.start()
    yield proc
    proc.stop()


# Kafka's production shape for internal topics: RF 3, two in sync to accept a write; group
# floors as KAFKA_FAST_GROUPS so a streams group's session can be short
THREE_BROKER_OVERRIDES: dict[str, str] = {
    **KAFKA_FAST_GROUPS,
    "group.initial.rebalance.delay.ms": "0",
    "num.partitions": "1",
    "default.replication.factor": "3",
    "min.insync.replicas": "2",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
}


@pytest.fixture(scope="session")
def odradek_three_brokers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    from compat_tests.test_cluster import ClusterProcess

    proc = ClusterProcess(tmp_path_factory.mktemp("odradek-3"), 3, overrides=THREE_BROKER_OVERRIDES)
    proc.start()
    yield proc
    proc.stop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    if report.failed:
        for cluster in item.stash.get(_USED, []):
            report.sections.append((f"{cluster!r} logs", cluster.log_tail(max_chars=6000)))
    return report


@pytest.fixture(scope="module")
def streams_apps(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JvmApps]:
    """Instances of compat_tests/reference/jvm/StreamsApp.java (compiled once per run) on the
    Kafka Streams jars; every instance a module starts is stopped when it ends."""
    apps = JvmApps(tmp_path_factory.mktemp("jvm-apps"), STREAMS, sources=["StreamsApp"])
    apps.compile()
    yield apps
    apps.stop_all()
