"""CreateTopics naming many topics, and several CreateTopics at once, are written to the metadata
store together (one save per request, shared by requests ready at the same time, issue 17): every
topic a client was told was created is still there after the broker dies (kill -9) and starts
again, with the same id and partitions, and a name raced by two requests is created once."""

from __future__ import annotations

from typing import Any

from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing import Broker

TIMEOUT_S = 60.0


def outcomes(futures: dict[str, Any]) -> dict[str, str | None]:
    """topic -> None when created, else the error's name."""
    out: dict[str, str | None] = {}
    for name, fut in futures.items():
        try:
            fut.result(timeout=TIMEOUT_S)
            out[name] = None
        except KafkaException as exc:
            out[name] = exc.args[0].name()
    return out


def described(admin: AdminClient, names: list[str]) -> dict[str, tuple[str, int]]:
    """topic -> (topic id, partition count), as the broker describes them."""
    futures = admin.describe_topics(TopicCollection(names), request_timeout=TIMEOUT_S)
    out = {}
    for name, fut in futures.items():
        d = fut.result(timeout=TIMEOUT_S)
        out[name] = (str(d.topic_id), len(d.partitions))
    return out


def test_topics_of_one_and_of_parallel_requests_survive_a_crash() -> None:
    with Broker() as b:
        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        # one request naming many topics (one of them twice in another request below)
        one = outcomes(
            admin.create_topics(
                [NewTopic(f"one-{i}", 3, 1) for i in range(40)], request_timeout=TIMEOUT_S
            )
        )
        assert one == {f"one-{i}": None for i in range(40)}
        # parallel requests: sent before any answer is read; "raced" is named by two of them,
        # "one-0" already exists
        sent = [
            admin.create_topics(
                [NewTopic(f"par-{r}-{i}", 2, 1) for i in range(10)]
                + ([NewTopic("raced", 4, 1)] if r < 2 else [])
                + ([NewTopic("one-0", 1, 1)] if r == 3 else []),
                request_timeout=TIMEOUT_S,
            )
            for r in range(6)
        ]
        results = [outcomes(f) for f in sent]
        for r, res in enumerate(results):
            assert all(res[f"par-{r}-{i}"] is None for i in range(10)), res
        raced = [res["raced"] for res in results[:2]]
        assert sorted(raced, key=str) == [None, "TOPIC_ALREADY_EXISTS"]
        assert results[3]["one-0"] == "TOPIC_ALREADY_EXISTS"
        expected = (
            {f"one-{i}": 3 for i in range(40)}
            | {f"par-{r}-{i}": 2 for r in range(6) for i in range(10)}
            | {"raced": 4}
        )
        before = described(admin, list(expected))
        assert {n: before[n][1] for n in expected} == expected

        b.restart(abrupt=True)

        admin = AdminClient({"bootstrap.servers": b.bootstrap})
        after = described(admin, list(expected))
        assert after == before
        # and the restarted broker still refuses them as existing
        again = outcomes(admin.create_topics([NewTopic("par-5-9", 2, 1)]))
        assert again == {"par-5-9": "TOPIC_ALREADY_EXISTS"}
