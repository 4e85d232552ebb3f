"""Prometheus metrics scraped from the real endpoint after real client traffic: the counts match;
lag, ISR and partition gauges follow what happened; the admin endpoint lists itself; the
Grafana dashboard queries only metrics the broker exports."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import confluent_kafka as ck
from kafka.protocol.metadata import ApiVersionsRequest
from prometheus_client.parser import text_string_to_metric_families

from odradek.testing import Broker, Cluster
from odradek.testing.cluster import FAST_FAILOVER
from odradek.testing.raw import RawClient

DASHBOARD = Path(__file__).resolve().parents[2] / "docs" / "grafana" / "odradek.json"


def scrape_text(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as resp:
        return resp.read().decode()


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(scrape_text(port)):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def exported_names(text: str) -> set[str]:
    """Every series name the exposition can carry, from its families' types (a family with no
    samples yet still declares itself)."""
    suffixes = {
        "counter": ("_total",),
        "histogram": ("_bucket", "_sum", "_count"),
        "summary": ("_sum", "_count", ""),
    }
    names = set()
    for family in text_string_to_metric_families(text):
        names.update(family.name + s for s in suffixes.get(family.type, ("",)))
        names.update(s.name for s in family.samples)
    return names


def wait_for(predicate, what: str, timeout: float = 20.0):
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def produce(bootstrap: str, topic: str, per_partition: dict[int, int], **conf) -> None:
    producer = ck.Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **conf})
    for partition, n in per_partition.items():
        for i in range(n):
            producer.produce(topic, value=b"x" * 100, key=b"k%d" % i, partition=partition)
    assert producer.flush(15) == 0


def test_metrics_count_what_clients_did():
    with Broker(topics={"clicks": 2}, config={"metrics.listen": "127.0.0.1:0"}) as broker:
        port = broker.server.metrics.port
        produce(broker.bootstrap, "clicks", {0: 13, 1: 12})
        consumer = ck.Consumer(
            {"bootstrap.servers": broker.bootstrap, "group.id": "m", "enable.auto.commit": False}
        )
        consumer.assign([ck.TopicPartition("clicks", p, 0) for p in (0, 1)])
        got = 0
        deadline = time.monotonic() + 15
        while got < 25 and time.monotonic() < deadline:
            got += sum(1 for m in consumer.consume(100, 0.5) if not m.error())
        consumer.close()
        assert got == 25
        # a metadata request for an illegal topic name shows up as an error count
        from kafka import KafkaAdminClient

        admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
        try:
            admin.describe_topics(["bad name!"])
        except Exception:
            pass
        admin.close()
        # a connection open while scraping (the clients above may all be gone by then)
        with RawClient(broker.bootstrap) as raw:
            raw.request(ApiVersionsRequest(), 0)
            text = scrape_text(port)
            m = scrape(port)
        topic = (("topic", "clicks"),)
        assert m[("odradek_topic_records_in_total", topic)] == 25
        assert m[("odradek_topic_records_out_total", topic)] == 25
        assert m[("odradek_topic_bytes_in_total", topic)] > 25 * 100
        assert (
            m[("odradek_topic_bytes_out_total", topic)]
            >= m[("odradek_topic_bytes_in_total", topic)]
        )
        assert m[("odradek_requests_total", (("api", "produce"),))] >= 1
        assert m[("odradek_requests_total", (("api", "metadata"),))] >= 1
        assert m[("odradek_request_latency_seconds_count", (("api", "fetch"),))] >= 1
        assert m[("odradek_partitions", ())] >= 2
        assert m[("odradek_log_size_bytes", topic)] > 0
        assert m[("odradek_connections", ())] >= 1
        assert (
            m[("odradek_errors_total", (("api", "metadata"), ("code", "INVALID_TOPIC_EXCEPTION")))]
            >= 1
        )
        # every request is timed in the queue too
        assert (
            m[("odradek_request_queue_time_seconds_count", (("api", "produce"),))]
            == m[("odradek_requests_total", (("api", "produce"),))]
        )
        # a standalone broker leads everything, fully replicated, nothing offline
        assert m[("odradek_leader_partitions", ())] == m[("odradek_partitions", ())]
        assert m[("odradek_under_replicated_partitions", ())] == 0
        assert m[("odradek_under_min_isr_partitions", ())] == 0
        assert m[("odradek_offline_partitions", ())] == 0
        assert m[("odradek_isr_shrinks_total", ())] == 0
        # the process, under Prometheus's standard names
        assert m[("process_resident_memory_bytes", ())] > 1_000_000
        assert m[("process_open_fds", ())] >= 3
        assert m[("process_cpu_seconds_total", ())] > 0
        assert m[("process_max_fds", ())] >= m[("process_open_fds", ())]
        # no prometheus_client `_created` clutter, in either exposition format
        assert "_created" not in text
        req = urllib.request.Request(
            f"http://127.0.0.1:{port}/metrics",
            headers={"Accept": "application/openmetrics-text; version=1.0.0"},
        )
        with urllib.request.urlopen(req, timeout=5) as resp:
            assert "openmetrics" in resp.headers["Content-Type"]
            om = resp.read().decode()
        assert "odradek_topic_bytes_in_total" in om and "_created" not in om


def test_queue_time_counts_a_request_held_before_its_handler():
    """`odradek fault delay` holds a produce between its last byte and its handler: that is
    queue time (Kafka's RequestQueueTimeMs), not handler latency."""
    config = {"metrics.listen": "127.0.0.1:0", "odradek.admin.listen": "127.0.0.1:0"}
    with Broker(topics={"q": 1}, config=config) as broker:
        port = broker.server.metrics.port
        admin = broker.call(lambda s: s.admin_http.url)
        subprocess.run(
            [sys.executable, "-m", "odradek", "fault", "delay", "produce", "300", "--admin", admin],
            check=True,
            capture_output=True,
            timeout=60,
        )
        produce(broker.bootstrap, "q", {0: 1})
        m = scrape(port)
        api = (("api", "produce"),)
        held = (
            m[("odradek_request_queue_time_seconds_count", api)]
            - m[("odradek_request_queue_time_seconds_bucket", (("api", "produce"), ("le", "0.25")))]
        )
        assert held == 1  # the delayed produce, and only it, waited 300 ms or more
        assert m[("odradek_request_queue_time_seconds_sum", api)] >= 0.3


def test_queue_time_is_each_requests_own_when_the_next_arrives_meanwhile():
    """Reading goes on while a request is handled, so the next request on the connection can be
    complete before the held one is handled: each request's queue time runs from its own last
    byte (the held one's was measured from the later request's, so under 0.25 s here)."""
    config = {"metrics.listen": "127.0.0.1:0"}
    with Broker(config=config) as broker, RawClient(broker.bootstrap) as raw:
        broker.delay("api_versions", 300)
        _, first = raw.encode(ApiVersionsRequest(), 0)
        raw.send(first)
        deadline = time.monotonic() + 10
        while broker.call(lambda s: s.faults.injected) < 1:  # cut, and held
            assert time.monotonic() < deadline, "the delay was never applied"
            time.sleep(0.01)
        time.sleep(0.1)  # the next request comes 0.1 s into the hold
        _, second = raw.encode(ApiVersionsRequest(), 0)
        raw.send(second)
        raw.read_frame()
        raw.read_frame()
        m = scrape(broker.server.metrics.port)
        api = (("api", "api_versions"),)
        bucket = ("odradek_request_queue_time_seconds_bucket", (*api, ("le", "0.25")))
        assert m[("odradek_request_queue_time_seconds_count", api)] == 2
        assert m[("odradek_request_queue_time_seconds_count", api)] - m[bucket] == 1


def test_consumer_group_lag_per_partition():
    config = {"metrics.listen": "127.0.0.1:0", "group.initial.rebalance.delay.ms": "0"}
    with Broker(topics={"orders": 2}, config=config) as broker:
        port = broker.server.metrics.port
        produce(broker.bootstrap, "orders", {0: 15, 1: 9})
        consumer = ck.Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": "billing",
                "enable.auto.commit": False,
            }
        )
        consumer.commit(
            offsets=[ck.TopicPartition("orders", 0, 4), ck.TopicPartition("orders", 1, 9)],
            asynchronous=False,
        )

        def series(name: str, partition: int) -> tuple[str, tuple]:
            labels = (("group", "billing"), ("partition", str(partition)), ("topic", "orders"))
            return (name, labels)

        m = scrape(port)
        assert m[series("odradek_consumer_group_committed_offset", 0)] == 4
        assert m[series("odradek_consumer_group_lag", 0)] == 11
        assert m[series("odradek_consumer_group_lag", 1)] == 0
        # more records raise the lag at once: it is computed when scraped
        produce(broker.bootstrap, "orders", {1: 5})
        assert scrape(port)[series("odradek_consumer_group_lag", 1)] == 5
        # a member of the group that consumes to the end and commits brings it to 0
        consumer.subscribe(["orders"])
        got = 0
        deadline = time.monotonic() + 20
        while got < 16 and time.monotonic() < deadline:
            got += sum(1 for msg in consumer.consume(100, 0.5) if not msg.error())
        assert got == 16
        consumer.commit(asynchronous=False)
        consumer.close()
        m = scrape(port)
        assert m[series("odradek_consumer_group_lag", 0)] == 0
        assert m[series("odradek_consumer_group_lag", 1)] == 0
        assert m[series("odradek_consumer_group_committed_offset", 1)] == 14
        assert m[("odradek_groups", ())] >= 1
        assert m[("odradek_group_rebalances_total", ())] >= 1


