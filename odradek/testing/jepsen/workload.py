"""Jepsen's Kafka "queue" workload over confluent-kafka (librdkafka) and, for the processes
`java_processes` picks, Apache Kafka's Java client (`javaclient`): client threads that send and
poll at random, inside and outside transactions, recording one `History` for the checkers.

Each process is a thread with one producer and one consumer, all reading with
isolation.level=read_committed:

- a plain process: an idempotent producer (acks=all) sending single values, and a consumer that
  either subscribes to the group (rebalances are recorded as `assign`) or assigns itself every
  key, polling and committing its position (OffsetCommit) after polls;
- a transactional process: each op is a transaction of 1-4 micro-ops, sends to random keys and
  polls, committed or (by the seed's draw) aborted (KIP-98);
- a monitor reading the group's committed offsets (OffsetFetch) and high watermarks
  (ListOffsets).

Keys are the partitions of one topic, so several producers and consumers share every key.
"""

from __future__ import annotations

import os
import random
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    Consumer,
    IsolationLevel,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient, OffsetSpec

from odradek.testing.jepsen.batches import read_batches
from odradek.testing.jepsen.history import FAIL, INFO, OK, History, Op

if TYPE_CHECKING:
    from odradek.testing.jepsen.javaclient import JavaClients

FAST = {
    "socket.timeout.ms": 2000,
    "retry.backoff.ms": 50,
    "retry.backoff.max.ms": 200,
    "reconnect.backoff.ms": 20,
    "reconnect.backoff.max.ms": 200,
    "topic.metadata.refresh.interval.ms": 500,
    "log_level": 0,
}

# librdkafka debug contexts for the plain (idempotent) producers, e.g. "eos,protocol,msg": its
# log then goes to stderr, each line naming the producer's process (client.id). Off by default.
DEBUG_ENV = "ODRADEK_JEPSEN_RDKAFKA_DEBUG"


def producer_debug(process: str) -> dict[str, Any]:
    """The settings that turn librdkafka's debug log on when `DEBUG_ENV` asks for it."""
    contexts = os.environ.get(DEBUG_ENV, "")
    if not contexts:
        return {}
    return {"debug": contexts, "log_level": 7, "client.id": f"jepsen-{process}"}


@dataclass(frozen=True)
class Env:
    history: History
    bootstrap: str
    topic: str
    keys: int
    seed: int
    extra: tuple[tuple[str, Any], ...] = ()  # librdkafka settings for every client (security)
    java_extra: tuple[tuple[str, str], ...] = ()  # the Java clients' properties (security)

    @property
    def group(self) -> str:
        return f"{self.topic}-group"

    def config(self, settings: dict[str, Any]) -> dict[str, Any]:
        return {**FAST, "bootstrap.servers": self.bootstrap, **dict(self.extra), **settings}


def _name(exc: BaseException | KafkaError | None) -> str:
    err = exc.args[0] if isinstance(exc, KafkaException) and exc.args else exc
    return err.name() if isinstance(err, KafkaError) else f"{type(exc).__name__}: {exc}"


