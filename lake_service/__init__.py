"""The lake service: the lake over HTTP (FastAPI + uvicorn), a face beside the CLI and the
Dagster adapter. :mod:`.app` builds the ASGI app, :mod:`.routes` holds the ``/v1`` routes,
:mod:`.auth` the tokens and scopes, :mod:`.limits` the body bound, :mod:`.metrics`
``/metrics``, :mod:`.logs` the access log redaction, :mod:`.streams` query result streams,
:mod:`.settings` and :mod:`.server` how ``lake serve`` runs (``python -m lake_service``).
The wire protocol the client shares is :mod:`lake_core.remote.wire`. See docs/service.md."""

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names as mypy sees them; at run time __getattr__ imports them
    from lake_service.app import create_app
    from lake_service.settings import ServiceSettings

__all__ = ["ServiceSettings", "create_app"]


def __getattr__(name: str) -> Any:
    # Imported on first use, not with the package: ``python -m lake_service`` refuses bad
    # flags before it pays for FastAPI and pyarrow.
    if name == "create_app":
        from lake_service.app import create_app

        return create_app
    if name == "ServiceSettings":
        from lake_service.settings import ServiceSettings

        return ServiceSettings
    raise AttributeError(f"module 'lake_service' has no attribute {name!r}")
