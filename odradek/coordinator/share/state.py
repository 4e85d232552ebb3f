"""The state of one share-partition (KIP-932): which records a share group has delivered.

As Kafka's SharePartition: the share-partition start offset (SPSO) is the first offset not yet
acknowledged or archived, the end offset (SPEO) the first offset never acquired. Between them
each record is AVAILABLE (to be delivered, again or for the first time), ACQUIRED by one member
under an acquisition lock (`group.share.record.lock.duration.ms`), ACKNOWLEDGED (accepted) or
ARCHIVED (rejected, or delivered `group.share.delivery.count.limit` times). A record acquired
again has its delivery count raised; one released (by the client, by a lock that expires or by
its member leaving the group) goes back to AVAILABLE unless its delivery count reached the
limit, then it is archived. The start offset moves past every leading acknowledged or archived
record.

The state is kept per offset (a dict of in-flight records), which is simple and exact for the
record counts a share group holds in flight: no new record is acquired once the end offset is
`group.share.partition.max.record.locks` (2000) past the start offset, as Kafka.
`state_batches` gives the persisted form: runs of offsets with the same delivery state and
count, acquired records stored as available (Kafka persists only 0:Available, 2:Acked,
4:Archived).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

AVAILABLE, ACQUIRED, ACKNOWLEDGED, ARCHIVED = 0, 1, 2, 4
GAP, ACCEPT, RELEASE, REJECT, RENEW = 0, 1, 2, 3, 4

_TYPES = (GAP, ACCEPT, RELEASE, REJECT)

INVALID_RECORD_STATE = 121  # Kafka's InvalidRecordStateException
INVALID_REQUEST = 42


@dataclass(slots=True)
class InFlight:
    state: int
    delivery_count: int = 0
    member: str | None = None
    deadline_ms: int = 0  # lock expiry while ACQUIRED


@dataclass(slots=True, frozen=True)
class StateBatch:
    first_offset: int
    last_offset: int
    delivery_state: int
    delivery_count: int


@dataclass(slots=True, frozen=True)
class Acquired:
    first_offset: int
    last_offset: int
    delivery_count: int


class SharePartition:
    def __init__(
        self,
        start_offset: int,
        lock_ms: int = 30000,
        delivery_limit: int = 5,
        max_in_flight: int = 2000,
    ) -> None:
        self.start_offset = start_offset
        self.max_in_flight = max_in_flight  # offsets between the start and end offsets
        self.end_offset = start_offset
        self.lock_ms = lock_ms
        self.delivery_limit = delivery_limit
        self.records: dict[int, InFlight] = {}
        self.state_epoch = 0
        self.leader_epoch = 0

    # -- restoring ------------------------------------------------------------------------------

    @classmethod
    def restore(
        cls,
        start_offset: int,
        batches: Iterable[StateBatch],
        lock_ms: int = 30000,
        delivery_limit: int = 5,
    ) -> SharePartition:
        sp = cls(start_offset, lock_ms, delivery_limit)
        end = start_offset
        for b in batches:
            for off in range(max(b.first_offset, start_offset), b.last_offset + 1):
                state = b.delivery_state if b.delivery_state != ACQUIRED else AVAILABLE
                sp.records[off] = InFlight(state, b.delivery_count)
            end = max(end, b.last_offset + 1)
        for off in range(start_offset, end):  # offsets no batch names: never delivered
            sp.records.setdefault(off, InFlight(AVAILABLE, 0))
        sp.end_offset = end
        sp._advance()
        return sp

    # -- acquiring ------------------------------------------------------------------------------

    def acquire(
        self,
        member: str,
        log_batches: Iterable[tuple[int, int, bool, int]],
        max_records: int,
        now_ms: int,
        max_bytes: int | None = None,
        whole_first: bool = True,
        record_limit: bool = False,
    ) -> list[Acquired]:
        """Acquire about `max_records` records for `member`: available in-flight records first,
        then new ones from the end offset. Kafka 4.2's default (batch-optimized) acquisition
        takes the whole batch in which `max_records` is reached; `record_limit` (KIP-1206's
        record-limit mode) stops at exactly `max_records`. `log_batches` are the log's (first,
        last, is_control, size in bytes) batches from the start offset up to the high watermark;
        control records are archived, never delivered. The batches records are acquired from are
        what the answer carries: their sizes stay within `max_bytes`, except that the first one
        is taken whole when `whole_first` (a Fetch's max_bytes, as Kafka's). Returns runs of
        acquired offsets."""
        self.expire(now_ms)
        got: list[int] = []
        deadline = now_ms + self.lock_ms
        full = False
        taken = 0  # bytes of the batches records were acquired from
        for first, last, control, size in log_batches:
            lo = max(first, self.start_offset)
            counted = False
            for off in range(lo, last + 1):
                if record_limit and len(got) >= max_records:
                    break
                rec = self.records.get(off)
                if rec is None:
                    if off < self.end_offset:
                        continue  # acknowledged or archived and dropped below the start
                    if off - self.start_offset >= self.max_in_flight:
                        full = True  # group.share.partition.max.record.locks
                        break
                    rec = self.records[off] = InFlight(AVAILABLE, 0)
                    self.end_offset = off + 1
                if control:
                    if rec.state == AVAILABLE:
                        rec.state = ARCHIVED
                    continue
                if rec.state != AVAILABLE:
                    continue
                if not counted:
                    over = max_bytes is not None and taken + size > max_bytes
                    if over and (got or not whole_first):
                        full = True  # the answer is full
                        break
                    taken += size
                    counted = True
                rec.state = ACQUIRED
                rec.member = member
                rec.delivery_count += 1
                rec.deadline_ms = deadline
                got.append(off)
            if len(got) >= max_records or full:
                break  # read no further batch
        self._advance()
        return self._runs(got)

    def _runs(self, offsets: list[int]) -> list[Acquired]:
        out: list[Acquired] = []
        for off in offsets:
            count = self.records[off].delivery_count
            if out and out[-1].last_offset == off - 1 and out[-1].delivery_count == count:
                out[-1] = Acquired(out[-1].first_offset, off, count)
            else:
                out.append(Acquired(off, off, count))
        return out

    # -- acknowledging --------------------------------------------------------------------------

    def acknowledge(
        self, member: str, first: int, last: int, types: list[int], renew_at_ms: int | None = None
    ) -> int:
        """Apply one acknowledgement batch of `member`; 0 or Kafka's error code. Either every
        offset of the batch changes or none does. RENEW (KIP-1222, allowed when `renew_at_ms`
        is given: the time now) keeps the records acquired under a fresh acquisition lock."""
        if last < first or not types or (len(types) != 1 and len(types) != last - first + 1):
            return INVALID_REQUEST
        allowed = (GAP, ACCEPT, RELEASE, REJECT) if renew_at_ms is None else (*_TYPES, RENEW)
        if any(t not in allowed for t in types):
            return INVALID_REQUEST
        for off in range(first, last + 1):
            rec = self.records.get(off)
            if rec is None or rec.state != ACQUIRED or rec.member != member:
                return INVALID_RECORD_STATE
        for i, off in enumerate(range(first, last + 1)):
            kind = types[0] if len(types) == 1 else types[i]
            rec = self.records[off]
            if kind == ACCEPT:
                self._settle(rec, ACKNOWLEDGED)
            elif kind in (REJECT, GAP):
                self._settle(rec, ARCHIVED)
            elif kind == RENEW and renew_at_ms is not None:
                rec.deadline_ms = renew_at_ms + self.lock_ms
            else:
                self._release(rec)
        self._advance()
        return 0

    def _settle(self, rec: InFlight, state: int) -> None:
        rec.state = state
        rec.member = None
        rec.deadline_ms = 0

    def _release(self, rec: InFlight) -> None:
        self._settle(rec, ARCHIVED if rec.delivery_count >= self.delivery_limit else AVAILABLE)

    def unacquire(self, member: str, acquired: Iterable[Acquired]) -> None:
        """Take back an acquisition its member never received (a ShareFetch answered without
        its records because a quota throttled it): available again, delivery counts as before."""
        for a in acquired:
            for off in range(a.first_offset, a.last_offset + 1):
                rec = self.records.get(off)
                if rec is not None and rec.state == ACQUIRED and rec.member == member:
                    rec.delivery_count -= 1
                    self._settle(rec, AVAILABLE)

    def release_member(self, member: str) -> int:
        """Release every record `member` holds (it left the group or its session ended)."""
        n = 0
        for rec in self.records.values():
            if rec.state == ACQUIRED and rec.member == member:
                self._release(rec)
                n += 1
        self._advance()
        return n

    def expire(self, now_ms: int) -> int:
        """Release the records whose acquisition lock expired; how many."""
        n = 0
        for rec in self.records.values():
            if rec.state == ACQUIRED and rec.deadline_ms <= now_ms:
                self._release(rec)
                n += 1
        if n:
            self._advance()
        return n

    def next_deadline(self) -> int | None:
        deadlines = [r.deadline_ms for r in self.records.values() if r.state == ACQUIRED]
        return min(deadlines) if deadlines else None

    def has_available(self) -> bool:
        return any(r.state == AVAILABLE for r in self.records.values())

    def _advance(self) -> None:
        while True:
            rec = self.records.get(self.start_offset)
            if rec is None or rec.state not in (ACKNOWLEDGED, ARCHIVED):
                break
            del self.records[self.start_offset]
            self.start_offset += 1
        if self.start_offset > self.end_offset:
            self.end_offset = self.start_offset

    # -- moving the start (AlterShareGroupOffsets, records deleted from the log) ----------------

    def reset_to(self, offset: int) -> None:
        """Start over at `offset` (nothing in flight)."""
        self.records.clear()
        self.start_offset = self.end_offset = offset

    def skip_below(self, log_start: int) -> None:
        """Records below the log start offset are gone: archive them."""
        if log_start <= self.start_offset:
            return
        for off in list(self.records):
            if off < log_start:
                del self.records[off]
        self.start_offset = log_start
        self.end_offset = max(self.end_offset, log_start)
        self._advance()

    # -- persisting -----------------------------------------------------------------------------

    def state_batches(self) -> list[StateBatch]:
        out: list[StateBatch] = []
        for off in range(self.start_offset, self.end_offset):
            rec = self.records.get(off)
            if rec is None:
                continue
            state = AVAILABLE if rec.state == ACQUIRED else rec.state
            last = out[-1] if out else None
            if (
                last is not None
                and last.last_offset == off - 1
                and last.delivery_state == state
                and last.delivery_count == rec.delivery_count
            ):
                out[-1] = StateBatch(last.first_offset, off, state, rec.delivery_count)
            else:
                out.append(StateBatch(off, off, state, rec.delivery_count))
        return out

    def in_flight(self) -> int:
        return sum(1 for r in self.records.values() if r.state == ACQUIRED)
