"""Bad input over raw TCP against a real `odradek serve` process.

A broken or hostile client gets a Kafka error code or a closed connection, never a crash, a
hang or lost data, and never disturbs another client (DESIGN.md, rules of the house). Each test
does one bad thing while a bystander connection stays open, then checks that the bystander and
a new client are still served and that the data stored before is intact.

Requests are built with kafka-python's protocol classes and record batches with
`odradek.wire.records.build_batch`; fetched batches are decoded with kafka-python's own record
reader, so the check does not trust the broker's codec. `RawClient` and the request helpers
here are also used by test_durability.py.
"""

from __future__ import annotations

import random
import struct
import time
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import pytest
from kafka.protocol.admin import CreateTopicsRequest
from kafka.protocol.consumer import ListOffsetsRequest
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest
from kafka.protocol.producer import InitProducerIdRequest, ProduceRequest
from kafka.record import MemoryRecords

from compat_tests.harness import BrokerProcess, list_offset, produce, unique_name
from odradek.testing.raw import (
    FETCH_MAX_BYTES,
    Closed,
    RawClient,
    fetch_partition,
    response_class,
)
from odradek.wire.records import build_batch

pytestmark = pytest.mark.compat

# Kafka's error codes (org.apache.kafka.common.protocol.Errors)
NONE = 0
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION = 17
UNSUPPORTED_VERSION = 35
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
UNSUPPORTED_COMPRESSION_TYPE = 76
INVALID_RECORD = 87

EARLIEST, LATEST = -2, -1
GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4
WAIT_S = 10.0
_SIZE = struct.Struct(">i")


# -- a raw Kafka connection --------------------------------------------------------------------


# -- requests ------------------------------------------------------------------------------------


def create_topic(
    client: RawClient, name: str, partitions: int = 1, configs: dict[str, str] | None = None
) -> int:
    T = CreateTopicsRequest.CreatableTopic
    topic = T(
        name=name,
        num_partitions=partitions,
        replication_factor=1,
        assignments=[],
        configs=[T.CreatableTopicConfig(name=k, value=v) for k, v in (configs or {}).items()],
    )
    resp = client.request(
        CreateTopicsRequest(topics=[topic], timeout_ms=10_000, validate_only=False), 5
    )
    (result,) = resp.topics
    return result.error_code


@dataclass(frozen=True, slots=True)
class Stored:
    """A record as a consumer sees it."""

    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp: int


def fetch(
    client: RawClient, topic: str, partition: int, offset: int, max_bytes: int = FETCH_MAX_BYTES
) -> tuple[int, int, list[Stored]]:
    """(error_code, high watermark, records at or after `offset`) from one Fetch."""
    error_code, high_watermark, data = fetch_partition(client, topic, partition, offset, max_bytes)
    records: list[Stored] = []
    if data:
        batches = MemoryRecords(data)
        while (batch := batches.next_batch()) is not None:
            for r in batch:
                if r.offset >= offset:
                    records.append(Stored(r.offset, r.key, r.value, tuple(r.headers), r.timestamp))
    return error_code, high_watermark, records


def fetch_all(client: RawClient, topic: str, partition: int = 0, offset: int = 0) -> list[Stored]:
    """Every record from `offset` to the high watermark."""
    out: list[Stored] = []
    deadline = time.monotonic() + WAIT_S
    while True:
        err, hw, records = fetch(client, topic, partition, offset)
        assert err == NONE, f"fetch {topic}-{partition}@{offset}: error {err}"
        out.extend(records)
        if records:
            offset = records[-1].offset + 1
        if offset >= hw:
            return out
        assert time.monotonic() < deadline, f"stuck fetching at {offset} of {hw}"


def init_producer_id(client: RawClient) -> tuple[int, int]:
    resp = client.request(
        InitProducerIdRequest(
            transactional_id=None, transaction_timeout_ms=60_000, producer_id=-1, producer_epoch=-1
        ),
        4,
    )
    assert resp.error_code == NONE, resp
    return resp.producer_id, resp.producer_epoch


