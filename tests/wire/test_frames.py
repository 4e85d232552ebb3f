"""Framing and request-header parsing: byte-exact, fed in arbitrary pieces, garbage rejected."""

from __future__ import annotations

import struct
import tracemalloc

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from odradek.wire import frames
from odradek.wire.frames import GROWTH, SCRATCH, FrameDecoder, FrameError
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


def receive(dec: FrameDecoder, stream: bytes, chunk: int) -> int:
    """Drive the decoder the way BufferedProtocol does: get_buffer, write, buffer_updated."""
    pos = cut = 0
    while pos < len(stream):
        buf = dec.get_buffer()
        assert len(buf) > 0
        n = min(len(buf), chunk, len(stream) - pos)
        buf[:n] = stream[pos : pos + n]
        buf.release()  # as asyncio drops it: a large frame's buffer can only grow unexported
        pos += n
        cut += dec.buffer_updated(n)
    return cut


@given(
    st.lists(st.sampled_from([0, 1, 100, SCRATCH - 4, SCRATCH - 3, 3 * SCRATCH]), max_size=5),
    st.sampled_from([1000, 4097, SCRATCH - 1, 2 * SCRATCH]),
)
@settings(deadline=None, max_examples=50)
def test_buffer_api_cuts_small_and_large_frames(sizes, chunk):
    payloads = [bytes([i % 251]) * size for i, size in enumerate(sizes)]
    reserved: list[int] = []
    dec = FrameDecoder(1 << 22, reserve=lambda n: reserved.append(n) is None)
    assert receive(dec, b"".join(framed(p) for p in payloads), chunk) == len(payloads)
    assert [bytes(p) for p, _ in dec.frames] == payloads
    # only frames that do not fit the scratch buffer are reserved, for exactly their size
    big = [len(p) for p in payloads if len(p) + 4 > SCRATCH]
    assert reserved == big and [r for _, r in dec.frames if r] == big
    assert dec.buffered == 0


@pytest.mark.parametrize("chunk", [1000, SCRATCH, 3 * SCRATCH])
def test_large_frames_are_exact_in_memory_used_before(chunk):
    # large frames' buffers are not zero-filled: whatever the freed memory held, a frame is
    # handed out only once every byte of it has been received
    size = 5 * SCRATCH
    for _ in range(3):
        junk = bytearray(b"\xaa") * (8 * SCRATCH)
        del junk
        dec = FrameDecoder(1 << 22, pending=lambda: SCRATCH)
        payload = bytes(size)
        assert receive(dec, framed(payload) + framed(b"next"), chunk) == 2
        assert [bytes(p) for p, _ in dec.frames] == [payload, b"next"]


def test_large_frame_buffer_grows_with_the_bytes_not_the_announced_size():
    dec = FrameDecoder(1 << 30)
    dec.buffer_updated(0)
    first = dec.get_buffer()
    first[:8] = struct.pack(">i", 100 << 20) + b"abcd"  # announces 100 MB, sends 4 bytes
    first.release()
    assert dec.buffer_updated(8) == 0
    assert len(dec.get_buffer()) <= SCRATCH * GROWTH
    assert dec.buffered == 4
    assert dec.release() == 100 << 20  # dropped: its reservation is handed back


def test_refused_reservation_keeps_the_bytes_until_retry():
    allow = [False]
    dec = FrameDecoder(1 << 20, reserve=lambda n: allow[0])
    body = b"x" * (SCRATCH + 10)
    stream = framed(b"small") + framed(body)
    buf = dec.get_buffer()
    buf[:SCRATCH] = stream[:SCRATCH]
    buf.release()
    assert dec.buffer_updated(SCRATCH) == 1  # the small frame before it is cut
    assert dec.waiting_for_memory
    allow[0] = True
    assert dec.retry() == 0 and not dec.waiting_for_memory
    assert receive(dec, stream[SCRATCH:], 1000) == 1
    assert [(bytes(p), r) for p, r in dec.frames] == [(b"small", 0), (body, len(body))]


def test_idle_decoders_hold_no_scratch_buffer(monkeypatch):
    """A connection between requests (every frame it sent answered) keeps no 64 KiB scratch,
    also when more connections were mid-frame at once than spares are kept: 2,000 idle
    connections used to hold 128 MB of them."""
    monkeypatch.setattr(frames, "_spare", [])
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        decoders = [FrameDecoder(1 << 20) for _ in range(200)]
        requests = [framed(b"api-versions-%d" % i) for i in range(len(decoders))]
        for dec, req in zip(decoders, requests, strict=True):
            assert dec.feed(req[:6]) == []  # all of them in the middle of a frame at once
        for i, (dec, req) in enumerate(zip(decoders, requests, strict=True)):
            assert dec.feed(req[6:]) == [b"api-versions-%d" % i]
        held = tracemalloc.get_traced_memory()[0] - before - len(frames._spare) * SCRATCH
    finally:
        tracemalloc.stop()
    assert len(frames._spare) <= frames.SPARE_SCRATCH
    assert held < len(decoders) * 4096, f"{held / len(decoders):.0f} bytes per idle decoder"


def test_partial_frames_of_interleaved_decoders_stay_apart():
    """Scratch buffers are shared between connections only while empty: a partial frame stays
    with its own decoder while others cut and give theirs back."""
    one, two = FrameDecoder(1 << 20), FrameDecoder(1 << 20)
    a, b, c = framed(b"a" * 500), framed(b"b" * 300), framed(b"c" * 700)
    assert one.feed(a[:200]) == []
    assert two.feed(b + c[:10]) == [b"b" * 300]
    assert FrameDecoder(1 << 20).feed(framed(b"x" * 900)) == [b"x" * 900]
    assert one.feed(a[200:]) == [b"a" * 500]
    assert two.feed(c[10:]) == [b"c" * 700]
    assert one.buffered == two.buffered == 0


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
