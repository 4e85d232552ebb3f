"""Described configs: every topic or broker key with its effective value, source and synonyms,
as Kafka's ConfigHelper / DescribeConfigsResponse entries (KIP-226 synonyms, KIP-569 types and
docs). DescribeConfigs and CreateTopics v5+ report these.
"""

from __future__ import annotations

from odradek.broker.config import BROKER_KEYS, BrokerConfig, BrokerKey, is_kafka_key
from odradek.broker.dynamic_config import base_name, is_dynamic
from odradek.log.config import TOPIC_CONFIGS, ConfigError, parse_value, render_value
from odradek.wire.config_entry import (
    DEFAULT_CONFIG,
    DYNAMIC_BROKER_CONFIG,
    DYNAMIC_DEFAULT_BROKER_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    STATIC_BROKER_CONFIG,
    ConfigEntry,
)

SOURCE_IDS = {
    "DYNAMIC_BROKER_CONFIG": DYNAMIC_BROKER_CONFIG,
    "DYNAMIC_DEFAULT_BROKER_CONFIG": DYNAMIC_DEFAULT_BROKER_CONFIG,
    "STATIC_BROKER_CONFIG": STATIC_BROKER_CONFIG,
    "DEFAULT_CONFIG": DEFAULT_CONFIG,
}

# DescribeConfigsResponse.ConfigType (v3+)
CONFIG_TYPES = {"boolean": 1, "string": 2, "int": 3, "short": 4, "long": 5, "double": 6, "list": 7}

# Broker keys behind a topic config, highest precedence first (Kafka's TopicConfigSynonyms).
_MULTI_SYNONYMS = {
    "retention.ms": ("log.retention.ms", "log.retention.minutes", "log.retention.hours"),
    "segment.ms": ("log.roll.ms", "log.roll.hours"),
    "segment.jitter.ms": ("log.roll.jitter.ms", "log.roll.jitter.hours"),
}


def broker_synonyms(topic_key: str) -> tuple[str, ...]:
    if topic_key in _MULTI_SYNONYMS:
        return tuple(k for k in _MULTI_SYNONYMS[topic_key] if k in BROKER_KEYS)
    bkey = TOPIC_CONFIGS[topic_key].broker_key
    return (bkey,) if bkey and bkey in BROKER_KEYS else ()


def render_optional(value: object) -> str | None:
    return None if value is None else render_value(value)


def _normalise(key: str, raw: str) -> str:
    try:
        return render_value(parse_value(TOPIC_CONFIGS[key], raw))
    except ConfigError:
        return raw


def _level_synonyms(
    config: BrokerConfig, keys: tuple[str, ...], per_broker: bool = True
) -> list[tuple[str, str | None, int]]:
    """The broker-level synonyms of a config, level by level (this broker's dynamic configs,
    the cluster default, static, Kafka's default) and in precedence order within a level, as
    Kafka's ConfigHelper.configSynonyms lists them."""
    out: list[tuple[str, str | None, int]] = []
    for level, source in (
        (config.dynamic_broker if per_broker else {}, DYNAMIC_BROKER_CONFIG),
        (config.dynamic_default, DYNAMIC_DEFAULT_BROKER_CONFIG),
    ):
        out += [(k, _render_raw(k, level[k]), source) for k in keys if k in level]
    if not per_broker:
        return out
    for k in keys:
        value = config.static_values.get(k)
        if k in config.explicit and value is not None:
            out.append((k, render_optional(value), STATIC_BROKER_CONFIG))
        elif config.ignored.get(k) is not None:  # a Kafka key odradek does not use
            out.append((k, str(config.ignored[k]).strip(), STATIC_BROKER_CONFIG))
    for k in keys:
        if k in BROKER_KEYS and BROKER_KEYS[k].default is not None:
            out.append((k, render_optional(BROKER_KEYS[k].default), DEFAULT_CONFIG))
    return out


def _render_raw(key: str, raw: str) -> str:
    """A stored dynamic value as Kafka describes it (normalised when odradek knows the key)."""
    defn = BROKER_KEYS.get(key)
    if defn is None:
        return raw
    try:
        return render_value(parse_value(defn, raw))  # type: ignore[arg-type]
    except ConfigError:
        return raw


def _from_primary(
    key: str, found: list[tuple[str, str | None, int]]
) -> list[tuple[str, str | None, int]]:
    """A topic key's broker synonyms cut as Kafka's ConfigHelper.configSynonyms does: the list
    starts at the first entry named after the primary broker key. For retention.ms, segment.ms
    and segment.jitter.ms the primary key (`*.ms`) has no default in Kafka, so unless it is set
    the list is empty (`log.retention.hours=168` is not listed), which is what Kafka 4.4 answers."""
    names = broker_synonyms(key)
    if not names:
        return found
    if key in _MULTI_SYNONYMS:
        found = [s for s in found if not (s[0] == names[0] and s[2] == DEFAULT_CONFIG)]
    while found and found[0][0] != names[0]:
        found.pop(0)
    return found


