"""Broker configuration with Kafka's keys, from server.properties, overrides and environment.

Precedence (lowest first): defaults, the properties file, `KAFKA_*` environment variables
(`KAFKA_LOG_DIRS` -> `log.dirs`; `__` -> `_`, `___` -> `-`, as Kafka's Docker images do; the
variables of Kafka's start scripts such as `KAFKA_HEAP_OPTS` are not configs), then
`--override key=value`.

Keys: odradek's own (BROKER_KEYS, docs/config.md) are parsed and validated; a key Kafka has but
odradek does not use (kafka_keys.py, generated from Kafka's KafkaConfig) is accepted with one
warning; anything else is unknown and, as Kafka's AbstractConfig.logUnused says "was supplied but
isn't a known config", warned about once naming the closest real key and ignored, unless strict
(`odradek serve --strict-config` or `odradek.strict.config=true`), where it stops the broker.
Kubernetes service links (`KAFKA_SERVICE_HOST`, `KAFKA_PORT_9092_TCP_ADDR`, ... for a Service
named `kafka`) are never configs. Kafka 4's KRaft
server.properties starts a broker: a combined `process.roles=broker,controller` node is the
embedded single node and its controller listener is not served; a KRaft quorum of other nodes
is refused with the reason (odradek clusters use `zookeeper.connect`).
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from typing import Any, TypeAlias

from odradek.broker.kafka_keys import KAFKA_BROKER_KEYS
from odradek.log.config import (
    TOPIC_CONFIGS,
    ConfigError,
    LogConfig,
    message_format_warning,
    parse_value,
)

log = logging.getLogger(__name__)

# A setting's value, typed by its key (BrokerKey.type: int, float, str, bool, list or None): the
# callers convert. Said once here; the broker's other modules may not spell Any (pyproject).
ConfigValue: TypeAlias = Any


@dataclass(slots=True, frozen=True)
class BrokerKey:
    name: str
    type: str
    default: Any  # of the key's `type` (int, float, str, bool, list or None)
    doc: str
    effective: bool = True
    choices: tuple[str, ...] = ()
    minimum: float | None = None


def _k(
    name: str,
    type_: str,
    default: Any,  # the key's value type (int, float, str, bool, list, None): see `type`
    doc: str,
    effective: bool = True,
    choices: tuple[str, ...] | list[str] = (),
    minimum: float | None = None,
) -> BrokerKey:
    return BrokerKey(name, type_, default, doc, effective, tuple(choices), minimum)


def _ssl_keys() -> list[BrokerKey]:
    """Kafka's ssl.* keys that odradek reads, per listener too (listener.name.<l>.ssl.*)."""
    return [
        _k("ssl.keystore.type", "string", "JKS", "JKS, PKCS12 or PEM"),
        _k("ssl.keystore.location", "string", None, "the server's key store file"),
        _k("ssl.keystore.password", "password", None, "password of the key store file"),
        _k("ssl.key.password", "password", None, "password of the private key"),
        _k(
            "ssl.keystore.certificate.chain",
            "password",
            None,
            "PEM certificate chain inline (ssl.keystore.type=PEM)",
        ),
        _k("ssl.keystore.key", "password", None, "PEM private key inline (ssl.keystore.type=PEM)"),
        _k("ssl.truststore.type", "string", "JKS", "JKS, PKCS12 or PEM"),
        _k(
            "ssl.truststore.location",
            "string",
            None,
            "CAs that client certificates are checked against",
        ),
        _k("ssl.truststore.password", "password", None, "password of the trust store file"),
        _k(
            "ssl.truststore.certificates",
            "password",
            None,
            "PEM CA certificates inline (ssl.truststore.type=PEM)",
        ),
        _k(
            "ssl.client.auth",
            "string",
            "none",
            "client certificates: none, requested or required (mutual TLS)",
            choices=("none", "requested", "required"),
        ),
        _k("ssl.enabled.protocols", "list", "TLSv1.2,TLSv1.3", "TLS versions served"),
        _k("ssl.cipher.suites", "list", None, "cipher suites (OpenSSL names; unset: defaults)"),
        _k(
            "ssl.endpoint.identification.algorithm",
            "string",
            "https",
            "https: check the host name of brokers this broker connects to",
        ),
        _k(
            "ssl.principal.mapping.rules",
            "string",
            "DEFAULT",
            "rules from a client certificate's subject to its principal (Kafka's syntax)",
        ),
    ]


def _sasl_keys() -> list[BrokerKey]:
    """Kafka's SASL keys that odradek reads (per listener too: listener.name.<l>.<key>, and
    listener.name.<l>.<mechanism>.sasl.jaas.config)."""
    return [
        _k(
            "sasl.enabled.mechanisms",
            "list",
            "GSSAPI",
            "mechanisms of SASL listeners: PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER "
            "(Kafka's default GSSAPI, Kerberos, is not served: set this with a SASL listener)",
        ),
        _k(
            "sasl.mechanism.inter.broker.protocol",
            "string",
            "GSSAPI",
            "mechanism brokers use with each other on a SASL inter-broker listener",
        ),
        _k(
            "sasl.jaas.config",
            "password",
            None,
            "JAAS entry; a broker reads listener.name.<l>.<mechanism>.sasl.jaas.config",
        ),
        _k(
            "connections.max.reauth.ms",
            "long",
            0,
            "SASL sessions last at most this long and clients re-authenticate (KIP-368); 0: "
            "no limit",
            minimum=0,
        ),
        _k(
            "sasl.oauthbearer.sub.claim.name",
            "string",
            "sub",
            "JWT claim naming the principal (OAUTHBEARER)",
        ),
        _k(
            "sasl.oauthbearer.scope.claim.name",
            "string",
            "scope",
            "JWT claim holding the scopes (OAUTHBEARER)",
        ),
    ]


