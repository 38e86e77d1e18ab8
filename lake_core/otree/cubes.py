"""OTree cubes: lattice coordinates, Morton codes, and Qbeast's cube-id strings.

A revision maps each row to a point of ``[0, 1]^d``; the point's *lattice coordinate* in
dimension ``i`` is ``q_i = min(floor(x_i * 2^D), 2^D - 1)`` with ``D = depth_limit(d)`` levels.
A cube at depth ``L`` is the set of points sharing the top ``L`` bits of every ``q_i``; its
*prefix* is those bits interleaved level by level, dimension by dimension (bit ``d*l + i`` of
Qbeast's bitmask), so the prefix is the top ``d*L`` bits of the point's *Morton code*. Hence:

* the rows of any cube are contiguous when rows are sorted by Morton code, at every depth;
* cube pre-order (an ancestor before its descendants, siblings by bits) is the order of
  ``(prefix << d*(D-L), L)`` — :func:`preorder_key`;
* the string form is Qbeast's (``ceil(d/6)`` characters per level from :data:`ALPHABET`, the
  first dimension of each group of six the most significant bit), so ``""`` is the root and a
  whole-level string prefix is an ancestor.

``D`` is ``min(30, 63 // d)`` so a Morton code fits an int64; a cube at depth ``D`` cannot be
split further (rows with equal coordinates cannot be told apart), and is always a leaf.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_INDEX = {c: i for i, c in enumerate(ALPHABET)}


def depth_limit(dims: int) -> int:
    """The deepest level a cube of ``dims`` dimensions can have here."""
    if dims < 1:
        raise ValueError("an OTree indexes at least one column")
    return min(30, 63 // dims)


def lattice(x: np.ndarray, dims: int) -> np.ndarray:
    """Coordinates in ``[0, 1]`` (clamped; NaN counts as 0) as int64 lattice coordinates.
    Monotone non-decreasing in ``x``: bounds mapped with it bracket the rows mapped with it."""
    scale = float(1 << depth_limit(dims))
    clean = np.nan_to_num(np.asarray(x, dtype=np.float64), nan=0.0)
    q = np.floor(np.clip(clean, 0.0, 1.0) * scale)
    return np.minimum(q, scale - 1).astype(np.int64)


def morton(q: np.ndarray) -> np.ndarray:
    """Morton codes (int64) of lattice coordinates ``q`` of shape (n, d): bit ``d*l + i`` of
    the cube bitmask (level ``l``, dimension ``i``) is bit ``d*(D-1-l) + (d-1-i)`` of the code,
    so codes order like cube bit strings."""
    n, dims = q.shape
    depth = depth_limit(dims)
    spread = _spread_table(dims)
    code = np.zeros(n, dtype=np.int64)
    # A byte of q_i at a time: its 8 bits land ``dims`` apart (a table lookup), so a code
    # costs ceil(D / 8) passes per dimension instead of D.
    for i in range(dims):
        column = q[:, i].astype(np.int64)
        for k in range(0, depth, 8):
            byte = (column >> k) & 0xFF
            code |= spread[byte] << (dims * k + (dims - 1 - i))
    return code


_SPREAD: dict[int, np.ndarray] = {}


def _spread_table(dims: int) -> np.ndarray:
    """For every byte value, its bits moved ``dims`` apart (bit j to bit ``dims * j``)."""
    table = _SPREAD.get(dims)
    if table is None:
        values = np.arange(256, dtype=np.int64)
        table = np.zeros(256, dtype=np.int64)
        for j in range(8):
            table |= ((values >> j) & 1) << (dims * j)
        _SPREAD[dims] = table
    return table


@dataclass(frozen=True, order=True)
class Cube:
    """A cube of a ``dims``-dimensional OTree: its depth and the top ``dims*depth`` Morton bits."""

    dims: int
    depth: int
    prefix: int

    @property
    def shift(self) -> int:
        """Bits of a Morton code below this cube's prefix."""
        return self.dims * (depth_limit(self.dims) - self.depth)

    def sort_key(self) -> tuple[int, int]:
        """Pre-order: an ancestor before its descendants, siblings by their bits."""
        return (self.prefix << self.shift, self.depth)

    def parent(self) -> Cube:
        if self.depth == 0:
            raise ValueError("the root has no parent")
        return Cube(self.dims, self.depth - 1, self.prefix >> self.dims)

    def contains_code(self, code: int) -> bool:
        return code >> self.shift == self.prefix

    def lattice_box(self) -> list[tuple[int, int]]:
        """Per dimension, the inclusive range of lattice coordinates the cube covers."""
        depth = depth_limit(self.dims)
        out = []
        for i in range(self.dims):
            bits = 0
            for level in range(self.depth):
                shift = self.dims * (self.depth - 1 - level) + (self.dims - 1 - i)
                bits = (bits << 1) | ((self.prefix >> shift) & 1)
            lo = bits << (depth - self.depth)
            out.append((lo, lo + (1 << (depth - self.depth)) - 1))
        return out

    def box(self) -> list[tuple[float, float]]:
        """Per dimension, ``[from, to)`` in ``[0, 1]``."""
        scale = float(1 << depth_limit(self.dims))
        return [(lo / scale, (hi + 1) / scale) for lo, hi in self.lattice_box()]

    def to_string(self) -> str:
        """Qbeast's cube id: ``ceil(d/6)`` characters per level."""
        chars = []
        for level in range(self.depth):
            shift = self.dims * (self.depth - 1 - level)
            bits = [(self.prefix >> (shift + self.dims - 1 - i)) & 1 for i in range(self.dims)]
            for start in range(0, self.dims, 6):
                value = 0
                for j, bit in enumerate(bits[start : start + 6]):
                    value |= bit << (5 - j)
                chars.append(ALPHABET[value])
        return "".join(chars)

    @classmethod
    def from_string(cls, text: str, dims: int) -> Cube:
        """The inverse of :meth:`to_string`. Raises ValueError on a malformed id."""
        per_level = -(-dims // 6)
        if len(text) % per_level:
            raise ValueError(f"cube id {text!r} is not a whole number of levels of {dims} dims")
        depth = len(text) // per_level
        if depth > depth_limit(dims):
            raise ValueError(f"cube id {text!r} is deeper than {depth_limit(dims)} levels")
        prefix = 0
        for level in range(depth):
            chunk = text[level * per_level : (level + 1) * per_level]
            bits: list[int] = []
            for k, ch in enumerate(chunk):
                if ch not in _INDEX:
                    raise ValueError(f"cube id {text!r} holds {ch!r}")
                width = min(6, dims - 6 * k)
                value = _INDEX[ch]
                if value & ((1 << (6 - width)) - 1):
                    raise ValueError(f"cube id {text!r}: {ch!r} sets bits of no dimension")
                bits += [(value >> (5 - j)) & 1 for j in range(width)]
            for bit in bits:
                prefix = (prefix << 1) | bit
        return cls(dims, depth, prefix)


def root(dims: int) -> Cube:
    return Cube(dims, 0, 0)


def cube_of(code: int, depth: int, dims: int) -> Cube:
    """The cube at ``depth`` that holds the point of Morton ``code``."""
    return Cube(dims, depth, code >> (dims * (depth_limit(dims) - depth)))


__all__ = ["ALPHABET", "Cube", "cube_of", "depth_limit", "lattice", "morton", "root"]
