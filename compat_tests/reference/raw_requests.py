"""Raw requests for the differential suite: one table of request variants, sent as they are.

A `Variant` names a request class (kafka-python's, through odradek's wire door), a label and
a function building the request's fields for one broker (`Ctx`: the names the scenario uses and
that broker's topic id) and one version. `build()` turns nested dicts into kafka-python's
message objects; `send()` sends one request on a fresh connection and returns the decoded
response, or "closed" / "no answer" when the broker closes the connection or stays silent.

Every API key both brokers serve also gets the `default` variant: the request with every field
at its default (empty arrays, null or empty strings, zeros), the "empty fields" boundary case.
Variants that list everything a broker has (groups, transactions, quotas) compare only what
does not depend on what other tests left behind (`project`).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from odradek.testing.raw import Closed, RawClient
from odradek.wire import protocol
from odradek.wire.records import build_batch

TS0 = 1_700_000_000_000


def until_settled(
    call: Callable[[], Any],
    error: Callable[[Any], int],
    retry: tuple[int, ...],
    wait_s: float = 30.0,
) -> Any:
    """`call()` (a `send`) again while its answer's error is one of `retry` (a not-yet: a
    coordinator loading, markers going out), until the deadline; the last answer."""
    deadline = time.monotonic() + wait_s
    while True:
        resp = call()
        assert not isinstance(resp, str), resp
        if error(resp) not in retry or time.monotonic() > deadline:
            return resp
        time.sleep(0.02)


DATA_RECORDS = 3


@dataclass(slots=True)
class Ctx:
    """What a variant may refer to on one broker: the prepared topic and group, fresh names."""

    token: str  # 8 hex digits shared by both brokers' runs of one scenario
    topic_id: uuid.UUID = field(default_factory=lambda: uuid.UUID(int=0))

    @property
    def topic(self) -> str:
        """A topic with 2 partitions; partition 0 holds DATA_RECORDS records from TS0."""
        return f"ref_data_{self.token}"

    @property
    def group(self) -> str:
        """A group with offset 2 committed for the topic's partition 0 (no members)."""
        return f"ref_cgroup_{self.token}"

    def fresh(self, label: str) -> str:
        return f"ref_{label}_{uuid.uuid4().hex[:8]}"


