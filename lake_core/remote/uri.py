"""Which lake URIs name a lake behind the lake service (light: no HTTP client imported)."""

from __future__ import annotations

REMOTE_SCHEMES = ("http://", "https://")


def is_remote_uri(uri: str) -> bool:
    """True for a lake reached through the service (``http://…``, ``https://…``)."""
    return uri.lower().startswith(REMOTE_SCHEMES)
