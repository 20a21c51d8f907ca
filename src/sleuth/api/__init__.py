"""The HTTP API of sleuth (FastAPI): agent search with SSE streaming, collections, documents,
ingestion jobs, users with API keys.

``create_app(settings)`` builds the application; ``sleuth serve`` runs it with uvicorn. The
package imports FastAPI lazily: :mod:`sleuth.api.keys` (users and API keys, used by the CLI)
works without the ``api`` extra.
"""

from __future__ import annotations

from typing import Any

__all__ = ["create_app"]


def __getattr__(name: str) -> Any:
    if name == "create_app":
        from sleuth.api.app import create_app

        return create_app
    raise AttributeError(name)
