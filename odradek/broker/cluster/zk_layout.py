"""Kafka's classic ZooKeeper layout: the znode paths and their JSON documents.

The same paths and fields Kafka 2.x/3.x (ZooKeeper mode) writes, so `zkCli.sh` and tools that
read them see a familiar tree:

    /cluster/id                                   {"version":"1","id":"<cluster id>"}
    /controller                 (ephemeral)       {"version":2,"brokerid":0,"timestamp":"..."}
    /controller_epoch                             "<int>"
    /brokers/ids/<id>           (ephemeral)       {"version":5,"host":..,"port":..,
                                                   "endpoints":["PLAINTEXT://host:port"],..}
    /brokers/topics/<topic>                       {"version":3,"topic_id":"<base64 uuid>",
                                                   "partitions":{"0":[0,1,2],..},..}
    /brokers/topics/<topic>/partitions/<p>/state  {"version":1,"leader":0,"leader_epoch":0,
                                                   "isr":[0,1,2],"controller_epoch":1}
    /config/topics/<topic>                        {"version":1,"config":{"k":"v",..}}
    /latest_producer_id_block                     {"version":1,"broker":0,
                                                   "block_start":"0","block_end":"999"}

A broker's epoch is the creation zxid of its registration node and a partition's epoch is the
version of its state node, as in Kafka. One addition: a broker in controlled shutdown sets
`"odradek_shutting_down": true` in its registration (Kafka's controller keeps that in memory;
here every broker's controller must see it).
"""

from __future__ import annotations

import base64
import json
import uuid

from odradek.broker.cluster.metadata_store import BrokerRegistration, PartitionState
from odradek.clock import now_ms

CLUSTER_ID = "/cluster/id"
CONTROLLER = "/controller"
CONTROLLER_EPOCH = "/controller_epoch"
BROKER_IDS = "/brokers/ids"
TOPICS = "/brokers/topics"
CONFIG_TOPICS = "/config/topics"
PRODUCER_ID_BLOCK = "/latest_producer_id_block"
# Kafka's ZooKeeper-era reassignment request (kafka-reassign-partitions.sh --zookeeper): the
# controller starts the moves it lists and removes each partition once its move is done
REASSIGN_PARTITIONS = "/admin/reassign_partitions"
PERSISTENT_PATHS = (BROKER_IDS, TOPICS, CONFIG_TOPICS, "/config/changes", "/admin/delete_topics")


def broker_path(node_id: int) -> str:
    return f"{BROKER_IDS}/{node_id}"


def topic_path(topic: str) -> str:
    return f"{TOPICS}/{topic}"


def partitions_path(topic: str) -> str:
    return f"{TOPICS}/{topic}/partitions"


