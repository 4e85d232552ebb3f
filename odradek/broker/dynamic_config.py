"""Dynamic broker configs, as Kafka's DynamicBrokerConfig (KIP-226): the keys an AlterConfigs or
IncrementalAlterConfigs of a BROKER resource may set, per broker (resource name = its id) or as
the cluster-wide default (empty name), checked with Kafka's rules and messages.

Precedence (highest first): DYNAMIC_BROKER_CONFIG (this broker's), DYNAMIC_DEFAULT_BROKER_CONFIG
(the cluster default), STATIC_BROKER_CONFIG (server.properties, environment, overrides),
DEFAULT_CONFIG. Every accepted key is stored in the metadata store and described; odradek applies
the log configs (the broker synonyms of topic configs: every topic without its own override
follows them at once) and whatever it reads at use time; the rest (listener TLS and SASL
settings, thread pools, connection limits) is kept and described as on Kafka but takes effect
at the next start only where odradek reads it at start-up.

min.insync.replicas follows Kafka 4.1+ KRaft clusters, where ELR (KIP-966) is on by default: the
cluster-level value is written when the cluster first starts (from the static value) and then
is the one in force; it cannot be set per broker nor removed (KAFKA-16540). A ZooKeeper cluster
keeps Kafka 3.x's rules.
"""

from __future__ import annotations

import logging
import re
from typing import TYPE_CHECKING

from odradek.broker.cluster.metadata_store import MetadataChange, MetadataStore
from odradek.broker.config import BROKER_KEYS, BrokerConfig, BrokerKey
from odradek.broker.kafka_keys import KAFKA_BROKER_KEYS
from odradek.log.config import TOPIC_CONFIGS, ConfigError, parse_value

if TYPE_CHECKING:
    from odradek.broker.partitions.topics import TopicManager

log = logging.getLogger(__name__)

# SslConfigs.RECONFIGURABLE_CONFIGS: dynamic, but only per listener (listener.name.<l>.<key>)
SSL_RECONFIGURABLE = frozenset(
    {
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.keystore.certificate.chain",
        "ssl.keystore.key",
        "ssl.truststore.certificates",
    }
)

# DynamicListenerConfig.ReconfigurableConfigs
LISTENER_RECONFIGURABLE = frozenset(
    {
        "advertised.listeners",
        "listeners",
        "listener.security.protocol.map",
        "principal.builder.class",
        "ssl.protocol",
        "ssl.provider",
        "ssl.cipher.suites",
        "ssl.enabled.protocols",
        "ssl.keystore.type",
        "ssl.keystore.location",
        "ssl.keystore.password",
        "ssl.key.password",
        "ssl.truststore.type",
        "ssl.truststore.location",
        "ssl.truststore.password",
        "ssl.keymanager.algorithm",
        "ssl.trustmanager.algorithm",
        "ssl.endpoint.identification.algorithm",
        "ssl.secure.random.implementation",
        "ssl.client.auth",
        "ssl.engine.factory.class",
        "sasl.mechanism.inter.broker.protocol",
        "sasl.jaas.config",
        "sasl.enabled.mechanisms",
        "sasl.kerberos.service.name",
        "sasl.kerberos.kinit.cmd",
        "sasl.kerberos.ticket.renew.window.factor",
        "sasl.kerberos.ticket.renew.jitter",
        "sasl.kerberos.min.time.before.relogin",
        "sasl.kerberos.principal.to.local.rules",
        "sasl.login.refresh.window.factor",
        "sasl.login.refresh.window.jitter",
        "sasl.login.refresh.min.period.seconds",
        "sasl.login.refresh.buffer.seconds",
        "max.connections",
        "max.connection.creation.rate",
        "num.network.threads",
    }
)

