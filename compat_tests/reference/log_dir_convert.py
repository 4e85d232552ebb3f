"""Move a log directory between odradek and Apache Kafka (KRaft): one command each way.

The two brokers share every per-partition file (segments, offset and time indexes, transaction
indexes, leader-epoch checkpoints, producer snapshots, `partition.metadata`) and the per-dir
checkpoints (`recovery-point-offset-checkpoint`, `replication-offset-checkpoint`,
`log-start-offset-checkpoint`, `.kafka_cleanshutdown`). Only the cluster metadata differs:
KRaft keeps it in `__cluster_metadata-0`, odradek in `odradek-cluster-metadata.json`.

    python -m compat_tests.reference.log_dir_convert --from odradek SRC_DATA_DIR DST_DIR
    python -m compat_tests.reference.log_dir_convert --from kafka SRC_DATA_DIR DST_DATA_DIR

odradek -> Kafka: KRaft assigns topic ids itself, so the conversion formats a one-node KRaft
directory under DST_DIR (node-1/server.properties, node-1/data), starts Kafka on it, creates
every topic with its partition count and configs (the internal ones through FindCoordinator,
with `offsets.topic.num.partitions` / `transaction.state.log.num.partitions` set to odradek's
counts so that groups and transactional ids map to the same partitions), stops it, then puts
odradek's partition directories in place of Kafka's empty ones with `partition.metadata`
rewritten to Kafka's topic ids, and odradek's checkpoints in place of Kafka's. Without
odradek's clean-shutdown marker (a killed broker) Kafka's is removed too, so Kafka recovers
the logs from their recovery points as after its own crash. Start Kafka with
`kafka.Kafka DST_DIR/node-1/server.properties`.

Kafka -> odradek: reads the KRaft metadata log with Kafka's own decoder (DumpLogSegments
--cluster-metadata-decoder), writes odradek's store with the same topic ids, partition
counts, leader epochs, topic configs and the next producer id, and copies everything but
`__cluster_metadata-0`. Start odradek with `log.dirs=DST_DATA_DIR` and `node.id` of the Kafka
node (1 here). Both directions need a single-node source.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import time
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from compat_tests.reference.kafka_ref import KafkaReference, classpath, java_binary, jvm_options

STATE_FILE = "odradek-cluster-metadata.json"
CHECKPOINTS = (
    "recovery-point-offset-checkpoint",
    "replication-offset-checkpoint",
    "log-start-offset-checkpoint",
)
CLEAN_SHUTDOWN = ".kafka_cleanshutdown"
METADATA_DIR = "__cluster_metadata-0"
INTERNAL_COUNTS = {
    "__consumer_offsets": ("offsets.topic.num.partitions", 0),
    "__transaction_state": ("transaction.state.log.num.partitions", 1),
}


def write_partition_metadata(part_dir: Path, topic_id: uuid.UUID) -> None:
    """Kafka's `partition.metadata`: version 0 and the topic id in Kafka's base64 form."""
    import base64

    text = base64.urlsafe_b64encode(topic_id.bytes).rstrip(b"=").decode()
    (part_dir / "partition.metadata").write_text(f"version: 0\ntopic_id: {text}\n")


def _kafka_uuid(text: str) -> uuid.UUID:
    """A topic id in Kafka's base64 form (or the usual dashed form)."""
    import base64

    if len(text) == 36:
        return uuid.UUID(text)
    return uuid.UUID(bytes=base64.urlsafe_b64decode(text + "=" * (-len(text) % 4)))


# -- odradek -> Kafka ------------------------------------------------------------------------


