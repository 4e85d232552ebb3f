"""KIP-714 client metrics on the broker, as Kafka's ClientMetricsManager.

Subscriptions are ClientMetrics config resources (resource type 16), one per name, kept in the
metadata store (`store.client_metrics`: name -> {key: value}) and altered through
IncrementalAlterConfigs / AlterConfigs:

    metrics      comma-separated metric name prefixes; `*` (or one empty string) for all
    interval.ms  push interval, 100 .. 3600000 (default 300000)
    match        comma-separated `selector=regex`, every one of which must match the client in
                 full; selectors client_instance_id, client_id, client_software_name,
                 client_software_version, client_source_address, client_source_port. No
                 pattern matches every client.

A client instance (GetTelemetrySubscriptions) gets the union of the metrics of every subscription
that matches it, the lowest of their intervals, and a subscription id (CRC32C of the metric set
and interval XOR the instance id's hash, as Kafka). A client no subscription matches gets an
empty metric list (and the default interval): it does not push. When the subscriptions change,
an instance is re-evaluated at its next request, and a push with the old subscription id is
UNKNOWN_SUBSCRIPTION_ID, which makes the client ask again.

A request before the instance's push interval has passed is THROTTLING_QUOTA_EXCEEDED (a push
right after a GetTelemetrySubscriptions is accepted: clients jitter their interval), a push after
a terminating one INVALID_REQUEST, an unknown compression type UNSUPPORTED_COMPRESSION_TYPE, a
payload over `telemetry.max.bytes` TELEMETRY_TOO_LARGE. Pushed payloads are decompressed (zstd,
lz4, gzip, snappy), decoded as OTLP MetricsData and kept per instance (`ClientMetricsSeries`) for
the Prometheus endpoint; deltas of monotonic sums are accumulated. An instance that sends nothing
for max(60 s, 3 x its interval) is dropped with its series, as Kafka's expiration timer.
"""

from __future__ import annotations

import logging
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from crc32c._crc32c import crc32c  # the extension itself, as odradek.wire.batch does

from odradek.broker.telemetry import otlp
from odradek.wire import compression
from odradek.wire.errors import ErrorCode

log = logging.getLogger(__name__)

SUBSCRIPTION_METRICS = "metrics"
PUSH_INTERVAL_MS = "interval.ms"
CLIENT_MATCH_PATTERN = "match"
CONFIG_KEYS = (SUBSCRIPTION_METRICS, PUSH_INTERVAL_MS, CLIENT_MATCH_PATTERN)

CLIENT_INSTANCE_ID = "client_instance_id"
CLIENT_ID = "client_id"
CLIENT_SOFTWARE_NAME = "client_software_name"
CLIENT_SOFTWARE_VERSION = "client_software_version"
CLIENT_SOURCE_ADDRESS = "client_source_address"
CLIENT_SOURCE_PORT = "client_source_port"
MATCH_SELECTORS = frozenset(
    {
        CLIENT_INSTANCE_ID,
        CLIENT_ID,
        CLIENT_SOFTWARE_NAME,
        CLIENT_SOFTWARE_VERSION,
        CLIENT_SOURCE_ADDRESS,
        CLIENT_SOURCE_PORT,
    }
)

ALL_METRICS = "*"
DEFAULT_INTERVAL_MS = 5 * 60 * 1000
MIN_INTERVAL_MS = 100
MAX_INTERVAL_MS = 3_600_000
DEFAULT_CACHE_EXPIRY_MS = 60_000
CACHE_MAX_SIZE = 16384
MAX_POINTS_PER_INSTANCE = 10_000  # bounds the series one client can create
# Kafka's SUPPORTED_COMPRESSION_TYPES, in its order of preference.
ACCEPTED_COMPRESSION = [compression.ZSTD, compression.LZ4, compression.GZIP, compression.SNAPPY]
_KNOWN_COMPRESSION = frozenset({compression.NONE, *ACCEPTED_COMPRESSION})
ZERO_UUID = uuid.UUID(int=0)
# Kafka's Uuid.METADATA_TOPIC_ID (1) and ZERO_UUID are reserved.
RESERVED_UUIDS = frozenset({ZERO_UUID, uuid.UUID(int=1)})


