"""One consumer-group member in its own process, for compat_tests/test_groups.py.

    python -m compat_tests.group_member --client kafka-python --bootstrap HOST:PORT \
        --topic T --group G [--assignor range|roundrobin|cooperative-sticky] \
        [--instance-id ID] [--session-ms 6000] [--commit sync|async|auto]

It subscribes, consumes from the earliest offset and prints one JSON object per line, flushed:

    {"e": "assigned", "tps": [[topic, p], ...], "all": [[topic, p], ...]}
    {"e": "revoked", "tps": [...], "all": [...]}
    {"e": "rec", "p": partition, "o": offset, "v": "value"}
    {"e": "committed", "offsets": {"p": next offset}}
    {"e": "error", "msg": "..."}          a fatal error (e.g. FENCED_INSTANCE_ID); it exits
    {"e": "closed"}                       after SIGTERM: the consumer closed cleanly

SIGTERM closes the consumer (a dynamic member sends LeaveGroup); SIGKILL leaves the group to
the broker's session timeout. Each process owns its client, so a kill is a real crash.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import signal
import sys
import threading
import time
import traceback
from typing import Any

stop = threading.Event()
# kafka-python 3.0.12 loses a JoinGroup/SyncGroup round that a poll() ends in: one finishing
# between two polls is discarded and another started (a new rebalance), and a leader's rejoin for
# a metadata change is not awaited at all once it has assigned, so its assignment is never applied
# (odradek.testing.polling). Knowing the partitions before subscribing avoids the metadata rejoin;
# polls longer than most rounds make a poll ending in one rare, and still let SIGTERM stop a member
# within a poll (the tests wait for that).
POLL_MS = 3000


def heartbeat_ms(session_ms: int) -> int:
    """A sixth of the session, at most 1 s: a member hears of a rebalance at its next heartbeat,
    and a long session (a test that must tell a LeaveGroup from a session timeout) would
    otherwise make every rebalance wait seconds for it."""
    return max(min(session_ms // 6, 1000), 100)


def emit(**event: Any) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


class Tracker:
    """The member's current assignment, from its rebalance callbacks (eager or incremental)."""

    def __init__(self) -> None:
        self.current: set[tuple[str, int]] = set()

    def assigned(self, tps: list[tuple[str, int]], full: bool) -> None:
        if full:
            self.current = set(tps)
        else:
            self.current |= set(tps)
        emit(e="assigned", tps=sorted(tps), all=sorted(self.current))

    def revoked(self, tps: list[tuple[str, int]]) -> None:
        self.current -= set(tps)
        emit(e="revoked", tps=sorted(tps), all=sorted(self.current))


def _value(raw: bytes | None) -> str | None:
    return None if raw is None else raw.decode("utf-8", "replace")


# -- kafka-python ------------------------------------------------------------------------------


