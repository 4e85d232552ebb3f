"""The Java clients (kafka-clients 3.9.1 and 4.4.0: the `java` fixture is parametrised)
against a real `odradek serve` process.

Two small programs in compat_tests/java/, compiled and run through the `java` fixture:

- AdminCheck: Admin createTopics / describeTopics / describeCluster, a duplicate create, and a
  producer that auto-creates a topic.
- ProduceConsume: per "codec:acks" case, a 3-partition topic written by the Java producer
  (acks=all is its idempotent default) and read back by a consumer with no group, from the
  beginning, from an offset, from a timestamp and from the end; Admin.listOffsets for
  earliest / latest / max timestamp / a timestamp / past the last record.

The programs print what they saw; this file decides whether it is right, so a failure shows
which record or offset differs. One JVM runs every case (JVM start-up dominates otherwise).
"""

from __future__ import annotations

import time
import uuid
from collections import defaultdict
from dataclasses import dataclass, field

import pytest

from compat_tests.harness import BrokerProcess
from compat_tests.java_harness import JavaPrograms, JavaResult, kafka_lib_classpath
from compat_tests.records import record_shape

pytestmark = pytest.mark.compat

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CASES = [(codec, "all") for codec in CODECS] + [("gzip", "1"), ("zstd", "0")]
PARTITIONS = 3
COUNT = 60
JAVA_TIMEOUT_S = 240.0


def hexed(data: bytes | None) -> str:
    """The Java programs' byte encoding: hex, "-" for null, "=" for empty."""
    if data is None:
        return "-"
    return data.hex() if data else "="


@dataclass(frozen=True, slots=True)
class Line:
    """One REC / SEEK / NEW line: a record as the Java consumer saw it."""

    partition: int
    offset: int
    timestamp: int
    ts_type: str
    key: str
    value: str
    headers: str


def expected_record(tag: str, base_ts: int, i: int) -> tuple[int, int, str, str, str]:
    """(partition, timestamp, key, value, headers) of record i, as ProduceConsume.record."""
    key, value, headers = record_shape(tag, i)
    shown = ",".join(f"{name}={hexed(data)}" for name, data in headers) or "-"
    return i % PARTITIONS, base_ts + 10 * i, hexed(key), hexed(value), shown


@dataclass
class CaseOutput:
    sent: list[tuple[int, int]] = field(default_factory=list)
    records: dict[str, list[Line]] = field(default_factory=lambda: defaultdict(list))
    listed: dict[str, dict[int, tuple[int, int]]] = field(default_factory=lambda: defaultdict(dict))
    by_time: dict[int, tuple[str, str]] = field(default_factory=dict)
    end: dict[int, int] = field(default_factory=dict)
    done: bool = False
    failure: str | None = None


def parse(stdout: str) -> dict[str, CaseOutput]:
    cases: dict[str, CaseOutput] = defaultdict(CaseOutput)
    for raw in stdout.splitlines():
        kind, _, rest = raw.partition(" ")
        parts = rest.split()
        if kind in ("REC", "SEEK", "NEW"):
            tag, p, off, ts, tst, key, value, headers = parts
            cases[tag].records[kind].append(
                Line(int(p), int(off), int(ts), tst, key, value, headers)
            )
        elif kind == "SENT":
            cases[parts[0]].sent.append((int(parts[1]), int(parts[2])))
        elif kind == "LIST":
            tag, spec, p, off, ts = parts
            cases[tag].listed[spec][int(p)] = (int(off), int(ts))
        elif kind == "OFT":
            cases[parts[0]].by_time[int(parts[1])] = (parts[2], parts[3])
        elif kind == "END":
            cases[parts[0]].end[int(parts[1])] = int(parts[2])
        elif kind == "DONE":
            cases[parts[0]].done = True
        elif kind == "FAIL":
            cases[parts[0]].failure = " ".join(parts[1:])
    return cases


@dataclass
class JavaRun:
    result: JavaResult
    base_ts: int
    cases: dict[str, CaseOutput]

    def explain(self) -> str:
        return (
            f"java exited {self.result.returncode}\n--- stdout (tail) ---\n"
            f"{self.result.stdout[-4000:]}\n--- stderr (tail) ---\n"
            f"{self.result.stderr[-8000:]}"
        )


