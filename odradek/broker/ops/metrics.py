"""Prometheus metrics (`metrics.listen=HOST:PORT` or `odradek serve --metrics HOST:PORT`).

Kafka's BrokerTopicMetrics, RequestMetrics and ReplicaManager/controller gauges, as Prometheus
series: bytes and records in/out per topic, requests, their latency and queue time per API,
errors per API and code, open connections, partitions (led, under-replicated, under min ISR,
offline), ISR shrinks and expands, log size per topic, groups, rebalances and consumer-group lag
per partition, and the process's CPU, memory and open files (`process_*`, as every Prometheus
client names them). Counters carry no `_created` series.

Gauges read broker state at scrape time (in prometheus_client's HTTP thread, from snapshots of
the dicts), so lag and partition counts cost nothing on the request path. Each broker has its
own registry, so several in-process brokers do not mix (the process_* series are the same
process's for each). Nothing here runs unless metrics are enabled.
"""

from __future__ import annotations

import logging
import os
import re
import struct
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, TypeVar
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Histogram,
    ProcessCollector,
    start_http_server,
)
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric

from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode
from odradek.wire.regions import FileRegion

if TYPE_CHECKING:
    from odradek.broker.partitions.partition import Partition
    from odradek.broker.server import Broker
    from odradek.coordinator.group.coordinator import GroupCoordinator

log = logging.getLogger(__name__)

K = TypeVar("K")
V = TypeVar("V")

_PREFIX = struct.Struct(">qi8xi")  # base_offset, batch_length, (epoch, magic, crc), delta-field
_BATCH_PREFIX = 27


def _api_name(key: int) -> str:
    try:
        return ApiKey(key).name.lower()
    except ValueError:
        return str(key)


