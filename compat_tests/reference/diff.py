"""Comparing what a client observes from odradek and from Apache Kafka, field by field.

`plain()` turns a kafka-python response (or anything a client returns) into dicts, lists and
scalars; `normalise()` masks what legitimately differs between two brokers (cluster and topic
ids, ports, throttle times, timestamps, allocated producer and member ids, error wording) and
the random suffixes of the names the scenarios create (`ref_<label>_<8 hex>` becomes
`<label>`); `differences()` lists every path where the two plain values differ.

Observed differences are checked against `docs/kafka-differences.md` (`KNOWN`): a difference
must be listed there as `kept` (with its reason) or the test fails; a row marked `fixed` that
shows up again is a regression and fails too. With ODRADEK_REFERENCE_RECORD=<file> set, the
tests append what they observe to that file instead of failing (`python -m
compat_tests.reference.differences` uses it to rewrite the page).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "kafka-differences.md"
RECORD_ENV = "ODRADEK_REFERENCE_RECORD"

# Fields whose value is the broker's own business: masked wherever they appear.
MASKED: frozenset[str] = frozenset(
    {
        "throttle_time_ms",
        "cluster_id",
        "topic_id",
        "host",
        "port",
        "error_message",
        "log_append_time_ms",
        "log_append_time",
        "session_id",
        "member_id",
        "producer_id",
        "producer_epoch",
        "path",
        "log_dir",
        "incarnation_id",
        "epoch_start_time_ms",
        "last_timestamp",
        "transaction_start_time_ms",
        "current_txn_start_offset",
        "coordinator_epoch",
        "finalized_features_epoch",
        "leader_epoch_start",
        "total_bytes",
        "usable_bytes",
        "size",
        "client_id",
        "client_host",
        "member_host",
        "leader",
    }
)
_NAME = re.compile(r"ref_([a-z0-9]+)_[0-9a-f]{8}")
_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")
# List elements are matched by the first of these keys they carry, not by position (the order
# of topics, partitions and configs in a response is not part of Kafka's contract).
_IDENTITY = (
    "api_key",
    "name",
    "topic",
    "topic_name",
    "group_id",
    "transactional_id",
    "partition_index",
    "partition",
    "resource_name",
    "key",
)


def records_plain(data: bytes) -> object:
    """A records field as its batches and records (kafka-python's reader), or hex if it does
    not parse: a difference then names the batch field that differs."""
    from kafka.record import MemoryRecords

    out: list[object] = []
    try:
        records = MemoryRecords(data)
        while (batch := records.next_batch()) is not None:
            head: dict[str, object] = {
                k: getattr(batch, k, None)
                for k in ("base_offset", "magic", "compression_type", "timestamp_type")
            }
            if batch.magic == 2:
                head.update(
                    {
                        k: getattr(batch, k)
                        for k in (
                            "attributes", "leader_epoch", "last_offset_delta", "producer_id",
                            "producer_epoch", "base_sequence", "first_timestamp",
                            "max_timestamp", "crc",
                        )
                    }
                )  # fmt: skip
            head["records"] = [
                {
                    "offset": r.offset,
                    "timestamp": r.timestamp,
                    "key": r.key,
                    "value": r.value,
                    "headers": list(getattr(r, "headers", []) or []),
                }
                for r in batch
            ]
            out.append(head)
        if records.has_next():
            out.append({"partial tail bytes": len(data)})
    except Exception as exc:  # noqa: BLE001 - shown as the observation
        out.append({"unparsable": f"{type(exc).__name__}", "hex": bytes(data).hex()})
    return plain(out)


def plain(value: object) -> object:
    """Dicts, lists and scalars from kafka-python messages, namedtuples and client objects."""
    fields = getattr(value, "fields", None)
    if isinstance(fields, Mapping) and hasattr(value, "encode"):  # a kafka-python message
        out = {}
        for name in fields:
            item = getattr(value, name, None)
            if name == "records" and isinstance(item, bytes | bytearray | memoryview):
                out[name] = records_plain(bytes(item))
            else:
                out[name] = plain(item)
        return out
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, tuple) and hasattr(value, "_asdict"):
        return {k: plain(v) for k, v in value._asdict().items()}
    if isinstance(value, list | tuple | set | frozenset):
        items = [plain(v) for v in value]
        return sorted(items, key=repr) if isinstance(value, set | frozenset) else items
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value).hex()
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _mask(key: str, value: object) -> object:
    """Masks a value but keeps "none" ("", -1, 0, null) visible: that difference matters."""
    if key in ("error_message", "throttle_time_ms"):
        return f"<{key}>"
    if value is None or value is False or value in ("", -1, 0):
        return value
    return f"<{key}>"


def normalise(value: object, extra_masked: Iterable[str] = ()) -> object:
    """`plain(value)` with MASKED (and `extra_masked`) fields and scenario names replaced."""
    masked = MASKED | frozenset(extra_masked)

    def walk(v: object, key: str | None) -> object:
        if isinstance(v, dict):
            return {k: (_mask(k, x) if k in masked else walk(x, k)) for k, x in v.items()}
        if isinstance(v, list):
            return [walk(x, key) for x in v]
        if isinstance(v, str):
            return _UUID.sub("<uuid>", _NAME.sub(lambda m: f"<{m.group(1)}>", v))
        return v

    return walk(plain(value), None)


def _identity(item: object) -> str | None:
    if isinstance(item, dict):
        for key in _IDENTITY:
            if key in item and not isinstance(item[key], dict | list):
                return f"{key}={item[key]}"
    return None


def differences(ours: object, theirs: object, path: str = "") -> list[tuple[str, object, object]]:
    """(path, odradek's value, Kafka's value) wherever two normalised values differ."""
    if isinstance(ours, dict) and isinstance(theirs, dict):
        out = []
        for key in sorted(set(ours) | set(theirs)):
            sub = f"{path}.{key}" if path else key
            out += differences(ours.get(key, "<absent>"), theirs.get(key, "<absent>"), sub)
        return out
    if isinstance(ours, list) and isinstance(theirs, list):
        ids_o = [_identity(x) for x in ours]
        ids_t = [_identity(x) for x in theirs]
        if all(ids_o) and all(ids_t) and len(set(ids_o)) == len(ids_o):
            by_o = dict(zip(ids_o, ours, strict=True))
            by_t = dict(zip(ids_t, theirs, strict=True))
            out = []
            for ident in sorted(set(by_o) | set(by_t), key=str):
                sub = f"{path}[{ident}]"
                out += differences(by_o.get(ident, "<absent>"), by_t.get(ident, "<absent>"), sub)
            return out
        if len(ours) == len(theirs):
            out = []
            for i, (a, b) in enumerate(zip(ours, theirs, strict=True)):
                out += differences(a, b, f"{path}[{i}]")
            return out
    if ours != theirs:
        return [(path or "<value>", ours, theirs)]
    return []


@dataclass(frozen=True, slots=True)
class Known:
    """One row of docs/kafka-differences.md."""

    scenario: str
    field: str
    status: str  # "kept" or "fixed"
    reason: str


def _cell(text: str) -> str:
    return text.replace("\\|", "\x00").strip().replace("\x00", "|").strip("`")


def load_known(path: Path = DOC) -> dict[tuple[str, str], Known]:
    """The table rows of the differences page, keyed by (scenario, field)."""
    known: dict[tuple[str, str], Known] = {}
    if not path.exists():
        return known
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("| ") or line.startswith("| Scenario") or line.startswith("|--"):
            continue
        cells = [_cell(c) for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if len(cells) < 6:
            continue
        scenario, field, _ours, _theirs, status, reason = cells[:6]
        known[(scenario, field)] = Known(scenario, field, status.lower(), reason)
    return known


def short(value: object, limit: int = 70) -> str:
    text = json.dumps(value, sort_keys=True) if not isinstance(value, str) else value
    return text if len(text) <= limit else text[: limit - 3] + "..."


class Checker:
    """Compares one scenario's observations; fails on a difference the page does not keep."""

    def __init__(self, reference: str, record: str | None = None) -> None:
        self.reference = reference
        self.record = record if record is not None else os.environ.get(RECORD_ENV)
        self.known = load_known()

    def check(
        self,
        scenario: str,
        ours: object,
        theirs: object,
        *,
        version: int | None = None,
        extra_masked: Iterable[str] = (),
    ) -> list[tuple[str, object, object]]:
        """Normalise both, diff them, and fail on any difference not kept in the page."""
        name = f"{scenario} [{self.reference}]"
        found = differences(normalise(ours, extra_masked), normalise(theirs, extra_masked))
        if self.record:
            with open(self.record, "a", encoding="utf-8") as out:
                out.write(json.dumps({"scenario": name, "field": None}) + "\n")  # it ran
                for field, a, b in found:
                    row = {
                        "scenario": name,
                        "field": field,
                        "version": version,
                        "odradek": short(a),
                        "kafka": short(b),
                    }
                    out.write(json.dumps(row) + "\n")
            return found
        bad = []
        for field, a, b in found:
            row = self.known.get((name, field))
            if row is None or row.status != "kept":
                state = f"listed as {row.status}" if row else "not in the page"
                where = f" v{version}" if version is not None else ""
                bad.append(f"{name}{where} {field}: odradek {short(a)} Kafka {short(b)} ({state})")
        assert not bad, (
            "differences from Apache Kafka not kept in docs/kafka-differences.md "
            "(fix them, or run `python -m compat_tests.reference.differences` and give each a "
            "reason):\n  " + "\n  ".join(bad)
        )
        return found
