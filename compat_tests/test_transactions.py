"""Exactly-once with real clients (KIP-98, KIP-447): transactional producers, read_committed
consumers, offsets committed inside transactions, fencing and timeouts, for confluent-kafka,
kafka-python, aiokafka and Java, each through the same command language (txn_drivers.py).

Every scenario ends its topics with a non-transactional "__end__" record per partition: a
consumer that has seen it has seen everything before it, so missing and extra records both show.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from confluent_kafka import Producer

from compat_tests.harness import create_topics, wait_for
from compat_tests.txn_drivers import CLIENTS, END_KEY, TxnDriverBase, make_driver

# Short timers so timeouts show within a test; everything else is Kafka's default.
TXN_BROKER = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "200",
    "num.partitions": "3",
}
FENCED = re.compile(r"(?i)fenc|producer.?epoch|PRODUCER_EPOCH")

pytestmark = pytest.mark.parametrize("broker", [TXN_BROKER], indirect=True)


@pytest.fixture(params=CLIENTS)
def client(request: pytest.FixtureRequest, broker) -> Iterator[TxnDriverBase]:
    java = request.getfixturevalue("java") if request.param == "java" else None
    drv = make_driver(request.param, broker.bootstrap, java)
    yield drv
    drv.close()


def end_marks(bootstrap: str, topic: str, partitions: int = 3) -> None:
    """The last record of every partition, outside any transaction."""
    p = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": False})
    for i in range(partitions):
        p.produce(topic, key=END_KEY.encode(), value=b"-", partition=i)
    assert p.flush(30) == 0


def by_partition(records: list[tuple[int, int, str, str]]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for p, _offset, key, _value in records:
        out.setdefault(p, []).append(key)
    return out


def offsets_in_order(records: list[tuple[int, int, str, str]]) -> bool:
    last: dict[int, int] = {}
    for p, offset, _k, _v in records:
        if offset <= last.get(p, -1):
            return False
        last[p] = offset
    return True


# -- commit, abort, read_committed vs read_uncommitted -----------------------------------------


def test_commit_and_abort(client: TxnDriverBase, broker, topic_name: str) -> None:
    t1, t2 = topic_name, topic_name + "-b"
    create_topics(broker.bootstrap, t1, t2)
    client(f"producer a {topic_name}-tx")
    client("a init")
    client("a begin")
    for i in range(9):
        client(f"a send {t1} {i % 3} c{i} v{i}")
    for i in range(4):
        client(f"a send {t2} {i % 2} d{i} v{i}")
    client("a commit")
    client("a begin")
    for i in range(6):
        client(f"a send {t1} {i % 3} x{i} v{i}")
    client("a flush")
    client("a abort")
    client("a begin")
    for i in range(3):
        client(f"a send {t1} {i % 3} e{i} v{i}")
    client("a commit")
    end_marks(broker.bootstrap, t1)
    end_marks(broker.bootstrap, t2)

    committed, _ = client.consume("read_committed", t1)
    assert offsets_in_order(committed)
    assert by_partition(committed) == {
        p: [f"c{i}" for i in range(p, 9, 3)] + [f"e{p}"] for p in range(3)
    }
    everything, _ = client.consume("read_uncommitted", t1)
    assert len(everything) == 9 + 6 + 3
    assert by_partition(everything) == {
        p: [f"c{i}" for i in range(p, 9, 3)] + [f"x{p}", f"x{p + 3}", f"e{p}"] for p in range(3)
    }
    other, _ = client.consume("read_committed", t2)
    assert by_partition(other) == {0: ["d0", "d2"], 1: ["d1", "d3"]}


def test_interleaved_commit_and_abort_on_shared_partitions(
    client: TxnDriverBase, broker, topic_name: str
) -> None:
    create_topics(broker.bootstrap, topic_name, partitions=2)
    for name in "ab":
        client(f"producer {name} {topic_name}-{name}")
        client(f"{name} init")
    committed_keys = set()
    for rnd in range(4):
        client("a begin")
        client("b begin")
        for i in range(4):
            for name in "ab":
                client(f"{name} send {topic_name} {i % 2} {name}{rnd}-{i} v")
        client("a flush")
        client("b flush")
        winner, loser = ("a", "b") if rnd % 2 == 0 else ("b", "a")
        client(f"{loser} abort")
        client(f"{winner} commit")
        committed_keys |= {f"{winner}{rnd}-{i}" for i in range(4)}
    end_marks(broker.bootstrap, topic_name, 2)

    everything, _ = client.consume("read_uncommitted", topic_name)
    committed, _ = client.consume("read_committed", topic_name)
    assert len(everything) == 4 * 2 * 4
    assert offsets_in_order(committed)
    # read_committed is read_uncommitted without the aborted records, in the same order
    assert sorted(committed) == sorted(r for r in everything if r[2] in committed_keys)
    assert len(committed) == 16


def test_read_committed_stops_at_the_last_stable_offset(
    client: TxnDriverBase, broker, topic_name: str
) -> None:
    create_topics(broker.bootstrap, topic_name, partitions=1)
    client(f"producer a {topic_name}-a")
    client(f"producer b {topic_name}-b")
    client("a init")
    client("b init")
    client("a begin")
    client(f"a send {topic_name} 0 c0 v")
    client("a commit")
    client("a begin")
    client(f"a send {topic_name} 0 open0 v")  # offset 2: stays open
    client("a flush")
    client("b begin")
    client(f"b send {topic_name} 0 late0 v")
    client("b commit")
    end_marks(broker.bootstrap, topic_name, 1)

    committed, positions = client.consume("read_committed", topic_name, timeout_ms=2500)
    assert [r[2] for r in committed] == ["c0"]
    assert positions[0] == 2  # the LSO: the open txn's start
    everything, _ = client.consume("read_uncommitted", topic_name)
    assert [r[2] for r in everything] == ["c0", "open0", "late0"]

    client("a commit")
    committed, _ = client.consume("read_committed", topic_name)
    assert [r[2] for r in committed] == ["c0", "open0", "late0"]


# -- fencing and timeouts ----------------------------------------------------------------------


def test_second_producer_fences_the_first(client: TxnDriverBase, broker, topic_name: str) -> None:
    create_topics(broker.bootstrap, topic_name, partitions=1)
    tid = f"{topic_name}-tx"
    client(f"producer zombie {tid}")
    client("zombie init")
    client("zombie begin")
    client(f"zombie send {topic_name} 0 z0 v")
    client("zombie flush")
    client(f"producer fresh {tid}")
    client("fresh init")  # aborts the zombie's transaction
    errors = []
    for line in (f"zombie send {topic_name} 0 z1 v", "zombie flush", "zombie commit"):
        r = client.run(line)
        if not r.ok:
            errors.append(r.error)
    assert errors and FENCED.search(" ".join(errors)), errors
    client("fresh begin")
    client(f"fresh send {topic_name} 0 f0 v")
    client("fresh commit")
    end_marks(broker.bootstrap, topic_name, 1)
    committed, _ = client.consume("read_committed", topic_name)
    assert [r[2] for r in committed] == ["f0"]


def test_broker_aborts_a_transaction_past_its_timeout(
    client: TxnDriverBase, broker, topic_name: str
) -> None:
    from kafka import KafkaConsumer, TopicPartition

    create_topics(broker.bootstrap, topic_name, partitions=1)
    tid = f"{topic_name}-tx"
    client(f"producer slow {tid} transaction.timeout.ms=2000")
    client("slow init")
    client("slow begin")
    client(f"slow send {topic_name} 0 s0 v")
    client("slow flush")
    tp = TopicPartition(topic_name, 0)
    probe = KafkaConsumer(bootstrap_servers=broker.bootstrap, isolation_level="read_committed")
    try:
        # the abort marker lands at offset 1 and the LSO moves past it
        wait_for(
            lambda: probe.end_offsets([tp])[tp] == 2,
            timeout=20,
            message="the broker did not abort the timed-out transaction",
        )
    finally:
        probe.close()
    error = client.run("slow commit")
    assert not error.ok and (FENCED.search(error.error) or "timed out" in error.error.lower()), (
        error
    )
    client(f"producer next {tid}")
    client("next init")
    client("next begin")
    client(f"next send {topic_name} 0 n0 v")
    client("next commit")
    end_marks(broker.bootstrap, topic_name, 1)
    committed, _ = client.consume("read_committed", topic_name)
    assert [r[2] for r in committed] == ["n0"]


# -- offsets inside transactions (send_offsets_to_transaction) ---------------------------------


def test_offsets_committed_only_with_the_transaction(
    client: TxnDriverBase, broker, topic_name: str
) -> None:
    src, out = topic_name, topic_name + "-out"
    create_topics(broker.bootstrap, src, out, partitions=1)
    group = f"{topic_name}-g"
    client(f"producer a {topic_name}-tx")
    client("a init")
    client("a begin")
    client(f"a send {out} 0 o0 v")
    client(f"a offsets {group} {src} 0 5")
    client("a commit")
    assert client(f"committed {group} {src} 0") == ["committed 5"]
    client("a begin")
    client(f"a send {out} 0 o1 v")
    client(f"a offsets {group} {src} 0 9")
    client("a abort")
    assert client(f"committed {group} {src} 0") == ["committed 5"]
    client("a begin")
    client(f"a offsets {group} {src} 0 12")  # offsets only, no records
    client("a commit")
    assert client(f"committed {group} {src} 0") == ["committed 12"]
    end_marks(broker.bootstrap, out, 1)
    committed, _ = client.consume("read_committed", out)
    assert [r[2] for r in committed] == ["o0"]


# -- admin: ListTransactions, DescribeTransactions, DescribeProducers --------------------------


def test_admin_lists_and_describes_transactions_and_producers(
    client: TxnDriverBase, broker, topic_name: str
) -> None:
    if not client.supports_admin:
        pytest.skip(f"{client.name} has no transaction admin API")
    create_topics(broker.bootstrap, topic_name, partitions=2)
    tid = f"{topic_name}-tx"
    client(f"producer a {tid} transaction.timeout.ms=45000")
    client("a init")
    client("a begin")
    client(f"a send {topic_name} 0 k v")
    client(f"a send {topic_name} 1 k v")
    client("a flush")
    listed = [line.split(" ") for line in client("admin list")]
    mine = [w for w in listed if w[1] == tid]
    assert len(mine) == 1 and mine[0][3] == "Ongoing"
    pid = int(mine[0][2])
    (desc,) = client(f"admin describe {tid}")
    state, d_pid, _epoch, timeout, tps = desc.split(" ")[1:]
    assert (state, int(d_pid), timeout) == ("Ongoing", pid, "45000")
    assert tps == f"{topic_name}:0,{topic_name}:1"
    producers = [line.split(" ") for line in client(f"admin producers {topic_name} 0")]
    assert [(int(w[1]), int(w[3])) for w in producers] == [(pid, 0)]
    client("a commit")
    (desc,) = client(f"admin describe {tid}")
    assert desc.split(" ")[1] == "CompleteCommit"
    producers = [line.split(" ") for line in client(f"admin producers {topic_name} 0")]
    assert [(int(w[1]), int(w[3])) for w in producers] == [(pid, -1)]