Spec = Callable[[Ctx, int], dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Variant:
    key: int
    label: str
    spec: Spec
    min_version: int = 0
    project: Callable[[object], object] | None = None
    wait: float = 5.0  # seconds to wait for an answer
    probe: bool = False  # follow with an ApiVersions: its answer first means "no answer"
    only: tuple[int, ...] = ()  # just these versions (when each costs a wait)
    # its versions sent at once, each on its own connection: for a stateless request that one
    # broker leaves unanswered (its channel muted, so a probe cannot tell), whose every version
    # would otherwise wait out `wait` in turn
    concurrent: bool = False

    @property
    def cls(self) -> Any:
        return protocol._REQUESTS[self.key]

    @property
    def name(self) -> str:
        return f"{self.cls.__name__.removesuffix('Request')} {self.label}"


def build(cls: Any, spec: dict[str, Any]) -> Any:
    """A kafka-python message of `cls` from field values, nested structs given as dicts."""
    values = {}
    for key, value in spec.items():
        f = cls.fields[key]
        if f.has_data_class() and isinstance(value, list):
            value = [build(f.data_class, v) if isinstance(v, dict) else v for v in value]
        elif f.has_data_class() and isinstance(value, dict):
            value = build(f.data_class, value)
        values[key] = value
    return cls(**values)


def send(
    bootstrap: str,
    cls: Any,
    spec: dict[str, Any],
    version: int,
    wait: float = 5.0,
    probe: bool = False,
) -> object:
    """One request on a fresh connection: the decoded response, "closed" or "no answer"."""
    req = build(cls, spec)
    with RawClient(bootstrap, timeout=wait) as client:
        cid, data = client.encode(req, version)
        client.send(data)
        probe_id = None
        if probe:  # brokers answer a connection's requests in order
            probe_id, probe_data = client.encode(protocol._REQUESTS[18](), 0)
            client.send(probe_data)
        try:
            payload = client.read_frame()
        except Closed:
            return "closed"
        except TimeoutError:
            return "no answer"
        if probe_id is not None and payload[:4] == probe_id.to_bytes(4, "big", signed=True):
            return "no answer"
    try:
        return protocol._RESPONSES[cls.API_KEY].decode(payload, version=version, header=True)
    except Exception:  # e.g. ApiVersions' v0-shaped error answer to a newer version
        return f"undecodable as v{version}: {payload[4:].hex()}"


def only_errors(resp: object) -> object:
    """For listings of everything: the top-level error code only."""
    if isinstance(resp, str):
        return resp
    return {"error_code": getattr(resp, "error_code", None)}


def data_batch(count: int = DATA_RECORDS, tag: str = "r") -> bytes:
    return build_batch(
        [(f"k{i}".encode(), f"{tag}{i}".encode(), [("h", b"x")], TS0 + i) for i in range(count)]
    )


# -- the prepared state: the same on both brokers -------------------------------------------------


def prepare(bootstrap: str, token: str) -> Ctx:
    """Create the data topic (2 partitions), produce DATA_RECORDS to partition 0, commit offset
    2 for the group; returns this broker's Ctx (with the topic's id)."""
    ctx = Ctx(token)
    created = send(
        bootstrap,
        protocol._REQUESTS[19],
        {
            "topics": [
                {
                    "name": ctx.topic,
                    "num_partitions": 2,
                    "replication_factor": 1,
                    # TS0 is years old: time-based retention would delete the records
                    "configs": [{"name": "retention.ms", "value": "-1"}],
                }
            ]
        },
        5,
    )
    assert not isinstance(created, str) and created.topics[0].error_code == 0, created
    _wait_leader(bootstrap, ctx)
    produced = _retry(
        lambda: send(bootstrap, protocol._REQUESTS[0], _produce(ctx, 0, data_batch(), -1), 9),
        lambda r: r.responses[0].partition_responses[0].error_code,
    )
    part = produced.responses[0].partition_responses[0]
    assert (part.error_code, part.base_offset) == (0, 0), produced
    _find_coordinator(bootstrap, ctx.group)
    _retry(
        lambda: send(bootstrap, protocol._REQUESTS[8], _commit(ctx, ctx.group, 2), 8),
        lambda r: r.topics[0].partitions[0].error_code,
    )
    # the transaction coordinator's topic is created by the first request that needs it
    _retry(
        lambda: send(bootstrap, protocol._REQUESTS[10], {"key": "warm", "key_type": 1}, 2),
        lambda r: r.error_code,
    )
    _retry(
        lambda: send(bootstrap, protocol._REQUESTS[22], {"transactional_id": None}, 2),
        lambda r: r.error_code,
    )
    return ctx


# NOT_LEADER_OR_FOLLOWER, COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR:
# a new partition or a coordinator just elected answers these for a moment
_NOT_YET = (6, 14, 15, 16)


def _retry(call: Callable[[], object], error: Callable[[Any], int], wait_s: float = 30) -> Any:
    """`call()` until `error(response)` is not a not-yet error; then it must be 0."""
    deadline = time.monotonic() + wait_s
    while True:
        resp = call()
        assert not isinstance(resp, str), resp
        code = error(resp)
        if code not in _NOT_YET or time.monotonic() > deadline:
            assert code == 0, resp
            return resp
        time.sleep(0.05)


def _wait_leader(bootstrap: str, ctx: Ctx) -> None:
    deadline = time.monotonic() + 30
    while True:
        md = send(
            bootstrap,
            protocol._REQUESTS[3],
            {"topics": [{"name": ctx.topic}], "allow_auto_topic_creation": False},
            12,
        )
        assert not isinstance(md, str), md
        t = md.topics[0]
        if (
            t.error_code == 0
            and len(t.partitions) == 2
            and all(p.leader_id >= 0 for p in t.partitions)
        ):
            ctx.topic_id = t.topic_id
            return
        assert time.monotonic() < deadline, md
        time.sleep(0.05)


def _find_coordinator(bootstrap: str, group: str) -> None:
    deadline = time.monotonic() + 30
    while True:
        resp = send(bootstrap, protocol._REQUESTS[10], {"key": group, "key_type": 0}, 2)
        if not isinstance(resp, str) and resp.error_code == 0:
            return
        assert time.monotonic() < deadline, resp
        time.sleep(0.05)


def _produce(ctx: Ctx, partition: int, records: bytes | None, acks: int = 1) -> dict[str, Any]:
    return {
        "acks": acks,
        "timeout_ms": 10_000,
        "topic_data": [
            {
                "name": ctx.topic,
                "topic_id": ctx.topic_id,
                "partition_data": [{"index": partition, "records": records}],
            }
        ],
    }


def _commit(ctx: Ctx, group: str, offset: int, generation: int = -1, member: str = "") -> dict:
    return {
        "group_id": group,
        "generation_id_or_member_epoch": generation,
        "member_id": member,
        "topics": [
            {
                "name": ctx.topic,
                "topic_id": ctx.topic_id,
                "partitions": [{"partition_index": 0, "committed_offset": offset}],
            }
        ],
    }


def _fetch(ctx: Ctx, partition: int, offset: int, **part: Any) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "max_wait_ms": 0,
        "min_bytes": 0,
        "max_bytes": 1 << 20,
        "isolation_level": 0,
        "topics": [
            {
                "topic": ctx.topic,
                "topic_id": ctx.topic_id,
                "partitions": [
                    {
                        "partition": partition,
                        "fetch_offset": offset,
                        "partition_max_bytes": 1 << 20,
                        "current_leader_epoch": part.pop("current_leader_epoch", -1),
                        **part,
                    }
                ],
            }
        ],
    }


