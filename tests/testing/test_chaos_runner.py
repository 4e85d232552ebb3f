"""The chaos runner's note on a cluster that did not heal, over a stand-in cluster (no brokers):
it names the short-ISR partitions even when an internal topic was never created (before the
fix, describing the partitions raised KeyError and the seed ended as a harness error)."""

from __future__ import annotations

from dataclasses import dataclass

from odradek.testing.chaos import runner


@dataclass
class _State:
    leader: int
    leader_epoch: int
    isr: list[int]
    replicas: list[int]


class _Cluster:
    """chaos-idem-0 stays with ISR [0]; the internal topics do not exist."""

    def partition(self, topic: str, p: int) -> _State:
        if topic.startswith("__"):
            raise KeyError(topic)
        isr = [0] if (topic, p) == (runner.IDEM_TOPIC, 0) else [0, 1, 2]
        return _State(0, 4, isr, [0, 1, 2])

    def wait_for_leader(self, topic: str, p: int, timeout: float) -> int:
        return 0

    def wait_for_isr(self, topic: str, p: int, members: set[int], timeout: float) -> None:
        if set(self.partition(topic, p).isr) != members:
            raise TimeoutError(f"{topic}-{p} isr")

    def log_end_offset(self, n: int, topic: str, p: int) -> int:
        return 10 if n == 0 else 7

    def high_watermark(self, n: int, topic: str, p: int) -> int:
        return 7


def test_a_cluster_that_did_not_heal_is_described() -> None:
    note = runner._settled(_Cluster(), 0.1)  # type: ignore[arg-type]
    assert note == (
        "cluster did not heal: chaos-idem-0 isr; chaos-idem-0 leader 0 epoch 4 isr [0] "
        "(log end, hw) by broker {0: (10, 7), 1: (7, 7), 2: (7, 7)}"
    )
