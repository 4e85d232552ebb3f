"""The transaction row: how long a one-record transaction takes to commit, with confluent-kafka's
transactional producer, on a three-broker cluster with replication factor 3 (or any broker).

One producer (`transactional.id`, acks=all, idempotent) runs `init_transactions()` once, then N
times `begin_transaction()`, `produce()` of one record, `commit_transaction()`. The commit time
runs from the `commit_transaction()` call to its return: the producer flushes the record (acks=all
waits for the ISR), sends EndTxn, and the coordinator writes PrepareCommit to
`__transaction_state`, the COMMIT markers to the partition leaders (each replicated to the ISR)
and CompleteCommit, before librdkafka considers the commit done. The whole transaction (begin to
commit returned) is timed too. A few warm-up transactions are left out of the figures.

`python -m bench.txn` spawns `odradek cluster --brokers 3` (one process) and prints the table;
`--bootstrap HOST:PORT` measures another cluster (a Kafka one for comparison).
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from dataclasses import dataclass

from confluent_kafka import Producer

from bench.topics import Topics

WARMUP = 5
TXN_TIMEOUT_S = 30.0


class TxnBenchError(RuntimeError):
    pass


@dataclass(frozen=True, slots=True)
class TxnResult:
    brokers: int
    replication_factor: int
    transactions: int
    commit_ms: list[float]  # sorted
    txn_ms: list[float]  # sorted

    @staticmethod
    def pct(values: list[float], q: float) -> float:
        if not values:
            return float("nan")
        return values[min(len(values) - 1, int(q * len(values)))]


def run(
    bootstrap: str, transactions: int, replication_factor: int, brokers: int, linger_ms: int = 5
) -> TxnResult:
    topics = Topics(bootstrap)
    topic = f"bench-txn-{uuid.uuid4().hex[:8]}"
    topics.create(topic, 1, replication_factor)
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "client.id": "odradek-bench-txn",
            "transactional.id": f"{topic}-producer",
            "acks": "all",
            "enable.idempotence": True,
            "linger.ms": linger_ms,
            "socket.nagle.disable": True,
        }
    )
    commits: list[float] = []
    whole: list[float] = []
    try:
        producer.init_transactions(TXN_TIMEOUT_S)
        for n in range(transactions + WARMUP):
            t0 = time.perf_counter()
            producer.begin_transaction()
            producer.produce(topic, value=b"x" * 100, key=str(n).encode())
            t1 = time.perf_counter()
            producer.commit_transaction(TXN_TIMEOUT_S)
            t2 = time.perf_counter()
            if n >= WARMUP:
                commits.append((t2 - t1) * 1000)
                whole.append((t2 - t0) * 1000)
    except Exception as exc:  # confluent-kafka's KafkaException and KafkaError
        raise TxnBenchError(f"transaction failed: {exc}") from exc
    finally:
        producer.flush(5)
        topics.delete_created()
    return TxnResult(brokers, replication_factor, transactions, sorted(commits), sorted(whole))


HEADER = (
    "| brokers | RF | transactions | commit p50 ms | commit p99 ms | commit max ms "
    "| whole txn p50 ms |\n|---|---|---|---|---|---|---|"
)


def row(r: TxnResult) -> str:
    p = TxnResult.pct
    return (
        f"| {r.brokers} | {r.replication_factor} | {r.transactions} "
        f"| {p(r.commit_ms, 0.5):.2f} | {p(r.commit_ms, 0.99):.2f} | {r.commit_ms[-1]:.2f} "
        f"| {p(r.txn_ms, 0.5):.2f} |"
    )


def note(r: TxnResult) -> str:
    p = TxnResult.pct
    return (
        f"one-record transactions (confluent-kafka, RF {r.replication_factor}, "
        f"{r.brokers} brokers): commit p50 {p(r.commit_ms, 0.5):.2f} ms, "
        f"p99 {p(r.commit_ms, 0.99):.2f} ms over {r.transactions}"
    )


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.txn", description=__doc__)
    p.add_argument("--bootstrap", help="an existing cluster (default: spawn odradek cluster)")
    p.add_argument("--brokers", type=int, default=3, help="brokers to spawn (default 3)")
    p.add_argument("--replication-factor", type=int, default=None, help="default: --brokers")
    p.add_argument("--transactions", type=int, default=200)
    p.add_argument("--linger-ms", type=int, default=5, help="producer linger.ms (librdkafka's 5)")
    p.add_argument(
        "--broker-override",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="config of the spawned brokers",
    )
    a = p.parse_args(argv)
    rf = a.replication_factor or (a.brokers if not a.bootstrap else 1)
    try:
        if a.bootstrap:
            results = run(a.bootstrap, a.transactions, rf, a.brokers, a.linger_ms)
        else:
            from bench.broker_proc import OdradekProcess

            overrides = dict(kv.split("=", 1) for kv in a.broker_override)
            with OdradekProcess(overrides=overrides, brokers=a.brokers) as broker:
                broker.start()
                results = run(broker.bootstrap, a.transactions, rf, a.brokers, a.linger_ms)
    except TxnBenchError as exc:
        print(f"bench.txn: {exc}", file=sys.stderr)
        return 1
    print(HEADER)
    print(row(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
