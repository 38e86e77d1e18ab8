"""Input format names and format detection.

Owns the list of input formats the lake accepts (``FORMATS``) and :func:`detect_format`, which
names the format of an input from its file name and its first bytes.

Invariants:
- :func:`detect_format` never returns ``"auto"``; it always returns one of the concrete formats.
- The extension wins over the content: a ``.csv`` file is CSV even if it starts with ``{``
  (the CSV reader then refuses a header line that is JSON, naming the file).
  Content sniffing is used only when the name has no known extension (stdin, odd names).
- A ``.gz`` / ``.gzip`` suffix is ignored for detection; the caller decompresses and passes the
  decompressed head (see :mod:`lake_core.ingest.readers`).
- Detection is pure: it reads nothing but its arguments.
"""

from __future__ import annotations

import json
from pathlib import PurePath
from typing import Final

FORMATS: Final = ("auto", "ndjson", "json", "csv", "parquet", "arrow")

PARQUET_MAGIC: Final = b"PAR1"
ARROW_FILE_MAGIC: Final = b"ARROW1"
# An IPC stream starts with a message whose metadata length is prefixed by this continuation
# marker (format >= 0.15); older streams start directly with the int32 length.
ARROW_STREAM_CONTINUATION: Final = b"\xff\xff\xff\xff"
GZIP_MAGIC: Final = b"\x1f\x8b"
#: A zip archive's local file header (or the end record of an empty archive).
ZIP_MAGICS: Final = (b"PK\x03\x04", b"PK\x05\x06")

_EXTENSIONS: Final[dict[str, str]] = {
    ".ndjson": "ndjson",
    ".jsonl": "ndjson",
    ".json": "json",
    ".csv": "csv",
    ".parquet": "parquet",
    ".pq": "parquet",
    ".arrow": "arrow",
    ".ipc": "arrow",
    ".feather": "arrow",
}
_COMPRESSION_SUFFIXES: Final = (".gz", ".gzip")


def format_from_name(name: str) -> str | None:
    """The format a file name's extension implies, or None when the extension says nothing."""
    path = PurePath(name)
    suffix = path.suffix.lower()
    if suffix in _COMPRESSION_SUFFIXES:
        suffix = PurePath(path.stem).suffix.lower()
    return _EXTENSIONS.get(suffix)


def format_from_content(head: bytes) -> str:
    """The format the first bytes of an (uncompressed) input suggest; CSV when nothing else fits.

    A leading ``[`` means a JSON document. A leading ``{`` means NDJSON when the first line is a
    complete JSON value by itself, else a JSON document.
    """
    if head.startswith(PARQUET_MAGIC):
        return "parquet"
    if head.startswith(ARROW_FILE_MAGIC) or head.startswith(ARROW_STREAM_CONTINUATION):
        return "arrow"
    text = head.lstrip(b"\xef\xbb\xbf \t\r\n")
    if text.startswith(b"["):
        return "json"
    if text.startswith(b"{"):
        # NDJSON when the first line is a whole object by itself. Otherwise (a pretty-printed
        # object, or a head that ends inside a long first line) the JSON reader, which accepts
        # NDJSON as well, is the safe choice.
        first_line = text.partition(b"\n")[0]
        try:
            json.loads(first_line)
        except ValueError:
            return "json"
        return "ndjson"
    return "csv"


def detect_format(name: str, head: bytes) -> str:
    """Name the format of an input: by extension first, then by content sniffing."""
    return format_from_name(name) or format_from_content(head)


def is_zip(name: str, head: bytes) -> bool:
    """Whether an input is a zip archive, by its ``.zip`` extension or its magic bytes."""
    return PurePath(name).suffix.lower() == ".zip" or head.startswith(ZIP_MAGICS)


def json_kind(value: object) -> str:
    """What a parsed JSON value is, as a user wrote it (``null``, ``a number``, ``an array``…):
    for errors that expected an object."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    return "an array" if isinstance(value, list) else "an object"
