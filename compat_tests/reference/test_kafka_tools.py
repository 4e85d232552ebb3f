"""Kafka's own command-line tools (Apache Kafka 4.4.0's jars) against odradek and against Kafka.

Every command runs once against each broker, in one JVM (kafka_tools.ToolBatch), with the same
topic and group names; the two outputs are compared after `normalise()` (ports, ids, timestamps,
data-directory paths). Where Kafka and odradek differ on purpose, the test removes exactly that
difference, named in `KNOWN` and in docs/kafka-differences.md ("Kafka's tools").

The verifiable producer and consumer and the perf tests print measurements, so their JSON
events and counts are checked, not their text. kafka-dump-log reads odradek's own files.
"""

from __future__ import annotations

import json
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from compat_tests.harness import BrokerProcess
from compat_tests.reference.conftest import ReferencePool
from compat_tests.reference.kafka_ref import classpath, java_binary, jvm_options
from compat_tests.reference.kafka_tools import TOOLS, ToolBatch, ToolRun, normalise

SIDES = ("odradek", "kafka")
RECORDS = 10


def _scenario(suffix: str, work: Path) -> list[tuple[str, tuple[str, ...], str | None]]:
    """The commands, in order, each run against one broker (bootstrap added by the caller)."""
    t, g = f"tools-{suffix}", f"tools-group-{suffix}"
    delete = work / "delete.json"
    delete.write_text(json.dumps({"partitions": [{"topic": t, "partition": 0, "offset": 2}]}))
    move = work / "move.json"
    move.write_text(json.dumps({"topics": [{"topic": t}], "version": 1}))
    lines = "".join(f"k{i}:v{i}\n" for i in range(RECORDS))
    cm = f"cm-{suffix}"
    return [
        (
            "kafka-topics",
            (
                "--create",
                "--topic",
                t,
                "--partitions",
                "2",
                "--replication-factor",
                "1",
                "--config",
                "retention.ms=12345",
            ),
            None,
        ),
        ("kafka-topics", ("--describe", "--topic", t), None),
        ("kafka-topics", ("--alter", "--topic", t, "--partitions", "3"), None),
        ("kafka-topics", ("--describe", "--topic", t), None),
        ("kafka-topics", ("--create", "--topic", t, "--partitions", "1"), None),
        ("kafka-topics", ("--describe", "--topic", f"missing-{suffix}"), None),
        (
            "kafka-configs",
            (
                "--alter",
                "--entity-type",
                "topics",
                "--entity-name",
                t,
                "--add-config",
                "cleanup.policy=compact",
            ),
            None,
        ),
        ("kafka-configs", ("--describe", "--entity-type", "topics", "--entity-name", t), None),
        ("kafka-configs", ("--describe", "--entity-type", "brokers", "--entity-name", "1"), None),
        # dynamic broker configs (KIP-226): one broker's, the cluster default's, then both removed
        # so the session's other tests see the static configs again
        (
            "kafka-configs",
            (
                "--alter",
                "--entity-type",
                "brokers",
                "--entity-name",
                "1",
                "--add-config",
                "log.cleaner.threads=2",
            ),
            None,
        ),
        (
            "kafka-configs",
            (
                "--alter",
                "--entity-type",
                "brokers",
                "--entity-default",
                "--add-config",
                "log.cleaner.backoff.ms=20000",
            ),
            None,
        ),
        ("kafka-configs", ("--describe", "--entity-type", "brokers", "--entity-name", "1"), None),
        ("kafka-configs", ("--describe", "--entity-type", "brokers", "--entity-default"), None),
        (
            "kafka-configs",
            (
                "--alter",
                "--entity-type",
                "brokers",
                "--entity-name",
                "1",
                "--add-config",
                "no.such.broker.key=1",
            ),
            None,
        ),
        (
            "kafka-configs",
            (
                "--alter",
                "--entity-type",
                "brokers",
                "--entity-name",
                "1",
                "--delete-config",
                "log.cleaner.threads",
            ),
            None,
        ),
        (
            "kafka-configs",
            (
                "--alter",
                "--entity-type",
                "brokers",
                "--entity-default",
                "--delete-config",
                "log.cleaner.backoff.ms",
            ),
            None,
        ),
        ("kafka-configs", ("--describe", "--entity-type", "brokers", "--entity-name", "1"), None),
        (
            "kafka-configs",
            (
                "--alter",
                "--entity-type",
                "clients",
                "--entity-name",
                f"c-{suffix}",
                "--add-config",
                "producer_byte_rate=1024",
            ),
            None,
        ),
        (
            "kafka-configs",
            ("--describe", "--entity-type", "clients", "--entity-name", f"c-{suffix}"),
            None,
        ),
        (
            "kafka-configs",
            (
                "--alter",
                "--entity-type",
                "users",
                "--entity-name",
                f"u-{suffix}",
                "--add-config",
                "consumer_byte_rate=2048",
            ),
            None,
        ),
        (
            "kafka-configs",
            ("--describe", "--entity-type", "users", "--entity-name", f"u-{suffix}"),
            None,
        ),
        (
            "kafka-configs",
            (
                "--alter",
                "--entity-type",
                "groups",
                "--entity-name",
                g,
                "--add-config",
                "consumer.heartbeat.interval.ms=6000",
            ),
            None,
        ),
        ("kafka-configs", ("--describe", "--entity-type", "groups", "--entity-name", g), None),
        (
            "kafka-console-producer",
            (
                "--topic",
                t,
                "--reader-property",
                "parse.key=true",
                "--reader-property",
                "key.separator=:",
                "--command-property",
                "partitioner.class=org.apache.kafka.clients.producer.RoundRobinPartitioner",
            ),
            lines,
        ),
        (
            "kafka-console-consumer",
            (
                "--topic",
                t,
                "--from-beginning",
                "--max-messages",
                str(RECORDS),
                "--group",
                g,
                "--timeout-ms",
                "30000",
                "--formatter-property",
                "print.key=true",
                "--formatter-property",
                "print.partition=true",
                "--formatter-property",
                "print.offset=true",
            ),
            None,
        ),
        ("kafka-consumer-groups", ("--describe", "--group", g), None),
        (
            "kafka-consumer-groups",
            ("--reset-offsets", "--group", g, "--topic", t, "--to-earliest", "--execute"),
            None,
        ),
        (
            "kafka-consumer-groups",
            ("--reset-offsets", "--group", g, "--topic", f"{t}:0", "--to-offset", "2", "--execute"),
            None,
        ),
        ("kafka-consumer-groups", ("--describe", "--group", g, "--offsets"), None),
        ("kafka-consumer-groups", ("--delete-offsets", "--group", g, "--topic", f"{t}:1"), None),
        ("kafka-consumer-groups", ("--describe", "--group", g, "--state"), None),
        ("kafka-consumer-groups", ("--delete", "--group", g), None),
        ("kafka-consumer-groups", ("--describe", "--group", g), None),
        ("kafka-get-offsets", ("--topic", t, "--time", "-1"), None),
        ("kafka-delete-records", ("--offset-json-file", str(delete)), None),
        ("kafka-get-offsets", ("--topic", t, "--time", "-2"), None),
        (
            "kafka-acls",
            ("--add", "--allow-principal", "User:alice", "--operation", "Read", "--topic", t),
            None,
        ),
        ("kafka-acls", ("--list", "--topic", t), None),
        (
            "kafka-acls",
            (
                "--remove",
                "--force",
                "--allow-principal",
                "User:alice",
                "--operation",
                "Read",
                "--topic",
                t,
            ),
            None,
        ),
        (
            "kafka-leader-election",
            ("--election-type", "preferred", "--topic", t, "--partition", "0"),
            None,
        ),
        (
            "kafka-reassign-partitions",
            ("--generate", "--topics-to-move-json-file", str(move), "--broker-list", "1"),
            None,
        ),
        ("kafka-log-dirs", ("--describe", "--topic-list", t), None),
        ("kafka-share-groups", ("--describe", "--group", f"share-{suffix}"), None),
        # a share group (KIP-932) reading a one-partition topic from its start
        ("kafka-topics", ("--create", "--topic", f"{t}-share", "--partitions", "1"), None),
        (
            "kafka-console-producer",
            ("--topic", f"{t}-share"),
            "".join(f"s{i}\n" for i in range(5)),
        ),
        (
            "kafka-configs",
            (
                "--alter",
                "--entity-type",
                "groups",
                "--entity-name",
                f"share-{suffix}",
                "--add-config",
                "share.auto.offset.reset=earliest",
            ),
            None,
        ),
        (
            "kafka-console-share-consumer",
            (
                "--topic",
                f"{t}-share",
                "--group",
                f"share-{suffix}",
                "--max-messages",
                "5",
                "--timeout-ms",
                "30000",
            ),
            None,
        ),
        ("kafka-share-groups", ("--list",), None),
        ("kafka-share-groups", ("--describe", "--group", f"share-{suffix}", "--offsets"), None),
        ("kafka-share-groups", ("--describe", "--group", f"share-{suffix}", "--state"), None),
        (
            "kafka-share-groups",
            (
                "--reset-offsets",
                "--group",
                f"share-{suffix}",
                "--topic",
                f"{t}-share",
                "--to-earliest",
                "--execute",
            ),
            None,
        ),
        ("kafka-share-groups", ("--delete", "--group", f"share-{suffix}"), None),
        (
            "kafka-client-metrics",
            (
                "--alter",
                "--name",
                cm,
                "--metrics",
                "org.apache.kafka.producer.",
                "--interval",
                "5000",
            ),
            None,
        ),
        ("kafka-client-metrics", ("--describe", "--name", cm), None),
        ("kafka-client-metrics", ("--delete", "--name", cm), None),
        ("kafka-features", ("describe",), None),
        ("kafka-metadata-quorum", ("describe", "--status"), None),
        (
            "kafka-producer-perf-test",
            (
                "--topic",
                f"{t}-perf",
                "--num-records",
                "500",
                "--record-size",
                "100",
                "--throughput",
                "-1",
                "--transactional-id",
                f"perf-{suffix}",
                "--transaction-duration-ms",
                "100",
            ),
            None,
        ),
        (
            "kafka-consumer-perf-test",
            (
                "--topic",
                f"{t}-perf",
                "--num-records",
                "500",
                "--timeout",
                "30000",
                "--group",
                f"perf-{suffix}",
            ),
            None,
        ),
        ("kafka-transactions", ("describe", "--transactional-id", f"perf-{suffix}"), None),
    ]


