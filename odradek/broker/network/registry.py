"""The handler registry: `@handles(api_key, versions=(lo, hi))`.

It is the only source of the ApiVersions answer, so the broker advertises exactly what is
implemented. `advertise_min` advertises a lower floor than the handler serves (Produce used it
to show v0 to librdkafka while refusing v0-2; it serves them now and no handler uses it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.broker.features import STREAMS_VERSION, features_of
from odradek.wire.api_keys import ApiKey
from odradek.wire.protocol import Message

if TYPE_CHECKING:
    from odradek.broker.network.context import RequestContext
    from odradek.broker.server import Broker
    from odradek.wire.regions import Piece

# A handler takes the context and the decoded request and returns the response object (or, when
# `raw`, the framed pieces). The request and response are kafka-python's untyped message classes,
# and each handler names its own, so the registry can only say Message for them.
Handler = Callable[["RequestContext", Message], Awaitable[Message]]
# Builds the pieces of an answer carrying one error code for everything the request names; a
# `raw` handler registers one so an injected fault can answer without the generic error_response.
ErrorEncoder = Callable[["RequestContext", Message, int], list["Piece"]]


@dataclass(slots=True, frozen=True)
class Registration:
    api_key: int
    min_version: int
    max_version: int
    advertise_min: int
    handler: Handler
    raw: bool  # handler returns framed pieces itself (Fetch's zero-copy encoder)
    error_encoder: ErrorEncoder | None = None  # a raw handler's answer with one error code


REGISTRY: dict[int, Registration] = {}


def handles(
    api_key: int,
    versions: tuple[int, int],
    *,
    advertise_min: int | None = None,
    raw: bool = False,
    error_encoder: ErrorEncoder | None = None,
) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        lo, hi = versions
        REGISTRY[int(api_key)] = Registration(
            int(api_key),
            lo,
            hi,
            lo if advertise_min is None else advertise_min,
            fn,
            raw,
            error_encoder,
        )
        return fn

    return register


def advertised() -> list[tuple[int, int, int]]:
    """(api_key, min, max) for every registered API, sorted by key."""
    return sorted((r.api_key, r.advertise_min, r.max_version) for r in REGISTRY.values())


def served(broker: Broker) -> list[tuple[int, int, int]]:
    """What ApiVersions lists on this broker (the v0 answer to an unsupported ApiVersions
    version lists only ApiVersions, dispatch.py): every registered API but the ones this
    broker's set-up leaves out. DescribeQuorum is a KRaft API, so a ZooKeeper-mode broker
    does not list it (as Kafka's zkBroker listener lacks it). The client-telemetry APIs
    (KIP-714) are listed only when a client-metrics receiver is configured (the Prometheus
    endpoint), as Kafka lists them only with a ClientTelemetry metrics reporter: otherwise
    clients such as librdkafka would start telemetry (and log it) for metrics that go
    nowhere."""
    hidden: set[int] = set()
    if broker.config.get("zookeeper.connect"):
        hidden.add(ApiKey.DESCRIBE_QUORUM)
    if not broker.telemetry.receiver_configured:
        hidden.update((ApiKey.GET_TELEMETRY_SUBSCRIPTIONS, ApiKey.PUSH_TELEMETRY))
    if features_of(broker).level(STREAMS_VERSION) < 1:  # KIP-1071 streams groups
        hidden.update(
            (
                ApiKey.STREAMS_GROUP_HEARTBEAT,
                ApiKey.STREAMS_GROUP_DESCRIBE,
                ApiKey.STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE,
            )
        )
    return [(k, lo, hi) for k, lo, hi in advertised() if k not in hidden]
