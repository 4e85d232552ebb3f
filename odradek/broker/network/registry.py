"""The handler registry: `@handles(api_key, versions=(lo, hi))`.

It is the only source of the ApiVersions answer, so the broker advertises exactly what is
implemented. `advertise_min` advertises a lower floor than the handler serves (Produce used it
to show v0 to librdkafka while refusing v0-2; it serves them now and no handler uses it).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from odradek.wire.protocol import Message

if TYPE_CHECKING:
    from odradek.broker.network.context import RequestContext
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