def test_isr_shrink_expand_under_replicated_and_offline_in_a_cluster():
    config = {**FAST_FAILOVER, "metrics.listen": "127.0.0.1:0"}
    with Cluster(brokers=3, topics={"solo": (3, 1)}, config=config) as cluster:
        cluster.create_topic("orders", 1, 3, {"min.insync.replicas": "3"})
        ports = {n: cluster.call(lambda c, n=n: c.brokers[n].metrics.port) for n in range(3)}
        leader = cluster.wait_for_leader("orders")
        follower = next(n for n in cluster.partition("orders").replicas if n != leader)
        m = scrape(ports[leader])
        assert m[("odradek_under_replicated_partitions", ())] == 0
        assert m[("odradek_leader_partitions", ())] >= 1
        shrinks = m[("odradek_isr_shrinks_total", ())]
        expands = m[("odradek_isr_expands_total", ())]

        # it stops fetching, falls behind the next records, and the leader drops it from the ISR
        cluster.cut_off_peers(follower)
        produce(cluster.address(leader), "orders", {0: 5}, acks=1)
        cluster.wait_for_isr("orders", size=2)
        m = scrape(ports[leader])
        assert m[("odradek_under_replicated_partitions", ())] >= 1
        assert m[("odradek_under_min_isr_partitions", ())] >= 1
        assert m[("odradek_isr_shrinks_total", ())] >= shrinks + 1

        cluster.heal()  # it catches up and is taken back
        cluster.wait_for_isr("orders", size=3)
        assert scrape(ports[leader])[("odradek_isr_expands_total", ())] >= expands + 1
        wait_for(
            lambda: scrape(ports[leader])[("odradek_under_replicated_partitions", ())] == 0,
            "no under-replicated partition once healed",
        )

        # the single replica of one "solo" partition goes: that partition is offline, as the
        # controller (the lowest live id) reports; the other brokers report 0
        victim = next(
            n for n in (1, 2) if n in {cluster.partition("solo", i).replicas[0] for i in range(3)}
        )
        cluster.kill(victim)
        controller = 0

        def offline() -> dict[int, float]:
            return {
                n: scrape(ports[n])[("odradek_offline_partitions", ())]
                for n in (0, 1, 2)
                if n != victim
            }

        wait_for(lambda: offline()[controller] >= 1, "the controller to count an offline one")
        counts = offline()
        solo_gone = sum(1 for i in range(3) if cluster.partition("solo", i).replicas == [victim])
        assert counts[controller] == solo_gone
        assert sum(counts.values()) == solo_gone


