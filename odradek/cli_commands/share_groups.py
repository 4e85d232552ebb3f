"""Share groups (KIP-932) in `odradek groups`, as Kafka's kafka-share-groups.sh shows them.

`groups describe` of a share group prints its members (ShareGroupDescribe, key 77) and its
share-partition start offsets with their lag (DescribeShareGroupOffsets, 90). `groups
reset-offsets` of a share group sets the start offsets with AlterShareGroupOffsets (91): the
group must have no members (the broker answers NON_EMPTY_GROUP otherwise), the targets are those
of consumer groups (--to-earliest, --to-latest, --to-offset, --to-datetime, ...) with the current
start offset in place of a committed offset, and nothing changes without --execute.
`groups delete-offsets` of a share group drops whole topics' state (DeleteShareGroupOffsets, 92).
A group counts as a share group when ShareGroupDescribe knows it, when it has share state, or
when `--share` says so (kafka-share-groups.sh is a tool of its own; a group that has never
consumed has neither).
"""

from __future__ import annotations

import time
from typing import Any

from odradek.cli_commands.common import error_name
from odradek.cli_commands.output import CliError
from odradek.wire.api_keys import ApiKey

RETRY_S = 10.0


def _send(admin: Any, group: str, request: Any) -> Any:
    """One request to the group's coordinator; the coordinator is looked up again (for up to
    RETRY_S) while it is not available yet, as Kafka's admin client retries."""
    import kafka.errors as errors

    async def go() -> Any:
        node = await admin._find_coordinator_id(group)
        return await admin._manager.send(request, node_id=node)

    deadline = time.monotonic() + RETRY_S
    while True:
        try:
            return admin._manager.run(go)
        except (errors.CoordinatorNotAvailableError, errors.NotCoordinatorError):
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.1)


def describe_members(admin: Any, group: str) -> dict[str, Any] | None:
    """ShareGroupDescribe in DescribeGroups' shape (None: the coordinator has no such group)."""
    import kafka.errors as errors

    from odradek.wire import protocol  # lazily: the parser is built without the client

    cls: Any = protocol.request_class(ApiKey.SHARE_GROUP_DESCRIBE)
    req = cls(group_ids=[group], include_authorized_operations=False)
    try:
        resp = _send(admin, group, req)
    except (errors.KafkaError, AttributeError):
        return None
    g = resp.groups[0] if resp.groups else None
    if g is None or g.error_code:
        return None
    return {
        "group_state": g.group_state,
        "group_type": "share",
        "protocol_type": "share",
        "protocol_data": g.assignor_name,
        "members": [
            {
                "member_id": m.member_id,
                "group_instance_id": None,
                "client_id": m.client_id,
                "client_host": m.client_host,
                "assigned": [
                    (t.topic_name, p) for t in m.assignment.topic_partitions for p in t.partitions
                ],
            }
            for m in g.members
        ],
    }


