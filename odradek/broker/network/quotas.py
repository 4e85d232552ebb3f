"""Client quotas, as Kafka's ClientQuotaManager (KIP-13, KIP-55, KIP-124, KIP-219, KIP-546).

Quotas are set per entity with AlterClientQuotas (key 49) and stored in the metadata store
(ZooKeeper: `/config/users/<user>`, `/config/clients/<client-id>`,
`/config/users/<user>/clients/<client-id>`). An entity is a user, a client-id or both, each name
either given or `<default>` (None here). The keys:

- `producer_byte_rate`: bytes/s of Produce requests (the request's size), per entity;
- `consumer_byte_rate`: bytes/s of Fetch responses to consumers (never to followers);
- `request_percentage`: percent of one request-handling thread (here: the event loop's time
  spent in the client's requests);
- `controller_mutation_rate`: partitions created or deleted per second (KIP-599,
  mutation_quota.py; a token bucket rather than a rate).

Which quota applies to a request of (user, client-id) is the first entity found in Kafka's
order (DefaultQuotaCallback):

    /users/<user>/clients/<client-id>      /users/<default>/clients/<client-id>
    /users/<user>/clients/<default>        /users/<default>/clients/<default>
    /users/<user>                          /users/<default>
                                           /clients/<client-id>
                                           /clients/<default>

and the entity level also says who shares a sensor: a quota on `/users/<user>` is shared by all
that user's client-ids, one on `/clients/<default>` gives every client-id its own rate.

Rates are Kafka's `Rate` over a `SampledStat` (as in 3.9): `quota.window.num` (11) samples of
`quota.window.size.seconds` (1), plus the current one; a rate is the sum of the samples over the
time they span, at least (num - 1) windows. A request is always recorded; when the rate then
exceeds the quota, the throttle time is `(rate - quota) / quota x window span` (Kafka's
QuotaUtils.throttleTime): the time the client must stay silent for its rate to come back to the
quota. The response carries it as throttle_time_ms and the connection reads nothing for that
long after sending it (KIP-219, Connection.throttle).
"""

from __future__ import annotations

import math
import time
from collections.abc import Awaitable, Callable, Generator, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.broker.cluster.metadata_store import MetadataChange, MetadataStore, QuotaEntity
from odradek.broker.config import ConfigValue
from odradek.broker.network.mutation_quota import MutationQuotas
from odradek.wire import protocol

if TYPE_CHECKING:
    from odradek.broker.network.context import RequestContext

USER = "user"
CLIENT_ID = "client-id"
IP = "ip"

PRODUCE = "producer_byte_rate"
FETCH = "consumer_byte_rate"
REQUEST = "request_percentage"
MUTATION = "controller_mutation_rate"
CONNECTION_RATE = "connection_creation_rate"  # ip entities (KIP-612): accepted, not enforced
CLIENT_KEYS = (PRODUCE, FETCH, REQUEST, MUTATION)
# Kafka's DynamicConfig.Client / User: byte rates are longs, the others doubles
LONG_KEYS = frozenset({PRODUCE, FETCH})

# An entity: ((type, name or None for <default>), ...) sorted by type ("client-id" < "user")
Entity = QuotaEntity

MAX_SENSORS = 10_000  # idle sensors are forgotten past this many (Kafka expires them after 1 h)


def entity(user: str | None | bool = False, client_id: str | None | bool = False) -> Entity:
    """An entity from its parts; False leaves a part out, None is <default>."""
    parts: list[tuple[str, str | None]] = []
    if client_id is not False:
        parts.append((CLIENT_ID, client_id))  # type: ignore[arg-type]
    if user is not False:
        parts.append((USER, user))  # type: ignore[arg-type]
    return tuple(parts)


def user_of(principal: str) -> str:
    """The user entity name of a principal: its name part ("User:alice" -> "alice")."""
    return principal.split(":", 1)[1] if ":" in principal else principal