BROKER_KEYS: dict[str, BrokerKey] = {
    k.name: k
    for k in (
        _k("listeners", "string", "PLAINTEXT://localhost:9092", "where the broker listens"),
        _k(
            "advertised.listeners",
            "string",
            None,
            "addresses given to clients (default: listeners)",
        ),
        _k("log.dirs", "string", None, "data directories, comma separated"),
        _k(
            "schema.registry.listeners",
            "string",
            None,
            "http(s)://host:port of the built-in Schema Registry (odradek/registry/); unset: "
            "off; https uses the ssl.* settings of the first TLS listener (mTLS with its "
            "ssl.client.auth)",
        ),
        _k(
            "schema.registry.authentication.method",
            "string",
            "NONE",
            "NONE, or BASIC: HTTP Basic against the broker's SASL/PLAIN users and SCRAM "
            "credentials (Confluent's authentication.method)",
        ),
        _k("log.dir", "string", "./odradek-data", "data directory when log.dirs is unset"),
        _k("node.id", "int", 0, "this broker's id"),
        _k("broker.id", "int", None, "synonym of node.id"),
        _k(
            "process.roles",
            "list",
            None,
            "KRaft roles: `broker,controller` is the embedded single node (as unset); `broker` or "
            "`controller` alone is refused (odradek clusters use zookeeper.connect)",
            choices=("broker", "controller"),
        ),
        _k(
            "controller.quorum.voters",
            "list",
            None,
            "KRaft voters `id@host:port`: only this node may be named (a cluster of odradek "
            "brokers uses zookeeper.connect)",
        ),
        _k(
            "controller.quorum.bootstrap.servers",
            "list",
            None,
            "KRaft controller endpoints: at most one, this node's (clusters use zookeeper.connect)",
        ),
        _k(
            "controller.listener.names",
            "list",
            None,
            "listeners of the KRaft controller: not served (odradek's controller is embedded)",
        ),
        _k(
            "inter.broker.listener.name",
            "string",
            None,
            "the listener other brokers connect to (replication, transaction markers); "
            "default: the one whose protocol is security.inter.broker.protocol",
        ),
        _k(
            "security.inter.broker.protocol",
            "string",
            "PLAINTEXT",
            "protocol between brokers when inter.broker.listener.name is unset",
            choices=("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"),
        ),
        _k(
            "listener.security.protocol.map",
            "string",
            "SASL_SSL:SASL_SSL,PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT",
            "listener name to security protocol (NAME:PROTOCOL,...), as Kafka",
        ),
        *_ssl_keys(),
        *_sasl_keys(),
        _k("broker.rack", "string", None, "rack of this broker"),
        _k(
            "cluster.id",
            "string",
            None,
            "cluster id (default: generated once, kept in meta.properties)",
        ),
        _k("num.partitions", "int", 1, "partitions of an auto-created topic", minimum=1),
        _k(
            "default.replication.factor",
            "int",
            1,
            "replication factor of auto-created topics",
            minimum=1,
        ),
        _k(
            "auto.create.topics.enable",
            "boolean",
            True,
            "create a topic when a client asks for its metadata",
        ),
        _k("delete.topic.enable", "boolean", True, "allow DeleteTopics"),
        _k("log.retention.hours", "int", 168, "retention in hours"),
        _k("log.retention.minutes", "int", None, "retention in minutes (wins over hours)"),
        _k("log.retention.ms", "long", None, "retention in ms (wins over minutes)"),
        _k("log.roll.hours", "int", 168, "segment age that rolls a segment"),
        _k("log.roll.ms", "long", None, "segment age in ms (wins over hours)"),
        _k("log.roll.jitter.hours", "int", 0, "jitter in hours", effective=False),
        _k("log.roll.jitter.ms", "long", None, "jitter in ms (wins over hours)", effective=False),
        _k(
            "log.retention.check.interval.ms", "long", 300000, "how often retention runs", minimum=1
        ),
        _k(
            "socket.request.max.bytes",
            "int",
            104857600,
            "largest request frame accepted",
            minimum=1,
        ),
        _k(
            "offsets.topic.num.partitions", "int", 50, "partitions of __consumer_offsets", minimum=1
        ),
        _k(
            "offsets.topic.replication.factor",
            "int",
            1,
            "replication of __consumer_offsets (3 with zookeeper.connect, as Kafka's default)",
            minimum=1,
        ),
        _k("offsets.topic.segment.bytes", "int", 104857600, "segment size of __consumer_offsets"),
        _k("offsets.retention.minutes", "int", 10080, "offsets of empty groups expire after this"),
        _k("offsets.retention.check.interval.ms", "long", 600000, "how often offsets expire"),
        _k(
            "offsets.commit.timeout.ms",
            "int",
            5000,
            "how long a coordinator write waits for the ISR",
        ),
        _k("offsets.load.buffer.size", "int", 5242880, "load buffer", effective=False),
        _k("group.initial.rebalance.delay.ms", "int", 3000, "wait for more members of a new group"),
        _k("group.min.session.timeout.ms", "int", 6000, "smallest session timeout allowed"),
        _k("group.max.session.timeout.ms", "int", 1800000, "largest session timeout allowed"),
        _k("group.max.size", "int", 2147483647, "most members in a group"),
        _k(
            "group.consumer.heartbeat.interval.ms",
            "int",
            5000,
            "heartbeat interval of consumer-protocol (KIP-848) group members",
            minimum=1,
        ),
        _k(
            "group.consumer.session.timeout.ms",
            "int",
            45000,
            "session timeout of consumer-protocol (KIP-848) group members",
            minimum=1,
        ),
        _k(
            "group.streams.heartbeat.interval.ms",
            "int",
            5000,
            "heartbeat interval of streams-protocol (KIP-1071) group members",
            minimum=1,
        ),
        _k(
            "group.streams.session.timeout.ms",
            "int",
            45000,
            "session timeout of streams-protocol (KIP-1071) group members",
            minimum=1,
        ),
        _k(
            "group.streams.num.standby.replicas",
            "int",
            0,
            "standby replicas per task planned by the streams-group assignor (KIP-1071)",
            minimum=0,
        ),
        _k(
            "group.consumer.assignors",
            "list",
            "uniform,range",
            "server-side assignors of consumer-protocol groups; the first is the default",
        ),
        _k("group.consumer.max.size", "int", 2147483647, "most members in a consumer group"),
        _k(
            "transaction.version",
            "int",
            2,
            "level of the transaction.version feature a new cluster finalizes (KIP-890 part 2)",
            minimum=0,
        ),
        _k(
            "group.consumer.migration.policy",
            "string",
            "bidirectional",
            "empty groups convert between classic and consumer protocols",
            choices=("disabled", "upgrade", "downgrade", "bidirectional"),
        ),
        _k(
            "group.share.record.lock.duration.ms",
            "int",
            30000,
            "how long a share group member holds the records it acquired (KIP-932)",
            minimum=1,
        ),
        _k(
            "group.share.delivery.count.limit",
            "int",
            5,
            "deliveries of a record to share group members before it is archived",
            minimum=1,
        ),
        _k(
            "group.share.session.timeout.ms",
            "int",
            45000,
            "session timeout of share group members",
            minimum=1,
        ),
        _k(
            "group.share.heartbeat.interval.ms",
            "int",
            5000,
            "heartbeat interval of share group members",
            minimum=1,
        ),
        _k("group.share.max.size", "int", 200, "most members in a share group", minimum=1),
        _k(
            "group.share.partition.max.record.locks",
            "int",
            2000,
            "most records in flight between a share-partition's start and end offsets",
            minimum=1,
        ),
        _k(
            "share.coordinator.state.topic.num.partitions",
            "int",
            50,
            "partitions of __share_group_state",
            minimum=1,
        ),
        _k(
            "share.coordinator.state.topic.replication.factor",
            "int",
            None,
            "replication of __share_group_state (unset: that of __consumer_offsets)",
        ),
        _k("transaction.state.log.num.partitions", "int", 50, "partitions of __transaction_state"),
        _k(
            "transaction.state.log.replication.factor",
            "int",
            1,
            "replication of __transaction_state (3 with zookeeper.connect, as Kafka's default)",
        ),
        _k("transaction.state.log.min.isr", "int", 1, "min ISR of __transaction_state"),
        _k("transaction.state.log.segment.bytes", "int", 104857600, "segment size"),
        _k("transaction.max.timeout.ms", "int", 900000, "largest transaction timeout"),
        _k("transactional.id.expiration.ms", "int", 604800000, "idle transactional ids expire"),
        _k(
            "transaction.abort.timed.out.transaction.cleanup.interval.ms",
            "int",
            10000,
            "how often timed-out transactions are aborted",
        ),
        _k(
            "transaction.remove.expired.transaction.cleanup.interval.ms",
            "int",
            3600000,
            "how often expired transactional ids are removed",
        ),
        _k("producer.id.expiration.ms", "int", 86400000, "idle producer ids expire"),
        _k("replica.lag.time.max.ms", "long", 30000, "a follower this far behind leaves the ISR"),
        _k("replica.fetch.max.bytes", "int", 1048576, "bytes a follower fetches per partition"),
        _k(
            "fetch.max.bytes",
            "int",
            57671680,
            "the most bytes one Fetch answer carries; a request's max_bytes above it is capped",
            minimum=1024,
        ),
        _k("replica.fetch.wait.max.ms", "int", 500, "follower long-poll wait"),
        _k(
            "replica.high.watermark.checkpoint.interval.ms",
            "long",
            5000,
            "how often high watermarks are written to disk",
            minimum=1,
        ),
        _k("zookeeper.connect", "string", None, "ZooKeeper for cluster metadata (unset: embedded)"),
        _k("zookeeper.connection.timeout.ms", "int", 18000, "ZooKeeper connect timeout"),
        _k("zookeeper.session.timeout.ms", "int", 18000, "ZooKeeper session timeout"),
        _k("controlled.shutdown.enable", "boolean", True, "move leadership away on shutdown"),
        _k("log.cleaner.enable", "boolean", True, "run log compaction"),
        _k("log.cleaner.backoff.ms", "long", 15000, "compaction check interval"),
        _k("log.cleaner.threads", "int", 1, "cleaner threads", effective=False),
        _k("num.network.threads", "int", 3, "accepted for compatibility", effective=False),
        _k("num.io.threads", "int", 8, "accepted for compatibility", effective=False),
        _k(
            "socket.send.buffer.bytes",
            "int",
            -1,
            "SO_SNDBUF of every accepted socket; -1: the OS default (autotuning; Kafka's default "
            "is 102400, docs/notes.md)",
        ),
        _k(
            "socket.receive.buffer.bytes",
            "int",
            -1,
            "SO_RCVBUF of the listening sockets, before they listen (accepted sockets inherit "
            "it) and of inter-broker clients' sockets; -1: the OS default (autotuning; Kafka's "
            "default is 102400, docs/notes.md)",
        ),
        _k(
            "replica.socket.receive.buffer.bytes",
            "int",
            -1,
            "SO_RCVBUF of a replica fetcher's connection to the leader, before it connects; "
            "-1: the OS default (autotuning; Kafka's default is 65536, docs/notes.md)",
        ),
        _k(
            "num.recovery.threads.per.data.dir",
            "int",
            1,
            "accepted for compatibility",
            effective=False,
        ),
        _k("connections.max.idle.ms", "long", 600000, "close idle connections after this"),
        _k("queued.max.requests", "int", 500, "accepted for compatibility", effective=False),
        _k(
            "queued.max.request.bytes",
            "long",
            104857600,
            "bytes of large request frames all connections may hold together; a connection "
            "that needs more waits (stops reading) until memory is freed; -1 is unbounded "
            "(Kafka's default is -1; odradek bounds memory by default)",
        ),
        _k(
            "controller.quota.window.num",
            "int",
            11,
            "samples of the controller mutation quota; its burst is num x size x rate",
            minimum=1,
        ),
        _k(
            "controller.quota.window.size.seconds",
            "int",
            1,
            "seconds per sample of the controller mutation quota",
            minimum=1,
        ),
        _k(
            "quota.window.num",
            "int",
            11,
            "samples of the client quotas' rates (producer_byte_rate, consumer_byte_rate, "
            "request_percentage)",
            minimum=1,
        ),
        _k(
            "quota.window.size.seconds",
            "int",
            1,
            "seconds per sample of the client quotas' rates",
            minimum=1,
        ),
        _k(
            "odradek.controller.mutation.rate",
            "double",
            None,
            "controller_mutation_rate quota (partitions created or deleted per second, KIP-599) "
            "of a client that no controller_mutation_rate client quota covers (unset: unlimited, "
            "as Kafka)",
            minimum=0,
        ),
        # ACLs: odradek/security/acl.py, docs/security-acls.md
        _k(
            "authorizer.class.name",
            "string",
            "",
            "turns ACL authorization on: org.apache.kafka.metadata.authorizer.StandardAuthorizer "
            "or kafka.security.authorizer.AclAuthorizer (Kafka's names; both are odradek's "
            "StandardAuthorizer semantics); empty: no authorizer, every request allowed",
        ),
        _k(
            "super.users",
            "string",
            None,
            "principals allowed everything, separated by ';' (User:admin;User:CN=broker); list "
            "the brokers' own principal here when inter-broker traffic must pass ACLs",
        ),
        _k(
            "allow.everyone.if.no.acl.found",
            "boolean",
            False,
            "with an authorizer: allow a resource that no ACL names (default false: deny)",
        ),
        _k(
            "telemetry.max.bytes",
            "int",
            1048576,
            "largest metrics payload a client may push (KIP-714 PushTelemetry)",
            minimum=1,
        ),
        _k("metrics.listen", "string", None, "HOST:PORT for Prometheus metrics (unset: off)"),
        _k("odradek.admin.listen", "string", None, "HOST:PORT of the fault-injection endpoint"),
        _k(
            "odradek.strict.config",
            "boolean",
            False,
            "refuse to start on a key that is not Kafka's (a typo); default: warn and go on, as "
            "Kafka (same as `odradek serve --strict-config`)",
        ),
    )
}

