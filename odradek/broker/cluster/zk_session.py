"""The broker's ZooKeeper session, shared by the watch cache (`zk_cache.py`) and the
registration / controller election (`zk_registration.py`): the kazoo client (as Kafka's
`KafkaZkClient` wraps its `ZooKeeperClient`), the chroot, the paths every broker expects to
exist, and the hand-over of results from kazoo's callback thread to the event loop.

kazoo calls watchers and connection listeners on its own thread. Whatever they learn is posted
to the event loop with `post`, which alone changes the cache and notifies subscribers.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, ParamSpec, TypeVar, TypeVarTuple

from odradek.broker.cluster import zk_layout as zl

if TYPE_CHECKING:
    from kazoo.protocol.states import ZnodeStat  # untyped (Any) in kazoo

log = logging.getLogger(__name__)

Ts = TypeVarTuple("Ts")
P = ParamSpec("P")
T = TypeVar("T")


class ZooKeeperError(ValueError):
    """ZooKeeper cannot be reached or refuses what the broker needs (startup fails with it)."""


class ZooKeeperSession:
    """A started kazoo client on `connect` (`host:port[,host:port]/chroot`)."""

    def __init__(
        self, connect: str, node_id: int, session_timeout_ms: int, connection_timeout_ms: int
    ) -> None:
        from kazoo.client import KazooClient
        from kazoo.retry import KazooRetry

        self.connect = connect
        self.node_id = node_id
        self.session_timeout_s = session_timeout_ms / 1000
        self.connection_timeout_s = connection_timeout_ms / 1000
        self.loop: asyncio.AbstractEventLoop | None = None  # set by the first subscriber
        self.closed = False
        hosts, slash, chroot = connect.partition("/")
        self.zk = KazooClient(
            hosts=hosts,
            timeout=self.session_timeout_s,
            connection_retry=KazooRetry(max_tries=-1, delay=0.1, max_delay=1.0),
            command_retry=KazooRetry(max_tries=5, delay=0.1, max_delay=1.0),
        )
        try:
            self.zk.start(timeout=connection_timeout_ms / 1000)
        except Exception as exc:
            self.zk.stop()
            self.zk.close()
            raise ZooKeeperError(
                f"cannot connect to ZooKeeper at {connect} within {connection_timeout_ms} ms "
                f"({exc.__class__.__name__})"
            ) from None
        if slash and chroot.strip("/"):  # Kafka creates its chroot path on first start
            self.until_connected(self.zk.ensure_path, "/" + chroot.strip("/"))
            self.zk.chroot = "/" + chroot.strip("/")
        for path in zl.PERSISTENT_PATHS:
            self.until_connected(self.zk.ensure_path, path)

    def until_connected(self, fn: Callable[P, T], *args: P.args, **kwargs: P.kwargs) -> T:
        """`fn(...)`, requests safe to repeat, retried on the same session while the connection
        is lost, as Kafka's `retryRequestsUntilConnected`, for up to
        zookeeper.connection.timeout.ms; then a ZooKeeperError (at start, the CLI's clean exit
        with its message) instead of kazoo's ConnectionLoss. Any thread."""
        from kazoo.retry import KazooRetry, RetryFailedError

        retry = KazooRetry(
            max_tries=-1,
            delay=0.1,
            max_delay=1.0,
            deadline=self.connection_timeout_s,
            ignore_expire=False,
        )
        try:
            return retry(fn, *args, **kwargs)  # type: ignore[no-any-return]
        except RetryFailedError:
            raise ZooKeeperError(
                f"ZooKeeper at {self.connect} lost the connection and did not answer again "
                f"within {self.connection_timeout_s * 1000:.0f} ms"
            ) from None

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        try:
            self.zk.stop()
        finally:
            self.zk.close()

    def post(self, fn: Callable[[*Ts], None], *args: *Ts) -> None:
        """Call `fn(*args)` on the event loop (from kazoo's thread); dropped once closed."""
        loop = self.loop
        if loop is None or self.closed:
            return
        try:
            loop.call_soon_threadsafe(fn, *args)
        except RuntimeError:  # the loop is closed: the broker is gone
            pass

    def read_controller(self) -> int:
        """The broker id in `/controller` (any thread); -1 when nobody holds it."""
        from kazoo.exceptions import NoNodeError

        try:
            data, _ = self.zk.get(zl.CONTROLLER)
        except NoNodeError:
            return -1
        return zl.decode_controller(data)

    def owns(self, stat: ZnodeStat) -> bool:
        """Whether an ephemeral node (by its stat) belongs to this session."""
        return bool(stat.ephemeralOwner == self.zk.client_id[0])