RecordSpec = tuple[bytes | None, bytes | None, Sequence[tuple[str, bytes | None]], int]


def make_specs(tag: str, count: int, base_ts: int | None = None) -> list[RecordSpec]:
    base = int(time.time() * 1000) if base_ts is None else base_ts
    return [
        (
            f"{tag}-k{i}".encode(),
            f"{tag}-v{i}".encode() * (1 + i % 4),
            [("i", str(i).encode())],
            base + i,
        )
        for i in range(count)
    ]


def as_stored(specs: Sequence[RecordSpec], first_offset: int) -> list[Stored]:
    return [Stored(first_offset + i, k, v, tuple(h), ts) for i, (k, v, h, ts) in enumerate(specs)]


# -- the data that must survive every bad input ------------------------------------------------


@dataclass
class Canary:
    """A topic with known records in batches of every codec, and a topic for fresh writes."""

    bootstrap: str
    topic: str
    records: list[Stored]
    scratch: str
    scratch_next: int = 0
    notes: list[str] = field(default_factory=list)


def plant_canary(broker: BrokerProcess) -> Canary:
    topic, scratch = unique_name("canary"), unique_name("scratch")
    stored: list[Stored] = []
    with RawClient(broker.bootstrap) as c:
        assert create_topic(c, topic) == NONE
        assert create_topic(c, scratch) == NONE
        for n, codec in enumerate((0, GZIP, SNAPPY, LZ4, ZSTD)):
            specs = make_specs(f"canary{n}", 5)
            part = produce(c, topic, 0, build_batch(specs, compression=codec))
            assert part.error_code == NONE and part.base_offset == len(stored)
            stored += as_stored(specs, part.base_offset)
    return Canary(broker.bootstrap, topic, stored, scratch)


def assert_serving(canary: Canary, *bystanders: RawClient) -> None:
    """Every bystander and a new client are served; the canary's records are all there."""
    for client in bystanders:
        resp = client.request(
            ApiVersionsRequest(client_software_name="compat", client_software_version="1"), 3
        )
        assert resp.error_code == NONE
    with RawClient(canary.bootstrap) as c:
        assert fetch_all(c, canary.topic) == canary.records
        assert list_offset(c, canary.topic, 0, LATEST) == (NONE, len(canary.records))
        part = produce(c, canary.scratch, 0, build_batch(make_specs("after", 2)))
        assert (part.error_code, part.base_offset) == (NONE, canary.scratch_next)
        canary.scratch_next += 2


@pytest.fixture(scope="module")
def canary(broker: BrokerProcess) -> Canary:
    return plant_canary(broker)


@pytest.fixture
def bystander(broker: BrokerProcess) -> Iterator[RawClient]:
    """A well-behaved client connected before the bad one acts."""
    with RawClient(broker.bootstrap) as c:
        assert (
            c.request(
                ApiVersionsRequest(client_software_name="compat", client_software_version="1"), 3
            ).error_code
            == NONE
        )
        yield c


def api_versions_frame(client: RawClient, version: int) -> tuple[int, bytes]:
    """An ApiVersions v3 request with the version field in its header set to `version`."""
    cid, data = client.encode(
        ApiVersionsRequest(client_software_name="compat", client_software_version="1"), 3
    )
    patched = bytearray(data)
    struct.pack_into(">h", patched, 6, version)  # size(4) api_key(2) api_version(2)
    return cid, bytes(patched)


def frame_with_header(
    api_key: int, version: int, correlation: int, body: bytes, client_id: bytes = b"raw"
) -> bytes:
    """Request header v1 (api key, version, correlation id, client id) + `body`, framed."""
    payload = struct.pack(">hhih", api_key, version, correlation, len(client_id)) + client_id
    payload += body
    return _SIZE.pack(len(payload)) + payload


# -- framing ----------------------------------------------------------------------------------


def test_truncated_frame_then_disconnect(
    broker: BrokerProcess, canary: Canary, bystander: RawClient
) -> None:
    with RawClient(broker.bootstrap) as bad:
        bad.send(_SIZE.pack(100) + b"\x00\x03\x00\x0c" + b"\x00" * 6)  # 10 of 100 bytes
    assert_serving(canary, bystander)


