"""The broker's authorizer (`authorizer.class.name`), kept in step with the stored ACLs.

`build(config, store)` gives None when no authorizer is configured: every check is then skipped
(`RequestContext.authorize` answers True without a call), so produce and fetch pay nothing.
With one, the broker holds an `odradek.security.acl.Authorizer` (super.users,
allow.everyone.if.no.acl.found) whose ACLs are those of the metadata store's ACL backend
(`odradek.broker.cluster.acl_backends`: acls.json, or ZooKeeper's /kafka-acl): loaded at start
and replaced whenever any broker changes them.

Hosts are compared in Kafka's form (`InetAddress.getHostAddress()`): IPv4 as usual, IPv6 written
out in full without leading zeros (`0:0:0:0:0:0:0:1`), an IPv4-mapped IPv6 address as IPv4.
"""

from __future__ import annotations

import ipaddress
import logging
from typing import TYPE_CHECKING

from odradek.log.config import ConfigError
from odradek.security.acl import (
    ALLOW_EVERYONE_CONFIG,
    SUPER_USERS_CONFIG,
    Authorizer,
    parse_allow_everyone,
    parse_super_users,
)
from odradek.security.acl_types import AclBinding, AclOperation, ResourceType
from odradek.wire import protocol
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.cluster.acl_backends import AclBackend
    from odradek.broker.cluster.metadata_store import MetadataStore
    from odradek.broker.config import BrokerConfig
    from odradek.broker.network.context import RequestContext
    from odradek.broker.partitions.fetch_sessions import SessionPartition

log = logging.getLogger(__name__)

AUTHORIZER_CLASSES = frozenset(
    {
        "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        "kafka.security.authorizer.AclAuthorizer",
        "kafka.security.auth.SimpleAclAuthorizer",  # Kafka < 2.4's name for AclAuthorizer
    }
)


def host_address(host: str) -> str:
    """A peer address as Java's `InetAddress.getHostAddress()` writes it."""
    text, pct, scope = host.strip("[]").partition("%")
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return host
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        full = ":".join(f"{int(group, 16):x}" for group in ip.exploded.split(":"))
        return full + pct + scope  # Java keeps a link-local address's scope: fe80:...%eth0
    return str(ip)


class BrokerAuthorizer(Authorizer):
    """The Authorizer of one broker, following its store's ACL backend (a broker service)."""

    def __init__(self, config: BrokerConfig, backend: AclBackend) -> None:
        super().__init__(
            parse_super_users(config.get(SUPER_USERS_CONFIG)),
            parse_allow_everyone(config.get(ALLOW_EVERYONE_CONFIG)),
        )
        self.backend = backend
        self.replace_all(backend.bindings())
        backend.subscribe(self._reload)

    def _reload(self) -> None:
        self.replace_all(self.backend.bindings())

    def write(self, after: list[AclBinding]) -> None:
        """Store the ACL set `after` (every broker follows, this one at once)."""
        self.backend.apply(list(self), after)

    async def start(self) -> None:
        pass

    async def stop(self) -> None:
        self.backend.unsubscribe(self._reload)

    def abandon(self) -> None:
        """An unclean stop: a restarted broker of a shared store subscribes afresh."""
        self.backend.unsubscribe(self._reload)


def build(config: BrokerConfig, store: MetadataStore) -> BrokerAuthorizer | None:
    """The broker's authorizer, None when `authorizer.class.name` is empty."""
    name = (config.get("authorizer.class.name") or "").strip()
    if not name:
        return None
    if name not in AUTHORIZER_CLASSES:
        raise ConfigError(
            f"authorizer.class.name {name}: odradek knows "
            "org.apache.kafka.metadata.authorizer.StandardAuthorizer and "
            "kafka.security.authorizer.AclAuthorizer"
        )
    try:
        parse_super_users(config.get(SUPER_USERS_CONFIG))
    except ValueError as exc:
        raise ConfigError(f"super.users: {exc}") from None
    from odradek.broker.cluster.acl_backends import backend_of

    authorizer = BrokerAuthorizer(config, backend_of(store))
    log.info(
        "authorizer on: %d ACLs, super users %s, allow.everyone.if.no.acl.found=%s",
        len(authorizer),
        ", ".join(sorted(authorizer.super_users)) or "none",
        str(authorizer.allow_everyone_if_no_acl_found).lower(),
    )
    return authorizer


# -- helpers the handlers share (called only when an authorizer is configured) ---------------

TRANSACTIONAL_BIT = 0x10  # record batch attributes (v2): the batch is part of a transaction


def _transactional(records: bytes | bytearray | memoryview | None) -> bool:
    """Whether a partition's records start with a transactional v2 batch."""
    if records is None or len(records) < 23 or records[16] != 2:
        return False
    return bool(records[22] & TRANSACTIONAL_BIT)


def produce_denied(ctx: RequestContext, req: protocol.ProduceRequest) -> ErrorCode:
    """Produce's transactional check (KafkaApis.handleProduceRequest): a request with
    transactional records needs WRITE on its transactional id (a null id is denied)."""
    if any(_transactional(pd.records) for td in req.topic_data for pd in td.partition_data):
        txn = req.transactional_id
        if txn is None or not ctx.authorize(AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, txn):
            return ErrorCode.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
    return ErrorCode.NONE


def topic_denied(ctx: RequestContext, operation: AclOperation, name: str) -> ErrorCode:
    """TOPIC_AUTHORIZATION_FAILED when `operation` on topic `name` is denied, else NONE. An empty
    name (a topic id nobody knows) is left to the existence check."""
    if not name or ctx.authorize(operation, ResourceType.TOPIC, name):
        return ErrorCode.NONE
    return ErrorCode.TOPIC_AUTHORIZATION_FAILED


def fetch_denied(
    ctx: RequestContext, replica_id: int, wanted: list[SessionPartition]
) -> frozenset[str]:
    """The topics of a Fetch whose partitions get TOPIC_AUTHORIZATION_FAILED: every one for a
    follower without CLUSTER_ACTION on the cluster, else those without READ."""
    names = {sp.topic for sp in wanted if sp.topic}
    if replica_id >= 0:
        if ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
            return frozenset()
        return frozenset(names)
    read = AclOperation.READ
    return frozenset(n for n in names if not ctx.authorize(read, ResourceType.TOPIC, n))
