"""`python -m bench --against kafka`: the pure-Python pieces (reading Kafka's perf tools' output,
the side-by-side table and its ratio column). The run itself starts a 1 GiB Kafka JVM and takes
minutes, so it belongs to bench/, not to the suite."""

from __future__ import annotations

import math

import pytest

from bench import runner
from bench.against import (
    KAFKA,
    ODRADEK,
    Measurement,
    Spec,
    TableRow,
    render_table,
    table_rows,
)
from bench.kafka_proc import (
    ToolError,
    parse_consumer_perf,
    parse_end_to_end,
    parse_producer_perf,
)

PRODUCER_OUT = (
    "148591 records sent, 29712.3 records/sec (29.02 MB/sec), 720.4 ms avg latency, "
    "1165.0 ms max latency.\n"
    "200000 records sent, 36456.434561 records/sec (35.60 MB/sec), 1107.70 ms avg latency, "
    "1993.00 ms max latency, 1284 ms 50th, 1903 ms 95th, 1981 ms 99th, 1993 ms 99.9th.\n"
)

CONSUMER_OUT = (
    "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
    "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec\n"
    "2026-11-28 08:40:01:123, 2026-11-28 08:40:07:456, 195.3125, 30.8400, 200000, 31580.6, "
    "3204, 3129, 62.4200, 63918.1\n"
)

E2E_OUT = (
    "0\t12.5\n1000\t2.1\nAvg latency: 3.1234 ms\nPercentiles: 50th = 3, 99th = 77, 99.9th = 160\n"
)


def test_producer_perf_final_line_in_decimal_mb() -> None:
    r = parse_producer_perf(PRODUCER_OUT)
    assert r.records == 200000
    assert r.records_per_s == pytest.approx(36456.434561)
    assert r.mb_per_s == pytest.approx(35.60 * 1.048576)  # the tool's MB is MiB
    assert (r.p50_ms, r.p99_ms, r.p999_ms) == (1284.0, 1981.0, 1993.0)


def test_consumer_perf_uses_fetch_rate() -> None:
    r = parse_consumer_perf("WARN something\n" + CONSUMER_OUT)
    assert r.records == 200000
    assert r.mb_per_s == pytest.approx(62.42 * 1.048576)
    assert r.records_per_s == pytest.approx(63918.1)


def test_end_to_end_percentiles() -> None:
    r = parse_end_to_end(E2E_OUT, 2000)
    assert (r.p50_ms, r.p99_ms, r.p999_ms) == (3.0, 77.0, 160.0)


@pytest.mark.parametrize("parse", [parse_producer_perf, parse_consumer_perf])
def test_tool_output_without_summary_is_an_error(parse) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(ToolError):
        parse("Exception in thread main: TimeoutException\n")


def test_ratio_and_leader_follow_the_metric_direction() -> None:
    faster = TableRow("produce MB/s", True, {ODRADEK: 300.0, KAFKA: 200.0})
    slower_latency = TableRow("p99 ms", False, {ODRADEK: 3.0, KAFKA: 2.0})
    missing = TableRow("RSS", False, {ODRADEK: 50.0, KAFKA: None})
    assert faster.ratio == pytest.approx(1.5) and faster.odradek_leads is True
    assert slower_latency.ratio == pytest.approx(1.5) and slower_latency.odradek_leads is False
    assert missing.ratio is None and missing.odradek_leads is None
    table = render_table([faster, slower_latency, missing]).splitlines()
    assert table[0].startswith("| row | odradek | Kafka | odradek / Kafka | leads | rounds")
    assert table[2] == "| produce MB/s | 300.0 | 200.0 | 1.50 | odradek | - | - | - |"
    assert table[3] == "| p99 ms | 3.00 | 2.00 | 1.50 | Kafka | - | - | - |"
    assert table[4] == "| RSS | 50.00 | - | - | - | - | - | - |"


