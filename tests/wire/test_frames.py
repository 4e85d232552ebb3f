"""Framing and request-header parsing: byte-exact, fed in arbitrary pieces, garbage rejected."""

from __future__ import annotations

import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from odradek.wire.frames import FrameDecoder, FrameError
from odradek.wire.header import HeaderError, finish_flexible, parse_fixed, response_header


def framed(payload: bytes) -> bytes:
    return struct.pack(">i", len(payload)) + payload


@given(st.lists(st.binary(max_size=300), max_size=8), st.data())
def test_frames_survive_any_split(payloads, data):
    stream = b"".join(framed(p) for p in payloads)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=6)))
    dec = FrameDecoder(1 << 20)
    got = []
    prev = 0
    for cut in cuts + [len(stream)]:
        got += dec.feed(stream[prev:cut])
        prev = cut
    assert got == payloads
    assert dec.buffered == 0


def test_oversized_and_negative_frames_are_refused():
    with pytest.raises(FrameError):
        FrameDecoder(100).feed(struct.pack(">i", 101))
    with pytest.raises(FrameError):
        FrameDecoder(100).feed(struct.pack(">i", -5))


def test_request_header_v1_and_v2():
    # Metadata v12 from kafka-python: key 3, version 12, correlation 7, client id "cli", tags 0
    payload = struct.pack(">hhih", 3, 12, 7, 3) + b"cli" + b"\x00" + b"BODY"
    h = parse_fixed(payload)
    assert (h.api_key, h.api_version, h.correlation_id, h.client_id) == (3, 12, 7, "cli")
    finish_flexible(payload, h)
    assert payload[h.body_offset :] == b"BODY"
    null_client = struct.pack(">hhih", 18, 0, 1, -1)
    assert parse_fixed(null_client).client_id is None


@given(st.binary(max_size=64))
def test_arbitrary_header_bytes_only_raise_header_error(raw):
    try:
        h = parse_fixed(raw)
        finish_flexible(raw, h)
    except HeaderError:
        pass


def test_response_headers():
    assert response_header(9, False) == b"\x00\x00\x00\x09"
    assert response_header(9, True) == b"\x00\x00\x00\x09\x00"
