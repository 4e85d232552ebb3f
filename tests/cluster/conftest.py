"""Every test here starts several brokers or exercises their machinery: marked `cluster`.

`make_cluster(brokers=3, topics=..., config=...)` starts an in-process `odradek.testing.Cluster`
with small replication timings (followers long-poll 100 ms, fall out of the ISR after 1 s) and
stops it after the test.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from odradek.testing import Cluster
from odradek.testing.cluster import FAST_FAILOVER
from tests.cluster.zk_helpers import zookeeper  # noqa: F401  (the fixture)

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if _HERE in Path(str(item.path)).resolve().parents:
            item.add_marker(pytest.mark.cluster)


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[Callable[..., Cluster]]:
    started: list[Cluster] = []

    def make(brokers: int = 3, config: dict[str, Any] | None = None, **kwargs: Any) -> Cluster:
        data = tmp_path / f"cluster-{len(started)}"
        config = {**FAST_FAILOVER, **(config or {})}
        cluster = Cluster(brokers, config=config, data_dir=str(data), **kwargs)
        started.append(cluster.start())
        return cluster

    yield make
    for cluster in started:
        cluster.stop()
