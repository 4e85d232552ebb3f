"""Fault injection for tests: fail or delay chosen requests by API key, pause the broker, drop
client connections. This is what makes odradek a better test double than a real Kafka.

Rules are consumed in order per API key: `fail(ApiKey.PRODUCE, ErrorCode.NOT_LEADER_OR_FOLLOWER,
count=2)` answers the next two Produce requests with that error in every error_code of the
response, without running the handler (nothing is appended); `delay(..., ms)` holds requests
before handling them. Error responses are built by mirroring the request's structure into the
response schema, so every API gets a well-formed answer.
"""

from __future__ import annotations

import asyncio
import logging
from collections import deque
from dataclasses import dataclass

from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey
from odradek.wire.errors import ErrorCode

log = logging.getLogger(__name__)

# response array field -> request array field, where Kafka named them differently
_ARRAY_ALIASES = {
    "responses": ("topic_data", "topics"),
    "partition_responses": ("partition_data",),
    "results": ("resources", "topics"),
    "results_by_transaction": ("transactions",),
    "topic_results": ("topics",),
    "results_by_topic_v3_and_below": ("v3_and_below_topics",),
    "results_by_partition": ("partitions",),
    "coordinators": ("coordinator_keys",),
}
# what Kafka puts in these fields of an error answer
_ERROR_DEFAULTS = {
    "base_offset": -1,
    "offset": -1,
    "producer_id": -1,
    "producer_epoch": -1,
    "high_watermark": -1,
    "committed_offset": -1,
    "node_id": -1,
    "port": -1,
}
# the fields an injected error fills (AddPartitionsToTxn's partitions: partition_error_code)
_ERROR_FIELDS = frozenset({"error_code", "partition_error_code"})
_SCALAR_ALIASES = {
    "partition_index": ("partition_index", "partition", "index"),
    "index": ("index", "partition_index"),
    "name": ("name", "topic"),
    "key": ("key",),
}


@dataclass(slots=True)
class FaultRule:
    api_key: int
    remaining: int
    error_code: int | None = None
    delay_ms: int = 0


class FaultInjector:
    def __init__(self) -> None:
        self.rules: dict[int, deque[FaultRule]] = {}
        self.running = asyncio.Event()
        self.running.set()
        self.injected = 0

    @property
    def active(self) -> bool:
        return bool(self.rules) or not self.running.is_set()

    def add(self, rule: FaultRule) -> None:
        self.rules.setdefault(int(rule.api_key), deque()).append(rule)
        log.info("fault armed: %s", rule)

    def clear(self) -> None:
        self.rules.clear()
        self.running.set()

    def take(self, api_key: int) -> FaultRule | None:
        queue = self.rules.get(api_key)
        if not queue:
            return None
        rule = queue[0]
        rule.remaining -= 1
        if rule.remaining <= 0:
            queue.popleft()
            if not queue:
                del self.rules[api_key]
        self.injected += 1
        return rule

    def pause(self) -> None:
        self.running.clear()
        log.info("broker paused: requests are held until resumed")

    def resume(self) -> None:
        self.running.set()
        log.info("broker resumed")


def api_key(value: int | str) -> int:
    """An API key from an ApiKey, a number, or a name ("produce", "FETCH", "Produce")."""
    if isinstance(value, str):
        name = "".join("_" + c if c.isupper() and i else c for i, c in enumerate(value))
        for candidate in (value.upper(), name.upper()):
            if candidate in ApiKey.__members__:
                return int(ApiKey[candidate])
        raise ValueError(f"unknown API {value!r}")
    return int(ApiKey(int(value)))


def error_code(value: int | str) -> int:
    """An error code from an ErrorCode, a number or a name ("NOT_LEADER_OR_FOLLOWER")."""
    if isinstance(value, str):
        return int(ErrorCode[value.upper()])
    return int(ErrorCode(int(value)))


# kafka-python's message structs and their schema fields are untyped (protocol.Schema).
def _struct_fields(struct: protocol.Schema, version: int) -> list[protocol.Schema]:
    return [f for f in struct.untagged_fields(version)]


def _mirror(
    struct: protocol.Schema, version: int, source: protocol.Message, code: int
) -> dict[str, object]:
    """Values for a response struct: error codes set, keys copied from the request item."""
    out: dict[str, object] = {}
    for field in _struct_fields(struct, version):
        name = field.name
        if name in _ERROR_FIELDS:
            out[name] = code
        elif field.is_struct_array():
            sources = [name, *_ARRAY_ALIASES.get(name, ())]
            items = None
            for s in sources:
                value = getattr(source, s, None) if source is not None else None
                if isinstance(value, list):
                    items = value
                    break
            elems = []
            for item in items or []:
                if isinstance(item, int):  # e.g. a list of partition indexes
                    item_src = _IntItem(item)
                else:
                    item_src = item
                elems.append(field.data_class(**_mirror(field, version, item_src, code)))
            out[name] = elems
        elif field.is_struct():
            out[name] = field.data_class(**_mirror(field, version, None, code))
        else:
            value = None
            for alias in _SCALAR_ALIASES.get(name, (name,)):
                if source is not None and hasattr(source, alias):
                    value = getattr(source, alias)
                    break
            if value is None or name.endswith("_ms"):
                value = _ERROR_DEFAULTS.get(name, field.default)
            out[name] = value
    return out


class _IntItem:
    __slots__ = ("partition_index",)

    def __init__(self, value: int) -> None:
        self.partition_index = value


def error_response(
    api_key: int, version: int, request: protocol.Message, code: int
) -> protocol.Message:
    """A well-formed response of `api_key` answering `request` with `code` everywhere."""
    cls = protocol.response_class(api_key)
    values = _mirror(cls._struct, version, request, code)
    values.pop("throttle_time_ms", None)
    return (
        cls(version=version, throttle_time_ms=0, **values)
        if "throttle_time_ms" in {f.name for f in _struct_fields(cls._struct, version)}
        else cls(version=version, **values)
    )
