"""Described configs: every topic or broker key with its effective value, source and synonyms,
as Kafka's ConfigHelper / DescribeConfigsResponse entries (KIP-226 synonyms, KIP-569 types and
docs). DescribeConfigs and CreateTopics v5+ report these.
"""

from __future__ import annotations

from odradek.broker.config import BROKER_KEYS, BrokerConfig
from odradek.log.config import TOPIC_CONFIGS, ConfigError, parse_value, render_value
from odradek.wire.config_entry import (
    DEFAULT_CONFIG,
    DYNAMIC_TOPIC_CONFIG,
    STATIC_BROKER_CONFIG,
    ConfigEntry,
)

SOURCE_IDS = {"STATIC_BROKER_CONFIG": STATIC_BROKER_CONFIG, "DEFAULT_CONFIG": DEFAULT_CONFIG}

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


def topic_entries(config: BrokerConfig, overrides: dict[str, str]) -> list[ConfigEntry]:
    """Every topic config with its effective value and source, as Kafka's ConfigHelper."""
    out = []
    for key, defn in TOPIC_CONFIGS.items():
        synonyms: list[tuple[str, str | None, int]] = []
        if key in overrides:
            synonyms.append((key, _normalise(key, overrides[key]), DYNAMIC_TOPIC_CONFIG))
        for bkey in broker_synonyms(key):
            if bkey in config.explicit and config.get(bkey) is not None:
                synonyms.append((bkey, render_optional(config.get(bkey)), STATIC_BROKER_CONFIG))
        for bkey in broker_synonyms(key):
            if BROKER_KEYS[bkey].default is not None:
                synonyms.append((bkey, render_optional(BROKER_KEYS[bkey].default), DEFAULT_CONFIG))
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
    """Every broker key; all read-only, since odradek has no dynamic broker configs."""
    out = []
    for key, defn in BROKER_KEYS.items():
        synonyms: list[tuple[str, str | None, int]] = []
        if key in config.explicit and config.explicit[key] is not None:
            synonyms.append((key, render_optional(config.get(key)), STATIC_BROKER_CONFIG))
        if defn.default is not None:
            synonyms.append((key, render_optional(defn.default), DEFAULT_CONFIG))
        source = synonyms[0][2] if synonyms else DEFAULT_CONFIG
        out.append(
            ConfigEntry(
                key,
                render_optional(config.get(key)),
                source,
                CONFIG_TYPES.get(defn.type, 0),
                defn.doc,
                True,
                synonyms,
            )
        )
    return out
