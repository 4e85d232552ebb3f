"""The queue workload's Java client processes: Apache Kafka's own client (kafka-clients 4.4,
transactions v2 when the broker finalizes them, KIP-890) beside librdkafka's, in one history.

One JVM per run (`JavaClients`) runs `java/JepsenClients.java`: a thread per workload process
with its own KafkaProducer and KafkaConsumer, driven over JSON lines on stdin/stdout. The
Python side (`JavaPlainProcess`, `JavaTxnProcess`) draws the same operations as the librdkafka
processes and records the same history ops, marked `"client": "java"`.

The class is compiled once into `.cache/jepsen-java/` against `.cache/kafka-4.4.0/lib` (the
jars scripts/setup.sh fetches; setup compiles it too: `python -m
odradek.testing.jepsen.javaclient`). The JVM is started from the calling thread, so it runs in
that thread's network namespace (the clients' host under `hosts.HostCluster`).
"""

from __future__ import annotations

import collections
import hashlib
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer

from odradek.testing.jepsen.history import FAIL, INFO, OK, History, Op
from odradek.testing.jepsen.workload import Env, Process, draw_txn

ROOT = Path(__file__).resolve().parents[3]
SOURCE = Path(__file__).resolve().parent / "java" / "JepsenClients.java"
LIB = ROOT / ".cache" / "kafka-4.4.0" / "lib"
CLASSES = ROOT / ".cache" / "jepsen-java"
JARS = (
    "kafka-clients-",
    "lz4-java-",
    "snappy-java-",
    "zstd-jni-",
    "slf4j-api-",
    "jackson-core-",
    "jackson-databind-",
    "jackson-annotations-",
)
JVM_ARGS = ("-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", "-Xmx256m", "-Xss512k")
ANSWER_S = 60.0  # every client call is bounded by its own timeouts (max.block.ms etc.) first

COMMON = {
    "reconnect.backoff.ms": "20",
    "reconnect.backoff.max.ms": "200",
    "retry.backoff.ms": "50",
    "retry.backoff.max.ms": "200",
    "metadata.max.age.ms": "500",
    "socket.connection.setup.timeout.ms": "2000",
    "socket.connection.setup.timeout.max.ms": "2000",
}


class JavaUnavailable(RuntimeError):
    """Java processes were asked for, but java, javac or the kafka-clients jars are missing."""


class JavaDied(RuntimeError):
    """The JVM exited or stopped answering: the run cannot go on (not a client error)."""


class JavaOpError(Exception):
    """A client call failed; `timeout` when Kafka's client timed out (outcome unknown)."""

    def __init__(self, error: str, timeout: bool) -> None:
        super().__init__(error)
        self.timeout = timeout


def classpath() -> list[Path]:
    jars = sorted(LIB.glob("*.jar")) if LIB.is_dir() else []
    picked = [j for j in jars if any(j.name.startswith(p) for p in JARS)]
    missing = [p.rstrip("-") for p in JARS if not any(j.name.startswith(p) for j in picked)]
    if missing:
        raise JavaUnavailable(
            f"the Java client's jars ({', '.join(missing)}) are not in {LIB}: "
            "run scripts/setup.sh test"
        )
    return picked


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise JavaUnavailable(f"{name} not found on PATH: run scripts/setup.sh test")
    return found


def _stamp(jars: list[Path]) -> str:
    h = hashlib.sha256(SOURCE.read_bytes())
    for jar in jars:
        h.update(jar.name.encode())
    return h.hexdigest()


