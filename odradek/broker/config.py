"""Broker configuration with Kafka's keys, from server.properties, overrides and environment.

Precedence (lowest first): defaults, the properties file, `KAFKA_*` environment variables
(`KAFKA_LOG_DIRS` -> `log.dirs`; `__` -> `_`, `___` -> `-`, as Kafka's Docker images do), then
`--override key=value`. Unknown keys and bad values are errors. Keys Kafka has but odradek does
not need (thread counts, buffer sizes) are accepted and have no effect. docs/config.md lists them.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Any

from odradek.log.config import TOPIC_CONFIGS, ConfigError, LogConfig, parse_value


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
        _k("log.dir", "string", "./odradek-data", "data directory when log.dirs is unset"),
        _k("node.id", "int", 0, "this broker's id"),
        _k("broker.id", "int", None, "synonym of node.id"),
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
            "socket.send.buffer.bytes", "int", 102400, "accepted for compatibility", effective=False
        ),
        _k(
            "socket.receive.buffer.bytes",
            "int",
            102400,
            "accepted for compatibility",
            effective=False,
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
            "odradek.controller.mutation.rate",
            "double",
            None,
            "controller_mutation_rate quota (partitions created or deleted per second, KIP-599) "
            "of every client-id until AlterClientQuotas sets one (unset: unlimited, as Kafka)",
            minimum=0,
        ),
        _k("metrics.listen", "string", None, "HOST:PORT for Prometheus metrics (unset: off)"),
        _k("odradek.admin.listen", "string", None, "HOST:PORT of the fault-injection endpoint"),
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

_LISTENER = re.compile(r"^(?:([A-Za-z_][A-Za-z0-9_]*)://)?(\[[^\]]*\]|[^:]*):(\d+)$")


@dataclass(slots=True, frozen=True)
class Listener:
    name: str
    host: str
    port: int


def parse_listeners(text: str) -> list[Listener]:
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        m = _LISTENER.match(part)
        if not m or not 0 <= int(m.group(3)) <= 65535:
            raise ConfigError(f"Invalid listener {part!r}: expected NAME://HOST:PORT")
        out.append(
            Listener((m.group(1) or "PLAINTEXT").upper(), m.group(2).strip("[]"), int(m.group(3)))
        )
    if not out:
        raise ConfigError("listeners is empty")
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


def env_properties(environ: dict[str, str]) -> dict[str, str]:
    out = {}
    for name, value in environ.items():
        if not name.startswith("KAFKA_") or name in ("KAFKA_HEAP_OPTS", "KAFKA_OPTS"):
            continue
        key = name[6:].lower().replace("___", "-").replace("__", "\0").replace("_", ".")
        key = key.replace("\0", "_")
        if key in BROKER_KEYS:
            out[key] = value
    return out


# With zookeeper.connect (brokers in separate processes), Kafka's own defaults for the internal
# topics apply: their partitions wait for three brokers, as in Kafka.
ZOOKEEPER_DEFAULTS = {
    "offsets.topic.replication.factor": 3,
    "transaction.state.log.replication.factor": 3,
}


class BrokerConfig:
    """Parsed, validated broker settings; `get(key)` returns the typed value."""

    def __init__(self, props: dict[str, Any] | None = None) -> None:
        self.values: dict[str, Any] = {}
        self.explicit: dict[str, Any] = {}
        for key, raw in (props or {}).items():
            defn = BROKER_KEYS.get(key)
            if defn is None:
                raise ConfigError(f"Unknown configuration {key!r}")
            self.explicit[key] = raw
            self.values[key] = None if raw is None else parse_value(defn, raw)  # type: ignore[arg-type]
        self.listeners = parse_listeners(self.get("listeners"))
        adv = self.get("advertised.listeners")
        self.advertised = parse_listeners(adv) if adv else self.listeners
        if self.get("broker.id") is not None and "node.id" not in self.explicit:
            self.values["node.id"] = self.get("broker.id")
        if self.get("zookeeper.connect"):  # a real cluster: Kafka's replicated internal topics
            for key in ZOOKEEPER_DEFAULTS:
                self.values.setdefault(key, ZOOKEEPER_DEFAULTS[key])

    @classmethod
    def load(
        cls, path: str | None, overrides: dict[str, str], environ: dict[str, str]
    ) -> BrokerConfig:
        props: dict[str, Any] = {}
        if path:
            props.update(read_properties(path))
        props.update(env_properties(environ))
        props.update(overrides)
        return cls(props)

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
            explicit = any(
                k in self.explicit
                for k in ("log.retention.ms", "log.retention.minutes", "log.retention.hours")
            )
            return self.retention_ms(), "STATIC_BROKER_CONFIG" if explicit else "DEFAULT_CONFIG"
        if topic_key == "segment.ms":
            explicit = any(k in self.explicit for k in ("log.roll.ms", "log.roll.hours"))
            return self.roll_ms(), "STATIC_BROKER_CONFIG" if explicit else "DEFAULT_CONFIG"
        defn = TOPIC_CONFIGS[topic_key]
        bkey = defn.broker_key
        if bkey and bkey in self.explicit:
            return self.get(bkey), "STATIC_BROKER_CONFIG"
        return defn.default, "DEFAULT_CONFIG"

    def log_config(self, overrides: dict[str, Any]) -> LogConfig:
        """A topic's effective LogConfig: broker defaults then the topic's overrides."""
        props = {k: self.topic_default(k)[0] for k in TOPIC_CONFIGS}
        props.update(overrides)
        return LogConfig.from_props(props)


def from_environment() -> dict[str, str]:
    return dict(os.environ)
