"""The registry on a cluster: every broker serves the API, the broker leading `_schemas`-0
writes and the others forward to it (a broker without a replica forwards everything); ids stay
unique when that broker stops and another takes over."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka.schema_registry import Schema, SchemaRegistryClient

from odradek.testing.cluster import FAST_FAILOVER, Cluster

pytestmark = [pytest.mark.compat, pytest.mark.cluster]


def eventually(check: Callable[[], bool], timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def avro(name: str) -> Schema:
    fields = '[{"name":"a","type":"int"}]'
    return Schema(f'{{"type":"record","name":"{name}","fields":{fields}}}', "AVRO")


def test_writes_forwarded_ids_kept_across_failover() -> None:
    config = {**FAST_FAILOVER, "schema.registry.listeners": "http://127.0.0.1:0"}
    with Cluster(brokers=4, config=config) as cluster:
        urls = {n: cluster.schema_registry_url(n) for n in range(4)}
        replicas = cluster.partition("_schemas").replicas
        assert len(replicas) == 3  # as the internal topics: min(3, brokers)
        writer = cluster.leader("_schemas", 0)
        followers = [n for n in replicas if n != writer]
        outsider = next(n for n in range(4) if n not in replicas)
        via_follower = SchemaRegistryClient({"url": urls[followers[0]]})
        other = SchemaRegistryClient({"url": urls[followers[1]]})
        at_writer = SchemaRegistryClient({"url": urls[writer]})
        via_outsider = SchemaRegistryClient({"url": urls[outsider]})

        first = via_follower.register_schema("a-value", avro("A"))
        second = at_writer.register_schema("b-value", avro("B"))
        third = via_outsider.register_schema("c-value", avro("C"))
        assert len({first, second, third}) == 3
        # read through another follower and the outsider: found, the same ids
        assert other.get_schema(first).schema_str == avro("A").schema_str
        assert other.lookup_schema("a-value", avro("A")).schema_id == first
        assert other.get_latest_version("c-value").schema_id == third
        assert via_outsider.get_schema(second).schema_str == avro("B").schema_str
        # a list is the follower's own view: up to its replica's high watermark
        subjects = ["a-value", "b-value", "c-value"]
        assert eventually(lambda: sorted(other.get_subjects()) == subjects)
        via_follower.set_compatibility("a-value", "NONE")
        assert at_writer.get_compatibility("a-value") == "NONE"

        cluster.stop_broker(writer)
        new_writer = cluster.wait_for_leader("_schemas", 0, not_on=writer)
        survivor = SchemaRegistryClient(
            {"url": urls[next(n for n in followers if n != new_writer)]}
        )
        fourth = survivor.register_schema("d-value", avro("D"))
        fifth = via_outsider.register_schema("e-value", avro("E"))
        assert len({first, second, third, fourth, fifth}) == 5
        assert survivor.register_schema("a-value", avro("A")) == first
        at_new = SchemaRegistryClient({"url": urls[new_writer]})
        assert at_new.get_schema(fourth).schema_str == avro("D").schema_str
        assert sorted(at_new.get_subjects()) == [*subjects, "d-value", "e-value"]

        cluster.start_broker(writer)  # back as a follower: its own replica, the same ids
        back = SchemaRegistryClient({"url": cluster.schema_registry_url(writer)})
        assert back.get_latest_version("e-value").schema_id == fifth
        assert back.register_schema("f-value", avro("F")) not in (
            first,
            second,
            third,
            fourth,
            fifth,
        )