for _t in TOPIC_CONFIGS.values():
    if (
        _t.broker_key
        and _t.broker_key not in BROKER_KEYS
        and _t.broker_key not in ("log.retention.ms", "log.roll.ms")
    ):
        BROKER_KEYS[_t.broker_key] = BrokerKey(
            _t.broker_key, _t.type, _t.default, _t.doc, True, _t.choices, _t.minimum
        )

_LISTENER = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)://(\[[^\]]*\]|[^:/]*):(\d+)$")


@dataclass(slots=True, frozen=True)
class Listener:
    name: str
    host: str
    port: int


def parse_listeners(text: str, key: str = "listeners") -> list[Listener]:
    """Kafka's listener list: NAME://HOST:PORT,... (HOST may be empty or [IPv6])."""
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        m = _LISTENER.match(part)
        if not m and "://" not in part and re.fullmatch(r"(\[[^\]]*\]|[^:/]*):\d+", part):
            raise ConfigError(
                f"Invalid {key} entry {part!r}: no listener name; write PLAINTEXT://{part}"
            )
        if not m or not 0 <= int(m.group(3)) <= 65535:
            raise ConfigError(f"Invalid {key} entry {part!r}: expected NAME://HOST:PORT")
        out.append(Listener(m.group(1).upper(), m.group(2).strip("[]"), int(m.group(3))))
    if not out:
        raise ConfigError(f"{key} is empty")
    return out


