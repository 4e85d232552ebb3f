"""Renders docs/config.md, the one table of broker and topic config keys with their defaults.

`python -m odradek.broker.config_docs > docs/config.md`; a test keeps the file in step.
"""

from __future__ import annotations

from odradek.broker.config import BROKER_KEYS
from odradek.log.config import TOPIC_CONFIGS, render_value


def _default(value: object) -> str:
    return "(unset)" if value is None else f"`{render_value(value)}`"


def render() -> str:
    lines = [
        "# Configuration",
        "",
        "odradek reads Kafka's config keys from a `server.properties` file, `KAFKA_*` environment",
        "variables (`KAFKA_LOG_DIRS` is `log.dirs`) and `--override key=value`, in that order of",
        "precedence (last wins). Unknown keys and bad values stop the broker with a one-line",
        "error.",
        "",
        "## Broker keys",
        "",
        "| key | default | effect |",
        "| --- | --- | --- |",
    ]
    for key in sorted(BROKER_KEYS):
        k = BROKER_KEYS[key]
        doc = k.doc if k.effective else f"{k.doc} (accepted, no effect)"
        lines.append(f"| `{key}` | {_default(k.default)} | {doc} |")
    lines += [
        "",
        "## Topic keys",
        "",
        "Set per topic with CreateTopics, AlterConfigs or IncrementalAlterConfigs; the broker key",
        "in the second column gives the default for every topic.",
        "",
        "| key | broker key | default | effect |",
        "| --- | --- | --- | --- |",
    ]
    for key in sorted(TOPIC_CONFIGS):
        t = TOPIC_CONFIGS[key]
        lines.append(f"| `{key}` | `{t.broker_key}` | {_default(t.default)} | {t.doc} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render(), end="")
