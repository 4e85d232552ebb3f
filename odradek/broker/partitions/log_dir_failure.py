"""What the broker does when a log dir fails, as Kafka's ReplicaManager.handleLogDirFailure.

The log layer takes a data dir offline on an I/O error (odradek/log/disk_faults.py); its
partitions answer KAFKA_STORAGE_ERROR (56) to producers and fetchers from then on.

- In a cluster, when every log dir of the broker is offline, the broker halts (an unclean stop,
  as Kafka's `Exit.halt` after "all log dirs have failed"): its registration goes, so the
  controller elects new leaders from the other ISR members exactly as for a killed broker, and
  its follower replicas leave the ISRs. A restart (after space returns) recovers its logs.
- A standalone broker keeps running and serving KAFKA_STORAGE_ERROR for its offline partitions
  until restarted: there is no other replica to take over, and clients see why their writes
  fail (Kafka would stop the process; producers would then only see timeouts).
- With several log dirs and some still online, the broker keeps running, as Kafka does. (Moving
  leadership of just the offline partitions, Kafka's /log_dir_event_notification, is not done:
  with a single dir per broker, the usual layout, halting covers it.)
"""

from __future__ import annotations

import asyncio
import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from odradek.broker.server import Broker

log = logging.getLogger(__name__)


class LogDirFailureHandler:
    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.halt_task: asyncio.Task[None] | None = None
        broker.logs.on_dir_failure(self.on_failure)

    def on_failure(self, directory: str) -> None:
        broker = self.broker
        offline = broker.logs.offline_dirs
        log.error(
            "broker %d: log dir %s failed; offline dirs: %s of %d",
            broker.node_id,
            directory,
            ", ".join(offline),
            len(broker.logs.dirs),
        )
        for part in list(broker.topics.partitions.values()):
            if part.offline:
                part.wake()  # long-polling fetches answer KAFKA_STORAGE_ERROR now
        if len(offline) < len(broker.logs.dirs) or broker.replication is None:
            return
        if self.halt_task is None:
            log.error(
                "broker %d: all log dirs have failed: halting (leadership moves to other replicas)",
                broker.node_id,
            )
            self.halt_task = asyncio.get_running_loop().create_task(
                broker.stop(clean=False), name="log-dir-failure-halt"
            )