@pytest.fixture(scope="module", params=["3.9.1", "4.4.0"])
def java(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> JavaPrograms:
    """The programs compiled against kafka-clients 3.9.1 (the wheel) or 4.4.0 (Maven)."""
    if request.param == "3.9.1":
        return JavaPrograms(tmp_path_factory.mktemp("java-3.9.1"))
    return JavaPrograms(tmp_path_factory.mktemp("java-4.4.0"), kafka_lib_classpath("4.4.0"))


@pytest.fixture(scope="module")
def produce_consume(java: JavaPrograms, broker: BrokerProcess) -> JavaRun:
    base_ts = int(time.time() * 1000) - 3_600_000
    prefix = f"java-{uuid.uuid4().hex[:8]}"
    result = java.run(
        "ProduceConsume",
        broker.bootstrap,
        prefix,
        str(base_ts),
        str(COUNT),
        *(f"{codec}:{acks}" for codec, acks in CASES),
        timeout=JAVA_TIMEOUT_S,
    )
    return JavaRun(result, base_ts, parse(result.stdout))


@pytest.mark.parametrize(("codec", "acks"), CASES, ids=[f"{c}-acks={a}" for c, a in CASES])
def test_java_producer_and_consumer(produce_consume: JavaRun, codec: str, acks: str) -> None:
    tag = f"{codec}-{acks}"
    out = produce_consume.cases.get(tag)
    assert out is not None and out.failure is None and out.done, produce_consume.explain()
    base = produce_consume.base_ts
    want = [expected_record(tag, base, i) for i in range(COUNT)]
    per_part: dict[int, list[tuple[int, int, str, str, str]]] = defaultdict(list)
    for rec in want:
        per_part[rec[0]].append(rec)
    counts = {p: len(rs) for p, rs in per_part.items()}

    # acknowledgements: consecutive offsets per partition in send order (-1 with acks=0)
    assert [p for p, _o in out.sent] == [r[0] for r in want]
    if acks == "0":
        assert all(o == -1 for _p, o in out.sent)
    else:
        next_offset: dict[int, int] = defaultdict(int)
        for p, o in out.sent:
            assert o == next_offset[p], f"partition {p}: acked offset {o}"
            next_offset[p] += 1

    def as_lines(p: int, first: int) -> list[Line]:
        return [
            Line(p, first + j, ts, "CreateTime", k, v, h)
            for j, (_p, ts, k, v, h) in enumerate(per_part[p][first:])
        ]

    # everything from the beginning, in order per partition
    got: dict[int, list[Line]] = defaultdict(list)
    for line in out.records["REC"]:
        got[line.partition].append(line)
    for p in range(PARTITIONS):
        assert got[p] == as_lines(p, 0), f"partition {p} read from the beginning differs"
    # assign + seek(7) on partition 1
    assert out.records["SEEK"] == as_lines(1, 7)

    # ListOffsets through the Admin client
    listed = out.listed
    assert listed["earliest"] == {p: (0, -1) for p in range(PARTITIONS)}
    assert listed["latest"] == {p: (counts[p], -1) for p in range(PARTITIONS)}
    # record i has timestamp base + 10 i at offset i // 3: ts305 finds records 33, 31, 32
    assert listed["ts305"] == {0: (11, base + 330), 1: (10, base + 310), 2: (10, base + 320)}
    assert listed["past"] == {p: (-1, -1) for p in range(PARTITIONS)}
    assert listed["maxts"] == {p: (counts[p] - 1, per_part[p][-1][1]) for p in range(PARTITIONS)}

    # consumer.offsetsForTimes: partition 2 asked past its last record
    assert out.by_time == {
        0: ("11", str(base + 330)),
        1: ("10", str(base + 310)),
        2: ("null", "null"),
    }

    # seekToEnd: the position is the log end, and only the records produced after arrive
    assert out.end == counts
    new = sorted(out.records["NEW"], key=lambda line: line.partition)
    assert new == [
        Line(
            p,
            counts[p],
            base + 100_000 + p,
            "CreateTime",
            hexed(f"new-{p}".encode()),
            hexed(f"new-value-{p}".encode()),
            "-",
        )
        for p in range(PARTITIONS)
    ]


def test_java_admin_client(java: JavaPrograms, broker: BrokerProcess, topic_name: str) -> None:
    auto_topic = f"{topic_name}-auto"
    result = java.run(
        "AdminCheck", broker.bootstrap, topic_name, auto_topic, timeout=JAVA_TIMEOUT_S
    )
    explain = f"rc={result.returncode}\n{result.stdout}\n{result.stderr[-8000:]}"
    assert result.returncode == 0, explain
    lines = result.stdout.splitlines()
    assert f"TOPIC {topic_name} 3" in lines, explain
    for p in range(3):
        assert f"PARTITION {topic_name} {p} 0 0 0" in lines, explain
    (cluster,) = [ln.split() for ln in lines if ln.startswith("CLUSTER ")]
    assert len(cluster) == 4 and cluster[1] and cluster[2:] == ["0", "0"], explain
    assert "EXISTS TopicExistsException" in lines, explain
    assert f"AUTO {auto_topic} 1 0" in lines, explain  # num.partitions default: 1
