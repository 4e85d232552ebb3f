"""One command language for transactional clients, for compat_tests/test_transactions.py.

Each driver runs the commands of compat_tests/java/TxnDriver.java with one client library, so a
scenario is written once and run with confluent-kafka, kafka-python, aiokafka and Java:

    producer NAME TRANSACTIONAL_ID [key=value ...]   (Kafka's dotted config keys)
    NAME init | begin | flush | commit | abort | close
    NAME send TOPIC PARTITION KEY VALUE
    NAME offsets GROUP TOPIC PARTITION OFFSET [TOPIC PARTITION OFFSET ...]
    consume ISOLATION TOPIC TIMEOUT_MS   reads every partition until a record keyed "__end__"
                                         -> "rec P OFFSET KEY VALUE" lines, "position P OFFSET"
    committed GROUP TOPIC PARTITION      -> "committed OFFSET"
    admin list | admin describe TXN_ID | admin producers TOPIC PARTITION

A command answers `Result(ok, error, lines)`; `error` names the exception (and its causes, or
the Kafka error name) so tests can tell fencing from other failures.
"""

from __future__ import annotations

import asyncio
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

END_KEY = "__end__"


class Result(NamedTuple):
    ok: bool
    error: str
    lines: list[str]


class TxnDriverBase:
    name = "?"
    supports_admin = False

    def run(self, line: str, timeout: float = 90.0) -> Result:
        raise NotImplementedError

    def close(self) -> None:
        pass

    # -- helpers for tests ----------------------------------------------------------------------

    def __call__(self, line: str, timeout: float = 90.0) -> list[str]:
        r = self.run(line, timeout)
        assert r.ok, f"{self.name}: {line!r} failed: {r.error}"
        return r.lines

    def fails(self, line: str) -> str:
        r = self.run(line)
        assert not r.ok, f"{self.name}: {line!r} should have failed"
        return r.error

    def consume(
        self, isolation: str, topic: str, timeout_ms: int = 20000
    ) -> tuple[list[tuple[int, int, str, str]], dict[int, int]]:
        """([(partition, offset, key, value)] in delivery order, {partition: position})."""
        records, positions = [], {}
        for line in self(f"consume {isolation} {topic} {timeout_ms}", timeout_ms / 1000 + 60):
            w = line.split(" ")
            if w[0] == "rec":
                records.append((int(w[1]), int(w[2]), w[3], w[4]))
            elif w[0] == "position":
                positions[int(w[1])] = int(w[2])
        return records, positions


# -- in-process Python clients -----------------------------------------------------------------


def _error_text(exc: BaseException) -> str:
    names = []
    c: BaseException | None = exc
    while c is not None and len(names) < 6:
        names.append(type(c).__name__)
        c = c.__cause__ or c.__context__
    extra = ""
    args = getattr(exc, "args", ())
    if args and hasattr(args[0], "name") and callable(args[0].name):  # confluent KafkaError
        err = args[0]
        extra = f"{err.name()} fatal={err.fatal()} abortable={err.txn_requires_abort()} "
    return f"{'<-'.join(names)} {extra}{str(exc).replace(chr(10), ' ')}"