class _StateCollector:
    """Gauges read from broker state at scrape time."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def collect(self) -> Iterator[Metric]:
        b = self.broker
        conns = GaugeMetricFamily("odradek_connections", "Open client connections")
        conns.add_metric([], len(b.connections))
        parts = GaugeMetricFamily("odradek_partitions", "Partitions hosted by this broker")
        local = list(b.topics.partitions.items())
        parts.add_metric([], len(local))
        size = GaugeMetricFamily(
            "odradek_log_size_bytes", "Bytes on disk per topic", labels=["topic"]
        )
        sizes: dict[str, int] = {}
        for (topic, _idx), part in local:
            sizes[topic] = sizes.get(topic, 0) + part.log.size_bytes
        for topic, n in sorted(sizes.items()):
            size.add_metric([topic], n)
        yield conns
        yield parts
        yield size
        yield from _replica_state(b, [part for _key, part in local])
        groups = b.group_coordinator
        if groups is not None:
            count = GaugeMetricFamily("odradek_groups", "Consumer groups known to the coordinator")
            count.add_metric([], _group_count(groups))
            yield count
            rebalances = getattr(groups, "rebalances", None)
            if rebalances is not None:
                reb = CounterMetricFamily(
                    "odradek_group_rebalances", "Rebalances completed since start"
                )
                reb.add_metric([], rebalances)
                yield reb
            yield from _group_lag(b, groups)


def _replica_state(b: Broker, local: list[Partition]) -> Iterator[Metric]:
    """Kafka's ReplicaManager gauges (LeaderCount, UnderReplicatedPartitions,
    UnderMinIsrPartitionCount), IsrShrinks/IsrExpands, and the controller's
    OfflinePartitionsCount."""
    leaders = under = under_min = 0
    for part in local:
        if not part.is_leader:
            continue
        leaders += 1
        isr = len(part.isr)
        if isr < len(part.replicas):
            under += 1
        if isr < part.log.config.min_insync_replicas:
            under_min += 1
    for name, text, value in (
        ("odradek_leader_partitions", "Partitions this broker leads", leaders),
        (
            "odradek_under_replicated_partitions",
            "Partitions led here whose ISR is smaller than their replica set",
            under,
        ),
        (
            "odradek_under_min_isr_partitions",
            "Partitions led here whose ISR is smaller than min.insync.replicas",
            under_min,
        ),
        (
            "odradek_offline_partitions",
            "Partitions without a live leader (counted by the controller, 0 elsewhere, "
            "as Kafka's OfflinePartitionsCount: sum over brokers)",
            _offline_partitions(b),
        ),
    ):
        gauge = GaugeMetricFamily(name, text)
        gauge.add_metric([], value)
        yield gauge
    changes = getattr(b.replication, "isr_changes", None) or {}
    for kind, text in (("shrink", "ISR shrinks"), ("expand", "ISR expansions")):
        counter = CounterMetricFamily(
            f"odradek_isr_{kind}s", f"{text} made by this broker as leader"
        )
        counter.add_metric([], changes.get(kind, 0))
        yield counter


def _offline_partitions(b: Broker) -> int:
    if b.controller_id != b.node_id:
        return 0
    live = set(b.live_brokers())
    offline = 0
    for info in list(b.store.topics.values()):
        for state in list(info.partitions):
            if state.leader < 0 or state.leader not in live:
                offline += 1
    return offline


def _group_lag(b: Broker, groups: GroupCoordinator) -> Iterator[Metric]:
    """Committed offset and lag (high watermark - committed) of each partition a group
    coordinated here has committed, for the partitions this broker hosts (a follower's high
    watermark trails the leader's by at most one fetch)."""
    labels = ["group", "topic", "partition"]
    lag = GaugeMetricFamily(
        "odradek_consumer_group_lag",
        "Records between a group's committed offset and the partition's high watermark",
        labels=labels,
    )
    committed = GaugeMetricFamily(
        "odradek_consumer_group_committed_offset", "A group's committed offset", labels=labels
    )
    topics = b.topics
    for group_id, group in sorted(_snapshot(groups.machine.groups)):
        for (topic, index), om in sorted(_snapshot(group.offsets)):
            part = topics.get(topic, index)
            if part is None or om.offset < 0:
                continue
            key = [group_id, topic, str(index)]
            committed.add_metric(key, om.offset)
            lag.add_metric(key, max(0, part.high_watermark - om.offset))
    yield lag
    yield committed


def _snapshot(d: dict[K, V]) -> list[tuple[K, V]]:
    """The items of a dict the event loop may be changing while we scrape."""
    for _ in range(10):
        try:
            return list(d.items())
        except RuntimeError:  # changed size during iteration
            continue
    return []


def _group_count(groups: object) -> int:
    for attr in ("group_count", "groups"):
        value = getattr(groups, attr, None)
        if callable(value):
            value = value()
        if isinstance(value, int):
            return value
        if value is not None:
            try:
                return len(value)
            except TypeError:
                continue
    return 0


class _WithoutCreated:
    """A registry's metrics without prometheus_client's `_created` series (one per counter,
    histogram and label set: clutter no dashboard uses). A filter rather than the library's
    process-wide `disable_created_metrics()`, which would change the metrics of an application
    embedding a broker too."""

    def __init__(self, inner: CollectorRegistry) -> None:
        self.inner = inner

    def collect(self) -> Iterator[Metric]:
        for metric in self.inner.collect():
            if metric.type in _HAS_CREATED:
                metric.samples = [s for s in metric.samples if not s.name.endswith("_created")]
            yield metric


_HAS_CREATED = frozenset({"counter", "histogram", "summary", "gaugehistogram"})


class _QuotaCollector:
    """Client quota throttling per quota type (Kafka's per-client `throttle-time` sensors,
    summed): the throttle time handed out and the number of throttled responses."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def collect(self) -> Iterator[Metric]:
        quotas = self.broker.quotas
        time_ms = CounterMetricFamily(
            "odradek_quota_throttle_time_ms",
            "Throttle time given to clients over a quota (ms), per quota type",
            labels=["quota"],
        )
        count = CounterMetricFamily(
            "odradek_quota_throttled_responses",
            "Responses throttled for a client quota, per quota type",
            labels=["quota"],
        )
        for qt in quotas.types():
            time_ms.add_metric([qt.key], qt.throttle_ms_total)
            count.add_metric([qt.key], qt.throttled)
        yield time_ms
        yield count


_LABEL_CHARS = re.compile(r"[^a-zA-Z0-9_]")
_CLIENT_LABELS = ("client_id", "client_instance_id")


def client_metric_name(name: str) -> str:
    """A pushed metric's Prometheus name: `odradek_client_` + the OTLP name without Kafka's
    `org.apache.kafka.` prefix, dots and other characters as `_`
    (org.apache.kafka.producer.node.request.latency.avg ->
    odradek_client_producer_node_request_latency_avg)."""
    if name.startswith("org.apache.kafka."):
        name = name[len("org.apache.kafka.") :]
    return "odradek_client_" + _LABEL_CHARS.sub("_", name)


class _ClientTelemetryCollector:
    """KIP-714 metrics pushed by clients (PushTelemetry), one series per client instance and
    data point, labelled client_id and client_instance_id plus the point's own attributes
    (node_id, topic, partition ...). Gauges and non-monotonic sums are gauges, monotonic sums
    counters (deltas accumulated), histograms and summaries their _count and _sum. Also the
    broker's side: instances known, pushes, throttled and unknown-subscription requests."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker

    def collect(self) -> Iterator[Metric]:
        telemetry = self.broker.telemetry
        snapshot = telemetry.snapshot()
        families: dict[str, Metric] = {}
        for inst, series in snapshot:
            client_id = inst.attributes.get("client_id") or inst.resource.get("client_id") or ""
            base = {"client_id": client_id, "client_instance_id": str(inst.instance_id)}
            for (name, attrs), value in series:
                prom = client_metric_name(name)
                labels = dict(base)
                for k, v in attrs:
                    label = _LABEL_CHARS.sub("_", k)
                    ok = label and not label[0].isdigit() and not label.startswith("__")
                    if ok and label not in labels:
                        labels[label] = v
                family = families.get(prom)
                if family is None:
                    if value.kind in ("histogram", "exp_histogram", "summary"):
                        kind = "summary"
                    elif value.kind == "sum" and value.monotonic:
                        kind = "counter"
                    else:
                        kind = "gauge"
                    family_name = prom
                    if kind == "counter" and prom.endswith("_total"):
                        family_name = prom[: -len("_total")]  # no ..._total_total
                    family = families[prom] = Metric(
                        family_name, value.description or f"client metric {name}", kind
                    )
                if family.type == "summary":
                    family.add_sample(prom + "_count", labels, float(value.count or 0))
                    family.add_sample(prom + "_sum", labels, value.value)
                elif family.type == "counter":
                    family.add_sample(family.name + "_total", labels, value.value)
                else:
                    family.add_sample(prom, labels, value.value)
        yield from families.values()
        instances = GaugeMetricFamily(
            "odradek_client_metrics_instances",
            "Client instances known to the broker's client metrics manager (KIP-714)",
        )
        instances.add_metric([], len(telemetry.instances))
        yield instances
        for metric, help_text, n in (
            (
                "odradek_client_metrics_pushes",
                "PushTelemetry requests with metrics accepted",
                telemetry.pushes,
            ),
            (
                "odradek_client_metrics_throttled_requests",
                "Telemetry requests refused as before the push interval",
                telemetry.throttled_requests,
            ),
            (
                "odradek_client_metrics_unknown_subscription_requests",
                "PushTelemetry requests with an old subscription id",
                telemetry.unknown_subscription_requests,
            ),
        ):
            counter = CounterMetricFamily(metric, help_text)
            counter.add_metric([], n)
            yield counter


class BrokerMetrics:
    def __init__(self, broker: Broker, listen: str) -> None:
        self.broker = broker
        host, _, port = listen.rpartition(":")
        self.host = host or "127.0.0.1"
        self.port = int(port)
        self.metrics = CollectorRegistry()  # where the series live
        r = self.metrics
        self.bytes_in = Counter(
            "odradek_topic_bytes_in", "Bytes appended by producers", ["topic"], registry=r
        )
        self.records_in = Counter(
            "odradek_topic_records_in", "Records appended by producers", ["topic"], registry=r
        )
        self.bytes_out = Counter(
            "odradek_topic_bytes_out", "Record bytes sent to fetchers", ["topic"], registry=r
        )
        self.records_out = Counter(
            "odradek_topic_records_out",
            "Records in complete batches sent to fetchers",
            ["topic"],
            registry=r,
        )
        # Kafka's FetchMessageConversionsPerSec, and the bytes: old (Fetch v0-3) clients
        self.fetch_conversions = Counter(
            "odradek_topic_fetch_message_conversions",
            "Records down-converted to message format 0/1 for Fetch v0-3",
            ["topic"],
            registry=r,
        )
        self.fetch_conversion_bytes = Counter(
            "odradek_topic_fetch_message_conversion_bytes",
            "Bytes of down-converted (message format 0/1) records sent for Fetch v0-3",
            ["topic"],
            registry=r,
        )
        # Kafka's ProduceMessageConversionsPerSec: records old (Produce v0-2) producers sent as
        # message format 0/1, up-converted to v2 batches
        self.produce_conversions = Counter(
            "odradek_topic_produce_message_conversions",
            "Records up-converted from message format 0/1 for Produce v0-2",
            ["topic"],
            registry=r,
        )
        self.requests = Counter("odradek_requests", "Requests handled", ["api"], registry=r)
        self.latency = Histogram(
            "odradek_request_latency_seconds", "Request handling time", ["api"], registry=r
        )
        self.queue_time = Histogram(
            "odradek_request_queue_time_seconds",
            "Time from a request's last byte read to its handler starting (Kafka's "
            "RequestQueueTimeMs: decoding and waiting behind the connection's earlier requests)",
            ["api"],
            registry=r,
        )
        self.errors = Counter("odradek_errors", "Error codes returned", ["api", "code"], registry=r)
        r.register(_StateCollector(broker))
        r.register(_QuotaCollector(broker))
        r.register(_ClientTelemetryCollector(broker))
        ProcessCollector(registry=r)
        self.registry = CollectorRegistry()  # what is served: the above, filtered
        self.registry.register(_WithoutCreated(r))
        self._server: WSGIServer | None = None
        self._thread: threading.Thread | None = None

    async def start(self) -> None:
        server, self._thread = start_http_server(self.port, self.host, self.registry)
        self._server = server
        self.port = server.server_address[1]
        log.info("metrics on http://%s:%d/metrics", self.host, self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def abandon(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    # -- recording ------------------------------------------------------------------------------

    def request(self, api_key: int, seconds: float, response: object, queued: float = 0.0) -> None:
        api = _api_name(api_key)
        self.requests.labels(api).inc()
        self.latency.labels(api).observe(seconds)
        self.queue_time.labels(api).observe(queued)
        if response is not None and not isinstance(response, list):
            for code in _error_codes(response, 3):
                if code:
                    self.error(api_key, code)

    def error(self, api_key: int, code: int) -> None:
        try:
            name = ErrorCode(code).name
        except ValueError:
            name = str(code)
        self.errors.labels(_api_name(api_key), name).inc()

    def produced(self, topic: str, nbytes: int, records: int) -> None:
        self.bytes_in.labels(topic).inc(nbytes)
        self.records_in.labels(topic).inc(records)

    def up_converted(self, topic: str, records: int) -> None:
        """Records of a Produce v0-2 message set appended as a v2 batch."""
        self.produce_conversions.labels(topic).inc(records)

    def fetched(self, topic: str, region: FileRegion) -> None:
        self.bytes_out.labels(topic).inc(region.length)
        self.records_out.labels(topic).inc(_records_in_region(region))

    def down_converted(self, topic: str, records: int, nbytes: int) -> None:
        """Records converted for a Fetch v0-3 and the bytes sent of them, as they are written."""
        self.bytes_out.labels(topic).inc(nbytes)
        self.records_out.labels(topic).inc(records)
        self.fetch_conversions.labels(topic).inc(records)
        self.fetch_conversion_bytes.labels(topic).inc(nbytes)


def _records_in_region(region: FileRegion) -> int:
    """Records in the complete batches of a region, from batch headers only."""
    fd = region.file.fileno()
    pos = region.position
    end = region.position + region.length
    count = 0
    while pos + _BATCH_PREFIX <= end:
        raw = os.pread(fd, 61, pos)
        if len(raw) < 61:
            break
        _base, length, _delta = _PREFIX.unpack_from(raw, 0)
        if pos + 12 + length > end:
            break
        count += struct.unpack_from(">i", raw, 57)[0]
        pos += 12 + length
    return count


def _error_codes(obj: object, depth: int) -> Iterator[int]:
    own = getattr(obj, "error_codes", None)
    if callable(own):  # a response kept as bytes in part (Metadata's topics) says them itself
        yield from own()
        return
    code = getattr(obj, "error_code", None)
    if isinstance(code, int):
        yield code
    if depth <= 0:
        return
    for name in getattr(type(obj), "__slots__", ()):
        value = getattr(obj, name, None)
        if isinstance(value, list):
            for item in value:
                if hasattr(item, "__slots__"):
                    yield from _error_codes(item, depth - 1)
