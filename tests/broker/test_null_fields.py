"""A null where the schema forbids one closes the connection, with one warning and no traceback.

Issue 11 defect 7: an array count of -1 in a non-nullable field used to reach the handlers as
None and raise TypeError there (delete_records, list_offsets, fetch, configs, admin_topics,
groups, offsets, leader_epoch, transactions, txn_admin, produce), logging a traceback. Kafka
rejects such a request while parsing it ("non-nullable field was serialized as null") and closes
the connection; so do we. Every advertised API and version with a non-nullable array is sent a
null in each such field (top-level and one level down), raw, against an in-process broker;
a bystander connection opened before is still served after each API.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from odradek.testing import Broker
from odradek.testing.fuzz import (
    TracebackCatcher,
    advertised_versions,
    framed,
    null_field_bodies,
    request_header,
)
from odradek.testing.raw import RawClient
from odradek.wire import protocol

CASES: dict[int, list[tuple[int, str, bytes]]] = {}
for _key, _version in advertised_versions():
    for _path, _body in null_field_bodies(_key, _version):
        CASES.setdefault(_key, []).append((_version, _path, _body))


@pytest.fixture(scope="module")
def broker() -> Iterator[Broker]:
    with Broker(topics={"fuzz": 1}) as b:
        yield b


def test_every_api_named_in_the_issue_is_covered() -> None:
    named = {21, 2, 1, 32, 33, 44, 19, 20, 37, 11, 14, 15, 42, 8, 9, 47, 23, 24, 28, 65, 66, 0}
    assert named <= set(CASES), sorted(named - set(CASES))


@pytest.mark.parametrize("api_key", sorted(CASES), ids=lambda k: protocol.request_class(k).__name__)
def test_null_in_a_non_nullable_array_closes_only_that_connection(
    broker: Broker, api_key: int, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING)
    with RawClient(broker.bootstrap) as bystander, TracebackCatcher() as catcher:
        bystander.request(protocol.ApiVersionsRequest(), 0)
        for version, path, body in CASES[api_key]:
            caplog.clear()
            with RawClient(broker.bootstrap) as bad:
                bad.send(framed(request_header(api_key, version, 42) + body))
                assert bad.outcome() == "closed", f"v{version} {path}"
            closing = [r for r in caplog.records if "closing connection" in r.getMessage()]
            assert len(closing) == 1, (version, path, caplog.text)
            assert closing[0].levelno == logging.WARNING
            assert "null in" in closing[0].getMessage(), closing[0].getMessage()
        assert not catcher.bad, [r.getMessage() for r in catcher.bad]
        assert not [r for r in caplog.records if r.exc_info], caplog.text
        resp = bystander.request(protocol.ApiVersionsRequest(), 0)
        assert resp.error_code == 0