def read_properties(path: str) -> dict[str, str]:
    """Java .properties subset: key=value or key: value, # and ! comments, \\ continuations."""
    props: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror}") from None
    text = re.sub(r"\\\n\s*", "", text)
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        m = re.match(r"^([^=:\s]+)\s*[=:\s]\s*(.*)$", line)
        if not m:
            raise ConfigError(f"{path}: cannot parse line {raw!r}")
        props[m.group(1)] = m.group(2).strip()
    return props


# Variables of Kafka's start scripts (kafka-run-class.sh, kafka-server-start.sh) and Docker images
# (KafkaDockerWrapper.ExcludeServerPropsEnv) that are not configs.
SCRIPT_ENV = frozenset(
    {
        "KAFKA_HEAP_OPTS",
        "KAFKA_OPTS",
        "KAFKA_JVM_PERFORMANCE_OPTS",
        "KAFKA_LOG4J_OPTS",
        "KAFKA_LOG4J_CMD_OPTS",
        "KAFKA_DEBUG",
        "KAFKA_GC_LOG_OPTS",
        "KAFKA_JMX_OPTS",
        "KAFKA_JMX_HOSTNAME",
        "KAFKA_JMX_PORT",
        "KAFKA_MODE",
        "KAFKA_VERSION",
        "KAFKA_HOME",
        "KAFKA_LOG4J_ROOT_LOGLEVEL",
        "KAFKA_LOG4J_LOGGERS",
        "KAFKA_TOOLS_LOG4J_LOGLEVEL",
    }
)

