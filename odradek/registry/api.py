"""Confluent Schema Registry's REST API over `State` and `SchemaStore`: subjects and versions,
schemas by id, lookup, soft and hard deletes, compatibility levels and checks, modes, /contexts
and /schemas/types. Routes take (method, path parts, query, body) and return the JSON answer."""

from __future__ import annotations

import json

from odradek.registry import errors, formats, protobuf_schema
from odradek.registry import records as rec
from odradek.registry.avro_compat import named_types
from odradek.registry.errors import RegistryError
from odradek.registry.formats import Parsed
from odradek.registry.http import Request
from odradek.registry.state import LEVELS, MODES, State, Version
from odradek.registry.store import SchemaStore

MAX_VERSION = 2**31 - 1


def _true(query: dict[str, str], name: str) -> bool:
    return query.get(name, "false").lower() == "true"


class RegistryApi:
    def __init__(self, store: SchemaStore) -> None:
        self.store = store
        # stored versions parsed once (a registration compares against every version)
        self._parsed_cache: dict[tuple[str, str, str], Parsed] = {}

    @property
    def state(self) -> State:
        return self.store.state

    async def handle(self, req: Request) -> object:
        method, path, query, body = req
        head = path[0] if path else ""
        route = (
            getattr(self, f"_{head}", None)
            if head in ("subjects", "schemas", "config", "mode", "compatibility", "contexts")
            else None
        )
        if route is None:
            if not path and method == "GET":
                return {}
            raise RegistryError(404, 404, "HTTP 404 Not Found")
        return route(method, path[1:], query, body)

    # -- parsing ------------------------------------------------------------------------------

    def _parse(self, body: object) -> tuple[Parsed, str, list[dict[str, object]]]:
        if not isinstance(body, dict) or not isinstance(body.get("schema"), str):
            raise RegistryError(422, 42201, "Invalid schema: the body has no schema")
        stype = str(body.get("schemaType") or "AVRO").upper()
        refs = body.get("references") or []
        if not isinstance(refs, list):
            raise errors.invalid_schema("references must be a list")
        named: dict[str, object] = {}
        for ref in refs:
            if not isinstance(ref, dict):
                raise errors.invalid_schema("a reference must be an object")
            ver = self._version(str(ref.get("subject")), str(ref.get("version")))
            parsed = self._parsed(ver)
            if stype == "AVRO":
                named.update(parsed.refs)
                named.update(named_types(parsed.obj))
            elif stype == "PROTOBUF" and parsed.proto is not None:
                named.update(parsed.refs)  # what it imports, then itself by its import name
                named[str(ref.get("name"))] = parsed.proto
        return Parsed(stype, str(body["schema"]), named), stype, refs

    def _parsed(self, ver: Version) -> Parsed:
        key = (ver.schema_type, ver.schema, json.dumps(ver.references, sort_keys=True))
        found = self._parsed_cache.get(key)
        if found is None:
            found = self._parse(
                {"schema": ver.schema, "schemaType": ver.schema_type, "references": ver.references}
            )[0]
            self._parsed_cache[key] = found
        return found

    def _version(self, subject: str, version: str, deleted: bool = False) -> Version:
        vs = self.state.live(subject, deleted)
        if not vs:
            raise errors.subject_not_found(subject)
        if version in ("latest", "-1"):
            return vs[-1]
        try:
            n = int(version)
        except ValueError:
            raise errors.invalid_version(version) from None
        if not 1 <= n <= MAX_VERSION:
            raise errors.invalid_version(version)
        found = next((v for v in vs if v.version == n), None)
        if found is None:
            raise errors.version_not_found(n)
        return found

    def _writable(self, subject: str | None) -> None:
        if self.state.mode(subject) in ("READONLY", "READONLY_OVERRIDE"):
            raise RegistryError(422, 42205, f"Subject {subject} is in read-only mode")

    # -- /subjects ---------------------------------------------------------------------------

    def _subjects(
        self, method: str, path: list[str], query: dict[str, str], body: object
    ) -> object:
        deleted = _true(query, "deleted")
        if not path:
            if method != "GET":
                raise RegistryError(405, 405, "HTTP 405 Method Not Allowed")
            prefix = query.get("subjectPrefix", "")
            return sorted(
                s
                for s in self.state.subjects
                if s.startswith(prefix) and self.state.live(s, deleted)
            )
        subject = path[0]
        if len(path) == 1:
            if method == "POST":
                return self._serialized(
                    self._lookup(subject, body, deleted, _true(query, "normalize")), query
                )
            if method == "DELETE":
                return self._delete_subject(subject, _true(query, "permanent"))
        elif path[1] == "versions" and len(path) == 2:
            if method == "GET":
                vs = self.state.live(subject, deleted)
                if not vs:
                    raise errors.subject_not_found(subject)
                return [v.version for v in vs]
            if method == "POST":
                return self._register(subject, body, query)
        elif path[1] == "versions" and len(path) in (3, 4):
            if len(path) == 4 and path[3] == "referencedby" and method == "GET":
                return self._referenced_by(self._version(subject, path[2], True))
            if len(path) == 4 and path[3] == "schema" and method == "GET":
                return self._version(subject, path[2], deleted).schema
            if len(path) == 3 and method == "GET":
                return self._serialized(self._version(subject, path[2], deleted).body(), query)
            if len(path) == 3 and method == "DELETE":
                return self._delete_version(subject, path[2], _true(query, "permanent"))
        raise RegistryError(405 if len(path) <= 4 else 404, 405, "HTTP 405 Method Not Allowed")

    def _referenced_by(self, ver: Version) -> list[int]:
        """Ids of the live schemas whose references name this version."""
        return sorted(
            v.id
            for vs in self.state.subjects.values()
            for v in vs.values()
            if not v.deleted
            and any(
                r.get("subject") == ver.subject and r.get("version") == ver.version
                for r in v.references
            )
        )

    def _not_referenced(self, ver: Version) -> None:
        if self._referenced_by(ver):
            raise RegistryError(
                422,
                42206,
                f"One or more references exist to the schema {{subject={ver.subject}, "
                f"version={ver.version}}}",
            )

    def _register(self, subject: str, body: object, query: dict[str, str]) -> object:
        self._writable(subject)
        parsed, stype, refs = self._parse(body)
        assert isinstance(body, dict)
        import_mode = self.state.mode(subject) == "IMPORT"
        norm = _true(query, "normalize")
        all_versions = self.state.live(subject, True)
        for v in self.state.live(subject):
            if (
                v.schema_type == stype
                and self._parsed(v).key(norm) == parsed.key(norm)
                and v.references == refs
            ):
                return {"id": v.id}
        live = self.state.live(subject)
        level = self.state.compatibility(subject)
        if not import_mode and not formats.is_compatible(
            level, parsed, [self._parsed(v) for v in live]
        ):
            raise RegistryError(
                409,
                409,
                "Schema being registered is incompatible with an earlier schema for subject "
                f'"{subject}", details: [incompatible with the {level} level]',
            )
        wanted = body.get("id")
        if import_mode and isinstance(wanted, int) and wanted > 0:
            schema_id = wanted
            other = self.state.by_id.get(wanted)
            if other is not None and self._parsed(other).canonical != parsed.canonical:
                raise RegistryError(
                    422, 42207, f"Overwrite new schema with id {wanted} is not permitted."
                )
        else:
            schema_id = next(
                (
                    v.id
                    for v in self.state.by_id.values()
                    if v.schema_type == stype
                    and v.references == refs
                    and self._parsed(v).key(norm) == parsed.key(norm)
                ),
                self.state.max_id + 1,
            )
        version = (
            body.get("version") if import_mode and isinstance(body.get("version"), int) else None
        )
        if version is None:
            version = (all_versions[-1].version + 1) if all_versions else 1
        assert isinstance(version, int)
        ver = Version(subject, version, schema_id, stype, str(body["schema"]), refs)
        self.store.write(rec.schema_key(subject, version), rec.value(ver.record()))
        return {"id": schema_id}

    def _lookup(self, subject: str, body: object, deleted: bool, norm: bool) -> dict[str, object]:
        vs = self.state.live(subject, deleted)
        if not vs:
            raise errors.subject_not_found(subject)
        parsed, stype, refs = self._parse(body)
        for v in vs:
            if v.schema_type == stype and self._parsed(v).key(norm) == parsed.key(norm):
                return v.body()
        raise errors.schema_not_found()

    def _delete_subject(self, subject: str, permanent: bool) -> object:
        self._writable(subject)
        every = self.state.live(subject, True)
        if not every:
            raise errors.subject_not_found(subject)
        live = [v for v in every if not v.deleted]
        if permanent:
            if live:
                raise RegistryError(
                    404,
                    40405,
                    f"Subject '{subject}' was not deleted first before being permanently deleted",
                )
            for v in every:
                self.store.write(rec.schema_key(subject, v.version), None)
            return [v.version for v in every]
        if not live:
            raise RegistryError(404, 40404, f"Subject '{subject}' was soft deleted.")
        for v in live:
            self._not_referenced(v)
        self.store.write(
            rec.delete_subject_key(subject),
            rec.value({"subject": subject, "version": live[-1].version}),
        )
        for v in live:  # Confluent also rewrites each version with deleted=true
            v2 = Version(v.subject, v.version, v.id, v.schema_type, v.schema, v.references, True)
            self.store.write(rec.schema_key(subject, v.version), rec.value(v2.record()))
        return [v.version for v in live]

    def _delete_version(self, subject: str, version: str, permanent: bool) -> object:
        self._writable(subject)
        ver = self._version(subject, version, permanent)
        self._not_referenced(ver)
        if permanent:
            if not ver.deleted:
                raise RegistryError(
                    404,
                    40407,
                    f"Subject '{subject}' Version {ver.version} was not deleted first before being "
                    "permanently deleted",
                )
            self.store.write(rec.schema_key(subject, ver.version), None)
        else:
            v2 = Version(
                ver.subject, ver.version, ver.id, ver.schema_type, ver.schema, ver.references, True
            )
            self.store.write(rec.schema_key(subject, ver.version), rec.value(v2.record()))
        return ver.version

    def _serialized(self, answer: dict[str, object], query: dict[str, str]) -> dict[str, object]:
        """`format=serialized` asks a PROTOBUF schema as a base64 descriptor (what
        confluent-kafka's Protobuf deserializer reads); other formats answer as stored."""
        if query.get("format") != "serialized" or answer.get("schemaType") != "PROTOBUF":
            return answer
        parsed = self._parse(
            {
                "schema": answer["schema"],
                "schemaType": "PROTOBUF",
                "references": answer.get("references") or [],
            }
        )[0]
        assert parsed.proto is not None
        return {**answer, "schema": protobuf_schema.serialized(parsed.proto)}

    # -- /schemas ----------------------------------------------------------------------------

    def _schemas(self, method: str, path: list[str], query: dict[str, str], body: object) -> object:
        if method != "GET":
            raise RegistryError(405, 405, "HTTP 405 Method Not Allowed")
        if path == ["types"]:
            return list(formats.TYPES)
        if len(path) < 2 or path[0] != "ids":
            raise RegistryError(404, 404, "HTTP 404 Not Found")
        try:
            schema_id = int(path[1])
        except ValueError:
            raise errors.schema_not_found() from None
        deleted = _true(query, "deleted")
        uses = [
            v
            for vs in self.state.subjects.values()
            for v in vs.values()
            if v.id == schema_id and (deleted or not v.deleted)
        ]
        first = self.state.by_id.get(schema_id)
        if first is None or (not uses and len(path) > 2):
            raise errors.schema_not_found()
        if len(path) == 2:
            out: dict[str, object] = {"schema": first.schema}
            if first.schema_type != "AVRO":
                out["schemaType"] = first.schema_type
            if first.references:
                out["references"] = first.references
            return self._serialized(out, query)
        if path[2] == "subjects":
            return sorted({v.subject for v in uses})
        if path[2] == "versions":
            return [{"subject": v.subject, "version": v.version} for v in uses]
        if path[2] == "schema":
            return first.schema
        raise RegistryError(404, 404, "HTTP 404 Not Found")

    # -- /config, /mode, /compatibility, /contexts -------------------------------------------------

    def _config(self, method: str, path: list[str], query: dict[str, str], body: object) -> object:
        subject = path[0] if path else None
        if method == "GET":
            if (
                subject is not None
                and subject not in self.state.configs
                and not _true(query, "defaultToGlobal")
            ):
                raise RegistryError(
                    404,
                    40408,
                    f"Subject '{subject}' does not have subject-level compatibility configured",
                )
            return {"compatibilityLevel": self.state.compatibility(subject)}
        if method == "PUT":
            level = body.get("compatibility") if isinstance(body, dict) else None
            if not isinstance(level, str) or level.upper() not in LEVELS:
                raise RegistryError(
                    422, 42203, "Invalid compatibility level. Valid values are " + ", ".join(LEVELS)
                )
            self.store.write(
                rec.config_key(subject), rec.value({"compatibilityLevel": level.upper()})
            )
            return {"compatibility": level.upper()}
        if method == "DELETE":
            old = self.state.compatibility(subject)
            self.store.write(rec.config_key(subject), None)
            return {"compatibilityLevel": old}
        raise RegistryError(405, 405, "HTTP 405 Method Not Allowed")

    def _mode(self, method: str, path: list[str], query: dict[str, str], body: object) -> object:
        subject = path[0] if path else None
        if method == "GET":
            return {"mode": self.state.mode(subject)}
        if method == "PUT":
            mode = body.get("mode") if isinstance(body, dict) else None
            if not isinstance(mode, str) or mode.upper() not in MODES:
                raise RegistryError(
                    422, 42204, "Invalid mode. Valid values are " + ", ".join(MODES)
                )
            mode = mode.upper()
            if mode == "IMPORT" and not _true(query, "force"):
                has = (
                    self.state.live(subject)
                    if subject
                    else any(self.state.live(s) for s in self.state.subjects)
                )
                if has:
                    raise RegistryError(422, 42205, "Cannot import since found existing subjects")
            self.store.write(rec.mode_key(subject), rec.value({"mode": mode}))
            return {"mode": mode}
        if method == "DELETE" and subject is not None:
            old = self.state.mode(subject)
            self.store.write(rec.mode_key(subject), None)
            return {"mode": old}
        raise RegistryError(405, 405, "HTTP 405 Method Not Allowed")

    def _compatibility(
        self, method: str, path: list[str], query: dict[str, str], body: object
    ) -> object:
        if (
            method != "POST"
            or len(path) not in (3, 4)
            or path[0] != "subjects"
            or path[2] != "versions"
        ):
            raise RegistryError(404, 404, "HTTP 404 Not Found")
        subject = path[1]
        parsed = self._parse(body)[0]
        level = self.state.compatibility(subject)
        if len(path) == 4:
            try:
                olds = [self._version(subject, path[3])]
            except RegistryError as exc:
                if exc.code == 40401 and path[3] == "latest":
                    return {"is_compatible": True}
                raise
            level = level.removesuffix("_TRANSITIVE")
        else:
            olds = self.state.live(subject)
            level = (
                level if level == "NONE" or level.endswith("_TRANSITIVE") else level + "_TRANSITIVE"
            )
        ok = formats.is_compatible(level, parsed, [self._parsed(v) for v in olds])
        out: dict[str, object] = {"is_compatible": ok}
        if _true(query, "verbose"):
            out["messages"] = [] if ok else [f"incompatible with the {level} level"]
        return out

    def _contexts(
        self, method: str, path: list[str], query: dict[str, str], body: object
    ) -> object:
        if method != "GET" or path:
            raise RegistryError(404, 404, "HTTP 404 Not Found")
        return ["."]
