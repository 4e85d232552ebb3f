"""flush.messages=1's group-committed fsync rounds (log/flusher.py) move the recovery point as
Kafka's flush does: after acknowledged produces and a checkpoint, the recovery-point checkpoint
holds each log's end, and an abrupt restart (kill -9) rescans only the active segment yet keeps
every acknowledged record (confluent-kafka producer and consumer)."""

from __future__ import annotations

import logging
import os
import time
import uuid

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, Producer, TopicPartition

from odradek.log.checkpoints import RECOVERY_POINT, read_checkpoint
from odradek.testing import Broker

PARTITIONS = 2
RECORDS = 600
DEADLINE_S = 30.0


def test_flushed_rounds_advance_recovery_point_and_survive_abrupt_restart(
    caplog: pytest.LogCaptureFixture,
) -> None:
    topic = "flushed-rp"
    with Broker() as broker:
        # small segments: the records span several per partition
        broker.create_topic(topic, PARTITIONS, {"flush.messages": "1", "segment.bytes": "8192"})
        producer = Producer(  # small batches: many appends, many fsync rounds
            {
                "bootstrap.servers": broker.bootstrap,
                "acks": "all",
                "linger.ms": 1,
                "batch.size": 2048,
            }
        )
        acked: list[bytes] = []
        failed: list[str] = []

        def on_delivery(err: object, msg: object) -> None:
            if err is not None:
                failed.append(str(err))
            else:
                acked.append(msg.value())  # type: ignore[attr-defined]

        for i in range(RECORDS):
            producer.produce(
                topic,
                value=f"{i:05d}".encode() * 20,
                partition=i % PARTITIONS,
                on_delivery=on_delivery,
            )
            producer.poll(0)
        assert producer.flush(DEADLINE_S) == 0
        assert not failed and len(acked) == RECORDS

        def state(s: object) -> list[tuple[int, int]]:
            s.checkpoint()  # type: ignore[attr-defined]  # as the 60 s housekeeping does
            parts = [s.topics.get(topic, i) for i in range(PARTITIONS)]  # type: ignore[attr-defined]
            return [(p.log.log_end_offset, len(p.log.segments)) for p in parts]

        ends = broker.call(state)
        assert all(segments > 2 for _end, segments in ends), ends
        on_disk = read_checkpoint(os.path.join(broker.data_dir, RECOVERY_POINT))
        assert [on_disk.get((topic, i)) for i in range(PARTITIONS)] == [e for e, _ in ends]

        caplog.clear()
        with caplog.at_level(logging.INFO, logger="odradek.log.log"):
            broker.restart(abrupt=True)
        rescanned = [
            r.getMessage() for r in caplog.records if "recovering segment" in r.getMessage()
        ]
        mine = [m for m in rescanned if m.startswith(f"{topic}-")]
        # only the active segment of each partition (past any recovery point) is scanned
        assert len(mine) == PARTITIONS, rescanned

        consumer = Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": f"g-{uuid.uuid4()}",
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
            }
        )
        try:
            consumer.assign([TopicPartition(topic, i, OFFSET_BEGINNING) for i in range(PARTITIONS)])
            got: list[bytes] = []
            deadline = time.monotonic() + DEADLINE_S
            while len(got) < RECORDS and time.monotonic() < deadline:
                msg = consumer.poll(0.5)
                if msg is not None and msg.error() is None:
                    got.append(msg.value())
        finally:
            consumer.close()
        assert sorted(got) == sorted(acked)
