"""Leader-side replica tracking, as Kafka's Partition with its Replica states (KIP-101, KIP-279).

The leader of a replicated partition learns each follower's log end offset from the offsets it
fetches at (a follower fetching at offset N has everything below N). From that:

- High watermark: the smallest log end offset over the ISR (the leader's own included); it only
  moves forward, and a follower whose log end offset is still unknown holds it back.
- Caught-up time (Kafka's `lastCaughtUpTimeMs`): a fetch at or past the leader's log end offset
  makes the follower caught up now; a fetch at or past the log end offset the leader had at the
  follower's previous fetch makes it caught up as of that previous fetch.
- Shrink: an ISR member that is not at the leader's log end offset and has not been caught up
  for `replica.lag.time.max.ms` leaves the ISR.
- Expand: a follower outside the ISR rejoins when its log end offset reaches the high watermark
  and the start offset of the leader's current epoch (so it holds everything the leader has
  acknowledged in any epoch, and has truncated whatever diverged).

Pure bookkeeping: no I/O, no clock of its own; `manager.py` applies the decisions.
"""

from __future__ import annotations

from dataclasses import dataclass

UNKNOWN = -1


@dataclass(slots=True)
class FollowerState:
    log_end_offset: int = UNKNOWN
    last_caught_up_ms: float = 0.0
    last_fetch_ms: float = 0.0
    last_fetch_leader_end: int = UNKNOWN


class LeaderTracker:
    """Follower states of one partition led by `node_id` in one leader epoch."""

    def __init__(
        self,
        node_id: int,
        replicas: list[int],
        isr: list[int],
        epoch_start_offset: int,
        now_ms: float,
    ) -> None:
        self.node_id = node_id
        self.epoch_start_offset = epoch_start_offset
        self.followers: dict[int, FollowerState] = {}
        for r in replicas:
            if r != node_id:
                # ISR members get a grace period, as Kafka resets them on becoming leader
                self.followers[r] = FollowerState(last_caught_up_ms=now_ms if r in isr else 0.0)

    def set_replicas(self, replicas: list[int]) -> None:
        """The assignment changed within the epoch (a reassignment's replicas arriving after
        its leader epoch): track the new followers (not caught up yet), forget the gone."""
        for r in replicas:
            if r != self.node_id and r not in self.followers:
                self.followers[r] = FollowerState()
        for r in [r for r in self.followers if r not in replicas]:
            del self.followers[r]

    def on_fetch(
        self, replica_id: int, fetch_offset: int, leader_end: int, now_ms: float
    ) -> bool | None:
        """Record a follower's fetch: whether its log end offset moved (only then can the high
        watermark move); None when `replica_id` is not a follower here."""
        st = self.followers.get(replica_id)
        if st is None:
            return None
        moved = st.log_end_offset != fetch_offset
        if fetch_offset >= leader_end:
            st.last_caught_up_ms = now_ms
        elif st.last_fetch_leader_end != UNKNOWN and fetch_offset >= st.last_fetch_leader_end:
            st.last_caught_up_ms = max(st.last_caught_up_ms, st.last_fetch_ms)
        st.log_end_offset = fetch_offset
        st.last_fetch_leader_end = leader_end
        st.last_fetch_ms = now_ms
        return moved

    def high_watermark(self, isr: list[int], leader_end: int) -> int:
        """The smallest log end offset over `isr` (UNKNOWN when a member's is unknown)."""
        hw = leader_end
        for r in isr:
            if r == self.node_id:
                continue
            st = self.followers.get(r)
            if st is None or st.log_end_offset == UNKNOWN:
                return UNKNOWN
            hw = min(hw, st.log_end_offset)
        return hw

    def can_join(self, replica_id: int, isr: list[int], high_watermark: int) -> bool:
        st = self.followers.get(replica_id)
        return (
            st is not None
            and replica_id not in isr
            and st.log_end_offset >= high_watermark
            and st.log_end_offset >= self.epoch_start_offset
        )

    def out_of_sync(self, isr: list[int], leader_end: int, now_ms: float, lag_ms: int) -> list[int]:
        """ISR members (not the leader) that have fallen behind for longer than `lag_ms`."""
        out = []
        for r in isr:
            st = self.followers.get(r)
            if st is None:
                continue
            if st.log_end_offset != leader_end and now_ms - st.last_caught_up_ms > lag_ms:
                out.append(r)
        return out
