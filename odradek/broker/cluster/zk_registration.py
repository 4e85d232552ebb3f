"""A ZooKeeper-mode broker's own entries: its registration, the controller election, the
controller epoch, producer id blocks and the cluster id, as Kafka's `KafkaZkClient`
(`registerBroker`, `registerControllerAndIncrementControllerEpoch`) and
`ZkProducerIdManager` write them (`zk_layout.py` has the paths and documents).

- Registration is an ephemeral `/brokers/ids/<id>` node: it goes when the broker's session
  ends (a clean stop closes the session at once; after `kill -9` ZooKeeper expires it after
  `zookeeper.session.timeout.ms`). A broker restarted before its old session expired waits for
  the old node to go, as Kafka refuses to register over a live session. After an expired
  session the broker registers again as soon as it reconnects.
- The controller is whoever created the ephemeral `/controller` node; every registered broker
  tries again when it disappears (the watch cache calls `elect`), and the winner bumps
  `/controller_epoch`.

Everything here is a synchronous ZooKeeper call, on the event loop or on kazoo's thread.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable

from odradek.broker.cluster import zk_layout as zl
from odradek.broker.cluster.metadata_store import PRODUCER_ID_BLOCK, BrokerRegistration
from odradek.broker.cluster.zk_session import ZooKeeperError, ZooKeeperSession

log = logging.getLogger(__name__)

REGISTRATION_POLL_S = 0.2
CAS_ATTEMPTS = 100


class ZooKeeperRegistration:
    """This broker's registration and its part in the controller election.

    `on_controller` is called on kazoo's thread with who holds `/controller` after this broker
    registered again on a new session.
    """

    def __init__(self, session: ZooKeeperSession, on_controller: Callable[[int], None]) -> None:
        self.session = session
        self.zk = session.zk
        self.node_id = session.node_id
        self.registration: BrokerRegistration | None = None
        self.controller_epoch = 0
        self._on_controller = on_controller
        self._session_lost = False
        self.zk.add_listener(self._on_session_state)

    # -- cluster id -------------------------------------------------------------------------

    def cluster_id(self, configured: str | None) -> str:
        """The cluster id in `/cluster/id`, created (from `configured` or a new one) by the
        first broker; a configured id that differs from the stored one is refused."""
        from kazoo.exceptions import NodeExistsError

        wanted = configured or zl.encode_uuid(uuid.uuid4())
        try:
            self.zk.create(zl.CLUSTER_ID, zl.encode_cluster_id(wanted), makepath=True)
        except NodeExistsError:
            pass
        data, _ = self.zk.get(zl.CLUSTER_ID)
        found = zl.decode_cluster_id(data)
        if configured and found != configured:
            raise ZooKeeperError(
                f"cluster.id {configured} does not match {found} in ZooKeeper at "
                f"{self.session.connect}"
            )
        return found

    # -- registration -----------------------------------------------------------------------

    def register(self, reg: BrokerRegistration) -> None:
        self.create(reg)
        self.registration = reg

    def create(self, reg: BrokerRegistration) -> None:
        """Create our ephemeral node, waiting out a previous session's node (bounded); sets
        the broker epoch (the node's creation zxid)."""
        from kazoo.exceptions import NodeExistsError, NoNodeError

        path = zl.broker_path(reg.node_id)
        deadline = time.monotonic() + 2 * self.session.session_timeout_s + 5
        waited = False
        while True:
            try:
                self.zk.create(path, zl.encode_broker(reg), ephemeral=True)
                break
            except NodeExistsError:
                try:
                    _, stat = self.zk.get(path)
                except NoNodeError:
                    continue
                if self.session.owns(stat):
                    self.zk.set(path, zl.encode_broker(reg))
                    break
                if time.monotonic() > deadline:
                    raise ZooKeeperError(
                        f"broker id {reg.node_id} is registered in ZooKeeper by a live session"
                    ) from None
                if not waited:
                    waited = True
                    log.warning(
                        "broker id %d is still registered by an earlier session; waiting for "
                        "ZooKeeper to expire it",
                        reg.node_id,
                    )
                time.sleep(REGISTRATION_POLL_S)
        _, stat = self.zk.get(path)
        reg.broker_epoch = stat.czxid

    def unregister(self, node_id: int) -> bool:
        """Remove our registration and, if ours, `/controller`; False when `node_id` is not
        this broker's registration."""
        from kazoo.exceptions import NoNodeError

        if self.registration is None or node_id != self.registration.node_id:
            return False
        self.registration = None
        for path in (zl.broker_path(node_id), zl.CONTROLLER):
            try:
                _, stat = self.zk.get(path)
                if self.session.owns(stat):  # ours, not a successor's
                    self.zk.delete(path, version=stat.version)
            except NoNodeError:
                pass
            except Exception:
                log.exception("removing %s from ZooKeeper failed", path)
        return True

    def set_shutting_down(self, node_id: int) -> BrokerRegistration | None:
        """Mark our registration as in controlled shutdown; the registration, or None when
        `node_id` is not ours or is already marked."""
        reg = self.registration
        if reg is None or reg.node_id != node_id or reg.shutting_down:
            return None
        reg.shutting_down = True
        try:
            self.zk.set(zl.broker_path(node_id), zl.encode_broker(reg))
        except Exception as exc:  # e.g. the session just expired: the shutdown goes on
            log.warning("could not mark broker %d as shutting down: %r", node_id, exc)
        return reg

    def _on_session_state(self, state: str) -> None:
        """kazoo's connection listener: after an expired session, register again."""
        from kazoo.protocol.states import KazooState

        if self.session.closed:
            return
        if state == KazooState.LOST:
            self._session_lost = True
            log.warning("ZooKeeper session lost: this broker is unregistered until it reconnects")
        elif state == KazooState.CONNECTED and self._session_lost:
            self._session_lost = False
            self.zk.handler.spawn(self._register_again)

    def _register_again(self) -> None:
        reg = self.registration
        if reg is None or self.session.closed:
            return
        try:
            self.create(reg)
            log.info("broker %d registered again after a new ZooKeeper session", reg.node_id)
            self._on_controller(self.try_become_controller())
        except Exception:
            log.exception("registering again in ZooKeeper failed")

    # -- controller election ----------------------------------------------------------------

    def elect(self) -> int:
        """`/controller` is vacant: try to take it when registered; who holds it afterwards."""
        if self.registration is None:
            return -1
        return self.try_become_controller()

    def try_become_controller(self) -> int:
        """Create `/controller` (any thread); returns who holds it afterwards. Retried while
        the connection is lost, as Kafka's requests are: an election given up on would leave
        the cluster without a controller until `/controller` changes again."""
        try:
            return self.session.until_connected(self._take_controller)
        except Exception:
            log.exception("controller election in ZooKeeper failed")
            return -1

    def _take_controller(self) -> int:
        from kazoo.exceptions import NodeExistsError

        try:
            self.zk.create(zl.CONTROLLER, zl.encode_controller(self.node_id), ephemeral=True)
        except NodeExistsError:
            if not self._holds_controller():  # else a retry met its own first create's node
                return self.session.read_controller()
        self.controller_epoch = self._bump_controller_epoch()
        log.info(
            "broker %d won the controller election (epoch %d)", self.node_id, self.controller_epoch
        )
        return self.node_id

    def _holds_controller(self) -> bool:
        """Whether `/controller` is this session's node (a create retried after a lost
        connection that had gone through)."""
        from kazoo.exceptions import NoNodeError

        try:
            _, stat = self.zk.get(zl.CONTROLLER)
        except NoNodeError:
            return False
        return self.session.owns(stat)

    def _bump_controller_epoch(self) -> int:
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

        for _ in range(CAS_ATTEMPTS):
            try:
                data, stat = self.zk.get(zl.CONTROLLER_EPOCH)
            except NoNodeError:
                try:
                    self.zk.create(zl.CONTROLLER_EPOCH, b"1")
                    return 1
                except NodeExistsError:
                    continue
            epoch = int(data or b"0") + 1
            try:
                self.zk.set(zl.CONTROLLER_EPOCH, str(epoch).encode(), version=stat.version)
                return epoch
            except BadVersionError:
                continue
        raise ZooKeeperError("could not bump /controller_epoch")

    # -- producer ids -----------------------------------------------------------------------

    def allocate_producer_ids(self) -> tuple[int, int]:
        """A block [start, end) of producer ids: a conditional update of Kafka's
        `/latest_producer_id_block` (its block_end is inclusive)."""
        from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

        for _ in range(CAS_ATTEMPTS):
            try:
                data, stat = self.zk.get(zl.PRODUCER_ID_BLOCK)
            except NoNodeError:
                block = zl.encode_producer_id_block(self.node_id, 0, PRODUCER_ID_BLOCK - 1)
                try:
                    self.zk.create(zl.PRODUCER_ID_BLOCK, block)
                    return 0, PRODUCER_ID_BLOCK
                except NodeExistsError:
                    continue
            start = zl.decode_producer_id_block_end(data) + 1
            block = zl.encode_producer_id_block(self.node_id, start, start + PRODUCER_ID_BLOCK - 1)
            try:
                self.zk.set(zl.PRODUCER_ID_BLOCK, block, version=stat.version)
                return start, start + PRODUCER_ID_BLOCK
            except BadVersionError:
                continue
        raise ZooKeeperError("could not allocate a producer id block (too much contention)")
