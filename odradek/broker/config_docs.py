"""Renders docs/config.md, the one table of broker and topic config keys with their defaults.

`python -m odradek.broker.config_docs > docs/config.md`; a test keeps the file in step.
"""

from __future__ import annotations

from odradek.broker.config import BROKER_KEYS
from odradek.coordinator import group_configs
from odradek.log.config import TOPIC_CONFIGS, render_value


def _default(value: object) -> str:
    return "(unset)" if value is None else f"`{render_value(value)}`"


def render() -> str:
    lines = [
        "# Configuration",
        "",
        "odradek reads Kafka's config keys from a `server.properties` file, `KAFKA_*` environment",
        "variables (`KAFKA_LOG_DIRS` is `log.dirs`; `__` is `_` and `___` is `-`, as in Kafka's",
        "Docker images) and `--override key=value`, in that order of precedence (last wins).",
        "The variables of Kafka's start scripts (`KAFKA_HEAP_OPTS`, `KAFKA_OPTS`,",
        "`KAFKA_JVM_PERFORMANCE_OPTS`, `KAFKA_LOG4J_OPTS`, `KAFKA_JMX_OPTS`, `KAFKA_DEBUG`, ...)",
        "are not configs and are ignored.",
        "",
        "- The keys below are odradek's; a bad value stops the broker with a one-line error.",
        "- Any other broker key Kafka has (its KafkaConfig, listed in",
        "  `odradek/broker/kafka_keys.py`) has no effect here: the broker starts and warns once",
        "  per key.",
        "- A key that is not Kafka's at all is warned about once and ignored, as Kafka logs",
        '  "was supplied but isn\'t a known config": the line names where it came from and the',
        "  closest real key (`num.partitons`: did you mean `num.partitions`?) and the broker goes",
        "  on. With `odradek serve --strict-config` (or `odradek.strict.config=true`) such a key",
        "  is a typo that stops the broker with that one line instead.",
        "- The variables Kubernetes sets in every pod for a Service named `kafka`",
        "  (`KAFKA_SERVICE_HOST`, `KAFKA_SERVICE_PORT`, `KAFKA_PORT`, `KAFKA_PORT_9092_TCP_ADDR`,",
        "  ...) are not configs and are ignored, strict or not.",
        "",
        "Kafka 4's KRaft `config/server.properties` starts a broker as it is. A combined",
        "`process.roles=broker,controller` node is odradek's embedded single node; the listeners",
        "named in `controller.listener.names` are not served (one line says so). KRaft with other",
        "nodes (`process.roles=broker` alone, `controller.quorum.voters` naming other nodes,",
        "several `controller.quorum.bootstrap.servers`) is refused with one line: a cluster of",
        "odradek brokers uses `zookeeper.connect` (or `odradek cluster --brokers N`, in one",
        "process).",
        "",
        "Dynamic broker configs (KIP-226): AlterConfigs and IncrementalAlterConfigs on a BROKER",
        "resource set the keys Kafka's DynamicBrokerConfig lists as dynamic, for one broker (its",
        "id: `odradek configs alter --broker 0 --add-config log.retention.ms=3600000`) or as the",
        "cluster-wide default (the empty name). They are kept in the metadata store, survive a",
        "restart and are described with their source (DYNAMIC_BROKER_CONFIG over",
        "DYNAMIC_DEFAULT_BROKER_CONFIG over the file's STATIC_BROKER_CONFIG). The log defaults",
        "(`log.retention.ms`, `log.segment.bytes`, `log.cleanup.policy`, ...) apply at once to",
        "every topic without its own override; listener TLS/SASL settings are read at the next",
        "start; thread pools and connection limits are kept and described only. Any other key is",
        'refused as Kafka refuses it (INVALID_REQUEST "Cannot update these configs',
        'dynamically"). As on a Kafka 4.1+ cluster, `min.insync.replicas` is a cluster-wide',
        "dynamic config written from the static value when the cluster first starts (not on a",
        "ZooKeeper cluster): change it there, not in server.properties (docs/notes.md).",
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
    lines += [
        "",
        "## Group keys",
        "",
        "Set per group (KIP-848 consumer groups, KIP-932 share groups) with",
        "IncrementalAlterConfigs on resource type GROUP (`odradek configs alter --group G",
        "--add-config k=v`), within Kafka's bounds (`group.consumer.min.session.timeout.ms`,",
        "`group.share.max.record.lock.duration.ms`, ...); unset, the broker key in the second",
        "column applies.",
        "",
        "| key | broker key | default | effect |",
        "| --- | --- | --- | --- |",
    ]
    for key in sorted(group_configs.KEYS):
        g = group_configs.KEYS[key]
        broker_key = f"`{g.synonym}`" if g.synonym else "-"
        lines.append(f"| `{key}` | {broker_key} | {_default(g.default)} | {g.doc} |")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(render(), end="")