class PythonDriver(TxnDriverBase):
    """Parses the command language and calls `do_<command>` methods."""

    def __init__(self, bootstrap: str) -> None:
        self.bootstrap = bootstrap
        self.producers: dict[str, Any] = {}

    def run(self, line: str, timeout: float = 90.0) -> Result:
        w = line.split()
        out: list[str] = []
        try:
            if w[0] == "producer":
                extra = dict(kv.split("=", 1) for kv in w[3:])
                self.producers[w[1]] = self.new_producer(w[2], extra)
            elif w[0] == "consume":
                self.do_consume(w[1], w[2], int(w[3]), out)
            elif w[0] == "committed":
                out.append(f"committed {self.do_committed(w[1], w[2], int(w[3]))}")
            elif w[0] == "admin":
                self.do_admin(w[1:], out)
            else:
                p = self.producers[w[0]]
                getattr(self, f"do_{w[1]}")(p, *w[2:])
                if w[1] == "close":
                    del self.producers[w[0]]
        except Exception as exc:  # every client error becomes a result line
            return Result(False, _error_text(exc), out)
        return Result(True, "", out)

    def new_producer(self, transactional_id: str, extra: dict[str, str]) -> Any:
        raise NotImplementedError

    def do_consume(self, isolation: str, topic: str, timeout_ms: int, out: list[str]) -> None:
        raise NotImplementedError

    def do_committed(self, group: str, topic: str, partition: int) -> int:
        raise NotImplementedError

    def do_admin(self, w: list[str], out: list[str]) -> None:
        raise NotImplementedError(f"{self.name} has no transaction admin API")

    @staticmethod
    def offsets_arg(args: tuple[str, ...]) -> list[tuple[str, int, int]]:
        return [(args[i], int(args[i + 1]), int(args[i + 2])) for i in range(0, len(args), 3)]


class ConfluentDriver(PythonDriver):
    name = "confluent-kafka"

    def __init__(self, bootstrap: str) -> None:
        super().__init__(bootstrap)
        self.errors: dict[int, list[Any]] = {}

    def new_producer(self, transactional_id: str, extra: dict[str, str]) -> Any:
        from confluent_kafka import Producer

        conf = {
            "bootstrap.servers": self.bootstrap,
            "transactional.id": transactional_id,
            "retry.backoff.ms": 20,
            **extra,
        }
        p = Producer(conf)
        self.errors[id(p)] = []  # delivery errors since the last flush
        return p

    def do_init(self, p: Any) -> None:
        p.init_transactions(30)

    def do_begin(self, p: Any) -> None:
        p.begin_transaction()

    def do_send(self, p: Any, topic: str, partition: str, key: str, value: str) -> None:
        def report(err: Any, _msg: Any) -> None:
            if err is not None:
                self.errors[id(p)].append(err)

        p.produce(
            topic,
            key=key.encode(),
            value=value.encode(),
            partition=int(partition),
            on_delivery=report,
        )
        p.poll(0)

    def do_flush(self, p: Any) -> None:
        from confluent_kafka import KafkaException

        remaining = p.flush(30)
        errors, self.errors[id(p)] = self.errors[id(p)], []
        if errors:
            raise KafkaException(errors[0])
        if remaining:
            raise TimeoutError(f"{remaining} messages not delivered")

    def do_offsets(self, p: Any, group: str, *args: str) -> None:
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer({"bootstrap.servers": self.bootstrap, "group.id": group})
        try:
            p.send_offsets_to_transaction(
                [TopicPartition(t, i, o) for t, i, o in self.offsets_arg(args)],
                c.consumer_group_metadata(),
                30,
            )
        finally:
            c.close()

    def do_commit(self, p: Any) -> None:
        self.errors[id(p)] = []
        p.commit_transaction(30)

    def do_abort(self, p: Any) -> None:
        self.errors[id(p)] = []
        p.abort_transaction(30)

    def do_close(self, p: Any) -> None:
        p.flush(5)

    def do_consume(self, isolation: str, topic: str, timeout_ms: int, out: list[str]) -> None:
        from confluent_kafka import OFFSET_BEGINNING, Consumer, TopicPartition

        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": "txn-reader",
                "isolation.level": isolation,
                "enable.auto.commit": False,
                "enable.partition.eof": False,
            }
        )
        try:
            meta = c.list_topics(topic, timeout=10).topics[topic]
            parts = [TopicPartition(topic, p, OFFSET_BEGINNING) for p in sorted(meta.partitions)]
            c.assign(parts)
            ended: set[int] = set()
            deadline = time.monotonic() + timeout_ms / 1000
            while len(ended) < len(parts) and time.monotonic() < deadline:
                m = c.poll(0.1)
                if m is None or m.error():
                    continue
                key = (m.key() or b"").decode()
                if key == END_KEY:
                    ended.add(m.partition())
                else:
                    out.append(f"rec {m.partition()} {m.offset()} {key} {m.value().decode()}")
            for tp in c.position([TopicPartition(topic, p.partition) for p in parts]):
                out.append(f"position {tp.partition} {tp.offset}")
        finally:
            c.close()

    def do_committed(self, group: str, topic: str, partition: int) -> int:
        from confluent_kafka import Consumer, TopicPartition

        c = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": group,
                "isolation.level": "read_committed",
            }
        )
        try:
            tp = c.committed([TopicPartition(topic, partition)], timeout=20)[0]
            return tp.offset if tp.offset >= 0 else -1
        finally:
            c.close()


