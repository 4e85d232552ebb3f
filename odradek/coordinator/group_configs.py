"""Per-group configs (ConfigResource type GROUP, 32; KIP-848 and KIP-932), as Kafka's GroupConfig
and GroupConfigManager.

A group's overrides live in the metadata store (`group_configs`: the embedded store's JSON, or
ZooKeeper's /config/groups/<group>), are described and altered with DescribeConfigs /
(Incremental)AlterConfigs on resource type 32 and listed by ListConfigResources. The coordinators
read them on every use, so a change applies at once: the KIP-848 consumer group coordinator its
session timeout and heartbeat interval, the share coordinator its session timeout, heartbeat
interval, acquisition lock duration and, when a share-partition is first used, where it starts
(`share.auto.offset.reset`: latest, earliest or by_duration:<ISO 8601 duration>).

The keys and their bounds, as Kafka 4.1 validates them (INVALID_CONFIG otherwise); a key not set
for the group takes the broker's value (its `group.*` synonym):

    key                             default (broker key)                  bounds (broker keys)
    consumer.session.timeout.ms     group.consumer.session.timeout.ms     group.consumer.min/max.
    consumer.heartbeat.interval.ms  group.consumer.heartbeat.interval.ms  (the same, min/max.)
    share.session.timeout.ms        group.share.session.timeout.ms        group.share.min/max.
    share.heartbeat.interval.ms     group.share.heartbeat.interval.ms     (the same, min/max.)
    share.record.lock.duration.ms   group.share.record.lock.duration.ms   (the same, min/max.)
    share.auto.offset.reset         latest                                latest, earliest,
                                                                          by_duration:<ISO>

Kafka 4.2's share keys too: share.delivery.count.limit and share.partition.max.record.locks
(bounded by their group.share.min/max.* broker keys), share.isolation.level (read_committed or
read_uncommitted) and share.renew.acknowledge.enable (KIP-1222).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from odradek.wire.config_entry import DEFAULT_CONFIG, ConfigEntry
from odradek.wire.errors import ErrorCode

GROUP = 32
GROUP_CONFIG = 8  # DescribeConfigsResponse.ConfigSource
BOOLEAN, STRING, INT = 1, 2, 3  # DescribeConfigsResponse.ConfigType
# STRING keys other than share.auto.offset.reset: their allowed values
CHOICES = {"share.isolation.level": ("read_committed", "read_uncommitted")}
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3


@dataclass(frozen=True, slots=True)
class GroupKey:
    name: str
    synonym: str | None  # the broker key giving the default
    default: Any
    kind: int
    doc: str
    bounds: tuple[tuple[str, int], tuple[str, int]] | None = None  # (min key, default), (max ...)


KEYS: dict[str, GroupKey] = {
    k.name: k
    for k in (
        GroupKey(
            "consumer.session.timeout.ms",
            "group.consumer.session.timeout.ms",
            45000,
            INT,
            "session timeout of the group's consumer-protocol (KIP-848) members",
            (
                ("group.consumer.min.session.timeout.ms", 45000),
                ("group.consumer.max.session.timeout.ms", 60000),
            ),
        ),
        GroupKey(
            "consumer.heartbeat.interval.ms",
            "group.consumer.heartbeat.interval.ms",
            5000,
            INT,
            "heartbeat interval given to the group's consumer-protocol members",
            (
                ("group.consumer.min.heartbeat.interval.ms", 5000),
                ("group.consumer.max.heartbeat.interval.ms", 15000),
            ),
        ),
        GroupKey(
            "share.session.timeout.ms",
            "group.share.session.timeout.ms",
            45000,
            INT,
            "session timeout of the share group's members",
            (
                ("group.share.min.session.timeout.ms", 45000),
                ("group.share.max.session.timeout.ms", 60000),
            ),
        ),
        GroupKey(
            "share.heartbeat.interval.ms",
            "group.share.heartbeat.interval.ms",
            5000,
            INT,
            "heartbeat interval given to the share group's members",
            (
                ("group.share.min.heartbeat.interval.ms", 5000),
                ("group.share.max.heartbeat.interval.ms", 15000),
            ),
        ),
        GroupKey(
            "share.record.lock.duration.ms",
            "group.share.record.lock.duration.ms",
            30000,
            INT,
            "how long a member of the share group holds the records it acquired",
            (
                ("group.share.min.record.lock.duration.ms", 15000),
                ("group.share.max.record.lock.duration.ms", 60000),
            ),
        ),
        GroupKey(
            "share.auto.offset.reset",
            None,
            "latest",
            STRING,
            "where a new share-partition of the group starts: latest, earliest or "
            "by_duration:PnDTnHnMn.nS (the first record at or after now less that duration)",
        ),
        GroupKey(
            "share.delivery.count.limit",
            "group.share.delivery.count.limit",
            5,
            INT,
            "deliveries of a record before it is archived",
            (
                ("group.share.min.delivery.count.limit", 2),
                ("group.share.max.delivery.count.limit", 10),
            ),
        ),
        GroupKey(
            "share.partition.max.record.locks",
            "group.share.partition.max.record.locks",
            2000,
            INT,
            "records of a share-partition in flight at once",
            (
                ("group.share.min.partition.max.record.locks", 100),
                ("group.share.max.partition.max.record.locks", 10000),
            ),
        ),
        GroupKey(
            "share.isolation.level",
            None,
            "read_uncommitted",
            STRING,
            "read_committed: the share group delivers committed transactional records only",
        ),
        GroupKey(
            "share.renew.acknowledge.enable",
            None,
            "true",
            BOOLEAN,
            "whether members may renew their acquisition locks (KIP-1222)",
        ),
    )
}


class _Settings(Protocol):
    def get(self, key: str) -> object: ...  # KeyError: not one of odradek's keys
    @property
    def ignored(self) -> Mapping[str, object]: ...  # Kafka's keys odradek does not use


class _Store(Protocol):
    @property
    def group_configs(self) -> Mapping[str, Mapping[str, str]]: ...
    def alter_group_configs(self, name: str, configs: dict[str, str]) -> None: ...


class ConfigHost(Protocol):
    """What group configs need of the broker (`odradek.broker.server.Broker` is one): its
    settings, for the `group.*` defaults and bounds, and the metadata store holding the
    overrides."""

    @property
    def config(self) -> _Settings: ...
    @property
    def store(self) -> _Store: ...


class GroupConfigError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _setting(broker: ConfigHost, key: str, default: Any) -> Any:
    cfg = broker.config
    try:
        raw: Any = cfg.get(key)
    except KeyError:  # not one of odradek's keys: as given, or Kafka's default
        raw = cfg.ignored.get(key)
    return default if raw is None else raw


def overrides(broker: ConfigHost, group_id: str) -> Mapping[str, str]:
    return broker.store.group_configs.get(group_id, {})


def value(broker: ConfigHost, group_id: str, name: str) -> Any:
    """The group's effective value of a key: its override, else the broker's setting."""
    key = KEYS[name]
    raw = overrides(broker, group_id).get(name)
    if raw is None:
        raw = _setting(broker, key.synonym, key.default) if key.synonym else key.default
    if key.kind == INT:
        return int(raw)
    return str(raw).strip().lower() if key.kind == BOOLEAN or name in CHOICES else str(raw)


# -- share.auto.offset.reset --------------------------------------------------------------------

_DURATION = re.compile(
    r"P(?:(\d+)D)?(?:T(?:(\d+)H)?(?:(\d+)M)?(?:(\d+)(?:[.,](\d{0,9}))?S)?)?", re.IGNORECASE
)


def reset_strategy(text: str) -> tuple[str, int]:
    """("earliest" | "latest", 0) or ("by_duration", milliseconds); ValueError otherwise."""
    low = text.strip().lower()
    if low in ("earliest", "latest"):
        return low, 0
    if low.startswith("by_duration:"):
        spec = text.strip()[len("by_duration:") :]
        m = _DURATION.fullmatch(spec)
        if m and any(m.group(i) for i in (1, 2, 3, 4)) and not spec.upper().endswith("T"):
            days, hours, minutes, secs, frac = m.groups()
            ms = (
                (int(days or 0) * 86400 + int(hours or 0) * 3600 + int(minutes or 0) * 60)
                + int(secs or 0)
            ) * 1000 + int(((frac or "") + "000")[:3])
            return "by_duration", ms
    raise ValueError(text)


# -- validation, describing, altering -----------------------------------------------------------


def _check_name(name: str | None) -> str:
    if not name:
        raise GroupConfigError(
            ErrorCode.INVALID_REQUEST, "Default group resources are not allowed."
        )
    return name


def validate(broker: ConfigHost, configs: Mapping[str, str]) -> None:
    """Kafka's GroupConfig.validate: known names, typed values, bounds."""
    for name, raw in configs.items():
        key = KEYS.get(name)
        if key is None:
            raise GroupConfigError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}")
        if key.kind == BOOLEAN or name in CHOICES:
            allowed = CHOICES.get(name, ("true", "false"))
            if raw.strip().lower() not in allowed:
                raise GroupConfigError(
                    ErrorCode.INVALID_CONFIG,
                    f"Invalid value {raw} for configuration {name}: "
                    + (
                        "Expected value to be either true or false"
                        if key.kind == BOOLEAN
                        else f"String must be one of: {', '.join(allowed)}"
                    ),
                )
            continue
        if key.kind == STRING:
            try:
                reset_strategy(raw)
            except ValueError:
                raise GroupConfigError(
                    ErrorCode.INVALID_CONFIG,
                    f"Invalid value {raw} for configuration {name}: the strategy must be "
                    "earliest, latest or by_duration:<ISO 8601 duration>",
                ) from None
            continue
        try:
            number = int(raw.strip())
        except ValueError:
            raise GroupConfigError(
                ErrorCode.INVALID_CONFIG,
                f"Invalid value {raw} for configuration {name}: Not a number of type INT",
            ) from None
        if not -(2**31) <= number < 2**31:
            raise GroupConfigError(
                ErrorCode.INVALID_CONFIG,
                f"Invalid value {raw} for configuration {name}: Not a number of type INT",
            )
        if number < 1:
            raise GroupConfigError(
                ErrorCode.INVALID_CONFIG,
                f"Invalid value {number} for configuration {name}: Value must be at least 1",
            )
        if key.bounds is not None:
            (lo_key, lo_default), (hi_key, hi_default) = key.bounds
            if number < int(_setting(broker, lo_key, lo_default)):
                raise GroupConfigError(
                    ErrorCode.INVALID_CONFIG,
                    f"{name} must be greater than or equal to {lo_key}",
                )
            if number > int(_setting(broker, hi_key, hi_default)):
                raise GroupConfigError(
                    ErrorCode.INVALID_CONFIG, f"{name} must be less than or equal to {hi_key}"
                )


