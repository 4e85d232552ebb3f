"""What the nemesis (`nemesis.Nemesis`) and one seed's run (`seeds.run_seed`) need of a cluster
whose brokers run on their own hosts (`netns.Network`): `hosts.HostCluster` (odradek over
ZooKeeper) and the reference's three Apache Kafka KRaft nodes
(compat_tests/reference/kafka_hosts.py) both are one, so the same faults drive both.

Hosts are named: brokers `b0`, `b1`, ... (node id = the number), the clients' host `client`,
and for a cluster whose metadata quorum runs on hosts of its own, those (`zookeeper`: ZooKeeper's
`z0`-`z2`; empty for KRaft combined nodes, which are their own quorum). A fault kind a cluster
cannot take is in `unsupported`, with the reason (`applicable` drops it from a soak).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from odradek.testing.jepsen.netns import Network


class Deployment(Protocol):
    net: Network
    brokers: list[str]
    paused: set[str]  # hosts stopped with SIGSTOP
    work: Path

    @property
    def zookeeper(self) -> tuple[str, ...]:
        """The hosts of a separate metadata quorum ((): none)."""

    @property
    def unsupported(self) -> Mapping[str, str]:
        """Fault kind -> why this cluster cannot take it."""

    @property
    def bootstrap(self) -> str: ...

    def addr(self, host: str) -> str: ...

    def others(self, host: str) -> set[str]: ...

    def journal(self, broker: str) -> str: ...

    def data_dir(self, broker: str) -> Path: ...

    def heal(self) -> None: ...

    def running(self, host: str) -> bool: ...

    def kill(self, host: str) -> None: ...

    def pause(self, host: str, stop: bool) -> None: ...

    def start_broker(self, b: str, wait: bool = True) -> None: ...

    def wait_broker(self, b: str) -> None: ...

    def create_topic(self, topic: str, partitions: int, timeout: float = 30.0) -> None: ...

    def full_isr(self, topic: str, partitions: int, timeout: float = 20.0) -> bool: ...

    def all_in_sync(self, timeout: float) -> bool: ...

    def leader(self, topic: str, partition: int) -> str | None: ...

    def controller(self) -> str | None: ...

    def cut_from_quorum(self, cut: set[str]) -> str:
        """Cut brokers `cut` off from the metadata quorum (ZooKeeper; KRaft's controllers)."""

    def fill_disk(self, b: str) -> str: ...

    def free_disk(self, b: str) -> None: ...

    def fail_disk_io(self, b: str, error: str | None, ops: tuple[str, ...]) -> list[str]: ...

    def jump_clock(self, b: str, offset_ms: int) -> None: ...


def applicable(
    kinds: tuple[str, ...], unsupported: Mapping[str, str]
) -> tuple[tuple[str, ...], dict[str, str]]:
    """The kinds a cluster can take, in order, and the others with the reason each is left out."""
    kept = tuple(k for k in kinds if k not in unsupported)
    return kept, {k: unsupported[k] for k in kinds if k in unsupported}
