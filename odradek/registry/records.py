"""The `_schemas` topic's records in the format Confluent's registry (and Karapace) write, so
either can take over the topic. Keys and values are JSON:

    SCHEMA          {"keytype":"SCHEMA","subject":s,"version":v,"magic":1}
                    -> {"subject","version","id","schemaType"?,"schema","references"?,"deleted"}
                    (a null value: the version was deleted permanently)
    CONFIG          {"keytype":"CONFIG","subject":s|null,"magic":0} -> {"compatibilityLevel"}
    MODE            {"keytype":"MODE","subject":s|null,"magic":0} -> {"mode"}
    DELETE_SUBJECT  {"keytype":"DELETE_SUBJECT","subject":s,"magic":0} -> {"subject","version"}
"""

from __future__ import annotations

import json


def _dump(obj: dict[str, object]) -> bytes:
    return json.dumps(obj, separators=(",", ":")).encode()


def schema_key(subject: str, version: int) -> bytes:
    return _dump({"keytype": "SCHEMA", "subject": subject, "version": version, "magic": 1})


def config_key(subject: str | None) -> bytes:
    return _dump({"keytype": "CONFIG", "subject": subject, "magic": 0})


def mode_key(subject: str | None) -> bytes:
    return _dump({"keytype": "MODE", "subject": subject, "magic": 0})


def delete_subject_key(subject: str) -> bytes:
    return _dump({"keytype": "DELETE_SUBJECT", "subject": subject, "magic": 0})


def value(obj: dict[str, object] | None) -> bytes | None:
    return None if obj is None else _dump(obj)
