"""`odradek dump-log` (kafka-dump-log.sh) in a subprocess on the data dir of a running broker:
a topic's segment, offset index, time index and aborted-transaction index, and the
`__consumer_offsets` / `__transaction_state` records real clients caused, decoded."""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.structs import OffsetAndMetadata

from odradek.coordinator.codec import partition_for
from odradek.testing import Broker
from tests.cli.cli_run import run_odradek

TOPIC, GROUP, TXN_ID = "dumped", "dump-group", "dump-txn"
SEGMENT = "00000000000000000000"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    """A broker whose data dir holds: 3 batches of keyed records with a header in `dumped-0`
    (an index entry for each), a committed transaction there, and a group's committed offset."""
    data = tmp_path_factory.mktemp("dump-log-data")
    with Broker(data_dir=str(data), config={"offsets.topic.num.partitions": "5"}) as b:
        admin = KafkaAdminClient(bootstrap_servers=b.bootstrap)
        try:
            admin.create_topics(
                {
                    TOPIC: {
                        "num_partitions": 1,
                        "replication_factor": 1,
                        "configs": {"index.interval.bytes": "1"},
                    }
                }
            )
            producer = KafkaProducer(bootstrap_servers=b.bootstrap, acks="all")
            for i in range(3):
                producer.send(
                    TOPIC, key=b"k%d" % i, value=b"hello-%d" % i, headers=[("h", b"x")]
                ).get(30)
            producer.close()
            txn = KafkaProducer(bootstrap_servers=b.bootstrap, transactional_id=TXN_ID)
            txn.init_transactions()
            txn.begin_transaction()
            txn.send(TOPIC, b"committed")
            txn.commit_transaction()
            txn.close()
            consumer = KafkaConsumer(
                bootstrap_servers=b.bootstrap, group_id=GROUP, enable_auto_commit=False
            )
            consumer.assign([TopicPartition(TOPIC, 0)])
            consumer.commit({TopicPartition(TOPIC, 0): OffsetAndMetadata(2, "meta", -1)})
            consumer.close()
        finally:
            admin.close()
        yield b


def dump(*args: str, status: int = 0) -> subprocess.CompletedProcess[str]:
    return run_odradek("dump-log", *args, status=status)


def fields(line: str) -> dict[str, str]:
    """`name: value` pairs of a dump line (values without spaces)."""
    return dict(re.findall(r"(\w+): (\S+)", line))


def segment(broker: Broker, topic: str, partition: int, suffix: str) -> str:
    return os.path.join(broker.data_dir, f"{topic}-{partition}", SEGMENT + suffix)


