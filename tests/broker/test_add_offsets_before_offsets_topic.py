"""AddOffsetsToTxn before `__consumer_offsets` exists: Kafka names the group's partition from
offsets.topic.num.partitions and answers NONE; KafkaJS's sendOffsets does not retry a
COORDINATOR_NOT_AVAILABLE there, so a first transaction with offsets failed."""

from __future__ import annotations

import time

from odradek.testing import Broker
from odradek.testing.raw import RawClient
from odradek.wire import protocol


def init_producer(client: RawClient, txn_id: str) -> tuple[int, int]:
    deadline = time.monotonic() + 15
    while True:
        req = protocol.InitProducerIdRequest(transactional_id=txn_id, transaction_timeout_ms=30000)
        resp = client.request(req, 1)
        if resp.error_code == 0:
            return resp.producer_id, resp.producer_epoch
        assert resp.error_code in (14, 15, 51), resp  # loading / not available / concurrent
        assert time.monotonic() < deadline, "InitProducerId never succeeded"
        time.sleep(0.05)


def test_add_offsets_to_txn_before_the_offsets_topic_exists() -> None:
    with Broker() as broker, RawClient(broker.bootstrap) as client:
        assert broker.server.topics.info("__consumer_offsets") is None
        pid, epoch = init_producer(client, "t-first-offsets")
        req = protocol.AddOffsetsToTxnRequest(
            transactional_id="t-first-offsets", producer_id=pid, producer_epoch=epoch, group_id="g1"
        )
        assert client.request(req, 1).error_code == 0
