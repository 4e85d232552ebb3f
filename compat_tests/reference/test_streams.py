"""Kafka Streams 4.4 (compat_tests/reference/jvm/StreamsApp.java) on odradek and on Kafka 4.4.

One application, two then three instances, exactly-once v2: a word count (a repartition topic,
a RocksDB store and its changelog) and a stream-table join feeding a windowed aggregation (a
second repartition topic, a windowed store), one standby replica, no record cache so every
update reaches the output. Input arrives in three steps; after the second one instance is
killed -9 and restarted and a third instance joins. The output topics, read with
read_committed, must hold exactly one update per input record: every word's counts 1, 2, ...,
n with no repeat or gap (a re-processed record whose transaction was not aborted shows as a
repeat), every window's sums rising to the exact total, one update per order. The same test
runs against Apache Kafka 4.4 (the reference), so a failure on odradek alone is odradek's.

With `group.protocol=streams` the broker owns the session timeout and the standby count: the test
sets the group's `streams.*` configs (IncrementalAlterConfigs on the GROUP resource) before the
application starts, as a Streams user would, so the killed instance's tasks move after 6 s rather
than Kafka's default 45 s. Both brokers of this module lower `group.streams.min.session.timeout.ms`
and `group.streams.min.heartbeat.interval.ms` (Kafka's floors, 45000 and 5000) to allow it.
"""

from __future__ import annotations

import random
import re
import time
import uuid
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import (
    AdminClient,
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewTopic,
    ResourceType,
)

from compat_tests.harness import BrokerProcess
from compat_tests.reference.conftest import KAFKA_FAST_GROUPS, ODRADEK_OVERRIDES, ReferencePool
from compat_tests.reference.jvm_apps import JvmApps, OutputReader, produce
from compat_tests.reference.kafka_ref import KafkaReference
from compat_tests.reference.kafka_tools import ToolRun, run_tool

WORDS = ("kafka", "streams", "odradek", "broker", "topic", "state", "window", "join")
REGIONS = ("north", "south", "west")
PARTITIONS = 3
MINUTE_MS = 60_000
# the application's streams group: the same session timeout and heartbeat interval as its
# classic consumers (StreamsApp.java), the standby replica it asks for, no first-assignment delay
STREAMS_GROUP_CONFIGS = {
    "streams.session.timeout.ms": "6000",
    "streams.heartbeat.interval.ms": "1000",
    "streams.num.standby.replicas": "1",
    "streams.initial.rebalance.delay.ms": "0",
}


@pytest.fixture(scope="module")
def streams_odradek(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BrokerProcess]:
    work_dir = tmp_path_factory.mktemp("odradek-streams")
    with BrokerProcess(work_dir, overrides={**ODRADEK_OVERRIDES, **KAFKA_FAST_GROUPS}) as proc:
        yield proc


@pytest.fixture(scope="module")
def streams_kafka(reference_pool: ReferencePool) -> Iterator[KafkaReference]:
    """The session's Kafka 4.4 node with short group floors (shared with test_kip848_migration)."""
    yield reference_pool.get("4.4", overrides=KAFKA_FAST_GROUPS)


@pytest.fixture(params=["odradek", "kafka-4.4"])
def bootstrap(request: pytest.FixtureRequest) -> str:
    if request.param == "odradek":
        return str(request.getfixturevalue("streams_odradek").bootstrap)
    return str(request.getfixturevalue("streams_kafka").bootstrap)