def _kp_config(extra: dict[str, str]) -> dict[str, Any]:
    return {k.replace(".", "_"): int(v) if v.lstrip("-").isdigit() else v for k, v in extra.items()}


class KafkaPythonDriver(PythonDriver):
    name = "kafka-python"
    supports_admin = True

    def __init__(self, bootstrap: str) -> None:
        super().__init__(bootstrap)
        self.pending: dict[int, list[Any]] = {}
        self.admin: Any = None

    def new_producer(self, transactional_id: str, extra: dict[str, str]) -> Any:
        from kafka import KafkaProducer

        p = KafkaProducer(
            bootstrap_servers=self.bootstrap,
            transactional_id=transactional_id,
            retry_backoff_ms=20,
            max_block_ms=30000,
            **_kp_config(extra),
        )
        self.pending[id(p)] = []
        return p

    def do_init(self, p: Any) -> None:
        p.init_transactions()

    def do_begin(self, p: Any) -> None:
        p.begin_transaction()

    def do_send(self, p: Any, topic: str, partition: str, key: str, value: str) -> None:
        self.pending[id(p)].append(
            p.send(topic, key=key.encode(), value=value.encode(), partition=int(partition))
        )

    def do_flush(self, p: Any) -> None:
        p.flush(timeout=30)
        futures, self.pending[id(p)] = self.pending[id(p)], []
        for f in futures:
            f.get(timeout=30)

    def do_offsets(self, p: Any, group: str, *args: str) -> None:
        from kafka import OffsetAndMetadata, TopicPartition

        p.send_offsets_to_transaction(
            {
                TopicPartition(t, i): OffsetAndMetadata(o, "", -1)
                for t, i, o in self.offsets_arg(args)
            },
            group,
        )

    def do_commit(self, p: Any) -> None:
        self.pending[id(p)] = []
        p.commit_transaction()

    def do_abort(self, p: Any) -> None:
        self.pending[id(p)] = []
        p.abort_transaction()

    def do_close(self, p: Any) -> None:
        p.close(timeout=5)

    def close(self) -> None:
        for p in self.producers.values():
            p.close(timeout=5)
        if self.admin is not None:
            self.admin.close()

    def do_consume(self, isolation: str, topic: str, timeout_ms: int, out: list[str]) -> None:
        from kafka import KafkaConsumer, TopicPartition

        c = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            isolation_level=isolation,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
        )
        try:
            parts = [TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic))]
            c.assign(parts)
            c.seek_to_beginning(*parts)
            ended: set[int] = set()
            deadline = time.monotonic() + timeout_ms / 1000
            while len(ended) < len(parts) and time.monotonic() < deadline:
                for tp, msgs in c.poll(timeout_ms=100).items():
                    for m in msgs:
                        key = (m.key or b"").decode()
                        if key == END_KEY:
                            ended.add(tp.partition)
                        else:
                            out.append(f"rec {tp.partition} {m.offset} {key} {m.value.decode()}")
            for tp in parts:
                out.append(f"position {tp.partition} {c.position(tp)}")
        finally:
            c.close()

    def do_committed(self, group: str, topic: str, partition: int) -> int:
        from kafka import KafkaConsumer, TopicPartition

        c = KafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=group,
            isolation_level="read_committed",
            enable_auto_commit=False,
        )
        try:
            got = c.committed(TopicPartition(topic, partition))
            return -1 if got is None else got
        finally:
            c.close()

    def do_admin(self, w: list[str], out: list[str]) -> None:
        from kafka import TopicPartition
        from kafka.admin import KafkaAdminClient

        if self.admin is None:
            self.admin = KafkaAdminClient(bootstrap_servers=self.bootstrap)
        if w[0] == "list":
            for listings in self.admin.list_transactions().values():
                for t in listings:
                    state = getattr(t.state, "value", t.state)
                    out.append(f"txn {t.transactional_id} {t.producer_id} {state}")
        elif w[0] == "describe":
            d = self.admin.describe_transactions([w[1]])[w[1]]
            tps = ",".join(sorted(f"{tp.topic}:{tp.partition}" for tp in d.topic_partitions))
            state = getattr(d.state, "value", d.state)
            out.append(
                f"desc {state} {d.producer_id} {d.producer_epoch} {d.transaction_timeout_ms} {tps}"
            )
        elif w[0] == "producers":
            tp = TopicPartition(w[1], int(w[2]))
            for ps in self.admin.describe_producers([tp])[tp].active_producers:
                out.append(
                    f"producer {ps.producer_id} {ps.producer_epoch} "
                    f"{ps.current_transaction_start_offset}"
                )
        else:
            raise ValueError(w[0])


