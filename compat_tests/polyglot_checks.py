"""What the Go and KafkaJS programs (polyglot_harness.py) must have seen, shared by the tests
against odradek and against the reference Kafka.

Every program writes record i the same way: partition i % partitions, key "key-i" (null when
i % 7 == 3), value "value-i-<tag>" (empty when i % 11 == 5), headers idx=<i>, dup=a, dup=""
(a repeated header and an empty value), timestamp base_ts + 10 * i. Programs report bytes as
hex and records as {"p", "o", "ts", "key", "value", "headers"}.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

from odradek.testing.security import Security

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
GROUP_COUNT, GROUP_PARTITIONS = 40, 4  # the two-member group scenarios


def now_ms() -> int:
    return int(time.time() * 1000)


# -- the scenarios' specs, the same for every program -----------------------------------------


def produce_spec(
    bootstrap: str,
    prefix: str,
    cases: list[tuple[str, str]],
    count: int,
    partitions: int,
    replicas: int = 1,
    **extra: object,
) -> dict[str, Any]:
    """A topic `<prefix>-<codec>-<acks>` per case, `count` records timestamped an hour ago."""
    return {
        "replicas": replicas,
        "brokers": [bootstrap],
        "cases": [{"codec": c, "acks": a, "topic": f"{prefix}-{c}-{a}"} for c, a in cases],
        "count": count,
        "partitions": partitions,
        "base_ts": now_ms() - 3_600_000,
        **extra,
    }


def group_spec(bootstrap: str, name: str, replicas: int = 1, **extra: object) -> dict[str, Any]:
    """Two members of group `<name>-g` on topic `name` (GROUP_PARTITIONS, GROUP_COUNT)."""
    return {
        "replicas": replicas,
        "brokers": [bootstrap],
        "topic": name,
        "group": f"{name}-g",
        "count": GROUP_COUNT,
        "partitions": GROUP_PARTITIONS,
        "base_ts": now_ms(),
        **extra,
    }


def txn_spec(
    bootstrap: str, name: str, count: int, partitions: int, replicas: int = 1, **extra: object
) -> dict[str, Any]:
    """Transactions of `<name>-txn` into `<name>-out`, offsets committed for `<name>-g`."""
    return {
        "replicas": replicas,
        "brokers": [bootstrap],
        "output": f"{name}-out",
        "group": f"{name}-g",
        "txn_id": f"{name}-txn",
        "count": count,
        "partitions": partitions,
        "base_ts": now_ms(),
        **extra,
    }


def check_group_split(
    out: dict[str, Any], count: int = GROUP_COUNT, partitions: int = GROUP_PARTITIONS
) -> None:
    """Every record read, the partitions split between the two members, and the group's
    committed offsets at each partition's end."""
    assert out["distinct"] == count
    owned = sorted(out["a_owns"] + out["b_owns"])
    assert owned == list(range(partitions)), owned
    per_partition = {str(p): len(range(p, count, partitions)) for p in range(partitions)}
    assert out["committed"] == per_partition


def check_aborted_then_committed(out: dict[str, Any], count: int, partitions: int) -> None:
    """An aborted record per partition seen only read_uncommitted; the committed records in
    order after the markers; the offset (7) committed with the transaction."""
    check_records(out["committed"], "txn", count, partitions, out["base_ts"], from_zero=False)
    aborted = sorted(
        bytes.fromhex(r["value"])
        for r in out["uncommitted"]
        if bytes.fromhex(r["value"]).startswith(b"aborted-")
    )
    assert aborted == [f"aborted-{p}".encode() for p in range(partitions)]
    assert out["group_offsets"]["0"] == 7


def expected(tag: str, i: int, partitions: int, base_ts: int) -> dict[str, Any]:
    key = None if i % 7 == 3 else f"key-{i}".encode().hex()
    value = b"" if i % 11 == 5 else f"value-{i}-{tag}".encode()
    headers = [["idx", str(i).encode().hex()], ["dup", b"a".hex()], ["dup", ""]]
    return {
        "p": i % partitions,
        "ts": base_ts + 10 * i,
        "key": key,
        "value": value.hex(),
        "headers": headers,
    }


def check_records(
    records: list[dict[str, Any]],
    tag: str,
    count: int,
    partitions: int,
    base_ts: int,
    *,
    from_zero: bool = True,
) -> None:
    """Every record back once, in order per partition (at offsets 0.. with `from_zero`;
    ascending otherwise, as after transaction markers), with its key, value, headers and
    timestamp."""
    by_partition: dict[int, list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        by_partition[rec["p"]].append(rec)
    assert sum(len(v) for v in by_partition.values()) == count, (
        f"{len(records)} records back, {count} written"
    )
    for p in range(partitions):
        want = [expected(tag, i, partitions, base_ts) for i in range(p, count, partitions)]
        got = by_partition.get(p, [])
        offsets = [r["o"] for r in got]
        if from_zero:
            assert offsets == list(range(len(want))), f"partition {p} offsets"
        else:
            assert offsets == sorted(set(offsets)), f"partition {p} offsets out of order"
        for offset, (g, w) in enumerate(zip(got, want, strict=True)):
            seen = {k: g[k] for k in w}
            assert seen == w, f"partition {p} offset {offset}"


def first_offset_at(i: int, p: int, count: int, partitions: int) -> int:
    """The offset in partition p of the first record i' >= i (the end offset if none)."""
    in_partition = len(range(p, count, partitions))
    k = max(0, -(-(i - p) // partitions))
    return min(k, in_partition)


def sasl_spec(bootstrap: str, sec: Security, topic: str, **extra: object) -> dict[str, object]:
    """The spec of a scenario run as user alice over SASL_SSL (the broker's CA trusted)."""
    assert sec.tls is not None
    spec: dict[str, object] = {
        "brokers": [bootstrap],
        "topic": topic,
        "mechanism": sec.mechanism,
        "user": "alice",
        "password": sec.password("alice"),
        "ca_file": sec.tls.ca,
    }
    spec.update(extra)
    return spec
