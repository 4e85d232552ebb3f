"""The generator's command line fills topics a plain client reads back as documented."""

from __future__ import annotations

import json

import pytest

from compat_tests.harness import BrokerProcess
from spark_examples import generate, kafka_io

pytestmark = pytest.mark.compat


def test_page_views_command(broker: BrokerProcess, topic_name: str) -> None:
    start = generate.default_start()
    argv = ["--bootstrap", broker.bootstrap, "page-views", "--topic", topic_name]
    assert generate.main([*argv, "--count", "40", "--start-ms", str(start)]) == 0
    records = kafka_io.read_all(broker.bootstrap, topic_name, expected=40)
    assert sorted(p for p in {r.partition for r in records}) == [0, 1, 2]
    by_seq = {json.loads(r.value)["seq"]: r for r in records}
    for view in generate.page_views(40, start=start):
        r = by_seq[view.seq]
        assert (r.key, r.value, r.timestamp) == (view.key(), view.value(), view.ts)
        assert r.partition == view.partition(3)
    for partition in range(3):
        offsets = sorted(r.offset for r in records if r.partition == partition)
        assert offsets == list(range(len(offsets)))


def test_payments_interleave_commits_and_aborts() -> None:
    txns = generate.payments(committed=3, aborted=2, per_txn=2)
    assert [t[0].committed for t in txns] == [True, False, True, False, True]
    assert [p.txn for t in txns for p in t] == [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
