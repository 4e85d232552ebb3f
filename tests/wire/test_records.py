"""Records inside batches: golden client bytes both ways, round trips, control records, garbage.

Golden vectors: the same three records from an idempotent producer (id 1000, epoch 2, base
sequence 7), built by the Java client's MemoryRecordsBuilder (kafka-clients 3.9.1 with
snappy-java, lz4-java and zstd-jni) for every codec, plus its COMMIT / ABORT markers
(MemoryRecords.withEndTransactionMarker: producer 8000, epoch 5, coordinator epoch 12,
timestamp 1234); and by kafka-python 3.0.12's DefaultRecordBatchBuilder with Python's gzip and
the real lz4 (frames with a content size) and zstandard libraries. Java's uncompressed, snappy
and lz4 batches and its markers are the bytes we build, byte for byte; gzip and zstd output
depends on the compressor, so those are checked by decoding.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from types import SimpleNamespace

import cramjam
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka import codec as kafka_codec
from kafka.record import default_records
from kafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from odradek.wire.batch import (
    HEADER_SIZE,
    HEADER_STRUCT,
    CorruptRecordError,
    crc_ok,
    parse_header,
    write_crc,
)
from odradek.wire.records import (
    Record,
    build_batch,
    build_batch_exact,
    build_control_batch,
    control_type,
    decode_records,
    read_varint,
    read_varlong,
    write_varint,
    write_varlong,
)

JAVA_GOLDEN = {
    0: bytes.fromhex(  # none
        "0000000000000000000000f80000000002dca0698c0000000000020000018bcfe568000000018bcfe5680500"
        "000000000003e800020000000700000003ca010000000a6b65792d30900176616c75652076616c7565207661"
        "6c75652076616c75652076616c75652076616c75652076616c75652076616c75652076616c75652076616c75"
        "652076616c75652076616c756520040a7472616365066162630a656d707479009e01000a0201900176616c75"
        "652076616c75652076616c75652076616c75652076616c75652076616c75652076616c75652076616c756520"
        "76616c75652076616c75652076616c75652076616c756520001c0013040a6b65792d320102026e01"
    ),
    1: bytes.fromhex(  # gzip
        "00000000000000000000008200000000020f2b29720001000000020000018bcfe568000000018bcfe5680500"
        "000000000003e8000200000007000000031f8b08000000000000ff3bc5c8c0c0c0959d5aa96b3081b12c31a7"
        "345581729285aba4283139952d3129992b35b7a0a492611e2303171323f56c6090611066013bdb889189298f"
        "1100726d6207c7000000"
    ),
    2: bytes.fromhex(  # snappy
        "00000000000000000000008f00000000029348f9200002000000020000018bcfe568000000018bcfe5680500"
        "000000000003e80002000000070000000382534e415050590000000001000000010000004ac70148ca010000"
        "000a6b65792d30900176616c756520ee060009065c040a7472616365066162630a656d707479009e01000a02"
        "01fe620019623c001c0013040a6b65792d320102026e01"
    ),
    3: bytes.fromhex(  # lz4
        "0000000000000000000000870000000002be8b43bc0003000000020000018bcfe568000000018bcfe5680500"
        "000000000003e80002000000070000000304224d1860408247000000ff04ca010000000a6b65792d30900176"
        "616c75652006002fff09040a7472616365066162630a656d707479009e01000a0201620037f001001c001304"
        "0a6b65792d320102026e0100000000"
    ),
    4: bytes.fromhex(  # zstd
        "0000000000000000000000810000000002838feee20004000000020000018bcfe568000000018bcfe5680500"
        "000000000003e80002000000070000000328b52ffd00582402006403ca010000000a6b65792d30900176616c"
        "756520040a7472616365066162630a656d707479009e01000a0201001c001304320102026e0103003a133457"
        "06747ca46207010000"
    ),
}

JAVA_MARKERS = {
    True: bytes.fromhex(  # commit
        "0000000000000000000000420000000002570e092e00300000000000000000000004d200000000000004d200"
        "00000000001f400005ffffffff000000012000000008000000010c00000000000c00"
    ),
    False: bytes.fromhex(  # abort
        "0000000000000000000000420000000002a330df6600300000000000000000000004d200000000000004d200"
        "00000000001f400005ffffffff000000012000000008000000000c00000000000c00"
    ),
}

KAFKA_PYTHON_GOLDEN = {
    1: bytes.fromhex(  # gzip
        "000000000000000000000082000000000263c009f50001000000020000018bcfe568000000018bcfe5680500"
        "000000000003e8000200000007000000031f8b08002766026b02ff3bc5c8c0c0c0959d5aa96b3081b12c31a7"
        "345581729285aba4283139952d3129992b35b7a0a492611e2303171323f56c6090611066013bdb889189298f"
        "1100726d6207c7000000"
    ),
    3: bytes.fromhex(  # lz4
        "00000000000000000000008f0000000002a7a81d9a0003000000020000018bcfe568000000018bcfe5680500"
        "000000000003e80002000000070000000304224d186840c7000000000000005c47000000ff04ca010000000a"
        "6b65792d30900176616c75652006002fff09040a7472616365066162630a656d707479009e01000a02016200"
        "37f001001c0013040a6b65792d320102026e0100000000"
    ),
    4: bytes.fromhex(  # zstd
        "00000000000000000000007e0000000002d0ff453b0004000000020000018bcfe568000000018bcfe5680500"
        "000000000003e80002000000070000000328b52ffd20c72502006403ca010000000a6b65792d30900176616c"
        "756520040a7472616365066162630a656d707479009e01000a0201001c001304320102026e0103003a133457"
        "06747ca46207"
    ),
}

GOLDEN_RECORDS = [
    Record(0, 1700000000000, b"key-0", b"value " * 12, [("trace", b"abc"), ("empty", b"")]),
    Record(1, 1700000000005, None, b"value " * 12, []),
    Record(2, 1699999999990, b"key-2", None, [("n", None)]),
]

CODECS = [0, 1, 2, 3, 4]


@contextmanager
def kafka_python_codecs() -> Iterator[None]:
    """Give kafka-python every codec: python-snappy, lz4 and zstandard are not installed here.

    Snappy keeps kafka-python's own xerial framing around cramjam's raw blocks; lz4 and zstd
    frames are handed to cramjam. Record parsing and CRC checks stay kafka-python's.
    """
    raw_snappy = SimpleNamespace(
        compress=lambda b: bytes(cramjam.snappy.compress_raw(b)),
        decompress=lambda b: bytes(cramjam.snappy.decompress_raw(b)),
    )
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(kafka_codec, "snappy", raw_snappy)
        mp.setattr(kafka_codec, "lz4", SimpleNamespace())
        mp.setattr(kafka_codec, "zstd", SimpleNamespace())
        mp.setattr(default_records, "lz4_decode", lambda b: bytes(cramjam.lz4.decompress(b)))
        mp.setattr(default_records, "zstd_decode", lambda b: bytes(cramjam.zstd.decompress(b)))
        yield


def read_with_kafka_python(data: bytes) -> list[Record]:
    batch = DefaultRecordBatch(data)
    assert batch.validate_crc()
    with kafka_python_codecs():
        return [Record(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in batch]


def as_inputs(records: list[Record]) -> list:
    return [(r.key, r.value, r.headers, r.timestamp) for r in records]


# -- golden vectors from a real client ---------------------------------------------------------


def check_golden(data: bytes, codec: int) -> None:
    header, records = decode_records(data)
    assert crc_ok(data, 0, header)
    assert header.compression == codec
    assert (header.base_offset, header.partition_leader_epoch) == (0, 0)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (1000, 2, 7)
    assert (header.records_count, header.last_offset_delta) == (3, 2)
    assert (header.base_timestamp, header.max_timestamp) == (1700000000000, 1700000000005)
    assert records == GOLDEN_RECORDS


@pytest.mark.parametrize("codec", CODECS)
def test_java_golden_decodes(codec: int) -> None:
    check_golden(JAVA_GOLDEN[codec], codec)


@pytest.mark.parametrize("codec", sorted(KAFKA_PYTHON_GOLDEN))
def test_kafka_python_golden_decodes(codec: int) -> None:
    check_golden(KAFKA_PYTHON_GOLDEN[codec], codec)


@pytest.mark.parametrize("codec", [0, 2, 3])
def test_java_golden_encodes_byte_for_byte(codec: int) -> None:
    built = build_batch(
        as_inputs(GOLDEN_RECORDS),
        compression=codec,
        partition_leader_epoch=0,  # clients leave 0 where the broker writes its epoch
        producer_id=1000,
        producer_epoch=2,
        base_sequence=7,
    )
    assert built == JAVA_GOLDEN[codec]


@pytest.mark.parametrize("commit", [True, False])
def test_java_markers_both_ways(commit: bool) -> None:
    data = JAVA_MARKERS[commit]
    header, records = decode_records(data)
    assert header.is_control and header.is_transactional and crc_ok(data, 0, header)
    assert control_type(data) == int(commit)
    assert records[0].value == bytes.fromhex("00000000000c")  # version 0, coordinator epoch 12
    built = build_control_batch(8000, 5, commit, 12, 1234, partition_leader_epoch=0)
    assert built == data


@pytest.mark.parametrize("codec", CODECS)
def test_golden_recompressed_is_read_by_kafka_python(codec: int) -> None:
    built = build_batch(
        as_inputs(GOLDEN_RECORDS),
        compression=codec,
        producer_id=1000,
        producer_epoch=2,
        base_sequence=7,
    )
    assert parse_header(built).compression == codec
    assert read_with_kafka_python(built) == GOLDEN_RECORDS


@pytest.mark.parametrize("codec", [0, 1, 2])
def test_live_kafka_python_builder(codec: int) -> None:
    with kafka_python_codecs():
        b = DefaultRecordBatchBuilder(
            magic=2,
            compression_type=codec,
            is_transactional=True,
            producer_id=5,
            producer_epoch=0,
            base_sequence=0,
            batch_size=1 << 20,
        )
        for i in range(50):
            b.append(i, 1000 + i, b"key%d" % i, b"payload " * i, [("i", str(i).encode())])
        data = bytes(b.build())
    header, records = decode_records(data)
    assert header.compression == codec and header.is_transactional
    assert [(r.offset, r.timestamp, r.key) for r in records] == [
        (i, 1000 + i, b"key%d" % i) for i in range(50)
    ]
    assert records[7].value == b"payload " * 7 and records[7].headers == [("i", b"7")]


# -- round trips -------------------------------------------------------------------------------

keys = st.none() | st.binary(max_size=40)
header_lists = st.lists(
    st.tuples(st.text(st.characters(exclude_categories=("Cs",)), max_size=8), keys), max_size=3
)
timestamps = st.integers(-1, 2**50)
record_lists = st.lists(st.tuples(keys, keys, header_lists, timestamps), max_size=8)


@settings(max_examples=150)
@given(record_lists, st.sampled_from(CODECS), st.integers(0, 2**62), st.booleans())
def test_round_trip(records: list, codec: int, base_offset: int, txn: bool) -> None:
    data = build_batch(
        records,
        base_offset=base_offset,
        compression=codec,
        producer_id=7 if txn else -1,
        producer_epoch=1 if txn else -1,
        base_sequence=3 if txn else -1,
        transactional=txn,
        partition_leader_epoch=4,
    )
    header, decoded = decode_records(data)
    assert crc_ok(data, 0, header)
    assert (header.base_offset, header.compression, header.is_transactional) == (
        base_offset,
        codec,
        txn,
    )
    assert header.partition_leader_epoch == 4
    assert header.records_count == len(records)
    assert header.last_offset_delta == max(len(records) - 1, 0)
    assert header.max_timestamp == max([-1, *(r[3] for r in records)])
    assert decoded == [
        Record(base_offset + i, ts, k, v, list(h)) for i, (k, v, h, ts) in enumerate(records)
    ]


@settings(max_examples=50)
@given(record_lists, st.sampled_from(CODECS))
def test_kafka_python_reads_what_we_build(records: list, codec: int) -> None:
    data = build_batch(records, compression=codec)
    assert read_with_kafka_python(data) == [
        Record(i, ts, k, v, list(h)) for i, (k, v, h, ts) in enumerate(records)
    ]


@given(st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=5))
def test_extreme_timestamps_round_trip(stamps: list[int]) -> None:
    data = build_batch([(None, b"v", [], ts) for ts in stamps])
    assert [r.timestamp for r in decode_records(data)[1]] == stamps


@given(st.integers(-(2**31), 2**31 - 1), st.integers(-(2**63), 2**63 - 1))
def test_varints(small: int, big: int) -> None:
    out = bytearray()
    write_varint(out, small)
    write_varlong(out, big)
    value, pos = read_varint(bytes(out), 0)
    assert value == small
    assert read_varlong(bytes(out), pos) == (big, len(out))


def test_varint_encoding_is_zigzag() -> None:
    out = bytearray()
    for v in (0, -1, 1, -2, 63, -64, 64):
        write_varint(out, v)
    assert out.hex() == "00010203 7e 7f 8001".replace(" ", "")
    with pytest.raises(ValueError):
        write_varint(bytearray(), 2**31)


def test_offset_deltas_for_compaction() -> None:
    data = build_batch(
        [(b"a", b"1", [], 5), (b"b", b"2", [], 6)],
        base_offset=100,
        offset_deltas=[3, 9],
        last_offset_delta=12,
    )
    header, records = decode_records(data)
    assert [r.offset for r in records] == [103, 109]
    assert header.last_offset == 112
    empty = build_batch(
        [], base_offset=100, last_offset_delta=12, producer_id=3, producer_epoch=0, base_sequence=40
    )
    header, records = decode_records(empty)
    assert records == [] and header.records_count == 0 and header.last_offset == 112
    assert header.size == HEADER_SIZE and crc_ok(empty, 0, header)
    with pytest.raises(ValueError):
        build_batch([(b"a", b"1", [], 5)], offset_deltas=[1, 2])


def test_log_append_time_batches_give_records_the_max_timestamp() -> None:
    data = build_batch([(None, b"x", [], 10), (None, b"y", [], 30)], timestamp_type=1)
    header, records = decode_records(data)
    assert header.timestamp_type == 1
    assert [r.timestamp for r in records] == [30, 30]


def test_header_keys_keep_their_bytes() -> None:
    # Kafka header keys are UTF-8; bytes that are not survive a decode/encode cycle
    raw = bytearray(build_batch([(None, b"v", [("k\xe9y", b"1")], 0)]))
    i = raw.index("k\xe9y".encode())
    raw[i + 1 : i + 3] = b"\xff\xfe"
    write_crc(raw)
    _h, records = decode_records(raw)
    name = records[0].headers[0][0]
    rebuilt = build_batch(as_inputs(records))
    assert rebuilt == bytes(raw) and isinstance(name, str)


# -- control records (KIP-98) ------------------------------------------------------------------


@pytest.mark.parametrize("commit", [True, False])
def test_control_batch(commit: bool) -> None:
    data = build_control_batch(
        8000,
        5,
        commit,
        coordinator_epoch=12,
        timestamp=1234,
        base_offset=99,
        partition_leader_epoch=3,
    )
    header, records = decode_records(data)
    assert header.is_control and header.is_transactional and crc_ok(data, 0, header)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (8000, 5, -1)
    assert (header.base_offset, header.partition_leader_epoch) == (99, 3)
    assert (header.records_count, header.max_timestamp) == (1, 1234)
    assert records == [
        Record(99, 1234, bytes.fromhex(f"0000000{int(commit)}"), bytes.fromhex("00000000000c"), [])
    ]
    assert control_type(data) == int(commit)
    assert control_type(b"xx" + data, 2) == int(commit)
    kp = list(DefaultRecordBatch(data))
    assert kp[0].type == int(commit) and kp[0].version == 0


def test_control_type_of_other_batches() -> None:
    assert control_type(JAVA_GOLDEN[0]) is None
    assert control_type(build_batch([], control=True, transactional=True)) is None
    short_key = build_batch([(b"\0", None, [], 0)], control=True)
    with pytest.raises(CorruptRecordError):
        control_type(short_key)


# -- garbage -----------------------------------------------------------------------------------


def test_record_count_must_match() -> None:
    data = bytearray(build_batch([(b"a", b"b", [], 1)] * 3))
    for count in (2, 4, -1, 2**31 - 1):
        HEADER_STRUCT.pack_into(data, 0, *HEADER_STRUCT.unpack_from(data)[:12], count)
        with pytest.raises(CorruptRecordError):
            decode_records(data)


def test_truncated_batch() -> None:
    data = build_batch([(b"a", b"b", [], 1)] * 3, compression=1)
    with pytest.raises(CorruptRecordError, match="truncated"):
        decode_records(data[:-1])


@settings(max_examples=200)
@given(st.binary(max_size=200), st.integers(0, 5))
def test_arbitrary_bytes_only_raise_corrupt_record(data: bytes, pos: int) -> None:
    for fn in (decode_records, control_type):
        try:
            fn(data, pos)
        except CorruptRecordError:
            pass


@settings(max_examples=300)
@given(st.integers(0, 7), st.integers(-2, 20), st.booleans(), st.binary(max_size=150))
def test_garbage_records_section_only_raises_corrupt_record(
    codec: int, count: int, control: bool, body: bytes
) -> None:
    attributes = codec | (0x20 if control else 0)
    data = (
        HEADER_STRUCT.pack(0, 49 + len(body), 0, 2, 0, attributes, 0, 0, 0, -1, -1, -1, count)
        + body
    )
    for fn in (decode_records, control_type):
        try:
            fn(data)
        except CorruptRecordError:
            pass


@settings(max_examples=300)
@given(record_lists, st.sampled_from(CODECS), st.data())
def test_damaged_batches_only_raise_corrupt_record(records: list, codec: int, data) -> None:
    raw = bytearray(build_batch(records, compression=codec))
    edits = data.draw(
        st.lists(
            st.tuples(st.integers(HEADER_SIZE - 4, len(raw) - 1), st.integers(0, 255)),
            min_size=1,
            max_size=4,
        )
    )
    for i, b in edits:
        raw[i] = b
    cut = data.draw(st.integers(HEADER_SIZE, len(raw)))
    if cut < len(raw):
        del raw[cut:]
        HEADER_STRUCT.pack_into(
            raw,
            0,
            *HEADER_STRUCT.unpack_from(raw)[:1],
            cut - 12,
            *HEADER_STRUCT.unpack_from(raw)[2:],
        )
    try:
        decode_records(raw)
    except CorruptRecordError:
        pass


def test_build_batch_exact_keeps_every_given_header_field():
    """Compaction's builder: offsets, timestamps, producer fields and flags as given; an emptied
    compressed batch keeps its codec bits but has no compressed section (writeEmptyHeader)."""
    recs = [(b"k", b"v", [("h", None)], 1_000), (b"k2", None, [], 900)]
    raw = build_batch_exact(
        recs,
        [3, 7],
        base_offset=100,
        attributes=0x40 | 0x10 | 4,  # delete horizon, transactional, zstd
        codec=4,
        last_offset_delta=9,
        base_timestamp=500,
        max_timestamp=2_000,
        partition_leader_epoch=6,
        producer_id=42,
        producer_epoch=2,
        base_sequence=11,
    )
    h, got = decode_records(raw)
    assert (h.base_offset, h.last_offset, h.base_timestamp, h.max_timestamp) == (
        100,
        109,
        500,
        2000,
    )
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.partition_leader_epoch) == (
        42,
        2,
        11,
        6,
    )
    assert h.has_delete_horizon and h.is_transactional and h.compression == 4 and crc_ok(raw, 0, h)
    assert [(r.offset, r.timestamp, r.key, r.value) for r in got] == [
        (103, 1_000, b"k", b"v"),
        (107, 900, b"k2", None),
    ]
    empty = build_batch_exact(
        [], [], base_offset=100, attributes=4, codec=0, last_offset_delta=9, base_timestamp=500,
        max_timestamp=2_000, partition_leader_epoch=6, producer_id=42, producer_epoch=2,
        base_sequence=11,
    )  # fmt: skip
    assert len(empty) == 61 and parse_header(empty).compression == 4
