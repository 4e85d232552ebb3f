"""The clients of a chaos run, each a thread recording its operations in a `History`:
an idempotent producer, a transactional producer, group consumers (read_committed) and a
monitor reading committed offsets and high watermarks. All are confluent-kafka (librdkafka),
with short timeouts so that a fault turns into an `info` outcome quickly.

Kafka counterparts: the idempotent producer (KIP-98, enable.idempotence, acks=all), the
transactional producer (KIP-98 transactions), the classic group protocol with manual commits,
and ListOffsets / OffsetFetch for the monitor.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    KafkaError,
    KafkaException,
    Producer,
    TopicPartition,
)

from odradek.testing.chaos.eos_log import DEBUG as EOS_DEBUG
from odradek.testing.chaos.eos_log import EosLog
from odradek.testing.chaos.history import FAIL, INFO, OK, History

# librdkafka settings shared by every client: fail fast, retry fast, find new leaders fast.
FAST = {
    "socket.timeout.ms": 2000,
    "retry.backoff.ms": 50,
    "retry.backoff.max.ms": 200,
    "reconnect.backoff.ms": 20,
    "reconnect.backoff.max.ms": 200,
    "topic.metadata.refresh.interval.ms": 500,
    "log_level": 0,
}
PAUSE_S = 0.01  # default pacing between operations, so a seed stays small


def client_config(bootstrap: str, settings: dict[str, Any]) -> dict[str, Any]:
    """A librdkafka configuration: `FAST`, the bootstrap servers, then `settings`."""
    return {**FAST, "bootstrap.servers": bootstrap, **settings}


@dataclass(frozen=True)
class Env:
    """What every client of a seed shares: its history, the bootstrap servers and the seed."""

    history: History
    bootstrap: str
    seed: int


def _error_name(exc: BaseException | KafkaError) -> str:
    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else exc
    if isinstance(err, KafkaError):
        return err.name()
    return f"{type(exc).__name__}: {exc}"


class Worker(threading.Thread):
    """A client thread: `run_client()` loops until `stop` is set or its operations run out."""

    def __init__(self, name: str, env: Env) -> None:
        super().__init__(name=f"chaos-{name}", daemon=True)
        self.process = name
        self.history = env.history
        self.bootstrap = env.bootstrap
        self.rng = random.Random(f"chaos-{name}-{env.seed}")
        self.stop = threading.Event()
        self.crash: BaseException | None = None
        self.pace_s = PAUSE_S  # the runner spreads bounded operations over the fault phase

    def run(self) -> None:
        try:
            self.run_client()
        except BaseException as exc:  # surfaced by the runner, never lost in a thread
            self.crash = exc

    def run_client(self) -> None:
        raise NotImplementedError

    def config(self, settings: dict[str, Any]) -> dict[str, Any]:
        return client_config(self.bootstrap, settings)

    def offsets_op(
        self,
        f: str,
        read: Callable[[], list[TopicPartition] | None],
        offset: Callable[[TopicPartition], int | None],
    ) -> None:
        """Record `f`: the offsets {(topic, partition): offset} that `read()` answers, those
        for which `offset` is not None (info when `read` raised)."""
        inv = self.history.invoke(f, self.process, {"offsets": {}})
        try:
            result = read() or []
        except KafkaException as exc:
            self.history.complete(inv, INFO, error=_error_name(exc))
            return
        offsets = {(tp.topic, tp.partition): o for tp in result if (o := offset(tp)) is not None}
        self.history.complete(inv, OK, {"offsets": offsets})


class IdempotentProducer(Worker):
    """Sends unique values "<process>.<generation>-<seq>" to random partitions of `topic`.
    A fatal producer error starts a new producer (a new process name: order is per producer)."""

    def __init__(
        self, name: str, env: Env, topic: str, partitions: int, max_ops: int, in_flight: int = 20
    ) -> None:
        super().__init__(name, env)
        self.topic = topic
        self.partitions = partitions
        self.max_ops = max_ops
        self.in_flight = in_flight
        self.outstanding = 0
        self.fatal = False

    def _producer(self, eos: EosLog) -> Producer:
        def on_error(err: KafkaError) -> None:
            if err.fatal():
                self.fatal = True

        return Producer(
            self.config(
                {
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 2,
                    "request.timeout.ms": 1500,
                    "message.timeout.ms": 4000,
                    "error_cb": on_error,
                    # what the brokers answered before each epoch bump, for the checker
                    "debug": EOS_DEBUG,
                    "logger": eos,
                }
            )
        )

    def _record_eos(self, process: str, eos: EosLog) -> None:
        inv = self.history.invoke("eos", process, {"topic": self.topic})
        self.history.complete(inv, OK, {"events": eos.snapshot()})

    def run_client(self) -> None:
        generation = 0
        eos = EosLog(self.topic)
        producer = self._producer(eos)
        seq = 0
        while not self.stop.is_set() and seq < self.max_ops:
            if self.fatal:
                producer.flush(5)
                self._record_eos(f"{self.process}.{generation}", eos)
                generation += 1
                self.fatal = False
                eos = EosLog(self.topic)
                producer = self._producer(eos)
            process = f"{self.process}.{generation}"
            partition = self.rng.randrange(self.partitions)
            value = f"{process}-{seq}"
            inv = self.history.invoke(
                "produce",
                process,
                {"process": process, "seq": seq, "partition": partition, "value": value},
            )
            seq += 1
            try:
                producer.produce(
                    self.topic,
                    value=value.encode(),
                    partition=partition,
                    on_delivery=self._callback(inv),
                )
                self.outstanding += 1
            except (BufferError, KafkaException) as exc:
                self.history.complete(inv, FAIL, error=_error_name(exc))
            producer.poll(0)
            while self.outstanding >= self.in_flight and not self.stop.is_set():
                producer.poll(0.05)
            self.stop.wait(self.pace_s)
        producer.flush(6)
        self._record_eos(f"{self.process}.{generation}", eos)

    def _callback(self, inv: Any) -> Any:
        def done(err: KafkaError | None, msg: Any) -> None:
            self.outstanding -= 1
            if err is None:
                # librdkafka acknowledges without an offset when the broker did not give one
                # (offset() is None): acknowledged all the same
                offset = msg.offset()
                value = {"offset": offset if offset is not None and offset >= 0 else None}
                self.history.complete(inv, OK, {**value, "partition": msg.partition()})
            else:
                self.history.complete(inv, INFO, error=err.name())

        return done


class TransactionalProducer(Worker):
    """Transactions of 1-4 values "<process>-t<n>-<i>" over random partitions of `topic`,
    committed or (by the seed's draw) aborted. A transaction is recorded with its decision;
    ok means that decision took effect, fail that it certainly did not commit, info unknown.
    A producer that cannot go on (a fatal error, or a commit left unconfirmed) is replaced by
    a new one with the same transactional.id; a fatal one is recorded as a `fatal` op."""

    def __init__(
        self, name: str, env: Env, topic: str, partitions: int, max_txns: int, transactional_id: str
    ) -> None:
        super().__init__(name, env)
        self.topic = topic
        self.partitions = partitions
        self.max_txns = max_txns
        self.transactional_id = transactional_id

    def _fresh(self, old: Producer | None) -> Producer | None:
        """A new producer for the same transactional id (fencing and aborting the old one's
        open transaction), or None when the cluster did not answer before `stop`."""
        if old is not None:
            self._retire(old)
        while not self.stop.is_set():
            producer = Producer(
                self.config(
                    {
                        "transactional.id": self.transactional_id,
                        "transaction.timeout.ms": 10000,
                        "request.timeout.ms": 1500,
                        "message.timeout.ms": 5000,
                        "linger.ms": 2,
                    }
                )
            )
            try:
                producer.init_transactions(5)
                return producer
            except KafkaException:
                self.stop.wait(0.1)
        return None

    def _retire(self, old: Producer) -> None:
        """Let go of a producer being replaced. One in a fatal state (librdkafka raises its
        fatal error from every later call, flush included) is recorded as a `fatal` op: the
        application's only way on is a new producer with the same transactional.id, as here.
        Kafka gives librdkafka such errors too: INVALID_TXN_STATE to an EndTxn(abort) sent
        after an AddPartitionsToTxn that failed (NOT_COORDINATOR when the coordinator could
        not append Ongoing, a lost connection), PRODUCER_FENCED after a timeout abort."""
        try:
            old.flush(0)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else None
            if not isinstance(err, KafkaError) or not err.fatal():
                raise
            inv = self.history.invoke(
                "fatal", self.process, {"transactional_id": self.transactional_id}
            )
            self.history.complete(inv, OK, {"reason": err.str()}, error=err.name())

    def run_client(self) -> None:
        producer = self._fresh(None)
        n = 0
        while producer is not None and not self.stop.is_set() and n < self.max_txns:
            values = [
                (self.rng.randrange(self.partitions), f"{self.process}-t{n}-{i}")
                for i in range(self.rng.randint(1, 4))
            ]
            decision = "commit" if self.rng.random() < 0.7 else "abort"
            inv = self.history.invoke(
                "txn", self.process, {"txn": n, "values": values, "decision": decision}
            )
            n += 1
            healthy = self._transaction(producer, inv, values, decision)
            if not healthy:
                producer = self._fresh(producer)
            self.stop.wait(self.pace_s)

    def _transaction(
        self, producer: Producer, inv: Any, values: list[tuple[int, str]], decision: str
    ) -> bool:
        """Run one transaction and record its outcome; False when the producer must go."""
        try:
            producer.begin_transaction()
            for partition, value in values:
                producer.produce(self.topic, value=value.encode(), partition=partition)
                producer.poll(0)
        except (BufferError, KafkaException) as exc:
            return self._abort(producer, inv, f"send: {_error_name(exc)}")
        if decision == "abort":
            return self._abort(producer, inv, "")
        error = ""
        for _attempt in range(3):
            try:
                producer.commit_transaction(5)
                self.history.complete(inv, OK)
                return True
            except KafkaException as exc:
                err = exc.args[0]
                error = _error_name(exc)
                if err.txn_requires_abort():
                    # librdkafka: the commit did not happen and must be aborted
                    failed = self._try_abort(producer)
                    if failed is None:
                        self.history.complete(inv, OK, {"decision": "abort"}, error=error)
                        return True
                    error = f"{error}, then abort: {failed}"
                    break
                if not err.retriable():
                    break
        self.history.complete(inv, INFO, error=error or "commit not confirmed")
        return False

    def _abort(self, producer: Producer, inv: Any, error: str) -> bool:
        """No commit was ever sent for this transaction: it cannot have committed."""
        failed = self._try_abort(producer)
        if failed is None:
            self.history.complete(inv, OK, {"decision": "abort"}, error=error)
            return True
        self.history.complete(
            inv, FAIL, error=f"{error}, then abort: {failed}" if error else failed
        )
        return False

    @staticmethod
    def _try_abort(producer: Producer) -> str | None:
        """None once the abort is confirmed, else the last attempt's error."""
        error = "abort not confirmed"
        for _attempt in range(3):
            try:
                producer.abort_transaction(5)
                return None
            except KafkaException as exc:
                error = _error_name(exc)
                if not exc.args[0].retriable():
                    break
        return error


class GroupConsumer(Worker):
    """A member of `group` reading `topics` with read_committed, committing its position
    (synchronously) every `commit_every` seconds when it has read something."""

    def __init__(
        self, name: str, env: Env, topics: list[str], group: str, commit_every: float = 0.2
    ) -> None:
        super().__init__(name, env)
        self.topics = topics
        self.group = group
        self.commit_every = commit_every

    def run_client(self) -> None:
        consumer = Consumer(
            self.config(
                {
                    "group.id": self.group,
                    "isolation.level": "read_committed",
                    "enable.auto.commit": False,
                    "auto.offset.reset": "earliest",
                    "session.timeout.ms": 6000,
                    "heartbeat.interval.ms": 300,
                }
            )
        )
        try:
            consumer.subscribe(self.topics)
            last_commit = time.monotonic()
            unread = False
            while not self.stop.is_set():
                for msg in consumer.consume(50, 0.1):
                    if msg.error():
                        continue
                    unread = True
                    self.history.ok(
                        "poll",
                        self.process,
                        {
                            "process": self.process,
                            "topic": msg.topic(),
                            "partition": msg.partition(),
                            "offset": msg.offset(),
                            "value": (msg.value() or b"").decode(),
                        },
                    )
                if unread and time.monotonic() - last_commit >= self.commit_every:
                    self.offsets_op(
                        "commit",
                        lambda: consumer.commit(asynchronous=False),
                        lambda tp: tp.offset if tp.error is None and tp.offset >= 0 else None,
                    )
                    unread = False
                    last_commit = time.monotonic()
        finally:
            consumer.close()


class Monitor(Worker):
    """Reads the group's committed offsets (OffsetFetch) and every partition's high watermark
    (ListOffsets, read_uncommitted) over and over."""

    def __init__(self, name: str, env: Env, partitions: list[tuple[str, int]], group: str) -> None:
        super().__init__(name, env)
        self.tps = [TopicPartition(t, p) for t, p in partitions]
        self.group = group

    def run_client(self) -> None:
        consumer = Consumer(self.config({"group.id": self.group, "enable.auto.commit": False}))
        try:
            while not self.stop.is_set():
                self.offsets_op(
                    "committed",
                    lambda: consumer.committed(self.tps, timeout=1.0),
                    lambda tp: max(tp.offset, -1) if tp.error is None else None,
                )
                self._watermarks(consumer)
                self.stop.wait(0.05)
        finally:
            consumer.close()

    def _watermarks(self, consumer: Consumer) -> None:
        inv = self.history.invoke("hw", self.process, {"hw": {}})
        hw: dict[tuple[str, int], int] = {}
        for tp in self.tps:
            try:
                _low, high = consumer.get_watermark_offsets(tp, timeout=1.0, cached=False)
            except KafkaException:
                continue
            hw[(tp.topic, tp.partition)] = high
        self.history.complete(inv, OK if hw else INFO, {"hw": hw})


def final_read(
    history: History,
    bootstrap: str,
    topic: str,
    partitions: int,
    isolation: str,
    timeout: float = 20.0,
) -> None:
    """Read `topic` from the beginning to its end (the high watermark, or the last stable
    offset for read_committed, taken when the read starts) and record it as one `final` op."""
    inv = history.invoke("final", "reader", {"topic": topic, "isolation": isolation, "records": []})
    consumer = Consumer(
        client_config(
            bootstrap,
            {"group.id": "chaos-final", "isolation.level": isolation, "enable.auto.commit": False},
        )
    )
    # (partition, offset, value); confluent-kafka types the first two optional (error events)
    records: list[tuple[int | None, int | None, str]] = []
    try:
        deadline = time.monotonic() + timeout
        ends: dict[int, int] = {}
        while len(ends) < partitions and time.monotonic() < deadline:
            for p in range(partitions):
                if p not in ends:
                    try:
                        ends[p] = consumer.get_watermark_offsets(
                            TopicPartition(topic, p), timeout=1.0, cached=False
                        )[1]
                    except KafkaException:
                        pass
        tps = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)]
        consumer.assign(tps)
        done: set[int] = {p for p, end in ends.items() if end <= 0}
        while len(done) < partitions and time.monotonic() < deadline:
            for msg in consumer.consume(500, 0.2):
                if msg.error():
                    continue
                records.append((msg.partition(), msg.offset(), (msg.value() or b"").decode()))
            for tp in consumer.position([TopicPartition(topic, p) for p in range(partitions)]):
                if tp.partition in ends and tp.offset >= ends[tp.partition]:
                    done.add(tp.partition)
        if len(done) < partitions:
            history.complete(
                inv,
                INFO,
                {"records": records},
                error=f"read only partitions {sorted(done)} to {ends} in {timeout}s",
            )
        else:
            history.complete(inv, OK, {"records": records})
    finally:
        consumer.close()