# DynamicLogConfig.ReconfigurableConfigs: the highest-precedence broker synonym of every topic
# config (ServerTopicConfigSynonyms) but message.format.version's; log.retention.hours,
# log.retention.minutes and log.roll.hours are not dynamic.
LOG_RECONFIGURABLE = frozenset(
    {
        "log.segment.bytes",
        "log.roll.ms",
        "log.roll.jitter.ms",
        "log.index.size.max.bytes",
        "log.flush.interval.messages",
        "log.flush.interval.ms",
        "log.retention.bytes",
        "log.retention.ms",
        "message.max.bytes",
        "log.index.interval.bytes",
        "log.cleaner.delete.retention.ms",
        "log.cleaner.min.compaction.lag.ms",
        "log.cleaner.max.compaction.lag.ms",
        "log.segment.delete.delay.ms",
        "log.cleaner.min.cleanable.ratio",
        "log.cleanup.policy",
        "unclean.leader.election.enable",
        "min.insync.replicas",
        "compression.type",
        "compression.gzip.level",
        "compression.lz4.level",
        "compression.zstd.level",
        "log.preallocate",
        "log.message.timestamp.type",
        "log.message.timestamp.difference.max.ms",
        "log.message.timestamp.before.max.ms",
        "log.message.timestamp.after.max.ms",
        "log.message.downconversion.enable",
        "log.local.retention.ms",
        "log.local.retention.bytes",
    }
)

# LogCleaner, DynamicThreadPool, metric reporters, SocketServer, the producer state manager,
# DynamicRemoteLogConfig, and the broker quota configs (QuotaConfig.brokerQuotaConfigs)
OTHER_RECONFIGURABLE = frozenset(
    {
        "log.cleaner.threads",
        "log.cleaner.dedupe.buffer.size",
        "log.cleaner.io.buffer.load.factor",
        "log.cleaner.io.buffer.size",
        "log.cleaner.io.max.bytes.per.second",
        "log.cleaner.backoff.ms",
        "num.io.threads",
        "num.replica.fetchers",
        "num.recovery.threads.per.data.dir",
        "background.threads",
        "metric.reporters",
        "max.connections.per.ip",
        "max.connections.per.ip.overrides",
        "producer.id.expiration.ms",
        "transaction.partition.verification.enable",
        "remote.log.index.file.cache.total.size.bytes",
        "remote.fetch.max.wait.ms",
        "remote.log.manager.copy.max.bytes.per.second",
        "remote.log.manager.fetch.max.bytes.per.second",
        "remote.list.offsets.request.timeout.ms",
        "leader.replication.throttled.rate",
        "follower.replication.throttled.rate",
        "replica.alter.log.dirs.io.max.bytes.per.second",
    }
)

DYNAMIC_KEYS = (
    SSL_RECONFIGURABLE | LISTENER_RECONFIGURABLE | LOG_RECONFIGURABLE | OTHER_RECONFIGURABLE
)

_CLUSTER_LEVEL_LISTENER = frozenset(
    {"max.connections", "max.connection.creation.rate", "num.network.threads"}
)
PER_BROKER_KEYS = (SSL_RECONFIGURABLE | LISTENER_RECONFIGURABLE) - _CLUSTER_LEVEL_LISTENER

# listener.name.<listener>.<key>; the SASL keys given per mechanism too
# (listener.name.<l>.<mechanism>.sasl.jaas.config)
_LISTENER_KEY = re.compile(r"^listener\.name\.[^.]*\.(.*)$")
_MECHANISM_KEYS = (
    "sasl.jaas.config",
    "sasl.login.callback.handler.class",
    "sasl.login.class",
    "sasl.server.callback.handler.class",
    "connections.max.reauth.ms",
)


