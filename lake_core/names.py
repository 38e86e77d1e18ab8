"""Names of pools, namespaces and branches, and how a ``POOL[@REF]`` argument is read.

Rules (CLI contract): a name is not empty, has no spaces, control characters, DEL, ``.``, ``@``
or ``/``, and is at most :data:`MAX_NAME_BYTES` bytes of UTF-8. A pool is written ``NS.NAME``;
a bare name lives in namespace ``default``.
"""

from __future__ import annotations

from dataclasses import dataclass

from lake_core.errors import InvalidNameError

#: The branch every pool starts with.
MAIN = "main"
#: Journal-table names that are not branches start with "@" (invalid in branch names):
#: ``@tail/<branch>`` is the branch's oldest readable commit after a vacate, ``@vacated`` the
#: vacate time.
TAIL_PREFIX = "@tail/"
VACATED = "@vacated"
#: The catalog's maximum name length in UTF-8 bytes (object keys pad names to this width).
MAX_NAME_BYTES = 64
DEFAULT_NAMESPACE = "default"
#: Metadata tables (:mod:`lake_core.introspection`): ``POOL$NAME`` for a pool's, and
#: ``lake$NAME`` for the lake's (its catalog).
POOL_TABLES = ("commits", "objects", "branches", "partitions", "indexes", "cubes")
LAKE_TABLES = ("pools", "views")
LAKE = "lake"
_FORBIDDEN = set(" .@/")


def _a(what: str) -> str:
    """``what`` with its indefinite article: ``a pool``, ``an index rule``."""
    return f"{'an' if what[:1].lower() in 'aeiou' else 'a'} {what}"


def validate_name(name: str, what: str = "name") -> str:
    """Return ``name`` if it is a valid single name, else raise InvalidNameError."""
    if not name:
        raise InvalidNameError(name, f"{_a(what)} must not be empty")
    for ch in name:
        if ch in _FORBIDDEN or ord(ch) < 32 or ord(ch) == 127 or ch.isspace():
            raise InvalidNameError(name, f"{_a(what)} must not contain {ch!r}")
    if len(name.encode("utf-8")) > MAX_NAME_BYTES:
        raise InvalidNameError(name, f"{_a(what)} is at most {MAX_NAME_BYTES} bytes of UTF-8")
    return name


@dataclass(frozen=True, order=True)
class PoolName:
    """A pool's full name: namespace and name."""

    namespace: str
    name: str

    @classmethod
    def parse(cls, text: str, what: str = "pool") -> PoolName:
        """``NS.NAME`` or ``NAME`` (namespace ``default``); ``what`` names the kind of object
        in errors (views share the rules)."""
        if text.count(".") > 1:
            raise InvalidNameError(text, f"{_a(what)} is NAME or NAMESPACE.NAME")
        ns, dot, name = text.partition(".")
        if not dot:
            ns, name = DEFAULT_NAMESPACE, text
        try:
            return cls(validate_name(ns, "namespace"), validate_name(name, f"{what} name"))
        except InvalidNameError as e:
            # Name what was typed ('.a'), not the part that broke the rule ('').
            raise InvalidNameError(text, e.reason) from None

    def __str__(self) -> str:
        """``NAME`` in the default namespace, else ``NS.NAME``: how ``ls`` prints it."""
        return self.name if self.namespace == DEFAULT_NAMESPACE else f"{self.namespace}.{self.name}"

    @property
    def qualified(self) -> str:
        return f"{self.namespace}.{self.name}"


def split_ref(text: str) -> tuple[str, str | None]:
    """``POOL@REF`` → (``POOL``, ``REF``); ``POOL`` → (``POOL``, None)."""
    pool, at, ref = text.partition("@")
    if at and not ref:
        raise InvalidNameError(text, "nothing after '@'")
    return pool, (ref if at else None)
