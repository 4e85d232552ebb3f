"""The built-in registry's listener on a secured broker: https with the broker's TLS settings,
HTTP Basic against its SASL users (PLAIN, SCRAM) and client certificates under mTLS, through
confluent-kafka's SchemaRegistryClient (basic.auth.user.info, ssl.* settings)."""

from __future__ import annotations

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
from confluent_kafka.schema_registry.error import SchemaRegistryError

from odradek.testing.broker import Broker

pytestmark = pytest.mark.compat

SCHEMA = Schema('{"type":"record","name":"R","fields":[{"name":"a","type":"int"}]}', "AVRO")
USERS = {"alice": "alice-secret", "bob": "bob-secret"}


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-512"])
def test_basic_auth_with_the_brokers_sasl_users(mechanism: str) -> None:
    with Broker(
        schema_registry=True, security="sasl_ssl", mechanism=mechanism, users=USERS
    ) as broker:
        assert broker.schema_registry_url.startswith("https://")
        conf = broker.schema_registry_config("alice")
        assert conf["basic.auth.user.info"] == "alice:alice-secret"
        schema_id = SchemaRegistryClient(conf).register_schema("s", SCHEMA)
        bob = SchemaRegistryClient(broker.schema_registry_config("bob"))
        assert bob.get_schema(schema_id).schema_str == SCHEMA.schema_str
        anonymous = {k: v for k, v in conf.items() if k != "basic.auth.user.info"}
        wrong = {**conf, "basic.auth.user.info": "alice:not-her-password"}
        for refused in (anonymous, wrong):
            with pytest.raises(SchemaRegistryError) as exc:
                SchemaRegistryClient(refused).get_subjects()
            assert exc.value.http_status_code == 401


def test_mtls_needs_a_client_certificate() -> None:
    with Broker(schema_registry=True, security="mtls", users=USERS) as broker:
        conf = broker.schema_registry_config("alice")
        assert "ssl.certificate.location" in conf
        assert SchemaRegistryClient(conf).register_schema("s", SCHEMA) > 0
        no_cert: dict[str, object] = {
            k: v
            for k, v in conf.items()
            if k not in ("ssl.certificate.location", "ssl.key.location")
        }
        no_cert["max.retries"] = 0
        with pytest.raises(Exception) as exc:
            SchemaRegistryClient(no_cert).get_subjects()
        assert not isinstance(exc.value, SchemaRegistryError)  # refused in the TLS handshake
        plain_http = {"url": broker.schema_registry_url.replace("https", "http"), "max.retries": 0}
        with pytest.raises(Exception) as exc:  # plain HTTP to the https listener
            SchemaRegistryClient(plain_http).get_subjects()
        assert not isinstance(exc.value, SchemaRegistryError)