class ConfigError(Exception):
    """A ClientMetrics config Kafka refuses: `code` and Kafka's message."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class TelemetryError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _list(value: str | None) -> list[str]:
    """Kafka's ConfigDef LIST parsing: split on commas, trim, an empty string is []."""
    if value is None or not value.strip():
        return []
    return [part.strip() for part in value.split(",")]


def parse_match(patterns: list[str]) -> dict[str, re.Pattern[str]]:
    out: dict[str, re.Pattern[str]] = {}
    for pattern in patterns:
        pair = pattern.split("=")
        if len(pair) != 2 or pair[0].strip() not in MATCH_SELECTORS:
            raise ConfigError(
                ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}"
            )
        try:
            out[pair[0].strip()] = re.compile(pair[1].strip())
        except re.error:
            raise ConfigError(
                ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {pattern}"
            ) from None
    return out


def validate(name: str, configs: dict[str, str]) -> None:
    """Kafka's ClientMetricsConfigs.validate: raises ConfigError with Kafka's messages."""
    if not name:
        raise ConfigError(ErrorCode.INVALID_REQUEST, "Subscription name can't be empty")
    for key in configs:
        if key not in CONFIG_KEYS:
            raise ConfigError(
                ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {key}"
            )
    if PUSH_INTERVAL_MS in configs:
        raw = configs[PUSH_INTERVAL_MS]
        try:
            interval = int(raw.strip())
        except (ValueError, AttributeError):
            raise ConfigError(
                ErrorCode.INVALID_CONFIG,
                f"Invalid value {raw} for configuration {PUSH_INTERVAL_MS}: Not a number of "
                "type INT",
            ) from None
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise ConfigError(
                ErrorCode.INVALID_REQUEST,
                f"Invalid value {interval} for {PUSH_INTERVAL_MS}, interval must be between "
                "100 and 3600000 (1 hour)",
            )
    if CLIENT_MATCH_PATTERN in configs:
        parse_match(_list(configs[CLIENT_MATCH_PATTERN]))


@dataclass(slots=True, frozen=True)
class Subscription:
    name: str
    metrics: frozenset[str]
    interval_ms: int
    match: dict[str, re.Pattern[str]]

    @classmethod
    def from_configs(cls, name: str, configs: dict[str, str]) -> Subscription:
        interval = configs.get(PUSH_INTERVAL_MS)
        return cls(
            name,
            frozenset(_list(configs.get(SUBSCRIPTION_METRICS))),
            int(interval) if interval is not None else DEFAULT_INTERVAL_MS,
            parse_match(_list(configs.get(CLIENT_MATCH_PATTERN))),
        )

    def matches(self, attributes: dict[str, str | None]) -> bool:
        for selector, pattern in self.match.items():
            value = attributes.get(selector)
            if value is None or pattern.fullmatch(value) is None:
                return False
        return True


def _java_set_string(items: set[str]) -> str:
    """Java's AbstractCollection.toString of a set, for the subscription id. A HashSet's order
    is not reproducible here, so the items are sorted: the id is only compared with itself."""
    return "[" + ", ".join(sorted(items)) + "]"


def _uuid_hash(u: uuid.UUID) -> int:
    """Java's Uuid.hashCode: the xor of the two longs' halves."""
    msb, lsb = u.int >> 64, u.int & 0xFFFFFFFFFFFFFFFF
    h = msb ^ lsb
    return ((h >> 32) ^ h) & 0xFFFFFFFF


def _to_int32(n: int) -> int:
    n &= 0xFFFFFFFF
    return n - (1 << 32) if n & 0x80000000 else n


