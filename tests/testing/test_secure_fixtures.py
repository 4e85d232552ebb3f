"""Secure test brokers as a user's test project gets them (issue 14): the pytest plugin's
odradek_secure_broker (SASL_SSL in one line, a marker, indirect parameters) and
odradek_broker_factory(security=...), run with pytester as a user would."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

USER_TESTS = """
import confluent_kafka as ck
import pytest
from kafka import KafkaProducer


def produce(conf):
    producer = ck.Producer(conf)
    producer.produce("t", b"x")
    assert producer.flush(20) == 0


def test_sasl_ssl_in_one_line(odradek_secure_broker):
    conf = odradek_secure_broker.client_config(user="alice")
    assert conf["security.protocol"] == "SASL_SSL" and conf["sasl.mechanism"] == "PLAIN"
    produce(conf)
    # a client without credentials gets nowhere
    bad = ck.Producer({"bootstrap.servers": odradek_secure_broker.bootstrap,
                       "message.timeout.ms": 3000})
    errors = []
    bad.produce("t", b"never", on_delivery=lambda err, msg: errors.append(err))
    bad.flush(10)
    assert errors and errors[0] is not None


@pytest.mark.odradek_security("sasl_ssl", mechanism="SCRAM-SHA-512", users={"bob": "pw"})
def test_marker(odradek_secure_broker):
    kw = odradek_secure_broker.kafka_python_config(user="bob")
    assert kw["sasl_mechanism"] == "SCRAM-SHA-512"
    producer = KafkaProducer(**kw)
    producer.send("t", b"y").get(timeout=20)
    producer.close()


@pytest.mark.parametrize("odradek_secure_broker", ["mtls", "sasl_plaintext"], indirect=True)
def test_indirect(odradek_secure_broker):
    produce(odradek_secure_broker.client_config())


def test_same_setup_same_broker(odradek_secure_broker, request):
    first = request.getfixturevalue("odradek_secure_broker")
    assert first is odradek_secure_broker


def test_factory_plaintext_too_and_restart(odradek_broker_factory):
    broker = odradek_broker_factory(topics={"t": 1}, security="ssl", plaintext_too=True)
    ports = dict(broker.ports)
    assert set(ports) == {"SSL", "PLAINTEXT"}
    produce({"bootstrap.servers": broker.plaintext_bootstrap})
    broker.restart(abrupt=True)
    assert broker.ports == ports  # every listener keeps its port
    produce(broker.client_config())
    produce({"bootstrap.servers": broker.plaintext_bootstrap})
"""


def test_secure_fixtures_in_a_user_project(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_user=USER_TESTS)
    result = pytester.runpytest_subprocess("-q", "-p", "no:cacheprovider")
    result.assert_outcomes(passed=6)


def test_plaintext_too_is_an_admin_door_when_acls_are_on() -> None:
    import confluent_kafka as ck

    from odradek.testing import Broker

    config = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}
    with Broker(topics={"t": 1}, config=config, security="sasl_ssl", plaintext_too=True) as b:
        results: list[object] = []

        def produce(conf: dict[str, object]) -> None:
            producer = ck.Producer({**conf, "message.timeout.ms": 5000})
            producer.produce("t", b"x", on_delivery=lambda err, msg: results.append(err))
            producer.flush(20)

        produce({"bootstrap.servers": b.plaintext_bootstrap})  # User:ANONYMOUS, super user
        produce(b.client_config("alice"))  # no ACL: denied
        produce(b.client_config("admin"))  # the brokers' principal, super user
        codes = [None if e is None else e.code() for e in results]  # type: ignore[attr-defined]
        assert codes == [None, ck.KafkaError.TOPIC_AUTHORIZATION_FAILED, None]


def test_restart_keeps_the_ports_of_listeners_given_in_config(tmp_path) -> None:
    import confluent_kafka as ck

    from odradek.testing import Broker
    from odradek.testing.certs import TlsMaterial

    tls = TlsMaterial(str(tmp_path / "tls"))
    config = {
        "listeners": "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0",
        **tls.broker_config(),
    }
    with Broker(topics={"t": 1}, config=config) as broker:
        ports = dict(broker.ports)
        assert set(ports) == {"PLAINTEXT", "SSL"} and 0 not in ports.values()
        broker.restart(abrupt=True)
        assert broker.ports == ports
        producer = ck.Producer(
            {
                "bootstrap.servers": broker.bootstrap_of("SSL"),
                "security.protocol": "SSL",
                "ssl.ca.location": tls.ca,
            }
        )
        producer.produce("t", b"after-restart")
        assert producer.flush(20) == 0