def odradek_to_kafka(src: Path, dst: Path, version: str = "4.4") -> KafkaReference:
    """Convert odradek's data dir `src` into a one-node Kafka under `dst` (stopped on return;
    `.start()` serves it)."""
    doc = json.loads((src / STATE_FILE).read_text(encoding="utf-8"))
    topics = {t["name"]: t for t in doc["topics"]}
    overrides = {
        key: str(len(topics[name]["partitions"]))
        for name, (key, _) in INTERNAL_COUNTS.items()
        if name in topics
    }
    kafka = KafkaReference(version, dst, nodes=1, overrides=overrides)
    kafka.start()
    try:
        ids = _create_in_kafka(kafka.bootstrap, topics)
    finally:
        kafka.stop()
    data = kafka.nodes[0].data_dir
    for name, topic in topics.items():
        for index in range(len(topic["partitions"])):
            part = f"{name}-{index}"
            shutil.rmtree(data / part, ignore_errors=True)
            if (src / part).is_dir():
                shutil.copytree(src / part, data / part)
            else:
                (data / part).mkdir()
            write_partition_metadata(data / part, ids[name])
    for name in CHECKPOINTS:
        if (src / name).exists():
            shutil.copyfile(src / name, data / name)
    if not (src / CLEAN_SHUTDOWN).exists():
        (data / CLEAN_SHUTDOWN).unlink(missing_ok=True)
    return kafka


def _create_in_kafka(bootstrap: str, topics: Mapping[str, Any]) -> dict[str, uuid.UUID]:
    """Create `topics` in Kafka (internal ones the way Kafka does: a group's and a
    transactional producer's first FindCoordinator); their Kafka topic ids."""
    import confluent_kafka as ck
    import confluent_kafka.admin as cka

    admin = cka.AdminClient({"bootstrap.servers": bootstrap})
    plain = [
        cka.NewTopic(name, len(t["partitions"]), 1, config=dict(t.get("configs", {})))
        for name, t in topics.items()
        if name not in INTERNAL_COUNTS
    ]
    for future in (admin.create_topics(plain) if plain else {}).values():
        future.result(60)
    if "__consumer_offsets" in topics:
        consumer = ck.Consumer({"bootstrap.servers": bootstrap, "group.id": "log-dir-convert"})
        deadline = time.monotonic() + 60
        while True:  # COORDINATOR_NOT_AVAILABLE / NOT_COORDINATOR while Kafka creates it
            try:
                consumer.committed([ck.TopicPartition("__consumer_offsets", 0)], timeout=30)
                break
            except ck.KafkaException:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)
        consumer.close()
    if "__transaction_state" in topics:
        producer = ck.Producer(
            {"bootstrap.servers": bootstrap, "transactional.id": "log-dir-convert"}
        )
        producer.init_transactions(60)
    deadline = time.monotonic() + 60
    while True:
        found = admin.describe_topics(ck.TopicCollection(list(topics)))
        ids: dict[str, uuid.UUID] = {}
        for name, future in found.items():
            try:
                desc = future.result(30)
            except ck.KafkaException:
                continue
            if len(desc.partitions) == len(topics[name]["partitions"]) and all(
                p.leader is not None for p in desc.partitions
            ):
                ids[name] = _kafka_uuid(str(desc.topic_id))
        if len(ids) == len(topics):
            return ids
        if time.monotonic() > deadline:
            raise RuntimeError(f"Kafka did not create {set(topics) - set(ids)}")
        time.sleep(0.2)


# -- Kafka -> odradek ------------------------------------------------------------------------


def read_kraft_metadata(data: Path, version: str = "4.4") -> list[dict[str, Any]]:
    """Every record of the KRaft metadata log in `data`, decoded by Kafka's DumpLogSegments."""
    files = sorted(str(p) for p in (data / METADATA_DIR).glob("*.log"))
    cmd = [
        java_binary(),
        *jvm_options("256m"),
        "-cp",
        classpath(version),
        "org.apache.kafka.tools.DumpLogSegments",
        "--cluster-metadata-decoder",
        "--files",
        ",".join(files),
    ]
    out = subprocess.run(cmd, capture_output=True, check=True, timeout=120).stdout.decode()
    records = []
    for line in out.splitlines():
        _, sep, payload = line.partition(" payload: ")
        if sep and payload.startswith("{"):
            records.append(json.loads(payload))
    return records