def _list_offsets(ctx: Ctx, partition: int, timestamp: int, epoch: int = -1) -> dict:
    return {
        "replica_id": -1,
        "topics": [
            {
                "name": ctx.topic,
                "partitions": [
                    {
                        "partition_index": partition,
                        "timestamp": timestamp,
                        "current_leader_epoch": epoch,
                        "max_num_offsets": 1,
                    }
                ],
            }
        ],
    }


def _topic(name: str, partitions: int = 1, rf: int = 1, **extra: Any) -> dict[str, Any]:
    return {
        "topics": [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": rf,
                **extra,
            }
        ],
        "timeout_ms": 10_000,
    }


def _config(rtype: int, name: str, keys: list[str] | None = None) -> dict[str, Any]:
    return {
        "resources": [{"resource_type": rtype, "resource_name": name, "configuration_keys": keys}],
        "include_synonyms": True,
    }


def _alter(
    rtype: int, name: str, key: str, value: str | None, op: int | None = None
) -> dict[str, Any]:
    """AlterConfigs (op None) or IncrementalAlterConfigs (op 0 SET, 1 DELETE, 2 APPEND)."""
    config: dict[str, Any] = {"name": key, "value": value}
    if op is not None:
        config["config_operation"] = op
    return {
        "resources": [{"resource_type": rtype, "resource_name": name, "configs": [config]}],
        "validate_only": True,
    }


