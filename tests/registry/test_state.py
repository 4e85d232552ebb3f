"""Replaying `_schemas` records as Confluent's registry writes them (key fields in any order,
`schemaType` absent for Avro, NOOP keys) into the registry's state."""

from __future__ import annotations

import json

from odradek.registry.state import State


def rec(key: dict[str, object], value: dict[str, object] | None) -> tuple[bytes, bytes | None]:
    return json.dumps(key).encode(), None if value is None else json.dumps(value).encode()


def test_replay_of_confluent_records() -> None:
    state = State()
    records = [
        rec({"keytype": "NOOP", "magic": 0}, None),
        rec(
            {"magic": 1, "keytype": "SCHEMA", "subject": "s", "version": 1},
            {"subject": "s", "version": 1, "id": 7, "schema": '"string"', "deleted": False},
        ),
        rec(
            {"keytype": "SCHEMA", "subject": "s", "version": 2, "magic": 1},
            {
                "subject": "s",
                "version": 2,
                "id": 9,
                "schemaType": "JSON",
                "schema": "{}",
                "references": [{"name": "r", "subject": "o", "version": 1}],
                "deleted": False,
            },
        ),
        rec({"keytype": "CONFIG", "subject": None, "magic": 0}, {"compatibilityLevel": "FULL"}),
        rec({"keytype": "MODE", "subject": "s", "magic": 0}, {"mode": "READONLY"}),
        rec(
            {"keytype": "DELETE_SUBJECT", "subject": "s", "magic": 0},
            {"subject": "s", "version": 1},
        ),
        (b"not json", b"{"),
        rec({"keytype": "SCHEMA", "subject": "s", "magic": 1}, {"id": 1}),  # no version
    ]
    for key, value in records:
        state.apply(key, value)
    assert [v.version for v in state.live("s")] == [2]
    assert [v.version for v in state.live("s", deleted=True)] == [1, 2]
    assert state.by_id[7].schema_type == "AVRO"
    assert state.by_id[9].schema_type == "JSON"
    assert state.by_id[9].references == [{"name": "r", "subject": "o", "version": 1}]
    assert state.max_id == 9
    assert state.compatibility("s") == "FULL"
    assert state.mode("s") == "READONLY"
    assert state.mode(None) == "READWRITE"
    state.apply(*rec({"keytype": "CONFIG", "subject": None, "magic": 0}, None))
    assert state.compatibility(None) == "BACKWARD"