def test_admin_endpoint_lists_its_endpoints():
    config = {"metrics.listen": "127.0.0.1:0", "odradek.admin.listen": "127.0.0.1:0"}
    with Broker(config=config) as broker:
        base = broker.call(lambda s: s.admin_http.url)
        with urllib.request.urlopen(base + "/", timeout=5) as resp:
            assert resp.headers["Content-Type"] == "application/json"
            index = json.load(resp)
        listed = {(e["method"], e["path"]) for e in index["endpoints"]}
        assert {("GET", "/"), ("GET", "/health"), ("POST", "/faults/fail")} <= listed
        assert all(e["description"] for e in index["endpoints"])
        for method, path in sorted(listed):  # every GET it lists answers
            if method == "GET":
                with urllib.request.urlopen(base + path, timeout=5) as resp:
                    assert resp.status == 200
                    json.load(resp)
        # and it points at the metrics
        with urllib.request.urlopen(index["metrics"], timeout=5) as resp:
            assert "odradek_requests" in resp.read().decode()
    with Broker(config={"odradek.admin.listen": "127.0.0.1:0"}) as broker:
        base = broker.call(lambda s: s.admin_http.url)
        with urllib.request.urlopen(base, timeout=5) as resp:
            assert json.load(resp)["metrics"] is None


