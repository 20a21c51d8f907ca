"""A throwaway PostgreSQL 16 server with pgvector for tests, started from the ``pgserver``
wheel (no system packages, no download): its data directory and unix socket live in a
temporary folder, and it is stopped when the tests are done.
"""

from __future__ import annotations

import importlib.util
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

HAVE_POSTGRES = all(importlib.util.find_spec(m) for m in ("pgserver", "psycopg", "psycopg_pool"))
NO_POSTGRES = "pgserver / psycopg / psycopg-pool not installed (pip install -e '.[postgres,dev]')"


@contextmanager
def postgres_server(directory: Path) -> Iterator[str]:
    """Start a server with its data in ``directory``; yield its SQLAlchemy URL (database
    ``postgres``, user ``postgres``, over the unix socket); stop it afterwards."""
    import pgserver

    server = pgserver.get_server(directory, cleanup_mode="stop")
    try:
        yield sqlalchemy_url(server.get_uri())
    finally:
        server.cleanup()


def sqlalchemy_url(uri: str) -> str:
    """``postgresql://…`` as psycopg's SQLAlchemy URL (``postgresql+psycopg://…``)."""
    return uri.replace("postgresql://", "postgresql+psycopg://", 1)


def new_database(url: str) -> str:
    """Create an empty database on the server of ``url``; return its URL."""
    import psycopg
    from sqlalchemy.engine import make_url

    from sleuth.store.postgres_index import libpq_url

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(libpq_url(url), autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return make_url(url).set(database=name).render_as_string(hide_password=False)