class Process(threading.Thread):
    """One client process; `run_ops()` runs until `stop` is set or `max_ops` ran. Every op it
    records names its process and its `client` (this class: librdkafka)."""

    client = "librdkafka"
    errors: tuple[type[Exception], ...] = (KafkaException,)  # a client call that failed

    def __init__(self, name: str, env: Env, max_ops: int) -> None:
        super().__init__(name=f"jepsen-{name}", daemon=True)
        self.process = name
        self.env = env
        self.h = env.history
        self.rng = random.Random(f"jepsen-{name}-{env.seed}")
        self.stop = threading.Event()
        self.crash: BaseException | None = None
        self.max_ops = max_ops
        self.pace_s = 0.01
        self.group = ""
        # set once its clients are made (the runner starts the faults then): a JVM's clients
        # take seconds on a loaded machine, and must not miss the faults
        self.ready = threading.Event()

    def run(self) -> None:
        try:
            self.run_ops()
        except BaseException as exc:  # surfaced by the runner, never lost in a thread
            self.crash = exc
        finally:
            self.ready.set()

    def run_ops(self) -> None:
        raise NotImplementedError

    def why(self, exc: BaseException) -> str:
        """A failed client call, for the history."""
        return _name(exc)

    def value(self, **fields: Any) -> dict[str, Any]:
        """An op's value: the process, its client and `fields`."""
        return {"process": self.process, "client": self.client, **fields}

    def consumer(self, subscribe: bool) -> Consumer:
        def on_assign(c: Consumer, tps: list[TopicPartition]) -> None:
            self.h.ok("assign", self.process, self.value(keys=_keys(tps)))

        settings = {
            "group.id": self.env.group if subscribe else f"{self.env.group}-{self.process}",
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 300,
        }
        c = Consumer(self.env.config(settings))
        self.group = str(settings["group.id"])
        if subscribe:
            c.subscribe([self.env.topic], on_assign=on_assign, on_revoke=on_assign)
        else:
            tps = [
                TopicPartition(self.env.topic, k, OFFSET_BEGINNING) for k in range(self.env.keys)
            ]
            c.assign(tps)
            self.h.ok("assign", self.process, self.value(keys=_keys(tps)))
        return c

    def poll_mops(self, consumer: Consumer | None) -> list[list[Any]]:
        assert consumer is not None
        by_key: dict[int, list[list[Any]]] = defaultdict(list)
        for msg in consumer.consume(20, 0.1):
            if msg.error() is None:
                by_key[_partition(msg)].append([msg.offset(), (msg.value() or b"").decode()])
        return [["poll", k, records] for k, records in sorted(by_key.items())]

    def commit_offsets(self, consumer: Consumer | None) -> dict[int, int]:
        """Commit the consumer's position (OffsetCommit); the offsets committed."""
        assert consumer is not None
        done = consumer.commit(asynchronous=False) or []
        return {tp.partition: tp.offset for tp in done if tp.error is None and tp.offset >= 0}

    def poll_op(self, consumer: Consumer | None, commit: bool) -> None:
        inv = self.h.invoke("txn", self.process, self.value(txn=False))
        try:
            mops = self.poll_mops(consumer)
        except self.errors as exc:
            self.h.complete(inv, INFO, {"mops": []}, error=self.why(exc))
            return
        self.h.complete(inv, OK, {"mops": mops})
        if commit and mops:
            c = self.h.invoke("commit", self.process, self.value(group=self.group, offsets={}))
            try:
                offsets = self.commit_offsets(consumer)
            except self.errors as exc:
                self.h.complete(c, INFO, error=self.why(exc))
                return
            self.h.complete(c, OK, {"offsets": offsets})


def _partition(msg: Message) -> int:
    p = msg.partition()
    return int(p) if p is not None else -1


def _keys(tps: list[TopicPartition]) -> list[int]:
    return sorted(tp.partition for tp in tps)


class PlainProcess(Process):
    """Idempotent single sends and polls (subscribe or assign), committing after polls."""

    def run_ops(self) -> None:
        producer = Producer(
            self.env.config(
                {
                    "enable.idempotence": True,
                    "acks": "all",
                    "linger.ms": 2,
                    "request.timeout.ms": 1500,
                    # long enough to outlast any fault: a message timing out in flight makes
                    # librdkafka bump the idempotent producer's epoch (KIP-360) and renumber
                    # what it still holds, possibly written ones too, which no broker can tell
                    # from new sends (with 4 s the soak's seeds 120-179 had 11 such duplicates)
                    "message.timeout.ms": 30000,
                    **producer_debug(self.process),
                }
            )
        )
        consumer = self.consumer(subscribe=self.rng.random() < 0.5)
        self.ready.set()
        try:
            for n in range(self.max_ops):
                if self.stop.is_set():
                    break
                if self.rng.random() < 0.6:
                    self._send(producer, n)
                else:
                    self.poll_op(consumer, commit=True)
                producer.poll(0)
                self.stop.wait(self.pace_s)
            producer.flush(6)
        finally:
            consumer.close()

    def _send(self, producer: Producer, n: int) -> None:
        key, value = self.rng.randrange(self.env.keys), f"{self.process}-{n}"
        inv = self.h.invoke(
            "txn", self.process, self.value(txn=False, mops=[["send", key, value, None]])
        )

        def done(err: KafkaError | None, msg: Message) -> None:
            if err is None:
                off = msg.offset()
                mop = ["send", key, value, off if off is not None and off >= 0 else None]
                self.h.complete(inv, OK, {"mops": [mop]})
            else:
                self.h.complete(inv, INFO, error=err.name())

        try:
            producer.produce(self.env.topic, value=value.encode(), partition=key, on_delivery=done)
        except (BufferError, KafkaException) as exc:
            self.h.complete(inv, FAIL, error=_name(exc))


