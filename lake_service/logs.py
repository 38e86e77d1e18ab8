"""Access log lines without secrets.

uvicorn's access log prints the request line, query string included. Tokens travel only in
the ``Authorization`` header (never logged), but a client may still put one, or an S3 secret,
in a query string by mistake: this filter replaces the value of every query parameter whose
name looks like a credential with ``REDACTED`` before the line is formatted.
"""

from __future__ import annotations

import logging
import re

_SECRET_NAMES = re.compile(
    # Any name holding ``auth`` (authorization, oauth_code, x-auth) but ``author`` itself: a
    # load's commit author is no secret, and the log should say who loaded.
    r"(?i)([?&](?!author=)(?:[^=&]*(?:token|secret|password|passwd|signature|credential|auth|"
    r"access[_-]?key|session)[^=&]*)=)[^&\s\"]*"
)


def redact(text: str) -> str:
    """``text`` with the values of credential-like query parameters replaced."""
    return _SECRET_NAMES.sub(r"\1REDACTED", text)


class RedactSecrets(logging.Filter):
    """A logging filter for ``uvicorn.access``: redact the request path in the record's
    arguments (uvicorn passes ``client, method, path, http version, status``)."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(redact(a) if isinstance(a, str) else a for a in record.args)
        if isinstance(record.msg, str):
            record.msg = redact(record.msg)
        return True
