"""Property tests: hostile bytes only ever raise our protocol errors from the decoders.

For every API key and version the broker advertises, arbitrary bytes and arbitrary mutations
(bit flips, truncations, changed length and count fields, spliced bytes) of a valid request go
through what dispatch runs (request header parse, flexible header, strict body decode), and the
only exceptions allowed are `HeaderError` / `DecodeError`; the same for the frame decoder
(`FrameError`) and the RecordBatch header view and record iteration (`CorruptRecordError`).
Inputs are a few KB, and the memory a decode may take is bounded (tracemalloc), so a request
claiming a huge count cannot make the decoder allocate for it (KAFKA-14063). Also unit tests for
what the strict decoder adds to kafka-python's: bounded varints and tagged fields read by size.
"""

from __future__ import annotations

import random
import struct
import tracemalloc
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.testing.fuzz import (
    advertised_versions,
    encode,
    mutate,
    null_field_bodies,
    request_header,
    sample_request,
)
from odradek.wire import protocol
from odradek.wire.batch import CorruptRecordError, crc_ok, iter_batches, parse_header
from odradek.wire.frames import FrameDecoder, FrameError
from odradek.wire.header import HeaderError, finish_flexible, parse_fixed
from odradek.wire.records import build_batch, decode_records

KEYS = advertised_versions()
SAMPLES = {kv: encode(sample_request(*kv), kv[1], 7) for kv in KEYS}
FUZZ = settings(
    max_examples=1000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def decode_payload(payload: bytes) -> Any:
    """What dispatch does with a frame payload before a handler sees it."""
    header = parse_fixed(payload)
    if protocol.is_flexible_request(header.api_key, header.api_version):
        finish_flexible(payload, header)
    return protocol.decode_request(header.api_key, header.api_version, payload, header.body_offset)


def only_protocol_errors(payload: bytes) -> None:
    try:
        decode_payload(payload)
    except (HeaderError, protocol.DecodeError):
        pass


def test_every_sample_decodes_back() -> None:
    for (key, version), payload in SAMPLES.items():
        request = decode_payload(payload)
        assert type(request) is protocol.request_class(key), (key, version)


# -- arbitrary bytes and mutations ---------------------------------------------------------------


@FUZZ
@given(st.binary(max_size=4096))
def test_arbitrary_payloads(payload: bytes) -> None:
    only_protocol_errors(payload)


@FUZZ
@given(st.sampled_from(KEYS), st.binary(max_size=4096))
def test_valid_header_arbitrary_body(kv: tuple[int, int], body: bytes) -> None:
    only_protocol_errors(request_header(*kv, 7) + body)


_INTERESTING = (-1, -2, 0, 1, 0x7F, 0xFF, 0x7FFF, 0xFFFF, 0x7FFFFFFF, -0x80000000, 1 << 24)


@st.composite
def mutated(draw: st.DrawFn) -> bytes:
    kv = draw(st.sampled_from(KEYS))
    b = bytearray(SAMPLES[kv])
    for _ in range(draw(st.integers(1, 4))):
        if not b:
            break
        op = draw(st.sampled_from(("flip", "cut", "i32", "i16", "varint", "del", "ins")))
        i = draw(st.integers(0, len(b) - 1))
        if op == "flip":
            b[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "cut":
            del b[i:]
        elif op in ("i32", "i16"):
            fmt = ">i" if op == "i32" else ">h"
            value = draw(st.sampled_from(_INTERESTING))
            if op == "i16":
                value = max(-0x8000, min(0x7FFF, value))
            if i + struct.calcsize(fmt) <= len(b):
                struct.pack_into(fmt, b, i, value)
        elif op == "varint":
            b[i:i] = draw(st.sampled_from((b"\x00", b"\xff\xff\xff\xff\x0f", b"\xff" * 40)))
        elif op == "del":
            del b[i : i + draw(st.integers(1, 8))]
        else:
            b[i:i] = draw(st.binary(min_size=1, max_size=8))
    return bytes(b)


@FUZZ
@given(mutated())
def test_mutated_valid_requests(payload: bytes) -> None:
    only_protocol_errors(payload)


@FUZZ
@given(st.integers(0, 2**32), st.sampled_from(KEYS))
def test_live_fuzzer_mutations(seed: int, kv: tuple[int, int]) -> None:
    rng = random.Random(seed)
    for _ in range(4):
        only_protocol_errors(mutate(rng, SAMPLES[kv]).payload)


def test_null_fields_are_decode_errors() -> None:
    for key, version in KEYS:
        for path, body in null_field_bodies(key, version):
            with pytest.raises(protocol.NullFieldError):
                protocol.decode_request(key, version, body, 0)
            assert path


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated())
def test_decoding_memory_is_bounded_by_the_input(payload: bytes) -> None:
    tracemalloc.start()
    try:
        only_protocol_errors(payload)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < (1 << 20) + 200 * len(payload), (peak, len(payload))


def test_huge_counts_are_refused_before_allocating() -> None:
    # Metadata v12 (flexible): a compact topics array claiming 2^28 - 1 elements in 3 bytes
    head = request_header(3, 12, 7)
    with pytest.raises(protocol.DecodeError, match="items in"):
        decode_payload(head + b"\xff\xff\xff\x7f" + b"\x00\x00\x00")
    # ListOffsets v1 (classic): an int32 count of 2^31 - 1 topics
    head = request_header(2, 1, 7)
    with pytest.raises(protocol.DecodeError, match="items in"):
        decode_payload(head + struct.pack(">ii", -1, 0x7FFFFFFF) + b"\x00" * 8)


# -- what the strict decoder adds to kafka-python's ------------------------------------------


def test_an_overlong_varint_is_refused_at_its_sixth_byte() -> None:
    """kafka-python's varint loop has no bound: a long run of 0xff built a huge integer, with
    time quadratic in the run (80 KB took 0.2 s, 1 MB some 30 s: a frozen event loop)."""
    head = request_header(3, 12, 7)
    with pytest.raises(protocol.DecodeError, match="varint longer than 5 bytes"):
        decode_payload(head + b"\xff" * 100_000 + b"\x01")


def _uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def test_tagged_fields_are_read_by_their_declared_size() -> None:
    """A tagged field is skipped by its size (as Kafka does), not decoded past it, and no longer
    copies the rest of the message (kafka-python copied it per struct: quadratic)."""
    # Metadata v12 body: topics (1 topic: zero uuid, name "t", then tags), auto-create,
    # include-authorized-operations, request tags
    unknown = _uvarint(1) + _uvarint(9) + _uvarint(3) + b"abc"
    topic = b"\x00" * 16 + _uvarint(2) + b"t" + unknown
    body = _uvarint(2) + topic + b"\x01\x00" + b"\x00"
    request = decode_payload(request_header(3, 12, 7) + body)
    assert request.topics[0].name == "t"
    assert request.topics[0].unknown_tags == {"_9": b"abc"}
    assert request.allow_auto_topic_creation is True
    # the same tagged field claiming more bytes than the message has
    lying = _uvarint(1) + _uvarint(9) + _uvarint(300) + b"abc"
    body = _uvarint(2) + b"\x00" * 16 + _uvarint(2) + b"t" + lying + b"\x01\x00\x00"
    with pytest.raises(protocol.DecodeError, match="runs past the end"):
        decode_payload(request_header(3, 12, 7) + body)


def test_a_string_running_past_the_end_is_refused() -> None:
    # DescribeGroups v0: one group id claiming 100 bytes, 3 present
    body = struct.pack(">ih", 1, 100) + b"abc"
    with pytest.raises(protocol.DecodeError, match="truncated"):
        decode_payload(request_header(15, 0, 7) + body)


def test_produce_records_are_the_frames_bytes_and_checked_for_length() -> None:
    # the records come out as a view of the frame (not a copy), exactly the bytes sent; a
    # records field claiming more bytes than the frame holds is refused, in both encodings
    batch = build_batch([(None, b"v" * 300, [], 0)])
    for version in (3, 9):
        T = protocol.ProduceRequest.TopicProduceData
        req = protocol.ProduceRequest(
            transactional_id=None,
            acks=1,
            timeout_ms=1000,
            topic_data=[T(name="t", partition_data=[T.PartitionProduceData(0, batch)])],
        )
        payload = bytearray(encode(req, version, 7))
        records = decode_payload(payload).topic_data[0].partition_data[0].records
        assert bytes(records) == batch
        assert isinstance(records, memoryview) and records.obj is payload
        with pytest.raises(protocol.DecodeError, match="truncated field records"):
            decode_payload(payload[: -10 if version < 9 else -12])


def test_unknown_versions_and_keys_are_decode_errors() -> None:
    with pytest.raises(protocol.DecodeError):
        protocol.decode_request(3, 999, b"", 0)
    with pytest.raises(protocol.DecodeError):
        protocol.decode_request(9999, 0, b"", 0)


# -- frames and record batches -------------------------------------------------------------------


@FUZZ
@given(st.lists(st.binary(max_size=512), max_size=20))
def test_frame_decoder_only_raises_frame_errors(chunks: list[bytes]) -> None:
    decoder = FrameDecoder(max_size=4096)
    try:
        for chunk in chunks:
            for frame in decoder.feed(chunk):
                assert len(frame) <= 4096
    except FrameError:
        pass
    assert decoder.buffered <= 4 + 4096 + 512


BATCH = build_batch(
    [(b"k%d" % i, b"v" * i, [("h", b"x")], 1_700_000_000_000 + i) for i in range(5)]
)


@st.composite
def mutated_batch(draw: st.DrawFn) -> bytes:
    b = bytearray(BATCH)
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(b) - 1))
        op = draw(st.sampled_from(("flip", "cut", "i32", "byte")))
        if op == "flip":
            b[i] ^= 1 << draw(st.integers(0, 7))
        elif op == "cut":
            del b[max(i, 1) :]
        elif op == "i32" and i + 4 <= len(b):
            struct.pack_into(">i", b, i, draw(st.sampled_from(_INTERESTING)))
        else:
            b[i] = draw(st.integers(0, 255))
        if not b:
            break
    return bytes(b)


@FUZZ
@given(st.one_of(mutated_batch(), st.binary(max_size=2048)))
def test_batch_view_and_record_iteration_only_raise_corrupt_record(data: bytes) -> None:
    try:
        header = parse_header(data, 0)
        crc_ok(data, 0, header)
    except CorruptRecordError:
        pass
    try:
        for _pos, _header in iter_batches(data):
            pass
    except CorruptRecordError:
        pass
    try:
        decode_records(data, 0, max_size=1 << 20)
    except CorruptRecordError:
        pass
