"""Record shapes shared by the per-client compat tests: what gets produced and how it is
compared per partition."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

PARTITIONS = 3
COUNT = 60  # records per produce, spread over the partitions: several per batch


@dataclass(frozen=True, slots=True)
class Rec:
    partition: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]
    timestamp: int


def make_records(
    tag: str,
    count: int = COUNT,
    partitions: int = PARTITIONS,
    base_ts: int | None = None,
    step_ms: int = 1,
) -> list[Rec]:
    """Records with every shape a user sends: null key, null value, empty value, headers."""
    base = int(time.time() * 1000) - 60_000 if base_ts is None else base_ts
    out = []
    for i in range(count):
        key = None if i == 0 else f"key-{i}".encode()
        value: bytes | None = f"{tag}-value-{i}-".encode() * (1 + i % 7)
        if i == 1:
            value = None
        elif i == 2:
            value = b""
        headers = (("idx", str(i).encode()), ("tag", tag.encode())) if i % 5 else ()
        out.append(Rec(i % partitions, key, value, headers, base + i * step_ms))
    return out


def by_partition(records: Iterable[Rec]) -> dict[int, list[Rec]]:
    out: dict[int, list[Rec]] = defaultdict(list)
    for r in records:
        out[r.partition].append(r)
    return dict(out)