def start_offsets(
    admin: Any, group: str, topics: dict[str, list[int]] | None = None
) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (start offset, lag) of the group's share-partitions that have
    state (DescribeShareGroupOffsets; `topics` None: all of them). Lag -1: unknown."""
    from odradek.wire import protocol  # lazily: the parser is built without the client

    R: Any = protocol.request_class(ApiKey.DESCRIBE_SHARE_GROUP_OFFSETS)
    G = R.DescribeShareGroupOffsetsRequestGroup
    wanted = (
        None
        if topics is None
        else [
            G.DescribeShareGroupOffsetsRequestTopic(topic_name=t, partitions=ps)
            for t, ps in topics.items()
        ]
    )
    resp = _send(admin, group, R(groups=[G(group_id=group, topics=wanted)]))
    out: dict[tuple[str, int], tuple[int, int]] = {}
    for g in resp.groups:
        if g.error_code:
            raise CliError(f"cannot describe the offsets of {group!r}: {error_name(g.error_code)}")
        for t in g.topics:
            for p in t.partitions:
                if p.error_code:
                    raise CliError(
                        f"cannot describe {t.topic_name}:{p.partition_index} of {group!r}: "
                        f"{error_name(p.error_code)}"
                    )
                if p.start_offset >= 0:
                    lag = getattr(p, "lag", -1)
                    out[(t.topic_name, p.partition_index)] = (p.start_offset, lag)
    return out


def share_group_info(admin: Any, group: str, forced: bool = False) -> dict[str, Any] | None:
    """The group as a share group (members and state), or None when it is not one."""
    import kafka.errors as errors

    info = describe_members(admin, group)
    if info is not None:
        return info
    try:
        has_state = bool(start_offsets(admin, group))
    except (errors.KafkaError, CliError):  # a broker without the share group APIs
        has_state = False
    if forced or has_state:
        # known only by its state (share group membership does not outlive a broker restart)
        return {
            "group_state": "Empty",
            "group_type": "share",
            "protocol_type": "share",
            "protocol_data": None,
            "members": [],
        }
    return None


def partition_rows(admin: Any, group: str, owner: dict[tuple[str, int], Any]) -> list[Any]:
    """kafka-share-groups.sh --describe --offsets: topic, partition, start offset, lag."""
    offsets = start_offsets(admin, group)
    keys = sorted(set(offsets) | set(owner))
    rows = []
    for topic, partition in keys:
        start, lag = offsets.get((topic, partition), (None, None))
        who = owner.get((topic, partition)) or {}
        rows.append(
            {
                "topic": topic,
                "partition": partition,
                "start_offset": start,
                "lag": lag if lag is not None and lag >= 0 else None,
                "consumer_id": who.get("member_id"),
                "host": who.get("host"),
                "client_id": who.get("client_id"),
            }
        )
    return rows


def alter(admin: Any, group: str, targets: dict[Any, int]) -> None:
    """AlterShareGroupOffsets; a CliError naming what failed."""
    from odradek.wire import protocol  # lazily: the parser is built without the client

    R: Any = protocol.request_class(ApiKey.ALTER_SHARE_GROUP_OFFSETS)
    T = R.AlterShareGroupOffsetsRequestTopic
    by_topic: dict[str, list[Any]] = {}
    for tp, offset in sorted(targets.items()):
        by_topic.setdefault(tp.topic, []).append(
            T.AlterShareGroupOffsetsRequestPartition(
                partition_index=tp.partition, start_offset=offset
            )
        )
    resp = _send(
        admin,
        group,
        R(group_id=group, topics=[T(topic_name=t, partitions=ps) for t, ps in by_topic.items()]),
    )
    if resp.error_code:
        raise CliError(
            f"resetting the offsets of share group {group!r} failed: "
            f"{error_name(resp.error_code)}"
            + (f" ({resp.error_message})" if resp.error_message else "")
        )
    failed = [
        f"{t.topic_name}:{p.partition_index} {error_name(p.error_code)}"
        for t in resp.responses
        for p in t.partitions
        if p.error_code
    ]
    if failed:
        raise CliError(f"resetting offsets of share group {group!r} failed: " + ", ".join(failed))


def delete_offsets(admin: Any, group: str, topics: list[str]) -> list[dict[str, Any]]:
    """DeleteShareGroupOffsets: per topic, None or Kafka's error name."""
    from odradek.wire import protocol  # lazily: the parser is built without the client

    R: Any = protocol.request_class(ApiKey.DELETE_SHARE_GROUP_OFFSETS)
    T = R.DeleteShareGroupOffsetsRequestTopic
    resp = _send(admin, group, R(group_id=group, topics=[T(topic_name=t) for t in topics]))
    if resp.error_code:
        raise CliError(
            f"deleting offsets of share group {group!r} failed: {error_name(resp.error_code)}"
            + (f" ({resp.error_message})" if resp.error_message else "")
        )
    return [
        {
            "topic": t.topic_name,
            "error": None if not t.error_code else error_name(t.error_code),
            "message": t.error_message,
        }
        for t in resp.responses
    ]