def build(out: Path = CLASSES) -> Path:
    """The class directory of JepsenClients, compiled when missing or older than its source
    (into a fresh directory, then moved into place: concurrent builders do not collide)."""
    jars = classpath()
    want = _stamp(jars)
    stamp = out / "classes" / ".stamp"
    if stamp.exists() and stamp.read_text() == want:
        return out / "classes"
    out.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="classes-", dir=out))
    cmd = [_tool("javac"), "-nowarn", "-encoding", "UTF-8", "-d", str(tmp)]
    cmd += ["-cp", os.pathsep.join(map(str, jars)), str(SOURCE)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    if proc.returncode != 0:
        shutil.rmtree(tmp, ignore_errors=True)
        raise JavaUnavailable(f"javac {SOURCE.name} failed:\n{proc.stdout}{proc.stderr}")
    (tmp / ".stamp").write_text(want)
    old = out / f"old-{os.getpid()}-{threading.get_ident()}"
    try:
        os.rename(out / "classes", old)
    except FileNotFoundError:
        pass
    try:
        os.rename(tmp, out / "classes")
    except OSError:  # another builder moved its copy in first: the same classes
        shutil.rmtree(tmp, ignore_errors=True)
    shutil.rmtree(old, ignore_errors=True)
    return out / "classes"


def unavailable() -> str:
    """'' when Java processes can run here, else why not."""
    try:
        _tool("java")
        build()
    except JavaUnavailable as exc:
        return str(exc)
    return ""


class _Call:
    __slots__ = ("done", "reply")

    def __init__(self) -> None:
        self.done = threading.Event()
        self.reply: dict[str, Any] = {}


class JavaClients:
    """One JVM serving every Java process of a run. `call()` blocks for a command's answer;
    `send()` returns once the send was handed to the producer, its acknowledgement comes to
    `on_ack` (from the reader thread)."""

    def __init__(self, history: History) -> None:
        self.history = history
        classes = build()
        cp = os.pathsep.join([str(classes), *map(str, classpath())])
        self.proc = subprocess.Popen(
            [_tool("java"), *JVM_ARGS, "-cp", cp, "JepsenClients"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._calls: dict[int, _Call] = {}
        self._acks: dict[int, Callable[[dict[str, Any]], None]] = {}
        self._assign: dict[str, Callable[[list[int]], None]] = {}
        self._dead = ""
        self.stderr: collections.deque[str] = collections.deque(maxlen=40)
        self._reader = threading.Thread(target=self._read, name="jepsen-java-out", daemon=True)
        self._errs = threading.Thread(target=self._read_err, name="jepsen-java-err", daemon=True)
        self._reader.start()
        self._errs.start()

    # -- the line protocol ----------------------------------------------------------------------

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            try:
                msg = json.loads(raw)
            except ValueError:
                self.stderr.append(raw.decode(errors="replace").rstrip())
                continue
            if "ack" in msg:
                with self._lock:
                    on_ack = self._acks.pop(int(msg["ack"]), None)
                if on_ack is not None:
                    on_ack(msg)
            elif msg.get("event") == "assign":
                on_assign = self._assign.get(str(msg["proc"]))
                if on_assign is not None:
                    on_assign([int(k) for k in msg["keys"]])
            elif "id" in msg:
                with self._lock:
                    call = self._calls.pop(int(msg["id"]), None)
                if call is not None:
                    call.reply = msg
                    call.done.set()
        self.proc.wait()
        self._die(f"the JVM exited ({self.proc.returncode})")

    def _read_err(self) -> None:
        assert self.proc.stderr is not None
        for raw in self.proc.stderr:
            self.stderr.append(raw.decode(errors="replace").rstrip())

    def _die(self, why: str) -> None:
        with self._lock:
            self._dead = self._dead or why
            calls, self._calls = list(self._calls.values()), {}
        for call in calls:
            call.done.set()

    def _write(self, msg: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        line = (json.dumps(msg) + "\n").encode()
        with self._lock:
            if self._dead:
                raise JavaDied(self._why())
            try:
                self.proc.stdin.write(line)
                self.proc.stdin.flush()
            except OSError as exc:
                self._dead = f"the JVM's stdin closed: {exc}"
                raise JavaDied(self._why()) from exc

    def _why(self) -> str:
        return self._dead + ("; its stderr:\n" + "\n".join(self.stderr) if self.stderr else "")

    def call(self, proc: str, op: str, **fields: Any) -> dict[str, Any]:
        """Run `op` on process `proc`'s thread; its answer, or JavaOpError."""
        call = _Call()
        i = next(self._ids)
        with self._lock:
            self._calls[i] = call
        self._write({"id": i, "proc": proc, "op": op, **fields})
        if not call.done.wait(ANSWER_S):
            self._die(f"no answer to {op} of {proc} in {ANSWER_S:.0f}s")
        if not call.reply:
            raise JavaDied(self._why())
        if "error" in call.reply:
            raise JavaOpError(str(call.reply["error"]), bool(call.reply.get("timeout")))
        return call.reply

    def send(
        self, proc: str, topic: str, key: int, value: str, on_ack: Callable[[dict[str, Any]], None]
    ) -> None:
        """Hand one record to `proc`'s producer (JavaOpError when that failed at once)."""
        call = _Call()
        i = next(self._ids)
        with self._lock:
            self._calls[i] = call
            self._acks[i] = on_ack
        self._write(
            {"id": i, "proc": proc, "op": "send", "topic": topic, "key": key, "value": value}
        )
        if not call.done.wait(ANSWER_S):
            self._die(f"no answer to send of {proc} in {ANSWER_S:.0f}s")
        if not call.reply:
            raise JavaDied(self._why())
        if "error" in call.reply:
            with self._lock:
                self._acks.pop(i, None)
            raise JavaOpError(str(call.reply["error"]), bool(call.reply.get("timeout")))

    def on_assign(self, proc: str, fn: Callable[[list[int]], None]) -> None:
        self._assign[proc] = fn

    def close(self, timeout: float = 30.0) -> None:
        """Every process's clients closed, the JVM gone."""
        try:
            self._write({"op": "exit"})
            self.proc.stdin.close()  # type: ignore[union-attr]
        except (JavaDied, OSError):
            pass
        try:
            self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
        self._reader.join(5)
        self._errs.join(5)

    def __enter__(self) -> JavaClients:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# -- the processes (odradek.testing.jepsen.workload's, over the JVM) ----------------------------


def _records_by_key(records: list[list[Any]]) -> list[list[Any]]:
    by_key: dict[int, list[list[Any]]] = collections.defaultdict(list)
    for key, offset, value in records:
        by_key[int(key)].append([int(offset), str(value)])
    return [["poll", k, recs] for k, recs in sorted(by_key.items())]


def consumer_config(group: str, bootstrap: str, extra: dict[str, str]) -> dict[str, str]:
    return {
        **COMMON,
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "isolation.level": "read_committed",
        "enable.auto.commit": "false",
        "auto.offset.reset": "earliest",
        "session.timeout.ms": "6000",
        "heartbeat.interval.ms": "300",
        "max.poll.records": "20",
        "default.api.timeout.ms": "5000",
        "request.timeout.ms": "5000",
        **extra,
    }


def plain_producer_config(bootstrap: str, extra: dict[str, str]) -> dict[str, str]:
    return {
        **COMMON,
        "bootstrap.servers": bootstrap,
        "enable.idempotence": "true",
        "acks": "all",
        "linger.ms": "2",
        "request.timeout.ms": "1500",
        # as the librdkafka processes' message.timeout.ms: longer than any fault, so that no
        # send times out in flight (the idempotent producer would bump its epoch, KIP-360)
        "delivery.timeout.ms": "30000",
        "max.block.ms": "5000",
        **extra,
    }


def txn_producer_config(bootstrap: str, txn_id: str, extra: dict[str, str]) -> dict[str, str]:
    return {
        **COMMON,
        "bootstrap.servers": bootstrap,
        "transactional.id": txn_id,
        "transaction.timeout.ms": "10000",
        "request.timeout.ms": "1500",
        "delivery.timeout.ms": "5000",
        "linger.ms": "2",
        "max.block.ms": "5000",
        **extra,
    }


def complete_once(history: History, inv: Op) -> Callable[..., None]:
    """A completion recorder that records only the first outcome of `inv`."""
    lock, done = threading.Lock(), [False]

    def record(type_: str, value: dict[str, Any] | None = None, error: str = "") -> None:
        with lock:
            if done[0]:
                return
            done[0] = True
        history.complete(inv, type_, value, error=error)

    return record


class JavaProcess(Process):
    """A workload process over the JVM's thread of the same name."""

    client = "java"
    errors: tuple[type[Exception], ...] = (JavaOpError,)

    def __init__(self, name: str, env: Env, max_ops: int, jvm: JavaClients) -> None:
        super().__init__(name, env, max_ops)
        self.jvm = jvm
        self.java_extra = dict(env.java_extra)

    def why(self, exc: BaseException) -> str:
        return str(exc) if isinstance(exc, JavaOpError) else super().why(exc)

    def call(self, op: str, **fields: Any) -> dict[str, Any]:
        return self.jvm.call(self.process, op, **fields)

    def quietly(self, op: str, **fields: Any) -> None:
        try:
            self.call(op, **fields)
        except JavaOpError:
            pass

    def java_consumer(self, subscribe: bool) -> None:
        self.group = self.env.group if subscribe else f"{self.env.group}-{self.process}"

        def assigned(keys: list[int]) -> None:
            self.h.ok("assign", self.process, self.value(keys=keys))

        self.jvm.on_assign(self.process, assigned)
        config = consumer_config(self.group, self.env.bootstrap, self.java_extra)
        reply = self.call(
            "consumer", config=config, subscribe=subscribe, topic=self.env.topic, keys=self.env.keys
        )
        if not subscribe:
            assigned([int(k) for k in reply["keys"]])

    def poll_mops(self, consumer: Consumer | None) -> list[list[Any]]:
        return _records_by_key(self.call("poll")["records"])

    def commit_offsets(self, consumer: Consumer | None) -> dict[int, int]:
        return {int(k): int(v) for k, v in self.call("commit")["offsets"].items()}


class JavaPlainProcess(JavaProcess):
    """`workload.PlainProcess` over the Java client: idempotent single sends (acks=all) and
    polls (subscribe or assign), committing after polls."""

    def run_ops(self) -> None:
        self.call("producer", config=plain_producer_config(self.env.bootstrap, self.java_extra))
        self.java_consumer(subscribe=self.rng.random() < 0.5)
        self.ready.set()
        try:
            for n in range(self.max_ops):
                if self.stop.is_set():
                    break
                if self.rng.random() < 0.6:
                    self._send(n)
                else:
                    self.poll_op(None, commit=True)
                self.stop.wait(self.pace_s)
        finally:
            self.quietly("close_producer", timeout_ms=6000)  # as librdkafka's flush(6)
            self.quietly("close_consumer")

    def _send(self, n: int) -> None:
        key, value = self.rng.randrange(self.env.keys), f"{self.process}-{n}"
        inv = self.h.invoke(
            "txn", self.process, self.value(txn=False, mops=[["send", key, value, None]])
        )
        record = complete_once(self.h, inv)

        def acked(msg: dict[str, Any]) -> None:
            if "error" in msg:
                record(INFO, error=str(msg["error"]))
            else:
                off = int(msg["offset"])
                record(OK, {"mops": [["send", key, value, off if off >= 0 else None]]})

        try:
            self.jvm.send(self.process, self.env.topic, key, value, acked)
        except JavaOpError as exc:  # thrown by send(): never handed to the producer
            record(FAIL, error=str(exc))


class JavaTxnProcess(JavaProcess):
    """`workload.TxnProcess` over the Java client: transactions of sends and polls, committed
    or aborted; a producer in doubt is closed and replaced (the new one fences it)."""

    def _producer(self) -> bool:
        txn_id = f"jepsen-{self.env.seed}-{self.process}"
        config = txn_producer_config(self.env.bootstrap, txn_id, self.java_extra)
        while not self.stop.is_set():
            try:
                self.call("producer", config=config)  # with initTransactions
                return True
            except JavaOpError:
                self.stop.wait(0.1)
        return False

    def run_ops(self) -> None:
        self.java_consumer(subscribe=False)
        ready = self._producer()
        self.ready.set()
        try:
            for n in range(self.max_ops):
                if not ready or self.stop.is_set():
                    break
                if not self._txn(n):
                    self.quietly("close_producer", timeout_ms=0)
                    ready = self._producer()
                    self.quietly("close_consumer")
                    self.java_consumer(subscribe=False)
                self.stop.wait(self.pace_s)
        finally:
            self.quietly("close_producer", timeout_ms=0)
            self.quietly("close_consumer")

    def _txn(self, n: int) -> bool:
        plan, decision = draw_txn(self.rng)
        inv = self.h.invoke("txn", self.process, self.value(txn=True, mops=[]))
        mops: list[list[Any]] = []
        try:
            self.call("begin")
            for i, kind in enumerate(plan):
                if kind == "send":
                    key, value = self.rng.randrange(self.env.keys), f"{self.process}-{n}.{i}"
                    mop: list[Any] = ["send", key, value, None]
                    mops.append(mop)
                    self.jvm.send(self.process, self.env.topic, key, value, _offset_into(mop))
                else:
                    mops.extend(self.poll_mops(None))
        except JavaOpError as exc:
            return self._abort(inv, mops, str(exc), certain=True)
        if decision == "abort":
            return self._abort(inv, mops, "", certain=True)
        self.h.ok("end-txn", self.process, self.value(op=inv.index))
        try:
            self.call("commit_txn")
        except JavaOpError as exc:
            if exc.timeout:  # the commit may yet complete (Kafka's client says: retry it)
                self.h.complete(inv, INFO, {"mops": mops}, error=str(exc))
                return False
            return self._abort(inv, mops, str(exc), certain=False)
        self.h.complete(inv, OK, {"mops": mops, "decision": "commit"})
        return True

    def _abort(self, inv: Op, mops: list[list[Any]], error: str, certain: bool) -> bool:
        """Abort the transaction. `certain`: no commit was sent, so it did not commit even
        when the abort fails; otherwise (a commit refused with an abortable error) only a
        successful abort says so."""
        try:
            self.call("abort_txn")
        except JavaOpError as exc:
            why = error or str(exc)
            self.h.complete(inv, FAIL if certain else INFO, {"mops": mops}, error=why)
            return False
        self.h.complete(inv, OK, {"mops": mops, "decision": "abort"}, error=error)
        return True


def _offset_into(mop: list[Any]) -> Callable[[dict[str, Any]], None]:
    def acked(msg: dict[str, Any]) -> None:
        if "error" not in msg and int(msg["offset"]) >= 0:
            mop[3] = int(msg["offset"])

    return acked


__all__ = [
    "FAIL",
    "INFO",
    "OK",
    "JavaClients",
    "JavaDied",
    "JavaOpError",
    "JavaPlainProcess",
    "JavaTxnProcess",
    "JavaUnavailable",
    "build",
    "classpath",
    "unavailable",
]


if __name__ == "__main__":
    print(build())
    sys.exit(0)
