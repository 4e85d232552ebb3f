"""Topic-level log configs (Kafka's TopicConfig / LogConfig), their broker synonyms and defaults.

`TOPIC_CONFIGS` is the single table: DescribeConfigs reports it, CreateTopics and
IncrementalAlterConfigs validate against it, and `LogConfig.from_props` builds the typed view the
log reads.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any

LONG_MAX = 9223372036854775807


class ConfigError(ValueError):
    """An unknown config key or a value of the wrong type or range (INVALID_CONFIG)."""


@dataclass(slots=True, frozen=True)
class ConfigDef:
    name: str
    type: str  # "int" | "long" | "double" | "boolean" | "string" | "list"
    default: Any
    broker_key: str | None
    doc: str
    choices: tuple[str, ...] = ()
    minimum: float | None = None


def _d(
    name: str,
    type_: str,
    default: Any,
    broker_key: str | None,
    doc: str,
    choices: Iterable[str] = (),
    minimum: float | None = None,
) -> ConfigDef:
    return ConfigDef(name, type_, default, broker_key, doc, tuple(choices), minimum)


TOPIC_CONFIGS: dict[str, ConfigDef] = {
    c.name: c
    for c in (
        _d(
            "cleanup.policy",
            "list",
            "delete",
            "log.cleanup.policy",
            "delete and/or compact",
            choices=("delete", "compact"),
        ),
        _d(
            "compression.type",
            "string",
            "producer",
            "compression.type",
            "codec the broker stores batches with; producer keeps the producer's",
            choices=("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd"),
        ),
        _d(
            "delete.retention.ms",
            "long",
            86400000,
            "log.cleaner.delete.retention.ms",
            "how long tombstones survive compaction",
            minimum=0,
        ),
        _d(
            "file.delete.delay.ms",
            "long",
            60000,
            "log.segment.delete.delay.ms",
            "delay before a deleted segment's files are removed",
            minimum=0,
        ),
        _d(
            "flush.messages",
            "long",
            LONG_MAX,
            "log.flush.interval.messages",
            "fsync after this many records, group-committed across partitions: one fsync round "
            "off the event loop serves every batch waiting, whose produce is answered (and whose "
            "recovery point moves) once it is synced (default: leave it to the OS)",
            minimum=1,
        ),
        _d(
            "flush.ms",
            "long",
            LONG_MAX,
            "log.flush.interval.ms",
            "fsync after this many ms, group-committed across partitions as flush.messages "
            "(default: leave it to the OS)",
            minimum=0,
        ),
        _d(
            "index.interval.bytes",
            "int",
            4096,
            "log.index.interval.bytes",
            "bytes between offset index entries",
            minimum=0,
        ),
        _d(
            "max.compaction.lag.ms",
            "long",
            LONG_MAX,
            "log.cleaner.max.compaction.lag.ms",
            "longest a record stays uncompacted",
            minimum=1,
        ),
        _d(
            "max.message.bytes",
            "int",
            1048588,
            "message.max.bytes",
            "largest record batch accepted",
            minimum=0,
        ),
        _d(
            "message.timestamp.type",
            "string",
            "CreateTime",
            "log.message.timestamp.type",
            "CreateTime or LogAppendTime",
            choices=("CreateTime", "LogAppendTime"),
        ),
        _d(
            "message.timestamp.before.max.ms",
            "long",
            LONG_MAX,
            "log.message.timestamp.before.max.ms",
            "how far in the past a CreateTime timestamp may be",
            minimum=0,
        ),
        _d(
            "message.timestamp.after.max.ms",
            "long",
            LONG_MAX,
            "log.message.timestamp.after.max.ms",
            "how far in the future a CreateTime timestamp may be",
            minimum=0,
        ),
        _d(
            "min.cleanable.dirty.ratio",
            "double",
            0.5,
            "log.cleaner.min.cleanable.ratio",
            "dirty share of the log that triggers compaction",
            minimum=0,
        ),
        _d(
            "min.compaction.lag.ms",
            "long",
            0,
            "log.cleaner.min.compaction.lag.ms",
            "shortest a record stays uncompacted",
            minimum=0,
        ),
        _d(
            "min.insync.replicas",
            "int",
            1,
            "min.insync.replicas",
            "ISR size acks=all needs",
            minimum=1,
        ),
        _d("preallocate", "boolean", False, "log.preallocate", "preallocate segment files"),
        # KIP-73 replication quotas: kept and described, but odradek does not throttle
        # replication (kafka-reassign-partitions sets and clears them around a move)
        _d(
            "leader.replication.throttled.replicas",
            "list",
            "",
            None,
            "partition:broker pairs (or *) whose leader side is throttled; stored, not applied",
        ),
        _d(
            "follower.replication.throttled.replicas",
            "list",
            "",
            None,
            "partition:broker pairs (or *) whose follower side is throttled; stored, not applied",
        ),
        _d(
            "retention.bytes",
            "long",
            -1,
            "log.retention.bytes",
            "partition size above which old segments are deleted (-1: no limit)",
        ),
        _d(
            "retention.ms",
            "long",
            604800000,
            "log.retention.ms",
            "age after which segments are deleted (-1: forever)",
        ),
        _d(
            "segment.bytes",
            "int",
            1073741824,
            "log.segment.bytes",
            "segment size that rolls a new segment",
            minimum=14,
        ),
        _d(
            "segment.index.bytes",
            "int",
            10485760,
            "log.index.size.max.bytes",
            "preallocated size of each index file",
            minimum=4,
        ),
        _d(
            "segment.jitter.ms",
            "long",
            0,
            "log.roll.jitter.ms",
            "random jitter subtracted from segment.ms",
            minimum=0,
        ),
        _d(
            "segment.ms",
            "long",
            604800000,
            "log.roll.ms",
            "age that rolls a new segment",
            minimum=1,
        ),
        _d(
            "unclean.leader.election.enable",
            "boolean",
            False,
            "unclean.leader.election.enable",
            "allow an out-of-sync replica to become leader",
        ),
        _d(
            "message.format.version",
            "string",
            "3.0-IV1",
            "log.message.format.version",
            "deprecated in Kafka 3.0: accepted and described, but batches are always written in "
            "format v2 (as Kafka 3.x with an inter-broker protocol of 3.0 or later)",
        ),
        _d(
            "message.downconversion.enable",
            "boolean",
            True,
            "log.message.downconversion.enable",
            "kept for compatibility; no effect",
        ),
    )
}


# Kafka 3.9's inter-broker protocol (MetadataVersion) versions: release -> its IVs. A release
# with none is its own version string ("0.9.0"); the short form names the latest IV.
_IBP_RELEASES: dict[str, int] = {
    **dict.fromkeys(("0.8.0", "0.8.1", "0.8.2", "0.9.0"), 0),
    **{"0.10.0": 2, "0.10.1": 3, "0.10.2": 1, "0.11.0": 3, "1.0": 1, "1.1": 1, "2.0": 2},
    **{"2.1": 3, "2.2": 2, "2.3": 2, "2.4": 2, "2.5": 1, "2.6": 1, "2.7": 3, "2.8": 2},
    **{"3.0": 2, "3.1": 1, "3.2": 1, "3.3": 4, "3.4": 1, "3.5": 3, "3.6": 3, "3.7": 5},
    **{"3.8": 1, "3.9": 1},
}
IBP_VERSIONS: dict[str, str] = {}
for _release, _ivs in _IBP_RELEASES.items():
    IBP_VERSIONS[_release] = f"{_release}-IV{_ivs - 1}" if _ivs else _release
    IBP_VERSIONS.update({f"{_release}-IV{i}": f"{_release}-IV{i}" for i in range(_ivs)})
INTER_BROKER_PROTOCOL_VERSION = "3.9-IV0"


def metadata_version(text: str) -> str:
    """Kafka's MetadataVersion.fromVersionString: "0.10.0", "0.10.0-IV1", "0.10.0.1", "2.8",
    "2.8.1" (anything after the first three parts for 0.x, two otherwise, is ignored), "3.0-IV1".
    Returns the version it names; ValueError when it names none."""
    parts = text.split(".")
    wanted = 3 if text.startswith("0.") else 2
    key = text if wanted >= len(parts) else ".".join(parts[:wanted])
    found = IBP_VERSIONS.get(key)
    if found is None:
        raise ValueError(f"Version {text} is not a valid version")
    return found


def record_format(version: str) -> int:
    """The highest message format (magic) a metadata version writes: 0 before 0.10.0, 1 before
    0.11.0, else 2 (MetadataVersion.highestSupportedRecordVersion)."""
    release = version.split("-")[0]
    numbers = tuple(int(n) for n in release.split("."))
    if numbers < (0, 10, 0):
        return 0
    return 1 if numbers < (0, 11, 0) else 2


def message_format_warning(value: str, topic: str | None = None) -> str | None:
    """Kafka 3.x's warning for a message format below v2, which it ignores (LogConfig's
    MessageFormatVersion.topicWarningMessage, KafkaConfig's broker one); None for v2 formats."""
    if record_format(metadata_version(value)) == 2:
        return None
    if topic is None:
        head = f"Broker configuration log.message.format.version with value {value} is ignored"
    else:
        head = (
            f"Topic configuration message.format.version with value `{value}` is ignored for "
            f"`{topic}`"
        )
    return (
        f"{head} because the inter-broker protocol version `{INTER_BROKER_PROTOCOL_VERSION}` is "
        "greater or equal than 3.0. This configuration is deprecated and it will be removed in "
        "Apache Kafka 4.0."
    )


