"""The registry's state (Confluent's KafkaStore view): schema versions per subject, schemas by
id, compatibility levels and modes globally and per subject. It changes only by applying
`_schemas` records (`apply`), which is also how it loads."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field

log = logging.getLogger(__name__)

LEVELS = (
    "NONE",
    "BACKWARD",
    "BACKWARD_TRANSITIVE",
    "FORWARD",
    "FORWARD_TRANSITIVE",
    "FULL",
    "FULL_TRANSITIVE",
)
MODES = ("READWRITE", "READONLY", "READONLY_OVERRIDE", "IMPORT")


@dataclass(slots=True)
class Version:
    subject: str
    version: int
    id: int
    schema_type: str
    schema: str
    references: list[dict[str, object]]
    deleted: bool = False

    @property
    def version_key(self) -> tuple[str, int]:
        return (self.subject, self.version)

    def body(self) -> dict[str, object]:
        out: dict[str, object] = {
            "subject": self.subject,
            "version": self.version,
            "id": self.id,
            "schema": self.schema,
        }
        if self.schema_type != "AVRO":
            out["schemaType"] = self.schema_type
        if self.references:
            out["references"] = self.references
        return out

    def record(self) -> dict[str, object]:
        return {**self.body(), "schemaType": self.schema_type, "deleted": self.deleted}


@dataclass(slots=True)
class State:
    subjects: dict[str, dict[int, Version]] = field(default_factory=dict)
    by_id: dict[int, Version] = field(default_factory=dict)  # the first version registered
    configs: dict[str | None, str] = field(default_factory=dict)
    modes: dict[str | None, str] = field(default_factory=dict)
    max_id: int = 0

    def apply(self, key: bytes, value: bytes | None) -> None:
        """One `_schemas` record; unreadable or unknown records are skipped (NOOP included)."""
        try:
            k = json.loads(key)
            v = None if value is None else json.loads(value)
            kind = k.get("keytype")
            subject = k.get("subject")
            if kind == "SCHEMA":
                self._schema(str(subject), int(k["version"]), v)
            elif kind == "CONFIG":
                if v is None:
                    self.configs.pop(subject, None)
                else:
                    self.configs[subject] = str(v["compatibilityLevel"])
            elif kind == "MODE":
                if v is None:
                    self.modes.pop(subject, None)
                else:
                    self.modes[subject] = str(v["mode"])
            elif kind == "DELETE_SUBJECT" and v is not None:
                for ver in self.subjects.get(str(subject), {}).values():
                    if ver.version <= int(v.get("version", 1 << 31)):
                        ver.deleted = True
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            log.warning("_schemas: skipping an unreadable record: %s", exc)

    def _schema(self, subject: str, version: int, v: dict[str, object] | None) -> None:
        versions = self.subjects.setdefault(subject, {})
        if v is None:
            gone = versions.pop(version, None)
            if not versions:
                del self.subjects[subject]
            held = None if gone is None else self.by_id.get(gone.id)
            if gone is not None and held is not None and held.version_key == gone.version_key:
                # the id stays served while another version still uses it
                other = next(
                    (o for vs in self.subjects.values() for o in vs.values() if o.id == gone.id),
                    None,
                )
                if other is None:
                    del self.by_id[gone.id]
                else:
                    self.by_id[gone.id] = other
            return
        refs = v.get("references") or []
        assert isinstance(refs, list)
        ver = Version(
            subject,
            version,
            int(v["id"]),  # type: ignore[call-overload]
            str(v.get("schemaType") or "AVRO"),
            str(v["schema"]),
            refs,
            bool(v.get("deleted", False)),
        )
        versions[version] = ver
        held = self.by_id.setdefault(ver.id, ver)
        if held.version_key == ver.version_key:  # a rewrite (soft delete) of the same version
            self.by_id[ver.id] = ver
        self.max_id = max(self.max_id, ver.id)

    def live(self, subject: str, deleted: bool = False) -> list[Version]:
        """A subject's versions in order (soft-deleted ones only when asked)."""
        vs = self.subjects.get(subject, {})
        return [vs[n] for n in sorted(vs) if deleted or not vs[n].deleted]

    def compatibility(self, subject: str | None) -> str:
        if subject is not None and subject in self.configs:
            return self.configs[subject]
        return self.configs.get(None, "BACKWARD")

    def mode(self, subject: str | None) -> str:
        if subject is not None and subject in self.modes:
            return self.modes[subject]
        return self.modes.get(None, "READWRITE")
