"""Reading the embedded consumer protocol (ConsumerProtocolSubscription, KIP-429 fields too).

The coordinator treats member metadata as opaque bytes, except for one question Kafka also asks:
which topics does a consumer group subscribe to (OffsetDelete answers GROUP_SUBSCRIBED_TO_TOPIC,
offsets of unsubscribed topics expire in a Stable group). Layout (never flexible):

    int16   version
    int32   topic count, then per topic: int16 length + UTF-8 name
    bytes   user_data (int32 length, -1 null)            -- not read here
    v1+     owned_partitions, v2+ generation_id, v3+ rack_id  -- not read here
"""

from __future__ import annotations

import struct

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


def subscribed_topics(metadata: bytes) -> set[str] | None:
    """The topics of a consumer subscription, or None when it does not parse."""
    try:
        (version,) = _I16.unpack_from(metadata, 0)
        if version < 0:
            return None
        (count,) = _I32.unpack_from(metadata, 2)
        if count < 0 or count > len(metadata):
            return None
        pos = 6
        topics = set()
        for _ in range(count):
            (n,) = _I16.unpack_from(metadata, pos)
            pos += 2
            if n < 0 or pos + n > len(metadata):
                return None
            topics.add(bytes(metadata[pos : pos + n]).decode("utf-8"))
            pos += n
        return topics
    except (struct.error, UnicodeDecodeError):
        return None


def encode_subscription(
    topics: list[str], user_data: bytes | None = None, version: int = 0
) -> bytes:
    """A ConsumerProtocolSubscription v0 (tests and tools)."""
    out = bytearray(_I16.pack(version))
    out += _I32.pack(len(topics))
    for t in topics:
        raw = t.encode("utf-8")
        out += _I16.pack(len(raw)) + raw
    if user_data is None:
        out += _I32.pack(-1)
    else:
        out += _I32.pack(len(user_data)) + user_data
    return bytes(out)
