"""Transactions' timeout and concurrent-transaction paths, odradek against Apache Kafka 4.4,
on brokers that look for timed-out transactions every 300 ms
(transaction.abort.timed.out.transaction.cleanup.interval.ms).

A producer (confluent-kafka) opens a transaction with transaction.timeout.ms=1000, writes a
record and goes quiet. The coordinator aborts the transaction on its own (the abort marker moves
the last stable offset past the record) and bumps the producer epoch, so the producer's next
call fails; a read_committed reader never sees the record, and a new producer with the same
transactional.id commits normally afterwards. Compared: the error the stale producer gets (name,
fatal, abortable), the offsets, and what read_committed and read_uncommitted readers see.

CONCURRENT_TRANSACTIONS, as raw requests (v3, both brokers serve it): InitProducerId for a
transactional id whose transaction is ongoing makes the coordinator abort it and answer
CONCURRENT_TRANSACTIONS until the abort completes; the retried call bumps the epoch and an
EndTxn with the old epoch is fenced.

EndTxn v1 with no transaction open, as raw requests: abort when nothing was added (Empty), abort
after a commit, commit after an abort (INVALID_TXN_STATE, which librdkafka makes fatal), and the
retried EndTxn of a finished transaction (NONE). The chaos transactional client meets the first
two when an AddPartitionsToTxn failed and it aborts (tests/testing/test_chaos_clients.py).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

from compat_tests.harness import BrokerProcess
from compat_tests.reference.conftest import ODRADEK_OVERRIDES, ReferencePool
from compat_tests.reference.diff import Checker
from compat_tests.reference.kafka_ref import KafkaReference
from compat_tests.reference.raw_requests import _retry, send
from compat_tests.reference.test_clients import TS0, consume_all, create
from odradek.wire import protocol

FAST_TXN = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "300"}


@pytest.fixture(scope="module")
def txn_odradek(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    proc = BrokerProcess(
        tmp_path_factory.mktemp("odradek-txn"), overrides={**ODRADEK_OVERRIDES, **FAST_TXN}
    )
    proc.start()
    yield proc
    proc.stop()


@pytest.fixture(scope="module")
def txn_kafka(reference_pool: ReferencePool) -> Iterator[KafkaReference]:
    cluster = reference_pool.get("4.4", overrides=FAST_TXN)
    yield cluster
    reference_pool.release(cluster)


def fresh(label: str) -> str:
    return f"ref_{label}_{uuid.uuid4().hex[:8]}"


def _stable_end(bootstrap: str, topic: str) -> int:
    """The partition's last stable offset (read_committed high watermark)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": fresh("lso"),
            "isolation.level": "read_committed",
        }
    )
    try:
        return int(consumer.get_watermark_offsets(TopicPartition(topic, 0), 15)[1])
    finally:
        consumer.close()


def _error(call: object) -> dict[str, object] | None:
    try:
        call()  # type: ignore[operator]
    except KafkaException as exc:
        err = exc.args[0]
        return {"name": err.name(), "fatal": err.fatal(), "abortable": err.txn_requires_abort()}
    return None


def _scenario(bootstrap: str) -> dict[str, object]:
    topic, txid = fresh("txto"), fresh("txid")
    create(bootstrap, topic)
    out: dict[str, object] = {}
    stale = Producer(
        {"bootstrap.servers": bootstrap, "transactional.id": txid, "transaction.timeout.ms": 1000}
    )
    stale.init_transactions(30)
    stale.begin_transaction()
    stale.produce(topic, value=b"left-open", timestamp=TS0)
    assert stale.flush(30) == 0
    out["stable end while open"] = _stable_end(bootstrap, topic)
    # the coordinator's abort writes a marker after the record: wait for the LSO to pass it
    deadline = time.monotonic() + 30
    while (end := _stable_end(bootstrap, topic)) < 2:
        assert time.monotonic() < deadline, f"transaction not aborted by the coordinator ({end})"
        time.sleep(0.2)
    out["stable end after timeout"] = end
    out["produce after timeout"] = _error(
        lambda: (stale.produce(topic, value=b"late", timestamp=TS0 + 1), stale.flush(15))
    )
    out["commit after timeout"] = _error(lambda: stale.commit_transaction(15))
    out["abort after timeout"] = _error(lambda: stale.abort_transaction(15))
    fresh_producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txid})
    fresh_producer.init_transactions(30)
    fresh_producer.begin_transaction()
    fresh_producer.produce(topic, value=b"committed", timestamp=TS0 + 2)
    out["new producer commit"] = _error(lambda: fresh_producer.commit_transaction(30))
    out["read committed"] = [
        (r[1], r[3])
        for r in consume_all(bootstrap, topic, 1, **{"isolation.level": "read_committed"})
    ]
    uncommitted = consume_all(bootstrap, topic, 2, **{"isolation.level": "read_uncommitted"})
    out["read uncommitted"] = [(r[1], r[3]) for r in uncommitted]
    return out


