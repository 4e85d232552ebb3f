"""Cluster metadata: topics, their ids, partition assignments, topic configs, producer id blocks,
client quotas, SCRAM credentials.

One interface, `MetadataStore`; this module has the in-process implementation, persisted as a
JSON document in the first data directory (written atomically). A ZooKeeper implementation
(Kafka's classic layout) can replace it for clusters of separate processes.

For clusters (`LocalMetadataStore.for_cluster`: several brokers in one process share one store)
the interface also has what Kafka keeps in ZooKeeper: live broker registrations (the ephemeral
`/brokers/ids/<id>` nodes), the controller (lowest live broker id here; the `/controller` node in
ZooKeeper), conditional partition-state updates (leader, leader epoch, ISR, guarded by the
leader epoch and a partition epoch, as the znode version guards Kafka's
`/brokers/topics/<t>/partitions/<p>/state`) and change notification (ZooKeeper watches).
Subscribers are called on the event loop after the change, never inside it, so a subscriber
that changes the store again re-enters no one.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from odradek.log.checkpoints import write_atomic

log = logging.getLogger(__name__)

STATE_FILE = "odradek-cluster-metadata.json"
META_PROPERTIES = "meta.properties"
PRODUCER_ID_BLOCK = 1000


@dataclass(slots=True)
class PartitionState:
    replicas: list[int]
    leader: int
    leader_epoch: int = 0
    isr: list[int] = field(default_factory=list)
    # bumped on every change of this state (ISR changes included): the version a conditional
    # update names, as Kafka's partition epoch (KRaft) or znode version (ZooKeeper)
    partition_epoch: int = 0
    # an ongoing reassignment (KIP-455), as Kafka's PartitionRegistration: `replicas` is the
    # original set plus the adding ones; once every adding replica is in the ISR the removing
    # ones are dropped (controller.py)
    adding_replicas: list[int] = field(default_factory=list)
    removing_replicas: list[int] = field(default_factory=list)
    # the ZooKeeper zxid of the write that made this state (the state node's mzxid; -1 when
    # unknown, as in the in-process store): a broker registered later (its broker epoch is its
    # registration's czxid) restarted since, whatever the state says of it
    written_zxid: int = -1

    def with_leader_isr(self, leader: int, leader_epoch: int, isr: list[int]) -> PartitionState:
        """The same assignment (and reassignment) with another leader, epoch or ISR."""
        return PartitionState(
            list(self.replicas),
            leader,
            leader_epoch,
            list(isr),
            adding_replicas=list(self.adding_replicas),
            removing_replicas=list(self.removing_replicas),
        )


@dataclass(slots=True)
class BrokerRegistration:
    """A live broker, as its `/brokers/ids/<id>` node: where peers and clients reach it."""

    node_id: int
    host: str  # the inter-broker listener's address
    port: int
    rack: str | None = None
    shutting_down: bool = False  # in controlled shutdown: not eligible for leadership or ISR
    broker_epoch: int = -1  # set by the store at registration: tells a restart from a blip
    # every advertised listener: (name, host, port, security protocol)
    endpoints: tuple[tuple[str, str, int, str], ...] = ()
    # the built-in Schema Registry's URL (schema.registry.listeners), as Confluent's registry
    # members publish theirs in their group metadata: where the others forward writes
    registry_url: str | None = None

    def endpoint(self, listener: str | None) -> tuple[str, int]:
        """(host, port) of `listener` on this broker; the inter-broker address when it does
        not advertise that listener (Kafka answers a client only with brokers that have its
        listener; one name per cluster is the usual set-up)."""
        for name, host, port, _protocol in self.endpoints:
            if name == listener:
                return host, port
        return self.host, self.port


@dataclass(slots=True, frozen=True)
class MetadataChange:
    """What changed: kind "topic" (created, altered or deleted), "partition", "broker",
    "reassign-request" (ZooKeeper's /admin/reassign_partitions was written),
    "quota" (client quotas), "scram" (SCRAM credentials), "client-metrics" (KIP-714
    subscriptions), "group-configs", "broker-configs" (dynamic broker configs) or "features"
    (finalized feature levels)."""

    kind: str
    topic: str | None = None
    partition: int | None = None
    node_id: int | None = None


Subscriber = Callable[[MetadataChange], None]
# a client quota entity: ((entity type, name or None for <default>), ...) sorted by type
QuotaEntity = tuple[tuple[str, str | None], ...]
QuotaChanges = list[tuple[QuotaEntity, dict[str, float | None]]]  # None: remove the key
# SCRAM credentials (AlterUserScramCredentials): user -> {mechanism name: Kafka's credential
# string (odradek.security.scram.credential_to_string), or None to delete it}
ScramChanges = list[tuple[str, dict[str, str | None]]]


@dataclass(slots=True)
class TopicInfo:
    name: str
    topic_id: uuid.UUID
    partitions: list[PartitionState]
    configs: dict[str, str] = field(default_factory=dict)
    internal: bool = False


class TopicExistsError(Exception):
    """create_topic found the topic already there (another broker created it meanwhile)."""


class MetadataStore:
    """What brokers need to agree on. Implementations persist every change before returning."""

    cluster_id: str
    topics: dict[str, TopicInfo]
    clustered: bool = False  # True: brokers replicate through it (registrations, controller)
    reassignable: bool = False  # True: partition replica sets can change (KIP-455)
    _subscribers: list[Subscriber]

    def create_topic(self, info: TopicInfo) -> None:
        """Persist a new topic; TopicExistsError when it is there already."""
        raise NotImplementedError

    def create_topics(self, infos: list[TopicInfo]) -> list[TopicInfo]:
        """Persist several new topics at once (one CreateTopics request); returns those
        created, in order, leaving out the ones already there (another broker's meanwhile).
        Here one `create_topic` each; the in-process store pays one save for all."""
        created = []
        for info in infos:
            try:
                self.create_topic(info)
            except TopicExistsError:
                continue
            created.append(info)
        return created

    def delete_topic(self, name: str) -> None:
        raise NotImplementedError

    def update_topic(self, info: TopicInfo) -> None:
        raise NotImplementedError

    def allocate_producer_ids(self) -> tuple[int, int]:
        raise NotImplementedError

    # client quotas (AlterClientQuotas): entity -> {key: value}, entities without keys absent
    client_quotas: dict[QuotaEntity, dict[str, float]]

    def alter_client_quotas(self, changes: QuotaChanges) -> None:
        """Set (a value) or remove (None) quota keys of entities, persisted together."""
        raise NotImplementedError

    # SCRAM credentials: user -> {"SCRAM-SHA-256": "salt=...,stored_key=...,server_key=...,
    # iterations=4096"}, users without credentials absent. The strings are Kafka's
    # (ScramCredentialUtils), as ZooKeeper's /config/users/<user> holds them.
    scram_credentials: dict[str, dict[str, str]]

    def alter_scram_credentials(self, changes: ScramChanges) -> None:
        """Set or delete (None) users' credentials, persisted together before returning; then
        subscribers hear MetadataChange("scram")."""
        raise NotImplementedError

    # KIP-714 client metrics subscriptions (ClientMetrics config resources): name -> configs
    # (metrics, interval.ms, match), names without configs absent. ZooKeeper keeps them at
    # /config/client-metrics/<name>, as Kafka 3.7+.
    client_metrics: dict[str, dict[str, str]]

    def alter_client_metrics(self, name: str, configs: dict[str, str]) -> None:
        """Replace a subscription's configs (empty: delete it), persisted before returning;
        then subscribers hear MetadataChange("client-metrics")."""
        raise NotImplementedError

    # Per-group configs (GROUP config resources, KIP-848 / KIP-932): group id -> overrides,
    # groups without overrides absent. ZooKeeper keeps them at /config/groups/<group>.
    group_configs: dict[str, dict[str, str]]

    def alter_group_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace a group's configs (empty: delete them), persisted before returning; then
        subscribers hear MetadataChange("group-configs")."""
        raise NotImplementedError

    # Dynamic broker configs (AlterConfigs on BROKER resources, Kafka's DynamicBrokerConfig):
    # "" (the cluster-wide default) or a node id -> configs, entities without configs absent.
    # ZooKeeper keeps them at /config/brokers/<default> and /config/brokers/<id>, as Kafka 3.x.
    broker_configs: dict[str, dict[str, str]]

    def alter_broker_configs(self, name: str, configs: dict[str, str]) -> None:
        """Replace a broker's (or, for "", the cluster default's) dynamic configs (empty:
        delete them), persisted before returning; then subscribers hear
        MetadataChange("broker-configs")."""
        raise NotImplementedError

    # Finalized feature levels (KIP-584): name -> level, features at level 0 absent, and the
    # epoch of their last change. ZooKeeper keeps them in Kafka's `/feature` node.
    finalized_features: dict[str, int]
    features_epoch: int = 0

    def init_features(self, levels: dict[str, int]) -> None:
        """Finalize the features not finalized yet at `levels` (a new cluster's first level,
        Kafka's `kafka-storage format --feature`); a feature already known keeps its level."""
        raise NotImplementedError

    def alter_features(self, levels: dict[str, int]) -> None:
        """Set features' finalized levels (0 removes one), persisted before returning; then
        subscribers hear MetadataChange("features")."""
        raise NotImplementedError

    # -- clusters: registrations, controller, conditional partition updates, watches -----------

    def register_broker(self, registration: BrokerRegistration) -> None:
        raise NotImplementedError

    def unregister_broker(self, node_id: int) -> None:
        raise NotImplementedError

    def set_shutting_down(self, node_id: int) -> None:
        raise NotImplementedError

    def live_brokers(self) -> list[int]:
        """Ids of registered brokers, ascending."""
        raise NotImplementedError

    def broker(self, node_id: int) -> BrokerRegistration | None:
        raise NotImplementedError

    def controller_id(self) -> int:
        """The broker that elects leaders (-1 when none is live)."""
        raise NotImplementedError

    def update_partitions(
        self, updates: list[tuple[str, int, PartitionState, int, int]]
    ) -> list[bool]:
        """Conditional updates `(topic, index, new state, expected leader epoch, expected
        partition epoch)`, persisted together; each is refused (False) when the stored state
        moved on. The store sets the new state's partition epoch."""
        raise NotImplementedError

    # Kafka's ZooKeeper-era reassignment request node (/admin/reassign_partitions); only the
    # ZooKeeper store has one
    def requested_reassignments(self) -> dict[tuple[str, int], list[int]]:
        return {}

    def forget_requested_reassignments(self, keys: set[tuple[str, int]]) -> None:
        """Take `keys` out of the request node (deleted once empty)."""

    def close(self) -> None:
        """Release connections (a ZooKeeper session); the in-process store has none."""

    # -- change notification, shared by the implementations ---------------------------------

    def subscribe(self, fn: Subscriber) -> None:
        self._subscribers.append(fn)

    def unsubscribe(self, fn: Subscriber) -> None:
        if fn in self._subscribers:
            self._subscribers.remove(fn)

    def _notify(self, change: MetadataChange) -> None:
        if not self._subscribers:
            return
        try:
            loop: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            loop = None
        for fn in list(self._subscribers):
            if loop is None:
                self._deliver(fn, change)
            else:
                loop.call_soon(self._deliver, fn, change)

    def _deliver(self, fn: Subscriber, change: MetadataChange) -> None:
        if fn not in self._subscribers:
            return
        try:
            fn(change)
        except Exception:
            log.exception("metadata subscriber failed on %s", change)


def _load_or_create_cluster_id(data_dir: str, configured: str | None, node_id: int | None) -> str:
    path = os.path.join(data_dir, META_PROPERTIES)
    props: dict[str, str] = {}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                if "=" in line and not line.startswith("#"):
                    k, v = line.strip().split("=", 1)
                    props[k] = v
    cluster_id = props.get("cluster.id") or configured or uuid.uuid4().bytes.hex()[:22]
    if configured and props.get("cluster.id") and props["cluster.id"] != configured:
        raise ValueError(f"cluster.id {configured} does not match {props['cluster.id']} in {path}")
    if not props:
        node = "" if node_id is None else f"node.id={node_id}\n"
        write_atomic(path, f"version=1\ncluster.id={cluster_id}\n{node}")
    return cluster_id


def _topic_doc(t: TopicInfo) -> dict[str, object]:
    return {
        "name": t.name,
        "id": str(t.topic_id),
        "internal": t.internal,
        "configs": t.configs,
        "partitions": [
            {
                "replicas": p.replicas,
                "leader": p.leader,
                "leader_epoch": p.leader_epoch,
                "isr": p.isr,
                "partition_epoch": p.partition_epoch,
                **(
                    {
                        "adding_replicas": p.adding_replicas,
                        "removing_replicas": p.removing_replicas,
                    }
                    if p.adding_replicas or p.removing_replicas
                    else {}
                ),
            }
            for p in t.partitions
        ],
    }


class LocalMetadataStore(MetadataStore):
    """In-process store for one broker (or several in one process), kept in a JSON file."""

    reassignable = True

    def __init__(self, data_dir: str, node_id: int | None, cluster_id: str | None = None) -> None:
        self.path = os.path.join(data_dir, STATE_FILE)
        self.cluster_id = _load_or_create_cluster_id(data_dir, cluster_id, node_id)
        self.topics: dict[str, TopicInfo] = {}
        self.next_producer_id = 0
        self.brokers: dict[int, BrokerRegistration] = {}
        self.client_quotas: dict[QuotaEntity, dict[str, float]] = {}
        self.scram_credentials: dict[str, dict[str, str]] = {}
        self.client_metrics: dict[str, dict[str, str]] = {}
        self.group_configs: dict[str, dict[str, str]] = {}
        self.broker_configs: dict[str, dict[str, str]] = {}
        self.finalized_features: dict[str, int] = {}
        self.features_epoch = 0
        self._subscribers: list[Subscriber] = []
        self._broker_epochs = 0
        self._encoded: dict[str, str] = {}  # topic -> its line in the file
        if os.path.exists(self.path):
            with open(self.path, encoding="utf-8") as f:
                doc = json.load(f)
            self.next_producer_id = doc.get("next_producer_id", 0)
            for q in doc.get("client_quotas", []):
                ent = tuple((str(t), None if n is None else str(n)) for t, n in q["entity"])
                self.client_quotas[ent] = {str(k): float(v) for k, v in q["values"].items()}
            for name, configs in doc.get("client_metrics", {}).items():
                self.client_metrics[str(name)] = {str(k): str(v) for k, v in configs.items()}
            for name, configs in doc.get("group_configs", {}).items():
                self.group_configs[str(name)] = {str(k): str(v) for k, v in configs.items()}
            for name, configs in doc.get("broker_configs", {}).items():
                self.broker_configs[str(name)] = {str(k): str(v) for k, v in configs.items()}
            features = doc.get("features", {})
            self.finalized_features = {
                str(k): int(v) for k, v in features.get("levels", {}).items()
            }
            self.features_epoch = int(features.get("epoch", 0))
            for user, creds in doc.get("scram_credentials", {}).items():
                self.scram_credentials[str(user)] = {str(m): str(c) for m, c in creds.items()}
            for t in doc.get("topics", []):
                self.topics[t["name"]] = TopicInfo(
                    t["name"],
                    uuid.UUID(t["id"]),
                    [PartitionState(**p) for p in t["partitions"]],
                    dict(t.get("configs", {})),
                    bool(t.get("internal", False)),
                )

    # The state file: a JSON document, one topic a line. The save rewrites the whole file
    # atomically (tmp + fsync + rename, `write_atomic`) before the change is acknowledged; a
    # topic's line is encoded once and kept until the store changes that topic (every change
    # goes through the methods below, which call `_dirty`), so a save with 10,000 partitions
    # is a join and a write, not 10,000 partitions encoded again (`indent=1` made
    # `json` use its pure-Python encoder, 120 ms a save at 10,000 partitions).

    def _dirty(self, name: str) -> None:
        self._encoded.pop(name, None)

    def _topic_line(self, t: TopicInfo) -> str:
        line = self._encoded.get(t.name)
        if line is None:
            line = self._encoded[t.name] = json.dumps(_topic_doc(t), separators=(",", ":"))
        return line

    def _save(self) -> None:
        head: dict[str, object] = {"version": 1, "next_producer_id": self.next_producer_id}
        if self.client_quotas:
            head["client_quotas"] = [
                {"entity": [list(part) for part in ent], "values": values}
                for ent, values in self.client_quotas.items()
            ]
        if self.scram_credentials:
            head["scram_credentials"] = self.scram_credentials
        if self.client_metrics:
            head["client_metrics"] = self.client_metrics
        if self.group_configs:
            head["group_configs"] = self.group_configs
        if self.broker_configs:
            head["broker_configs"] = self.broker_configs
        if self.features_epoch:
            head["features"] = {"levels": self.finalized_features, "epoch": self.features_epoch}
        lines = [self._topic_line(t) for t in self.topics.values()]
        body = ",\n".join(lines)
        text = json.dumps(head)[:-1] + ', "topics": [\n' + body + ("\n]}\n" if lines else "]}\n")
        write_atomic(self.path, text)

    @classmethod
    def for_cluster(cls, directory: str, cluster_id: str | None = None) -> LocalMetadataStore:
        """A store shared by the brokers of one process, kept in its own `directory`."""
        os.makedirs(directory, exist_ok=True)
        store = cls(directory, None, cluster_id)
        store.clustered = True
        return store

    def create_topic(self, info: TopicInfo) -> None:
        if info.name in self.topics:
            raise TopicExistsError(info.name)
        self.create_topics([info])

    def create_topics(self, infos: list[TopicInfo]) -> list[TopicInfo]:
        """All of `infos` not already there (the first of a name given twice), persisted by
        one save."""
        created: list[TopicInfo] = []
        names: set[str] = set()
        for info in infos:
            if info.name not in self.topics and info.name not in names:
                names.add(info.name)
                created.append(info)
        if not created:
            return []
        for info in created:
            self.topics[info.name] = info
            self._dirty(info.name)
        try:
            self._save()
        except BaseException:
            for info in created:  # nothing half-applied when the disk refuses
                del self.topics[info.name]
                self._dirty(info.name)
            raise
        for info in created:
            self._notify(MetadataChange("topic", info.name))
        return created

    def delete_topic(self, name: str) -> None:
        self.topics.pop(name, None)
        self._dirty(name)
        self._save()
        self._notify(MetadataChange("topic", name))

    def update_topic(self, info: TopicInfo) -> None:
        self.topics[info.name] = info
        self._dirty(info.name)
        self._save()
        self._notify(MetadataChange("topic", info.name))

    def allocate_producer_ids(self) -> tuple[int, int]:
        """A block [start, end) of producer ids, persisted before use."""
        start = self.next_producer_id
        self.next_producer_id += PRODUCER_ID_BLOCK
        self._save()
        return start, start + PRODUCER_ID_BLOCK

    def alter_client_quotas(self, changes: QuotaChanges) -> None:
        for ent, ops in changes:
            values = dict(self.client_quotas.get(ent, {}))
            for key, value in ops.items():
                if value is None:
                    values.pop(key, None)
                else:
                    values[key] = value
            if values:
                self.client_quotas[ent] = values
            else:
                self.client_quotas.pop(ent, None)
        self._save()
        self._notify(MetadataChange("quota"))

    def alter_client_metrics(self, name: str, configs: dict[str, str]) -> None:
        if configs:
            self.client_metrics[name] = dict(configs)
        else:
            self.client_metrics.pop(name, None)
        self._save()
        self._notify(MetadataChange("client-metrics"))

    def alter_group_configs(self, name: str, configs: dict[str, str]) -> None:
        if configs:
            self.group_configs[name] = dict(configs)
        else:
            self.group_configs.pop(name, None)
        self._save()
        self._notify(MetadataChange("group-configs"))

    def alter_broker_configs(self, name: str, configs: dict[str, str]) -> None:
        if configs:
            self.broker_configs[name] = dict(configs)
        else:
            self.broker_configs.pop(name, None)
        self._save()
        self._notify(MetadataChange("broker-configs"))

    def init_features(self, levels: dict[str, int]) -> None:
        if self.features_epoch:
            return
        self.finalized_features = {k: v for k, v in levels.items() if v > 0}
        self.features_epoch = 1
        self._save()

    def alter_features(self, levels: dict[str, int]) -> None:
        for name, level in levels.items():
            if level > 0:
                self.finalized_features[name] = level
            else:
                self.finalized_features.pop(name, None)
        self.features_epoch += 1
        self._save()
        self._notify(MetadataChange("features"))

    def alter_scram_credentials(self, changes: ScramChanges) -> None:
        credentials = {user: dict(creds) for user, creds in self.scram_credentials.items()}
        for user, ops in changes:
            creds = credentials.setdefault(user, {})
            for mechanism, value in ops.items():
                if value is None:
                    creds.pop(mechanism, None)
                else:
                    creds[mechanism] = value
            if not creds:
                del credentials[user]
        previous, self.scram_credentials = self.scram_credentials, credentials
        try:
            self._save()
        except BaseException:
            self.scram_credentials = previous  # nothing half-applied when the disk refuses
            raise
        self._notify(MetadataChange("scram"))

    # -- clusters ---------------------------------------------------------------------------
    # Registrations live in memory only, as ZooKeeper's ephemeral nodes end with the session.

    def register_broker(self, registration: BrokerRegistration) -> None:
        self._broker_epochs += 1
        registration.broker_epoch = self._broker_epochs
        self.brokers[registration.node_id] = registration
        log.info(
            "broker %d registered at %s:%d",
            registration.node_id,
            registration.host,
            registration.port,
        )
        self._notify(MetadataChange("broker", node_id=registration.node_id))

    def unregister_broker(self, node_id: int) -> None:
        if self.brokers.pop(node_id, None) is not None:
            log.info("broker %d unregistered", node_id)
            self._notify(MetadataChange("broker", node_id=node_id))

    def set_shutting_down(self, node_id: int) -> None:
        reg = self.brokers.get(node_id)
        if reg is not None and not reg.shutting_down:
            reg.shutting_down = True
            self._notify(MetadataChange("broker", node_id=node_id))

    def live_brokers(self) -> list[int]:
        return sorted(self.brokers)

    def broker(self, node_id: int) -> BrokerRegistration | None:
        return self.brokers.get(node_id)

    def controller_id(self) -> int:
        return min(self.brokers) if self.brokers else -1

    def update_partitions(
        self, updates: list[tuple[str, int, PartitionState, int, int]]
    ) -> list[bool]:
        results = []
        changed = []
        for topic, index, state, leader_epoch, partition_epoch in updates:
            info = self.topics.get(topic)
            if info is None or not 0 <= index < len(info.partitions):
                results.append(False)
                continue
            current = info.partitions[index]
            if (current.leader_epoch, current.partition_epoch) != (leader_epoch, partition_epoch):
                results.append(False)
                continue
            state.partition_epoch = current.partition_epoch + 1
            info.partitions[index] = state
            self._dirty(topic)
            results.append(True)
            changed.append((topic, index))
        if changed:
            self._save()
            for topic, index in changed:
                self._notify(MetadataChange("partition", topic, index))
        return results
