"""ApiVersions: odradek's answer against each reference's, key by key.

Kafka 4.4 is the reference for every key's range and for the feature levels; Kafka 3.9 for
the lowest versions (4.x dropped the old ones, KIP-896; odradek keeps serving them).
"""

from __future__ import annotations

from typing import Any

from compat_tests.harness import BrokerProcess
from compat_tests.reference.diff import Checker
from compat_tests.reference.kafka_ref import KafkaReference
from compat_tests.reference.raw_requests import send
from odradek.wire import protocol
from odradek.wire.api_keys import ApiKey

SPEC = {"client_software_name": "odradek-ref", "client_software_version": "1"}


def api_versions(bootstrap: str) -> Any:
    resp = send(bootstrap, protocol._REQUESTS[18], SPEC, 3)
    assert not isinstance(resp, str) and resp.error_code == 0, resp
    return resp


# Kafka's names of the keys odradek's ApiKey lacks (org.apache.kafka.common.protocol.ApiKeys)
KAFKA_ONLY_KEYS = {
    38: "CREATE_DELEGATION_TOKEN",
    39: "RENEW_DELEGATION_TOKEN",
    40: "EXPIRE_DELEGATION_TOKEN",
    41: "DESCRIBE_DELEGATION_TOKEN",
    57: "UPDATE_FEATURES",
    64: "UNREGISTER_BROKER",
    80: "ADD_RAFT_VOTER",
    81: "REMOVE_RAFT_VOTER",
    83: "INITIALIZE_SHARE_GROUP_STATE",
    87: "READ_SHARE_GROUP_STATE_SUMMARY",
    88: "STREAMS_GROUP_HEARTBEAT",
    89: "STREAMS_GROUP_DESCRIBE",
    93: "STREAMS_GROUP_TOPOLOGY_DESCRIPTION_UPDATE",
    94: "UNREGISTER_CONTROLLER",
}


def _key_name(key: int) -> str:
    try:
        return ApiKey(key).name
    except ValueError:
        return KAFKA_ONLY_KEYS.get(key, str(key))


def ranges(resp: Any, mins_only: bool = False) -> dict[str, object]:
    return {
        f"{k.api_key} {_key_name(k.api_key)}": k.min_version
        if mins_only
        else f"{k.min_version}-{k.max_version}"
        for k in resp.api_keys
    }


def test_api_keys_and_ranges_match_kafka_44(
    odradek_broker: BrokerProcess, kafka44: KafkaReference
) -> None:
    ours, theirs = api_versions(odradek_broker.bootstrap), api_versions(kafka44.bootstrap)
    Checker("4.4").check("ApiVersions v3 ranges", ranges(ours), ranges(theirs))


def test_feature_levels_match_kafka_44(
    odradek_broker: BrokerProcess, kafka44: KafkaReference
) -> None:
    def features(resp: Any) -> dict[str, object]:
        return {
            "supported": {
                f.name: f"{f.min_version}-{f.max_version}" for f in resp.supported_features
            },
            "finalized": {
                f.name: f"{f.min_version_level}-{f.max_version_level}"
                for f in resp.finalized_features
            },
            "zk_migration_ready": resp.zk_migration_ready,
        }

    ours, theirs = api_versions(odradek_broker.bootstrap), api_versions(kafka44.bootstrap)
    Checker("4.4").check("ApiVersions v3 features", features(ours), features(theirs))


def test_lowest_versions_match_kafka_39(
    odradek_broker: BrokerProcess, kafka39: KafkaReference
) -> None:
    ours = ranges(api_versions(odradek_broker.bootstrap), mins_only=True)
    theirs = ranges(api_versions(kafka39.bootstrap), mins_only=True)
    common = set(ours) & set(theirs)
    assert common, (ours, theirs)
    Checker("3.9").check(
        "ApiVersions v3 lowest versions",
        {k: ours[k] for k in common},
        {k: theirs[k] for k in common},
    )