def test_transaction_timeout_aborts_and_fences(
    txn_odradek: BrokerProcess, txn_kafka: KafkaReference
) -> None:
    ours, theirs = _scenario(txn_odradek.bootstrap), _scenario(txn_kafka.bootstrap)
    assert theirs["read committed"], theirs
    Checker("4.4").check("client transaction timeout", ours, theirs)


CONCURRENT_TRANSACTIONS = 51


def _concurrent(bootstrap: str) -> dict[str, object]:
    """InitProducerId for a transactional id whose transaction is ongoing, as raw requests: the
    coordinator starts aborting it and answers CONCURRENT_TRANSACTIONS until the abort is done;
    the retried call then succeeds with a new epoch, and the old epoch is fenced."""
    topic, txid = fresh("txcc"), fresh("txid")
    create(bootstrap, topic)
    init_spec = {"transactional_id": txid, "transaction_timeout_ms": 60000}
    _retry(  # FindCoordinator: the transaction coordinator is loaded
        lambda: send(bootstrap, protocol._REQUESTS[10], {"key": txid, "key_type": 1}, 2),
        lambda r: r.error_code,
    )
    init = _retry(
        lambda: send(bootstrap, protocol._REQUESTS[22], init_spec, 3), lambda r: r.error_code
    )
    pid, epoch = init.producer_id, init.producer_epoch
    out: dict[str, object] = {}
    add = send(
        bootstrap,
        protocol._REQUESTS[24],
        {
            "v3_and_below_transactional_id": txid,
            "v3_and_below_producer_id": pid,
            "v3_and_below_producer_epoch": epoch,
            "v3_and_below_topics": [{"name": topic, "partitions": [0]}],
        },
        3,
    )
    out["add partitions"] = [
        [p.partition_error_code for p in t.results_by_partition]
        for t in add.results_by_topic_v3_and_below  # type: ignore[attr-defined]
    ]
    again = send(bootstrap, protocol._REQUESTS[22], init_spec, 3)
    out["init while ongoing"] = again.error_code  # type: ignore[attr-defined]
    deadline = time.monotonic() + 30
    while again.error_code == CONCURRENT_TRANSACTIONS:  # type: ignore[attr-defined]
        assert time.monotonic() < deadline, again
        time.sleep(0.05)
        again = send(bootstrap, protocol._REQUESTS[22], init_spec, 3)
    out["init after abort"] = again.error_code  # type: ignore[attr-defined]
    out["same producer id"] = again.producer_id == pid  # type: ignore[attr-defined]
    out["new epoch above old"] = again.producer_epoch > epoch  # type: ignore[attr-defined]
    end = send(
        bootstrap,
        protocol._REQUESTS[26],
        {"transactional_id": txid, "producer_id": pid, "producer_epoch": epoch, "committed": True},
        3,
    )
    out["end with old epoch"] = end.error_code  # type: ignore[attr-defined]
    return out


def test_init_producer_id_during_ongoing_transaction(
    txn_odradek: BrokerProcess, txn_kafka: KafkaReference
) -> None:
    ours, theirs = _concurrent(txn_odradek.bootstrap), _concurrent(txn_kafka.bootstrap)
    assert theirs["init while ongoing"] == CONCURRENT_TRANSACTIONS, theirs
    Checker("4.4").check("raw concurrent transactions", ours, theirs)


