"""The registry URL a broker publishes in its registration (where the others forward writes)
survives ZooKeeper's `/brokers/ids/<id>` layout next to Kafka's own fields."""

from __future__ import annotations

import json

from odradek.broker.cluster.metadata_store import BrokerRegistration
from odradek.broker.cluster.zk_layout import decode_broker, encode_broker


def test_registry_url_in_the_broker_znode() -> None:
    reg = BrokerRegistration(
        2,
        "127.0.0.1",
        9093,
        endpoints=(("PLAINTEXT", "127.0.0.1", 9093, "PLAINTEXT"),),
        registry_url="https://127.0.0.1:8081",
    )
    data = encode_broker(reg)
    doc = json.loads(data)
    assert doc["endpoints"] == ["PLAINTEXT://127.0.0.1:9093"] and doc["port"] == 9093
    back = decode_broker(2, data, 7, "PLAINTEXT")
    assert back.registry_url == "https://127.0.0.1:8081"
    plain = BrokerRegistration(2, "127.0.0.1", 9093, endpoints=reg.endpoints)
    assert "odradek_schema_registry" not in json.loads(encode_broker(plain))
    assert decode_broker(2, encode_broker(plain), 7, "PLAINTEXT").registry_url is None