def partition_path(topic: str, index: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{index}"


def state_path(topic: str, index: int) -> str:
    return f"{TOPICS}/{topic}/partitions/{index}/state"


def config_path(topic: str) -> str:
    return f"{CONFIG_TOPICS}/{topic}"


def _dump(doc: object) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def _now_ms() -> str:
    return str(now_ms())


# -- ids: Kafka prints a Uuid as URL-safe base64 without padding ----------------------------


def encode_uuid(value: uuid.UUID) -> str:
    return base64.urlsafe_b64encode(value.bytes).decode().rstrip("=")


def decode_uuid(text: str) -> uuid.UUID:
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


def encode_cluster_id(cluster_id: str) -> bytes:
    return _dump({"version": "1", "id": cluster_id})


def decode_cluster_id(data: bytes) -> str:
    return str(json.loads(data)["id"])


# -- brokers and the controller ---------------------------------------------------------------


def encode_broker(reg: BrokerRegistration) -> bytes:
    endpoints = reg.endpoints or (("PLAINTEXT", reg.host, reg.port, "PLAINTEXT"),)
    # as Kafka's BrokerInfo: host/port are the PLAINTEXT endpoint's, null/-1 without one
    plain = next(((h, p) for n, h, p, proto in endpoints if proto == "PLAINTEXT"), (None, -1))
    doc: dict[str, object] = {
        "features": {},
        "listener_security_protocol_map": {n: proto for n, _h, _p, proto in endpoints},
        "endpoints": [f"{n}://{_host(h)}:{p}" for n, h, p, _proto in endpoints],
        "jmx_port": -1,
        "host": plain[0],
        "port": plain[1],
        "rack": reg.rack,
        "timestamp": _now_ms(),
        "version": 5,
    }
    if reg.shutting_down:
        doc["odradek_shutting_down"] = True
    if reg.registry_url:
        doc["odradek_schema_registry"] = reg.registry_url
    return _dump(doc)


def _host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def decode_broker(
    node_id: int, data: bytes, czxid: int, inter_broker: str | None = None
) -> BrokerRegistration:
    """A `/brokers/ids/<id>` node; host/port become the `inter_broker` listener's address
    (the first endpoint's when it has none)."""
    doc = json.loads(data)
    protocols = doc.get("listener_security_protocol_map") or {}
    endpoints = []
    for endpoint in doc.get("endpoints", []):  # version 2+: host/port may be null
        name, _, address = endpoint.partition("://")
        h, _, p = address.rpartition(":")
        endpoints.append((name, h.strip("[]"), int(p), protocols.get(name, name)))
    host, port = doc.get("host"), doc.get("port", -1)
    chosen = next(
        (e for e in endpoints if e[0] == inter_broker), endpoints[0] if endpoints else None
    )
    if chosen is not None:
        host, port = chosen[1], chosen[2]
    return BrokerRegistration(
        node_id,
        str(host),
        int(port),
        doc.get("rack"),
        bool(doc.get("odradek_shutting_down", False)),
        czxid,
        tuple(endpoints),
        doc.get("odradek_schema_registry"),
    )


def encode_controller(node_id: int) -> bytes:
    return _dump(
        {"version": 2, "brokerid": node_id, "timestamp": _now_ms(), "kraftControllerEpoch": -1}
    )


def decode_controller(data: bytes | None) -> int:
    if not data:
        return -1
    try:
        return int(json.loads(data)["brokerid"])
    except (ValueError, KeyError, TypeError):
        return -1


# -- topics -----------------------------------------------------------------------------------


def encode_topic(topic_id: uuid.UUID, partitions: list[PartitionState]) -> bytes:
    return _dump(
        {
            "version": 3,
            "topic_id": encode_uuid(topic_id),
            "partitions": {str(i): list(p.replicas) for i, p in enumerate(partitions)},
            # an ongoing reassignment (KIP-455), partition by partition, as Kafka 2.4+ writes
            "adding_replicas": {
                str(i): list(p.adding_replicas)
                for i, p in enumerate(partitions)
                if p.adding_replicas
            },
            "removing_replicas": {
                str(i): list(p.removing_replicas)
                for i, p in enumerate(partitions)
                if p.removing_replicas
            },
        }
    )


def encode_reassign_request(moves: dict[tuple[str, int], list[int]]) -> bytes:
    return _dump(
        {
            "version": 1,
            "partitions": [
                {"topic": t, "partition": p, "replicas": list(r)} for (t, p), r in moves.items()
            ],
        }
    )


def decode_reassign_request(data: bytes | None) -> dict[tuple[str, int], list[int]]:
    if not data:
        return {}
    doc = json.loads(data)
    return {
        (str(e["topic"]), int(e["partition"])): [int(r) for r in e["replicas"]]
        for e in doc.get("partitions") or []
    }


def decode_reassignment(data: bytes) -> tuple[dict[int, list[int]], dict[int, list[int]]]:
    """The adding and removing replicas of a topic node, by partition index."""
    doc = json.loads(data)
    adding = {int(k): list(map(int, v)) for k, v in (doc.get("adding_replicas") or {}).items()}
    removing = {int(k): list(map(int, v)) for k, v in (doc.get("removing_replicas") or {}).items()}
    return adding, removing


def decode_topic(data: bytes, name: str, czxid: int) -> tuple[uuid.UUID, list[list[int]]]:
    """The topic id and the replica assignment, partition by partition. A topic written
    without an id (version 1-2, e.g. by Kafka 2.x's kafka-topics.sh) gets one derived from its
    name and creation zxid, the same on every broker."""
    doc = json.loads(data)
    parts = doc.get("partitions", {})
    assignment = [list(map(int, parts[str(i)])) for i in range(len(parts))]
    raw_id = doc.get("topic_id")
    topic_id = decode_uuid(raw_id) if raw_id else uuid.uuid5(uuid.NAMESPACE_URL, f"{name}/{czxid}")
    return topic_id, assignment


def encode_state(state: PartitionState, controller_epoch: int) -> bytes:
    return _dump(
        {
            "controller_epoch": controller_epoch,
            "leader": state.leader,
            "version": 1,
            "leader_epoch": state.leader_epoch,
            "isr": list(state.isr),
        }
    )


def decode_state(data: bytes, version: int, replicas: list[int]) -> PartitionState:
    doc = json.loads(data)
    return PartitionState(
        list(replicas), int(doc["leader"]), int(doc["leader_epoch"]), list(doc["isr"]), version
    )


def encode_config(configs: dict[str, str]) -> bytes:
    return _dump({"version": 1, "config": dict(configs)})


def decode_config(data: bytes | None) -> dict[str, str]:
    if not data:
        return {}
    return {str(k): str(v) for k, v in json.loads(data).get("config", {}).items()}


# -- producer id blocks -----------------------------------------------------------------------


def encode_producer_id_block(node_id: int, start: int, end_inclusive: int) -> bytes:
    return _dump(
        {
            "version": 1,
            "broker": node_id,
            "block_start": str(start),
            "block_end": str(end_inclusive),
        }
    )


def decode_producer_id_block_end(data: bytes) -> int:
    return int(json.loads(data)["block_end"])