def test_truncated_frame_left_open_does_not_block_others(
    broker: BrokerProcess, canary: Canary, bystander: RawClient
) -> None:
    with RawClient(broker.bootstrap) as bad:
        _cid, data = bad.encode(MetadataRequest(topics=None), 12)
        bad.send(data[: len(data) // 2])
        assert bad.outcome(timeout=0.3) == "open"  # waiting for the rest, as Kafka does
        assert_serving(canary, bystander)
    assert_serving(canary, bystander)


@pytest.mark.parametrize(
    "payload",
    [
        pytest.param(_SIZE.pack(-1), id="negative-size"),
        pytest.param(_SIZE.pack(3) + b"\x00\x03\x00", id="shorter-than-a-header"),
        pytest.param(_SIZE.pack(0), id="empty-frame"),
        pytest.param(frame_with_header(3, 12, 7, b"\xff" * 3), id="metadata-body-garbage"),
        pytest.param(frame_with_header(3, 1, 7, b""), id="header-without-body"),
        pytest.param(
            _SIZE.pack(12) + struct.pack(">hhih", 18, 0, 7, 40) + b"ab",
            id="client-id-overruns-frame",
        ),
    ],
)
def test_malformed_frame_closes_only_that_connection(
    broker: BrokerProcess, canary: Canary, bystander: RawClient, payload: bytes
) -> None:
    with RawClient(broker.bootstrap) as bad:
        bad.send(payload)
        assert bad.outcome() == "closed"
    assert_serving(canary, bystander)


def test_truncated_produce_body_closes_connection(
    broker: BrokerProcess, canary: Canary, bystander: RawClient
) -> None:
    with RawClient(broker.bootstrap) as bad:
        T = ProduceRequest.TopicProduceData
        req = ProduceRequest(
            transactional_id=None,
            acks=-1,
            timeout_ms=5000,
            topic_data=[
                T(
                    name=canary.topic,
                    partition_data=[
                        T.PartitionProduceData(index=0, records=build_batch(make_specs("cut", 3)))
                    ],
                )
            ],
        )
        _cid, data = bad.encode(req, 9)
        cut = data[4:-30]  # the records field claims more bytes than the frame holds
        bad.send(_SIZE.pack(len(cut)) + cut)
        assert bad.outcome() == "closed"
    assert_serving(canary, bystander)


def test_frame_over_socket_request_max_bytes(fresh_broker: Callable[..., BrokerProcess]) -> None:
    broker = fresh_broker({"socket.request.max.bytes": "4096"})
    canary = plant_canary(broker)
    with RawClient(broker.bootstrap) as bystander, RawClient(broker.bootstrap) as bad:
        # a produce just under the limit is served
        specs = [(b"k", b"x" * 3000, [], int(time.time() * 1000))]
        part = produce(bad, canary.scratch, 0, build_batch(specs))
        assert part.error_code == NONE
        canary.scratch_next = 1
        # one byte over: the broker closes without reading the rest (only the size is sent)
        bad.send(_SIZE.pack(4097) + b"\x00\x00\x00\x09")
        assert bad.outcome() == "closed"
        with RawClient(broker.bootstrap) as huge:
            huge.send(_SIZE.pack(2**31 - 1))
            assert huge.outcome() == "closed"
        assert_serving(canary, bystander)


def test_random_garbage_frames(broker: BrokerProcess, canary: Canary, bystander: RawClient) -> None:
    """Seeded random frames: each gets a response with its correlation id, or a close."""
    rng = random.Random(20240611)
    # read-only APIs: a random body must not be able to create thousands of partitions
    keys_versions = [(0, 9), (1, 11), (2, 7), (3, 12), (18, 3), (32, 4), (60, 1), (75, 0)]
    for i in range(40):
        with RawClient(broker.bootstrap) as bad:
            body = rng.randbytes(rng.randrange(0, 80))
            if i % 2:
                data = _SIZE.pack(len(body)) + body
                cid = None
            else:
                key, version = rng.choice(keys_versions)
                cid = 1000 + i
                data = frame_with_header(key, version, cid, body)
            bad.send(data)
            result = bad.outcome(timeout=2.0)
            if isinstance(result, bytes) and cid is not None:
                assert _SIZE.unpack_from(result)[0] == cid
            # "open" is allowed: a random Fetch may be a long poll with a huge max_wait_ms
    assert_serving(canary, bystander)


def test_pipelined_requests_are_answered_in_order(canary: Canary) -> None:
    """Several requests in one write, of different APIs: one response each, in order."""
    with RawClient(canary.bootstrap) as c:
        T = ListOffsetsRequest.ListOffsetsTopic
        requests = [
            (ApiVersionsRequest(client_software_name="compat", client_software_version="1"), 3),
            (MetadataRequest(topics=None), 12),
            (
                ListOffsetsRequest(
                    replica_id=-1,
                    isolation_level=0,
                    topics=[
                        T(
                            name=canary.topic,
                            partitions=[
                                T.ListOffsetsPartition(
                                    partition_index=0, current_leader_epoch=-1, timestamp=LATEST
                                )
                            ],
                        )
                    ],
                ),
                7,
            ),
            (ApiVersionsRequest(), 0),
        ]
        encoded = [c.encode(req, version) for req, version in requests]
        c.send(b"".join(data for _cid, data in encoded))
        answers = [c.read_frame() for _ in encoded]
        assert [_SIZE.unpack_from(a)[0] for a in answers] == [cid for cid, _d in encoded]
        offsets = response_class(requests[2][0]).decode(answers[2], version=7, header=True)
        assert offsets.topics[0].partitions[0].offset == len(canary.records)


def test_null_client_id_is_accepted(canary: Canary) -> None:
    """The request header's client_id is a nullable string (length -1)."""
    with RawClient(canary.bootstrap) as c:
        payload = struct.pack(">hhih", 18, 0, 42, -1)  # ApiVersions v0, client_id null
        c.send(_SIZE.pack(len(payload)) + payload)
        answer = c.read_frame()
        assert _SIZE.unpack_from(answer)[0] == 42
        assert ApiVersionsResponse.decode(answer[4:], version=0).error_code == NONE


# -- API keys and versions ------------------------------------------------------------------------


@pytest.mark.parametrize("api_key", [999, 32767, -1], ids=lambda k: f"key={k}")
def test_unknown_api_key_closes_connection(
    broker: BrokerProcess, canary: Canary, bystander: RawClient, api_key: int
) -> None:
    with RawClient(broker.bootstrap) as bad:
        bad.send(frame_with_header(api_key, 0, 5, b"\x00" * 8))
        assert bad.outcome() == "closed"
    assert_serving(canary, bystander)


def test_api_versions_unsupported_version_answers_v0_with_its_own_versions(
    broker: BrokerProcess, canary: Canary, bystander: RawClient
) -> None:
    with RawClient(broker.bootstrap) as client:
        cid, data = api_versions_frame(client, 99)
        client.send(data)
        payload = client.read_frame()
        # response header v0 (correlation id only), body v0: error, [key, min, max]
        assert _SIZE.unpack_from(payload)[0] == cid
        resp = ApiVersionsResponse.decode(payload[4:], version=0)
        assert resp.error_code == UNSUPPORTED_VERSION
        keys = {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}
        # KIP-511, as Kafka: only ApiVersions itself, with the versions to ask again at
        assert list(keys) == [18] and keys[18][0] == 0 and keys[18][1] >= 3
        # the connection stays open: the client retries at that version and gets every key
        retry = client.request(ApiVersionsRequest(), 0)
        assert retry.error_code == NONE
        listed = {k.api_key: (k.min_version, k.max_version) for k in retry.api_keys}
        assert listed[18] == keys[18] and {0, 1, 3} <= set(listed)  # Produce, Fetch, Metadata
    assert_serving(canary, bystander)


@pytest.mark.parametrize(
    ("api_key", "version"),
    [(3, 99), (0, 99), (1, 200), (3, -1)],
    ids=["metadata-v99", "produce-v99", "fetch-v200", "metadata-v-1"],
)
def test_unknown_version_of_other_api_closes_connection(
    broker: BrokerProcess, canary: Canary, bystander: RawClient, api_key: int, version: int
) -> None:
    with RawClient(broker.bootstrap) as bad:
        bad.send(frame_with_header(api_key, version, 9, b"\x00" * 16))
        assert bad.outcome() == "closed"
    assert_serving(canary, bystander)


# -- produce errors -------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["crc-field", "record-bytes", "compressed-bytes"])
def test_corrupt_crc_is_rejected(
    broker: BrokerProcess, canary: Canary, bystander: RawClient, topic_name: str, where: str
) -> None:
    codec = GZIP if where == "compressed-bytes" else 0
    batch = bytearray(build_batch(make_specs("crc", 4), compression=codec))
    pos = 17 if where == "crc-field" else len(batch) - 3  # CRC at offset 17
    batch[pos] ^= 0x5A
    with RawClient(broker.bootstrap) as c:
        assert create_topic(c, topic_name) == NONE
        part = produce(c, topic_name, 0, bytes(batch))
        assert part.error_code == CORRUPT_MESSAGE
        assert part.base_offset == -1
        assert list_offset(c, topic_name, 0, LATEST) == (NONE, 0)
        # the same connection goes on: a good batch lands at offset 0
        good = make_specs("good", 2)
        ok = produce(c, topic_name, 0, build_batch(good))
        assert (ok.error_code, ok.base_offset) == (NONE, 0)
        assert fetch_all(c, topic_name) == as_stored(good, 0)
    assert_serving(canary, bystander)


def test_produce_to_missing_partition_or_topic(
    broker: BrokerProcess, canary: Canary, bystander: RawClient, topic_name: str
) -> None:
    batch = build_batch(make_specs("missing", 2))
    with RawClient(broker.bootstrap) as c:
        assert create_topic(c, topic_name, partitions=2) == NONE
        assert produce(c, topic_name, 2, batch).error_code == UNKNOWN_TOPIC_OR_PARTITION
        assert produce(c, topic_name, -1, batch).error_code == UNKNOWN_TOPIC_OR_PARTITION
        missing = f"{topic_name}-never-created"
        assert produce(c, missing, 0, batch).error_code == UNKNOWN_TOPIC_OR_PARTITION
        # produce does not auto-create (only Metadata does)
        md = c.request(
            MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=missing)],
                allow_auto_topic_creation=False,
            ),
            12,
        )
        assert md.topics[0].error_code == UNKNOWN_TOPIC_OR_PARTITION
        for p in range(2):
            assert list_offset(c, topic_name, p, LATEST) == (NONE, 0)
    assert_serving(canary, bystander)


