"""Pieces several handler modules share. Handlers never import each other (DESIGN.md, checked
by `make lint`), so what two API families need alike lives here: the group ACL check and
Kafka's form of a client address (the group APIs), and the partition checks of the offset and
transaction APIs.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.network.context import RequestContext
from odradek.security.acl_types import AclOperation, ResourceType
from odradek.wire.errors import ErrorCode
from odradek.wire.protocol import Message

if TYPE_CHECKING:
    from odradek.broker.server import Broker


def group_allowed(ctx: RequestContext, operation: AclOperation, group_id: str) -> bool:
    """May the principal do `operation` on the group (always, without an authorizer)?"""
    return ctx.authorize(operation, ResourceType.GROUP, group_id)


def client_host(ctx: RequestContext) -> str:
    """As Kafka's InetAddress.toString: "/127.0.0.1"."""
    return "/" + ctx.client_host.strip("[]")


def partition_exists(broker: Broker, topic: str, index: int) -> bool:
    info = broker.topics.info(topic)
    return info is not None and 0 <= index < len(info.partitions)


def partition_errors(
    topics: list[Message],
    errors: dict[tuple[str, int], ErrorCode],
    topic_cls: type[Message],
    part_cls: type[Message],
) -> list[Message]:
    """The answer topics of a request naming `topics` (with `name` and `partitions`): each asked
    partition, in request order, with its error in `errors` (NONE when not there)."""
    return [
        topic_cls(
            name=t.name,
            partitions=[
                part_cls(
                    partition_index=p.partition_index,
                    error_code=errors.get((t.name, p.partition_index), ErrorCode.NONE),
                )
                for p in t.partitions
            ],
        )
        for t in topics
    ]
