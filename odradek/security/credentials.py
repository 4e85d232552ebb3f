"""Where SCRAM credentials live, and Kafka's AlterUserScramCredentials (key 51) and
DescribeUserScramCredentials (key 50) semantics over any store.

``CredentialStore`` is the protocol the broker talks to (``get`` is what ``ScramServer``
needs); ``InMemoryCredentialStore`` implements it for the local mode and tests; a metadata-store
backed one (ZooKeeper ``/config/users/<user>``) can reuse ``scram.credentials_to_user_config``.
``alter_user_scram_credentials`` and ``describe_user_scram_credentials`` give the per-user
results Kafka's controller (ScramControlManager) and ScramImage give, ready for the response.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

from odradek.security.scram import (
    ScramCredential,
    ScramMechanism,
    credential_from_salted_password,
)
from odradek.wire.errors import ErrorCode


class CredentialStore(Protocol):
    """SCRAM credentials by user and mechanism."""

    def get(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None: ...

    def upsert(self, user: str, mechanism: ScramMechanism, credential: ScramCredential) -> None: ...

    def delete(self, user: str, mechanism: ScramMechanism) -> bool:
        """Remove one credential; False when there was none."""
        ...

    def describe(self) -> dict[str, dict[ScramMechanism, int]]:
        """Every user with a credential: user -> mechanism -> iterations."""
        ...


class InMemoryCredentialStore:
    """A thread-safe dict-backed ``CredentialStore``."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._data: dict[tuple[str, ScramMechanism], ScramCredential] = {}

    def get(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        with self._lock:
            return self._data.get((user, mechanism))

    def upsert(self, user: str, mechanism: ScramMechanism, credential: ScramCredential) -> None:
        with self._lock:
            self._data[(user, mechanism)] = credential

    def delete(self, user: str, mechanism: ScramMechanism) -> bool:
        with self._lock:
            return self._data.pop((user, mechanism), None) is not None

    def describe(self) -> dict[str, dict[ScramMechanism, int]]:
        out: dict[str, dict[ScramMechanism, int]] = {}
        with self._lock:
            for (user, mechanism), credential in self._data.items():
                out.setdefault(user, {})[mechanism] = credential.iterations
        return out


@dataclass(frozen=True)
class ScramDeletion:
    """AlterUserScramCredentials' ``deletions`` entry (``mechanism`` is the wire type)."""

    name: str
    mechanism: int


@dataclass(frozen=True, repr=False)
class ScramUpsertion:
    """AlterUserScramCredentials' ``upsertions`` entry: the client sends the SaltedPassword."""

    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes

    def __repr__(self) -> str:
        return f"ScramUpsertion(name={self.name!r}, mechanism={self.mechanism}, [hidden])"


@dataclass(frozen=True)
class AlterResult:
    user: str
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None


@dataclass(frozen=True)
class CredentialInfo:
    mechanism: int
    iterations: int


@dataclass(frozen=True)
class DescribeResult:
    user: str
    error_code: ErrorCode = ErrorCode.NONE
    error_message: str | None = None
    credential_infos: list[CredentialInfo] = field(default_factory=list)


_TWICE = "A user credential cannot be altered twice in the same request"


def _validate_name_and_mechanism(name: str, mechanism: int) -> AlterResult | None:
    if not name:
        return AlterResult(name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    if ScramMechanism.from_type(mechanism) is None:
        return AlterResult(name, ErrorCode.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    return None


def validate_upsertion(upsertion: ScramUpsertion) -> AlterResult | None:
    """Kafka's checks for one upsertion, or None when it is acceptable."""
    error = _validate_name_and_mechanism(upsertion.name, upsertion.mechanism)
    if error is not None:
        return error
    mechanism = ScramMechanism.from_type(upsertion.mechanism)
    assert mechanism is not None
    if upsertion.iterations < mechanism.min_iterations:
        return AlterResult(upsertion.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
    if upsertion.iterations > mechanism.max_iterations:
        return AlterResult(upsertion.name, ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
    return None


def alter_user_scram_credentials(
    store: CredentialStore,
    deletions: Sequence[ScramDeletion],
    upsertions: Sequence[ScramUpsertion],
) -> list[AlterResult]:
    """Apply an AlterUserScramCredentials request to ``store`` as Kafka's controller does and
    return one result per user: a user named twice in the request (deletions and upsertions
    together) gets DUPLICATE_RESOURCE and none of its changes; an empty name
    UNACCEPTABLE_CREDENTIAL; an unknown mechanism UNSUPPORTED_SASL_MECHANISM; iterations outside
    4096..16384 UNACCEPTABLE_CREDENTIAL ("Too few iterations" / "Too many iterations"); deleting
    a credential that does not exist RESOURCE_NOT_FOUND. The rest is applied (StoredKey and
    ServerKey derived from the SaltedPassword). Results: successful deletions, successful
    upsertions, then errors, as Kafka lists them."""
    to_delete: dict[str, ScramDeletion] = {}
    to_upsert: dict[str, ScramUpsertion] = {}
    errors: dict[str, AlterResult] = {}
    for deletion in deletions:
        if deletion.name in errors:
            continue
        if to_delete.pop(deletion.name, None) is not None:
            errors[deletion.name] = AlterResult(deletion.name, ErrorCode.DUPLICATE_RESOURCE, _TWICE)
            continue
        error = _validate_name_and_mechanism(deletion.name, deletion.mechanism)
        if error is None:
            mechanism = ScramMechanism.from_type(deletion.mechanism)
            assert mechanism is not None
            if store.get(deletion.name, mechanism) is None:
                error = AlterResult(
                    deletion.name,
                    ErrorCode.RESOURCE_NOT_FOUND,
                    "Attempt to delete a user credential that does not exist",
                )
        if error is not None:
            errors[deletion.name] = error
        else:
            to_delete[deletion.name] = deletion
    for upsertion in upsertions:
        if upsertion.name in errors:
            continue
        if (
            to_delete.pop(upsertion.name, None) is not None
            or to_upsert.pop(upsertion.name, None) is not None
        ):
            errors[upsertion.name] = AlterResult(
                upsertion.name, ErrorCode.DUPLICATE_RESOURCE, _TWICE
            )
            continue
        error = validate_upsertion(upsertion)
        if error is not None:
            errors[upsertion.name] = error
        else:
            to_upsert[upsertion.name] = upsertion
    results: list[AlterResult] = []
    for deletion in to_delete.values():
        mechanism = ScramMechanism.from_type(deletion.mechanism)
        assert mechanism is not None
        store.delete(deletion.name, mechanism)
        results.append(AlterResult(deletion.name))
    for upsertion in to_upsert.values():
        mechanism = ScramMechanism.from_type(upsertion.mechanism)
        assert mechanism is not None
        credential = credential_from_salted_password(
            mechanism, upsertion.salt, upsertion.salted_password, upsertion.iterations
        )
        store.upsert(upsertion.name, mechanism, credential)
        results.append(AlterResult(upsertion.name))
    results.extend(errors.values())
    return results


def describe_user_scram_credentials(
    store: CredentialStore, users: Iterable[str] | None
) -> list[DescribeResult]:
    """DescribeUserScramCredentials as Kafka's ScramImage answers it: ``users`` None or empty
    describes every user with a credential; a user named twice gets DUPLICATE_RESOURCE
    ("Cannot describe SCRAM credentials for the same user twice in a single request: <u>"), one
    without credentials RESOURCE_NOT_FOUND ("Attempt to describe a user credential that does
    not exist: <u>"). Credential infos are ordered by mechanism type."""
    described = store.describe()
    wanted: dict[str, bool] = {}
    names = list(users) if users is not None else []
    if not names:
        wanted = {user: False for user in sorted(described)}
    else:
        for name in names:
            wanted[name] = name in wanted
    results = []
    for user, duplicate in wanted.items():
        if duplicate:
            results.append(
                DescribeResult(
                    user,
                    ErrorCode.DUPLICATE_RESOURCE,
                    "Cannot describe SCRAM credentials for the same user twice in a single "
                    f"request: {user}",
                )
            )
            continue
        mechanisms = described.get(user)
        if not mechanisms:
            results.append(
                DescribeResult(
                    user,
                    ErrorCode.RESOURCE_NOT_FOUND,
                    f"Attempt to describe a user credential that does not exist: {user}",
                )
            )
            continue
        infos = [
            CredentialInfo(m.wire_type, iterations)
            for m, iterations in sorted(mechanisms.items(), key=lambda kv: kv[0].wire_type)
        ]
        results.append(DescribeResult(user, credential_infos=infos))
    return results
