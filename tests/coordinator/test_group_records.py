"""`__consumer_offsets` keys and values: golden bytes both ways, every version, round trips."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.coordinator.group import records as rec
from odradek.coordinator.group.assignment import encode_subscription, subscribed_topics


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", "").replace("\n", ""))


# key v1: version, group "g", topic "t", partition 3
OFFSET_KEY = h("0001 0001 67 0001 74 00000003")
# key v2: version, group "grp"
GROUP_KEY = h("0002 0003 677270")
# value v3: offset 42, leader epoch 7, metadata "m", commit timestamp 1000
OFFSET_V3 = h("0003 000000000000002a 00000007 0001 6d 00000000000003e8")
# value v1: offset 42, metadata "", commit 1000, expire 2000
OFFSET_V1 = h("0001 000000000000002a 0000 00000000000003e8 00000000000007d0")
# value v0 and v2: offset 5, metadata "x", commit 9
OFFSET_V0 = h("0000 0000000000000005 0001 78 0000000000000009")
OFFSET_V2 = h("0002 0000000000000005 0001 78 0000000000000009")
# value v4 (flexible): offset 5, epoch -1, compact metadata "x", commit 9, no tags
OFFSET_V4 = h("0004 0000000000000005 ffffffff 02 78 0000000000000009 00")

# group value v3: protocol type "consumer", generation 2, protocol "range", leader "a",
# state timestamp 5, one member "a" (no instance id), client "c", host "/h",
# rebalance 300000, session 10000, subscription 01 02, assignment 03
GROUP_V3 = h("""
0003 0008 636f6e73756d6572 00000002 0005 72616e6765 0001 61 0000000000000005
00000001
  0001 61 ffff 0001 63 0002 2f68 000493e0 00002710 00000002 0102 00000001 03
""")


def _group_value() -> rec.GroupValue:
    return rec.GroupValue(
        "consumer",
        2,
        "range",
        "a",
        5,
        [rec.MemberValue("a", None, "c", "/h", 300000, 10000, b"\x01\x02", b"\x03")],
    )


def test_offset_key_golden():
    assert rec.offset_key("g", "t", 3) == OFFSET_KEY
    assert rec.decode_key(OFFSET_KEY) == rec.OffsetKey("g", "t", 3)
    # version 0 keys (older brokers) read the same way
    assert rec.decode_key(b"\x00\x00" + OFFSET_KEY[2:]) == rec.OffsetKey("g", "t", 3)


def test_group_key_golden():
    assert rec.group_key("grp") == GROUP_KEY
    assert rec.decode_key(GROUP_KEY) == rec.GroupKey("grp")


def test_unknown_key_versions_are_skipped():
    assert rec.decode_key(b"\x00\x03\x00\x01a") is None  # a KIP-848 record


def test_offset_value_v3_golden():
    value = rec.OffsetValue(42, "m", 1000, 7)
    assert rec.offset_value(value) == OFFSET_V3
    assert rec.decode_offset_value(OFFSET_V3) == value


def test_offset_value_v1_written_with_expiry():
    value = rec.OffsetValue(42, "", 1000, -1, 2000)
    assert rec.offset_value(value) == OFFSET_V1
    assert rec.decode_offset_value(OFFSET_V1) == value


@pytest.mark.parametrize("raw,version", [(OFFSET_V0, 0), (OFFSET_V2, 2), (OFFSET_V4, 4)])
def test_offset_value_other_versions(raw, version):
    value = rec.decode_offset_value(raw)
    assert (value.offset, value.metadata, value.commit_timestamp, value.leader_epoch) == (
        5,
        "x",
        9,
        -1,
    )
    assert rec.offset_value(value, version) == raw


def test_group_value_v3_golden():
    assert rec.group_value(_group_value()) == GROUP_V3
    assert rec.decode_group_value(GROUP_V3) == _group_value()


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_group_value_versions_round_trip(version):
    value = _group_value()
    value.members[0].group_instance_id = "inst" if version >= 3 else None
    decoded = rec.decode_group_value(rec.group_value(value, version))
    assert decoded.members[0].member_id == "a"
    assert decoded.members[0].assignment == b"\x03"
    assert decoded.protocol == "range"
    if version >= 3:
        assert decoded.members[0].group_instance_id == "inst"
    if version >= 2:
        assert decoded.current_state_timestamp == 5


def test_empty_group_value_with_null_protocol():
    value = rec.GroupValue("consumer", 7, None, None, 11, [])
    assert rec.decode_group_value(rec.group_value(value)) == value


def test_truncated_values_raise_format_error():
    with pytest.raises(rec.RecordFormatError):
        rec.decode_offset_value(OFFSET_V3[:-1])
    with pytest.raises(rec.RecordFormatError):
        rec.decode_group_value(GROUP_V3[:20])
    with pytest.raises(rec.RecordFormatError):
        rec.decode_offset_value(b"\x00\x09" + OFFSET_V3[2:])


names = st.text(min_size=0, max_size=30)
ints32 = st.integers(-(2**31), 2**31 - 1)
ints64 = st.integers(-(2**63), 2**63 - 1)


@given(names, names, st.integers(0, 2**31 - 1))
def test_offset_key_round_trip(group, topic, partition):
    assert rec.decode_key(rec.offset_key(group, topic, partition)) == rec.OffsetKey(
        group, topic, partition
    )


@given(ints64, names, st.integers(0, 2**62), ints32, st.booleans())
def test_offset_value_round_trip(offset, metadata, ts, epoch, expiring):
    value = rec.OffsetValue(
        offset, metadata, ts, epoch if not expiring else -1, abs(ts) if expiring else -1
    )
    assert rec.decode_offset_value(rec.offset_value(value)) == value


@given(
    st.lists(
        st.tuples(names, st.none() | names, st.binary(max_size=40), st.binary(max_size=40)),
        max_size=5,
    ),
    ints32,
    st.none() | names,
)
def test_group_value_round_trip(members, generation, protocol):
    value = rec.GroupValue(
        "consumer",
        generation,
        protocol,
        None,
        3,
        [rec.MemberValue(m, i, "cid", "/host", 1, 2, s, a) for m, i, s, a in members],
    )
    assert rec.decode_group_value(rec.group_value(value)) == value


@pytest.mark.parametrize(
    "text,expected",
    [
        ("", 0),
        ("a", 97),
        ("hello", 99162322),
        ("Aa", 2112),
        ("BB", 2112),
        ("polygenelubricants", -(2**31)),
        ("\U0001f600", 1772899),
    ],
)
def test_java_string_hashcode(text, expected):
    assert rec.java_string_hashcode(text) == expected


def test_partition_for_uses_kafka_abs():
    assert rec.partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0
    assert rec.partition_for("hello", 50) == 99162322 % 50
    negative = "console-consumer-1"
    h_ = rec.java_string_hashcode(negative)
    assert rec.partition_for(negative, 50) == abs(h_) % 50


def test_subscription_topics():
    assert subscribed_topics(encode_subscription(["a", "b"], b"ud")) == {"a", "b"}
    assert subscribed_topics(b"\x00") is None
    assert subscribed_topics(b"\xff\xff\x00\x00\x00\x00") is None