# Known, documented differences (docs/kafka-differences.md, "Kafka's tools"): how each is
# removed before comparing. Keyed by the command's text.
def _known(tool: str, args: tuple[str, ...], side: str, out: str, work: Path) -> str:
    if tool == "kafka-features" or (tool == "kafka-metadata-quorum"):
        return ""  # compared separately: odradek has no KRaft quorum nor metadata.version
    if tool in ("kafka-log-dirs", "kafka-reassign-partitions"):
        out = re.sub(r'"logDir":"[^"]*"', '"logDir":"<dir>"', out)
        out = re.sub(r'"log_dirs":\["/[^"]*"\]', '"log_dirs":["<dir>"]', out)
    if tool in ("kafka-producer-perf-test", "kafka-consumer-perf-test"):
        return ""  # measurements: compared separately
    if tool == "kafka-share-groups" and "--offsets" in args:
        # START-OFFSET after every record was acknowledged: Kafka 4.4 prints the persisted
        # share-partition start offset (0; the acknowledged records count as delivered, so
        # LAG is 0), odradek the advanced one (5, LAG 0). Same lag; see docs/kafka-tools.md
        out = re.sub(r"(?m)^(\S+\s+\S+\s+\d+\s+)\d+(\s+\d+)$", r"\1-\2", out)
    if tool == "kafka-transactions":
        out = _blank_columns(
            out, ("ProducerEpoch", "CurrentTransactionStartTimeMs", "TransactionDurationMs")
        )
    return out


