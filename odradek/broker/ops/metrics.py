"""Prometheus metrics (`metrics.listen=HOST:PORT` or `odradek serve --metrics HOST:PORT`).

Kafka's BrokerTopicMetrics and RequestMetrics, as Prometheus series: bytes and records in/out
per topic, requests and their latency per API, errors per API and code, open connections,
partitions, log size per topic, groups and rebalances. Each broker has its own registry, so
several in-process brokers do not mix. Nothing here runs unless metrics are enabled.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from prometheus_client import CollectorRegistry, Counter, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily

from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode
from odradek.wire.regions import FileRegion

if TYPE_CHECKING:
    from odradek.broker.server import Broker

log = logging.getLogger(__name__)

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

    def collect(self) -> Iterator[GaugeMetricFamily]:
        b = self.broker
        conns = GaugeMetricFamily("odradek_connections", "Open client connections")
        conns.add_metric([], len(b.connections))
        parts = GaugeMetricFamily("odradek_partitions", "Partitions hosted by this broker")
        parts.add_metric([], len(b.topics.partitions))
        size = GaugeMetricFamily(
            "odradek_log_size_bytes", "Bytes on disk per topic", labels=["topic"]
        )
        sizes: dict[str, int] = {}
        for (topic, _idx), part in list(b.topics.partitions.items()):
            sizes[topic] = sizes.get(topic, 0) + part.log.size_bytes
        for topic, n in sorted(sizes.items()):
            size.add_metric([topic], n)
        yield conns
        yield parts
        yield size
        groups = b.group_coordinator
        if groups is not None:
            count = GaugeMetricFamily("odradek_groups", "Consumer groups known to the coordinator")
            count.add_metric([], _group_count(groups))
            yield count
            rebalances = getattr(groups, "rebalances", None)
            if rebalances is not None:
                reb = GaugeMetricFamily(
                    "odradek_group_rebalances", "Rebalances completed since start"
                )
                reb.add_metric([], rebalances)
                yield reb


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


class BrokerMetrics:
    def __init__(self, broker: Broker, listen: str) -> None:
        self.broker = broker
        host, _, port = listen.rpartition(":")
        self.host = host or "127.0.0.1"
        self.port = int(port)
        self.registry = CollectorRegistry()
        r = self.registry
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
        self.requests = Counter("odradek_requests", "Requests handled", ["api"], registry=r)
        self.latency = Histogram(
            "odradek_request_latency_seconds", "Request handling time", ["api"], registry=r
        )
        self.errors = Counter("odradek_errors", "Error codes returned", ["api", "code"], registry=r)
        r.register(_StateCollector(broker))
        # prometheus_client's (WSGIServer, Thread): the library's own annotations say no more
        self._server: Any = None
        self._thread: Any = None

    async def start(self) -> None:
        self._server, self._thread = start_http_server(self.port, self.host, self.registry)
        self.port = self._server.server_address[1]
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

    def request(self, api_key: int, seconds: float, response: object) -> None:
        api = _api_name(api_key)
        self.requests.labels(api).inc()
        self.latency.labels(api).observe(seconds)
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

    def fetched(self, topic: str, region: FileRegion) -> None:
        self.bytes_out.labels(topic).inc(region.length)
        self.records_out.labels(topic).inc(_records_in_region(region))


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