# The types (Kafka's KafkaConfig) of the dynamic keys odradek does not read, so that their values
# are checked as Kafka checks them
_KAFKA_TYPES = {
    **dict.fromkeys(
        (
            "background.threads",
            "log.cleaner.io.buffer.size",
            "max.connection.creation.rate",
            "max.connections",
            "max.connections.per.ip",
            "num.replica.fetchers",
            "remote.fetch.max.wait.ms",
        ),
        "int",
    ),
    **dict.fromkeys(
        (
            "follower.replication.throttled.rate",
            "leader.replication.throttled.rate",
            "log.cleaner.dedupe.buffer.size",
            "remote.list.offsets.request.timeout.ms",
            "remote.log.index.file.cache.total.size.bytes",
            "remote.log.manager.copy.max.bytes.per.second",
            "remote.log.manager.fetch.max.bytes.per.second",
            "replica.alter.log.dirs.io.max.bytes.per.second",
            "sasl.kerberos.min.time.before.relogin",
            "sasl.login.refresh.buffer.seconds",
            "sasl.login.refresh.min.period.seconds",
        ),
        "long",
    ),
    **dict.fromkeys(
        (
            "log.cleaner.io.buffer.load.factor",
            "log.cleaner.io.max.bytes.per.second",
            "sasl.kerberos.ticket.renew.jitter",
            "sasl.kerberos.ticket.renew.window.factor",
            "sasl.login.refresh.window.factor",
            "sasl.login.refresh.window.jitter",
        ),
        "double",
    ),
    "transaction.partition.verification.enable": "boolean",
}


def _definition(key: str) -> BrokerKey | None:
    """The definition a dynamic value is checked against: odradek's, or Kafka's type."""
    defn = BROKER_KEYS.get(key)
    if defn is None and key in _KAFKA_TYPES:
        defn = BrokerKey(key, _KAFKA_TYPES[key], None, "")
    return defn


def base_name(name: str) -> str | None:
    """The config a listener-prefixed key sets (Kafka's brokerConfigSynonyms); None when `name`
    has no listener prefix."""
    m = _LISTENER_KEY.match(name)
    if m is None:
        return None
    rest = m.group(1)
    return next((k for k in _MECHANISM_KEYS if rest.endswith(k)), rest)


def is_dynamic(name: str) -> bool:
    """A key a BROKER resource's AlterConfigs may set (describes as not read-only)."""
    return name in DYNAMIC_KEYS or (base_name(name) or "") in DYNAMIC_KEYS


def _set(names: list[str]) -> str:
    return "Set(" + ", ".join(names) + ")"  # the Scala Set Kafka's messages print


def validate(props: dict[str, str], per_broker: bool) -> str | None:
    """Kafka's DynamicBrokerConfig.validateConfigs, in its order: the message of the first check
    `props` (the whole new dynamic config of the entity) fails, else None."""
    # a key that is not a KafkaConfig name (a custom or plugin key) is accepted and stored
    fixed = sorted(
        k for k in props if (k in BROKER_KEYS or k in KAFKA_BROKER_KEYS) and k not in DYNAMIC_KEYS
    )
    if fixed:
        return f"Cannot update these configs dynamically: {_set(fixed)}"
    unprefixed = sorted(k for k in props if k in SSL_RECONFIGURABLE)
    if unprefixed:
        return (
            "These security configs can be dynamically updated only per-listener using the "
            f"listener prefix: {_set(unprefixed)}"
        )
    for key, raw in props.items():
        defn = _definition(base_name(key) or key)
        if defn is None or raw is None:
            continue
        try:
            parse_value(defn, raw)  # type: ignore[arg-type]
        except ConfigError as exc:
            return str(exc)
    if not per_broker:
        per = sorted(
            k
            for k in props
            if k in PER_BROKER_KEYS
            or (base_name(k) is not None and base_name(k) not in _CLUSTER_LEVEL_LISTENER)
        )
        if per:
            return (
                "Cannot update these configs at default cluster level, broker id must be "
                f"specified: {_set(per)}"
            )
    return None


MIN_ISR = "min.insync.replicas"