_VERSION_KEYS = ("message.format.version", "log.message.format.version")


def parse_value(defn: ConfigDef, raw: Any) -> Any:
    """Parse a string (or typed) value for `defn`; raise ConfigError when it does not fit."""
    text = str(raw).strip()
    try:
        if defn.type in ("int", "long"):
            value: Any = int(text)
        elif defn.type == "double":
            value = float(text)
        elif defn.type == "boolean":
            if text.lower() not in ("true", "false"):
                raise ValueError(text)
            value = text.lower() == "true"
        elif defn.type == "list":
            value = ",".join(p.strip() for p in text.split(",") if p.strip())
            if defn.choices and any(p not in defn.choices for p in value.split(",")):
                raise ValueError(text)
        else:
            value = text
            if defn.choices and value not in defn.choices:
                raise ValueError(text)
            if defn.name in _VERSION_KEYS:
                metadata_version(value)  # kept as given, as Kafka stores and describes it
    except ValueError:
        raise ConfigError(f"Invalid value {raw!r} for configuration {defn.name}") from None
    if defn.minimum is not None and isinstance(value, (int, float)) and not isinstance(value, bool):
        if value < defn.minimum:
            raise ConfigError(
                f"Invalid value {raw!r} for configuration {defn.name}: "
                f"must be at least {defn.minimum:g}"
            )
    return value


