"""The one door to kafka-python's protocol classes (`kafka.protocol`, 3.0.x).

Those classes are generated from Kafka's own JSON message definitions and encode and decode every
version of every request and response, flexible versions and tagged fields included. Nothing else
in odradek imports `kafka.protocol`; handlers use the classes re-exported here by name, e.g.
`protocol.MetadataResponse`.

Tagged fields are written only when they differ from their default (kafka-python does this),
which older librdkafka builds need: they mis-skip tagged fields.

Requests are decoded by the strict decoders of `odradek.wire.strict_decoder` (the other half of
this door): kafka-python's generated decoders with Kafka's read-side checks (no null in a
non-nullable field, counts and lengths bounded by the bytes left, 5-byte varints, tagged fields
read in place). `decode_request` raises only `DecodeError`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeAlias

import kafka.protocol.admin as _admin
import kafka.protocol.consumer as _consumer
import kafka.protocol.metadata as _metadata
import kafka.protocol.producer as _producer
import kafka.protocol.sasl as _sasl
from kafka.protocol.api_message import ApiMessage

from odradek.wire.frames import frame
from odradek.wire.header import response_header
from odradek.wire.schemas import message_classes as _extra_messages
from odradek.wire.strict_decoder import DecodeError, Decoder, NullFieldError, build_decoder

API_VERSIONS_KEY = 18

_REQUESTS: dict[int, Any] = {}
_RESPONSES: dict[int, Any] = {}
_EXPORTS: dict[str, Any] = {}
_DECODERS: dict[tuple[int, int], Decoder] = {}

_SASL_NAMES = (  # kafka.protocol.sasl has no __all__
    "SaslHandshakeRequest",
    "SaslHandshakeResponse",
    "SaslAuthenticateRequest",
    "SaslAuthenticateResponse",
)
for _mod, _names in (
    (_admin, _admin.__all__),
    (_consumer, _consumer.__all__),
    (_metadata, _metadata.__all__),
    (_producer, _producer.__all__),
    (_sasl, _SASL_NAMES),
):
    for _name in _names:
        _obj = getattr(_mod, _name)
        _EXPORTS[_name] = _obj
        if isinstance(_obj, type) and issubclass(_obj, ApiMessage) and _obj is not ApiMessage:
            # kafka-python's generated message classes carry no types: Any is what they are.
            _message: Any = _obj
            table = _REQUESTS if _message.is_request() else _RESPONSES
            table[_message.API_KEY] = _message

# Kafka's JSON definitions of APIs kafka-python lacks (odradek/wire/schemas), built the same way.
for _name, _obj in _extra_messages().items():
    _message = _obj
    table = _REQUESTS if _message.is_request() else _RESPONSES
    if _message.API_KEY not in table:
        table[_message.API_KEY] = _message
        _EXPORTS[_name] = _obj

globals().update(_EXPORTS)

if TYPE_CHECKING:
    # The names above are set at run time; to the type checker each is one of kafka-python's
    # untyped classes (Any), usable by name in annotations (`req: protocol.FetchRequest`).
    def __getattr__(name: str) -> Any: ...


# An instance of one of those classes, or of a struct nested in one (a response's topic entry,
# `Resp.DescribedGroup`), where the code does not name the class: untyped, so Any, said once
# here rather than at every use (the broker's modules may not spell Any: pyproject [tool.mypy]).
Message: TypeAlias = Any
# A message's schema as kafka-python describes it (a class's `_struct`, one of its fields).
Schema: TypeAlias = Any


__all__ = sorted(_EXPORTS) + [
    "DecodeError",
    "NullFieldError",
    "request_class",
    "response_class",
    "is_flexible_request",
    "decode_request",
    "encode_response",
    "schema_versions",
    "Message",
    "Schema",
]


def request_class(api_key: int) -> Any | None:
    """The request class for an API key, or None when kafka-python has no schema for it."""
    return _REQUESTS.get(api_key)


def response_class(api_key: int) -> Any:
    return _RESPONSES[api_key]


def schema_versions(api_key: int) -> tuple[int, int]:
    """The (min, max) versions of Kafka's JSON definition for this key."""
    valid = _REQUESTS[api_key].json["validVersions"]
    lo, _, hi = valid.partition("-")
    return int(lo), int(hi or lo)


def is_flexible_request(api_key: int, version: int) -> bool:
    """True when this version uses compact encodings and header v2."""
    cls = _REQUESTS.get(api_key)
    return bool(cls is not None and cls.flexible_version_q(version))


def decode_request(api_key: int, version: int, payload: bytes | bytearray, offset: int) -> Any:
    """Decode a request body that starts at `offset` in the frame payload.

    Raises `DecodeError` (and nothing else) for an unknown key or version, a body that cannot be
    decoded, or one that breaks its schema (see `odradek.wire.strict_decoder`).
    """
    decoder = _DECODERS.get((api_key, version))
    if decoder is None:
        decoder = _decoder(api_key, version)
    try:
        request, _end = decoder(memoryview(payload), offset)
    except DecodeError:
        raise
    except Exception as exc:  # the generated code fails on garbage with assorted errors
        raise DecodeError(f"{type(exc).__name__}: {exc}") from None
    return request


def _decoder(api_key: int, version: int) -> Decoder:
    cls = _REQUESTS.get(api_key)
    if cls is None:
        raise DecodeError(f"no schema for API key {api_key}")
    if not 0 <= version <= cls.max_version:  # kafka-python decodes old versions from v0
        raise DecodeError(f"{cls.__name__} has no version {version}")
    decoder = _DECODERS[(api_key, version)] = build_decoder(cls, version)
    return decoder


def encode_response(api_key: int, version: int, correlation_id: int, response: Any) -> bytes:
    """Frame + response header + body. ApiVersions always answers with response header v0."""
    flexible = api_key != API_VERSIONS_KEY and _RESPONSES[api_key].flexible_version_q(version)
    head = response_header(correlation_id, flexible)
    body = response.encode(version=version)
    return frame(len(head) + len(body)) + head + bytes(body)
