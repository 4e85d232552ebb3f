"""Kafka message definitions kafka-python 3.0.x lacks, as Kafka's own JSON files.

Each `<Name>Request.json` / `<Name>Response.json` in this directory becomes a kafka-python
message class built exactly as kafka-python builds its generated ones (`ApiMessage` reading the
JSON through `load_json`), so the strict decoders, encoders and `odradek.wire.protocol` treat
them like the rest. A key kafka-python already has is left to kafka-python. To add an API, drop
Kafka's two JSON files here (the licence comment may stay: `load_json` strips `//` lines).
"""

from __future__ import annotations

import importlib.resources
import types
from typing import Any

from kafka.protocol.api_message import ApiMessage

_PACKAGE = __name__


def _build(name: str) -> Any:
    return types.new_class(
        name, (ApiMessage,), {"load_json": _PACKAGE}, lambda ns: ns.update(__module__=_PACKAGE)
    )


def message_classes() -> dict[str, Any]:
    """Name -> class for every request and response defined here (built once)."""
    if not _CLASSES:
        for entry in sorted(importlib.resources.files(_PACKAGE).iterdir(), key=lambda e: e.name):
            stem, dot, ext = entry.name.rpartition(".")
            if dot and ext == "json" and stem.endswith(("Request", "Response")):
                _CLASSES[stem] = globals()[stem] = _build(stem)
    return _CLASSES


_CLASSES: dict[str, Any] = {}
