"""What runs inside Spark tasks besides the lake's own code: opening stores, and carrying
errors back to the driver intact.

Spark reports a failed Python task as a ``PythonException`` holding a traceback string; the
lake's callers need its structured errors (``MalformedInputError`` naming the file and line,
``SchemaConflictError`` naming the column). So the lake's tasks never raise: they return a
:class:`TaskError` holding the pickled exception, and the driver re-raises the very same error
once every task has reported — and after removing every object any task wrote.
"""

from __future__ import annotations

import pickle
import traceback
from dataclasses import dataclass
from functools import lru_cache
from typing import NoReturn

from lake_core.stores.base import ObjectStore
from lake_core.stores.factory import open_store
from lake_core.stores.s3config import S3Config


@lru_cache(maxsize=8)
def task_store(uri: str) -> ObjectStore:
    """The store at ``uri``, opened once per Python worker (workers are reused across tasks;
    an S3 store's client is thread-safe and keeps its connections). S3 settings: the
    executor's ``AWS_*`` environment, which the session set from the driver's
    :class:`S3Config` (see :mod:`lake_spark.session`)."""
    return open_store(uri, s3=S3Config.from_env())


@dataclass(frozen=True)
class TaskError:
    """An exception raised inside a task, as the driver re-raises it."""

    payload: bytes | None  # the pickled exception, when it survives pickling
    kind: str
    message: str
    remote_traceback: str

    @classmethod
    def capture(cls, exc: BaseException) -> TaskError:
        payload: bytes | None
        try:
            payload = pickle.dumps(exc)
            pickle.loads(payload)
        except Exception:  # noqa: BLE001 - any unpicklable exception is reported as text
            payload = None
        return cls(
            payload,
            type(exc).__name__,
            str(exc),
            "".join(traceback.format_exception(exc)),
        )

    def exception(self) -> BaseException:
        """The original exception (a RuntimeError with its text when it did not pickle)."""
        if self.payload is not None:
            exc: BaseException = pickle.loads(self.payload)
        else:
            exc = RuntimeError(f"{self.kind}: {self.message}")
        from lake_core.errors import LakeError

        if not isinstance(exc, LakeError):
            # A bug, not a lake error: keep where it happened.
            exc.add_note(f"raised in a Spark task:\n{self.remote_traceback}")
        return exc

    def reraise(self) -> NoReturn:
        raise self.exception()
