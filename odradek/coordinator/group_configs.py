"""Per-group configs (ConfigResource type GROUP, 32; KIP-848 and KIP-932), as Kafka's GroupConfig
and GroupConfigManager.

A group's overrides live in the metadata store (`group_configs`: the embedded store's JSON, or
ZooKeeper's /config/groups/<group>), are described and altered with DescribeConfigs /
(Incremental)AlterConfigs on resource type 32 and listed by ListConfigResources. The coordinators
read them on every use, so a change applies at once: the KIP-848 consumer group coordinator its
session timeout and heartbeat interval, the share coordinator its session timeout, heartbeat
interval, acquisition lock duration and, when a share-partition is first used, where it starts
(`share.auto.offset.reset`: latest, earliest or by_duration:<ISO 8601 duration>).

The keys and their bounds, as Kafka 4.4 validates them (INVALID_CONFIG, with its messages: "X
must be in the range LO to HI inclusive.", and a session timeout above the heartbeat interval);
a key not set for the group takes the broker's value (its `group.*` synonym):

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
read_uncommitted) and share.renew.acknowledge.enable (KIP-1222). The KIP-1071 streams keys
(the streams group coordinator reads the first four):

    streams.session.timeout.ms      group.streams.session.timeout.ms      group.streams.min/max.
    streams.heartbeat.interval.ms   group.streams.heartbeat.interval.ms   (the same, min/max.)
    streams.num.standby.replicas    group.streams.num.standby.replicas    0 .. group.streams.max.
                                                                          standby.replicas
    streams.num.warmup.replicas     group.streams.num.warmup.replicas     0 .. group.streams.max.
                                                                          warmup.replicas
    streams.acceptable.recovery.lag, streams.task.offset.interval.ms, streams.initial.rebalance.
    delay.ms, streams.assignment.interval.ms: accepted, described and bounded as Kafka 4.4 does.
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
BOOLEAN, STRING, INT, LONG, LIST = 1, 2, 3, 5, 7  # DescribeConfigsResponse.ConfigType
STREAMS_ASSIGNORS = ("sticky",)  # group.streams.assignors: the task assignors odradek has
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
    at_least: int = 1  # the ConfigDef range's floor
    ceiling: tuple[str, int] | None = None  # only a max broker key (validateIntMax)
    floor: tuple[str, int] | None = None  # only a min broker key (validateIntMin)
    internal: bool = False  # accepted and validated, never described (GroupConfig.isInternal)


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
        GroupKey(
            "streams.session.timeout.ms",
            "group.streams.session.timeout.ms",
            45000,
            INT,
            "session timeout of the streams group's members (KIP-1071)",
            (
                ("group.streams.min.session.timeout.ms", 45000),
                ("group.streams.max.session.timeout.ms", 60000),
            ),
        ),
        GroupKey(
            "streams.heartbeat.interval.ms",
            "group.streams.heartbeat.interval.ms",
            5000,
            INT,
            "heartbeat interval given to the streams group's members",
            (
                ("group.streams.min.heartbeat.interval.ms", 5000),
                ("group.streams.max.heartbeat.interval.ms", 15000),
            ),
        ),
        GroupKey(
            "streams.num.standby.replicas",
            "group.streams.num.standby.replicas",
            0,
            INT,
            "standby replicas of each task the assignor plans",
            at_least=0,
            ceiling=("group.streams.max.standby.replicas", 2),
        ),
        GroupKey(
            "streams.num.warmup.replicas",
            "group.streams.num.warmup.replicas",
            2,
            INT,
            "warm-up tasks the assignor plans at most, for tasks moving to a member that is "
            "not caught up",
            at_least=0,
            ceiling=("group.streams.max.warmup.replicas", 20),
            internal=True,
        ),
        GroupKey(
            "streams.acceptable.recovery.lag",
            "group.streams.acceptable.recovery.lag",
            10000,
            LONG,
            "the largest lag (offsets to catch up) at which a member counts as caught up for "
            "an active task",
            at_least=0,
            internal=True,
        ),
        GroupKey(
            "streams.task.offset.interval.ms",
            "group.streams.task.offset.interval.ms",
            60000,
            INT,
            "how often members report their tasks' changelog offsets",
            floor=("group.streams.min.task.offset.interval.ms", 15000),
            internal=True,
        ),
        GroupKey(
            "streams.initial.rebalance.delay.ms",
            "group.streams.initial.rebalance.delay.ms",
            3000,
            INT,
            "wait for more members of a new streams group before its first assignment",
            at_least=0,
        ),
        GroupKey(
            "streams.assignment.interval.ms",
            "group.streams.assignment.interval.ms",
            1000,
            INT,
            "interval between assignment updates of the streams group",
            (
                ("group.streams.min.assignment.interval.ms", 0),
                ("group.streams.max.assignment.interval.ms", 15000),
            ),
            at_least=0,
        ),
        GroupKey(
            "streams.assignor.name",
            None,
            "sticky",
            STRING,
            "the task assignor of the streams group, one of group.streams.assignors",
        ),
        GroupKey(
            "streams.rack.aware.assignment.tags",
            None,
            "",
            LIST,
            "client tag keys the assignor spreads standby replicas over (not used by odradek's "
            "assignor)",
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
    if key.kind in (INT, LONG):
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
    """Kafka's GroupConfig.validate: known names, typed values (the ConfigDef's floor), then
    the broker's bounds and the session timeout above the heartbeat interval (Kafka 4.4's
    messages)."""
    numbers: dict[str, int] = {}
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
        if key.kind == LIST:
            tags = re.split(r"\s*,\s*", raw.strip()) if raw.strip() else []
            if len(set(tags)) != len(tags):
                raise GroupConfigError(
                    ErrorCode.INVALID_CONFIG, f"{name} must not contain duplicate tag keys."
                )
            continue
        if name == "streams.assignor.name":
            if raw not in STREAMS_ASSIGNORS:
                raise GroupConfigError(
                    ErrorCode.INVALID_CONFIG,
                    f"{name} '{raw}' is not a registered task assignor. Registered assignors "
                    f"are: [{', '.join(STREAMS_ASSIGNORS)}].",
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
        numbers[name] = _number(key, raw)
    for name, number in numbers.items():
        _check_bounds(broker, KEYS[name], number)
    for kind in ("consumer", "share", "streams"):
        session, heartbeat = f"{kind}.session.timeout.ms", f"{kind}.heartbeat.interval.ms"
        if session in numbers or heartbeat in numbers:
            s = numbers.get(session, int(value_of_broker(broker, session)))
            h = numbers.get(heartbeat, int(value_of_broker(broker, heartbeat)))
            if s <= h:
                raise GroupConfigError(
                    ErrorCode.INVALID_CONFIG, f"{session} must be greater than {heartbeat}"
                )


def _number(key: GroupKey, raw: str) -> int:
    """The ConfigDef's parse of an INT or LONG key, with its atLeast floor."""
    name, kind = key.name, "INT" if key.kind == INT else "LONG"
    try:
        number = int(raw.strip())
    except ValueError:
        raise GroupConfigError(
            ErrorCode.INVALID_CONFIG,
            f"Invalid value {raw} for configuration {name}: Not a number of type {kind}",
        ) from None
    limit = 2**31 if key.kind == INT else 2**63
    if not -limit <= number < limit:
        raise GroupConfigError(
            ErrorCode.INVALID_CONFIG,
            f"Invalid value {raw} for configuration {name}: Not a number of type {kind}",
        )
    if number < key.at_least:
        raise GroupConfigError(
            ErrorCode.INVALID_CONFIG,
            f"Invalid value {number} for configuration {name}: Value must be at least "
            f"{key.at_least}",
        )
    return number


