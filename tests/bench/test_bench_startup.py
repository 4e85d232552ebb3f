"""Smoke test of `python -m bench.startup` (issue 17): a tiny run prints every table row, the
pytest sessions it generates pass (it raises otherwise), and the minimal client it times really
produces and fetches. Timings are never asserted."""

from __future__ import annotations

import pytest

from bench import startup
from odradek.testing import Broker


def test_the_minimal_client_produces_and_fetches_the_record() -> None:
    with Broker(topics={startup.TOPIC: 1}, shared_loop=True, tmpfs=True) as broker:
        startup.produce_and_fetch(broker.bootstrap, b"first")
        startup.produce_and_fetch(broker.bootstrap, b"second")  # fetched from offset 0 too
        hw = broker.call(lambda s: s.topics.get(startup.TOPIC, 0).high_watermark)
        assert hw == 2
        with pytest.raises(RuntimeError, match="error 3"):  # UNKNOWN_TOPIC_OR_PARTITION
            broker.call(lambda s: s.topics.delete_topic(startup.TOPIC))
            startup.produce_and_fetch(broker.bootstrap)


def test_a_small_run_prints_every_row(capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--runs", "1", "--brokers", "3", "--rss-brokers", "2", "--no-process"]
    assert startup.main(args) == 0
    out = capsys.readouterr().out
    for row in (
        "| in-process Broker() |",
        "| in-process Broker(shared_loop=True, tmpfs=True) |",
        "| in-process loop, Broker() | 3 |",
        "| in-process loop, Broker(shared_loop=True, tmpfs=True) | 3 |",
        "| pytest session, odradek_fresh_broker, raw client: wall | 3 |",
        "| pytest session, odradek_fresh_broker, confluent-kafka: test loop | 3 |",
        "| Broker(shared_loop=True, tmpfs=True) | 2 |",
    ):
        assert row in out, out
