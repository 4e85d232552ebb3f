"""Every request variant of raw_requests.py, at every version odradek and Kafka both serve,
response against response, field by field.

Kafka 4.4 answers the versions it serves; Kafka 3.9 answers the versions 4.x removed (KIP-896)
that odradek still serves. Each broker gets the same prepared topic and group first
(raw_requests.prepare), under names that differ only in a random suffix the comparison masks.
"""

from __future__ import annotations

import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import pytest

from compat_tests.harness import BrokerProcess
from compat_tests.reference.conftest import ReferencePool
from compat_tests.reference.diff import Checker
from compat_tests.reference.kafka_ref import KafkaReference
from compat_tests.reference.raw_requests import (
    VARIANTS,
    Ctx,
    Variant,
    default_variants,
    prepare,
    send,
)
from odradek.wire import protocol

Ranges = dict[int, tuple[int, int]]

# Versions Kafka 4.x still lists in ApiVersions but refuses (it closes the connection): Produce
# v0-2 stay listed only for old librdkafka builds (KAFKA-18659). Kafka 3.9 is their reference.
REFUSED_BY_4: dict[int, range] = {0: range(0, 3)}

# The keys odradek and Kafka 4.4 both serve (test_api_versions.py checks the ranges themselves).
COMMON_KEYS = [
    0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27,
    28, 29, 30, 31, 32, 33, 34, 35, 36, 37, 42, 43, 44, 45, 46, 47, 48, 49, 50, 51, 55, 60, 61,
    65, 66, 68, 69, 74, 75, 76, 77, 78, 79, 90, 91, 92,
]  # fmt: skip


def api_ranges(bootstrap: str) -> Ranges:
    spec = {"client_software_name": "odradek-ref", "client_software_version": "1"}
    resp = send(bootstrap, protocol._REQUESTS[18], spec, 3)
    assert not isinstance(resp, str), resp
    return {k.api_key: (k.min_version, k.max_version) for k in resp.api_keys}


@dataclass
class Side:
    """One reference broker with its prepared state and odradek's prepared twin."""

    reference: KafkaReference
    ours: Ctx
    theirs: Ctx
    ranges: Ranges
    checker: Checker


@dataclass
class Sides:
    odradek: BrokerProcess
    ours_ranges: Ranges
    by_ref: dict[str, Side]

    def plan(self, variant: Variant) -> list[tuple[str, int]]:
        """(reference, version) pairs: 4.4 for what it serves, 3.9 for what 4.x removed."""
        key = variant.key
        cls_versions = range(variant.cls.min_version, variant.cls.max_version + 1)
        out = []
        ours = self.ours_ranges.get(key)
        if ours is None:
            return out
        k44 = self.by_ref["4.4"].ranges.get(key)
        k39 = self.by_ref["3.9"].ranges.get(key)
        for v in range(max(ours[0], variant.min_version), ours[1] + 1):
            if v not in cls_versions or (variant.only and v not in variant.only):
                continue
            if k44 and k44[0] <= v <= k44[1] and v not in REFUSED_BY_4.get(key, ()):
                out.append(("4.4", v))
            elif k39 and k39[0] <= v <= k39[1]:
                out.append(("3.9", v))
        return out


@pytest.fixture(scope="module")
def sides(odradek_broker: BrokerProcess, reference_pool: ReferencePool) -> Sides:
    by_ref = {}
    for ref in ("4.4", "3.9"):
        kafka = reference_pool.get(ref)
        token = uuid.uuid4().hex[:8]
        by_ref[ref] = Side(
            kafka,
            prepare(odradek_broker.bootstrap, token),
            prepare(kafka.bootstrap, token),
            api_ranges(kafka.bootstrap),
            Checker(ref),
        )
    return Sides(odradek_broker, api_ranges(odradek_broker.bootstrap), by_ref)


ALL = VARIANTS + default_variants(COMMON_KEYS)


@pytest.mark.parametrize("variant", ALL, ids=[f"{v.key}-{v.label}" for v in ALL])
def test_response_matches_kafka(variant: Variant, sides: Sides) -> None:
    plan = sides.plan(variant)
    assert plan, f"no version of {variant.name} is served by odradek and a reference"
    jobs = [
        (ref, version, bootstrap, ctx)
        for ref, version in plan
        for bootstrap, ctx in (
            (sides.odradek.bootstrap, sides.by_ref[ref].ours),
            (sides.by_ref[ref].reference.bootstrap, sides.by_ref[ref].theirs),
        )
    ]

    def answer(job: tuple[str, int, str, Ctx]) -> object:
        _ref, version, bootstrap, ctx = job
        spec = variant.spec(ctx, version)
        resp = send(bootstrap, variant.cls, spec, version, variant.wait, variant.probe)
        return variant.project(resp) if variant.project else resp

    if variant.concurrent:
        with ThreadPoolExecutor(len(jobs)) as pool:
            answers = list(pool.map(answer, jobs))
    else:
        answers = [answer(job) for job in jobs]
    failures = []
    for i, (ref, version) in enumerate(plan):
        ours, theirs = answers[2 * i], answers[2 * i + 1]
        try:
            sides.by_ref[ref].checker.check(variant.name, ours, theirs, version=version)
        except AssertionError as exc:
            failures.append(f"v{version}: {exc}")
    assert not failures, "\n".join(failures)
