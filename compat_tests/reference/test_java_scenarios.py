"""The Java client (kafka-clients) in the differential suite: the same programs against odradek
and Apache Kafka 4.4, their printed observations compared after the suite's normalisation.

- ProduceConsume (compat_tests/java/): per codec and acks, a 3-partition topic written by the
  Java producer and read back from the beginning, from an offset, from a timestamp and from the
  end, with Admin.listOffsets' special offsets; the lines carry offsets, timestamps and their
  type, keys, values and headers.
- GroupOffsets: a classic group's commits with metadata, read back through the consumer and
  Admin, a second member resuming from them, and the empty group's state.

Every line is deterministic (explicit partitions and timestamps), so the two outputs are
compared as sorted line lists (the programs iterate over unordered maps in places).
"""

from __future__ import annotations

import time
import uuid

from compat_tests.harness import BrokerProcess
from compat_tests.java_harness import JavaPrograms
from compat_tests.reference.diff import Checker
from compat_tests.reference.kafka_ref import KafkaReference

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CASES = [f"{codec}:all" for codec in CODECS] + ["none:1", "gzip:1", "lz4:0"]
JAVA_TIMEOUT_S = 300.0


def _by_case(stdout: str) -> dict[str, list[str]]:
    """ProduceConsume's lines grouped by case tag, each list sorted."""
    out: dict[str, list[str]] = {}
    for line in stdout.splitlines():
        kind, _, rest = line.partition(" ")
        tag = rest.split(" ", 1)[0]
        if kind in ("SENT", "REC", "SEEK", "NEW", "LIST", "OFT", "END", "DONE", "FAIL"):
            out.setdefault(tag, []).append(line)
    return {tag: sorted(lines) for tag, lines in out.items()}


def test_java_produce_and_fetch_per_codec_and_acks(
    java: JavaPrograms, odradek_broker: BrokerProcess, kafka44: KafkaReference
) -> None:
    base_ts = int(time.time() * 1000) - 3_600_000
    seen = {}
    for side, bootstrap in (("odradek", odradek_broker.bootstrap), ("kafka", kafka44.bootstrap)):
        prefix = f"ref_java_{uuid.uuid4().hex[:8]}"
        result = java.run(
            "ProduceConsume", bootstrap, prefix, str(base_ts), "30", *CASES, timeout=JAVA_TIMEOUT_S
        )
        assert result.returncode == 0, f"{side}: {result.stdout[-2000:]}\n{result.stderr[-4000:]}"
        seen[side] = _by_case(result.stdout)
    for case in CASES:
        tag = case.replace(":", "-")
        assert f"DONE {tag}" in seen["kafka"].get(tag, []), seen["kafka"].get(tag)
        Checker("4.4").check(
            f"java produce/fetch codec={case.split(':')[0]} acks={case.split(':')[1]}",
            seen["odradek"].get(tag),
            seen["kafka"][tag],
        )


def test_java_group_commit_and_fetch(
    java: JavaPrograms, odradek_broker: BrokerProcess, kafka44: KafkaReference
) -> None:
    seen = {}
    for side, bootstrap in (("odradek", odradek_broker.bootstrap), ("kafka", kafka44.bootstrap)):
        topic, group = (f"ref_{label}_{uuid.uuid4().hex[:8]}" for label in ("jgo", "jgroup"))
        result = java.run("GroupOffsets", bootstrap, topic, group, timeout=JAVA_TIMEOUT_S)
        assert result.returncode == 0, f"{side}: {result.stdout[-2000:]}\n{result.stderr[-4000:]}"
        seen[side] = result.stdout.splitlines()
    assert seen["kafka"][-1] == "DONE", seen["kafka"]
    Checker("4.4").check("java group commit/fetch", seen["odradek"], seen["kafka"])
