"""KIP-714 client telemetry: ClientMetrics subscriptions managed with `odradek client-metrics`
(kafka-client-metrics.sh), confluent-kafka (librdkafka 2.16) pushing its metrics once a
subscription matches it, the metrics on the broker's Prometheus endpoint labelled by client id
and client instance id, unsubscribed clients told not to push; and the broker's
ClientMetricsManager rules (matching, subscription ids, throttling, terminating, sizes,
compression, delta accumulation, expiry) and the OTLP reader, as units."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import confluent_kafka as ck
import pytest
from prometheus_client.parser import text_string_to_metric_families

from odradek.broker.telemetry import manager as tm
from odradek.broker.telemetry import otlp
from odradek.testing import Broker
from odradek.testing.raw import RawClient
from odradek.wire import compression, protocol
from odradek.wire.errors import ErrorCode

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT_S = 60
WAIT_S = 20.0


# -- the broker, the CLI and a real client ----------------------------------------------------


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(topics={"t": 1}, config={"metrics.listen": "127.0.0.1:0"}) as b:
        yield b


def cli(broker: Broker, *args: str, status: int = 0) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO), "ODRADEK_BOOTSTRAP": broker.bootstrap}
    proc = subprocess.run(
        [sys.executable, "-m", "odradek", "client-metrics", *args],
        text=True,
        capture_output=True,
        timeout=RUN_TIMEOUT_S,
        env=env,
    )
    assert proc.returncode == status, (proc.stdout, proc.stderr)
    return proc


def scrape(broker: Broker) -> dict[str, list[tuple[dict[str, str], float]]]:
    port = broker.server.metrics.port
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        text = resp.read().decode()
    out: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out.setdefault(s.name, []).append((dict(s.labels), s.value))
    return out


def get_subscriptions(broker: Broker, client_id: str) -> object:
    with RawClient(broker.bootstrap) as raw:
        req = protocol.GetTelemetrySubscriptionsRequest(client_instance_id=tm.ZERO_UUID)
        cid = raw.next_id()
        req.with_header(correlation_id=cid, client_id=client_id)
        raw.send(req.encode(version=0, header=True, framed=True))
        payload = raw.read_frame()
        return protocol.GetTelemetrySubscriptionsResponse.decode(payload, version=0, header=True)


def test_subscription_cli_and_confluent_kafka_pushes_to_metrics(broker: Broker) -> None:
    # a client no subscription matches is told not to push: no metrics, the default interval
    resp = get_subscriptions(broker, "app-1")
    assert resp.error_code == 0 and resp.requested_metrics == []
    assert resp.push_interval_ms == tm.DEFAULT_INTERVAL_MS
    assert resp.client_instance_id not in (None, tm.ZERO_UUID)
    assert resp.accepted_compression_types == [4, 3, 1, 2]  # zstd, lz4, gzip, snappy
    assert resp.delta_temporality is True

    # Kafka's validation, from the broker, through the CLI
    bad = cli(broker, "--alter", "--name", "x", "--interval", "50", status=1)
    assert "interval must be between 100 and 3600000" in bad.stderr
    bad = cli(broker, "--alter", "--name", "x", "--match", "client_colour=red", status=1)
    assert "Illegal client matching pattern: client_colour=red" in bad.stderr
    bad = cli(broker, "--describe", "--interval", "5", status=1)
    assert "Option --describe can't be used with --interval" in bad.stderr

    out = cli(
        broker,
        "--alter",
        "--name",
        "apps",
        "--metrics",
        "org.apache.kafka.producer.",
        "--interval",
        "500",
        "--match",
        "client_id=app-.*,client_software_name=confluent-kafka-python",
    )
    assert out.stdout == "Altered client metrics config for apps.\n"
    assert cli(broker, "--list").stdout == "apps\n"
    described = cli(broker, "--describe", "--name", "apps").stdout
    assert described == (
        "Client metrics configs for apps are:\n"
        "  interval.ms=500\n"
        "  match=client_id=app-.*,client_software_name=confluent-kafka-python\n"
        "  metrics=org.apache.kafka.producer.\n"
    )
    # a raw client is no confluent-kafka-python: every selector must match
    assert get_subscriptions(broker, "app-1").requested_metrics == []

    producer = ck.Producer({"bootstrap.servers": broker.bootstrap, "client.id": "app-7"})
    other = ck.Producer({"bootstrap.servers": broker.bootstrap, "client.id": "other"})
    try:
        for p in (producer, other):
            for _ in range(5):
                p.produce("t", b"x")
            assert p.flush(15) == 0

        def pushed() -> list[tuple[dict[str, str], float]]:
            producer.poll(0.05)
            other.poll(0.05)
            series = scrape(broker).get("odradek_client_producer_request_latency_avg", [])
            return [s for s in series if s[0].get("client_id") == "app-7"]

        deadline = time.monotonic() + WAIT_S
        while not (found := pushed()):
            assert time.monotonic() < deadline, "app-7's metrics never reached /metrics"
        labels, _value = found[0]
        uuid.UUID(labels["client_instance_id"])  # labelled with the client's instance id
        metrics = scrape(broker)
        per_node = metrics["odradek_client_producer_node_request_latency_avg"]
        assert any(lbl.get("node_id") == "0" for lbl, _ in per_node)
        # only what the subscription asked for, and only from the client it matches
        clients = {
            lbl.get("client_id")
            for name, samples in metrics.items()
            if name.startswith("odradek_client_") and not name.startswith("odradek_client_metrics")
            for lbl, _ in samples
        }
        assert clients == {"app-7"}
        assert not any(n.startswith("odradek_client_consumer") for n in metrics)
        assert metrics["odradek_client_metrics_pushes_total"][0][1] >= 1
    finally:
        producer.flush(5)
        other.flush(5)

    assert cli(broker, "--delete", "--name", "apps").stdout == (
        "Deleted client metrics config for apps.\n"
    )
    assert cli(broker, "--list").stdout == ""
    assert get_subscriptions(broker, "app-1").requested_metrics == []


def test_all_metrics_subscription_and_list_config_resources(broker: Broker) -> None:
    out = cli(broker, "--alter", "--generate-name", "--metrics", "*", "--interval", "1000")
    name = out.stdout.removeprefix("Altered client metrics config for ").removesuffix(".\n")
    uuid.UUID(name)
    try:
        resp = get_subscriptions(broker, "anyone")
        assert resp.requested_metrics == ["*"] and resp.push_interval_ms == 1000
        with RawClient(broker.bootstrap) as raw:
            listed = raw.request(protocol.ListConfigResourcesRequest(resource_types=[]), 1)
            got = {(r.resource_type, r.resource_name) for r in listed.config_resources}
            assert {(16, name), (2, "t"), (4, "0")} <= got
            v0 = raw.request(protocol.ListConfigResourcesRequest(), 0)
            assert [r.resource_name for r in v0.config_resources] == [name]
    finally:
        cli(broker, "--delete", "--name", name)


# -- ClientMetricsManager ---------------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def manager(subs: dict[str, dict[str, str]]) -> tuple[tm.ClientMetricsManager, Clock]:
    clock = Clock()
    return tm.ClientMetricsManager(lambda: subs, 1000, clock=clock), clock


ATTRS: dict[str, str | None] = {
    tm.CLIENT_ID: "app-1",
    tm.CLIENT_SOFTWARE_NAME: "librdkafka",
    tm.CLIENT_SOFTWARE_VERSION: "2.16.0",
    tm.CLIENT_SOURCE_ADDRESS: "127.0.0.1",
    tm.CLIENT_SOURCE_PORT: "5555",
}


def payload(value: float, temporality: int = otlp.DELTA) -> bytes:
    data = otlp.MetricsData(
        {"client_id": "app-1"},
        [
            otlp.Metric(
                "org.apache.kafka.producer.record.count",
                otlp.SUM,
                monotonic=True,
                temporality=temporality,
                points=[otlp.DataPoint({"topic": "t"}, value)],
            ),
            otlp.Metric(
                "org.apache.kafka.producer.queue.size",
                otlp.GAUGE,
                points=[otlp.DataPoint({}, value)],
            ),
        ],
    )
    return otlp.encode_metrics_data(data)


def test_matching_union_interval_and_subscription_ids() -> None:
    subs = {
        "a": {
            "metrics": "org.apache.kafka.producer.",
            "interval.ms": "2000",
            "match": "client_id=app-.*",
        },
        "b": {"metrics": "org.apache.kafka.consumer.", "interval.ms": "700"},
        "c": {"metrics": "x.", "match": "client_id=app"},  # full match only: app-1 is not app
    }
    m, _clock = manager(subs)
    got = m.get_subscriptions(None, ATTRS)
    assert got.metrics == ["org.apache.kafka.consumer.", "org.apache.kafka.producer."]
    assert got.push_interval_ms == 700
    assert got.subscription_id == tm.subscription_id(set(got.metrics), 700, got.instance_id)
    other, _ = manager({"a": subs["a"]})
    assert other.get_subscriptions(None, {**ATTRS, tm.CLIENT_ID: "svc"}).metrics == []
    # "*" anywhere subscribes to everything
    star, _ = manager({"a": subs["a"], "s": {"metrics": "*"}})
    assert star.get_subscriptions(None, ATTRS).metrics == ["*"]


def test_throttle_unknown_subscription_terminating_size_compression() -> None:
    subs: dict[str, dict[str, str]] = {"all": {"metrics": "*", "interval.ms": "1000"}}
    m, clock = manager(subs)
    got = m.get_subscriptions(None, ATTRS)
    iid, sid = got.instance_id, got.subscription_id
    with pytest.raises(tm.TelemetryError) as e:
        m.get_subscriptions(iid, ATTRS)  # again inside the interval
    assert e.value.code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    m.push(iid, ATTRS, sid, False, compression.NONE, payload(3))  # right after a get: accepted
    with pytest.raises(tm.TelemetryError) as e:
        m.push(iid, ATTRS, sid, False, compression.NONE, payload(3))
    assert e.value.code == ErrorCode.THROTTLING_QUOTA_EXCEEDED
    clock.now += 1000
    with pytest.raises(tm.TelemetryError) as e:
        m.push(iid, ATTRS, sid ^ 1, False, compression.NONE, payload(3))
    assert e.value.code == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    clock.now += 1000
    with pytest.raises(tm.TelemetryError) as e:
        m.push(iid, ATTRS, sid, False, 9, payload(3))
    assert e.value.code == ErrorCode.UNSUPPORTED_COMPRESSION_TYPE
    clock.now += 1000
    with pytest.raises(tm.TelemetryError) as e:
        m.push(iid, ATTRS, sid, False, compression.NONE, b"\x00" * 1001)
    assert e.value.code == ErrorCode.TELEMETRY_TOO_LARGE
    clock.now += 1000
    m.push(iid, ATTRS, sid, False, compression.ZSTD, compression.compress(4, payload(4)))
    # deltas of a monotonic sum accumulate, gauges take the last value
    ((inst, series),) = m.snapshot()
    values = {name: v.value for (name, _attrs), v in series}
    assert values == {
        "org.apache.kafka.producer.record.count": 7.0,
        "org.apache.kafka.producer.queue.size": 4.0,
    }
    # a terminating push is accepted inside the interval; nothing after it is
    m.push(iid, ATTRS, sid, True, compression.GZIP, compression.compress(1, payload(1)))
    clock.now += 5000
    with pytest.raises(tm.TelemetryError) as e:
        m.push(iid, ATTRS, sid, False, compression.NONE, payload(1))
    assert e.value.code == ErrorCode.INVALID_REQUEST
    with pytest.raises(tm.TelemetryError) as e:
        m.push(tm.ZERO_UUID, ATTRS, sid, False, compression.NONE, None)
    assert e.value.code == ErrorCode.INVALID_REQUEST
    with pytest.raises(tm.TelemetryError) as e:
        m.push(uuid.uuid4(), ATTRS, sid, False, compression.NONE, b"\xff\xff")
    assert e.value.code in (ErrorCode.UNKNOWN_SUBSCRIPTION_ID, ErrorCode.INVALID_RECORD)


def test_changed_subscription_reevaluates_and_idle_instances_expire() -> None:
    subs: dict[str, dict[str, str]] = {"all": {"metrics": "*", "interval.ms": "1000"}}
    m, clock = manager(subs)
    got = m.get_subscriptions(None, ATTRS)
    subs["all"] = {"metrics": "org.apache.kafka.", "interval.ms": "1000"}
    clock.now += 1000
    with pytest.raises(tm.TelemetryError) as e:  # the client's id is now out of date
        m.push(got.instance_id, ATTRS, got.subscription_id, False, compression.NONE, payload(1))
    assert e.value.code == ErrorCode.UNKNOWN_SUBSCRIPTION_ID
    clock.now += 1000
    again = m.get_subscriptions(got.instance_id, ATTRS)
    assert again.metrics == ["org.apache.kafka."] and again.subscription_id != got.subscription_id
    m.push(got.instance_id, ATTRS, again.subscription_id, False, compression.NONE, payload(1))
    assert len(m.snapshot()) == 1
    clock.now += tm.DEFAULT_CACHE_EXPIRY_MS  # max(60 s, 3 x 1 s) without a request
    assert m.snapshot() == [] and not m.instances


def test_config_validation_messages() -> None:
    with pytest.raises(tm.ConfigError, match="Unknown client metrics configuration: colour"):
        tm.validate("s", {"colour": "red"})
    with pytest.raises(tm.ConfigError, match="Subscription name can't be empty"):
        tm.validate("", {"metrics": "*"})
    with pytest.raises(tm.ConfigError, match="Illegal client matching pattern: client_id"):
        tm.validate("s", {"match": "client_id"})
    with pytest.raises(tm.ConfigError, match="Illegal client matching pattern: client_id=\\["):
        tm.validate("s", {"match": "client_id=["})
    tm.validate("s", {"metrics": "", "interval.ms": "100", "match": "client_source_port=1.*"})


# -- the OTLP reader --------------------------------------------------------------------------


def test_otlp_round_trip_and_garbage() -> None:
    data = otlp.MetricsData(
        {"service.name": "svc", "client_id": "c"},
        [
            otlp.Metric("g", otlp.GAUGE, "a gauge", "ms", points=[otlp.DataPoint({"k": "v"}, 1.5)]),
            otlp.Metric(
                "s",
                otlp.SUM,
                monotonic=True,
                temporality=otlp.CUMULATIVE,
                points=[otlp.DataPoint({}, 10.0), otlp.DataPoint({"p": "1"}, 2.0)],
            ),
            otlp.Metric(
                "h",
                otlp.HISTOGRAM,
                temporality=otlp.DELTA,
                points=[otlp.DataPoint({"node_id": "3"}, 12.5, count=4)],
            ),
        ],
    )
    back = otlp.decode_metrics_data(otlp.encode_metrics_data(data))
    assert back.resource == data.resource
    assert [(m.name, m.kind, m.monotonic, m.temporality) for m in back.metrics] == [
        ("g", "gauge", False, 0),
        ("s", "sum", True, otlp.CUMULATIVE),
        ("h", "histogram", False, otlp.DELTA),
    ]
    assert back.metrics[0].description == "a gauge" and back.metrics[0].unit == "ms"
    assert [(p.attributes, p.value, p.count) for m in back.metrics for p in m.points] == [
        ({"k": "v"}, 1.5, None),
        ({}, 10.0, None),
        ({"p": "1"}, 2.0, None),
        ({"node_id": "3"}, 12.5, 4),
    ]
    for garbage in (b"\x0a\xff", b"\x0a\x05\x01", b"\x07", b"\x0a\x02\x12"):
        with pytest.raises(otlp.OtlpError):
            otlp.decode_metrics_data(garbage)