# Kafka keys under a per-listener or per-plugin prefix (listener.name.internal.ssl.keystore.type,
# rsm.config.*, rlmm.config.*): Kafka's, no effect here.
KAFKA_KEY_PREFIXES = ("listener.name.", "rsm.config.", "rlmm.config.")


def _per_listener(key: str) -> bool:
    """listener.name.<listener>.<key> where odradek reads <key> (ssl.*) or a mechanism's
    <mechanism>.sasl.* key (listener.name.sasl_ssl.plain.sasl.jaas.config)."""
    if not key.startswith("listener.name."):
        return False
    _listener, _, rest = key[len("listener.name.") :].partition(".")
    if rest in BROKER_KEYS:
        return True
    _mechanism, _, sasl_key = rest.partition(".")
    return sasl_key.startswith("sasl.") or rest.startswith("sasl.")


def env_key(name: str) -> str:
    """`KAFKA_LOG_DIRS` -> `log.dirs`, as Kafka's Docker images map variables to keys."""
    key = name[6:].lower().replace("___", "\1").replace("__", "\0").replace("_", ".")
    return key.replace("\1", "-").replace("\0", "_")


def env_name(key: str) -> str:
    """The variable that sets `key` (inverse of env_key)."""
    return "KAFKA_" + key.upper().replace("_", "__").replace("-", "___").replace(".", "_")


# The variables Kubernetes puts in every pod for a Service named `kafka` (its service links):
# KAFKA_SERVICE_HOST, KAFKA_SERVICE_PORT[_<port name>], KAFKA_PORT=tcp://10.0.0.1:9092,
# KAFKA_PORT_9092_TCP[_PROTO|_PORT|_ADDR].
_SERVICE_LINK = re.compile(
    r"^KAFKA_(SERVICE_HOST|SERVICE_PORT(_[A-Z0-9_]+)?|PORT|PORT_\d+_(TCP|UDP|SCTP)(_PROTO|_PORT|_ADDR)?)$"
)


def is_service_link(name: str) -> bool:
    """A Kubernetes service-link variable of a Service named `kafka`: not a config."""
    return _SERVICE_LINK.match(name) is not None


def env_variables(environ: dict[str, str]) -> dict[str, tuple[str, str]]:
    """key -> (variable, value) for every KAFKA_* variable that is not a script's nor a
    Kubernetes service link."""
    return {
        env_key(name): (name, value)
        for name, value in environ.items()
        if name.startswith("KAFKA_")
        and name not in SCRIPT_ENV
        and len(name) > 6
        and not is_service_link(name)
    }


def env_properties(environ: dict[str, str]) -> dict[str, str]:
    return {key: value for key, (_, value) in env_variables(environ).items()}


def is_kafka_key(key: str) -> bool:
    """A broker key of Kafka's (its KafkaConfig), known to odradek or not."""
    return key in BROKER_KEYS or key in KAFKA_BROKER_KEYS or key.startswith(KAFKA_KEY_PREFIXES)


def closest_key(key: str) -> str | None:
    import difflib  # only for an unknown key

    match = difflib.get_close_matches(key, BROKER_KEYS.keys() | KAFKA_BROKER_KEYS, n=1)
    return match[0] if match else None


def _unknown_text(key: str, where: str | None, variable: str | None) -> tuple[str, str]:
    """(prefix, hint) for a key that is not Kafka's: where it came from, the closest real key."""
    close = closest_key(key)
    hint = ""
    if close and variable:
        hint = f" (did you mean {env_name(close)}, for {close}?)"
    elif close:
        hint = f" (did you mean {close!r}?)"
    return (f"{where}: " if where else ""), hint


def unknown_key(key: str, where: str | None = None, variable: str | None = None) -> ConfigError:
    """The strict mode's error for a key that is not Kafka's, naming the closest real key."""
    prefix, hint = _unknown_text(key, where, variable)
    return ConfigError(f"{prefix}unknown configuration {key!r}{hint}")