class Rate:
    """Kafka's Rate over a SampledStat (3.9): a ring of num + 1 samples of `window_ms`, each
    (start ms, last event ms, value); a sample whose last event is num windows old is reset."""

    __slots__ = ("starts", "lasts", "values", "current", "last_ms")

    def __init__(self, now_ms: float) -> None:
        self.starts = [now_ms]
        self.lasts = [now_ms]
        self.values = [0.0]
        self.current = 0
        self.last_ms = now_ms

    def record(self, value: float, now_ms: float, num: int, window_ms: float) -> None:
        self.last_ms = now_ms
        i = self.current
        if now_ms - self.starts[i] >= window_ms:  # the current sample is complete: advance
            i = (i + 1) % (num + 1)
            if i >= len(self.starts):
                self.starts.append(now_ms)
                self.lasts.append(now_ms)
                self.values.append(0.0)
            else:
                self.starts[i] = self.lasts[i] = now_ms
                self.values[i] = 0.0
            self.current = i
        self.values[i] += value
        self.lasts[i] = now_ms

    def measure(self, now_ms: float, num: int, window_ms: float) -> tuple[float, float]:
        """(rate per second, the span in ms it is measured over)."""
        expire = num * window_ms
        starts, lasts, values = self.starts, self.lasts, self.values
        for i, last in enumerate(lasts):  # purgeObsoleteSamples
            if now_ms - last >= expire:
                starts[i] = lasts[i] = now_ms
                values[i] = 0.0
        elapsed = now_ms - min(starts)
        full = int(elapsed // window_ms)
        if full < num - 1:
            elapsed += (num - 1 - full) * window_ms
        elapsed = max(elapsed, 1.0)
        return sum(values) / (elapsed / 1000), elapsed


@dataclass(slots=True)
class _Sensor:
    rate: Rate
    quota: float


class QuotaType:
    """One quota key's sensors (Kafka's ClientQuotaManager for one QuotaType)."""

    def __init__(self, key: str, owner: ClientQuotas) -> None:
        self.key = key
        self.owner = owner
        self.enabled = False  # any entity has this key: the hot paths skip everything else
        self._sensors: dict[tuple[str, str], _Sensor] = {}
        self._resolved: dict[tuple[str, str], tuple[tuple[str, str], float] | None] = {}
        self.throttle_ms_total = 0  # for metrics: the throttle time handed out
        self.throttled = 0  # and how many times

    def reset(self) -> None:
        """Quotas changed: resolve entities again. Sensors keep their samples (as Kafka's keep
        theirs when only the bound changes); one no longer used is forgotten when idle."""
        self._resolved.clear()
        self.enabled = any(self.key in values for values in self.owner.configs.values())

    def _resolve(self, user: str, client_id: str) -> tuple[tuple[str, str], float] | None:
        key = (user, client_id)
        try:
            return self._resolved[key]
        except KeyError:
            pass
        found = self.owner.find(self.key, user, client_id)
        if len(self._resolved) >= MAX_SENSORS:
            self._resolved.clear()
        self._resolved[key] = found
        return found

    def _sensor(self, user: str, client_id: str, now_ms: float) -> _Sensor | None:
        found = self._resolve(user, client_id)
        if found is None:
            return None
        tags, limit = found
        sensor = self._sensors.get(tags)
        if sensor is None:
            if len(self._sensors) >= MAX_SENSORS:
                self._forget_idle(now_ms)
            sensor = self._sensors[tags] = _Sensor(Rate(now_ms), limit)
        else:
            sensor.quota = limit
        return sensor

    def _forget_idle(self, now_ms: float) -> None:
        span = self.owner.window_num * self.owner.window_ms
        for tags, sensor in list(self._sensors.items()):
            if now_ms - sensor.rate.last_ms >= span:
                del self._sensors[tags]

    def record(self, user: str, client_id: str, value: float) -> int:
        """Record `value` for (user, client-id); the throttle time in ms (0: within quota)."""
        now_ms = self.owner.clock() * 1000
        sensor = self._sensor(user, client_id, now_ms)
        if sensor is None:
            return 0
        num, window = self.owner.window_num, self.owner.window_ms
        sensor.rate.record(value, now_ms, num, window)
        rate, span = sensor.rate.measure(now_ms, num, window)
        if rate <= sensor.quota:
            return 0
        if sensor.quota <= 0:
            throttle = int(span)
        else:
            throttle = round((rate - sensor.quota) / sensor.quota * span)
        throttle = min(throttle, 0x7FFFFFFF)
        if throttle <= 0:
            return 0
        self.throttle_ms_total += throttle
        self.throttled += 1
        return throttle

    def unrecord(self, user: str, client_id: str, value: float) -> None:
        """Take back a recorded value (a throttled Fetch answered without its data)."""
        now_ms = self.owner.clock() * 1000
        sensor = self._sensor(user, client_id, now_ms)
        if sensor is not None:
            sensor.rate.record(-value, now_ms, self.owner.window_num, self.owner.window_ms)

    def max_value_in_window(self, user: str, client_id: str) -> float | None:
        """The most a client may take in one quota window (Kafka caps a Fetch response at it:
        quota x (num - 1) x window size); None without a quota."""
        found = self._resolve(user, client_id)
        if found is None:
            return None
        return found[1] * (self.owner.window_num - 1) * self.owner.window_ms / 1000


# (user part, client part) of each level, in Kafka's order: a name, "<default>" or nothing
_LEVELS: tuple[tuple[str, str], ...] = (
    ("name", "name"),
    ("name", "default"),
    ("name", ""),
    ("default", "name"),
    ("default", "default"),
    ("default", ""),
    ("", "name"),
    ("", "default"),
)


class ClientQuotas:
    """Every quota entity's configs and the per-type sensors; `broker.quotas`. As a broker
    service it follows the metadata store's quotas (`start` / `stop`)."""

    def __init__(
        self,
        window_num: int = 11,
        window_size_s: float = 1.0,
        mutation: MutationQuotas | None = None,
        clock: Callable[[], float] = time.monotonic,
        store: MetadataStore | None = None,
    ) -> None:
        self.store = store
        self.window_num = max(1, window_num)
        self.window_ms = window_size_s * 1000
        self.clock = clock
        self.configs: dict[Entity, dict[str, float]] = {}
        self.produce = QuotaType(PRODUCE, self)
        self.fetch = QuotaType(FETCH, self)
        self.request = QuotaType(REQUEST, self)
        self.mutation = mutation or MutationQuotas(None)
        self.mutation.limit = self._mutation_limit
        if store is not None:
            self.update(store.client_quotas)

    @classmethod
    def from_config(cls, get: Callable[[str], ConfigValue], store: MetadataStore) -> ClientQuotas:
        return cls(
            int(get("quota.window.num")),
            float(get("quota.window.size.seconds")),
            MutationQuotas.from_config(get),
            store=store,
        )

    async def start(self) -> None:
        if self.store is not None:
            self.store.subscribe(self._on_change)
            self.update(self.store.client_quotas)

    async def stop(self) -> None:
        if self.store is not None:
            self.store.unsubscribe(self._on_change)

    def _on_change(self, change: MetadataChange) -> None:
        if change.kind == "quota" and self.store is not None:
            self.update(self.store.client_quotas)

    def types(self) -> Iterable[QuotaType]:
        return (self.produce, self.fetch, self.request)

    def update(self, configs: dict[Entity, dict[str, float]]) -> None:
        """The stored quotas changed (AlterClientQuotas here or on another broker)."""
        self.configs = {e: dict(v) for e, v in configs.items() if v}
        for qt in self.types():
            qt.reset()
        self.mutation.reset()

    def find(self, key: str, user: str, client_id: str) -> tuple[tuple[str, str], float] | None:
        """The quota of `key` for (user, client-id) in Kafka's precedence, with the tags of
        the sensor that counts against it; None when no entity sets it."""
        configs = self.configs
        for user_part, client_part in _LEVELS:
            ent: list[tuple[str, str | None]] = []
            if client_part:
                ent.append((CLIENT_ID, client_id if client_part == "name" else None))
            if user_part:
                ent.append((USER, user if user_part == "name" else None))
            values = configs.get(tuple(ent))
            if values is not None and key in values:
                return (user if user_part else "", client_id if client_part else ""), values[key]
        return None

    def _mutation_limit(self, user: str | None, client_id: str | None) -> float | None:
        found = self.find(MUTATION, user or "", client_id or "")
        return None if found is None else found[1]


def tags_of(ctx: RequestContext) -> tuple[str, str]:
    """(user, client-id) of a request, as the quota sensors name them."""
    return user_of(ctx.principal), ctx.client_id or ""


def throttle(ctx: RequestContext, throttle_ms: int) -> int:
    """Mute the connection for `throttle_ms` after the answer (KIP-219); returns it."""
    if throttle_ms > 0 and ctx.connection is not None:
        ctx.connection.throttle(throttle_ms)
    return throttle_ms


def validate(entity_parts: list[tuple[str, str | None]], key: str, value: float) -> str | None:
    """Kafka's checks on one AlterClientQuotas op: an error message, or None."""
    types = {t for t, _ in entity_parts}
    if IP in types:
        if key != CONNECTION_RATE:
            return f"Invalid configuration key {key}"
    elif key not in CLIENT_KEYS:
        return f"Invalid configuration key {key}"
    if math.isnan(value) or math.isinf(value):
        return f"Invalid value {value} for configuration key {key}"
    if key in LONG_KEYS and value != int(value):
        return f"Invalid value {value} for configuration key {key}: must be a whole number"
    if value <= 0 and key != CONNECTION_RATE:
        return f"Invalid value {value} for configuration key {key}: must be positive"
    return None


# Kafka's cluster actions are never throttled by the request quota (ClientRequestQuotaManager's
# exempt sensor): LeaderAndIsr, StopReplica, UpdateMetadata, ControlledShutdown,
# WriteTxnMarkers, AlterPartition; nor are SASL's handshake and authentication.
REQUEST_QUOTA_EXEMPT = frozenset({4, 5, 6, 7, 17, 27, 36, 56})
FETCH_KEY = 1


class _Timed:
    """Await a handler and add up the time its own steps run on the event loop (Kafka charges
    a request's time on the request handler thread; awaiting, e.g. a long-polling fetch in
    purgatory, is not charged)."""

    __slots__ = ("_coro", "busy")

    def __init__(self, coro: Awaitable[protocol.Message]) -> None:
        self._coro = coro.__await__()
        self.busy = 0.0

    def __await__(self) -> Generator[object, object, protocol.Message]:
        steps = self._coro
        clock = time.perf_counter
        value: object = None
        error: BaseException | None = None
        while True:
            started = clock()
            try:
                yielded = steps.send(value) if error is None else steps.throw(error)
            except StopIteration as stop:
                self.busy += clock() - started
                return stop.value
            except BaseException:
                self.busy += clock() - started
                raise
            self.busy += clock() - started
            try:
                value, error = (yield yielded), None
            except GeneratorExit:
                steps.close()
                raise
            except BaseException as exc:  # cancellation: into the handler
                value, error = None, exc


def _replica_id(request: protocol.Message) -> int:
    state = getattr(request, "replica_state", None)
    if state is not None:
        return int(state.replica_id)
    return int(getattr(request, "replica_id", -1) or -1)


async def request_quota(
    ctx: RequestContext, request: protocol.Message, handling: Awaitable[protocol.Message], raw: bool
) -> protocol.Message:
    """Run a handler under the request_percentage quota: its loop time is recorded (percent of
    one second, as Kafka's nanosToPercentage) and, over quota, the answer carries the throttle
    time (a raw answer, Fetch, is already encoded: only the connection is muted)."""
    timed = _Timed(handling)
    response = await timed
    if response is None:  # acks=0 produce: Kafka does not charge it to the request quota
        return None
    if ctx.header.api_key == FETCH_KEY and _replica_id(request) >= 0:
        return response  # a follower: never throttled by client quotas
    user, client_id = tags_of(ctx)
    throttle_ms = ctx.broker.quotas.request.record(user, client_id, timed.busy * 100)
    if throttle_ms > 0:
        throttle(ctx, throttle_ms)
        if not raw and hasattr(response, "throttle_time_ms"):
            response.throttle_time_ms = max(response.throttle_time_ms or 0, throttle_ms)
    return response
