"""Object keys: how a namespace, pool, view or index rule is named inside the catalog's B-tree.

A key is the object's type id as 4 base64 characters followed by its names, each right-padded
with spaces to the catalog definition's maximum for that kind of name, counted in UTF-8 bytes:

=============  ===================================  ============================
object         key                                  example (maximum 8 bytes)
=============  ===================================  ============================
namespace      ``B===`` + ns                        ``B===ns1     ``
pool (table)   ``C===`` + ns + pool                 ``C===ns1     t1      ``
view           ``D===`` + ns + view                 ``D===ns1     v1      ``
index rule     ``F===`` + ns + rule                 ``F===ns1     r1      ``
=============  ===================================  ============================

Names may not be empty, longer than the maximum, or contain control characters (0x00-0x1F),
space or DEL. Because padding is a space, which sorts below every allowed character, keys
sort by type, then namespace, then name, exactly as the unpadded names would, so one type's
objects (or one namespace's) are a contiguous key range. Keys compare as UTF-8 bytes; Python
compares ``str`` by code point, which is the same order.
"""

from __future__ import annotations

from dataclasses import dataclass

from lake_core.catalog.proto import objects_pb2
from lake_core.errors import InvalidNameError

NAMESPACE: int = objects_pb2.NAMESPACE
TABLE: int = objects_pb2.TABLE
VIEW: int = objects_pb2.VIEW
INDEX_RULE: int = objects_pb2.INDEX_RULE

#: Base64 digits as the Olympia format orders them (note ``-``, not ``/``, for 63).
ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+-"
TYPE_ID_CHARS = 4

#: Words for messages and for ``lake catalog log``.
KIND: dict[int, str] = {
    NAMESPACE: "namespace",
    TABLE: "pool",
    VIEW: "view",
    INDEX_RULE: "index rule",
}


def encode_type_id(type_id: int) -> str:
    """``1`` → ``B===``: base64 digits, most significant first, right-padded with ``=``."""
    if type_id < 0 or type_id >= 64**TYPE_ID_CHARS:
        raise ValueError(f"object type id {type_id} out of range")
    digits = ""
    n = type_id
    while True:
        digits = ALPHABET[n % 64] + digits
        n //= 64
        if n == 0:
            break
    return digits.ljust(TYPE_ID_CHARS, "=")


def check_name(name: str, max_bytes: int, what: str) -> str:
    """``name`` if it can be part of an object key, else InvalidNameError."""
    if not name:
        raise InvalidNameError(name, f"a {what} must be provided")
    for ch in name:
        if ord(ch) <= 0x20 or ord(ch) == 0x7F:
            raise InvalidNameError(name, f"a {what} must not contain {ch!r}")
    size = len(name.encode("utf-8"))
    if size > max_bytes:
        raise InvalidNameError(
            name, f"a {what} is at most {max_bytes} bytes of UTF-8 in this catalog, not {size}"
        )
    return name


def pad(name: str, max_bytes: int) -> str:
    """``name`` right-padded with spaces to ``max_bytes`` bytes of UTF-8."""
    return name + " " * (max_bytes - len(name.encode("utf-8")))


@dataclass(frozen=True)
class KeyWidths:
    """The padded widths, in UTF-8 bytes, from the catalog definition."""

    namespace: int
    table: int
    view: int
    index_rule: int

    @classmethod
    def of(cls, catalog_def: objects_pb2.CatalogDef) -> KeyWidths:
        return cls(
            catalog_def.namespace_name_max_size_bytes,
            catalog_def.table_name_max_size_bytes,
            catalog_def.view_name_max_size_bytes,
            catalog_def.index_rule_name_max_size_bytes or catalog_def.view_name_max_size_bytes,
        )

    def name_width(self, object_type: int) -> int:
        widths: dict[int, int] = {TABLE: self.table, VIEW: self.view, INDEX_RULE: self.index_rule}
        return widths[object_type]


@dataclass(frozen=True, order=True)
class ObjectRef:
    """A keyed catalog object: its type, namespace, and name (empty for a namespace)."""

    type: int
    namespace: str
    name: str = ""

    def __post_init__(self) -> None:
        if self.type not in KIND:
            raise ValueError(f"object type {self.type} has no key")
        if self.type == NAMESPACE and self.name:
            raise ValueError("a namespace has no object name")

    @property
    def kind(self) -> str:
        return KIND[self.type]

    @property
    def display(self) -> str:
        """How the CLI prints it: ``ns1``, ``ns1.logs``, or ``logs`` (a pool or view) in
        namespace default."""
        from lake_core.names import DEFAULT_NAMESPACE

        if self.type == NAMESPACE:
            return self.namespace
        if self.type in (TABLE, VIEW) and self.namespace == DEFAULT_NAMESPACE:
            return self.name
        return f"{self.namespace}.{self.name}"

    def key(self, widths: KeyWidths) -> str:
        """The object key; raises InvalidNameError for a name that cannot be keyed."""
        check_name(self.namespace, widths.namespace, "namespace name")
        key = encode_type_id(self.type) + pad(self.namespace, widths.namespace)
        if self.type == NAMESPACE:
            return key
        width = widths.name_width(self.type)
        check_name(self.name, width, f"{self.kind} name")
        return key + pad(self.name, width)


def parse_key(key: str, widths: KeyWidths) -> ObjectRef:
    """The object an object key names. Raises ValueError for a malformed key."""
    raw = key.encode("utf-8")
    head = raw[:TYPE_ID_CHARS].decode("ascii", "replace")
    for type_id in KIND:
        if head != encode_type_id(type_id):
            continue
        ns_end = TYPE_ID_CHARS + widths.namespace
        want = ns_end if type_id == NAMESPACE else ns_end + widths.name_width(type_id)
        if len(raw) != want:
            break
        ns = raw[TYPE_ID_CHARS:ns_end].decode("utf-8").rstrip(" ")
        name = raw[ns_end:].decode("utf-8").rstrip(" ") if type_id != NAMESPACE else ""
        return ObjectRef(type_id, ns, name)
    raise ValueError(f"{key!r} is not an object key of this catalog")


def prefix_range(prefix: str) -> tuple[str, str]:
    """``[lo, hi)`` covering exactly the keys that start with ``prefix``."""
    return prefix, prefix[:-1] + chr(ord(prefix[-1]) + 1)


def type_range(object_type: int) -> tuple[str, str]:
    """Every key of one type."""
    return prefix_range(encode_type_id(object_type))


def namespace_range(object_type: int, namespace: str, widths: KeyWidths) -> tuple[str, str]:
    """Every key of one type inside one namespace."""
    return prefix_range(encode_type_id(object_type) + pad(namespace, widths.namespace))
