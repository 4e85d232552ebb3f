"""Client commands against secured listeners with `--command-config FILE`, as Kafka's tools
take it (issue 14): the Java client properties odradek.testing writes for a SASL_SSL and an
mTLS broker are all a user needs; without them the command fails; `odradek produce`, whose
batching client speaks PLAINTEXT only, refuses with one line."""

from __future__ import annotations

import subprocess

import confluent_kafka as ck
import pytest

from odradek.testing import Broker
from tests.cli.cli_run import run_odradek


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    return run_odradek(*args, stdin=stdin, status=None)


@pytest.mark.parametrize("security", ["sasl_ssl", "mtls"])
def test_topics_and_consume_with_command_config(tmp_path, security):
    with Broker(topics={"secured": 1}, security=security) as broker:
        props = broker.security.write_properties(
            str(tmp_path / "client.properties"), broker.bootstrap
        )
        producer = ck.Producer(broker.client_config())
        producer.produce("secured", value=b"hello")
        assert producer.flush(20) == 0

        listed = cli("topics", "list", "-b", broker.bootstrap, "--command-config", props)
        assert listed.returncode == 0, listed.stderr
        assert "secured" in listed.stdout.split()

        made = cli(
            "topics", "create", "made-here", "-b", broker.bootstrap, "--command-config", props
        )
        assert made.returncode == 0, made.stderr
        assert broker.call(lambda b: b.topics.info("made-here")) is not None

        read = cli(
            "consume", "secured", "-b", broker.bootstrap, "--from-beginning",
            "--max-messages", "1", "--timeout-ms", "20000", "--consumer.config", props,
        )  # fmt: skip
        assert read.returncode == 0, read.stderr
        assert read.stdout == "hello\n"

        bare = cli("topics", "list", "-b", broker.bootstrap, "--connect-timeout-ms", "3000")
        assert bare.returncode != 0

        refused = cli(
            "produce", "secured", "-b", broker.bootstrap, "--command-config", props, stdin="x\n"
        )
        assert refused.returncode == 1
        assert "PLAINTEXT only" in refused.stderr
        assert len(refused.stderr.strip().splitlines()) == 1, refused.stderr
