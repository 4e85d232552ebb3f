"""The odradek pytest plugin (entry point `pytest11`), registered when odradek is installed.

Fixtures:
    odradek_broker           one in-process broker for the whole session (per xdist worker)
    odradek_topic            factory: odradek_topic(partitions=1, config=None) -> unique name
    odradek_broker_factory   factory for extra brokers of your own, stopped after the test
    odradek_fresh_broker     a broker of this test's own (own port, own empty data dir),
                             started for it and stopped after it: a thousand such tests
                             run in seconds (shared loop thread, data on tmpfs)
    odradek_cluster          factory for replicating clusters, stopped after the test:
                             odradek_cluster(brokers=3, topics=None, config=None) -> Cluster
    odradek_secure_broker    a broker with TLS / SASL (SASL_SSL with PLAIN unless a
                             `odradek_security` marker or indirect parameter says otherwise),
                             one per security set-up for the session; its client_config(),
                             kafka_python_config(), aiokafka_config() and java_properties()
                             are the settings clients need

    def test_orders(odradek_broker, odradek_topic):
        topic = odradek_topic(partitions=3)
        producer = KafkaProducer(bootstrap_servers=odradek_broker.bootstrap)

    def test_failover(odradek_cluster):
        cluster = odradek_cluster(brokers=3, topics={"orders": (3, 3)})  # 3 partitions, RF 3
        producer = KafkaProducer(bootstrap_servers=cluster.bootstrap, acks="all")
        cluster.kill(cluster.leader("orders", 0))

A SASL_SSL broker in one line, and the other security set-ups (odradek.testing.security):

    def test_sasl_ssl(odradek_secure_broker):
        producer = confluent_kafka.Producer(odradek_secure_broker.client_config(user="alice"))

    @pytest.mark.odradek_security("sasl_ssl", mechanism="SCRAM-SHA-512", users={"bob": "pw"})
    def test_scram(odradek_secure_broker):
        consumer = KafkaConsumer("t", **odradek_secure_broker.kafka_python_config(user="bob"))

    @pytest.mark.parametrize("odradek_secure_broker", ["ssl", "mtls", "sasl_plaintext",
                             {"security": "sasl_ssl", "mechanism": "OAUTHBEARER"}],
                             indirect=True)
    def test_every_mode(odradek_secure_broker): ...

    def test_own(odradek_broker_factory):   # a broker of this test's own, any options
        broker = odradek_broker_factory(security="mtls", plaintext_too=True)

    def test_isolated(odradek_fresh_broker):   # nothing left over from any other test
        producer = confluent_kafka.Producer({"bootstrap.servers": odradek_fresh_broker.bootstrap})

security is "ssl", "mtls", "sasl_plaintext" or "sasl_ssl"; mechanism "PLAIN", "SCRAM-SHA-256",
"SCRAM-SHA-512" or "OAUTHBEARER"; users {name: password} (default {"alice": "alice-secret"});
plaintext_too=True adds a PLAINTEXT listener (`plaintext_bootstrap`) for admin (its
clients are super users when an authorizer is on). The brokers
themselves are the super user "admin" (`client_config(user="admin")`).

Every broker these fixtures start (and `odradek.testing.Broker()`) forms a new group without
Kafka's 3 s initial rebalance delay (`group.initial.rebalance.delay.ms=0`, as in Kafka's own
embedded test clusters); `config={"group.initial.rebalance.delay.ms": 3000}` asks for it.

A cluster from `odradek_cluster` fails over quickly: unless `config` says otherwise, followers
long-poll for 100 ms (`replica.fetch.wait.max.ms`), leave the ISR after 1 s without catching up
(`replica.lag.time.max.ms`) and groups rebalance without the initial delay
(`group.initial.rebalance.delay.ms=0`); see `odradek.testing.cluster.FAST_FAILOVER`.
"""

from __future__ import annotations

import itertools
import os
import re
import sys
import warnings
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from odradek.testing.broker import Broker
    from odradek.testing.cluster import Cluster, TopicSpec

_counter = itertools.count()
# odradek_fresh_broker's config: one partition per internal topic
FRESH_BROKER_CONFIG = {
    "offsets.topic.num.partitions": 1,
    "transaction.state.log.num.partitions": 1,
}
_SECURE_MARKER = "odradek_security"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        f"{_SECURE_MARKER}(security, mechanism=None, users=None, plaintext_too=False): the "
        "security set-up of the odradek_secure_broker fixture",
    )


def pytest_sessionfinish(session: pytest.Session) -> None:
    """End the loop thread `shared_loop=True` brokers ran on, if any did (their fixtures have
    stopped them by now), so that no broker thread outlives the session."""
    loop_thread = sys.modules.get("odradek.testing.loop_thread")
    if loop_thread is not None:
        loop_thread.stop_shared_loop()


def _import_broker() -> None:
    """Import the broker (and kafka-python's protocol schemas under it) on first use.

    Loading this plugin imports nothing but pytest: a test run that never asks for these
    fixtures pays no import time and sees no warnings from them. kafka-python 3.0.x loads its
    JSON schemas with the deprecated importlib.resources API (a DeprecationWarning per schema);
    those are ours to hide when it is our import that triggers them, not the user's test's.
    """
    if "odradek.testing.cluster" in sys.modules:
        return  # done already (catch_warnings below would reset the warning caches each test)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", r"(read|open)_text is deprecated", DeprecationWarning)
        import odradek.testing.broker  # noqa: F401
        import odradek.testing.cluster  # noqa: F401