def elr_rules(config: BrokerConfig) -> bool:
    """Kafka 4.1+ KRaft clusters (ELR on by default, KIP-966 / KAFKA-16540) keep
    min.insync.replicas as a cluster-level dynamic config: every odradek cluster but one on
    ZooKeeper (Kafka 3.x's mode, which has no ELR)."""
    return not config.get("zookeeper.connect")


def check_min_isr(
    config: BrokerConfig, name: str, current: dict[str, str], new: dict[str, str]
) -> str | None:
    """Kafka's min.insync.replicas invariants under ELR: not per broker, never removed from the
    cluster level (INVALID_CONFIG); the message, or None."""
    if not elr_rules(config) or current.get(MIN_ISR) == new.get(MIN_ISR):
        return None
    if name:
        return "Broker-level min.insync.replicas cannot be altered while ELR is enabled."
    if MIN_ISR not in new:
        return "Cluster-level min.insync.replicas cannot be removed while ELR is enabled."
    return None


def parsed(props: dict[str, str]) -> dict[str, object]:
    """The typed values of the keys odradek reads; others (and values a newer broker of the
    cluster accepted but this one cannot read) are left out with a warning."""
    out: dict[str, object] = {}
    for key, raw in props.items():
        defn = BROKER_KEYS.get(key)
        if defn is None:
            continue
        try:
            out[key] = parse_value(defn, raw)  # type: ignore[arg-type]
        except ConfigError as exc:
            log.warning("dynamic broker config %s ignored: %s", key, exc)
    return out


class DynamicBrokerConfigs:
    """Keeps a broker's BrokerConfig in step with the dynamic configs of the metadata store (this
    broker's and the cluster default) and gives every topic the new log defaults."""

    def __init__(
        self, config: BrokerConfig, store: MetadataStore, topics: TopicManager, node_id: int
    ) -> None:
        self.config = config
        self.store = store
        self.topics = topics
        self.node_id = node_id
        if elr_rules(config):
            self._cluster_min_isr()
        self.apply()

    def _cluster_min_isr(self) -> None:
        """As a Kafka 4.1+ controller bootstrapping a cluster with ELR: the cluster-level
        min.insync.replicas is added, from this broker's static value, if there is none, and
        broker-level ones are removed."""
        default = self.store.broker_configs.get("", {})
        if MIN_ISR not in default:
            value = str(self.config.static_values.get(MIN_ISR, BROKER_KEYS[MIN_ISR].default))
            self.store.alter_broker_configs("", {**default, MIN_ISR: value})
        mine = self.store.broker_configs.get(str(self.node_id), {})
        if MIN_ISR in mine:
            rest = {k: v for k, v in mine.items() if k != MIN_ISR}
            self.store.alter_broker_configs(str(self.node_id), rest)

    async def start(self) -> None:
        self.store.subscribe(self._on_change)
        self.apply()

    async def stop(self) -> None:
        self.store.unsubscribe(self._on_change)

    def _on_change(self, change: MetadataChange) -> None:
        if change.kind == "broker-configs":
            self.apply(changed=True)

    def apply(self, changed: bool = False) -> None:
        default = dict(self.store.broker_configs.get("", {}))
        mine = dict(self.store.broker_configs.get(str(self.node_id), {}))
        if (default, mine) == (self.config.dynamic_default, self.config.dynamic_broker):
            return
        log_keys = {t.broker_key for t in TOPIC_CONFIGS.values()} | {
            "log.retention.ms",
            "log.roll.ms",
        }
        before = {k: self.config.get(k) for k in log_keys if k in BROKER_KEYS}
        self.config.apply_dynamic(default, mine, parsed(default), parsed(mine))
        log.log(
            logging.INFO if changed else logging.DEBUG,
            "dynamic broker configs: cluster default %s, broker %s",
            sorted(default),
            sorted(mine),
        )
        if any(self.config.get(k) != v for k, v in before.items()):
            self.topics.refresh_log_configs()