def test_table_rows_take_medians_and_cpu_per_gb_over_all_rounds() -> None:
    spec = Spec("produce", "native", 1024, 12, "all")
    results = {
        ODRADEK: [
            Measurement({"MB/s": 100.0}, 1.0, 500_000_000),
            Measurement({"MB/s": 300.0}, 1.0, 500_000_000),
            Measurement({"MB/s": 200.0}, 2.0, 1_000_000_000),
        ],
        KAFKA: [
            Measurement({"MB/s": 150.0}, 4.0, 500_000_000),
            Measurement({"MB/s": 100.0}, 4.0, 500_000_000),
            Measurement({"MB/s": 250.0}, 4.0, 500_000_000),
        ],
    }
    (row,) = table_rows(spec, results)
    assert row.label == "produce 1024 B, 12 partitions, acks=all (native) MB/s"
    assert row.values == {ODRADEK: 200.0, KAFKA: 150.0}
    # the medians say odradek, the rounds say it was ahead in one of three
    assert row.rounds_ahead == (1, 3)
    assert "| 1 of 3 |" in render_table([row])
    assert row.cpu_per_gb[ODRADEK] == pytest.approx(2.0)
    assert row.cpu_per_gb[KAFKA] == pytest.approx(8.0)
    latency = table_rows(
        Spec("rate", "native", 1024, 1, "all", 50.0),
        {
            ODRADEK: [Measurement({"p50 ms": 1.0, "p99 ms": 2.0, "p99.9 ms": math.nan}, 0.1, 0)],
            KAFKA: [Measurement({"p50 ms": 0.9, "p99 ms": 3.0, "p99.9 ms": 5.0}, 0.1, 0)],
        },
    )
    assert [r.label.rsplit(" ", 2)[-2:] for r in latency] == [
        ["p50", "ms"],
        ["p99", "ms"],
        ["p99.9", "ms"],
    ]
    assert latency[0].cpu_per_gb[ODRADEK] is None  # nothing moved: no CPU s per GB
    # lower is better: behind at p50, ahead at p99, no pair at p99.9 (odradek's was missing)
    assert [r.rounds_ahead for r in latency] == [(0, 1), (1, 1), None]


def test_against_an_unknown_broker_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    assert runner.main(["--against", "redpanda"]) == 2
    assert "only 'kafka'" in capsys.readouterr().err


def test_rf3_ratio_and_cpu_per_gb_summed_over_rounds() -> None:
    from bench.against_rf3 import Rf3Result, render_rf3

    r = Rf3Result(
        {1: [400.0, 200.0, 300.0], 3: [100.0, 90.0, 110.0]},
        {1: [(1.0, 500_000_000), (1.0, 500_000_000)], 3: [(3.0, 250_000_000), (1.5, 250_000_000)]},
    )
    assert r.median(1) == 300.0 and r.median(3) == 100.0
    assert r.ratio() == pytest.approx(1 / 3)
    assert r.cpu_per_gb(1) == pytest.approx(2.0)  # 2 s over 1 GB
    assert r.cpu_per_gb(3) == pytest.approx(9.0)  # 4.5 s over 0.5 GB
    assert r.cpu_ratio() == pytest.approx(4.5)
    empty = Rf3Result({1: [], 3: []}, {1: [], 3: []})
    table = render_rf3({ODRADEK: r, KAFKA: empty})
    assert "| odradek | 300.0 | 100.0 | 0.33 | 2.00 | 9.00 | 4.50 |" in table
    assert "| Kafka | - | - | - | - | - | - |" in table


def test_rf3_split_from_the_followers_tcp_counters() -> None:
    from bench import peer_traffic
    from bench.against_rf3 import Rf3Result, Split, render_split

    ss = (
        '0 0 127.0.0.1:50000 127.0.0.1:9001 users:(("python",pid=11,fd=9))\n'
        "\t cubic bytes_sent:900 bytes_received:5000000 segs_out:40 data_segs_out:10\n"
        '0 0 127.0.0.1:50001 127.0.0.1:9001 users:(("python",pid=99,fd=9))\n'
        "\t cubic bytes_received:7 data_segs_out:3\n"
        '0 0 127.0.0.1:50002 127.0.0.1:9002 users:(("python",pid=11,fd=10))\n'
        "\t cubic bytes_received:7 data_segs_out:3\n"
    )
    before = peer_traffic.parse(ss, {11}, {9001})
    assert before == {
        (11, "127.0.0.1:50000", "127.0.0.1:9001"): peer_traffic.Counters(10, 5_000_000)
    }
    after = {
        k: peer_traffic.Counters(c.requests + 5, c.received + 5_000_000) for k, c in before.items()
    }
    assert list(peer_traffic.delta(before, after).values()) == [peer_traffic.Counters(5, 5_000_000)]
    r = Rf3Result({1: [], 3: []}, {1: [], 3: []})
    r.splits.append(Split(2.0, (1.0, 0.5), (5, 10), (5_000_000, 5_000_000), 5_000_000))
    table = render_split({ODRADEK: r})
    assert "| odradek 1 | 400.00 | 200.00 + 100.00 | 1.00, 2.00 | 1,000, 500 |" in table


def test_end_to_end_rows_come_in_whole_ms_and_to_the_microsecond() -> None:
    from bench import e2e_us
    from bench.against import build_parser, specs

    kinds = [s.kind for s in specs(build_parser().parse_args([]))]
    assert kinds[-3:] == ["e2e", "e2e_us", "txn"]
    assert "e2e_us" not in [
        s.kind for s in specs(build_parser().parse_args(["--e2e-records", "0"]))
    ]
    lat = [float(i) for i in range(1, 2001)]  # 1 .. 2000 us, sorted
    assert e2e_us.percentiles(lat) == (1001.0, 1981.0, 1999.0)
