"""A produce whose answer comes too late: librdkafka's message status, as against Kafka.

librdkafka reports for every message whether it may be in the log (`rd_kafka_message_status`):
a message whose produce request was sent but never answered before `message.timeout.ms` is
POSSIBLY_PERSISTED (the broker may have appended it), one that was never sent is NOT_PERSISTED.
Kafka gets there by handling the request it received and writing the answer to a connection
the client has already given up on; a broker that closed the connection early, or answered
before appending, would turn those into retried-and-delivered or NOT_PERSISTED messages that
are in the log, and an application trusting NOT_PERSISTED would write them twice.

The cluster has three brokers on purpose: librdkafka 2.10+ re-bootstraps when every broker it
knows is down, and with one broker any timed-out connection decommissions the broker handle and
fails what it holds as NOT_PERSISTED, whatever the broker did (Kafka with one broker too; see
docs/notes.md, "librdkafka re-bootstraps a one-broker cluster").
"""

from __future__ import annotations

import time

import pytest

from compat_tests.rdkafka_status import NOT_PERSISTED, POSSIBLY_PERSISTED, Report, StatusProducer
from odradek.testing import Cluster

pytestmark = [pytest.mark.compat, pytest.mark.cluster]

MESSAGE_TIMEOUT_MS = 2000
HELD_MS = 6000  # the broker sits on the produce request three times the client's patience
WAIT_S = 20.0


def injected(cluster: Cluster, node: int) -> int:
    return int(cluster.call(lambda c: c.brokers[node].faults.injected))


def test_timed_out_in_flight_produce_is_possibly_persisted_and_unsent_is_not(tmp_path) -> None:
    with Cluster(3, topics={"t": (1, 1)}, data_dir=str(tmp_path)) as cluster:
        leader = cluster.leader("t")
        config = {
            "bootstrap.servers": cluster.bootstrap,
            "message.timeout.ms": MESSAGE_TIMEOUT_MS,
            "max.in.flight.requests.per.connection": 1,  # the second batch waits for the first
            "linger.ms": 0,
            "reconnect.backoff.ms": 1000,
            "reconnect.backoff.max.ms": 1000,
        }
        with StatusProducer(config, "t") as producer:
            producer.produce(b"warm-up")
            assert producer.flush(WAIT_S)[b"warm-up"].error == "NO_ERROR"

            before = injected(cluster, leader)
            cluster.delay(leader, "produce", HELD_MS, count=1)
            sent = [b"sent"]  # one message, so one request: the one the broker holds
            for payload in sent:
                producer.produce(payload)
            deadline = time.monotonic() + WAIT_S
            while injected(cluster, leader) == before:  # the request reached the broker
                assert time.monotonic() < deadline, "the produce request never arrived"
                producer.poll(0.01)
            unsent = [b"unsent-%d" % i for i in range(3)]
            for payload in unsent:
                producer.produce(payload)
            reports = producer.flush(WAIT_S)

        assert {p: reports.get(p) for p in sent} == {
            p: Report("_MSG_TIMED_OUT", POSSIBLY_PERSISTED) for p in sent
        }
        assert {p: reports.get(p) for p in unsent} == {
            p: Report("_MSG_TIMED_OUT", NOT_PERSISTED) for p in unsent
        }
        # As Kafka does, the broker handled the held request once it let go of it: the possibly
        # persisted messages are in the log, the never-sent ones are not.
        cluster.wait_until(
            lambda: cluster.log_end_offset(leader, "t") >= 1 + len(sent),
            WAIT_S,
            "the held produce request to be appended",
        )
        assert cluster.log_end_offset(leader, "t") == 1 + len(sent)