@pytest.mark.parametrize("name", ["bad name", "bad/name", "x" * 250, ".", "..", "tøpic", ""])
def test_invalid_topic_name(
    broker: BrokerProcess, canary: Canary, bystander: RawClient, name: str
) -> None:
    with RawClient(broker.bootstrap) as c:
        assert create_topic(c, name) == INVALID_TOPIC_EXCEPTION
        md = c.request(
            MetadataRequest(
                topics=[MetadataRequest.MetadataRequestTopic(name=name)],
                allow_auto_topic_creation=True,
            ),
            12,
        )
        assert md.topics[0].error_code == INVALID_TOPIC_EXCEPTION
        # Kafka answers a produce to a topic that cannot exist with UNKNOWN_TOPIC_OR_PARTITION
        # (it is not in the metadata cache); INVALID_TOPIC_EXCEPTION says the same, better
        err = produce(c, name, 0, build_batch(make_specs("bad", 1))).error_code
        assert err in (INVALID_TOPIC_EXCEPTION, UNKNOWN_TOPIC_OR_PARTITION)
        all_topics = c.request(MetadataRequest(topics=None), 12)
        assert name not in {t.name for t in all_topics.topics}
    assert_serving(canary, bystander)


def _legacy_v1_message() -> bytes:
    """A magic 1 message set entry: offset, size, crc32, magic, attributes, ts, key, value."""
    body = struct.pack(">bbq", 1, 0, int(time.time() * 1000))
    body += struct.pack(">i", 1) + b"k" + struct.pack(">i", 1) + b"v"
    message = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", 0, len(message)) + message


