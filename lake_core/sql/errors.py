"""What a failed SQL query raises. Each prints as one line; the CLI exits 1 on any of them."""

from __future__ import annotations

from lake_core.errors import LakeError

__all__ = ["SqlError", "SqlRefusedError", "SqlSyntaxError"]


class SqlError(LakeError):
    """The query cannot run: an unknown column, a type mismatch, an engine error."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def __str__(self) -> str:
        return self.message


class SqlSyntaxError(SqlError):
    """The text is not SQL; ``position`` is the 1-based character where parsing stopped."""

    def __init__(self, message: str, position: int | None = None) -> None:
        super().__init__(message)
        self.position = position

    def __reduce__(self) -> tuple[type[SqlSyntaxError], tuple[str, int | None]]:
        return (type(self), (self.message, self.position))


class SqlRefusedError(SqlError):
    """A statement or function SQL over a lake does not allow: SQL here is read-only and
    reads nothing but the lake's tables."""