def _blank_columns(table: str, names: tuple[str, ...]) -> str:
    """A tab-separated tool table with the named columns' cells replaced by '-'. Kafka 4.4
    runs transaction.version 2 (KIP-890), which bumps the producer epoch at every EndTxn;
    odradek keeps the epoch (transaction.version 1), so ProducerEpoch differs."""
    rows = [line.split("\t") for line in table.splitlines()]
    if not rows:
        return table
    drop = {i for i, cell in enumerate(rows[0]) if cell.strip() in names}
    return "\n".join(
        "\t".join("-" if i in drop else c.strip() for i, c in enumerate(row)) for row in rows
    )


def _without_trace(err: str) -> str:
    """stderr's first line per message, no Java stack frames."""
    return "\n".join(
        line for line in err.splitlines() if not line.startswith("\t") and "Trap" not in line
    )


def _quota_read_after_write(
    script: list[tuple[str, tuple[str, ...], str | None]], i: int
) -> str | None:
    """For a describe of client or user quotas that follows their alter, the first key the
    alter added: Kafka's broker answers the alter, then applies the quota when the controller's
    record reaches its metadata cache, so a describe at once may print nothing yet."""
    tool, args, _ = script[i]
    if tool != "kafka-configs" or "--describe" not in args:
        return None
    kind = args[args.index("--entity-type") + 1]
    if kind not in ("clients", "users"):
        return None
    for prev_tool, prev, _ in reversed(script[:i]):
        if prev_tool == "kafka-configs" and "--alter" in prev and "--add-config" in prev:
            if prev[prev.index("--entity-name") + 1] == args[args.index("--entity-name") + 1]:
                return prev[prev.index("--add-config") + 1].split("=", 1)[0] + "="
    return None