@pytest.mark.parametrize(
    ("records", "version", "code"),
    [
        pytest.param(
            build_batch(make_specs("one", 2)) + build_batch(make_specs("two", 2)),
            9,
            INVALID_RECORD,
            id="two-batches-in-one-partition",
        ),
        pytest.param(_legacy_v1_message(), 9, INVALID_RECORD, id="magic-1-message-set"),
        pytest.param(b"", 9, INVALID_RECORD, id="no-batch"),
        pytest.param(
            build_batch(make_specs("zstd", 2), compression=ZSTD),
            6,
            UNSUPPORTED_COMPRESSION_TYPE,
            id="zstd-before-produce-v7",
        ),
    ],
)
def test_produce_records_kafka_refuses(
    broker: BrokerProcess,
    canary: Canary,
    bystander: RawClient,
    topic_name: str,
    records: bytes,
    version: int,
    code: int,
) -> None:
    """Kafka's ProduceRequest.validateRecords: from v3 exactly one magic-2 batch per partition
    (INVALID_RECORD otherwise), and zstd only from v7 (KIP-110)."""
    with RawClient(broker.bootstrap) as c:
        assert create_topic(c, topic_name) == NONE
        part = produce(c, topic_name, 0, records, version=version)
        assert (part.error_code, part.base_offset) == (code, -1)
        assert list_offset(c, topic_name, 0, LATEST) == (NONE, 0)
    assert_serving(canary, bystander)


