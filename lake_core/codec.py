"""Encoding of persisted lake metadata: versioned JSON documents.

Every document carries ``format`` (what it is) and ``version`` (its layout), so a reader can
refuse what it does not understand instead of misreading it. Decoding errors become
:class:`CorruptObjectError` naming the object, never a stack trace.
"""

from __future__ import annotations

import json
from typing import Any

from lake_core.errors import CorruptObjectError


def encode_doc(kind: str, version: int, body: dict[str, Any]) -> bytes:
    doc = {"format": kind, "version": version, **body}
    return json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def decode_doc(key: str, data: bytes, kind: str, max_version: int) -> dict[str, Any]:
    """The document in ``data``; raises CorruptObjectError if it is not a ``kind`` document of
    a version this code reads."""
    try:
        doc = json.loads(data)
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CorruptObjectError(key, f"not valid JSON ({e})") from None
    if not isinstance(doc, dict):
        raise CorruptObjectError(key, "not a JSON object")
    if doc.get("format") != kind:
        raise CorruptObjectError(key, f"expected a {kind} document, found {doc.get('format')!r}")
    version = doc.get("version")
    if not isinstance(version, int) or version < 1:
        raise CorruptObjectError(key, "missing format version")
    if version > max_version:
        raise CorruptObjectError(
            key, f"format version {version} is newer than this lakepool reads ({max_version})"
        )
    return doc


def field(key: str, doc: dict[str, Any], name: str, typ: type | tuple[type, ...]) -> Any:
    """``doc[name]``, checked to be of ``typ``; CorruptObjectError otherwise."""
    if name not in doc:
        raise CorruptObjectError(key, f"missing field {name!r}")
    value = doc[name]
    if not isinstance(value, typ):
        raise CorruptObjectError(key, f"field {name!r} has the wrong type")
    return value