@pytest.fixture(scope="module")
def tool_runs(
    reference_pool: ReferencePool, odradek_broker: BrokerProcess, tmp_path_factory
) -> Iterator[tuple[list[tuple[str, tuple[str, ...], str | None]], dict[str, list[ToolRun]]]]:
    kafka = reference_pool.get("4.4")
    suffix = uuid.uuid4().hex[:8]
    work = tmp_path_factory.mktemp("tools")
    script = _scenario(suffix, work)
    batch = ToolBatch()
    bootstraps = {"odradek": odradek_broker.bootstrap, "kafka": kafka.bootstrap}
    for side in SIDES:
        for i, (tool, args, stdin) in enumerate(script):
            if tool == "kafka-producer-perf-test":
                batch.add(
                    tool,
                    *args,
                    "--command-property",
                    f"bootstrap.servers={bootstraps[side]}",
                    stdin=stdin,
                )
            else:
                until = _quota_read_after_write(script, i)
                batch.add(
                    tool, "--bootstrap-server", bootstraps[side], *args, stdin=stdin, until=until
                )
    runs = batch.run()
    yield script, {"odradek": runs[: len(script)], "kafka": runs[len(script) :]}


def test_every_tool_prints_what_it_prints_against_kafka(tool_runs, tmp_path: Path) -> None:
    script, runs = tool_runs
    mismatches = []
    for i, (tool, args, _) in enumerate(script):
        seen = {}
        for side in SIDES:
            run = runs[side][i]
            text = _known(tool, args, side, normalise(run.out), tmp_path)
            seen[side] = (run.rc, text, normalise(_without_trace(run.err)) if run.rc else "")
        if seen["odradek"] != seen["kafka"]:
            mismatches.append(f"{runs['odradek'][i]}\n=== kafka ===\n{runs['kafka'][i]}")
    assert not mismatches, "\n\n".join(mismatches)


