"""Catalog versions and the names of their root node files.

A version's root node lives at ``vn/<name>`` where ``<name>`` is the version's binary digits,
least significant first, padded with ``0`` on the right to :data:`VERSION_BITS` characters
(the Olympia reference's width; its documentation's example uses 32). Putting the fast-changing
low bits first spreads consecutive versions over different object-store key prefixes.

``vn/latest`` and ``vn/oldest`` are optional decimal text hints: the newest version a writer
saw committed, and the oldest version guaranteed to exist.
"""

from __future__ import annotations

import re

VERSION_BITS = 64
MAX_VERSION = 2**63 - 1
VERSION_DIR = "vn/"
LATEST_HINT = "vn/latest"
OLDEST_HINT = "vn/oldest"

_NAME = re.compile(rf"^[01]{{{VERSION_BITS}}}$")


def version_name(version: int) -> str:
    """``12345678`` → ``0111001010000110001111010000…`` (64 characters)."""
    if version < 0:
        raise ValueError(f"version must be non-negative, not {version}")
    if version > MAX_VERSION:
        raise ValueError(f"version {version} does not fit in 63 bits")
    return format(version, f"0{VERSION_BITS}b")[::-1]


def version_path(version: int) -> str:
    """The root node file of ``version``, relative to the catalog: ``vn/<name>``."""
    return VERSION_DIR + version_name(version)


def parse_version_name(name: str) -> int:
    """Inverse of :func:`version_name`. Raises ValueError for anything else."""
    if not _NAME.match(name):
        raise ValueError(f"{name!r} must match pattern ^[01]{{{VERSION_BITS}}}$")
    return int(name[::-1], 2)


def parse_version_path(path: str) -> int:
    """Inverse of :func:`version_path`. Raises ValueError for a path that is not a root."""
    if not path.startswith(VERSION_DIR):
        raise ValueError(f"{path!r} is not a root node path (vn/<64 binary digits>)")
    return parse_version_name(path[len(VERSION_DIR) :])


def is_version_path(path: str) -> bool:
    return path.startswith(VERSION_DIR) and bool(_NAME.match(path[len(VERSION_DIR) :]))