def topic_entries(config: BrokerConfig, overrides: dict[str, str]) -> list[ConfigEntry]:
    """Every topic config with its effective value and source, as Kafka's ConfigHelper."""
    out = []
    for key, defn in TOPIC_CONFIGS.items():
        synonyms: list[tuple[str, str | None, int]] = []
        if key in overrides:
            synonyms.append((key, _normalise(key, overrides[key]), DYNAMIC_TOPIC_CONFIG))
        synonyms += _from_primary(key, _level_synonyms(config, broker_synonyms(key)))
        if key in overrides:
            value, source = synonyms[0][1], DYNAMIC_TOPIC_CONFIG
        else:
            default, source_name = config.topic_default(key)
            value, source = render_optional(default), SOURCE_IDS[source_name]
        out.append(
            ConfigEntry(
                key, value, source, CONFIG_TYPES.get(defn.type, 0), defn.doc, False, synonyms
            )
        )
    return out


def broker_entries(config: BrokerConfig) -> list[ConfigEntry]:
    """Every broker key with its effective value and source, then the keys set statically or
    dynamically that odradek does not read (listener-prefixed, Kafka keys without effect here,
    custom keys), as Kafka's ConfigHelper describes a broker: read-only unless dynamic
    (DynamicBrokerConfig), passwords sensitive (no value)."""

    out = []
    for key, defn in BROKER_KEYS.items():
        synonyms = _broker_key_synonyms(config, key)
        sensitive = defn.type == "password"
        out.append(
            ConfigEntry(
                key,
                None if sensitive else render_optional(config.get(key)),
                synonyms[0][2] if synonyms else DEFAULT_CONFIG,
                CONFIG_TYPES.get(defn.type, 0),
                defn.doc,
                not is_dynamic(key),
                [(n, None, src) for n, _v, src in synonyms] if sensitive else synonyms,
                sensitive,
            )
        )
    extra = {**config.ignored, **config.dynamic_default, **config.dynamic_broker}
    for key in sorted(k for k in extra if k not in BROKER_KEYS):
        out.append(_extra_entry(config, key, base_name(key), is_dynamic(key)))
    return out


def _broker_key_synonyms(config: BrokerConfig, key: str) -> list[tuple[str, str | None, int]]:
    """A broker key's synonyms as Kafka's ConfigHelper lists them: the whole group of keys
    setting one config (log.retention.ms / .minutes / .hours), level by level, from the first
    entry of `key` itself on."""
    group = next((g for g in _MULTI_SYNONYMS.values() if key in g), (key,))
    synonyms = _level_synonyms(config, tuple(k for k in group if k in BROKER_KEYS))
    while synonyms and synonyms[0][0] != key:
        synonyms.pop(0)
    return synonyms


def _extra_entry(config: BrokerConfig, key: str, base: str | None, dynamic: bool) -> ConfigEntry:
    """A key set outside BROKER_KEYS: a listener-prefixed key (its synonyms: itself, then the
    base key), a Kafka key odradek does not use, or a custom one (of unknown type, so
    sensitive, as Kafka treats a config whose type it cannot tell)."""
    keys = (key, base) if base else (key,)
    synonyms = _level_synonyms(config, keys)
    defn = BROKER_KEYS.get(base) if base else None
    sensitive = maybe_password(key, defn)
    value = None if sensitive else synonyms[0][1]
    if sensitive:
        synonyms = [(n, None, src) for n, _v, src in synonyms]
    ctype = CONFIG_TYPES.get(defn.type, 0) if defn else 0
    doc = defn.doc if defn else ""
    return ConfigEntry(key, value, synonyms[0][2], ctype, doc, not dynamic, synonyms, sensitive)


_SECRET_SUFFIXES = (
    ".password",
    ".secret",
    "jaas.config",
    "ssl.keystore.key",
    "ssl.keystore.certificate.chain",
    "ssl.truststore.certificates",
)


def maybe_password(key: str, defn: BrokerKey | None) -> bool:
    """Described without its value (is_sensitive): a password config, or one whose type is not
    known here and may be one (Kafka's KafkaConfig.maybeSensitive: a key of unknown type is
    treated as a password)."""
    if defn is not None:
        return defn.type == "password"
    return not is_kafka_key(key) or key.endswith(_SECRET_SUFFIXES)


def cluster_default_entries(config: BrokerConfig) -> list[ConfigEntry]:
    """The cluster-wide dynamic defaults (the BROKER resource with an empty name): only the
    keys set there, with only their DYNAMIC_DEFAULT_BROKER_CONFIG synonyms, as Kafka."""

    out = []
    for key in sorted(config.dynamic_default):
        base = base_name(key)
        defn = BROKER_KEYS.get(base or key)
        sensitive = maybe_password(key, defn)
        synonyms = _level_synonyms(config, (key, base) if base else (key,), per_broker=False)
        if sensitive:
            synonyms = [(n, None, src) for n, _v, src in synonyms]
        out.append(
            ConfigEntry(
                key,
                None if sensitive else _render_raw(key, config.dynamic_default[key]),
                DYNAMIC_DEFAULT_BROKER_CONFIG,
                CONFIG_TYPES.get(defn.type, 0) if defn else 0,
                defn.doc if defn else "",
                not is_dynamic(key),
                synonyms,
                sensitive,
            )
        )
    return out
