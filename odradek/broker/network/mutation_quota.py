"""Controller mutation quota (KIP-599), as Kafka's ControllerMutationQuotaManager.

Topic and partition creation and deletion are charged one permit per partition to a token bucket
per (user, client-id). The bucket refills at `controller_mutation_rate` permits per second and
holds at most `controller.quota.window.num` x `controller.quota.window.size.seconds` x rate
permits (Kafka's TokenBucket stat); it starts full.

- Strict (CreateTopics v6+, CreatePartitions v3+, DeleteTopics v5+): a topic is refused with
  THROTTLING_QUOTA_EXCEEDED while the bucket is below zero; otherwise it is accepted and charged,
  even if that takes the bucket below zero (one burst may overshoot, as in Kafka).
- Permissive (older versions, whose clients do not know the error): everything is accepted and
  charged; the response carries the throttle time.

The throttle time is the time the bucket needs to climb back to zero, -tokens / rate seconds,
less the time since it was measured. Kafka's quota is set per user / client-id with
AlterClientQuotas and is unlimited by default; until that API exists, odradek applies
`odradek.controller.mutation.rate` (unset: unlimited, as Kafka) to every client-id.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from odradek.broker.server import Broker

MAX_BUCKETS = 10_000  # full buckets are forgotten past this many (Kafka expires idle sensors)


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float  # clock seconds


class MutationQuotas:
    """The buckets of every (user, client-id); hands each request a `MutationQuota`."""

    def __init__(
        self,
        rate: float | None,
        window_num: int = 11,
        window_size_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = rate if rate is not None and rate > 0 else None
        self.burst = (rate or 0.0) * window_num * window_size_s
        self.clock = clock
        self._buckets: dict[tuple[str | None, str | None], _Bucket] = {}

    @classmethod
    def from_config(cls, get: Callable[[str], Any]) -> MutationQuotas:
        return cls(
            get("odradek.controller.mutation.rate"),
            int(get("controller.quota.window.num")),
            float(get("controller.quota.window.size.seconds")),
        )

    def quota_for(self, user: str | None, client_id: str | None, strict: bool) -> MutationQuota:
        if self.rate is None:
            return MutationQuota(None, strict)
        return MutationQuota(self._bucket((user, client_id)), strict, self)

    def _bucket(self, key: tuple[str | None, str | None]) -> _Bucket:
        bucket = self._buckets.get(key)
        if bucket is None:
            if len(self._buckets) >= MAX_BUCKETS:
                self._forget_full()
            bucket = self._buckets[key] = _Bucket(self.burst, self.clock())
        return bucket

    def _forget_full(self) -> None:
        for key, bucket in list(self._buckets.items()):
            if self.refill(bucket) >= self.burst:
                del self._buckets[key]

    def refill(self, bucket: _Bucket) -> float:
        now = self.clock()
        assert self.rate is not None
        bucket.tokens = min(self.burst, bucket.tokens + self.rate * (now - bucket.updated))
        bucket.updated = now
        return bucket.tokens


class MutationQuota:
    """One request's quota: `record(permits)` per topic, then `throttle_time_ms` for the answer."""

    __slots__ = ("_bucket", "_quotas", "strict", "_throttle_ms", "_measured")

    def __init__(
        self, bucket: _Bucket | None, strict: bool, quotas: MutationQuotas | None = None
    ) -> None:
        self._bucket = bucket
        self._quotas = quotas
        self.strict = strict
        self._throttle_ms = 0
        self._measured = 0.0

    @property
    def enabled(self) -> bool:
        return self._bucket is not None

    def record(self, permits: int) -> int:
        """Charge `permits`; 0 when allowed, else (strict only) the throttle time in ms."""
        bucket, quotas = self._bucket, self._quotas
        if bucket is None or quotas is None or quotas.rate is None:
            return 0
        tokens = quotas.refill(bucket)
        if self.strict and tokens < 0:
            self._throttled(tokens, quotas.rate, bucket.updated)
            return self._throttle_ms
        bucket.tokens = min(quotas.burst, tokens - permits)
        if not self.strict and bucket.tokens < 0:
            self._throttled(bucket.tokens, quotas.rate, bucket.updated)
        return 0

    def _throttled(self, tokens: float, rate: float, now: float) -> None:
        self._throttle_ms = max(1, round(-tokens / rate * 1000))
        self._measured = now

    @property
    def throttle_time_ms(self) -> int:
        if not self._throttle_ms or self._quotas is None:
            return 0
        elapsed_ms = (self._quotas.clock() - self._measured) * 1000
        return max(0, int(self._throttle_ms - elapsed_ms))


def quotas_of(broker: Broker) -> MutationQuotas:
    """The broker's quotas."""
    quotas: MutationQuotas = broker.mutation_quotas
    return quotas