# -- the Grafana dashboard ----------------------------------------------------------------------

PROMQL_WORDS = {
    "by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool",
    "and", "or", "unless", "inf", "nan",
}  # fmt: skip


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL (or Grafana label_values) query reads."""
    expr = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)  # strings
    expr = re.sub(r"\{[^}]*\}", "", expr)  # label matchers
    expr = re.sub(r"\[[^\]]*\]", "", expr)  # ranges
    expr = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", "", expr)
    expr = re.sub(r"\$\{?\w+\}?", "", expr)  # dashboard variables
    expr = re.sub(r"^\s*label_values\(([^,]*),[^)]*\)", r"\1", expr)  # label_values(m, label)
    names = set()
    for match in re.finditer(r"(?<![\w.])[A-Za-z_:][\w:]*", expr):
        word = match.group(0)
        follows = expr[match.end() :].lstrip()
        if follows.startswith("(") or word.lower() in PROMQL_WORDS:
            continue  # a function or keyword
        names.add(word)
    return names


def dashboard_queries(dashboard: dict) -> list[str]:
    queries = []

    def panels(items):
        for panel in items:
            yield panel
            yield from panels(panel.get("panels", []))

    for panel in panels(dashboard["panels"]):
        queries += [t["expr"] for t in panel.get("targets", []) if t.get("expr")]
    for var in dashboard["templating"]["list"]:
        if var["type"] == "query":
            q = var["query"]
            queries.append(q["query"] if isinstance(q, dict) else q)
    return queries


def test_metric_names_of_promql():
    assert metric_names(
        'histogram_quantile(0.99, sum by (le, api) (rate(a_bucket{x=~"$y"}[$__rate_interval])))'
    ) == {"a_bucket"}
    assert metric_names("sum(b) / on(instance) group_left() c offset 5m") == {"b", "c"}
    assert metric_names('label_values(d{instance=~"$instance"}, topic)') == {"d"}


def test_grafana_dashboard_uses_only_exported_metrics():
    dashboard = json.loads(DASHBOARD.read_text())
    queries = dashboard_queries(dashboard)
    assert len(queries) >= 20
    used = set().union(*(metric_names(q) for q in queries))
    config = {"metrics.listen": "127.0.0.1:0", "group.initial.rebalance.delay.ms": "0"}
    with Broker(topics={"t": 1}, config=config) as broker:
        produce(broker.bootstrap, "t", {0: 3})
        exported = exported_names(scrape_text(broker.server.metrics.port))
    assert used - exported == set(), (
        f"the dashboard queries metrics nobody exports: {used - exported}"
    )
    # and it covers what issue 13 asked for
    for name in (
        "odradek_consumer_group_lag",
        "odradek_under_replicated_partitions",
        "odradek_offline_partitions",
        "odradek_isr_shrinks_total",
        "odradek_isr_expands_total",
        "odradek_request_queue_time_seconds_bucket",
        "odradek_topic_bytes_in_total",
        "odradek_topic_bytes_out_total",
        "process_cpu_seconds_total",
        "process_resident_memory_bytes",
        "process_open_fds",
    ):
        assert name in used, name
    # every panel has a data source and a unique id; variables the queries use are defined
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    defined = {v["name"] for v in dashboard["templating"]["list"]} | {"__rate_interval"}
    for q in queries:
        for var in re.findall(r"\$\{?(\w+)", q):
            assert var in defined, (var, q)
