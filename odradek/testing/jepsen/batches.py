"""The record batches' headers of every key, read after the faults healed: which producer id,
epoch and sequence wrote each offset, and under which partition leader epoch (RecordBatch v2,
KIP-98 and KIP-101). Clients never show these; the checkers need them to tell a duplicate the
client made (the same value sent again under the producer's next epoch, KIP-360) from one the
broker made, and a high watermark a deposed leader answered from a lowered one.

Plain Kafka requests (Metadata, then Fetch read_uncommitted from each key's leader) over
`odradek.testing.raw`, so it reads Apache Kafka as it reads odradek.
"""

from __future__ import annotations

import bisect
import time
from dataclasses import dataclass

from odradek.testing.raw import Closed, RawClient, fetch_partition
from odradek.wire import protocol
from odradek.wire.batch import CorruptRecordError, iter_batches

_METADATA_VERSION = 9


@dataclass(frozen=True, slots=True)
class Batch:
    """One batch's header, as the log holds it."""

    base_offset: int
    last_offset: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    transactional: bool
    control: bool
    leader_epoch: int

    def as_list(self) -> list[int]:
        return [
            self.base_offset,
            self.last_offset,
            self.producer_id,
            self.producer_epoch,
            self.base_sequence,
            int(self.transactional),
            int(self.control),
            self.leader_epoch,
        ]

    @classmethod
    def from_list(cls, row: list[int]) -> Batch:
        base, last, pid, epoch, seq, txn, control, leader_epoch = row
        return cls(base, last, pid, epoch, seq, bool(txn), bool(control), leader_epoch)


def batch_at(batches: list[Batch], offset: int) -> Batch | None:
    """The batch holding `offset` (batches in offset order), or None."""
    i = bisect.bisect_left(batches, offset, key=lambda b: b.last_offset)
    return batches[i] if i < len(batches) and batches[i].base_offset <= offset else None


def _leaders(bootstrap: str, topic: str, timeout: float) -> dict[int, str]:
    """Each partition's leader, as host:port, from the first of the bootstrap servers
    (comma-separated) that answers; the last one's error when none does."""
    servers = [s.strip() for s in bootstrap.split(",") if s.strip()]
    error: Exception = OSError(f"no bootstrap server in {bootstrap!r}")
    for server in servers:
        try:
            return _leaders_from(server, topic, timeout / len(servers))
        except (OSError, Closed, TimeoutError) as exc:
            error = exc
    raise error


def _leaders_from(server: str, topic: str, timeout: float) -> dict[int, str]:
    with RawClient(server, timeout) as c:
        resp = c.request(
            protocol.MetadataRequest(
                topics=[protocol.MetadataRequest.MetadataRequestTopic(name=topic)],
                allow_auto_topic_creation=False,
                include_cluster_authorized_operations=False,
                include_topic_authorized_operations=False,
            ),
            _METADATA_VERSION,
        )
    hosts = {b.node_id: f"{b.host}:{b.port}" for b in resp.brokers}
    out: dict[int, str] = {}
    for t in resp.topics:
        for p in t.partitions:
            if p.error_code == 0 and p.leader_id in hosts:
                out[p.partition_index] = hosts[p.leader_id]
    return out


def read_batches(
    bootstrap: str, topic: str, keys: int, timeout: float = 20.0
) -> tuple[dict[int, list[Batch]], str]:
    """Every key's batches up to its high watermark, and '' or why some key could not be read
    in `timeout` seconds (its batches so far are kept)."""
    deadline = time.monotonic() + timeout
    out: dict[int, list[Batch]] = {k: [] for k in range(keys)}
    todo = set(range(keys))
    why = ""
    while todo and time.monotonic() < deadline:
        try:
            leaders = _leaders(bootstrap, topic, max(1.0, deadline - time.monotonic()))
        except (OSError, Closed, TimeoutError) as exc:
            why = f"metadata: {exc}"
            time.sleep(0.2)
            continue
        for key in sorted(todo):
            if key not in leaders:
                why = f"key {key}: no leader"
                continue
            try:
                if _read_key(leaders[key], topic, key, out[key], deadline):
                    todo.discard(key)
            except (OSError, Closed, TimeoutError) as exc:
                why = f"key {key}: {exc}"
        if todo:
            time.sleep(0.2)
    return out, (f"batches of keys {sorted(todo)} not read: {why}" if todo else "")


def _read_key(leader: str, topic: str, key: int, into: list[Batch], deadline: float) -> bool:
    """Read `key` from its leader to the high watermark into `into`; False on an error code."""
    with RawClient(leader, max(1.0, deadline - time.monotonic())) as c:
        offset = into[-1].last_offset + 1 if into else 0
        while time.monotonic() < deadline:
            error, hw, records = fetch_partition(c, topic, key, offset)
            if error:
                return False
            before = offset
            try:
                for _pos, h in iter_batches(records):
                    if h.last_offset < offset:
                        continue
                    into.append(
                        Batch(
                            h.base_offset,
                            h.last_offset,
                            h.producer_id,
                            h.producer_epoch,
                            h.base_sequence,
                            h.is_transactional,
                            h.is_control,
                            h.partition_leader_epoch,
                        )
                    )
                    offset = h.last_offset + 1
            except CorruptRecordError:
                pass  # the answer's last batch cut at partition_max_bytes: fetched again
            if offset >= hw:
                return True
            if offset == before:
                return False  # a batch larger than a Fetch answer: not in this workload
    return False


__all__ = ["Batch", "batch_at", "read_batches"]