class AioKafkaDriver(PythonDriver):
    """aiokafka on a private event loop (its producer's transaction starts with start())."""

    name = "aiokafka"

    def __init__(self, bootstrap: str) -> None:
        super().__init__(bootstrap)
        self.loop = asyncio.new_event_loop()
        self.pending: dict[int, list[Any]] = {}

    def _run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(coro, 60))

    def new_producer(self, transactional_id: str, extra: dict[str, str]) -> Any:
        from aiokafka import AIOKafkaProducer

        async def make() -> Any:
            return AIOKafkaProducer(
                bootstrap_servers=self.bootstrap,
                transactional_id=transactional_id,
                retry_backoff_ms=20,
                **_kp_config(extra),
            )

        p = self._run(make())
        self.pending[id(p)] = []
        return p

    def do_init(self, p: Any) -> None:
        self._run(p.start())

    def do_begin(self, p: Any) -> None:
        self._run(p.begin_transaction())

    def do_send(self, p: Any, topic: str, partition: str, key: str, value: str) -> None:
        fut = self._run(
            p.send(topic, value=value.encode(), key=key.encode(), partition=int(partition))
        )
        self.pending[id(p)].append(fut)

    def do_flush(self, p: Any) -> None:
        async def flush() -> None:
            await p.flush()
            futures, self.pending[id(p)] = self.pending[id(p)], []
            for f in futures:
                await f

        self._run(flush())

    def do_offsets(self, p: Any, group: str, *args: str) -> None:
        from aiokafka import TopicPartition

        self._run(
            p.send_offsets_to_transaction(
                {TopicPartition(t, i): o for t, i, o in self.offsets_arg(args)}, group
            )
        )

    def do_commit(self, p: Any) -> None:
        self.pending[id(p)] = []
        self._run(p.commit_transaction())

    def do_abort(self, p: Any) -> None:
        self.pending[id(p)] = []
        self._run(p.abort_transaction())

    def do_close(self, p: Any) -> None:
        self._run(p.stop())

    def close(self) -> None:
        for p in self.producers.values():
            try:
                self._run(p.stop())
            except Exception:
                pass
        self.loop.close()

    def do_consume(self, isolation: str, topic: str, timeout_ms: int, out: list[str]) -> None:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        async def consume() -> None:
            c = AIOKafkaConsumer(
                bootstrap_servers=self.bootstrap,
                isolation_level=isolation,
                enable_auto_commit=False,
                auto_offset_reset="earliest",
            )
            await c.start()
            try:
                parts = [
                    TopicPartition(topic, p) for p in sorted(c.partitions_for_topic(topic) or [])
                ]
                if not parts:
                    await c._client.force_metadata_update()
                    parts = [
                        TopicPartition(topic, p)
                        for p in sorted(c.partitions_for_topic(topic) or [])
                    ]
                c.assign(parts)
                await c.seek_to_beginning(*parts)
                ended: set[int] = set()
                deadline = time.monotonic() + timeout_ms / 1000
                while len(ended) < len(parts) and time.monotonic() < deadline:
                    got = await c.getmany(timeout_ms=100)
                    for tp, msgs in got.items():
                        for m in msgs:
                            key = (m.key or b"").decode()
                            if key == END_KEY:
                                ended.add(tp.partition)
                            else:
                                out.append(
                                    f"rec {tp.partition} {m.offset} {key} {m.value.decode()}"
                                )
                for tp in parts:
                    out.append(f"position {tp.partition} {await c.position(tp)}")
            finally:
                await c.stop()

        self.loop.run_until_complete(consume())

    def do_committed(self, group: str, topic: str, partition: int) -> int:
        from aiokafka import AIOKafkaConsumer, TopicPartition

        async def committed() -> int:
            c = AIOKafkaConsumer(
                bootstrap_servers=self.bootstrap,
                group_id=group,
                isolation_level="read_committed",
                enable_auto_commit=False,
            )
            await c.start()
            try:
                got = await c.committed(TopicPartition(topic, partition))
                return -1 if got is None else got
            finally:
                await c.stop()

        return self._run(committed())