def alter_group_configs(bootstrap: str, group: str, configs: dict[str, str]) -> None:
    """IncrementalAlterConfigs SET on the GROUP resource (confluent-kafka's admin client)."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    entries = [
        ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in configs.items()
    ]
    res = ConfigResource(ResourceType.GROUP, group, incremental_configs=entries)
    for fut in admin.incremental_alter_configs([res]).values():
        fut.result(30)


def test_streams_group_configs_are_validated_and_described(bootstrap: str) -> None:
    """The streams group keys of Kafka 4.4's GroupConfig: set, described as the group's own,
    refused with Kafka's messages below the ConfigDef's floor, outside the broker's
    group.streams.min/max.* bounds, or with a session timeout not above the heartbeat."""
    group = f"sg{uuid.uuid4().hex[:8]}"
    alter_group_configs(bootstrap, group, STREAMS_GROUP_CONFIGS)
    admin = AdminClient({"bootstrap.servers": bootstrap})
    (fut,) = admin.describe_configs([ConfigResource(ResourceType.GROUP, group)]).values()
    described = fut.result(30)
    for key, value in STREAMS_GROUP_CONFIGS.items():
        assert (described[key].value, described[key].source) == (value, 8), described[key]
    # Kafka 4.4 describes the assignor and rack tags, not its internal keys (warm-ups, lag)
    assert described["streams.assignor.name"].value == "sticky"
    assert "streams.num.warmup.replicas" not in described
    for key, value, message in (
        ("streams.session.timeout.ms", "0",
         "Invalid value 0 for configuration streams.session.timeout.ms: Value must be at least 1"),
        ("streams.session.timeout.ms", "5000",
         "streams.session.timeout.ms must be in the range 6000 to 60000 inclusive."),
        ("streams.heartbeat.interval.ms", "20000",
         "streams.heartbeat.interval.ms must be in the range 1000 to 15000 inclusive."),
        ("streams.num.standby.replicas", "3",
         "streams.num.standby.replicas must be less than or equal to 2"),
        ("streams.num.warmup.replicas", "30",
         "streams.num.warmup.replicas must be less than or equal to 20"),
        ("streams.task.offset.interval.ms", "100",
         "streams.task.offset.interval.ms must be greater than or equal to 15000"),
        ("streams.assignor.name", "x", "streams.assignor.name 'x' is not a registered task "
         "assignor. Registered assignors are: [sticky]."),
        ("streams.heartbeat.interval.ms", "6000",
         "streams.session.timeout.ms must be greater than streams.heartbeat.interval.ms"),
    ):  # fmt: skip
        with pytest.raises(KafkaException) as refused:
            alter_group_configs(bootstrap, group, {key: value})
        error = refused.value.args[0]
        assert (error.name(), error.str()) == ("INVALID_CONFIG", message), (key, value)


@pytest.fixture(params=["classic", "streams"])
def protocol(request: pytest.FixtureRequest) -> str:
    """group.protocol: the classic rebalance protocol, or KIP-1071's streams protocol (the
    topology and task assignment on the broker, StreamsGroupHeartbeat)."""
    return str(request.param)


def test_streams_exactly_once_with_a_killed_instance(
    bootstrap: str, protocol: str, streams_apps: JvmApps, tmp_path: Path, replication: int = 1
) -> None:
    rng = random.Random(25)
    prefix = f"s{uuid.uuid4().hex[:8]}"
    app_id = f"{prefix}-app"
    topics = [f"{prefix}-{t}" for t in ("lines", "customers", "orders", "counts", "totals")]
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for fut in admin.create_topics(
        [NewTopic(t, num_partitions=PARTITIONS, replication_factor=replication) for t in topics]
    ).values():
        fut.result(30)

    customers = {f"c{i}": REGIONS[i % len(REGIONS)] for i in range(12)}
    base = (int(time.time() * 1000) // MINUTE_MS - 10) * MINUTE_MS
    produce(bootstrap, f"{prefix}-customers", [(c, r, base - 1000) for c, r in customers.items()])

    def lines(n: int, start: int) -> list[tuple[str, str, int | None]]:
        return [
            (f"l{start + i}", " ".join(rng.choice(WORDS) for _ in range(5)), None) for i in range(n)
        ]

    def orders(n: int, start: int) -> list[tuple[str, str, int | None]]:
        return [
            (f"c{rng.randrange(12)}", str(rng.randint(1, 100)), base + (start + i) * 7_000)
            for i in range(n)
        ]

    steps = [(lines(40, 0), orders(20, 0)), (lines(40, 40), orders(20, 20)),
             (lines(40, 80), orders(20, 40))]  # fmt: skip
    want_counts: dict[str, int] = defaultdict(int)
    want_totals: dict[str, int] = defaultdict(int)
    want_updates: dict[str, int] = defaultdict(int)
    for step_lines, step_orders in steps:
        for _, text, _ in step_lines:
            for word in text.split():
                want_counts[word] += 1
        for customer, amount, ts in step_orders:
            assert ts is not None
            key = f"{customers[customer]}@{ts // MINUTE_MS * MINUTE_MS}"
            want_totals[key] += int(amount)
            want_updates[key] += 1

    reader = OutputReader(bootstrap, [f"{prefix}-counts", f"{prefix}-totals"], PARTITIONS)

    def sent_so_far(n_steps: int) -> Callable[[], bool]:
        counts: dict[str, int] = defaultdict(int)
        for step_lines, _ in steps[:n_steps]:
            for _, text, _ in step_lines:
                for word in text.split():
                    counts[word] += 1

        def done() -> bool:
            seen = reader.by_key(f"{prefix}-counts")
            return all(seen.get(w, ["0"])[-1] == str(n) for w, n in counts.items())

        return done

    if protocol == "streams":
        alter_group_configs(bootstrap, app_id, STREAMS_GROUP_CONFIGS)
    a = streams_apps.start(
        "StreamsApp", bootstrap, app_id, prefix, str(tmp_path / "a" / "state"), protocol,
        str(replication), directory=tmp_path / "a",
    )  # fmt: skip
    started = {"a": a}
    b = streams_apps.start(
        "StreamsApp", bootstrap, app_id, prefix, str(tmp_path / "b" / "state"), protocol,
        str(replication), directory=tmp_path / "b",
    )  # fmt: skip
    started["b"] = b
    try:
        a.wait_line("STATE RUNNING", timeout=120)
        b.wait_line("STATE RUNNING", timeout=120)
        produce(bootstrap, f"{prefix}-lines", steps[0][0])
        produce(bootstrap, f"{prefix}-orders", steps[0][1])
        reader.wait(sent_so_far(1), 120, "the first step's word counts")
        if protocol == "streams":
            _check_streams_groups_describe(bootstrap, app_id)

        # the second step, then instance b killed -9 while it may be mid-transaction; b comes
        # back and a third instance c joins (two, then three instances)
        produce(bootstrap, f"{prefix}-lines", steps[1][0])
        produce(bootstrap, f"{prefix}-orders", steps[1][1])
        b.kill()
        b = streams_apps.start(
            "StreamsApp", bootstrap, app_id, prefix, str(tmp_path / "b" / "state"), protocol,
            str(replication), directory=tmp_path / "b2",
        )  # fmt: skip
        started["b2"] = b
        c = streams_apps.start(
            "StreamsApp", bootstrap, app_id, prefix, str(tmp_path / "c" / "state"), protocol,
            str(replication), directory=tmp_path / "c",
        )  # fmt: skip
        started["c"] = c
        produce(bootstrap, f"{prefix}-lines", steps[2][0])
        produce(bootstrap, f"{prefix}-orders", steps[2][1])
        b.wait_line("STATE RUNNING", timeout=120)
        c.wait_line("STATE RUNNING", timeout=120)

        def all_done() -> bool:
            if not sent_so_far(3)():
                return False
            totals = reader.by_key(f"{prefix}-totals")
            return all(totals.get(k, ["0"])[-1] == str(v) for k, v in want_totals.items())

        reader.wait(all_done, 180, "every word count and window total")
        for proc in (a, b, c):
            assert proc.running, proc.output_tail()
            assert "FATAL" not in "\n".join(proc.lines), proc.output_tail()
    except AssertionError as exc:
        tails = "".join(f"--- {n} ---\n{p.output_tail()}\n" for n, p in started.items())
        raise AssertionError(f"{exc}\n{tails}") from None
    finally:
        for p in started.values():
            p.stop()
        reader.close()

    counts = reader.by_key(f"{prefix}-counts")
    assert set(counts) == set(want_counts)
    for word, n in want_counts.items():
        assert counts[word] == [str(i) for i in range(1, n + 1)], word
    totals = reader.by_key(f"{prefix}-totals")
    assert set(totals) == set(want_totals)
    for key, total in want_totals.items():
        sums = [int(v) for v in totals[key]]
        assert len(sums) == want_updates[key] and sums[-1] == total, (key, sums)
        assert sums == sorted(set(sums)), (key, sums)

    # the internal topics the application created through the admin client
    internal = {t for t in admin.list_topics(timeout=10).topics if t.startswith(app_id)}
    for name in (
        "words-by-word-repartition",
        "orders-by-region-repartition",
        "word-counts-changelog",
        "region-totals-changelog",
        "customers-changelog",
    ):
        assert f"{app_id}-{name}" in internal, sorted(internal)
    resources = [
        ConfigResource(ConfigResource.Type.TOPIC, f"{app_id}-{name}")
        for name in ("word-counts-changelog", "region-totals-changelog")
    ]
    policies = {
        res.name: fut.result(30)["cleanup.policy"].value
        for res, fut in admin.describe_configs(resources).items()
    }
    assert policies == {
        f"{app_id}-word-counts-changelog": "compact",
        f"{app_id}-region-totals-changelog": "compact,delete",
    }


def _describe_members(bootstrap: str, app_id: str) -> tuple[ToolRun, dict[str, set[str]]]:
    """`kafka-streams-groups --describe --members`: each member's active tasks ("0_1")."""
    run = run_tool(
        "kafka-streams-groups", "--bootstrap-server", bootstrap, "--describe", "--group", app_id,
        "--members", timeout=60,
    )  # fmt: skip
    members: dict[str, set[str]] = {}
    for line in run.out.splitlines():
        if not line.startswith(app_id + " "):
            continue
        active = line.partition("ACTIVE:")[2].split("STANDBY:")[0].split("WARMUP:")[0]
        tasks = members.setdefault(line.split()[1], set())
        for sub, parts in re.findall(r"(\w+):\[([\d,]*)\]", active):
            tasks.update(f"{sub}_{p}" for p in parts.split(",") if p)
    return run, members


def _check_streams_groups_describe(bootstrap: str, app_id: str) -> None:
    """Kafka's `kafka-streams-groups` (StreamsGroupDescribe) shows the group with both
    instances as members and every task of the topology (4 subtopologies x 3 partitions)
    active on exactly one of them, once the group is stable."""
    want = sorted(f"{sub}_{p}" for sub in range(4) for p in range(PARTITIONS))
    deadline = time.monotonic() + 60
    while True:
        run, members = _describe_members(bootstrap, app_id)
        tasks = sorted(t for ts in members.values() for t in ts)
        if (run.rc == 0 and len(members) == 2 and tasks == want) or time.monotonic() > deadline:
            break
        time.sleep(1)  # the group reconciles: poll until its target is reached
    assert run.rc == 0 and len(members) == 2, run
    assert tasks == want, run
    assert all(members.values()), run  # both instances have work