def warn_unknown_key(key: str, where: str | None = None, variable: str | None = None) -> None:
    """Kafka's warning for a supplied key that is not a known config (AbstractConfig.logUnused),
    once per key, naming the closest real key; the key is then ignored."""
    prefix, hint = _unknown_text(key, where, variable)
    _warn_once(
        "\0unknown " + key,
        f"{prefix}the configuration {key!r} was supplied but isn't a known config{hint}: ignored "
        f"({STRICT_KEY}=true or `odradek serve --strict-config` refuses it)",
    )


STRICT_KEY = "odradek.strict.config"


def strict_value(props: dict[str, Any]) -> bool:
    """`odradek.strict.config` of a set of properties (a bad value is an error)."""
    raw = props.get(STRICT_KEY)
    return False if raw is None else bool(parse_value(BROKER_KEYS[STRICT_KEY], raw))  # type: ignore[arg-type]


# Kafka keys without effect already warned about in this process: one line per key, not one
# per broker of an in-process cluster.
_warned: set[str] = set()


def _warn_once(key: str, message: str, level: int = logging.WARNING) -> None:
    if key not in _warned:
        _warned.add(key)
        log.log(level, "%s", message)


# With zookeeper.connect (brokers in separate processes), Kafka's own defaults for the internal
# topics apply: their partitions wait for three brokers, as in Kafka.
ZOOKEEPER_DEFAULTS = {
    "offsets.topic.replication.factor": 3,
    "transaction.state.log.replication.factor": 3,
}

SOCKET_BUFFER_KEYS = (
    "socket.send.buffer.bytes",
    "socket.receive.buffer.bytes",
    "replica.socket.receive.buffer.bytes",
)
_CLUSTERS = "a cluster of odradek brokers uses zookeeper.connect (docs/config.md)"
_SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_SERVED = True  # SASL_PLAINTEXT / SASL_SSL listeners authenticate (network/sasl.py)


