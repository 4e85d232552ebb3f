"""Client quotas, odradek against Apache Kafka 4.4: what DescribeClientQuotas lists after an
AlterClientQuotas, and whether a producer over its byte rate is told to back off (a throttle
time above zero in its Produce answer; the length itself is each broker's estimate)."""

from __future__ import annotations

import time
import uuid
from typing import Any

from compat_tests.harness import BrokerProcess
from compat_tests.reference.diff import Checker
from compat_tests.reference.kafka_ref import KafkaReference
from compat_tests.reference.raw_requests import Ctx, _produce, build, send
from odradek.testing.raw import RawClient
from odradek.wire import protocol
from odradek.wire.records import build_batch


def _quota_spec(client_id: str, rate: float) -> dict[str, Any]:
    return {
        "entries": [
            {
                "entity": [{"entity_type": "client-id", "entity_name": client_id}],
                "ops": [{"key": "producer_byte_rate", "value": rate, "remove": False}],
            }
        ],
        "validate_only": False,
    }


def _produce_as(bootstrap: str, client_id: str, spec: dict[str, Any]) -> Any:
    req = build(protocol._REQUESTS[0], spec)
    with RawClient(bootstrap) as client:
        cid, data = client.encode(req, 9, client_id=client_id)
        client.send(data)
        payload = client.read_frame()
    return protocol._RESPONSES[0].decode(payload, version=9, header=True)


def test_producer_quota_is_listed_and_throttles(
    odradek_broker: BrokerProcess, kafka44: KafkaReference
) -> None:
    def scenario(bootstrap: str) -> object:
        token = uuid.uuid4().hex[:8]
        client_id = f"ref_slow_{token}"
        altered = send(bootstrap, protocol._REQUESTS[49], _quota_spec(client_id, 1024.0), 1)
        spec = {
            "components": [{"entity_type": "client-id", "match_type": 0, "match": client_id}],
            "strict": True,
        }
        # Kafka applies the quota from its metadata log a moment after answering: poll, bounded
        deadline = time.monotonic() + 15
        while True:
            described = send(bootstrap, protocol._REQUESTS[48], spec, 1)
            assert not isinstance(described, str), described
            if described.entries or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        ctx = Ctx(token)
        created = send(
            bootstrap,
            protocol._REQUESTS[19],
            {"topics": [{"name": ctx.topic, "num_partitions": 1, "replication_factor": 1}]},
            5,
        )
        assert not isinstance(created, str) and created.topics[0].error_code == 0, created
        big = build_batch([(None, b"x" * 50_000, [], 1_700_000_000_000 + i) for i in range(4)])
        throttled = []
        for _ in range(3):  # NOT_LEADER_OR_FOLLOWER (6) while the new partition's leader starts
            resp = _produce_as(bootstrap, client_id, _produce(ctx, 0, big, acks=1))
            part = resp.responses[0].partition_responses[0]
            throttled.append((part.error_code, resp.throttle_time_ms > 0))
        return {
            "alter": altered,
            "describe": described,
            # the first answers that appended, whether each was throttled
            "throttled": [t for t in throttled if t[0] != 6][:1],
        }

    ours = scenario(odradek_broker.bootstrap)
    theirs = scenario(kafka44.bootstrap)
    assert isinstance(theirs, dict) and theirs["throttled"] == [(0, True)], theirs  # set-up check
    Checker("4.4").check("client-id producer quota", ours, theirs)