def test_console_tools_round_trip_every_record(tool_runs) -> None:
    script, runs = tool_runs
    i = next(n for n, c in enumerate(script) if c[0] == "kafka-console-consumer")
    consumed = runs["odradek"][i].out.splitlines()
    expected = {f"k{n}\tv{n}" for n in range(RECORDS)}
    assert {"\t".join(line.split("\t")[2:]) for line in consumed} == expected
    # every partition's offsets run from 0 without a gap
    by_partition: dict[str, list[int]] = {}
    for line in consumed:
        part, offset = line.split("\t")[:2]
        by_partition.setdefault(part, []).append(int(offset.split(":")[1]))
    assert all(sorted(o) == list(range(len(o))) for o in by_partition.values()), by_partition


def test_perf_tools_move_every_record(tool_runs) -> None:
    script, runs = tool_runs
    for side in SIDES:
        by_tool = {c[0]: r for c, r in zip(script, runs[side], strict=True)}
        prod, cons = by_tool["kafka-producer-perf-test"], by_tool["kafka-consumer-perf-test"]
        assert prod.rc == 0 and "500 records sent" in prod.out, (side, prod)
        row = cons.out.strip().splitlines()[-1].split(", ")
        assert cons.rc == 0 and row[4] == "500", (side, cons)


def test_features_and_quorum(tool_runs) -> None:
    """odradek finalises group.version and streams.version as Kafka does (transaction.version
    from its config) and answers DescribeQuorum as a one-voter quorum
    of its controller: the lines it prints are Kafka's lines for those."""
    script, runs = tool_runs
    i = next(n for n, c in enumerate(script) if c[0] == "kafka-features")
    odr, kaf = (normalise(runs[s][i].out).splitlines() for s in SIDES)
    strip = lambda line: re.sub(r"Epoch: \d+", "Epoch: <n>", line)  # noqa: E731
    for feature in ("group.version", "streams.version"):
        assert [strip(x) for x in odr if feature in x] == [strip(x) for x in kaf if feature in x]
    j = next(n for n, c in enumerate(script) if c[0] == "kafka-metadata-quorum")
    keys = lambda out: [line.split(":")[0] for line in out.splitlines()]  # noqa: E731
    assert keys(runs["odradek"][j].out) == keys(runs["kafka"][j].out)
    assert runs["odradek"][j].rc == 0


def _java(tool: str, *args: str, timeout: float = 120.0) -> subprocess.Popen[bytes]:
    cmd = [java_binary(), *jvm_options("256m"), "-cp", classpath("4.4"), TOOLS[tool], *args]
    return subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _events(out: bytes) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]


@pytest.mark.parametrize("side", SIDES)
def test_verifiable_producer_and_consumer(
    side: str, reference_pool: ReferencePool, odradek_broker: BrokerProcess, tmp_path: Path
) -> None:
    """Idempotent verifiable producer, then a read_committed verifiable consumer: every
    message acknowledged is consumed once, offsets committed; the JSON events as Kafka's."""
    bootstrap = (
        odradek_broker.bootstrap if side == "odradek" else reference_pool.get("4.4").bootstrap
    )
    topic, n = f"verifiable-{uuid.uuid4().hex[:8]}", 200
    pconf = tmp_path / "producer.properties"
    pconf.write_text("enable.idempotence=true\nacks=all\nretries=5\n")
    cconf = tmp_path / "consumer.properties"
    cconf.write_text("isolation.level=read_committed\n")
    setup = ToolBatch()
    setup.add(
        "kafka-topics",
        "--bootstrap-server",
        bootstrap,
        "--create",
        "--topic",
        topic,
        "--partitions",
        "2",
        "--replication-factor",
        "1",
    )
    assert setup.run()[0].rc == 0
    producer = _java(
        "kafka-verifiable-producer",
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--max-messages",
        str(n),
        "--producer.config",
        str(pconf),
    )
    pout, perr = producer.communicate(timeout=120)
    events = _events(pout)
    assert [e["name"] for e in events][:2] == ["startup_complete", "producer_send_success"], perr
    acked = [e for e in events if e["name"] == "producer_send_success"]
    assert len(acked) == n and not [e for e in events if e["name"] == "producer_send_error"]
    assert events[-1]["name"] == "tool_data" and events[-1]["acked"] == n
    consumer = _java(
        "kafka-verifiable-consumer",
        "--bootstrap-server",
        bootstrap,
        "--topic",
        topic,
        "--group-id",
        f"vc-{topic}",
        "--max-messages",
        str(n),
        "--consumer.config",
        str(cconf),
        "--reset-policy",
        "earliest",
    )
    cout, cerr = consumer.communicate(timeout=120)
    events = _events(cout)
    names = [e["name"] for e in events]
    assert names[0] == "startup_complete" and "partitions_assigned" in names, cerr
    consumed = [e for e in events if e["name"] == "records_consumed"]
    got = {
        (p["partition"], o)
        for e in consumed
        for p in e["partitions"]
        for o in range(p["minOffset"], p["maxOffset"] + 1)
    }
    sent = {(e["partition"], e["offset"]) for e in acked}
    assert got == sent
    commits = [e for e in events if e["name"] == "offsets_committed"]
    assert commits and all(e["success"] for e in commits)
    # the tool exits after --max-messages; Kafka's own run ends with shutdown_requested too
    assert names[-1] in ("shutdown_requested", "shutdown_complete")


