"""Fetch long polling on an empty partition (min_bytes 1): the answer holds until data arrives
or max_wait_ms has passed, as a client measures it.

A client with a deadline sends max_wait_ms as the time left rounded down to whole milliseconds
(kafka-go's Conn.ReadBatch does), and takes an empty answer that arrives before its deadline for
an empty batch rather than a timeout (kafka-go's testConnReadEmptyWithDeadline on a just-created
topic). The assertions are lower bounds only: a slow machine makes answers later, never
earlier."""

from __future__ import annotations

import time
from typing import Any

from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import FetchRequest

from odradek.testing import Broker
from odradek.testing.raw import RawClient

FETCH_VERSION = 10  # kafka-go's


def fetch_request(topic: str, max_wait_ms: int) -> Any:
    P = FetchRequest.FetchTopic.FetchPartition
    return FetchRequest(
        replica_id=-1,
        max_wait_ms=max_wait_ms,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchRequest.FetchTopic(
                topic=topic,
                partitions=[
                    P(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )


def create_topic(c: RawClient, name: str) -> None:
    T = CreateTopicsRequest.CreatableTopic
    resp = c.request(
        CreateTopicsRequest(
            topics=[
                T(name=name, num_partitions=1, replication_factor=1, assignments=[], configs=[])
            ],
            timeout_ms=5000,
            validate_only=False,
        ),
        4,
    )
    assert resp.topics[0].error_code == 0


def test_an_empty_answer_never_comes_before_the_clients_deadline() -> None:
    with Broker() as b, RawClient(b.bootstrap) as c:
        for i in range(20):
            topic = f"fresh-{i}"
            create_topic(c, topic)  # a just-created, empty partition each time
            deadline = time.monotonic() + 0.10095  # 100.95 ms from now
            max_wait_ms = int((deadline - time.monotonic()) * 1000)  # 100, rounded down
            resp = c.request(fetch_request(topic, max_wait_ms), FETCH_VERSION)
            arrived = time.monotonic()
            (p,) = resp.responses[0].partitions
            assert (p.error_code, p.high_watermark, p.records) == (0, 0, b"")
            assert arrived >= deadline, f"answered {(deadline - arrived) * 1000:.2f} ms early"