@pytest.fixture(scope="session")
def odradek_broker() -> Iterator[Broker]:
    """A real broker in this test process, on a free port with a temporary data dir."""
    _import_broker()
    from odradek.testing.broker import Broker

    with Broker() as broker:
        yield broker


@pytest.fixture
def odradek_schema_registry() -> Iterator[Broker]:
    """A broker of this test's own with the built-in Schema Registry: `.schema_registry_url`
    for confluent-kafka's SchemaRegistryClient, `.bootstrap` for its producers."""
    _import_broker()
    from odradek.testing.broker import Broker

    broker = Broker(schema_registry=True).start()
    try:
        yield broker
    finally:
        broker.stop()


@pytest.fixture
def odradek_topic(odradek_broker: Broker, request: pytest.FixtureRequest) -> Callable[..., str]:
    """Create a topic with a unique name for this test: `odradek_topic(partitions=3)`."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    stem = re.sub(r"[^a-zA-Z0-9._-]", "-", request.node.name)[:150]

    def create(partitions: int = 1, config: dict[str, Any] | None = None) -> str:
        name = f"{stem}-{worker}-{next(_counter)}"
        configs = {k: str(v) for k, v in (config or {}).items()}
        odradek_broker.call(
            lambda server: server.topics.create_topic(name, partitions, -1, configs)
        )
        return name

    return create


@pytest.fixture
def odradek_broker_factory() -> Iterator[Callable[..., Broker]]:
    """Start brokers of your own: `odradek_broker_factory(topics={"t": 2}, config={...})`."""
    _import_broker()
    from odradek.testing.broker import Broker

    started: list[Broker] = []

    def start(**kwargs: Any) -> Broker:
        broker = Broker(**kwargs).start()
        started.append(broker)
        return broker

    yield start
    for broker in started:
        broker.stop()


@pytest.fixture
def odradek_fresh_broker() -> Iterator[Broker]:
    """A broker of this test's own, stopped (its data removed) after it: its own port and an
    empty data dir, so nothing another test did is seen. It runs on the event-loop thread
    that such brokers share, with its data dir on tmpfs (/dev/shm, or $ODRADEK_TMPFS), so that
    it starts and stops in a millisecond or two: for tests that want isolation and write
    little. Its internal topics have one partition (`FRESH_BROKER_CONFIG`, as in Kafka's own
    integration tests), so the first group or transaction opens one log, not 50. For another
    set-up, `odradek_broker_factory(...)`."""
    _import_broker()
    from odradek.testing.broker import Broker

    broker = Broker(config=FRESH_BROKER_CONFIG, shared_loop=True, tmpfs=True).start()
    try:
        yield broker
    finally:
        broker.stop(clean=False)  # its data is removed: no flush or checkpoint first


@pytest.fixture
def odradek_cluster() -> Iterator[Callable[..., Cluster]]:
    """Start replicating clusters of your own, each stopped after the test:
    `odradek_cluster(brokers=3, topics={"t": (3, 3)}, config={"min.insync.replicas": 2})`.
    `config` is laid over `FAST_FAILOVER`; other keyword arguments go to `Cluster`."""
    _import_broker()
    from odradek.testing.cluster import FAST_FAILOVER, Cluster

    started: list[Cluster] = []

    def start(
        brokers: int = 3,
        topics: dict[str, TopicSpec] | None = None,
        config: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> Cluster:
        cluster = Cluster(brokers, topics, {**FAST_FAILOVER, **(config or {})}, **kwargs)
        cluster.start()
        started.append(cluster)
        return cluster

    yield start
    for cluster in reversed(started):
        cluster.stop()


def _security_options(request: pytest.FixtureRequest) -> dict[str, Any]:
    """The set-up asked for: indirect parameter (a security name or a dict of options), else
    the odradek_security marker, else SASL_SSL with PLAIN."""
    param = getattr(request, "param", None)
    if isinstance(param, str):
        return {"security": param}
    if isinstance(param, dict):
        return dict(param)
    marker = request.node.get_closest_marker(_SECURE_MARKER)
    if marker is not None:
        options = dict(marker.kwargs)
        if marker.args:
            options["security"] = marker.args[0]
        if len(marker.args) > 1:
            options["mechanism"] = marker.args[1]
        return options
    return {"security": "sasl_ssl"}


@pytest.fixture(scope="session")
def _odradek_secure_brokers() -> Iterator[dict[str, Broker]]:
    started: dict[str, Broker] = {}
    yield started
    for broker in started.values():
        broker.stop()


@pytest.fixture
def odradek_secure_broker(
    request: pytest.FixtureRequest, _odradek_secure_brokers: dict[str, Broker]
) -> Broker:
    """A broker with TLS and/or SASL, shared by the tests that ask for the same set-up."""
    _import_broker()
    from odradek.testing.broker import Broker

    options = _security_options(request)
    options.setdefault("security", "sasl_ssl")
    key = repr(
        sorted((k, sorted(v.items()) if isinstance(v, dict) else v) for k, v in options.items())
    )
    if key not in _odradek_secure_brokers:
        _odradek_secure_brokers[key] = Broker(**options).start()
    return _odradek_secure_brokers[key]
