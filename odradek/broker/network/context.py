"""The request context: everything a handler may use for one request, typed.

Built by `dispatch` for each decoded request. A handler reaches the broker's parts through the
named properties (topics, coordinators, replicas, fetch sessions, metrics, faults) rather than
through a service locator; the connection's listener name and authenticated principal travel
here too, so that authorization (Kafka's `RequestContext.principal`, KIP-11) can be checked per
resource by the handler that knows the resource.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.security.acl_types import (
    CLUSTER_NAME,
    SUPPORTED_OPERATIONS,
    AclOperation,
    ResourceType,
    operations_bitfield,
)
from odradek.wire.header import RequestHeader

if TYPE_CHECKING:
    from odradek.broker.network.connection import Connection
    from odradek.broker.partitions.fetch_sessions import FetchSessionCache
    from odradek.broker.partitions.topics import TopicManager
    from odradek.broker.replication.manager import ReplicaManager
    from odradek.broker.replication.single import SingleBrokerReplicas
    from odradek.broker.server import Broker
    from odradek.coordinator.group.coordinator import GroupCoordinator
    from odradek.coordinator.txn.coordinator import TransactionCoordinator

ANONYMOUS = "User:ANONYMOUS"


@dataclass(slots=True)
class RequestContext:
    broker: Broker
    header: RequestHeader
    peer: str
    connection: Connection | None = None
    listener: str = "PLAINTEXT"
    principal: str = ANONYMOUS
    size: int = 0  # the request's bytes (the produce quota counts them, as Kafka's)

    @property
    def api_version(self) -> int:
        return self.header.api_version

    @property
    def client_id(self) -> str | None:
        return self.header.client_id

    @property
    def client_host(self) -> str:
        """The peer's address without its port (DescribeGroups' client_host, ACL hosts)."""
        return self.peer.rsplit(":", 1)[0] if ":" in self.peer else self.peer

    @property
    def topics(self) -> TopicManager:
        return self.broker.topics

    @property
    def fetch_sessions(self) -> FetchSessionCache:
        return self.broker.fetch_sessions

    @property
    def group_coordinator(self) -> GroupCoordinator:
        return self.broker.group_coordinator

    @property
    def txn_coordinator(self) -> TransactionCoordinator:
        return self.broker.txn_coordinator

    @property
    def replicas(self) -> ReplicaManager | SingleBrokerReplicas:
        return self.broker.replicas

    # -- authorization (docs/security-acls.md says what each handler checks) ----------------

    @property
    def acl_host(self) -> str:
        """The client's address as Kafka's ACLs name hosts (`InetAddress.getHostAddress()`)."""
        from odradek.broker.network.authz import host_address

        return host_address(self.client_host)

    def authorize(
        self,
        operation: AclOperation,
        resource_type: ResourceType,
        name: str,
        *,
        log_if_denied: bool = True,
    ) -> bool:
        """May this request's principal do `operation` on the resource? True when no
        authorizer is configured."""
        authorizer = self.broker.authorizer
        if authorizer is None:
            return True
        return authorizer.authorize(
            self.principal,
            self.acl_host,
            operation,
            resource_type,
            name,
            log_if_denied=log_if_denied,
        )

    def authorize_cluster(self, operation: AclOperation, *, log_if_denied: bool = True) -> bool:
        return self.authorize(
            operation, ResourceType.CLUSTER, CLUSTER_NAME, log_if_denied=log_if_denied
        )

    def authorized_operations(self, resource_type: ResourceType, name: str) -> set[int]:
        """The operation codes this principal may do on the resource (authorized-operations
        fields): every supported one when no authorizer is configured, as Kafka."""
        authorizer = self.broker.authorizer
        if authorizer is None:
            return {int(op) for op in SUPPORTED_OPERATIONS[resource_type]}
        ops = authorizer.authorized_operations(self.principal, self.acl_host, resource_type, name)
        return {int(op) for op in ops}

    def authorized_operations_bits(self, resource_type: ResourceType, name: str) -> int:
        return operations_bitfield(
            {AclOperation(op) for op in self.authorized_operations(resource_type, name)}
        )

    def cluster_operations(self) -> set[int]:
        """Metadata's / DescribeCluster's cluster authorized operations: none without DESCRIBE
        on the cluster (AuthHelper.authorizedOperations after the DESCRIBE check)."""
        if not self.authorize_cluster(AclOperation.DESCRIBE, log_if_denied=False):
            return set()
        return self.authorized_operations(ResourceType.CLUSTER, CLUSTER_NAME)