INVALID_TXN_STATE = 48


def _end_txn(bootstrap: str, txid: str, pid: int, epoch: int, commit: bool) -> object:
    spec = {"transactional_id": txid, "producer_id": pid, "producer_epoch": epoch}
    end = send(bootstrap, protocol._REQUESTS[26], {**spec, "committed": commit}, 1)
    return getattr(end, "error_code", end)


def _end_without_open_transaction(bootstrap: str) -> dict[str, object]:
    """EndTxn v1 (librdkafka's) when the coordinator holds no ongoing transaction for the
    producer: librdkafka sends it on abort_transaction() once any AddPartitionsToTxn went out
    for the transaction, even one answered NOT_COORDINATOR because the coordinator could not
    append Ongoing (the coordinator keeps the state before it), and goes fatal on the answer.
    A retry of the EndTxn that ended the transaction (same result) is answered NONE."""
    topic, txid = fresh("txend"), fresh("txid")
    create(bootstrap, topic)
    _retry(
        lambda: send(bootstrap, protocol._REQUESTS[10], {"key": txid, "key_type": 1}, 2),
        lambda r: r.error_code,
    )
    init_spec = {"transactional_id": txid, "transaction_timeout_ms": 60000}
    init = _retry(
        lambda: send(bootstrap, protocol._REQUESTS[22], init_spec, 3), lambda r: r.error_code
    )
    pid, epoch = init.producer_id, init.producer_epoch
    add_spec = {
        "v3_and_below_transactional_id": txid,
        "v3_and_below_producer_id": pid,
        "v3_and_below_producer_epoch": epoch,
        "v3_and_below_topics": [{"name": topic, "partitions": [0]}],
    }

    def add() -> object:
        resp = send(bootstrap, protocol._REQUESTS[24], add_spec, 3)
        return [
            p.partition_error_code
            for t in resp.results_by_topic_v3_and_below  # type: ignore[attr-defined]
            for p in t.results_by_partition
        ]

    def settled(commit: bool) -> object:
        """The EndTxn retry once the markers are written (CONCURRENT_TRANSACTIONS before)."""
        deadline = time.monotonic() + 30
        while (code := _end_txn(bootstrap, txid, pid, epoch, commit)) == CONCURRENT_TRANSACTIONS:
            assert time.monotonic() < deadline, code
            time.sleep(0.05)
        return code

    out: dict[str, object] = {"abort when empty": _end_txn(bootstrap, txid, pid, epoch, False)}
    out["add"] = add()
    out["commit"] = _end_txn(bootstrap, txid, pid, epoch, True)
    # right after the commit the coordinator may still be writing the markers (a pending
    # transition: CONCURRENT_TRANSACTIONS, Kafka 4.4 answered that at CI's load) or be done
    # (INVALID_TXN_STATE): which one is timing, so both are "refused" here
    early = _end_txn(bootstrap, txid, pid, epoch, False)
    out["abort after commit"] = (
        "refused" if early in (INVALID_TXN_STATE, CONCURRENT_TRANSACTIONS) else early
    )
    out["commit retried"] = settled(True)
    out["abort after committed"] = _end_txn(bootstrap, txid, pid, epoch, False)
    out["add again"] = add()
    out["abort"] = _end_txn(bootstrap, txid, pid, epoch, False)
    out["abort retried"] = settled(False)
    out["commit after aborted"] = _end_txn(bootstrap, txid, pid, epoch, True)
    return out


def test_end_txn_without_an_open_transaction(
    txn_odradek: BrokerProcess, txn_kafka: KafkaReference
) -> None:
    ours, theirs = (
        _end_without_open_transaction(txn_odradek.bootstrap),
        _end_without_open_transaction(txn_kafka.bootstrap),
    )
    assert theirs["abort after committed"] == INVALID_TXN_STATE, theirs
    Checker("4.4").check("raw EndTxn without an open transaction", ours, theirs)