def kafka_to_odradek(src: Path, dst: Path, version: str = "4.4") -> None:
    """Convert a stopped one-node Kafka's data dir `src` into odradek's data dir `dst`."""
    topics: dict[str, dict[str, Any]] = {}
    names: dict[str, str] = {}
    next_producer_id = 0
    for rec in read_kraft_metadata(src, version):
        kind, data = rec.get("type"), rec.get("data", {})
        if kind == "TOPIC_RECORD":
            names[data["topicId"]] = data["name"]
            topics[data["name"]] = {"id": data["topicId"], "partitions": {}, "configs": {}}
        elif kind == "REMOVE_TOPIC_RECORD":
            topics.pop(names.pop(data["topicId"], ""), None)
        elif kind in ("PARTITION_RECORD", "PARTITION_CHANGE_RECORD"):
            topic = topics.get(names.get(data["topicId"], ""))
            if topic is None:
                continue
            part = topic["partitions"].setdefault(data["partitionId"], {})
            for key in ("replicas", "isr", "leader", "eligibleLeaderReplicas", "lastKnownElr"):
                if key in data:
                    part[key] = data[key]
            if "leaderEpoch" in data:
                part["leader_epoch"] = data["leaderEpoch"]
            elif kind == "PARTITION_CHANGE_RECORD" and "leader" in data:
                part["leader_epoch"] = part.get("leader_epoch", 0) + 1
        elif kind == "CONFIG_RECORD" and data.get("resourceType") == 2:
            topic = topics.get(data["resourceName"])
            if topic is not None:
                if data.get("value") is None:
                    topic["configs"].pop(data["name"], None)
                else:
                    topic["configs"][data["name"]] = data["value"]
        elif kind == "PRODUCER_IDS_RECORD":
            next_producer_id = max(next_producer_id, int(data["nextProducerId"]))
    dst.mkdir(parents=True, exist_ok=True)
    for entry in src.iterdir():
        if entry.name == METADATA_DIR or entry.name == "meta.properties":
            continue
        if entry.is_dir():
            shutil.copytree(entry, dst / entry.name)
        else:
            shutil.copyfile(entry, dst / entry.name)
    props = dict(
        line.split("=", 1)
        for line in (src / "meta.properties").read_text().splitlines()
        if "=" in line and not line.startswith("#")
    )
    (dst / "meta.properties").write_text(
        f"version=1\ncluster.id={props['cluster.id']}\nnode.id={props['node.id']}\n"
    )
    doc = {
        "version": 1,
        "next_producer_id": next_producer_id,
        "topics": [
            {
                "name": name,
                "id": str(_kafka_uuid(t["id"])),
                "internal": name.startswith("__"),
                "configs": t["configs"],
                "partitions": [_partition_state(p) for _, p in sorted(t["partitions"].items())],
            }
            for name, t in topics.items()
        ],
    }
    (dst / STATE_FILE).write_text(json.dumps(doc), encoding="utf-8")


def _partition_state(part: dict[str, Any]) -> dict[str, Any]:
    """odradek's partition state from KRaft's. A broker's controlled shutdown leaves its
    partitions leaderless with an empty ISR and itself as eligible leader replica (KIP-966
    ELR); as Kafka does when that broker registers again, the ELR becomes the ISR and its
    first member the leader, in a new leader epoch."""
    leader, isr, epoch = part["leader"], list(part["isr"]), part.get("leader_epoch", 0)
    if leader < 0:
        isr = isr or part.get("eligibleLeaderReplicas") or part.get("lastKnownElr") or []
        isr = isr or list(part["replicas"])
        leader, epoch = isr[0], epoch + 1
    return {
        "replicas": part["replicas"],
        "leader": leader,
        "leader_epoch": epoch,
        "isr": isr,
        "partition_epoch": 0,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--from", dest="source", choices=("odradek", "kafka"), required=True)
    parser.add_argument("src", type=Path, help="the source broker's (stopped) data directory")
    parser.add_argument("dst", type=Path, help="where the converted directory goes (new)")
    args = parser.parse_args(argv)
    if args.source == "odradek":
        kafka = odradek_to_kafka(args.src, args.dst)
        print(
            f"Kafka's directory: {kafka.nodes[0].dir}; start it with kafka.Kafka "
            f"{kafka.nodes[0].dir / 'server.properties'}"
        )
    else:
        kafka_to_odradek(args.src, args.dst)
        print(f"odradek's data directory: {args.dst}; serve it with --override log.dirs={args.dst}")


if __name__ == "__main__":
    main()
