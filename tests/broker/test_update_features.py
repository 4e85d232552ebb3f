"""UpdateFeatures (key 57) and the features in ApiVersions (KIP-584): transaction.version
finalized and changed on a running broker, refused out of range, refused as a downgrade without
a downgrade type, checked without change under validate_only; a new broker finalizes
transaction.version 2 as Kafka 4.x formats a new cluster, and keeps what UpdateFeatures finalized
across a restart (odradek/broker/features.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from odradek.testing import Broker
from odradek.testing.raw import RawClient
from odradek.wire import protocol
from odradek.wire.errors import ErrorCode

UF = protocol.UpdateFeaturesRequest
UPGRADE, SAFE_DOWNGRADE = 1, 2
BASE = {"group.version": 1, "streams.version": 1}  # finalized from the start, as Kafka 4.4's


@pytest.fixture
def broker() -> Iterator[Broker]:
    with Broker() as b:
        yield b


def finalized(raw: RawClient) -> dict[str, int]:
    resp = raw.request(
        protocol.ApiVersionsRequest(client_software_name="t", client_software_version="1"), 3
    )
    return {f.name: f.max_version_level for f in resp.finalized_features}


def update(
    raw: RawClient,
    level: int,
    kind: int = UPGRADE,
    validate_only: bool = False,
    feature: str = "transaction.version",
) -> int:
    req = UF(
        timeout_ms=5000,
        feature_updates=[
            UF.FeatureUpdateKey(feature=feature, max_version_level=level, upgrade_type=kind)
        ],
        validate_only=validate_only,
    )
    resp = raw.request(req, 1)
    assert [r.error_code for r in resp.results] == [resp.error_code]
    return resp.error_code


def test_transaction_version_upgrade_and_downgrade() -> None:
    with Broker(config={"transaction.version": 0}) as broker, RawClient(broker.bootstrap) as raw:
        assert finalized(raw) == BASE
        assert update(raw, 2, validate_only=True) == ErrorCode.NONE
        assert finalized(raw) == BASE
        assert update(raw, 3) == ErrorCode.INVALID_UPDATE_VERSION
        assert update(raw, 2) == ErrorCode.NONE
        assert finalized(raw) == {**BASE, "transaction.version": 2}
        assert update(raw, 1) == ErrorCode.INVALID_UPDATE_VERSION  # not marked a downgrade
        assert update(raw, 0, SAFE_DOWNGRADE) == ErrorCode.NONE
        assert finalized(raw) == BASE


def test_streams_version_gates_the_streams_group_apis(broker: Broker) -> None:
    """KIP-1071: keys 88/89 are listed while streams.version >= 1, as Kafka gates them."""

    def keys(raw: RawClient) -> set[int]:
        req = protocol.ApiVersionsRequest(client_software_name="t", client_software_version="1")
        return {k.api_key for k in raw.request(req, 3).api_keys}

    with RawClient(broker.bootstrap) as raw:
        assert {88, 89} <= keys(raw)
        assert update(raw, 0, SAFE_DOWNGRADE, feature="streams.version") == ErrorCode.NONE
        assert not {88, 89} & keys(raw)
        assert update(raw, 1, feature="streams.version") == ErrorCode.NONE
        assert {88, 89} <= keys(raw)


def test_a_new_broker_finalizes_transaction_version_2_and_keeps_changes(tmp_path: Path) -> None:
    with Broker(data_dir=str(tmp_path)) as broker, RawClient(broker.bootstrap) as raw:
        assert finalized(raw) == {**BASE, "transaction.version": 2}
        assert update(raw, 0, SAFE_DOWNGRADE) == ErrorCode.NONE
    with Broker(data_dir=str(tmp_path)) as broker, RawClient(broker.bootstrap) as raw:
        assert finalized(raw) == BASE