class TxnProcess(Process):
    """Transactions of sends and polls, committed or aborted; a producer in doubt is replaced
    (a new transactional producer for the same id fences it and aborts what it left open)."""

    def _producer(self) -> Producer | None:
        while not self.stop.is_set():
            p = Producer(
                self.env.config(
                    {
                        "transactional.id": f"jepsen-{self.env.seed}-{self.process}",
                        "transaction.timeout.ms": 10000,
                        "request.timeout.ms": 1500,
                        "message.timeout.ms": 5000,
                        "linger.ms": 2,
                    }
                )
            )
            try:
                p.init_transactions(5)
                return p
            except KafkaException:
                self.stop.wait(0.1)
        return None

    def run_ops(self) -> None:
        consumer = self.consumer(subscribe=False)
        producer = self._producer()
        self.ready.set()
        try:
            for n in range(self.max_ops):
                if producer is None or self.stop.is_set():
                    break
                if not self._txn(producer, consumer, n):
                    try:
                        producer.flush(0)
                    except KafkaException:  # a fatal producer (e.g. fenced): replaced anyway
                        pass
                    producer = self._producer()
                    consumer.close()
                    consumer = self.consumer(subscribe=False)
                self.stop.wait(self.pace_s)
        finally:
            consumer.close()

    def _txn(self, producer: Producer, consumer: Consumer, n: int) -> bool:
        plan, decision = draw_txn(self.rng)
        inv = self.h.invoke("txn", self.process, self.value(txn=True, mops=[]))
        mops: list[list[Any]] = []
        try:
            producer.begin_transaction()
            for i, kind in enumerate(plan):
                if kind == "send":
                    key, value = self.rng.randrange(self.env.keys), f"{self.process}-{n}.{i}"
                    mop: list[Any] = ["send", key, value, None]
                    mops.append(mop)
                    producer.produce(
                        self.env.topic,
                        value=value.encode(),
                        partition=key,
                        on_delivery=_offset_into(mop),
                    )
                else:
                    mops.extend(self.poll_mops(consumer))
                producer.poll(0)
        except (BufferError, KafkaException) as exc:
            return self._abort(producer, inv, mops, _name(exc))
        if decision == "abort":
            return self._abort(producer, inv, mops, "")
        self.h.ok("end-txn", self.process, self.value(op=inv.index))
        try:
            producer.commit_transaction(5)
        except KafkaException as exc:
            err = exc.args[0]
            if err.txn_requires_abort():
                return self._abort(producer, inv, mops, _name(exc))
            self.h.complete(inv, INFO, {"mops": mops}, error=_name(exc))
            return False
        self.h.complete(inv, OK, {"mops": mops, "decision": "commit"})
        return True

    def _abort(self, producer: Producer, inv: Op, mops: list[list[Any]], error: str) -> bool:
        """No commit was sent (or the commit certainly failed): the transaction did not commit."""
        try:
            producer.abort_transaction(5)
        except KafkaException as exc:
            self.h.complete(inv, FAIL, {"mops": mops}, error=error or _name(exc))
            return False
        self.h.complete(inv, OK, {"mops": mops, "decision": "abort"}, error=error)
        return True


def draw_txn(rng: random.Random) -> tuple[list[str], str]:
    """A transaction's micro-ops ("send" / "poll", one to four) and its decision, drawn from
    the process's generator (the same draws whichever client runs it)."""
    plan = ["send" if rng.random() < 0.7 else "poll" for _ in range(rng.randint(1, 4))]
    return plan, "commit" if rng.random() < 0.75 else "abort"


def _offset_into(mop: list[Any]) -> Any:
    def done(err: KafkaError | None, msg: Message) -> None:
        off = msg.offset()
        if err is None and off is not None and off >= 0:
            mop[3] = off

    return done


class Monitor(Process):
    """The group's committed offsets and every key's high watermark, over and over."""

    def run_ops(self) -> None:
        settings = {"group.id": self.env.group, "enable.auto.commit": False}
        consumer = Consumer(self.env.config(settings))
        admin = AdminClient(self.env.config({}))
        tps = [TopicPartition(self.env.topic, k) for k in range(self.env.keys)]
        self.ready.set()
        try:
            while not self.stop.is_set():
                inv = self.h.invoke(
                    "committed", self.process, {"group": self.env.group, "offsets": {}}
                )
                try:
                    got = consumer.committed(tps, timeout=1.0)
                    offsets = {
                        tp.partition: tp.offset for tp in got if tp.error is None and tp.offset >= 0
                    }
                    self.h.complete(inv, OK, {"offsets": offsets})
                except KafkaException as exc:
                    self.h.complete(inv, INFO, error=_name(exc))
                inv = self.h.invoke("hw", self.process, {"hw": {}, "epochs": {}})
                hw, epochs = _high_watermarks(admin, tps)
                self.h.complete(inv, OK if hw else INFO, {"hw": hw, "epochs": epochs})
                self.stop.wait(0.05)
        finally:
            consumer.close()


