"""ClientMetrics config resources (ConfigResource type 16, KIP-714) in DescribeConfigs, AlterConfigs
and IncrementalAlterConfigs, as Kafka's ConfigHelper and ConfigAdminManager treat them.

Describe lists the subscription's keys as stored, source CLIENT_METRICS_CONFIG (7), none read
only; an unknown name has no configs (not an error); an empty name is INVALID_REQUEST "Client
metrics subscription name must not be empty". Alter validates the keys and values as Kafka's
ClientMetricsConfigs (unknown key, interval.ms outside 100..3600000, a bad match pattern) and
stores the resulting config in the metadata store; deleting every key removes the subscription.
IncrementalAlterConfigs APPEND / SUBTRACT work on the list keys `metrics` and `match`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from odradek.broker.config_entries import ConfigEntry
from odradek.broker.telemetry import manager as tm
from odradek.wire import protocol
from odradek.wire.errors import ErrorCode

if TYPE_CHECKING:
    from odradek.broker.server import Broker

CLIENT_METRICS = 16
CLIENT_METRICS_CONFIG = 7  # DescribeConfigsResponse.ConfigSource
SET, DELETE, APPEND, SUBTRACT = 0, 1, 2, 3
LIST_KEYS = frozenset({tm.SUBSCRIPTION_METRICS, tm.CLIENT_MATCH_PATTERN})


class ClientMetricsConfigError(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def _check_name(name: str | None) -> str:
    if not name:
        raise ClientMetricsConfigError(
            ErrorCode.INVALID_REQUEST, "Client metrics subscription name must not be empty"
        )
    return name


def entries(broker: Broker, name: str) -> list[ConfigEntry]:
    configs = broker.store.client_metrics.get(_check_name(name), {})
    return [
        ConfigEntry(k, v, CLIENT_METRICS_CONFIG, 0, "")  # Kafka sets no type nor documentation
        for k, v in sorted(configs.items())
    ]


def _parts(text: str | None) -> list[str]:
    return [p.strip() for p in (text or "").split(",") if p.strip()]


def alter(
    broker: Broker, name: str, configs: list[protocol.Message], incremental: bool, validate: bool
) -> None:
    """Apply AlterConfigs (replace) or IncrementalAlterConfigs ops to a subscription."""
    _check_name(name)
    if incremental:
        new = dict(broker.store.client_metrics.get(name, {}))
        for c in configs:
            op = c.config_operation
            if op == SET:
                new[c.name] = c.value
            elif op == DELETE:
                new.pop(c.name, None)
            else:
                if c.name not in LIST_KEYS:
                    if c.name not in tm.CONFIG_KEYS:
                        raise ClientMetricsConfigError(
                            ErrorCode.INVALID_REQUEST,
                            f"Unknown client metrics configuration: {c.name}",
                        )
                    verb = "APPEND" if op == APPEND else "SUBTRACT"
                    raise ClientMetricsConfigError(
                        ErrorCode.INVALID_CONFIG,
                        f"Can't {verb} to key {c.name} because its type is not LIST.",
                    )
                parts = _parts(new.get(c.name))
                for item in _parts(c.value):
                    if op == APPEND and item not in parts:
                        parts.append(item)
                    elif op == SUBTRACT and item in parts:
                        parts.remove(item)
                new[c.name] = ",".join(parts)
    else:
        new = {c.name: c.value for c in configs}
    try:
        tm.validate(name, new)
    except tm.ConfigError as exc:
        raise ClientMetricsConfigError(exc.code, exc.message) from None
    if not validate:
        broker.store.alter_client_metrics(name, new)
