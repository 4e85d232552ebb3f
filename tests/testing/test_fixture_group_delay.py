"""Test brokers start groups without Kafka's 3 s initial rebalance delay, as Kafka's own
embedded test clusters do: `odradek_broker`, `odradek_fresh_broker` and `Broker()` report
`group.initial.rebalance.delay.ms=0` to an admin client, and a test can still ask for 3000.

The user-visible effect (a group consumer's first record in a fraction of a second instead of
3 s) is a timing, which belongs in bench/; here the broker's effective setting is checked as
an operator would read it (DescribeConfigs)."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, ConfigResource

from odradek.testing import Broker

KEY = "group.initial.rebalance.delay.ms"


def broker_setting(bootstrap: str, key: str) -> str:
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    broker_id = next(iter(admin.list_topics(timeout=20).brokers))
    resource = ConfigResource("BROKER", str(broker_id))
    entries = admin.describe_configs([resource])[resource].result(timeout=20)
    return str(entries[key].value)


def test_session_broker_has_no_initial_rebalance_delay(odradek_broker):
    assert broker_setting(odradek_broker.bootstrap, KEY) == "0"


def test_fresh_broker_has_no_initial_rebalance_delay(odradek_fresh_broker):
    assert broker_setting(odradek_fresh_broker.bootstrap, KEY) == "0"


def test_broker_class_defaults_and_a_test_can_ask_for_the_delay():
    with Broker() as broker:
        assert broker_setting(broker.bootstrap, KEY) == "0"
    with Broker(config={KEY: 3000}) as broker:
        assert broker_setting(broker.bootstrap, KEY) == "3000"
