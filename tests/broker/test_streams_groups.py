"""KIP-1071 streams groups on a broker: StreamsGroupHeartbeat creates the internal topics the
topology declares (with its partition counts and configs) and then hands out the tasks;
StreamsGroupDescribe and ListGroups show the group, and it is still there after a restart
(its records in `__consumer_offsets`)."""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka.admin import AdminClient, ConfigResource

from odradek.testing import Broker
from odradek.testing.raw import RawClient
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey

WAIT_S = 30.0
CONFIG = {"offsets.topic.num.partitions": "2", "num.partitions": "1"}


def call(bootstrap: str, api: int, version: int, **fields: Any) -> Any:
    req = protocol.request_class(api)(**fields)
    with RawClient(bootstrap) as raw:
        _cid, data = raw.encode(req, version)
        raw.send(data)
        return protocol.response_class(api).decode(raw.read_frame(), version=version, header=True)


def join(
    bootstrap: str, member: str, instance_id: str | None = None, process_id: str | None = None
) -> Any:
    Req = protocol.request_class(ApiKey.STREAMS_GROUP_HEARTBEAT)
    T = Req.Topology
    S = T.Subtopology
    topology = T(
        epoch=0,
        subtopologies=[
            S(
                subtopology_id="0",
                source_topics=["in"],
                source_topic_regex=[],
                state_changelog_topics=[
                    S.TopicInfo(
                        name="app-store-changelog",
                        partitions=0,
                        replication_factor=0,
                        topic_configs=[S.TopicInfo.KeyValue(key="cleanup.policy", value="compact")],
                    )
                ],
                repartition_sink_topics=[],
                repartition_source_topics=[],
                copartition_groups=[],
            )
        ],
    )
    return call(
        bootstrap, ApiKey.STREAMS_GROUP_HEARTBEAT, 0, group_id="app", member_id=member,
        member_epoch=0, endpoint_information_epoch=0, rebalance_timeout_ms=30000,
        instance_id=instance_id, topology=topology, active_tasks=[], standby_tasks=[],
        warmup_tasks=[], process_id=process_id or str(uuid.uuid4()), shutdown_application=False,
    )  # fmt: skip


def heartbeat(bootstrap: str, member: str, epoch: int, version: int = 0) -> Any:
    return call(
        bootstrap, ApiKey.STREAMS_GROUP_HEARTBEAT, version, group_id="app", member_id=member,
        member_epoch=epoch, endpoint_information_epoch=0, shutdown_application=False,
    )  # fmt: skip


def describe(bootstrap: str) -> Any:
    resp = call(
        bootstrap, ApiKey.STREAMS_GROUP_DESCRIBE, 1, group_ids=["app"],
        include_authorized_operations=False, include_topology_description=False,
    )  # fmt: skip
    return resp.groups[0]


def wait_coordinator(bootstrap: str, deadline: float) -> None:
    """FindCoordinator until it answers: the offsets topic is created on first use."""
    found = call(bootstrap, 10, 1, key="app", key_type=0)
    while found.error_code != 0:
        assert time.monotonic() < deadline, found
        time.sleep(0.2)
        found = call(bootstrap, 10, 1, key="app", key_type=0)


def test_streams_group_topics_tasks_and_restart(tmp_path: Path) -> None:
    with Broker(config=CONFIG, data_dir=str(tmp_path)) as b:
        b.create_topic("in", partitions=3)
        keys = {k.api_key for k in call(b.bootstrap, 18, 3, client_software_name="t",
                                        client_software_version="1").api_keys}  # fmt: skip
        assert {88, 89} <= keys

        deadline = time.monotonic() + WAIT_S
        wait_coordinator(b.bootstrap, deadline)
        r = join(b.bootstrap, "m1")
        while r.error_code != 0:  # its partitions are being loaded
            assert time.monotonic() < deadline, r
            time.sleep(0.2)
            r = join(b.bootstrap, "m1")
        assert [s.status_code for s in r.status] == [3], r  # MISSING_INTERNAL_TOPICS
        assert "app-store-changelog" in r.status[0].status_detail
        epoch = r.member_epoch
        while not r.active_tasks:
            assert time.monotonic() < deadline, r
            time.sleep(0.2)
            r = heartbeat(b.bootstrap, "m1", epoch)
            assert r.error_code == 0, r
            epoch = r.member_epoch
        assert r.status == []
        assert [(t.subtopology_id, sorted(t.partitions)) for t in r.active_tasks] == [
            ("0", [0, 1, 2])
        ]
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        meta = admin.list_topics(timeout=10).topics["app-store-changelog"]
        assert len(meta.partitions) == 3
        res = ConfigResource(ConfigResource.Type.TOPIC, "app-store-changelog")
        assert admin.describe_configs([res])[res].result(10)["cleanup.policy"].value == "compact"
        listed = call(b.bootstrap, 16, 5, states_filter=[], types_filter=[])  # ListGroups
        assert [(g.group_id, g.group_type, g.group_state) for g in listed.groups] == [
            ("app", "streams", "Stable")
        ]

        b.restart()
        deadline = time.monotonic() + WAIT_S
        g = describe(b.bootstrap)
        while g.error_code != 0:  # loading the offsets partition
            assert time.monotonic() < deadline, g
            time.sleep(0.2)
            g = describe(b.bootstrap)
        assert g.group_state == "Stable" and g.group_epoch == epoch
        assert g.assignor_name == "sticky"
        assert [m.member_id for m in g.members] == ["m1"]
        member = g.members[0]
        assert member.member_epoch == epoch
        assert [(t.subtopology_id, t.partitions) for t in member.assignment.active_tasks] == [
            ("0", [0, 1, 2])
        ]
        assert g.topology.subtopologies[0].source_topics == ["in"]
        # the member heartbeats on at its epoch after the restart
        r = heartbeat(b.bootstrap, "m1", epoch, version=1)
        assert r.error_code == 0 and r.member_epoch == epoch, r
        assert not r.topology_description_required


