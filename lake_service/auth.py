"""Bearer tokens and their scopes.

The tokens file holds one ``TOKEN SCOPE`` pair a line (blank lines and ``#`` comments
allowed); SCOPE is ``read``, ``write`` or ``admin``, each including the ones before it.
Invariants: a token is compared in constant time and never appears in a message, a log line
or an exception (errors name the file and the line number only); a request without a valid
token is refused before any lake code runs.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from enum import IntEnum
from pathlib import Path

from lake_core.errors import UsageError


class Scope(IntEnum):
    """What a token may do; a larger scope includes the smaller ones."""

    READ = 1  # list, query, log, objects, branches
    WRITE = 2  # load, create pools and branches, merge, delete, revert
    ADMIN = 3  # maintenance (compact, cleanup) and catalog changes

    @classmethod
    def parse(cls, text: str) -> Scope:
        try:
            return cls[text.upper()]
        except KeyError:
            raise ValueError(f"scope must be read, write or admin, not {text!r}") from None


class AuthError(Exception):
    """A refused request: 401 (no valid token) or 403 (a token whose scope is too small)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(status, message)
        self.status = status
        self.message = message


@dataclass(frozen=True)
class Tokens:
    """The tokens a server accepts. ``None`` entries: the server runs without tokens and
    every request has every scope (only on loopback, or with ``--insecure``)."""

    entries: tuple[tuple[str, Scope], ...] | None

    @classmethod
    def open(cls) -> Tokens:
        return cls(None)

    @classmethod
    def read(cls, path: Path) -> Tokens:
        """Parse a tokens file; UsageError naming the file and line for a bad one."""
        try:
            text = path.read_text(encoding="utf-8")
        except OSError as e:
            raise UsageError(f"cannot read tokens file {path}: {e.strerror or e}") from None
        except UnicodeDecodeError:
            raise UsageError(f"tokens file {path} is not UTF-8 text") from None
        entries = []
        for n, line in enumerate(text.splitlines(), 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            parts = line.split()
            if len(parts) != 2:
                raise UsageError(f"tokens file {path}, line {n}: expected TOKEN SCOPE")
            try:
                entries.append((parts[0], Scope.parse(parts[1])))
            except ValueError as e:
                raise UsageError(f"tokens file {path}, line {n}: {e}") from None
        if not entries:
            raise UsageError(f"tokens file {path} holds no token")
        return cls(tuple(entries))

    def scope_of(self, authorization: str | None) -> Scope:
        """The scope of an ``Authorization: Bearer TOKEN`` header; AuthError(401) without a
        valid one. Every entry is compared, so timing tells nothing about which matched."""
        if self.entries is None:
            return Scope.ADMIN
        scheme, _, token = (authorization or "").partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise AuthError(401, "missing bearer token (pass --token T or set LAKE_TOKEN)")
        found: Scope | None = None
        given = token.encode()
        for known, scope in self.entries:
            if hmac.compare_digest(known.encode(), given):
                found = scope
        if found is None:
            raise AuthError(401, "invalid token")
        return found

    def require(self, authorization: str | None, needed: Scope) -> Scope:
        """The request's scope when it is at least ``needed``; AuthError(401/403) otherwise."""
        scope = self.scope_of(authorization)
        if scope < needed:
            raise AuthError(
                403, f"this token's scope is {scope.name.lower()}; {needed.name.lower()} needed"
            )
        return scope