class BrokerConfig:
    """Parsed, validated broker settings; `get(key)` returns the typed value. An unknown key is
    warned about and ignored, as Kafka does; `strict` (or `odradek.strict.config=true`) refuses
    it."""

    def __init__(self, props: dict[str, Any] | None = None, strict: bool = False) -> None:
        strict = strict or strict_value(props or {})
        # dynamic broker configs (broker/dynamic_config.py): the cluster default's and this
        # broker's, as stored (strings), over the static values (`static_values`)
        self.dynamic_default: dict[str, str] = {}
        self.dynamic_broker: dict[str, str] = {}
        self.values: dict[str, Any] = {}
        unknown: list[str] = []  # not Kafka's: warned about once the config is valid
        self.explicit: dict[str, Any] = {}
        self.ignored: dict[str, Any] = {}  # Kafka's keys that odradek does not use
        # listener.name.<listener>.<key> for keys odradek reads per listener (ssl.*, sasl.*)
        self.listener_props: dict[str, str] = {}
        for key, raw in (props or {}).items():
            defn = BROKER_KEYS.get(key)
            if defn is None and _per_listener(key):
                self.listener_props[key] = str(raw).strip()
                continue
            if defn is None:
                if not is_kafka_key(key):
                    if strict:
                        raise unknown_key(key)
                    unknown.append(key)
                    continue
                self.ignored[key] = raw
                continue
            self.explicit[key] = raw
            self.values[key] = None if raw is None else parse_value(defn, raw)  # type: ignore[arg-type]
        self._check_kraft()
        self._check_socket_buffers()
        listeners = parse_listeners(self.get("listeners"))
        adv = self.get("advertised.listeners")
        advertised = parse_listeners(adv, "advertised.listeners") if adv else listeners
        self.listeners = self._served(listeners)
        controller = [x for x in listeners if x not in self.listeners]
        self.advertised = [x for x in advertised if x.name not in self.controller_listener_names]
        if not self.advertised:
            raise ConfigError("advertised.listeners names only controller listeners")
        self._check_protocols()
        inter = self.get("inter.broker.listener.name")
        if inter and inter.upper() not in {x.name for x in self.listeners}:
            raise ConfigError(f"inter.broker.listener.name {inter!r} is not one of listeners")
        if self.get("broker.id") is not None and "node.id" not in self.explicit:
            self.values["node.id"] = self.get("broker.id")
        if self.get("zookeeper.connect"):  # a real cluster: Kafka's replicated internal topics
            for key in ZOOKEEPER_DEFAULTS:
                self.values.setdefault(key, ZOOKEEPER_DEFAULTS[key])
        self.static_values = dict(self.values)
        # said only once the config is valid: a refused one prints its error line alone
        for key in unknown:
            warn_unknown_key(key)
        for key in self.ignored:
            _warn_once(key, f"{key} is a Kafka setting that has no effect in odradek: ignored")
        if self.get("log.message.format.version") != "3.0-IV1":  # Kafka 3.x's broker warning
            warning = message_format_warning(self.get("log.message.format.version"))
            if warning:
                _warn_once("log.message.format.version", warning)
        if controller:
            roles = ",".join(self._roles())
            _warn_once(
                "\0controller listeners",
                ("KRaft " + (f"process.roles={roles}: " if roles else ""))
                + "odradek's controller is embedded; controller listener "
                + ",".join(f"{x.name}://{x.host}:{x.port}" for x in controller)
                + " is not served",
                logging.INFO,
            )

    @property
    def controller_listener_names(self) -> set[str]:
        names = self.get("controller.listener.names")
        return {n.upper() for n in names.split(",")} if names else set()

    def _roles(self) -> list[str]:
        roles = self.get("process.roles")
        return roles.split(",") if roles else []

    def _served(self, listeners: list[Listener]) -> list[Listener]:
        """The client listeners: all but the KRaft controller's."""
        served = [x for x in listeners if x.name not in self.controller_listener_names]
        if not served:
            raise ConfigError(
                "listeners has only controller listeners (controller.listener.names): "
                "add one for clients, e.g. PLAINTEXT://:9092"
            )
        return served

    def _check_socket_buffers(self) -> None:
        """A socket buffer size is -1 (the OS default) or a positive int: Kafka parses an INT
        and its sockets refuse any other size (the listening socket stops the broker at start,
        an accepted or replica socket fails its connection); odradek refuses it at start."""
        for key in SOCKET_BUFFER_KEYS:
            value = self.get(key)
            if value != -1 and not 0 < value < 2**31:
                raise ConfigError(
                    f"Invalid value {value} for configuration {key}: "
                    "must be -1 (the OS default) or a positive size in bytes"
                )

    def _check_kraft(self) -> None:
        """A KRaft config maps to the embedded single node or is refused with the reason."""
        roles = set(self._roles())
        if roles and self.get("zookeeper.connect"):
            raise ConfigError(
                "process.roles (KRaft) and zookeeper.connect cannot both be set: "
                "drop process.roles to join the ZooKeeper cluster"
            )
        if roles and roles != {"broker", "controller"}:
            what = (
                "needs separate KRaft controllers"
                if roles == {"broker"}
                else "is a controller-only node"
            )
            raise ConfigError(
                f"process.roles={','.join(sorted(roles))} {what}, which odradek does not have: "
                f"a single node is process.roles=broker,controller (or unset); {_CLUSTERS}"
            )
        node = self.node_id_value()
        voters = self.get("controller.quorum.voters")
        if voters:
            others = []
            for voter in voters.split(","):
                vid, sep, _ = voter.partition("@")
                if not sep or not vid.strip().lstrip("-").isdigit():
                    raise ConfigError(
                        f"Invalid controller.quorum.voters entry {voter!r}: expected ID@HOST:PORT"
                    )
                if int(vid) != node:
                    others.append(voter)
            if others:
                raise ConfigError(
                    f"controller.quorum.voters names other nodes ({', '.join(others)}) but "
                    f"odradek has no KRaft quorum: {_CLUSTERS}, or run `odradek cluster "
                    "--brokers N` for a local one"
                )
        servers = self.get("controller.quorum.bootstrap.servers")
        if servers and len(servers.split(",")) > 1:
            raise ConfigError(
                f"controller.quorum.bootstrap.servers names several controllers ({servers}) but "
                f"odradek has no KRaft quorum: {_CLUSTERS}, or run `odradek cluster --brokers N` "
                "for a local one"
            )

    def _check_protocols(self) -> None:
        """Each served listener's security protocol, from listener.security.protocol.map as
        Kafka reads it: a listener name the map does not have stops the broker."""
        mapping = {}
        for entry in (self.get("listener.security.protocol.map") or "").split(","):
            if not entry.strip():
                continue
            name, sep, protocol = entry.strip().partition(":")
            if not sep or protocol.strip().upper() not in _SECURITY_PROTOCOLS:
                raise ConfigError(
                    f"Invalid listener.security.protocol.map entry {entry.strip()!r}: "
                    f"expected NAME:PROTOCOL ({', '.join(_SECURITY_PROTOCOLS)})"
                )
            mapping[name.strip().upper()] = protocol.strip().upper()
        self.protocols: dict[str, str] = {}
        for x in self.listeners:
            if x.name not in mapping:
                raise ConfigError(
                    f"listener {x.name}://{x.host}:{x.port} has no security protocol: add "
                    f"{x.name}:PLAINTEXT (or SSL, SASL_PLAINTEXT, SASL_SSL) to "
                    "listener.security.protocol.map"
                )
            self.protocols[x.name] = mapping[x.name]
            if mapping[x.name].startswith("SASL_") and not SASL_SERVED:
                raise ConfigError(
                    f"listener {x.name}://{x.host}:{x.port} is {mapping[x.name]}, which this "
                    "build does not serve yet: use PLAINTEXT or SSL"
                )
            if mapping[x.name] in ("SSL", "SASL_SSL") and not (
                self.listener_value(x.name, "ssl.keystore.location")
                or self.listener_value(x.name, "ssl.keystore.certificate.chain")
            ):
                raise ConfigError(
                    f"listener {x.name}://{x.host}:{x.port} is {mapping[x.name]} but has no "
                    "server certificate: set ssl.keystore.location (ssl.keystore.type=PEM or "
                    "PKCS12) or ssl.keystore.certificate.chain and ssl.keystore.key"
                )
        names = [x.name for x in self.listeners]
        inter = self.get("inter.broker.listener.name")
        if inter:
            if inter.upper() not in names:
                raise ConfigError(f"inter.broker.listener.name {inter!r} is not one of listeners")
            self.inter_broker_listener = inter.upper()
        else:
            wanted = self.get("security.inter.broker.protocol")
            by_protocol = [n for n in names if self.protocols[n] == wanted]
            if by_protocol:
                self.inter_broker_listener = by_protocol[0]
            elif "security.inter.broker.protocol" in self.explicit:
                raise ConfigError(
                    f"security.inter.broker.protocol {wanted} is not the protocol of any listener"
                )
            else:
                self.inter_broker_listener = names[0]

    def listener_value(self, listener: str, key: str) -> Any:
        """`listener.name.<listener>.<key>` if set, else `key` (Kafka's per-listener configs)."""
        prefixed = f"listener.name.{listener.lower()}.{key}"
        for level in (self.dynamic_broker, self.dynamic_default, self.listener_props):
            if prefixed in level:
                return level[prefixed]
        return self.get(key)

    def node_id_value(self) -> int:
        node = self.values.get("node.id")
        if node is None:
            node = self.values.get("broker.id")
        return int(node if node is not None else BROKER_KEYS["node.id"].default)

    @classmethod
    def load(
        cls,
        path: str | None,
        overrides: dict[str, str],
        environ: dict[str, str],
        strict: bool = False,
    ) -> BrokerConfig:
        """File, then environment, then overrides. A key that is not Kafka's is warned about
        once, naming its source and the closest real key, and ignored; strict refuses it."""
        sources: list[tuple[str, str, str, str | None]] = []  # key, value, where, variable
        if path:
            sources += [(k, v, path, None) for k, v in read_properties(path).items()]
        for key, (name, value) in env_variables(environ).items():
            sources.append((key, value, f"environment variable {name}", name))
        sources += [(k, v, "--override", None) for k, v in overrides.items()]
        strict = strict or strict_value({k: v for k, v, _, _ in sources})
        props: dict[str, Any] = {}
        unknown = []
        for key, value, where, variable in sources:
            if is_kafka_key(key):
                props[key] = value
            elif strict:
                raise unknown_key(key, where, variable)
            else:
                unknown.append((key, where, variable))
        config = cls(props, strict)
        # said only once the config is valid, as the other warnings
        for key, where, variable in unknown:
            warn_unknown_key(key, where, variable)
        links = sorted(name for name in environ if is_service_link(name))
        if links:
            _warn_once(
                "\0service links",
                "Kubernetes service-link variables are not configs: ignored " + ", ".join(links),
                logging.INFO,
            )
        return config

    def apply_dynamic(
        self,
        default: dict[str, str],
        broker: dict[str, str],
        default_values: dict[str, Any],
        broker_values: dict[str, Any],
    ) -> None:
        """Dynamic configs over the static ones (Kafka's DynamicBrokerConfig precedence): the
        raw stored strings, and the typed values of the keys odradek reads."""
        self.dynamic_default = dict(default)
        self.dynamic_broker = dict(broker)
        self.values = {**self.static_values, **default_values, **broker_values}

    def source_of(self, keys: tuple[str, ...]) -> str:
        """DescribeConfigs' source of a config set by any of `keys` (synonyms)."""
        for level, source in (
            (self.dynamic_broker, "DYNAMIC_BROKER_CONFIG"),
            (self.dynamic_default, "DYNAMIC_DEFAULT_BROKER_CONFIG"),
            (self.explicit, "STATIC_BROKER_CONFIG"),
        ):
            if any(k in level for k in keys):
                return source
        return "DEFAULT_CONFIG"

    def get(self, key: str) -> Any:  # typed by the key (BrokerKey.type); callers convert
        if key in self.values:
            return self.values[key]
        return BROKER_KEYS[key].default

    @property
    def node_id(self) -> int:
        return int(self.get("node.id"))

    @property
    def log_dirs(self) -> list[str]:
        dirs = self.get("log.dirs") or self.get("log.dir")
        return [d.strip() for d in dirs.split(",") if d.strip()]

    def retention_ms(self) -> int:
        if self.get("log.retention.ms") is not None:
            return int(self.get("log.retention.ms"))
        if self.get("log.retention.minutes") is not None:
            return int(self.get("log.retention.minutes")) * 60000
        return int(self.get("log.retention.hours")) * 3600000

    def roll_ms(self) -> int:
        if self.get("log.roll.ms") is not None:
            return int(self.get("log.roll.ms"))
        return int(self.get("log.roll.hours")) * 3600000

    def topic_default(self, topic_key: str) -> tuple[Any, str]:
        """The broker-level value of a topic config and its source name for DescribeConfigs."""
        if topic_key == "retention.ms":
            keys = ("log.retention.ms", "log.retention.minutes", "log.retention.hours")
            return self.retention_ms(), self.source_of(keys)
        if topic_key == "segment.ms":
            return self.roll_ms(), self.source_of(("log.roll.ms", "log.roll.hours"))
        defn = TOPIC_CONFIGS[topic_key]
        bkey = defn.broker_key
        source = self.source_of((bkey,)) if bkey else "DEFAULT_CONFIG"
        if bkey and source != "DEFAULT_CONFIG":
            return self.get(bkey), source
        return defn.default, "DEFAULT_CONFIG"

    def log_config(self, overrides: dict[str, Any]) -> LogConfig:
        """A topic's effective LogConfig: broker defaults then the topic's overrides."""
        props = {k: self.topic_default(k)[0] for k in TOPIC_CONFIGS}
        props.update(overrides)
        return LogConfig.from_props(props)


def from_environment() -> dict[str, str]:
    return dict(os.environ)