def _check_bounds(broker: ConfigHost, key: GroupKey, number: int) -> None:
    """Kafka 4.4's validateIntRange / validateIntMax / validateIntMin against the broker's
    group.<type>.min/max.* settings."""
    if key.bounds is not None:
        (lo_key, lo_default), (hi_key, hi_default) = key.bounds
        lo = int(_setting(broker, lo_key, lo_default))
        hi = int(_setting(broker, hi_key, hi_default))
        if not lo <= number <= hi:
            raise GroupConfigError(
                ErrorCode.INVALID_CONFIG,
                f"{key.name} must be in the range {lo} to {hi} inclusive.",
            )
    if key.ceiling is not None:
        hi = int(_setting(broker, *key.ceiling))
        if number > hi:
            raise GroupConfigError(
                ErrorCode.INVALID_CONFIG, f"{key.name} must be less than or equal to {hi}"
            )
    if key.floor is not None:
        lo = int(_setting(broker, *key.floor))
        if number < lo:
            raise GroupConfigError(
                ErrorCode.INVALID_CONFIG, f"{key.name} must be greater than or equal to {lo}"
            )


def value_of_broker(broker: ConfigHost, name: str) -> Any:
    """The broker's value for a group key (its `group.*` synonym), ignoring the group."""
    key = KEYS[name]
    return _setting(broker, key.synonym, key.default) if key.synonym else key.default


def entries(broker: ConfigHost, name: str) -> list[ConfigEntry]:
    """Every group key with its effective value: GROUP_CONFIG when the group sets it, else
    DEFAULT_CONFIG with the broker's value (Kafka's ConfigHelper.createGroupConfigEntry)."""
    set_here = overrides(broker, _check_name(name))
    out = []
    for key in KEYS.values():
        if key.internal:
            continue
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
                if KEYS[c.name].kind == LIST:  # streams.rack.aware.assignment.tags
                    now = [t for t in (new.get(c.name) or "").split(",") if t]
                    given = [t.strip() for t in (c.value or "").split(",") if t.strip()]
                    if c.config_operation == APPEND:
                        now += [t for t in given if t not in now]
                    else:
                        now = [t for t in now if t not in given]
                    new[c.name] = ",".join(now)
                    continue
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
