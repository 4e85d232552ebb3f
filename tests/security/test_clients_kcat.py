"""kcat (librdkafka 2.0.2) over every security mode (tests/security/conftest.py MODES): metadata
(-L), produce (-P, with `-X` arguments from `Broker.kcat_args()`), a transaction (-P -X
transactional.id), and a group consumer (-G) that reads them read_committed with its settings
from a properties file (-F, `Security.write_properties(..., flavour="librdkafka")`) and
commits its offsets."""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid

import confluent_kafka as ck
import pytest

KCAT = shutil.which("kcat")
WAIT_S = 30.0

pytestmark = pytest.mark.skipif(KCAT is None, reason="kcat not installed")


def kcat(*args: str, input: str | None = None) -> str:
    assert KCAT is not None
    proc = subprocess.run(
        [KCAT, *args],
        input=input,
        capture_output=True,
        text=True,
        timeout=WAIT_S + 10,
        stdin=None if input is not None else subprocess.DEVNULL,
    )
    assert proc.returncode == 0, f"kcat {' '.join(args)} exited {proc.returncode}:\n{proc.stderr}"
    return proc.stdout


def test_kcat(secure_broker, tmp_path) -> None:
    topic = f"kcat-{uuid.uuid4().hex[:8]}"
    secure_broker.call(lambda s: s.topics.create_topic(topic, 1, -1))
    args = secure_broker.kcat_args(user="alice")

    meta = json.loads(kcat(*args, "-L", "-J", "-t", topic, "-m", str(int(WAIT_S))))
    assert [t["topic"] for t in meta["topics"]] == [topic]

    kcat(*args, "-P", "-t", topic, "-p", "0", input="".join(f"plain-{i}\n" for i in range(5)))
    kcat(
        *args,
        "-P",
        "-t",
        topic,
        "-p",
        "0",
        "-X",
        f"transactional.id=txn-{topic}",
        input="".join(f"txn-{i}\n" for i in range(3)),
    )

    assert secure_broker.security is not None
    props = secure_broker.security.write_properties(
        str(tmp_path / "client.properties"), secure_broker.bootstrap, "alice", "librdkafka"
    )
    group = f"g-{topic}"
    out = kcat(
        "-F",
        props,
        "-G",
        group,
        "-X",
        "auto.offset.reset=earliest",
        "-X",
        "isolation.level=read_committed",
        "-c",
        "8",
        "-f",
        "%s\\n",
        topic,
    )
    want = [f"plain-{i}" for i in range(5)] + [f"txn-{i}" for i in range(3)]
    assert out.splitlines() == want

    # the group's offsets were committed (read back over the same listener)
    consumer = ck.Consumer({**secure_broker.client_config("alice"), "group.id": group})
    try:
        (tp,) = consumer.committed([ck.TopicPartition(topic, 0)], timeout=WAIT_S)
    finally:
        consumer.close()
    assert tp.offset >= len(want)
