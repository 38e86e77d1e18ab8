"""``S3Config``: where S3 is and who we are to it — one object shared by the lake's S3 store,
Spark's tasks and the Dagster resources, so no layer builds an S3 client of its own.

Every field is optional: what is left out comes from boto3's standard resolution
(``AWS_*`` variables, profiles, instance roles). Resolved once at the edge
(:meth:`S3Config.from_env`, or a Dagster resource's config) and passed down.

Secrets (the secret access key and the session token) never appear in ``repr``/``str`` (they
show as ``'***'``), so a config in a log line, an error or Dagster metadata leaks nothing.
This module does not import boto3: only :meth:`client` does.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from botocore.config import _RetryDict
    from mypy_boto3_s3 import S3Client

AddressingStyle = Literal["auto", "path", "virtual"]
_STYLES = ("auto", "path", "virtual")
#: The variable naming the addressing style (boto3 has no standard one).
ADDRESSING_ENV = "LAKE_S3_ADDRESSING_STYLE"
_SECRET = frozenset({"secret_access_key", "session_token"})
#: field -> the standard variable child processes (Spark executors) read it from.
_ENV = {
    "endpoint_url": "AWS_ENDPOINT_URL",
    "region": "AWS_REGION",
    "access_key_id": "AWS_ACCESS_KEY_ID",
    "secret_access_key": "AWS_SECRET_ACCESS_KEY",
    "session_token": "AWS_SESSION_TOKEN",
    "addressing_style": ADDRESSING_ENV,
}


def refuse_credentials_in_uri(uri: str) -> None:
    """Refuse an ``s3://KEY:SECRET@bucket/prefix`` lake URI as a usage error that never
    shows the secret. Credentials in a URI end up in shell history, process lists and logs;
    left to boto3, the user info is taken for part of the bucket name and fails as a raw
    parameter error. A bucket name holds neither ``@`` nor ``:``, so either in the bucket
    part means user info; a secret containing ``/`` (AWS secrets may) ends the bucket part
    early, hence the ``:`` test. The message shows the URI as it should be written (what
    follows the user info) only when the first and the last ``@`` agree on it (a prefix may
    hold an ``@``, a secret might) and it holds no ``:``; otherwise a placeholder."""
    if not uri.startswith("s3://"):
        return
    rest = uri[len("s3://") :]
    bucket = rest.partition("/")[0]
    if "@" not in bucket and not (":" in bucket and "@" in rest):
        return
    from lake_core.errors import UsageError

    location = rest.partition("@")[2]
    plain = location and ":" not in location and location == rest.rpartition("@")[2]
    use = f"s3://{location}" if plain else "s3://BUCKET/PREFIX"
    raise UsageError(
        f"credentials do not belong in an s3:// URL: use {use} and give them in "
        "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (or AWS_PROFILE, ~/.aws/credentials)"
    )


def retries() -> _RetryDict:
    """boto3's retries: standard mode, 8 retries after the first try, unless the standard
    ``AWS_MAX_ATTEMPTS`` (total tries) or ``AWS_RETRY_MODE`` settings say otherwise (an
    explicit Config would silently override them). A retried write whose first try landed
    answers 412 on put-if-missing: see ObjectStore.put_if_missing_idempotent."""
    mode = os.environ.get("AWS_RETRY_MODE")
    out: _RetryDict = {
        "mode": "legacy" if mode == "legacy" else "adaptive" if mode == "adaptive" else "standard"
    }
    total = os.environ.get("AWS_MAX_ATTEMPTS")
    if total and total.strip().isdigit() and int(total) >= 1:
        out["total_max_attempts"] = int(total)
    else:
        out["max_attempts"] = 8
    return out


@dataclass(frozen=True)
class S3Config:
    """S3 endpoint, region, credentials and addressing style (None: boto3 resolves it)."""

    endpoint_url: str | None = None
    region: str | None = None
    access_key_id: str | None = None
    secret_access_key: str | None = None
    session_token: str | None = None
    addressing_style: AddressingStyle = "auto"

    def __post_init__(self) -> None:
        if self.addressing_style not in _STYLES:
            from lake_core.errors import UsageError

            raise UsageError(
                f"S3 addressing style must be auto, path or virtual, not {self.addressing_style!r}"
            )

    def __repr__(self) -> str:
        shown = []
        for f in fields(self):
            value = getattr(self, f.name)
            if value is None:
                continue
            shown.append(f"{f.name}={'***' if f.name in _SECRET else repr(value)}")
        return f"S3Config({', '.join(shown)})"

    __str__ = __repr__

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> S3Config:
        """From the standard ``AWS_*`` variables (``AWS_ENDPOINT_URL_S3`` before
        ``AWS_ENDPOINT_URL``, ``AWS_REGION`` before ``AWS_DEFAULT_REGION``) and
        ``LAKE_S3_ADDRESSING_STYLE``."""
        env = os.environ if env is None else env
        style = (env.get(ADDRESSING_ENV) or "auto").strip().lower()
        return cls(
            endpoint_url=env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL") or None,
            region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION") or None,
            access_key_id=env.get("AWS_ACCESS_KEY_ID") or None,
            secret_access_key=env.get("AWS_SECRET_ACCESS_KEY") or None,
            session_token=env.get("AWS_SESSION_TOKEN") or None,
            addressing_style=style,  # type: ignore[arg-type]  # checked in __post_init__
        )

    def to_env(self) -> dict[str, str]:
        """The standard variables for the fields that are set: what a child process (a Spark
        executor) needs to build the same config with :meth:`from_env`, laid OVER whatever
        environment it inherits.

        So the result also overrides the variables that would otherwise mix into it: with keys
        and no token, ``AWS_SESSION_TOKEN`` is ``""`` (read as unset), so an inherited token
        of another identity never pairs with these keys; an endpoint or region also sets the
        variable :meth:`from_env` prefers (``AWS_ENDPOINT_URL_S3``, ``AWS_REGION``) and its
        fallback, so an inherited one under the other name cannot win."""
        out = {}
        for name, var in _ENV.items():
            value = getattr(self, name)
            if value is not None and not (name == "addressing_style" and value == "auto"):
                out[var] = str(value)
        if self.access_key_id is not None:
            out.setdefault("AWS_SESSION_TOKEN", "")
        if self.endpoint_url is not None:
            out["AWS_ENDPOINT_URL_S3"] = self.endpoint_url
        if self.region is not None:
            out["AWS_DEFAULT_REGION"] = self.region
        return out

    def client(self, max_pool_connections: int = 32) -> S3Client:
        """A boto3 S3 client for this config (retries: see ``lake_core.stores.s3``)."""
        import boto3
        from botocore.config import Config
        from botocore.exceptions import BotoCoreError

        from lake_core.errors import UsageError

        s3: Any = {"addressing_style": self.addressing_style}
        try:
            client: S3Client = boto3.client(
                "s3",
                endpoint_url=self.endpoint_url,
                region_name=self.region,
                aws_access_key_id=self.access_key_id,
                aws_secret_access_key=self.secret_access_key,
                aws_session_token=self.session_token,
                config=Config(retries=retries(), max_pool_connections=max_pool_connections, s3=s3),
            )
        except (ValueError, BotoCoreError) as e:
            # An endpoint that is not a URL, a region boto3 refuses, a broken profile. The
            # message names the setting, never a credential (boto3's messages carry none).
            raise UsageError(f"cannot set up the S3 client: {e}") from None
        return client
