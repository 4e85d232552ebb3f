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
less the time since it was measured. The rate is the `controller_mutation_rate` client quota
(quotas.py: set per user / client-id entity with AlterClientQuotas, found in Kafka's precedence,
`limit`), else `odradek.controller.mutation.rate` (unset: unlimited, as Kafka). A bucket is per
(user, client-id); its rate and burst follow the quota when it changes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.broker.config import ConfigValue

if TYPE_CHECKING:
    from odradek.broker.server import Broker

MAX_BUCKETS = 10_000  # full buckets are forgotten past this many (Kafka expires idle sensors)


@dataclass(slots=True)
class _Bucket:
    tokens: float
    updated: float  # clock seconds
    rate: float = 0.0
    burst: float = 0.0


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
        self.window_s = window_num * window_size_s
        self.burst = (rate or 0.0) * self.window_s
        self.clock = clock
        self._buckets: dict[tuple[str | None, str | None], _Bucket] = {}
        # the client quota of (user, client-id), set by ClientQuotas (quotas.py)
        self.limit: Callable[[str | None, str | None], float | None] = lambda u, c: None

    def reset(self) -> None:
        """The client quotas changed: buckets take their new rate at their next use."""

    @classmethod
    def from_config(cls, get: Callable[[str], ConfigValue]) -> MutationQuotas:
        return cls(
            get("odradek.controller.mutation.rate"),
            int(get("controller.quota.window.num")),
            float(get("controller.quota.window.size.seconds")),
        )

    def quota_for(self, user: str | None, client_id: str | None, strict: bool) -> MutationQuota:
        rate = self.limit(user, client_id)
        if rate is None or rate <= 0:
            rate = self.rate
        if rate is None:
            return MutationQuota(None, strict)
        return MutationQuota(self._bucket((user, client_id), rate), strict, self)

    def _bucket(self, key: tuple[str | None, str | None], rate: float) -> _Bucket:
        bucket = self._buckets.get(key)
        burst = rate * self.window_s
        if bucket is None:
            if len(self._buckets) >= MAX_BUCKETS:
                self._forget_full()
            bucket = self._buckets[key] = _Bucket(burst, self.clock(), rate, burst)
        elif bucket.rate != rate:
            self.refill(bucket)
            bucket.rate, bucket.burst = rate, burst
            bucket.tokens = min(bucket.tokens, burst)
        return bucket

    def _forget_full(self) -> None:
        for key, bucket in list(self._buckets.items()):
            if self.refill(bucket) >= bucket.burst:
                del self._buckets[key]

    def refill(self, bucket: _Bucket) -> float:
        now = self.clock()
        bucket.tokens = min(bucket.burst, bucket.tokens + bucket.rate * (now - bucket.updated))
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
        if bucket is None or quotas is None:
            return 0
        tokens = quotas.refill(bucket)
        if self.strict and tokens < 0:
            self._throttled(tokens, bucket.rate, bucket.updated)
            return self._throttle_ms
        bucket.tokens = min(bucket.burst, tokens - permits)
        if not self.strict and bucket.tokens < 0:
            self._throttled(bucket.tokens, bucket.rate, bucket.updated)
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
    """The broker's controller mutation quotas."""
    quotas: MutationQuotas = broker.mutation_quotas
    return quotas
