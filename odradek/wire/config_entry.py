"""One described config, as DescribeConfigsResponse and CreateTopics v5+ carry it: name, value,
ConfigSource, ConfigType (KIP-569), doc, read-only flag and synonyms (KIP-226). The broker builds
them for topic and broker keys (`broker/config_entries.py`), the group coordinator for group
configs (`coordinator/group_configs.py`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

# DescribeConfigsResponse.ConfigSource
DYNAMIC_TOPIC_CONFIG = 1
STATIC_BROKER_CONFIG = 4
DEFAULT_CONFIG = 5


@dataclass(slots=True)
class ConfigEntry:
    """One described config: what DescribeConfigs and CreateTopics v5+ report."""

    name: str
    value: str | None
    source: int
    config_type: int
    doc: str
    read_only: bool = False
    synonyms: list[tuple[str, str | None, int]] = field(default_factory=list)
