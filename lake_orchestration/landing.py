"""Landing zones: a folder or an S3 prefix where producers drop files for a pool.

A landing zone lists its files (path relative to the zone, size, modification time) and opens
them as load sources. It reuses lake_core's object stores, so a folder and an S3 prefix behave
the same and no S3 SDK is imported here.

Conventions producers follow (docs/orchestration.md): files are immutable once complete; names
starting with ``.`` or ``_`` are ignored (write under such a name, then rename); only the pool's
formats are taken (by extension); in a day-partitioned pool, a file belongs to the day its path
names (``2013-01-05/part-1.csv`` or ``flights-2013-01-05.csv``).
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from lake_core.ingest.formats import format_from_name
from lake_core.loading import Source
from lake_core.stores.base import ObjectStore

_DAY = re.compile(r"(?<!\d)(\d{4}-\d{2}-\d{2})(?!\d)")


@dataclass(frozen=True)
class LandingFile:
    """One file of a landing zone: ``path`` relative to the zone."""

    path: str
    size: int
    mtime: float

    @property
    def day(self) -> str | None:
        """The last ``YYYY-MM-DD`` in the path (the file's daily partition), or None."""
        days = _DAY.findall(self.path)
        return days[-1] if days else None


def is_candidate(path: str, formats: Iterable[str]) -> bool:
    """A file the sensor may take: not hidden or in-progress, in one of ``formats``."""
    parts = PurePosixPath(path).parts
    if any(p.startswith((".", "_")) for p in parts):
        return False
    fmt = format_from_name(path)
    return fmt is not None and fmt in set(formats)


class LandingZone:
    """The files under one landing location, read through an object store."""

    def __init__(self, location: str, store: ObjectStore, formats: Iterable[str]) -> None:
        self.location = location
        self.store = store
        self.formats = tuple(formats)

    def files(self) -> list[LandingFile]:
        """Candidate files, sorted by path."""
        out = [
            LandingFile(i.key, i.size, i.mtime)
            for i in self.store.list("")
            if is_candidate(i.key, self.formats)
        ]
        return sorted(out, key=lambda f: f.path)

    def source(self, path: str) -> Source:
        """``path`` as a load source: the local file itself, or the object's bytes (named, so
        its format is detected from the extension and errors name the file)."""
        local = self.store.local_path(path)
        if local is not None:
            return local
        stream: Any = io.BytesIO(self.store.get(path))
        stream.name = f"{self.location}/{path}"
        return stream  # type: ignore[no-any-return]

    def uri(self, path: str) -> str:
        return f"{self.location}/{path}"
