"""The handler registry: `@handles(api_key, versions=(lo, hi))`.

It is the only source of the ApiVersions answer, so the broker advertises exactly what is
implemented. `advertise_min` lets Produce advertise from v0 (librdkafka needs it) while the
handler still serves only the versions in `versions` (KIP-896 floors).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

Handler = Callable[[Any, Any], Awaitable[Any]]


@dataclass(slots=True, frozen=True)
class Registration:
    api_key: int
    min_version: int
    max_version: int
    advertise_min: int
    handler: Handler
    raw: bool  # handler returns framed pieces itself (Fetch's zero-copy encoder)


REGISTRY: dict[int, Registration] = {}


def handles(
    api_key: int, versions: tuple[int, int], *, advertise_min: int | None = None, raw: bool = False
) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        lo, hi = versions
        REGISTRY[int(api_key)] = Registration(
            int(api_key), lo, hi, lo if advertise_min is None else advertise_min, fn, raw
        )
        return fn

    return register


def advertised() -> list[tuple[int, int, int]]:
    """(api_key, min, max) for every registered API, sorted by key."""
    return sorted((r.api_key, r.advertise_min, r.max_version) for r in REGISTRY.values())
