"""The throttled-producer row: the rate a producer over its `producer_byte_rate` quota achieves.

The quota is set on the producer's client-id with AlterClientQuotas (key 49, raw request: works
against Kafka too), then one producer sends 1 KiB values as fast as it can for `periods` quota
periods. Kafka's quota rate is measured over quota.window.num (11) samples of
quota.window.size.seconds (1), at least 10 s: a producer gets about 10 s of quota at once, is
then throttled (throttle_time_ms, a muted connection) until that burst's sample expires 11 s
later, and bursts again: a sawtooth whose period is 11 s. Over whole periods the rate is the
quota; the row's MB/s is bytes delivered over the run (whole periods, less half a second so the
next burst is not counted), the note adds the largest throttle time. What is still queued at the
end is purged, not waited for (it would wait for the next burst). The quota is removed after.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from confluent_kafka import KafkaError, Message, Producer

from bench.workloads import ClientSettings, PhaseError, PhaseResult

CLIENT_ID = "odradek-bench-throttled"
VALUE_SIZE = 1024
PERIOD_S = 11.0  # quota.window.num x quota.window.size.seconds, Kafka's defaults
_QUEUE_LIMIT = 2000  # messages waiting in librdkafka: enough to keep the producer over quota


def set_quota(bootstrap: str, client_id: str, rate: float | None) -> None:
    """producer_byte_rate of `client_id` (None: remove it), with a raw AlterClientQuotas."""
    from kafka.protocol.admin import AlterClientQuotasRequest as A

    from odradek.testing.raw import RawClient

    op = A.EntryData.OpData(key="producer_byte_rate", value=rate or 0.0, remove=rate is None)
    entity = A.EntryData.EntityData(entity_type="client-id", entity_name=client_id)
    req = A(entries=[A.EntryData(entity=[entity], ops=[op])], validate_only=False)
    with RawClient(bootstrap) as client:
        resp = client.request(req, 0)
    entry = resp.entries[0]
    if entry.error_code:
        raise PhaseError(f"AlterClientQuotas: error {entry.error_code} {entry.error_message}")


def throttled_produce(
    settings: ClientSettings, topic: str, quota: float, periods: int
) -> tuple[PhaseResult, int]:
    """Produce over `quota` bytes/s for `periods` quota periods; (result, largest throttle ms)."""
    deliveries: list[tuple[float, int]] = []
    throttles: list[int] = []
    errors = 0

    def delivered(err: KafkaError | None, msg: Message) -> None:
        nonlocal errors
        if err is None:
            deliveries.append((time.monotonic(), len(msg.value() or b"")))
        elif err.code() != KafkaError._PURGE_QUEUE:
            errors += 1

    def throttled(event: Any) -> None:
        throttles.append(round(event.throttle_time * 1000))  # librdkafka gives seconds

    config = {**settings.producer_config(), "client.id": CLIENT_ID, "throttle_cb": throttled}
    producer = Producer(config)
    value = b"q" * VALUE_SIZE
    started = time.monotonic()
    deadline = started + max(1, periods) * PERIOD_S - 0.5
    sent = 0
    while time.monotonic() < deadline:
        if len(producer) < _QUEUE_LIMIT:
            producer.produce(
                topic, value, partition=sent % settings.partitions, on_delivery=delivered
            )
            sent += 1
            if sent % 256:
                continue
        producer.poll(0.01)
    producer.purge(in_queue=True, in_flight=False)
    producer.flush(settings.phase_timeout_s)
    if not throttles or max(throttles) <= 0:
        raise PhaseError(f"the producer was never throttled (quota {quota:.0f} bytes/s)")
    elapsed = (deliveries[-1][0] - started) if deliveries else 0.0
    value_bytes = sum(n for _, n in deliveries)
    print(
        f"bench: throttled produce: {value_bytes / max(elapsed, 1e-9) / 1e6:.2f} MB/s against "
        f"{quota / 1e6:.2f} MB/s over {elapsed:.1f} s",
        file=sys.stderr,
        flush=True,
    )
    result = PhaseResult(
        records=len(deliveries),
        value_bytes=value_bytes,
        elapsed_s=elapsed,
        errors=errors,
        client_errors=0,
        measured_records=len(deliveries),
        measured_bytes=value_bytes,
    )
    return result, max(throttles)