def test_segment_and_indexes(broker: Broker) -> None:
    log = segment(broker, TOPIC, 0, ".log")
    out = dump("--files", log).stdout.splitlines()
    assert out[:2] == [f"Dumping {log}", "Log starting offset: 0"]
    batches = [fields(line) for line in out[2:]]
    assert all(not line.startswith("|") for line in out)  # no records without --deep-iteration
    assert [(b["baseOffset"], b["lastOffset"], b["count"]) for b in batches] == [
        ("0", "0", "1"),
        ("1", "1", "1"),
        ("2", "2", "1"),
        ("3", "3", "1"),  # the transaction's record
        ("4", "4", "1"),  # its COMMIT marker
    ]
    assert [(b["isTransactional"], b["isControl"]) for b in batches[2:]] == [
        ("false", "false"),
        ("true", "false"),
        ("true", "true"),
    ]
    assert {b["isvalid"] for b in batches} == {"true"}
    assert {b["compresscodec"] for b in batches} == {"none"}
    positions = [int(b["position"]) for b in batches]
    sizes = [int(b["size"]) for b in batches]
    assert positions == [0] + [sum(sizes[:i]) for i in range(1, 5)]
    assert positions[-1] + sizes[-1] == os.path.getsize(log)

    deep = dump("--files", log, "--deep-iteration").stdout.splitlines()
    records = [fields(line) for line in deep if line.startswith("| ")]
    assert [(r["offset"], r["keySize"], r["valueSize"]) for r in records[:3]] == [
        ("0", "2", "7"),
        ("1", "2", "7"),
        ("2", "2", "7"),
    ]
    assert "headerKeys: [h]" in deep[3] and "payload" not in deep[3]
    assert deep[-1].endswith("endTxnMarker: COMMIT coordinatorEpoch: 0")

    data = dump("--files", log, "--print-data-log").stdout.splitlines()
    assert [line.split(" key: ", 1)[1] for line in data if " key: " in line] == [
        "k0 payload: hello-0",
        "k1 payload: hello-1",
        "k2 payload: hello-2",
    ]
    assert any(
        line.endswith("keySize: -1 valueSize: 9 sequence: 0 headerKeys: [] payload: committed")
        for line in data
    )

    # the active segment's index: its last entries reach the file within a second (the broker
    # writes pending index entries every second, log/index_file.py)
    index = segment(broker, TOPIC, 0, ".index")
    timeindex = segment(broker, TOPIC, 0, ".timeindex")
    want = [f"offset: {b['lastOffset']} position: {b['position']}" for b in batches]
    deadline = time.monotonic() + 10.0
    while True:
        out = dump("--files", f"{index},{timeindex}").stdout.splitlines()
        at = out.index(f"Dumping {timeindex}")
        if out[1:at] == want or time.monotonic() > deadline:
            break
        time.sleep(0.2)  # polling the file a live broker writes, bounded by the deadline
    assert out[0] == f"Dumping {index}"
    assert out[1:at] == want
    time_entries = [fields(line) for line in out[at + 1 :]]
    assert time_entries and time_entries[0]["offset"] == "0"
    stamps = {(b["CreateTime"], b["lastOffset"]) for b in batches}
    assert {(e["timestamp"], e["offset"]) for e in time_entries} <= stamps


def test_internal_topics_decoded(broker: Broker) -> None:
    offsets = segment(broker, "__consumer_offsets", partition_for(GROUP, 5), ".log")
    out = dump("--files", offsets, "--offsets-decoder").stdout.splitlines()
    commits = []
    for line in out:
        if " key: " in line:
            key, payload = line.split(" key: ", 1)[1].split(" payload: ")
            commits.append((json.loads(key), json.loads(payload)))
    (key, value), *_ = [c for c in commits if c[0]["type"] == "1"]
    assert key == {"type": "1", "data": {"group": GROUP, "topic": TOPIC, "partition": 0}}
    assert value["version"] == "3"
    assert {k: value["data"][k] for k in ("offset", "metadata")} == {
        "offset": 2,
        "metadata": "meta",
    }

    state = segment(broker, "__transaction_state", partition_for(TXN_ID, 50), ".log")
    out = dump("--files", state, "--transaction-log-decoder").stdout.splitlines()
    values = []
    for line in out:
        if " key: " in line:
            key_text, payload = line.split(" key: ", 1)[1].split(" payload: ")
            assert json.loads(key_text) == {"type": "0", "data": {"transactionalId": TXN_ID}}
            values.append(json.loads(payload)["data"])
    # Empty, Ongoing with the partition, PrepareCommit, CompleteCommit
    assert [v["transactionStatus"] for v in values] == [0, 1, 2, 4]
    assert values[1]["transactionPartitions"] == [{"topic": TOPIC, "partitionIds": [0]}]


def test_dump_log_errors(broker: Broker, tmp_path: Path) -> None:
    missing = str(tmp_path / "00000000000000000000.log")
    proc = dump("--files", missing, status=1)
    assert proc.stderr.strip() == f"odradek: {missing}: no such file"
    other = tmp_path / "notes.txt"
    other.write_text("x")
    assert dump("--files", str(other)).stdout.splitlines() == [
        f"Dumping {other}",
        f"Ignoring unknown file {other}",
    ]
    # a torn tail (a batch cut short) is reported, the batches before it are dumped
    torn = tmp_path / "00000000000000000042.log"
    whole = Path(segment(broker, TOPIC, 0, ".log")).read_bytes()
    torn.write_bytes(whole[:-10])
    out = dump("--files", str(torn)).stdout.splitlines()
    assert out[1] == "Log starting offset: 42"
    assert len([line for line in out if line.startswith("baseOffset")]) == 4
    assert out[-1].startswith("Found ") and out[-1].endswith(
        f"invalid bytes at the end of {torn.name}"
    )