def entries(broker: ConfigHost, name: str) -> list[ConfigEntry]:
    """Every group key with its effective value: GROUP_CONFIG when the group sets it, else
    DEFAULT_CONFIG with the broker's value (Kafka's ConfigHelper.createGroupConfigEntry)."""
    set_here = overrides(broker, _check_name(name))
    out = []
    for key in KEYS.values():
        shown = str(value(broker, name, key.name))
        source = GROUP_CONFIG if key.name in set_here else DEFAULT_CONFIG
        # the group's own value first, then the broker key it falls back to (Kafka 4.4)
        broker_value = str(
            _setting(broker, key.synonym, key.default) if key.synonym else key.default
        )
        synonyms: list[tuple[str, str | None, int]] = [
            (key.synonym or key.name, broker_value, DEFAULT_CONFIG)
        ]
        if key.name in set_here:
            synonyms.insert(0, (key.name, shown, GROUP_CONFIG))
        out.append(ConfigEntry(key.name, shown, source, key.kind, key.doc, False, synonyms))
    return out


def alter(
    broker: ConfigHost, name: str, configs: list[Any], incremental: bool, validate_only: bool
) -> None:
    """AlterConfigs (replace the group's overrides) or IncrementalAlterConfigs (SET, DELETE;
    APPEND / SUBTRACT fail: no group key is a list)."""
    _check_name(name)
    nulls = [
        c.name
        for c in configs
        if c.value is None and not (incremental and c.config_operation == DELETE)
    ]
    if nulls:
        raise GroupConfigError(
            ErrorCode.INVALID_CONFIG,
            "Null value not supported for group configs: " + ",".join(nulls),
        )
    if incremental:
        new = dict(overrides(broker, name))
        for c in configs:
            if c.config_operation == SET:
                new[c.name] = c.value
            elif c.config_operation == DELETE:
                new.pop(c.name, None)
            else:
                if c.name not in KEYS:
                    raise GroupConfigError(
                        ErrorCode.INVALID_CONFIG, f"Unknown group config name: {c.name}"
                    )
                verb = "APPEND" if c.config_operation == APPEND else "SUBTRACT"
                raise GroupConfigError(
                    ErrorCode.INVALID_CONFIG,
                    f"Can't {verb} to key {c.name} because its type is not LIST.",
                )
    else:
        new = {c.name: c.value for c in configs}
    validate(broker, new)
    if not validate_only:
        broker.store.alter_group_configs(name, new)


def names(broker: ConfigHost) -> list[str]:
    """The groups with configs (ListConfigResources)."""
    return sorted(broker.store.group_configs)