# -- Java (compat_tests/java/TxnDriver.java in a child process) --------------------------------


class JavaDriver(TxnDriverBase):
    """A TxnDriver JVM fed one command per line; a reader thread collects its answers."""

    name = "java"
    supports_admin = True

    def __init__(self, bootstrap: str, java: Any) -> None:
        classes: Path = java.compile("TxnDriver")
        cmd = [java._tool("java"), *java.jvm_args, "-cp", java._cp(classes), "TxnDriver", bootstrap]
        self.proc = subprocess.Popen(
            cmd,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.lines: list[str] = []
        self.cond = threading.Condition()
        self.stderr: list[str] = []
        threading.Thread(
            target=self._pump, args=(self.proc.stdout, self._on_line), daemon=True
        ).start()
        threading.Thread(
            target=self._pump, args=(self.proc.stderr, self.stderr.append), daemon=True
        ).start()

    @staticmethod
    def _pump(stream: Any, sink: Callable[[str], None]) -> None:
        for line in stream:
            sink(line.rstrip("\n"))

    def _on_line(self, line: str) -> None:
        with self.cond:
            self.lines.append(line)
            self.cond.notify_all()

    def run(self, line: str, timeout: float = 90.0) -> Result:
        assert self.proc.stdin is not None
        with self.cond:
            self.lines.clear()
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()
        deadline = time.monotonic() + timeout
        with self.cond:
            while True:
                for i, got in enumerate(self.lines):
                    if got == "ok" or got.startswith("error "):
                        data = self.lines[:i]
                        del self.lines[: i + 1]
                        return Result(got == "ok", got[6:], data)
                remaining = deadline - time.monotonic()
                if remaining <= 0 or self.proc.poll() is not None:
                    raise AssertionError(
                        f"java TxnDriver: no answer to {line!r}; stderr:\n"
                        + "\n".join(self.stderr[-40:])
                    )
                self.cond.wait(min(remaining, 1.0))

    def close(self) -> None:
        if self.proc.poll() is None:
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.write("quit\n")
                self.proc.stdin.flush()
                self.proc.wait(timeout=20)
            except Exception:
                self.proc.kill()
                self.proc.wait()


CLIENTS = ("confluent-kafka", "kafka-python", "aiokafka", "java")


def make_driver(client: str, bootstrap: str, java: Any = None) -> TxnDriverBase:
    if client == "confluent-kafka":
        return ConfluentDriver(bootstrap)
    if client == "kafka-python":
        return KafkaPythonDriver(bootstrap)
    if client == "aiokafka":
        return AioKafkaDriver(bootstrap)
    if client == "java":
        return JavaDriver(bootstrap, java)
    raise ValueError(client)
