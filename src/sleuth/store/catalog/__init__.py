"""The SQL catalog: collections (and their owners), documents, chunks, references, agent runs,
conversation threads and the users of the HTTP API.

The catalog is the source of truth for *what* is indexed (the search index only holds what is
needed to search). It is a SQLAlchemy 2 database, SQLite in ``settings.data_dir`` by default
(WAL journal, foreign keys on); any SQLAlchemy URL works unchanged (e.g. PostgreSQL), since
only portable column types are used and JSON goes through :class:`sqlalchemy.JSON`.

Every :class:`Catalog` method opens its own short session, so one ``Catalog`` may be shared by
threads. Methods return pydantic models (or :mod:`sleuth.types` models, or plain dicts for
runs), never ORM objects.

The package's modules each own one part: :mod:`.rows` the tables and the engine,
:mod:`.collections` collections and users, :mod:`.documents` documents, chunks and
references, :mod:`.runs` runs and ingestion jobs, :mod:`.threads` conversation threads;
:class:`Catalog` puts their methods together.
"""

from __future__ import annotations

import threading

from sqlalchemy.engine import URL, make_url
from sqlalchemy.orm import Session, sessionmaker

from sleuth.config import Settings
from sleuth.store.catalog.collections import (
    COLLECTION_NAME_PATTERN,
    COLLECTION_NAME_RULE,
    CollectionInfo,
    CollectionsMixin,
    UserInfo,
    check_backend,
    validate_collection_name,
)
from sleuth.store.catalog.documents import DocStatus, DocumentInfo, DocumentsMixin, OutlineEntry
from sleuth.store.catalog.rows import _Base, _catalog_error, _make_engine
from sleuth.store.catalog.runs import RunsMixin
from sleuth.store.catalog.threads import ThreadInfo, ThreadsMixin, TurnInfo

__all__ = [
    "COLLECTION_NAME_PATTERN",
    "COLLECTION_NAME_RULE",
    "Catalog",
    "CollectionInfo",
    "DocStatus",
    "DocumentInfo",
    "OutlineEntry",
    "ThreadInfo",
    "TurnInfo",
    "UserInfo",
    "check_backend",
    "validate_collection_name",
]


class Catalog(CollectionsMixin, DocumentsMixin, RunsMixin, ThreadsMixin):
    """Thread-safe access to the catalog database.

    Args:
        url: a SQLAlchemy URL, e.g. ``sqlite:////home/me/.sleuth/catalog.sqlite3`` or
            ``postgresql+psycopg://user:pw@host/sleuth``. Tables are created if missing.

    Raises:
        ConfigError: the URL is malformed, its database driver is not installed, or the
            database cannot be reached; the message names ``SLEUTH_DATABASE_URL`` (password
            masked) and the cause, on one line.
    """

    def __init__(self, url: str | URL) -> None:
        try:
            self.url = make_url(url)
            self.engine = _make_engine(self.url)
        except Exception as exc:
            raise _catalog_error(url, exc) from exc
        try:
            _Base.metadata.create_all(self.engine)
        except Exception as exc:
            self.engine.dispose()
            raise _catalog_error(url, exc) from exc
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)
        self._create_lock = threading.Lock()

    @classmethod
    def from_settings(cls, settings: Settings) -> Catalog:
        """Open the catalog at ``settings.catalog_url``."""
        return cls(settings.catalog_url)

    def close(self) -> None:
        """Dispose of the connection pool."""
        self.engine.dispose()

    def _session(self) -> Session:
        return self._sessions()