def test_batch_over_max_message_bytes(
    broker: BrokerProcess, canary: Canary, bystander: RawClient, topic_name: str
) -> None:
    with RawClient(broker.bootstrap) as c:
        assert create_topic(c, topic_name, configs={"max.message.bytes": "1024"}) == NONE
        big = [(b"k", b"x" * 2000, [], int(time.time() * 1000))]
        part = produce(c, topic_name, 0, build_batch(big))
        assert part.error_code == MESSAGE_TOO_LARGE
        # the limit is on the batch as sent: a compressed batch that fits is accepted
        fits = produce(c, topic_name, 0, build_batch(big, compression=ZSTD))
        assert (fits.error_code, fits.base_offset) == (NONE, 0)
        small = make_specs("small", 3)
        ok = produce(c, topic_name, 0, build_batch(small))
        assert (ok.error_code, ok.base_offset) == (NONE, 1)
        records = fetch_all(c, topic_name)
        assert [r.value for r in records] == [b"x" * 2000] + [v for _k, v, _h, _t in small]
    assert_serving(canary, bystander)


def test_acks_zero_bad_produce_gets_no_response_and_harms_nothing(
    broker: BrokerProcess, canary: Canary, bystander: RawClient, topic_name: str
) -> None:
    with RawClient(broker.bootstrap) as c:
        assert create_topic(c, topic_name) == NONE
        batch = bytearray(build_batch(make_specs("acks0", 2)))
        batch[17] ^= 0xFF
        T = ProduceRequest.TopicProduceData
        req = ProduceRequest(
            transactional_id=None,
            acks=0,
            timeout_ms=5000,
            topic_data=[
                T(
                    name=topic_name,
                    partition_data=[T.PartitionProduceData(index=0, records=bytes(batch))],
                )
            ],
        )
        _cid, data = c.encode(req, 9)
        c.send(data)
        # acks=0 has no response; the next request on the connection is answered in order.
        # (Kafka closes an acks=0 connection on a produce error; either way nothing is stored)
        try:
            assert list_offset(c, topic_name, 0, LATEST) == (NONE, 0)
        except Closed:
            pass
    with RawClient(broker.bootstrap) as c:
        assert list_offset(c, topic_name, 0, LATEST) == (NONE, 0)
    assert_serving(canary, bystander)