def subscription_id(metrics: set[str], interval_ms: int, instance_id: uuid.UUID) -> int:
    text = (_java_set_string(metrics) + str(interval_ms)).encode()
    return _to_int32(crc32c(text) ^ _uuid_hash(instance_id))


SeriesKey = tuple[str, tuple[tuple[str, str], ...]]  # metric name, sorted point attributes


@dataclass(slots=True)
class SeriesValue:
    kind: str
    monotonic: bool
    value: float = 0.0  # gauges and sums; histograms and summaries: the sum
    count: int | None = None
    description: str = ""


@dataclass(slots=True)
class ClientInstance:
    instance_id: uuid.UUID
    attributes: dict[str, str | None]
    subscription_id: int
    subscription_version: int
    metrics: set[str]
    push_interval_ms: int
    last_get_ms: float = 0.0
    last_push_ms: float = 0.0
    terminating: bool = False
    last_error: ErrorCode = ErrorCode.NONE
    expires_ms: float = 0.0
    # (metric name, sorted point attributes) -> value: what /metrics shows
    series: dict[SeriesKey, SeriesValue] = field(default_factory=dict)
    resource: dict[str, str] = field(default_factory=dict)
    pushes: int = 0

    def may_get(self, now: float) -> bool:
        """ClientMetricsInstance.maybeUpdateGetRequestTimestamp."""
        if now - max(self.last_get_ms, self.last_push_ms) >= self.push_interval_ms:
            self.last_get_ms = now
            return True
        return False

    def may_push(self, now: float) -> bool:
        """ClientMetricsInstance.maybeUpdatePushRequestTimestamp."""
        accept = self.last_get_ms > self.last_push_ms
        if not accept:
            accept = now - self.last_push_ms >= self.push_interval_ms
        if accept:
            self.last_push_ms = now
        return accept


@dataclass(slots=True)
class Subscribed:
    """What GetTelemetrySubscriptions answers."""

    instance_id: uuid.UUID
    subscription_id: int
    metrics: list[str]
    push_interval_ms: int