TOPIC, BROKER, GROUP = 2, 4, 32
UNKNOWN_PID = 123_456_789
V = Variant
VARIANTS: list[Variant] = [
    # Produce (0)
    V(0, "one batch acks=1", lambda c, v: _produce(c, 1, data_batch(2, f"v{v}-"))),
    V(0, "acks=0 answers nothing", lambda c, v: _produce(c, 1, data_batch(1), 0), probe=True),
    V(0, "acks=2 is invalid", lambda c, v: _produce(c, 1, data_batch(1), acks=2)),
    V(0, "unknown partition", lambda c, v: _produce(c, 7, data_batch(1))),
    V(
        0,
        "unknown topic",
        lambda c, v: {
            **_produce(c, 0, data_batch(1)),
            "topic_data": [
                {
                    "name": c.fresh("nope"),
                    "topic_id": uuid.uuid4(),
                    "partition_data": [{"index": 0, "records": data_batch(1)}],
                }
            ],
        },
    ),
    V(
        0,
        "null records",
        lambda c, v: _produce(c, 1, None),
        wait=3,
        only=(0, 3, 9, 13),
        concurrent=True,
    ),
    V(0, "empty records", lambda c, v: _produce(c, 1, b"")),
    V(0, "corrupt batch", lambda c, v: _produce(c, 1, data_batch(1)[:-3] + b"xyz")),
    # Fetch (1)
    V(1, "from offset 0", lambda c, v: _fetch(c, 0, 0)),
    V(1, "from the middle", lambda c, v: _fetch(c, 0, 1)),
    V(1, "at the end", lambda c, v: _fetch(c, 0, DATA_RECORDS)),
    V(1, "past the end", lambda c, v: _fetch(c, 0, DATA_RECORDS + 5)),
    V(1, "negative offset", lambda c, v: _fetch(c, 0, -5)),
    V(1, "unknown partition", lambda c, v: _fetch(c, 9, 0)),
    V(1, "future leader epoch", lambda c, v: _fetch(c, 0, 0, current_leader_epoch=5), 9),
    V(1, "max bytes 1", lambda c, v: {**_fetch(c, 0, 0), "max_bytes": 1}),
    V(
        1,
        "unknown session",
        lambda c, v: {**_fetch(c, 0, 0), "session_id": 77, "session_epoch": 3},
        7,
    ),
    # ListOffsets (2)
    V(2, "earliest", lambda c, v: _list_offsets(c, 0, -2)),
    V(2, "latest", lambda c, v: _list_offsets(c, 0, -1)),
    V(2, "max timestamp", lambda c, v: _list_offsets(c, 0, -3), 7),
    V(2, "by timestamp", lambda c, v: _list_offsets(c, 0, TS0 + 1), 1),
    V(2, "timestamp past the end", lambda c, v: _list_offsets(c, 0, TS0 + 99), 1),
    V(2, "earliest local", lambda c, v: _list_offsets(c, 0, -4), 8),
    V(2, "latest tiered", lambda c, v: _list_offsets(c, 0, -5), 9),
    V(2, "unknown partition", lambda c, v: _list_offsets(c, 5, -1)),
    V(2, "fenced leader epoch", lambda c, v: _list_offsets(c, 0, -1, epoch=99), 4),
    # Metadata (3)
    V(
        3,
        "the data topic",
        lambda c, v: {"topics": [{"name": c.topic}], "allow_auto_topic_creation": False},
    ),
    V(
        3,
        "unknown topic",
        lambda c, v: {"topics": [{"name": c.fresh("nope")}], "allow_auto_topic_creation": False},
        1,
    ),
    V(
        3,
        "invalid topic name",
        lambda c, v: {"topics": [{"name": "bad/name"}], "allow_auto_topic_creation": False},
        1,
    ),
    V(3, "no topics", lambda c, v: {"topics": [], "allow_auto_topic_creation": False}, 1),
    V(3, "by unknown id", lambda c, v: {"topics": [{"name": None, "topic_id": uuid.uuid4()}]}, 12),
    # OffsetCommit (8) and OffsetFetch (9)
    V(8, "simple commit", lambda c, v: _commit(c, c.fresh("g"), 1), 0),
    V(8, "wrong generation", lambda c, v: _commit(c, c.group, 1, generation=5, member="m"), 1),
    V(
        8,
        "unknown partition",
        lambda c, v: {
            **_commit(c, c.fresh("g"), 1),
            "topics": [
                {
                    "name": c.topic,
                    "topic_id": c.topic_id,
                    "partitions": [{"partition_index": 9, "committed_offset": 1}],
                }
            ],
        },
    ),
    V(9, "committed offsets", lambda c, v: _offset_fetch(c, c.group, v)),
    V(9, "unknown group", lambda c, v: _offset_fetch(c, c.fresh("g"), v)),
    # FindCoordinator (10)
    V(10, "group", lambda c, v: {"key": c.group, "key_type": 0, "coordinator_keys": [c.group]}),
    V(10, "transaction", lambda c, v: {"key": "t", "key_type": 1, "coordinator_keys": ["t"]}, 1),
    V(10, "bad key type", lambda c, v: {"key": "x", "key_type": 7, "coordinator_keys": ["x"]}, 1),
    # classic group protocol (11-16)
    V(11, "new member", lambda c, v: _join(c.fresh("g"), ""), 0),
    V(
        11,
        "session timeout too small",
        lambda c, v: {**_join(c.fresh("g"), ""), "session_timeout_ms": 1},
    ),
    V(11, "unknown member", lambda c, v: _join(c.fresh("g"), "nobody")),
    V(11, "no protocols", lambda c, v: {**_join(c.fresh("g"), ""), "protocols": []}),
    V(
        12,
        "unknown group",
        lambda c, v: {"group_id": c.fresh("g"), "generation_id": 1, "member_id": "m"},
    ),
    V(
        12,
        "memberless group",
        lambda c, v: {"group_id": c.group, "generation_id": 0, "member_id": "m"},
    ),
    V(
        13,
        "unknown member",
        lambda c, v: {"group_id": c.group, "member_id": "m", "members": [{"member_id": "m"}]},
    ),
    V(
        14,
        "unknown member",
        lambda c, v: {
            "group_id": c.group,
            "generation_id": 1,
            "member_id": "m",
            "protocol_type": "consumer",
            "protocol_name": "range",
        },
    ),
    V(15, "groups", lambda c, v: {"groups": [c.group, c.fresh("g")]}),
    V(16, "all groups", lambda c, v: {}, project=only_errors),
    V(16, "bad state filter", lambda c, v: {"states_filter": ["Nonsense"]}, 4),
    # SASL on a PLAINTEXT listener (17, 36)
    V(17, "PLAIN", lambda c, v: {"mechanism": "PLAIN"}),
    V(36, "without handshake", lambda c, v: {"auth_bytes": b"\x00u\x00p"}),
    # CreateTopics (19)
    V(19, "valid", lambda c, v: _topic(c.fresh("new"), 3)),
    V(19, "validate only", lambda c, v: {**_topic(c.fresh("new"), 3), "validate_only": True}, 1),
    V(19, "existing topic", lambda c, v: _topic(c.topic, 2)),
    V(19, "zero partitions", lambda c, v: _topic(c.fresh("new"), 0)),
    V(19, "defaults (-1)", lambda c, v: _topic(c.fresh("new"), -1, -1), 4),
    V(19, "replication factor 3", lambda c, v: _topic(c.fresh("new"), 1, 3)),
    V(19, "replication factor 0", lambda c, v: _topic(c.fresh("new"), 1, 0)),
    V(19, "invalid name", lambda c, v: _topic("bad name!", 1)),
    V(19, "name too long", lambda c, v: _topic("x" * 250, 1)),
    V(
        19,
        "unknown config",
        lambda c, v: _topic(c.fresh("new"), 1, configs=[{"name": "no.such.config", "value": "1"}]),
    ),
    V(
        19,
        "bad config value",
        lambda c, v: _topic(c.fresh("new"), 1, configs=[{"name": "retention.ms", "value": "soon"}]),
    ),
    V(
        19,
        "valid configs",
        lambda c, v: _topic(
            c.fresh("new"),
            1,
            configs=[
                {"name": "cleanup.policy", "value": "compact"},
                {"name": "min.insync.replicas", "value": "1"},
            ],
        ),
    ),
    V(
        19,
        "assignment to unknown broker",
        lambda c, v: _topic(
            c.fresh("new"), -1, -1, assignments=[{"partition_index": 0, "broker_ids": [42]}]
        ),
    ),
    V(19, "duplicate names", lambda c, v: _dup_topics(c.fresh("dup"))),
    # DeleteTopics (20)
    V(
        20,
        "unknown topic",
        lambda c, v: {
            "topic_names": [n := c.fresh("nope")],
            "topics": [{"name": n}],
            "timeout_ms": 5000,
        },
    ),
    V(
        20,
        "unknown id",
        lambda c, v: {"topics": [{"name": None, "topic_id": uuid.uuid4()}], "timeout_ms": 5000},
        6,
    ),
    # DeleteRecords (21)
    V(21, "past the high watermark", lambda c, v: _delete_records(c, 0, 99)),
    V(21, "unknown partition", lambda c, v: _delete_records(c, 9, 1)),
    # InitProducerId (22)
    V(22, "idempotent", lambda c, v: {"transactional_id": None, "transaction_timeout_ms": 60000}),
    V(
        22,
        "transaction timeout too big",
        lambda c, v: {"transactional_id": c.fresh("tx"), "transaction_timeout_ms": 10**9},
    ),
    V(
        22,
        "transactional",
        lambda c, v: {"transactional_id": c.fresh("tx"), "transaction_timeout_ms": 60000},
    ),
    V(
        22,
        "unknown producer to bump",
        lambda c, v: {
            "transactional_id": c.fresh("tx"),
            "transaction_timeout_ms": 60000,
            "producer_id": UNKNOWN_PID,
            "producer_epoch": 3,
        },
        3,
    ),
    # OffsetForLeaderEpoch (23)
    V(23, "epoch 0", lambda c, v: _ofle(c, 0, 0, -1)),
    V(23, "future epoch", lambda c, v: _ofle(c, 0, 5, -1)),
    V(23, "fenced current epoch", lambda c, v: _ofle(c, 0, 0, 7), 2),
    V(23, "unknown partition", lambda c, v: _ofle(c, 9, 0, -1)),
    # transactions with an unknown producer (24-26, 28)
    V(24, "unknown transactional id", lambda c, v: _add_partitions(c, v)),
    V(
        25,
        "unknown transactional id",
        lambda c, v: {
            "transactional_id": c.fresh("tx"),
            "producer_id": UNKNOWN_PID,
            "producer_epoch": 0,
            "group_id": c.group,
        },
    ),
    V(
        26,
        "unknown transactional id",
        lambda c, v: {
            "transactional_id": c.fresh("tx"),
            "producer_id": UNKNOWN_PID,
            "producer_epoch": 0,
            "committed": True,
        },
    ),
    V(
        28,
        "unknown producer",
        lambda c, v: {
            "transactional_id": c.fresh("tx"),
            "group_id": c.group,
            "producer_id": UNKNOWN_PID,
            "producer_epoch": 0,
            "generation_id": -1,
            "member_id": "",
            "topics": [
                {"name": c.topic, "partitions": [{"partition_index": 0, "committed_offset": 1}]}
            ],
        },
    ),
    # ACLs without an authorizer (29-31)
    V(
        29,
        "any",
        lambda c, v: {
            "resource_type_filter": 1,
            "pattern_type_filter": 1,
            "operation": 1,
            "permission_type": 1,
        },
    ),
    V(
        30,
        "one",
        lambda c, v: {
            "creations": [
                {
                    "resource_type": 2,
                    "resource_name": c.topic,
                    "resource_pattern_type": 3,
                    "principal": "User:x",
                    "host": "*",
                    "operation": 3,
                    "permission_type": 3,
                }
            ]
        },
    ),
    V(
        31,
        "any",
        lambda c, v: {
            "filters": [
                {
                    "resource_type_filter": 1,
                    "pattern_type_filter": 1,
                    "operation": 1,
                    "permission_type": 1,
                }
            ]
        },
    ),
    # DescribeConfigs (32), AlterConfigs (33), IncrementalAlterConfigs (44)
    V(
        32,
        "topic, some keys",
        lambda c, v: _config(
            TOPIC,
            c.topic,
            [
                "cleanup.policy",
                "retention.ms",
                "min.insync.replicas",
                "segment.bytes",
                "message.timestamp.type",
                "compression.type",
                "max.message.bytes",
            ],
        ),
    ),
    V(32, "unknown topic", lambda c, v: _config(TOPIC, c.fresh("nope"))),
    V(32, "unknown key", lambda c, v: _config(TOPIC, c.topic, ["no.such.key"])),
    V(
        32,
        "broker, some keys",
        lambda c, v: _config(
            BROKER,
            "1",
            [
                "log.retention.hours",
                "num.partitions",
                "auto.create.topics.enable",
                "log.segment.bytes",
                "message.max.bytes",
                "min.insync.replicas",
            ],
        ),
    ),
    V(32, "unknown broker", lambda c, v: _config(BROKER, "42", ["num.partitions"])),
    V(32, "bad broker id", lambda c, v: _config(BROKER, "x", ["num.partitions"])),
    V(
        32,
        "group, some keys",
        lambda c, v: _config(GROUP, c.group, ["consumer.session.timeout.ms"]),
        4,
    ),
    V(33, "valid (validate only)", lambda c, v: _alter(TOPIC, c.topic, "retention.ms", "1000")),
    V(33, "unknown key", lambda c, v: _alter(TOPIC, c.topic, "no.such.key", "1")),
    V(33, "bad value", lambda c, v: _alter(TOPIC, c.topic, "retention.ms", "soon")),
    V(33, "unknown topic", lambda c, v: _alter(TOPIC, c.fresh("nope"), "retention.ms", "1")),
    V(44, "set (validate only)", lambda c, v: _alter(TOPIC, c.topic, "retention.ms", "1000", op=0)),
    V(44, "unknown key", lambda c, v: _alter(TOPIC, c.topic, "no.such.key", "1", op=0)),
    V(44, "bad value", lambda c, v: _alter(TOPIC, c.topic, "segment.bytes", "12", op=0)),
    V(44, "append to a non-list", lambda c, v: _alter(TOPIC, c.topic, "retention.ms", "5", op=2)),
    V(44, "bad operation", lambda c, v: _alter(TOPIC, c.topic, "retention.ms", "5", op=9)),
    V(
        44,
        "broker dynamic (validate only)",
        lambda c, v: _alter(BROKER, "1", "log.cleaner.threads", "2", op=0),
    ),
    V(44, "read-only broker key", lambda c, v: _alter(BROKER, "1", "log.dirs", "/x", op=0)),
    # DescribeLogDirs (35)
    V(35, "the data topic", lambda c, v: {"topics": [{"topic": c.topic, "partitions": [0, 1]}]}),
    # CreatePartitions (37)
    V(
        37,
        "grow",
        lambda c, v: {
            "topics": [{"name": c.topic, "count": 3, "assignments": None}],
            "timeout_ms": 5000,
            "validate_only": True,
        },
    ),
    V(
        37,
        "same count",
        lambda c, v: {
            "topics": [{"name": c.topic, "count": 2, "assignments": None}],
            "timeout_ms": 5000,
            "validate_only": True,
        },
    ),
    V(
        37,
        "fewer",
        lambda c, v: {
            "topics": [{"name": c.topic, "count": 1, "assignments": None}],
            "timeout_ms": 5000,
            "validate_only": True,
        },
    ),
    V(
        37,
        "unknown topic",
        lambda c, v: {
            "topics": [{"name": c.fresh("nope"), "count": 3, "assignments": None}],
            "timeout_ms": 5000,
        },
    ),
    V(
        37,
        "bad assignment",
        lambda c, v: {
            "topics": [{"name": c.topic, "count": 3, "assignments": [{"broker_ids": [42]}]}],
            "timeout_ms": 5000,
            "validate_only": True,
        },
    ),
    # DeleteGroups (42)
    V(42, "unknown and empty", lambda c, v: {"groups_names": [c.fresh("g")]}),
    # ElectLeaders (43)
    V(
        43,
        "preferred, not needed",
        lambda c, v: {
            "election_type": 0,
            "topic_partitions": [{"topic": c.topic, "partitions": [0]}],
            "timeout_ms": 5000,
        },
    ),
    V(
        43,
        "unknown partition",
        lambda c, v: {
            "election_type": 1,
            "topic_partitions": [{"topic": c.topic, "partitions": [9]}],
            "timeout_ms": 5000,
        },
        1,
    ),
    # reassignments (45, 46)
    V(
        45,
        "unknown broker",
        lambda c, v: {
            "timeout_ms": 5000,
            "topics": [{"name": c.topic, "partitions": [{"partition_index": 0, "replicas": [42]}]}],
        },
    ),
    V(
        45,
        "cancel none",
        lambda c, v: {
            "timeout_ms": 5000,
            "topics": [{"name": c.topic, "partitions": [{"partition_index": 0, "replicas": None}]}],
        },
    ),
    V(
        46,
        "the data topic",
        lambda c, v: {
            "timeout_ms": 5000,
            "topics": [{"name": c.topic, "partition_indexes": [0, 1]}],
        },
    ),
    # OffsetDelete (47)
    V(
        47,
        "memberless group",
        lambda c, v: {
            "group_id": c.group,
            "topics": [{"name": c.topic, "partitions": [{"partition_index": 1}]}],
        },
    ),
    V(
        47,
        "unknown group",
        lambda c, v: {
            "group_id": c.fresh("g"),
            "topics": [{"name": c.topic, "partitions": [{"partition_index": 0}]}],
        },
    ),
    # client quotas (48, 49)
    V(
        48,
        "exact user",
        lambda c, v: {
            "components": [{"entity_type": "user", "match_type": 0, "match": c.fresh("u")}],
            "strict": True,
        },
    ),
    V(
        48,
        "bad entity type",
        lambda c, v: {
            "components": [{"entity_type": "nonsense", "match_type": 1}],
            "strict": False,
        },
    ),
    V(
        49,
        "validate only",
        lambda c, v: {
            "entries": [
                {
                    "entity": [{"entity_type": "client-id", "entity_name": "c"}],
                    "ops": [{"key": "producer_byte_rate", "value": 1024.0, "remove": False}],
                }
            ],
            "validate_only": True,
        },
    ),
    V(
        49,
        "unknown key",
        lambda c, v: {
            "entries": [
                {
                    "entity": [{"entity_type": "client-id", "entity_name": "c"}],
                    "ops": [{"key": "no_such_rate", "value": 1.0, "remove": False}],
                }
            ],
            "validate_only": True,
        },
    ),
    V(
        49,
        "bad entity",
        lambda c, v: {
            "entries": [
                {
                    "entity": [{"entity_type": "planet", "entity_name": "c"}],
                    "ops": [{"key": "producer_byte_rate", "value": 1.0, "remove": False}],
                }
            ],
            "validate_only": True,
        },
    ),
    # SCRAM credentials (50, 51)
    V(50, "unknown user", lambda c, v: {"users": [{"name": c.fresh("u")}]}),
    V(
        51,
        "delete unknown",
        lambda c, v: {"deletions": [{"name": c.fresh("u"), "mechanism": 1}], "upsertions": []},
    ),
    V(
        51,
        "too few iterations",
        lambda c, v: {
            "deletions": [],
            "upsertions": [
                {
                    "name": c.fresh("u"),
                    "mechanism": 1,
                    "iterations": 1,
                    "salt": b"s",
                    "salted_password": b"p" * 32,
                }
            ],
        },
    ),
    # DescribeCluster (60), DescribeProducers (61)
    V(60, "plain", lambda c, v: {"include_cluster_authorized_operations": False}),
    V(60, "controllers from a broker", lambda c, v: {"endpoint_type": 2}, 1),
    V(
        61,
        "the data topic",
        lambda c, v: {"topics": [{"name": c.topic, "partition_indexes": [0, 7]}]},
    ),
    # transactions listing (65, 66)
    V(65, "unknown id", lambda c, v: {"transactional_ids": [c.fresh("tx")]}),
    V(66, "bad state filter", lambda c, v: {"state_filters": ["Nonsense"]}),
    V(66, "all", lambda c, v: {}, project=only_errors),
    # KIP-848 consumer groups (68, 69)
    V(
        68,
        "join without topics",
        lambda c, v: {
            "group_id": c.fresh("g"),
            "member_id": "",
            "member_epoch": 0,
            "rebalance_timeout_ms": 5000,
            "subscribed_topic_names": None,
        },
    ),
    V(
        68,
        "unknown member",
        lambda c, v: {"group_id": c.fresh("g"), "member_id": str(uuid.uuid4()), "member_epoch": 3},
    ),
    V(
        68,
        "leave unknown",
        lambda c, v: {"group_id": c.fresh("g"), "member_id": str(uuid.uuid4()), "member_epoch": -1},
    ),
    V(69, "unknown and classic", lambda c, v: {"group_ids": [c.fresh("g"), c.group]}),
    # DescribeTopicPartitions (75)
    V(
        75,
        "data topic and unknown",
        lambda c, v: {
            "topics": [{"name": c.topic}, {"name": c.fresh("nope")}],
            "response_partition_limit": 1,
        },
    ),
    # share groups (76, 77, 90)
    V(
        76,
        "unknown member",
        lambda c, v: {"group_id": c.fresh("g"), "member_id": str(uuid.uuid4()), "member_epoch": 3},
    ),
    V(77, "unknown", lambda c, v: {"group_ids": [c.fresh("g")]}),
    V(
        90,
        "unknown group",
        lambda c, v: {
            "groups": [
                {"group_id": c.fresh("g"), "topics": [{"topic_name": c.topic, "partitions": [0]}]}
            ]
        },
    ),
]


