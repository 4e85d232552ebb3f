"""Property test: decoded but hostile requests never make a handler or its encoder fail.

For every API key and version the broker serves (its handler registry), hypothesis builds
requests from Kafka's JSON message definitions whose every field is a hostile value the schema
still allows (`odradek.testing.hostile`): nulls where the field is nullable, the extreme integers
of its type, NaN and infinities, empty, 32,767-byte and illegal names, the zero, a known and an
unknown id, the known topic, an internal one and none, arrays empty, null or holding the same
element twice. Each is sent, well-formed, to a real in-process broker; what must follow is an
answer or a closed connection and nothing logged with a traceback or at ERROR (a handler's
exception, an encoder's `struct.error`, a task's unretrieved exception). A request the broker
holds (a long poll, a join waiting for a rebalance) is let go after HOLD_S.

ODRADEK_PROPERTY_EXAMPLES (default 8) sets the examples per key and version (about 270 of
them), which keeps the run bounded in CI; examples are derandomized, so a failure replays
(ODRADEK_PROPERTY_RANDOM=1 draws new ones each run, for a longer search).
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Iterator
from functools import cache
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.testing import Broker
from odradek.testing.fuzz import TracebackCatcher, advertised_versions, encode, framed
from odradek.testing.hostile import TOPIC, resolve, values
from odradek.testing.raw import Closed, RawClient
from odradek.wire import protocol

EXAMPLES = int(os.environ.get("ODRADEK_PROPERTY_EXAMPLES", "8"))
HOLD_S = 1.0  # how long an answer is waited for before the request counts as held
KEYS = advertised_versions()

settings.register_profile(
    "hostile-requests",
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=not os.environ.get("ODRADEK_PROPERTY_RANDOM"),
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def _field(f: Any, version: int) -> st.SearchStrategy[Any]:
    nullable = f.nullable_for_version_q(version)
    if f.is_array():
        element = (
            _struct(f, version)
            if f.is_struct_array()
            else st.sampled_from(values(f.array_of, version))
        )
        # the same element twice first: hypothesis starts from (and shrinks to) the first
        lists = st.one_of(element.map(lambda e: [e, e]), st.lists(element, max_size=3))
        return st.one_of(lists, st.none()) if nullable else lists
    if f.is_struct():
        value = _struct(f, version)
        return st.one_of(value, st.none()) if nullable else value
    return st.sampled_from(values(f, version))


def _struct(f: Any, version: int) -> st.SearchStrategy[Any]:
    fields = {g.name: _field(g, version) for g in f.untagged_fields(version)}
    return st.fixed_dictionaries(fields).map(lambda drawn: (f, drawn))


@cache
def request_strategy(api_key: int, version: int) -> st.SearchStrategy[dict[str, Any]]:
    cls = protocol.request_class(api_key)
    return st.fixed_dictionaries(
        {g.name: _field(g, version) for g in cls._struct.untagged_fields(version)}
    )


def build(value: Any, version: int, topic_id: Any) -> Any:
    """Drawn values as kafka-python objects, the known topic's id filled in."""
    if isinstance(value, list):
        return [build(v, version, topic_id) for v in value]
    if isinstance(value, tuple):
        f, drawn = value
        fields = {k: build(v, version, topic_id) for k, v in drawn.items()}
        return f.data_class(version=version, **fields)
    return resolve(value, topic_id)


class Target:
    """The broker under test and one connection to it, opened again once closed."""

    def __init__(self, broker: Broker) -> None:
        self.broker = broker
        self.topic_id = broker.call(lambda server: server.topics.info(TOPIC).topic_id)
        self.client: RawClient | None = None

    def send(self, payload: bytes) -> None:
        if self.client is None:
            self.client = RawClient(self.broker.bootstrap)
        try:
            self.client.send(framed(payload))
            outcome = self.client.outcome(HOLD_S)
        except Closed:
            outcome = "closed"
        if not isinstance(outcome, bytes):  # closed, or held: the next request gets a new one
            self.client.close()
            self.client = None

    def close(self) -> None:
        if self.client is not None:
            self.client.close()


@pytest.fixture(scope="module")
def target() -> Iterator[Target]:
    config = {"group.initial.rebalance.delay.ms": "0", "auto.create.topics.enable": "true"}
    with Broker(topics={TOPIC: 2, "fuzz-other": 1}, config=config) as broker:
        t = Target(broker)
        try:
            yield t
        finally:
            t.close()


def report(catcher: TracebackCatcher) -> str:
    lines = []
    for record in catcher.bad:
        lines.append(f"{record.levelname} {record.name}: {record.getMessage()}")
        if record.exc_info:
            lines.append("".join(traceback.format_exception(*record.exc_info)))
    return "\n".join(lines)


@pytest.mark.parametrize(
    "api_key,version",
    KEYS,
    ids=[f"{protocol.request_class(k).__name__}-v{v}" for k, v in KEYS],
)
def test_hostile_values_get_an_answer_not_a_traceback(
    target: Target, api_key: int, version: int
) -> None:
    cls = protocol.request_class(api_key)

    @settings(settings.get_profile("hostile-requests"))
    @given(drawn=request_strategy(api_key, version))
    def check(drawn: dict[str, Any]) -> None:
        fields = {k: build(v, version, target.topic_id) for k, v in drawn.items()}
        payload = encode(cls(version=version, **fields), version, 4242)
        with TracebackCatcher() as catcher:
            target.send(payload)
        assert not catcher.bad, report(catcher)

    check()