class ClientMetricsManager:
    """Subscriptions, client instances and their pushed metrics (one per broker)."""

    def __init__(
        self,
        configs: Callable[[], dict[str, dict[str, str]]],
        telemetry_max_bytes: int = 1024 * 1024,
        clock: Callable[[], float] = lambda: time.monotonic() * 1000,
        cache_expiry_ms: int = DEFAULT_CACHE_EXPIRY_MS,
        receiver_configured: bool = False,
    ) -> None:
        self._configs = configs
        # Kafka's ClientMetricsManager.isTelemetryReceiverConfigured: pushed metrics have
        # somewhere to go (here the Prometheus endpoint, metrics.listen). Without one, the
        # telemetry APIs are not advertised and clients do not start telemetry.
        self.receiver_configured = receiver_configured
        self.telemetry_max_bytes = telemetry_max_bytes
        self._clock = clock
        self.cache_expiry_ms = cache_expiry_ms
        self._source: dict[str, dict[str, str]] = {}
        self.subscriptions: dict[str, Subscription] = {}
        self.version = 0
        # LRU of instances (Kafka keeps 16k); the lock guards it against the metrics thread
        self.instances: OrderedDict[uuid.UUID, ClientInstance] = OrderedDict()
        self.lock = threading.Lock()
        self.unknown_subscription_requests = 0
        self.throttled_requests = 0
        self.pushes = 0
        self.push_errors = 0
        self._next_expiry_scan = 0.0

    # -- subscriptions ----------------------------------------------------------------------

    def _refresh(self) -> None:
        """Re-read the subscriptions when the store's ClientMetrics configs changed."""
        current = self._configs()
        if current == self._source:
            return
        subs: dict[str, Subscription] = {}
        for name, configs in current.items():
            if not configs:
                continue
            try:
                subs[name] = Subscription.from_configs(name, configs)
            except (ConfigError, ValueError) as exc:
                log.warning("ignoring client metrics subscription %r: %s", name, exc)
        self._source = {name: dict(c) for name, c in current.items()}
        self.subscriptions = subs
        self.version += 1

    def _evaluate(
        self, instance_id: uuid.UUID, attributes: dict[str, str | None]
    ) -> ClientInstance:
        interval = DEFAULT_INTERVAL_MS
        metrics: set[str] = set()
        everything = False
        for sub in self.subscriptions.values():
            if sub.matches(attributes):
                everything = everything or ALL_METRICS in sub.metrics
                metrics |= sub.metrics
                interval = min(interval, sub.interval_ms)
        if everything:
            metrics = {ALL_METRICS}
        return ClientInstance(
            instance_id,
            attributes,
            subscription_id(metrics, interval, instance_id),
            self.version,
            metrics,
            interval,
        )

    def _instance(
        self, instance_id: uuid.UUID, attributes: dict[str, str | None], now: float
    ) -> ClientInstance:
        self._expire(now)
        inst = self.instances.get(instance_id)
        if inst is None:
            inst = self._evaluate(instance_id, attributes)
            with self.lock:
                self.instances[instance_id] = inst
                while len(self.instances) > CACHE_MAX_SIZE:
                    self.instances.popitem(last=False)
        elif inst.subscription_version < self.version:
            fresh = self._evaluate(instance_id, inst.attributes)
            fresh.last_get_ms, fresh.last_push_ms = inst.last_get_ms, inst.last_push_ms
            fresh.terminating, fresh.last_error = inst.terminating, inst.last_error
            fresh.series, fresh.resource, fresh.pushes = inst.series, inst.resource, inst.pushes
            with self.lock:
                self.instances[instance_id] = inst = fresh
        with self.lock:
            self.instances.move_to_end(instance_id)
        inst.expires_ms = now + max(self.cache_expiry_ms, 3 * inst.push_interval_ms)
        return inst

    def _expire(self, now: float) -> None:
        """Drop instances idle past their expiry (looked for at most once a second)."""
        if now < self._next_expiry_scan:
            return
        self._next_expiry_scan = now + 1000
        with self.lock:
            dead = [i for i, inst in self.instances.items() if inst.expires_ms <= now]
            for i in dead:
                del self.instances[i]

    # -- requests -----------------------------------------------------------------------------

    def get_subscriptions(
        self, instance_id: uuid.UUID | None, attributes: dict[str, str | None]
    ) -> Subscribed:
        """GetTelemetrySubscriptions; raises TelemetryError."""
        self._refresh()
        now = self._clock()
        if instance_id is None or instance_id == ZERO_UUID:
            instance_id = uuid.uuid4()
            while instance_id in self.instances or instance_id in RESERVED_UUIDS:
                instance_id = uuid.uuid4()
        attributes = {**attributes, CLIENT_INSTANCE_ID: str(instance_id)}
        inst = self._instance(instance_id, attributes, now)
        # Kafka's check reads `lastKnownError != UNKNOWN_SUBSCRIPTION_ID || != UNSUPPORTED_...`,
        # which is always true: a request inside the interval is throttled whatever came before.
        if not inst.may_get(now):
            self.throttled_requests += 1
            raise TelemetryError(
                ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                f"Request from the client [{instance_id}] arrived before the next push "
                "interval time",
            )
        inst.last_error = ErrorCode.NONE
        return Subscribed(
            instance_id, inst.subscription_id, sorted(inst.metrics), inst.push_interval_ms
        )

    def push(
        self,
        instance_id: uuid.UUID | None,
        attributes: dict[str, str | None],
        subscription: int,
        terminating: bool,
        compression_type: int,
        payload: bytes | None,
    ) -> None:
        """PushTelemetry; raises TelemetryError."""
        if instance_id is None or instance_id in RESERVED_UUIDS:
            raise TelemetryError(
                ErrorCode.INVALID_REQUEST,
                f"Invalid request from the client [{instance_id or ZERO_UUID}], invalid client "
                "instance id",
            )
        self._refresh()
        now = self._clock()
        attributes = {**attributes, CLIENT_INSTANCE_ID: str(instance_id)}
        inst = self._instance(instance_id, attributes, now)
        try:
            self._validate_push(inst, subscription, terminating, compression_type, payload, now)
        except TelemetryError as exc:
            inst.last_error = exc.code
            raise
        finally:
            inst.terminating = terminating
        if payload:
            try:
                raw = compression.decompress(
                    compression_type,
                    payload,
                    compression.max_decompressed_size(self.telemetry_max_bytes),
                )
                data = otlp.decode_metrics_data(raw)
            except (compression.CorruptRecordError, otlp.OtlpError) as exc:
                self.push_errors += 1
                inst.last_error = ErrorCode.INVALID_RECORD
                log.info("client %s pushed metrics that cannot be read: %s", instance_id, exc)
                raise TelemetryError(ErrorCode.INVALID_RECORD, str(exc)) from None
            self._record(inst, data)
        inst.last_error = ErrorCode.NONE

    def _validate_push(
        self,
        inst: ClientInstance,
        subscription: int,
        terminating: bool,
        compression_type: int,
        payload: bytes | None,
        now: float,
    ) -> None:
        iid = inst.instance_id
        if inst.terminating:
            raise TelemetryError(
                ErrorCode.INVALID_REQUEST,
                f"Client [{iid}] sent the previous request with state terminating to TRUE, can "
                "not acceptany requests after that",
            )
        if not inst.may_push(now) and not terminating:
            self.throttled_requests += 1
            raise TelemetryError(
                ErrorCode.THROTTLING_QUOTA_EXCEEDED,
                f"Request from the client [{iid}] arrived before the next push interval time",
            )
        if subscription != inst.subscription_id:
            self.unknown_subscription_requests += 1
            raise TelemetryError(
                ErrorCode.UNKNOWN_SUBSCRIPTION_ID,
                f"Unknown client subscription id for the client [{iid}]",
            )
        if compression_type not in _KNOWN_COMPRESSION:
            raise TelemetryError(
                ErrorCode.UNSUPPORTED_COMPRESSION_TYPE,
                f"Unknown compression type [{compression_type}] is received in telemetry "
                f"request from [{iid}]",
            )
        if payload is not None and len(payload) > self.telemetry_max_bytes:
            raise TelemetryError(
                ErrorCode.TELEMETRY_TOO_LARGE,
                f"Telemetry request from [{iid}] is larger than the maximum allowed size "
                f"[{self.telemetry_max_bytes}]",
            )

    def _record(self, inst: ClientInstance, data: otlp.MetricsData) -> None:
        self.pushes += 1
        with self.lock:
            inst.pushes += 1
            if data.resource:
                inst.resource = dict(data.resource)
            for metric in data.metrics:
                if not metric.name:
                    continue
                for point in metric.points:
                    key = (metric.name, tuple(sorted(point.attributes.items())))
                    current = inst.series.get(key)
                    if current is None:
                        if len(inst.series) >= MAX_POINTS_PER_INSTANCE:
                            continue
                        current = inst.series[key] = SeriesValue(
                            metric.kind, metric.monotonic, description=metric.description
                        )
                    delta = metric.temporality == otlp.DELTA
                    if metric.kind == otlp.GAUGE or (metric.kind == otlp.SUM and not delta):
                        current.value = point.value
                    elif metric.kind == otlp.SUM:
                        current.value += point.value
                    elif delta:  # histograms: delta count and sum accumulate
                        current.value += point.value
                        current.count = (current.count or 0) + (point.count or 0)
                    else:
                        current.value = point.value
                        current.count = point.count

    def snapshot(self) -> list[tuple[ClientInstance, list[tuple[SeriesKey, SeriesValue]]]]:
        """The live instances that pushed, each with a copy of its series (any thread)."""
        self._expire(self._clock())
        with self.lock:
            return [
                (inst, [(k, replace(v)) for k, v in inst.series.items()])
                for inst in self.instances.values()
                if inst.series
            ]