def test_dump_log_reads_odradek_files(tool_runs, odradek_broker: BrokerProcess) -> None:
    """kafka-dump-log on odradek's segments, offset and time indexes (checked against the log
    with --index-sanity-check / deep iteration), __consumer_offsets and __transaction_state."""
    script, runs = tool_runs
    topic = script[0][1][2]
    data = Path(odradek_broker.data_dir)
    part = data / f"{topic}-0"
    log_file = sorted(part.glob("*.log"))[0]
    offsets = [str(p) for p in sorted(data.glob("__consumer_offsets-*/*.log")) if p.stat().st_size]
    txns = [str(p) for p in sorted(data.glob("__transaction_state-*/*.log")) if p.stat().st_size]
    assert offsets and txns
    batch = ToolBatch()
    batch.add("kafka-dump-log", "--files", str(log_file), "--print-data-log", "--deep-iteration")
    batch.add(
        "kafka-dump-log",
        "--files",
        f"{log_file.with_suffix('.index')},{log_file.with_suffix('.timeindex')}",
        "--verify-index-only",
    )
    batch.add("kafka-dump-log", "--files", ",".join(offsets), "--offsets-decoder")
    batch.add("kafka-dump-log", "--files", ",".join(txns), "--transaction-log-decoder")
    seg, idx, off, txn = batch.run()
    for run in (seg, idx, off, txn):
        assert run.rc == 0 and "Exception" not in run.out + run.err, run
    # partition 0 holds what the console consumer read from it (delete-records keeps the file)
    console = next(n for n, c in enumerate(script) if c[0] == "kafka-console-consumer")
    read = [line.split("\t") for line in runs["odradek"][console].out.splitlines()]
    expected = [(k, v) for p, _, k, v in read if p == "Partition:0"]
    assert re.findall(r"key: (\S+) payload: (\S+)", seg.out) == expected
    assert "Mismatches" not in idx.out and "corrupt" not in idx.out.lower()
    assert f'"group":"tools-group-{topic.split("-")[-1]}"' in off.out.replace(" ", "") or (
        "offset_commit" in off.out
    )
    assert re.search(r'"transactionalId":"perf-', txn.out.replace(" ", "")), txn.out[:2000]
    assert "CompleteCommit" in txn.out or "COMPLETE_COMMIT" in txn.out


def test_an_id_of_letters_only_is_masked_and_a_name_is_kept() -> None:
    """Topic ids are random base64: about one in a hundred is letters only. Both sides' ids
    must still compare equal, and a 22-letter camelCase name a tool prints must survive."""
    ours = normalise("TopicId: zytazkgoSrKmlYjzuxqaxA\tfield transactionalIdExpired")
    theirs = normalise("TopicId: sG8FKXUnSqOtZAH25hRjqg\tfield transactionalIdExpired")
    assert ours == theirs == "TopicId: <id>\tfield transactionalIdExpired"