def _high_watermarks(
    admin: AdminClient, tps: list[TopicPartition]
) -> tuple[dict[int, int], dict[int, int]]:
    """Each key's high watermark (ListOffsets latest, read_uncommitted) and the leader epoch of
    the broker that answered it (KIP-320), for the keys that answered within a second."""
    hw: dict[int, int] = {}
    epochs: dict[int, int] = {}
    asked = admin.list_offsets(
        {tp: OffsetSpec.latest() for tp in tps},
        isolation_level=IsolationLevel.READ_UNCOMMITTED,
        request_timeout=1.0,
    )
    for tp, fut in asked.items():
        try:
            got = fut.result(timeout=2.0)
        except (KafkaException, TimeoutError):
            continue
        if got.offset < 0:
            continue  # the partition's answer carried an error (OFFSET_INVALID)
        hw[tp.partition] = got.offset
        epochs[tp.partition] = got.leader_epoch if got.leader_epoch is not None else -1
    return hw, epochs


def processes(
    env: Env,
    plain: int,
    txn: int,
    max_ops: int,
    java: frozenset[str] = frozenset(),
    jvm: JavaClients | None = None,
) -> list[Process]:
    """The workload's processes p0.., t0.. and the monitor; those named in `java` use Apache
    Kafka's Java client in `jvm`, the others librdkafka."""
    from odradek.testing.jepsen.javaclient import JavaPlainProcess, JavaTxnProcess

    out: list[Process] = []
    kinds = (("p", plain, PlainProcess, JavaPlainProcess), ("t", txn, TxnProcess, JavaTxnProcess))
    for prefix, count, native, on_java in kinds:
        for i in range(count):
            name = f"{prefix}{i}"
            if name not in java:
                out.append(native(name, env, max_ops))
            elif jvm is None:
                raise ValueError("Java processes need a JavaClients")
            else:
                out.append(on_java(name, env, max_ops, jvm))
    out.append(Monitor("monitor", env, 0))
    return out


def java_processes(seed: int, plain: int, txn: int, share: float) -> frozenset[str]:
    """Which processes use the Java client: `share` of the plain and of the transactional
    ones (at least one of each kind when `share` > 0), which ones drawn from the seed."""
    if share <= 0:
        return frozenset()
    rng = random.Random(f"jepsen-java-{seed}")
    out: set[str] = set()
    for prefix, n in (("p", plain), ("t", txn)):
        k = min(n, max(1, round(share * n))) if n else 0
        out.update(f"{prefix}{i}" for i in rng.sample(range(n), k))
    return frozenset(out)


def final_read(env: Env, timeout: float = 20.0, isolation: str = "read_committed") -> str:
    """Read every key from the beginning to its end and record it as the `final` op
    (read_committed) or the `final-uncommitted` op (read_uncommitted: what the log holds at
    each offset, aborted writes too); '' or why it could not."""
    f = "final" if isolation == "read_committed" else "final-uncommitted"
    inv = env.history.invoke(f, "reader", {"records": {}})
    c = Consumer(
        env.config(
            {
                "group.id": f"{env.group}-{f}",
                "isolation.level": isolation,
                "enable.auto.commit": False,
            }
        )
    )
    records: dict[int, list[list[Any]]] = {k: [] for k in range(env.keys)}
    try:
        deadline = time.monotonic() + timeout
        ends: dict[int, int] = {}
        while len(ends) < env.keys and time.monotonic() < deadline:
            for k in range(env.keys):
                if k not in ends:
                    try:
                        tp = TopicPartition(env.topic, k)
                        ends[k] = c.get_watermark_offsets(tp, 1.0, cached=False)[1]
                    except KafkaException:
                        pass
        c.assign([TopicPartition(env.topic, k, OFFSET_BEGINNING) for k in range(env.keys)])
        done = {k for k, end in ends.items() if end <= 0}
        while len(done) < env.keys and time.monotonic() < deadline:
            for msg in c.consume(500, 0.2):
                if msg.error() is None:
                    records[_partition(msg)].append([msg.offset(), (msg.value() or b"").decode()])
            for tp in c.position([TopicPartition(env.topic, k) for k in range(env.keys)]):
                if tp.partition in ends and tp.offset >= ends[tp.partition]:
                    done.add(tp.partition)
        if len(done) < env.keys:
            why = f"read only keys {sorted(done)} to {ends} in {timeout}s"
            env.history.complete(inv, INFO, {"records": records}, error=why)
            return why
        env.history.complete(inv, OK, {"records": records})
        return ""
    finally:
        c.close()


def record_batches(env: Env, timeout: float = 20.0) -> str:
    """Read every key's batch headers (`batches.read_batches`) and record them as the
    `batches` op; '' or why some key could not be read."""
    inv = env.history.invoke("batches", "reader", {"batches": {}})
    got, why = read_batches(env.bootstrap, env.topic, env.keys, timeout)
    rows = {k: [b.as_list() for b in v] for k, v in got.items()}
    env.history.complete(inv, INFO if why else OK, {"batches": rows}, error=why)
    return why
