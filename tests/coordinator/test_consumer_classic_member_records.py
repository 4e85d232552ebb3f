"""ConsumerGroupMemberMetadataValue's tagged ClassicMemberMetadata (KIP-848 online migration):
Kafka 4.x writes it for the classic members of a converted consumer group; odradek reads and
writes it byte for byte as Kafka's generated serializer does."""

from __future__ import annotations

import struct

from odradek.coordinator.group import consumer_records as crec
from odradek.coordinator.group.consumer_group import (
    ConsumerGroupConfig,
    ConsumerGroupManager,
    ConsumerMember,
)
from odradek.coordinator.group.timers import ManualScheduler
from odradek.wire.errors import ErrorCode


def _kafka_value(session_ms: int, protocols: list[tuple[str, bytes]]) -> bytes:
    """The value as Kafka's ConsumerGroupMemberMetadataValue (v0, flexible) serializes it for a
    member with instance id null, rack null, client "c", host "/h", topics ["t"], regex null,
    rebalance timeout 300000, assignor null, and the classic metadata as tag 0."""
    struct_ = struct.pack(">i", session_ms) + bytes([len(protocols) + 1])
    for name, meta in protocols:
        struct_ += bytes([len(name) + 1]) + name.encode() + bytes([len(meta) + 1]) + meta + b"\0"
    struct_ += b"\0"
    return (
        struct.pack(">h", 0)
        + b"\0\0"  # instance id, rack id: null
        + b"\x02c\x03/h"
        + b"\x02\x02t"
        + b"\0"  # regex null
        + struct.pack(">i", 300000)
        + b"\0"  # assignor null
        + b"\x01\x00"
        + bytes([len(struct_)])
        + struct_
    )


def _member(classic: crec.ClassicMemberMetadata | None) -> ConsumerMember:
    return ConsumerMember(
        "m1",
        client_id="c",
        client_host="/h",
        subscribed_topic_names=["t"],
        server_assignor=None,
        classic=classic,
    )


def test_classic_member_metadata_is_written_as_kafkas_tagged_field() -> None:
    classic = crec.ClassicMemberMetadata(10000, [("range", b"\x00\x01sub"), ("roundrobin", b"")])
    _, value = crec.member_metadata("g", _member(classic))
    assert value == _kafka_value(10000, [("range", b"\x00\x01sub"), ("roundrobin", b"")])
    assert value is not None
    decoded = crec.decode_value(crec.MEMBER_METADATA, value)
    assert isinstance(decoded, crec.MemberMetadataValue)
    assert decoded.classic == classic
    assert decoded.subscribed_topic_names == ["t"]
    # a consumer-protocol member has no tagged field at all, as before
    _, plain = crec.member_metadata("g", _member(None))
    assert plain is not None and plain.endswith(struct.pack(">i", 300000) + b"\0\0")
    plain_decoded = crec.decode_value(crec.MEMBER_METADATA, plain)
    assert isinstance(plain_decoded, crec.MemberMetadataValue)
    assert plain_decoded.classic is None


def test_a_converted_groups_classic_member_replays_from_kafkas_records() -> None:
    written: list[tuple[bytes, bytes | None]] = []

    def append(_group: str, records: list[tuple[bytes, bytes | None]]) -> ErrorCode:
        written.extend(records)
        return ErrorCode.NONE

    manager = ConsumerGroupManager(ConsumerGroupConfig(), ManualScheduler(), dict, append)
    key = crec.member_metadata("g", _member(None))[0]
    decoded_key = crec.decode_key(key)
    assert decoded_key is not None
    manager.replay_record(decoded_key, _kafka_value(6000, [("range", b"meta")]))
    group = manager.get("g")
    assert group is not None
    member = group.members["m1"]
    assert member.classic == crec.ClassicMemberMetadata(6000, [("range", b"meta")])
    # and it is written back unchanged
    assert crec.member_metadata("g", member)[1] == _kafka_value(6000, [("range", b"meta")])