def render_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def validate_topic_configs(props: dict[str, Any]) -> dict[str, Any]:
    """Parse topic-level overrides; unknown keys are INVALID_CONFIG, as on Kafka."""
    out = {}
    for key, raw in props.items():
        defn = TOPIC_CONFIGS.get(key)
        if defn is None:
            raise ConfigError(f"Unknown topic config name: {key}")
        out[key] = parse_value(defn, raw)
    return out


@dataclass(slots=True, frozen=True)
class LogConfig:
    """The typed, effective configuration of one partition's log."""

    segment_bytes: int = 1073741824
    segment_ms: int = 604800000
    segment_jitter_ms: int = 0
    segment_index_bytes: int = 10485760
    index_interval_bytes: int = 4096
    retention_ms: int = 604800000
    retention_bytes: int = -1
    max_message_bytes: int = 1048588
    cleanup_policy: str = "delete"
    compression_type: str = "producer"
    delete_retention_ms: int = 86400000
    min_cleanable_dirty_ratio: float = 0.5
    min_compaction_lag_ms: int = 0
    max_compaction_lag_ms: int = LONG_MAX
    message_timestamp_type: str = "CreateTime"
    message_timestamp_before_max_ms: int = LONG_MAX
    message_timestamp_after_max_ms: int = LONG_MAX
    flush_messages: int = LONG_MAX
    flush_ms: int = LONG_MAX
    min_insync_replicas: int = 1
    unclean_leader_election_enable: bool = False
    file_delete_delay_ms: int = 60000
    preallocate: bool = False
    message_format_version: str = "3.0-IV1"  # accepted and ignored: format v2 is written
    message_downconversion_enable: bool = True

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy.split(",")

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy.split(",")

    @classmethod
    def from_props(cls, props: dict[str, Any]) -> LogConfig:
        """Effective config from (already parsed) topic-level values keyed by Kafka names."""
        names = {f.name for f in fields(cls)}
        kwargs = {}
        for key, value in props.items():
            attr = key.replace(".", "_")
            if attr in names:
                kwargs[attr] = value
        return cls(**kwargs)
