"""Record shapes shared by the per-client compat tests: what gets produced and how it is
compared per partition."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

PARTITIONS = 3
COUNT = 60  # records per produce, spread over the partitions: several per batch

Headers = tuple[tuple[str, bytes], ...]


@dataclass(frozen=True, slots=True)
class Rec:
    partition: int
    key: bytes | None
    value: bytes | None
    headers: Headers
    timestamp: int


@dataclass(slots=True)
class Written:
    """A topic the reading tests share: its records, written once, `step_ms` apart from
    `base_ts`."""

    topic: str
    records: list[Rec]
    base_ts: int


def record_shape(tag: str, i: int) -> tuple[bytes | None, bytes | None, Headers]:
    """Key, value and headers of record `i`: every shape a user sends (null key, null value,
    empty value, with and without headers). The Java programs build the same (ProduceConsume)."""
    key = None if i == 0 else f"key-{i}".encode()
    value: bytes | None = f"{tag}-value-{i}-".encode() * (1 + i % 7)
    if i == 1:
        value = None
    elif i == 2:
        value = b""
    headers: Headers = (("idx", str(i).encode()), ("tag", tag.encode())) if i % 5 else ()
    return key, value, headers


def make_records(
    tag: str,
    count: int = COUNT,
    partitions: int = PARTITIONS,
    base_ts: int | None = None,
    step_ms: int = 1,
) -> list[Rec]:
    """`count` records shaped by `record_shape`, round-robin over the partitions."""
    base = int(time.time() * 1000) - 60_000 if base_ts is None else base_ts
    return [Rec(i % partitions, *record_shape(tag, i), base + i * step_ms) for i in range(count)]


def by_partition(records: Iterable[Rec]) -> dict[int, list[Rec]]:
    out: dict[int, list[Rec]] = defaultdict(list)
    for r in records:
        out[r.partition].append(r)
    return dict(out)


def assert_consumed(
    got: Iterable[tuple[int, Rec]], expected: list[Rec], start: dict[int, int] | None = None
) -> None:
    """Per partition: exactly the expected records, in order, at consecutive offsets from
    `start` (0 by default). `got` is (offset, record as the client saw it) per message, in the
    order consumed; each client's test file turns its message type into that."""
    got_by_part: dict[int, list[tuple[int, Rec]]] = defaultdict(list)
    for offset, rec in got:
        got_by_part[rec.partition].append((offset, rec))
    want = by_partition(expected)
    assert sorted(got_by_part) == sorted(want), "records came back on other partitions"
    for part, msgs in got_by_part.items():
        first = (start or {}).get(part, 0)
        assert [offset for offset, _ in msgs] == list(range(first, first + len(msgs))), part
        assert [rec for _, rec in msgs] == want[part], f"partition {part} differs"
