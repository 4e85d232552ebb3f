"""The chaos transactional client against a real broker, through the sequence that crashed it in
CI (chaos seed 17; seed 13 in a soak): the transaction coordinator cannot append Ongoing (its log
dir is full), so AddPartitionsToTxn is answered NOT_COORDINATOR and the coordinator keeps the
state before it (CompleteCommit), as Kafka's TransactionStateManager does. The client aborts;
librdkafka sends EndTxn(abort) because an AddPartitionsToTxn went out, and Kafka's coordinator
answers INVALID_TXN_STATE to an abort in CompleteCommit, as odradek's does
(compat_tests/reference/test_transaction_timeouts.py). librdkafka makes that fatal, so the
client must carry on with a new producer for the same transactional.id, as an application
would, and record the fatal error; before, `flush()` on the old producer raised it and the
client thread died."""

from __future__ import annotations

import time

import pytest

from odradek.testing.broker import Broker
from odradek.testing.chaos.clients import Env, TransactionalProducer
from odradek.testing.chaos.history import FAIL, OK, History

WAIT_S = 20


def _ongoing_append_failed(caplog: pytest.LogCaptureFixture, tid: str) -> bool:
    return any(
        r.name == "odradek.coordinator.txn.coordinator"
        and r.getMessage().startswith(f"append of Ongoing for transactional id {tid} failed")
        for r in caplog.records
    )


def test_transactional_client_replaces_a_producer_gone_fatal(
    odradek_fresh_broker: Broker, caplog: pytest.LogCaptureFixture
) -> None:
    broker = odradek_fresh_broker
    topic = broker.create_topic("chaos-clients-txn")
    tid = "chaos-clients-tx"
    history = History()
    client = TransactionalProducer("tx", Env(history, broker.bootstrap, 0), topic, 1, 3, tid)
    producer = client._fresh(None)
    assert producer is not None
    first = history.invoke("txn", "tx", {"txn": 0, "values": [(0, "tx-t0-0")]})
    assert client._transaction(producer, first, [(0, "tx-t0-0")], "commit")

    caplog.set_level("WARNING", logger="odradek.coordinator.txn.coordinator")
    broker.fail_disk("ENOSPC")
    producer.begin_transaction()
    producer.produce(topic, value=b"tx-t1-0", partition=0)
    deadline = time.monotonic() + WAIT_S
    while not _ongoing_append_failed(caplog, tid):  # the AddPartitionsToTxn went out
        assert time.monotonic() < deadline, "no AddPartitionsToTxn reached the coordinator"
        producer.poll(0.05)
    second = history.invoke("txn", "tx", {"txn": 1, "values": [(0, "tx-t1-0")]})
    assert not client._abort(producer, second, "")
    assert history.ops[-1].type == FAIL  # certainly not committed
    assert "INVALID_TXN_STATE" in history.ops[-1].error

    broker.fail_disk(None)  # space is back: the broker restarts
    replacement = client._fresh(producer)
    assert replacement is not None
    fatal = [op for op in history.ops if op.f == "fatal" and op.type == OK]
    assert [(op.process, op.error) for op in fatal] == [("tx", "INVALID_TXN_STATE")]
    assert fatal[0].value["transactional_id"] == tid
    third = history.invoke("txn", "tx", {"txn": 2, "values": [(0, "tx-t2-0")]})
    assert client._transaction(replacement, third, [(0, "tx-t2-0")], "commit")
    assert history.ops[-1].type == OK
