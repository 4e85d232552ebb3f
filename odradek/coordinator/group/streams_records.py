"""`__consumer_offsets` records of KIP-1071 streams groups, in Kafka 4.4's formats (its
group-coordinator `StreamsGroup*Key` / `*Value`; keys are version 0 non-flexible, values version 0
flexible, tagged fields left at their defaults):

    17  StreamsGroupMetadata            (GroupId)            -> Epoch, MetadataHash
    23  StreamsGroupTopology            (GroupId)            -> Epoch, Subtopologies [...]
    19  StreamsGroupMemberMetadata      (GroupId, MemberId)  -> InstanceId, RackId, ClientId,
                                        ClientHost, RebalanceTimeoutMs, TopologyEpoch, ProcessId,
                                        UserEndpoint (nullable), ClientTags
    20  StreamsGroupTargetAssignmentMetadata (GroupId)       -> AssignmentEpoch
    21  StreamsGroupTargetAssignmentMember (GroupId, MemberId) -> Active, Standby, Warmup tasks
    22  StreamsGroupCurrentMemberAssignment (GroupId, MemberId) -> MemberEpoch,
                                        PreviousMemberEpoch, State, Active, Standby, Warmup tasks
                                        and the three pending-revocation lists

A member leaving writes tombstones for 22, 21 and 19; a deleted group also for 20, 23 and 17.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from odradek.coordinator.codec import Reader, Writer
from odradek.coordinator.group import streams_group as sg
from odradek.coordinator.group.streams_assignor import Tasks

Record = tuple[bytes, bytes | None]

GROUP_METADATA = 17
MEMBER_METADATA = 19
TARGET_METADATA = 20
TARGET_MEMBER = 21
CURRENT_ASSIGNMENT = 22
TOPOLOGY = 23
STREAMS_KEYS = frozenset({17, 19, 20, 21, 22, 23})
_MEMBER_KEYS = frozenset({MEMBER_METADATA, TARGET_MEMBER, CURRENT_ASSIGNMENT})
# MemberState of the current assignment record
_STATES = {"Stable": 1, "UnrevokedTasks": 2, "UnreleasedTasks": 3}


@dataclass(slots=True, frozen=True)
class StreamsKey:
    kind: int
    group_id: str
    member_id: str | None = None


def _key(kind: int, group_id: str, member_id: str | None = None) -> bytes:
    w = Writer()
    w.i16(kind)
    w.string(group_id)
    if member_id is not None:
        w.string(member_id)
    return w.finish()


def _value() -> Writer:
    w = Writer(flexible=True)
    w.i16(0)
    return w


def _strings(w: Writer, items: tuple[str, ...] | list[str]) -> None:
    w.array_len(len(items))
    for s in items:
        w.string(s)


def _kvs(w: Writer, items: Mapping[str, str] | tuple[tuple[str, str], ...]) -> None:
    pairs = list(items.items()) if isinstance(items, Mapping) else list(items)
    w.array_len(len(pairs))
    for k, v in pairs:
        w.string(k)
        w.string(v)
        w.tags()


def _tasks(w: Writer, tasks: Tasks) -> None:
    items = sorted((s, p) for s, p in tasks.items() if p)
    w.array_len(len(items))
    for sub, parts in items:
        w.string(sub)
        w.array_len(len(parts))
        for p in sorted(parts):
            w.i32(p)
        w.tags()


def _topic_infos(w: Writer, infos: tuple[sg.TopicInfo, ...]) -> None:
    w.array_len(len(infos))
    for t in infos:
        w.string(t.name)
        w.i32(t.partitions)
        w.i16(t.replication_factor)
        _kvs(w, t.configs)
        w.tags()


def group_metadata(group_id: str, epoch: int) -> Record:
    w = _value()
    w.i32(epoch)
    w.i64(0)  # MetadataHash: odradek compares the topics themselves
    w.tags()
    return _key(GROUP_METADATA, group_id), w.finish()


def topology(group_id: str, t: sg.Topology) -> Record:
    w = _value()
    w.i32(t.epoch)
    w.array_len(len(t.subtopologies))
    for s in t.subtopologies:
        w.string(s.subtopology_id)
        _strings(w, s.source_topics)
        _strings(w, s.source_topic_regex)
        _topic_infos(w, s.state_changelog_topics)
        _strings(w, s.repartition_sink_topics)
        _topic_infos(w, s.repartition_source_topics)
        w.array_len(len(s.copartition_groups))
        for group in s.copartition_groups:
            for indexes in group:
                w.array_len(len(indexes))
                for i in indexes:
                    w.i16(i)
            w.tags()
        w.tags()
    w.tags()
    return _key(TOPOLOGY, group_id), w.finish()


def member_metadata(group_id: str, m: sg.StreamsMember) -> Record:
    w = _value()
    w.string(m.instance_id)
    w.string(m.rack_id)
    w.string(m.client_id)
    w.string(m.client_host)
    w.i32(m.rebalance_timeout_ms)
    w.i32(m.topology_epoch)
    w.string(m.process_id)
    if m.user_endpoint is None:
        w.i8(-1)
    else:
        w.i8(1)
        w.string(m.user_endpoint[0])
        w.out += m.user_endpoint[1].to_bytes(2, "big")
        w.tags()
    _kvs(w, m.client_tags)
    w.tags()
    return _key(MEMBER_METADATA, group_id, m.member_id), w.finish()


def target_member(group_id: str, member_id: str, active: Tasks, standby: Tasks) -> Record:
    w = _value()
    _tasks(w, active)
    _tasks(w, standby)
    _tasks(w, {})
    w.tags()
    return _key(TARGET_MEMBER, group_id, member_id), w.finish()


def target_metadata(group_id: str, epoch: int) -> Record:
    w = _value()
    w.i32(epoch)
    w.tags()
    return _key(TARGET_METADATA, group_id), w.finish()


def current_assignment(group_id: str, m: sg.StreamsMember) -> Record:
    w = _value()
    w.i32(m.member_epoch)
    w.i32(m.previous_member_epoch)
    w.i8(_STATES[m.state.value])
    _tasks(w, m.active)
    _tasks(w, m.standby)
    _tasks(w, {})
    _tasks(w, m.revoking)
    _tasks(w, {})
    _tasks(w, {})
    w.tags()
    return _key(CURRENT_ASSIGNMENT, group_id, m.member_id), w.finish()


def member_tombstones(group_id: str, member_id: str) -> list[Record]:
    return [
        (_key(CURRENT_ASSIGNMENT, group_id, member_id), None),
        (_key(TARGET_MEMBER, group_id, member_id), None),
        (_key(MEMBER_METADATA, group_id, member_id), None),
    ]


def group_tombstones(group_id: str) -> list[Record]:
    return [
        (_key(TARGET_METADATA, group_id), None),
        (_key(TOPOLOGY, group_id), None),
        (_key(GROUP_METADATA, group_id), None),
    ]


# -- decoding ----------------------------------------------------------------------------------


def decode_key(data: bytes) -> StreamsKey | None:
    r = Reader(data)
    kind = r.i16()
    if kind not in STREAMS_KEYS:
        return None
    group_id = r.req_string()
    return StreamsKey(kind, group_id, r.req_string() if kind in _MEMBER_KEYS else None)


def _read_strings(r: Reader) -> tuple[str, ...]:
    return tuple(r.req_string() for _ in range(r.array_len()))


def _read_kvs(r: Reader) -> list[tuple[str, str]]:
    out = []
    for _ in range(r.array_len()):
        out.append((r.req_string(), r.req_string()))
        r.tags()
    return out


def _read_tasks(r: Reader) -> Tasks:
    out: Tasks = {}
    for _ in range(r.array_len()):
        sub = r.req_string()
        out[sub] = {r.i32() for _ in range(r.array_len())}
        r.tags()
    return {s: p for s, p in out.items() if p}


def _read_topic_infos(r: Reader) -> tuple[sg.TopicInfo, ...]:
    out = []
    for _ in range(r.array_len()):
        name = r.req_string()
        partitions = r.i32()
        rf = r.i16()
        out.append(sg.TopicInfo(name, partitions, rf, tuple(_read_kvs(r))))
        r.tags()
    return tuple(out)


def _reader(data: bytes) -> Reader:
    r = Reader(data, flexible=True)
    r.i16()  # value version
    return r


def read_epoch(data: bytes) -> int:
    """Epoch of a StreamsGroupMetadataValue or AssignmentEpoch of the target metadata."""
    return _reader(data).i32()


def read_topology(data: bytes) -> sg.Topology:
    r = _reader(data)
    epoch = r.i32()
    subs = []
    for _ in range(r.array_len()):
        sub_id = r.req_string()
        sources = _read_strings(r)
        regex = _read_strings(r)
        changelogs = _read_topic_infos(r)
        sinks = _read_strings(r)
        repartition = _read_topic_infos(r)
        groups = []
        for _ in range(r.array_len()):
            a, b, c = (tuple(r.i16() for _ in range(r.array_len())) for _ in range(3))
            groups.append((a, b, c))
            r.tags()
        r.tags()
        subs.append(
            sg.Subtopology(sub_id, sources, regex, changelogs, sinks, repartition, tuple(groups))
        )
    return sg.Topology(epoch, tuple(subs))


def read_member(member_id: str, data: bytes, into: sg.StreamsMember | None) -> sg.StreamsMember:
    r = _reader(data)
    m = into or sg.StreamsMember(member_id)
    m.instance_id = r.string(nullable=True)
    m.rack_id = r.string(nullable=True)
    m.client_id = r.req_string()
    m.client_host = r.req_string()
    m.rebalance_timeout_ms = r.i32()
    m.topology_epoch = r.i32()
    m.process_id = r.req_string()
    if r.i8() >= 0:
        host = r.req_string()
        port = int.from_bytes(bytes(r.take(2)), "big")
        r.tags()
        m.user_endpoint = (host, port)
    m.client_tags = dict(_read_kvs(r))
    return m


def read_target(data: bytes) -> tuple[Tasks, Tasks]:
    r = _reader(data)
    active, standby = _read_tasks(r), _read_tasks(r)
    return active, standby


def read_current(data: bytes, m: sg.StreamsMember) -> None:
    r = _reader(data)
    m.member_epoch = r.i32()
    m.previous_member_epoch = r.i32()
    state = r.i8()
    name = next((n for n, v in _STATES.items() if v == state), "Stable")
    m.state = sg.StreamsMemberState(name)
    m.active = _read_tasks(r)
    m.standby = _read_tasks(r)
    _read_tasks(r)  # warm-up tasks: none are planned
    m.revoking = _read_tasks(r)