def test_static_member_rejoins_with_its_tasks_and_group_configs_apply() -> None:
    """Over the wire: the group's streams.heartbeat.interval.ms (set through
    IncrementalAlterConfigs) comes back in every heartbeat; a static member (instance id) that
    leaves with epoch -2 and comes back under a new member id gets its tasks at once, while a
    join with its instance id before it left is UNRELEASED_INSTANCE_ID (111)."""
    from confluent_kafka.admin import AlterConfigOpType, ConfigEntry, ResourceType

    with Broker(config=CONFIG) as b:
        b.create_topic("in", partitions=3)
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        entry = ConfigEntry("streams.heartbeat.interval.ms", "7000",
                            incremental_operation=AlterConfigOpType.SET)  # fmt: skip
        res = ConfigResource(ResourceType.GROUP, "app", incremental_configs=[entry])
        for fut in admin.incremental_alter_configs([res]).values():
            fut.result(WAIT_S)
        deadline = time.monotonic() + WAIT_S
        wait_coordinator(b.bootstrap, deadline)
        r = join(b.bootstrap, "s1", "inst", "proc")
        while r.error_code != 0:  # its partitions are being loaded
            assert time.monotonic() < deadline, r
            time.sleep(0.2)
            r = join(b.bootstrap, "s1", "inst", "proc")
        assert r.heartbeat_interval_ms == 7000
        epoch = r.member_epoch
        while not r.active_tasks:  # the changelog topic is being created
            assert time.monotonic() < deadline, r
            time.sleep(0.2)
            r = heartbeat(b.bootstrap, "s1", epoch)
            assert r.error_code == 0 and r.heartbeat_interval_ms == 7000, r
            epoch = r.member_epoch
        tasks = [(t.subtopology_id, sorted(t.partitions)) for t in r.active_tasks]
        assert tasks == [("0", [0, 1, 2])]

        refused = join(b.bootstrap, "s2", "inst", "proc")
        assert refused.error_code == 111, refused  # UNRELEASED_INSTANCE_ID
        left = call(
            b.bootstrap, ApiKey.STREAMS_GROUP_HEARTBEAT, 0, group_id="app", member_id="s1",
            member_epoch=-2, instance_id="inst", endpoint_information_epoch=0,
            shutdown_application=False,
        )  # fmt: skip
        assert (left.error_code, left.member_epoch) == (0, -2), left
        back = join(b.bootstrap, "s2", "inst", "proc")
        assert back.error_code == 0, back
        assert [(t.subtopology_id, sorted(t.partitions)) for t in back.active_tasks] == tasks
        assert back.member_epoch == epoch  # no rebalance: the same assignment epoch
        g = describe(b.bootstrap)
        assert [(m.member_id, m.instance_id) for m in g.members] == [("s2", "inst")]


def test_topology_description_update_is_refused_as_kafka_44_without_a_plugin() -> None:
    """KIP-1331's StreamsGroupTopologyDescriptionUpdate (key 93, v0): listed by ApiVersions and
    answered as Kafka 4.4 answers it by default (no group.streams.topology.description.plugin
    .class): UNSUPPORTED_VERSION with its message; the full description decodes."""
    Req = protocol.request_class(ApiKey.STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE)
    D = Req.TopologyDescription
    node = D.TopologyDescriptionSubtopology.TopologyDescriptionNode(
        name="KSTREAM-SOURCE-0000000000", node_type=1, source_topics=["in"], sink_topic=None,
        stores=[], successors=["KSTREAM-SINK-0000000001"],
    )  # fmt: skip
    description = D(
        subtopologies=[D.TopologyDescriptionSubtopology(subtopology_id="0", nodes=[node])],
        global_stores=[],
    )
    with Broker(config=CONFIG) as b:
        versions = call(b.bootstrap, 18, 3, client_software_name="t", client_software_version="1")
        assert [(k.min_version, k.max_version) for k in versions.api_keys if k.api_key == 93] == [
            (0, 0)
        ]
        r = call(
            b.bootstrap, ApiKey.STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE, 0, group_id="app",
            member_id="m1", topology_epoch=0, topology_description=description,
        )  # fmt: skip
        assert (r.error_code, r.error_message) == (
            35,  # UNSUPPORTED_VERSION
            "The broker has no streams group topology description plugin configured.",
        )
