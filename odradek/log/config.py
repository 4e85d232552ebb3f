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
            "fsync after this many records (default: leave it to the OS)",
            minimum=1,
        ),
        _d(
            "flush.ms",
            "long",
            LONG_MAX,
            "log.flush.interval.ms",
            "fsync after this many ms (default: leave it to the OS)",
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
            "message.downconversion.enable",
            "boolean",
            True,
            "log.message.downconversion.enable",
            "kept for compatibility; no effect",
        ),
    )
}


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