def _offset_fetch(c: Ctx, group: str, v: int) -> dict[str, Any]:
    if v < 8:
        return {"group_id": group, "topics": [{"name": c.topic, "partition_indexes": [0, 1]}]}
    return {
        "groups": [
            {
                "group_id": group,
                "member_id": None,
                "member_epoch": -1,
                "topics": [{"name": c.topic, "topic_id": c.topic_id, "partition_indexes": [0, 1]}],
            }
        ]
    }


def _join(group: str, member: str) -> dict[str, Any]:
    return {
        "group_id": group,
        "session_timeout_ms": 10_000,
        "rebalance_timeout_ms": 10_000,
        "member_id": member,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": b"\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"}],
    }


def _dup_topics(name: str) -> dict[str, Any]:
    spec = _topic(name, 1)
    spec["topics"] = spec["topics"] * 2
    return spec


def _delete_records(c: Ctx, partition: int, offset: int) -> dict[str, Any]:
    return {
        "topics": [
            {"name": c.topic, "partitions": [{"partition_index": partition, "offset": offset}]}
        ],
        "timeout_ms": 5000,
    }


def _ofle(c: Ctx, partition: int, epoch: int, current: int) -> dict[str, Any]:
    return {
        "replica_id": -1,
        "topics": [
            {
                "topic": c.topic,
                "partitions": [
                    {"partition": partition, "leader_epoch": epoch, "current_leader_epoch": current}
                ],
            }
        ],
    }


def _add_partitions(c: Ctx, v: int) -> dict[str, Any]:
    tx = c.fresh("tx")
    if v <= 3:
        return {
            "v3_and_below_transactional_id": tx,
            "v3_and_below_producer_id": UNKNOWN_PID,
            "v3_and_below_producer_epoch": 0,
            "v3_and_below_topics": [{"name": c.topic, "partitions": [0]}],
        }
    return {
        "transactions": [
            {
                "transactional_id": tx,
                "producer_id": UNKNOWN_PID,
                "producer_epoch": 0,
                "verify_only": True,
                "topics": [{"name": c.topic, "partitions": [0]}],
            }
        ]
    }


def default_variants(keys: list[int]) -> list[Variant]:
    """The all-defaults request of every key in `keys` (listings compare error codes only)."""
    listing = {3, 16, 18, 29, 35, 46, 48, 50, 66, 74, 75}
    return [
        Variant(
            k,
            "all defaults",
            lambda c, v: {},
            project=only_errors if k in listing else None,
            probe=k == 0,  # Produce's default acks is 0: no answer
            concurrent=k == 24,  # Kafka leaves an empty v4+ batch unanswered
            wait=3.0 if k == 24 else 5.0,
        )
        for k in keys
    ]