def run_kafka_python(args: argparse.Namespace) -> None:
    from kafka import ConsumerRebalanceListener, KafkaConsumer
    from kafka.coordinator.assignors.cooperative_sticky import CooperativeStickyAssignor
    from kafka.coordinator.assignors.range import RangePartitionAssignor
    from kafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from kafka.errors import KafkaError

    assignor = {
        "range": RangePartitionAssignor,
        "roundrobin": RoundRobinPartitionAssignor,
        "cooperative-sticky": CooperativeStickyAssignor,
    }[args.assignor]
    tracker = Tracker()
    cooperative = args.assignor == "cooperative-sticky"

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            tracker.revoked([(tp.topic, tp.partition) for tp in revoked])

        def on_partitions_assigned(self, assigned):
            tracker.assigned([(tp.topic, tp.partition) for tp in assigned], not cooperative)

        def on_partitions_lost(self, lost):
            tracker.revoked([(tp.topic, tp.partition) for tp in lost])

    consumer = KafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id=args.client_id,
        auto_offset_reset="earliest",
        enable_auto_commit=args.commit == "auto",
        auto_commit_interval_ms=200,
        session_timeout_ms=args.session_ms,
        heartbeat_interval_ms=heartbeat_ms(args.session_ms),
        max_poll_interval_ms=args.session_ms * 5,
        partition_assignment_strategy=[assignor],
        group_instance_id=args.instance_id,
    )
    # knowing the partitions before subscribing spares the leader a rejoin when they arrive
    deadline = time.monotonic() + 30
    while not consumer.partitions_for_topic(args.topic) and time.monotonic() < deadline:
        time.sleep(0.1)
    consumer.subscribe([args.topic], listener=Listener())
    try:
        while not stop.is_set():
            batch = consumer.poll(timeout_ms=POLL_MS)
            offsets = {}
            for tp, records in batch.items():
                for r in records:
                    emit(e="rec", p=tp.partition, o=r.offset, v=_value(r.value))
                    offsets[tp.partition] = r.offset + 1
            if offsets and args.commit in ("sync", "async"):
                try:
                    if args.commit == "sync":
                        consumer.commit()
                        emit(e="committed", offsets={str(p): o for p, o in offsets.items()})
                    else:
                        consumer.commit_async()
                except KafkaError as exc:
                    if "Fenced" in type(exc).__name__:
                        raise
                    emit(e="commit_failed", msg=repr(exc))
    except KafkaError as exc:
        emit(e="error", msg=repr(exc))
        return
    consumer.close()
    emit(e="closed")


# -- confluent-kafka ---------------------------------------------------------------------------


def run_confluent(args: argparse.Namespace) -> None:
    from confluent_kafka import Consumer, KafkaError, KafkaException

    tracker = Tracker()
    # KIP-848 members are given partitions incrementally, as cooperative ones
    cooperative = args.assignor == "cooperative-sticky" or args.group_protocol == "consumer"
    conf = {
        "bootstrap.servers": args.bootstrap,
        "group.id": args.group,
        "client.id": args.client_id,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": args.commit == "auto",
        "auto.commit.interval.ms": 200,
        "session.timeout.ms": args.session_ms,
        "heartbeat.interval.ms": heartbeat_ms(args.session_ms),
        "max.poll.interval.ms": max(args.session_ms * 5, 10000),
        "partition.assignment.strategy": args.assignor,
        "topic.metadata.refresh.interval.ms": 1000,
    }
    if args.instance_id:
        conf["group.instance.id"] = args.instance_id
    if args.group_protocol == "consumer":
        # the coordinator assigns (group.remote.assignor) and sets the session and heartbeat
        for key in ("session.timeout.ms", "heartbeat.interval.ms", "partition.assignment.strategy"):
            del conf[key]
        conf["group.protocol"] = "consumer"
        if args.assignor in ("uniform", "range"):
            conf["group.remote.assignor"] = args.assignor
    fatal: list[str] = []

    def on_error(err: KafkaError) -> None:
        if err.fatal():
            fatal.append(str(err))
            stop.set()

    conf["error_cb"] = on_error
    consumer = Consumer(conf)

    def on_assign(c, parts):
        tracker.assigned([(p.topic, p.partition) for p in parts], not cooperative)

    def on_revoke(c, parts):
        tracker.revoked([(p.topic, p.partition) for p in parts])

    consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke, on_lost=on_revoke)
    try:
        while not stop.is_set():
            msgs = consumer.consume(num_messages=200, timeout=0.2)
            offsets = {}
            for m in msgs:
                if m.error():
                    if m.error().fatal():
                        emit(e="error", msg=str(m.error()))
                        return
                    continue
                emit(e="rec", p=m.partition(), o=m.offset(), v=_value(m.value()))
                offsets[m.partition()] = m.offset() + 1
            if offsets and args.commit in ("sync", "async"):
                try:
                    consumer.commit(asynchronous=args.commit == "async")
                    if args.commit == "sync":
                        emit(e="committed", offsets={str(p): o for p, o in offsets.items()})
                except KafkaException as exc:
                    err = exc.args[0]
                    if isinstance(err, KafkaError) and (
                        err.fatal() or "fenced" in str(err).lower()
                    ):
                        emit(e="error", msg=str(err))
                        return
                    emit(e="commit_failed", msg=str(err))
    except KafkaException as exc:
        emit(e="error", msg=str(exc))
        return
    if fatal:
        emit(e="error", msg=fatal[0])
        return
    consumer.close()
    emit(e="closed")


