"""transactional.id.expiration.ms: an idle transactional id is forgotten by the coordinator (a
tombstone in `__transaction_state`), and its next producer starts over with a new producer id."""

from __future__ import annotations

import pytest
from confluent_kafka import Producer
from kafka.admin import KafkaAdminClient
from kafka.errors import KafkaError

from compat_tests.harness import wait_for

EXPIRY_BROKER = {
    "transactional.id.expiration.ms": "1000",
    "transaction.remove.expired.transaction.cleanup.interval.ms": "200",
}


def describe(admin: KafkaAdminClient, tid: str):
    try:
        return admin.describe_transactions([tid])[tid]
    except KafkaError as exc:
        return type(exc).__name__


@pytest.mark.parametrize("broker", [EXPIRY_BROKER], indirect=True)
def test_idle_transactional_id_expires(broker, topic_name: str) -> None:
    tid = topic_name + "-tx"
    p = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(topic_name, b"v")
    p.commit_transaction(30)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        first = describe(admin, tid)
        assert getattr(first.state, "value", first.state) == "CompleteCommit"
        wait_for(
            lambda: describe(admin, tid) == "TransactionalIdNotFoundError",
            timeout=15,
            message="the idle transactional id was not expired",
        )
        again = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": tid})
        again.init_transactions(30)
        second = describe(admin, tid)
        assert second.producer_id != first.producer_id and second.producer_epoch == 0
        # the old producer is unknown to the coordinator now
        with pytest.raises(Exception, match=r"(?i)fenc|mapping|epoch|fatal"):
            p.begin_transaction()
            p.produce(topic_name, b"late")
            p.commit_transaction(30)
    finally:
        admin.close()
