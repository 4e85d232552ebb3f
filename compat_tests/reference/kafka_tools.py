"""Kafka's command-line tools, run from the reference jars against any broker, several in one JVM.

A JVM start costs one to two seconds on a loaded machine, and a test of Kafka's tools runs a
few dozen of them; `ToolBatch` (java/ToolBatch.java, compiled once per session into a temp
directory) runs a list of tool main classes in one JVM, trapping Kafka's `Exit.exit`, and
writes each command's stdout, stderr and exit status to files. `ToolRun` is what a test reads.

The tool names are the scripts' (`kafka-topics`); `TOOLS` maps them to Kafka 4.4's classes.
`normalise()` removes what legitimately differs between two brokers (ports, node ids, topic
ids, cluster ids, timestamps, client and member ids) so two outputs can be compared as text.
"""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from compat_tests.reference.kafka_ref import classpath, java_binary, jvm_options

_JAVA_SRC = Path(__file__).resolve().parent / "java" / "ToolBatch.java"

# Kafka 4.4's main classes behind the bin/ scripts.
TOOLS: dict[str, str] = {
    "kafka-topics": "org.apache.kafka.tools.TopicCommand",
    "kafka-configs": "org.apache.kafka.tools.ConfigCommand",
    "kafka-consumer-groups": "org.apache.kafka.tools.consumer.group.ConsumerGroupCommand",
    "kafka-share-groups": "org.apache.kafka.tools.consumer.group.ShareGroupCommand",
    "kafka-streams-groups": "org.apache.kafka.tools.streams.StreamsGroupCommand",
    "kafka-groups": "org.apache.kafka.tools.GroupsCommand",
    "kafka-acls": "org.apache.kafka.tools.AclCommand",
    "kafka-reassign-partitions": "org.apache.kafka.tools.reassign.ReassignPartitionsCommand",
    "kafka-leader-election": "org.apache.kafka.tools.LeaderElectionCommand",
    "kafka-log-dirs": "org.apache.kafka.tools.LogDirsCommand",
    "kafka-get-offsets": "org.apache.kafka.tools.GetOffsetShell",
    "kafka-delete-records": "org.apache.kafka.tools.DeleteRecordsCommand",
    "kafka-transactions": "org.apache.kafka.tools.TransactionsCommand",
    "kafka-features": "org.apache.kafka.tools.FeatureCommand",
    "kafka-metadata-quorum": "org.apache.kafka.tools.MetadataQuorumCommand",
    "kafka-client-metrics": "org.apache.kafka.tools.ClientMetricsCommand",
    "kafka-broker-api-versions": "org.apache.kafka.tools.BrokerApiVersionsCommand",
    "kafka-console-producer": "org.apache.kafka.tools.ConsoleProducer",
    "kafka-console-consumer": "org.apache.kafka.tools.consumer.ConsoleConsumer",
    "kafka-console-share-consumer": "org.apache.kafka.tools.consumer.ConsoleShareConsumer",
    "kafka-verifiable-producer": "org.apache.kafka.tools.VerifiableProducer",
    "kafka-verifiable-consumer": "org.apache.kafka.tools.VerifiableConsumer",
    "kafka-producer-perf-test": "org.apache.kafka.tools.ProducerPerformance",
    "kafka-consumer-perf-test": "org.apache.kafka.tools.ConsumerPerformance",
    "kafka-dump-log": "org.apache.kafka.tools.DumpLogSegments",
}


@dataclass(slots=True)
class ToolRun:
    """One command's outcome."""

    args: tuple[str, ...]
    rc: int
    out: str
    err: str

    def __str__(self) -> str:
        return f"$ {' '.join(self.args)}\n[rc={self.rc}]\n{self.out}\n--- stderr ---\n{self.err}"