# -- aiokafka ----------------------------------------------------------------------------------


async def _run_aiokafka(args: argparse.Namespace) -> None:
    from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
    from aiokafka.coordinator.assignors.range import RangePartitionAssignor
    from aiokafka.coordinator.assignors.roundrobin import RoundRobinPartitionAssignor
    from aiokafka.errors import KafkaError

    assignor = {"range": RangePartitionAssignor, "roundrobin": RoundRobinPartitionAssignor}[
        args.assignor
    ]
    tracker = Tracker()
    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    loop.add_signal_handler(signal.SIGTERM, done.set)

    class Listener(ConsumerRebalanceListener):
        def on_partitions_revoked(self, revoked):
            tracker.revoked([(tp.topic, tp.partition) for tp in revoked])

        def on_partitions_assigned(self, assigned):
            tracker.assigned([(tp.topic, tp.partition) for tp in assigned], True)

    consumer = AIOKafkaConsumer(
        bootstrap_servers=args.bootstrap,
        group_id=args.group,
        client_id=args.client_id,
        auto_offset_reset="earliest",
        enable_auto_commit=args.commit == "auto",
        auto_commit_interval_ms=200,
        session_timeout_ms=args.session_ms,
        heartbeat_interval_ms=heartbeat_ms(args.session_ms),
        max_poll_interval_ms=args.session_ms * 5,
        partition_assignment_strategy=(assignor,),
        group_instance_id=args.instance_id,
    )
    consumer.subscribe([args.topic], listener=Listener())
    await consumer.start()
    try:
        while not done.is_set():
            batch = await consumer.getmany(timeout_ms=200)
            offsets = {}
            for tp, records in batch.items():
                for r in records:
                    emit(e="rec", p=tp.partition, o=r.offset, v=_value(r.value))
                    offsets[tp.partition] = r.offset + 1
            if offsets and args.commit in ("sync", "async"):
                try:
                    await consumer.commit()
                    emit(e="committed", offsets={str(p): o for p, o in offsets.items()})
                except KafkaError as exc:
                    emit(e="commit_failed", msg=repr(exc))
    except KafkaError as exc:
        emit(e="error", msg=repr(exc))
        return
    await consumer.stop()
    emit(e="closed")


def run_aiokafka(args: argparse.Namespace) -> None:
    asyncio.run(_run_aiokafka(args))


RUNNERS = {
    "kafka-python": run_kafka_python,
    "confluent-kafka": run_confluent,
    "aiokafka": run_aiokafka,
}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--client", choices=sorted(RUNNERS), required=True)
    parser.add_argument("--bootstrap", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--group", required=True)
    parser.add_argument("--assignor", default="range")
    parser.add_argument("--instance-id", default=None)
    parser.add_argument("--client-id", default="group-member")
    parser.add_argument("--session-ms", type=int, default=6000)
    parser.add_argument("--commit", default="sync", choices=["sync", "async", "auto", "none"])
    parser.add_argument("--group-protocol", default="classic", choices=["classic", "consumer"])
    args = parser.parse_args(argv)
    level = os.environ.get("GROUP_MEMBER_LOG_LEVEL", "WARNING")
    logging.basicConfig(
        level=level, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    if args.client != "aiokafka":
        signal.signal(signal.SIGTERM, lambda *_: stop.set())
    try:
        RUNNERS[args.client](args)
    except Exception:
        emit(e="error", msg=traceback.format_exc())
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
