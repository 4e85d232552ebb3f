"""`odradek dev --security ...` (issue 14): a secure dev broker whose printed client properties
work as printed: the properties block and file with confluent-kafka and kcat -F, the --json
form's paths with kafka-python over mTLS; the CA lives in the data dir, removed at exit."""

from __future__ import annotations

import json
import queue
import shlex
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import confluent_kafka as ck
import pytest
from kafka import KafkaProducer

from tests.cli.cli_run import start_odradek

REPO = Path(__file__).resolve().parents[2]
WAIT_S = 30.0


def start_dev(*args: str) -> tuple[subprocess.Popen[str], queue.Queue[str]]:
    return start_odradek("dev", "--port", "0", *args)


def stop_dev(proc: subprocess.Popen[str]) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(timeout=WAIT_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_dev_sasl_ssl_prints_properties_that_clients_use() -> None:
    proc, lines = start_dev(
        "--security", "sasl_ssl", "--mechanism", "SCRAM-SHA-512", "--user", "bob:pw", "--topic", "t"
    )
    try:
        bootstrap = lines.get(timeout=WAIT_S)
        header = lines.get(timeout=WAIT_S)
        assert header == "# SASL_SSL (SCRAM-SHA-512) client properties for User:bob:"
        printed: dict[str, str] = {}
        comments: list[str] = []
        while not comments or not comments[-1].startswith("# kcat "):
            line = lines.get(timeout=WAIT_S)
            if line.startswith("#"):
                comments.append(line)
            else:
                key, _, value = line.partition("=")
                printed[key] = value
        assert printed["bootstrap.servers"] == bootstrap
        assert printed["security.protocol"] == "SASL_SSL"
        assert (printed["sasl.username"], printed["sasl.password"]) == ("bob", "pw")
        ca = Path(printed["ssl.ca.location"])
        assert ca.is_file()
        props_file = comments[0].split(": ", 1)[1]
        java_file = comments[1].split(": ", 1)[1]
        assert Path(java_file).is_file()

        producer = ck.Producer(printed)
        producer.produce("t", b"from-printed-properties")
        assert producer.flush(WAIT_S) == 0

        kcat = shutil.which("kcat")
        if kcat is not None:
            out = subprocess.run(
                [kcat, "-F", props_file, "-C", "-t", "t", "-c", "1", "-e", "-f", "%s\\n"],
                capture_output=True,
                text=True,
                timeout=WAIT_S,
                stdin=subprocess.DEVNULL,
            )
            assert out.stdout == "from-printed-properties\n", out.stderr
            # the printed kcat line works as printed
            listed = subprocess.run(
                [kcat, *shlex.split(comments[2].removeprefix("# kcat "))[:-1], "-L", "-J"],
                capture_output=True,
                text=True,
                timeout=WAIT_S,
                stdin=subprocess.DEVNULL,
            )
            assert listed.returncode == 0, listed.stderr
            assert "t" in [x["topic"] for x in json.loads(listed.stdout)["topics"]]
        assert stop_dev(proc) == 0
        assert not ca.exists()  # the CA was in the data dir, removed at exit
    finally:
        stop_dev(proc)


def test_dev_mtls_json_gives_the_files() -> None:
    proc, lines = start_dev("--security", "mtls", "--topic", "t", "--json")
    try:
        info = json.loads(lines.get(timeout=WAIT_S))
        sec = info["security"]
        assert sec["protocol"] == "SSL" and sec["principal"] == "User:alice"
        assert sec["ca"].startswith(info["data_dir"])
        conf = sec["client_config"]
        producer = KafkaProducer(
            bootstrap_servers=info["bootstrap"],
            security_protocol="SSL",
            ssl_cafile=conf["ssl.ca.location"],
            ssl_certfile=conf["ssl.certificate.location"],
            ssl_keyfile=conf["ssl.key.location"],
        )
        producer.send("t", b"mtls").get(timeout=WAIT_S)
        producer.close()
        assert stop_dev(proc) == 0
    finally:
        stop_dev(proc)


def test_dev_refuses_a_mechanism_without_sasl() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "odradek", "dev", "--security", "ssl", "--mechanism", "PLAIN"],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        cwd=REPO,
    )
    assert out.returncode != 0
    assert "takes no --mechanism" in out.stderr


@pytest.mark.parametrize("args", [["--mechanism", "PLAIN"], ["--user", "bob"]])
def test_dev_security_options_need_security(args: list[str]) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "odradek", "dev", *args],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        cwd=REPO,
    )
    assert out.returncode != 0 and "go with --security" in out.stderr


def test_cluster_brokers_with_sasl_ssl_prints_properties_and_replicates(tmp_path) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    proc, lines = start_odradek(
        "cluster", "--brokers", "3", "--port", "0",
        "--base-dir", str(tmp_path / "cluster"), "--security", "sasl_ssl",
        "--mechanism", "SCRAM-SHA-256", "--user", "carol:carol-pw",
    )  # fmt: skip
    try:
        printed: dict[str, str] = {}
        ready = ""
        while not ready:
            line = lines.get(timeout=WAIT_S)
            if line.startswith("odradek ready listeners="):
                ready = line
            elif "=" in line and not line.startswith(("#", "broker ")):
                key, _, value = line.partition("=")
                printed[key] = value
        assert ready.count("SASL_SSL://") == 3
        assert printed["sasl.username"] == "carol" and printed["sasl.mechanism"] == "SCRAM-SHA-256"
        admin = AdminClient(printed)
        (future,) = admin.create_topics([NewTopic("orders", 1, 3)]).values()
        future.result(WAIT_S)
        producer = ck.Producer({**printed, "acks": "all"})
        producer.produce("orders", b"replicated", partition=0)
        assert producer.flush(WAIT_S) == 0
        consumer = ck.Consumer({**printed, "group.id": "c", "auto.offset.reset": "earliest"})
        consumer.assign([ck.TopicPartition("orders", 0, ck.OFFSET_BEGINNING)])
        got = None
        for _ in range(150):
            msg = consumer.poll(0.2)
            if msg is not None and not msg.error():
                got = msg.value()
                break
        consumer.close()
        assert got == b"replicated"
        # every replica is in sync: the followers fetched over SASL_SSL
        meta = admin.list_topics("orders", timeout=WAIT_S).topics["orders"].partitions[0]
        assert sorted(meta.isrs) == [0, 1, 2]
        assert stop_dev(proc) == 0
    finally:
        stop_dev(proc)


def test_cluster_describe_refuses_security_options() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "odradek", "cluster", "--security", "ssl"],
        capture_output=True,
        text=True,
        timeout=WAIT_S,
        cwd=REPO,
    )
    assert out.returncode == 1 and "go with --brokers N" in out.stderr
