"""Metadata right after DeleteTopics, with auto-creation on, as Kafka answers it: the deleted
topic is gone, so the request that auto-creates it again is answered LEADER_NOT_AVAILABLE with
no partitions (Kafka's AutoTopicCreationManager), and a later request sees the new topic."""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, NewTopic

from odradek.testing import Broker
from odradek.testing.raw import RawClient
from odradek.wire import protocol
from odradek.wire.errors import ErrorCode

TIMEOUT = 15
MD = protocol.MetadataRequest


def metadata(c: RawClient, names: list[str]) -> dict[str, tuple[int, int]]:
    """name -> (error code, partition count) of Metadata v12 with auto-creation on."""
    topics = [MD.MetadataRequestTopic(name=n) for n in names]
    req = MD(topics=topics, allow_auto_topic_creation=True)
    return {t.name: (t.error_code, len(t.partitions)) for t in c.request(req, 12).topics}


def test_metadata_right_after_delete_topics_has_no_partitions() -> None:
    with Broker(config={"num.partitions": 3}) as broker:
        admin = AdminClient({"bootstrap.servers": broker.bootstrap})
        futures = admin.create_topics([NewTopic(n, 2, 1) for n in ("gone-a", "gone-b")])
        for future in futures.values():
            future.result(timeout=TIMEOUT)
        with RawClient(broker.bootstrap) as c:
            assert metadata(c, ["gone-a", "gone-b"]) == {"gone-a": (0, 2), "gone-b": (0, 2)}
            for future in admin.delete_topics(["gone-a", "gone-b"]).values():
                future.result(timeout=TIMEOUT)
            leader_not_available = int(ErrorCode.LEADER_NOT_AVAILABLE)
            assert metadata(c, ["gone-a", "gone-b"]) == {
                "gone-a": (leader_not_available, 0),
                "gone-b": (leader_not_available, 0),
            }
            # the auto-creation that followed is done: num.partitions partitions, new topics
            assert metadata(c, ["gone-a", "gone-b"]) == {"gone-a": (0, 3), "gone-b": (0, 3)}