@dataclass
class ToolBatch:
    """Commands queued with `add`, run together by `run()` in one JVM."""

    version: str = "4.4"
    commands: list[tuple[str, tuple[str, ...], str | None]] = field(default_factory=list)

    until: dict[int, str] = field(default_factory=dict)

    def add(self, tool: str, *args: str, stdin: str | None = None, until: str | None = None) -> int:
        """Queue `tool args...` (stdin: text fed to it); returns its index in `run()`'s list.
        With `until`, the command is run again (up to 50 times, 100 ms apart) until its stdout
        holds that text: for state a broker applies a moment after it answered the write."""
        self.commands.append((tool, tuple(args), stdin))
        if until is not None:
            if "\t" in until or "\n" in until:
                raise ValueError(f"until {until!r} holds a tab or newline")
            self.until[len(self.commands) - 1] = until
        return len(self.commands) - 1

    def run(self, timeout: float = 240.0) -> list[ToolRun]:
        with tempfile.TemporaryDirectory(prefix="toolbatch-") as tmp:
            work = Path(tmp)
            lines = []
            for i, (tool, args, stdin) in enumerate(self.commands):
                for a in args:
                    if "\t" in a or "\n" in a:
                        raise ValueError(f"argument {a!r} holds a tab or newline")
                stdin_path = "-"
                if stdin is not None:
                    path = work / f"{i}.stdin"
                    path.write_text(stdin, encoding="utf-8")
                    stdin_path = str(path)
                ident = str(i) if i not in self.until else f"{i}~{self.until[i]}"
                lines.append("\t".join([ident, stdin_path, TOOLS.get(tool, tool), *args]))
            script = work / "script.tsv"
            script.write_text("\n".join(lines) + "\n", encoding="utf-8")
            cmd = [
                java_binary(),
                *jvm_options("256m"),
                "-cp",
                f"{launcher_dir(self.version)}:{classpath(self.version)}",
                "ToolBatch",
                str(script),
                str(work),
            ]
            proc = subprocess.run(cmd, capture_output=True, timeout=timeout, check=False)
            runs = []
            for i, (tool, args, _) in enumerate(self.commands):
                rc_path = work / f"{i}.rc"
                if not rc_path.exists():
                    raise AssertionError(
                        f"ToolBatch stopped before command {i} ({tool} {' '.join(args)}): "
                        f"status {proc.returncode}\n{proc.stdout.decode()}\n{proc.stderr.decode()}"
                    )
                runs.append(
                    ToolRun(
                        (tool, *args),
                        int(rc_path.read_text()),
                        (work / f"{i}.out").read_text("utf-8", "replace"),
                        (work / f"{i}.err").read_text("utf-8", "replace"),
                    )
                )
            return runs


_LAUNCHERS: dict[str, Path] = {}


def launcher_dir(version: str = "4.4") -> Path:
    """The directory holding ToolBatch.class for `version`, compiled on first use."""
    found = _LAUNCHERS.get(version)
    if found is not None:
        return found
    out = Path(tempfile.mkdtemp(prefix="toolbatch-classes-"))
    javac = str(Path(java_binary()).with_name("javac"))
    subprocess.run(
        [javac, "-d", str(out), "-cp", classpath(version), str(_JAVA_SRC)],
        check=True,
        capture_output=True,
        timeout=120,
    )
    _LAUNCHERS[version] = out
    return out


def run_tool(tool: str, *args: str, version: str = "4.4", timeout: float = 120.0) -> ToolRun:
    """One tool in its own JVM (for tools that must be stopped from outside or run long)."""
    cmd = [java_binary(), *jvm_options("256m"), "-cp", classpath(version), TOOLS[tool], *args]
    proc = subprocess.run(cmd, capture_output=True, timeout=timeout, check=False)
    return ToolRun((tool, *args), proc.returncode, proc.stdout.decode(), proc.stderr.decode())


_UUID22 = re.compile(r"(?<![A-Za-z0-9_-])[A-Za-z0-9_-]{22}(?![A-Za-z0-9_-])")
# A 22-character word a tool prints (a camelCase name, not an id). A random base64 id is all
# letters about once in a hundred (e.g. TopicId zytazkgoSrKmlYjzuxqaxA), so "all letters" alone
# is not enough to tell a word from an id.
_WORD22 = re.compile(r"[A-Za-z][a-z]+(?:[A-Z][a-z]+)*")
_UUID36 = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
_PORT = re.compile(r"(127\.0\.0\.1|localhost):\d+")
_TS = re.compile(r"\b1[6-9]\d{11}\b")


def normalise(text: str, names: Sequence[tuple[str, str]] = ()) -> str:
    """`text` with ids, ports and millisecond timestamps replaced by placeholders; `names`
    renames (e.g. each side's generated topic name to one placeholder)."""
    for old, new in names:
        text = text.replace(old, new)
    text = _UUID36.sub("<uuid>", text)
    text = _PORT.sub(r"\1:<port>", text)
    text = _TS.sub("<ts>", text)
    text = _UUID22.sub(lambda m: m.group(0) if _WORD22.fullmatch(m.group(0)) else "<id>", text)
    return text
