"""The SQL catalog: collections (and their owners), documents, chunks, references, agent runs
and the users of the HTTP API.

The catalog is the source of truth for *what* is indexed (the search index only holds what is
needed to search). It is a SQLAlchemy 2 database, SQLite in ``settings.data_dir`` by default
(WAL journal, foreign keys on); any SQLAlchemy URL works unchanged (e.g. PostgreSQL), since
only portable column types are used and JSON goes through :class:`sqlalchemy.JSON`.

Every :class:`Catalog` method opens its own short session, so one ``Catalog`` may be shared by
threads. Methods return pydantic models (or :mod:`sleuth.types` models, or plain dicts for
runs), never ORM objects.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field
from sqlalchemy import (
    JSON,
    DateTime,
    ForeignKeyConstraint,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
    create_engine,
    delete,
    event,
    func,
    insert,
    select,
    update,
)
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import DeclarativeBase, Mapped, Session, mapped_column, sessionmaker
from sqlalchemy.pool import StaticPool

from sleuth.config import Settings, mask_url
from sleuth.errors import ConfigError, EmbeddingModelMismatch, UserError
from sleuth.types import Chunk, Reference

COLLECTION_NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
COLLECTION_NAME_RULE = (
    "1 to 64 characters: letters, digits, '_', '.' or '-', starting with a letter or digit"
)


def validate_collection_name(name: str) -> str:
    """Check a collection name against the one rule used everywhere (CLI, catalog, indexes).

    The rule (:data:`COLLECTION_NAME_PATTERN`) keeps a name usable as a directory name and
    as a Milvus collection name: no path separators, no ``.``/``..``, at most 64 characters.

    Returns:
        The name, unchanged.

    Raises:
        UserError: the name breaks the rule; the message names it and states the rule.
    """
    if not isinstance(name, str) or not COLLECTION_NAME_PATTERN.fullmatch(name):
        shown = name if not isinstance(name, str) or len(name) <= 80 else name[:77] + "..."
        raise UserError(f"invalid collection name {shown!r}: a name is {COLLECTION_NAME_RULE}")
    return name


def check_backend(info: CollectionInfo, backend: str) -> None:
    """Raise if a collection was built on another index backend than the configured one.

    Raises:
        ConfigError: the message names both backends and ``SLEUTH_INDEX_BACKEND``.
    """
    if info.backend != backend:
        raise ConfigError(
            f"collection '{info.name}' lives in the '{info.backend}' index backend, but the "
            f"configured backend is '{backend}'; set SLEUTH_INDEX_BACKEND={info.backend} "
            "or use another collection"
        )


DocStatus = Literal["indexed", "failed", "skipped"]


def _now() -> datetime:
    return datetime.now(UTC)


def _aware(value: datetime | None) -> datetime | None:
    """SQLite drops tzinfo: stored values are UTC, so put it back."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


# --------------------------------------------------------------------------------------------
# Public models
# --------------------------------------------------------------------------------------------


class CollectionInfo(BaseModel):
    """A collection: the embedding model and index backend it was built with, and its size."""

    name: str
    embedding_model: str
    dim: int
    backend: str
    created_at: datetime
    n_documents: int = Field(default=0, description="Documents with status 'indexed'")
    n_chunks: int = 0
    n_failed: int = Field(default=0, description="Documents with status 'failed'")


class DocumentInfo(BaseModel):
    """The catalog record of one document of a collection."""

    doc_id: str
    path: str
    content_hash: str = ""
    status: DocStatus = "indexed"
    error: str | None = None
    n_chunks: int = 0
    title: str | None = None
    updated_at: datetime | None = None


class OutlineEntry(BaseModel):
    """One section of a document's outline (one per ``source_id``, in document order)."""

    source_id: str
    title_path: list[str]
    position: int


class UserInfo(BaseModel):
    """A user of the HTTP API (never carries the key or its hash)."""

    id: str = Field(description="Stable id, e.g. 'u_3f9c0a1b2c4d5e6f'; runs and memory use it")
    name: str
    created_at: datetime
    disabled: bool = Field(default=False, description="Revoked: the key answers 403")


# --------------------------------------------------------------------------------------------
# ORM tables
# --------------------------------------------------------------------------------------------


class _Base(DeclarativeBase):
    pass


class _CollectionRow(_Base):
    __tablename__ = "collections"

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    embedding_model: Mapped[str] = mapped_column(String(512))
    dim: Mapped[int] = mapped_column(Integer)
    backend: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


class _UserRow(_Base):
    __tablename__ = "users"

    id: Mapped[str] = mapped_column(String(64), primary_key=True)
    name: Mapped[str] = mapped_column(String(255), unique=True)
    key_hash: Mapped[str] = mapped_column(String(128), unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    disabled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class _CollectionOwnerRow(_Base):
    """Who owns a collection (a table of its own, so older catalogs gain it unchanged).

    A collection without a row here has no owner: it belongs to the local installation
    (CLI) and no API user reaches it.
    """

    __tablename__ = "collection_owners"
    __table_args__ = (
        ForeignKeyConstraint(["collection"], ["collections.name"], ondelete="CASCADE"),
        ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        Index("ix_collection_owners_user", "user_id"),
    )

    collection: Mapped[str] = mapped_column(String(255), primary_key=True)
    user_id: Mapped[str] = mapped_column(String(64))


def _user_from_row(row: _UserRow) -> UserInfo:
    return UserInfo(
        id=row.id,
        name=row.name,
        created_at=_aware(row.created_at) or _now(),
        disabled=row.disabled_at is not None,
    )


class _DocumentRow(_Base):
    __tablename__ = "documents"
    __table_args__ = (
        UniqueConstraint("collection", "doc_id", name="uq_documents_collection_doc"),
        ForeignKeyConstraint(["collection"], ["collections.name"], ondelete="CASCADE"),
        Index("ix_documents_collection_hash", "collection", "content_hash"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    collection: Mapped[str] = mapped_column(String(255))
    doc_id: Mapped[str] = mapped_column(String(1024))
    path: Mapped[str] = mapped_column(Text)
    title: Mapped[str | None] = mapped_column(Text, nullable=True)
    content_hash: Mapped[str] = mapped_column(String(128), default="")
    status: Mapped[str] = mapped_column(String(16))
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    n_chunks: Mapped[int] = mapped_column(Integer, default=0)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


class _ChunkRow(_Base):
    __tablename__ = "chunks"
    __table_args__ = (
        UniqueConstraint("collection", "chunk_id", name="uq_chunks_collection_chunk"),
        ForeignKeyConstraint(
            ["collection", "doc_id"],
            ["documents.collection", "documents.doc_id"],
            ondelete="CASCADE",
        ),
        Index("ix_chunks_collection_source", "collection", "source_id"),
        Index("ix_chunks_collection_doc", "collection", "doc_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    collection: Mapped[str] = mapped_column(String(255))
    chunk_id: Mapped[str] = mapped_column(String(1024))
    doc_id: Mapped[str] = mapped_column(String(1024))
    source_id: Mapped[str] = mapped_column(String(1024))
    title_path: Mapped[list[str]] = mapped_column(JSON)
    text: Mapped[str] = mapped_column(Text)
    position: Mapped[int] = mapped_column(Integer)
    part: Mapped[int] = mapped_column(Integer, default=0)
    meta: Mapped[dict[str, Any]] = mapped_column("metadata", JSON)


class _ReferenceRow(_Base):
    __tablename__ = "references"
    __table_args__ = (
        ForeignKeyConstraint(
            ["collection", "doc_id"],
            ["documents.collection", "documents.doc_id"],
            ondelete="CASCADE",
        ),
        Index("ix_references_collection_from", "collection", "from_source_id"),
        Index("ix_references_collection_target", "collection", "target_id"),
        Index("ix_references_collection_doc", "collection", "doc_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    collection: Mapped[str] = mapped_column(String(255))
    doc_id: Mapped[str] = mapped_column(String(1024))
    chunk_id: Mapped[str] = mapped_column(String(1024))
    from_source_id: Mapped[str] = mapped_column(String(1024))
    target_text: Mapped[str] = mapped_column(Text)
    target_id: Mapped[str | None] = mapped_column(String(1024), nullable=True)


class _RunRow(_Base):
    __tablename__ = "runs"
    __table_args__ = (
        Index("ix_runs_collection_created", "collection", "created_at"),
        Index("ix_runs_user_created", "user_id", "created_at"),
    )

    task_id: Mapped[str] = mapped_column(String(255), primary_key=True)
    collection: Mapped[str] = mapped_column(String(255))
    user_id: Mapped[str | None] = mapped_column(String(255), nullable=True)
    question: Mapped[str] = mapped_column(Text)
    mode: Mapped[str] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(32))
    answer: Mapped[Any | None] = mapped_column(JSON, nullable=True)
    steps: Mapped[Any | None] = mapped_column(JSON, nullable=True)
    trace: Mapped[Any | None] = mapped_column(JSON, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    extra: Mapped[dict[str, Any] | None] = mapped_column(JSON, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class _JobRow(_Base):
    """An ingestion job of the HTTP API: written before its ``202`` is answered."""

    __tablename__ = "ingest_jobs"
    __table_args__ = (
        Index("ix_ingest_jobs_collection_created", "collection", "created_at"),
        Index("ix_ingest_jobs_state", "state"),
    )

    job_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    collection: Mapped[str] = mapped_column(String(255))
    user_id: Mapped[str] = mapped_column(String(255))
    state: Mapped[str] = mapped_column(String(32))
    staged: Mapped[Any] = mapped_column(JSON)
    progress: Mapped[Any | None] = mapped_column(JSON, nullable=True)
    files: Mapped[Any | None] = mapped_column(JSON, nullable=True)
    warnings: Mapped[Any | None] = mapped_column(JSON, nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    worker: Mapped[str | None] = mapped_column(String(255), nullable=True)
    heartbeat_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    started_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


_JOB_COLUMNS = (
    "job_id",
    "collection",
    "user_id",
    "state",
    "staged",
    "progress",
    "files",
    "warnings",
    "error",
    "worker",
    "heartbeat_at",
    "created_at",
    "started_at",
    "finished_at",
)
_JOB_TIMES = ("heartbeat_at", "created_at", "started_at", "finished_at")
_JOB_REQUIRED = ("collection", "user_id", "state", "staged")


def _job_to_dict(row: _JobRow) -> dict[str, Any]:
    out = {name: getattr(row, name) for name in _JOB_COLUMNS}
    for name in _JOB_TIMES:
        out[name] = _aware(out[name])
    return out


_RUN_COLUMNS = (
    "task_id",
    "collection",
    "user_id",
    "question",
    "mode",
    "status",
    "answer",
    "steps",
    "trace",
    "error",
    "created_at",
    "finished_at",
)
_RUN_REQUIRED = ("collection", "question", "mode", "status")


def _to_datetime(value: Any) -> datetime | None:
    """Accept a datetime, an ISO-8601 string or a Unix timestamp (seconds)."""
    if value is None or isinstance(value, datetime):
        return _aware(value)
    if isinstance(value, int | float):
        return datetime.fromtimestamp(float(value), UTC)
    if isinstance(value, str):
        return _aware(datetime.fromisoformat(value))
    raise ValueError(f"not a timestamp: {value!r}")


# --------------------------------------------------------------------------------------------
# Engine
# --------------------------------------------------------------------------------------------


def _make_engine(url: str | URL) -> Engine:
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite":
        return create_engine(parsed, pool_pre_ping=True)
    database = parsed.database or ""
    in_memory = database in ("", ":memory:") or database.startswith("file::memory:")
    if in_memory:
        engine = create_engine(
            parsed,
            connect_args={"check_same_thread": False},
            poolclass=StaticPool,
        )
    else:
        from pathlib import Path

        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(parsed, connect_args={"check_same_thread": False, "timeout": 30.0})

    @event.listens_for(engine, "connect")
    def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            if not in_memory:
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute("PRAGMA busy_timeout=30000")
        finally:
            cursor.close()

    return engine


def _catalog_error(url: str | URL, exc: BaseException) -> ConfigError:
    """A one-line ConfigError for a catalog that cannot be opened (password masked)."""
    if isinstance(url, URL):
        shown = url.render_as_string(hide_password=True)
        password = url.password
    else:
        shown = mask_url(str(url))
        try:
            password = make_url(url).password
        except Exception:
            password = None
    cause = getattr(exc, "orig", None) or exc
    lines = [ln.strip() for ln in str(cause).splitlines() if ln.strip()]
    message = lines[0] if lines else ""
    if password:
        message = message.replace(str(password), "***")
    return ConfigError(
        f"cannot open the catalog database SLEUTH_DATABASE_URL={shown}: "
        f"{type(cause).__name__}: {message}"
    )


# --------------------------------------------------------------------------------------------
# Catalog
# --------------------------------------------------------------------------------------------


def _chunk_from_row(row: _ChunkRow, refs: Sequence[Reference] = ()) -> Chunk:
    return Chunk(
        chunk_id=row.chunk_id,
        source_id=row.source_id,
        doc_id=row.doc_id,
        title_path=list(row.title_path or []),
        text=row.text,
        position=row.position,
        part=row.part,
        references=list(refs),
        metadata=dict(row.meta or {}),
    )


def _named_user(session: Session, name: str) -> _UserRow:
    """The user row named ``name``; UserError when there is none."""
    row = session.scalar(select(_UserRow).where(_UserRow.name == name))
    if row is None:
        raise UserError(f"no user named '{name}'")
    return row


def _doc_from_row(row: _DocumentRow) -> DocumentInfo:
    return DocumentInfo(
        doc_id=row.doc_id,
        path=row.path,
        content_hash=row.content_hash or "",
        status=row.status,  # type: ignore[arg-type]
        error=row.error,
        n_chunks=row.n_chunks,
        title=row.title,
        updated_at=_aware(row.updated_at),
    )


def _run_to_dict(row: _RunRow) -> dict[str, Any]:
    out: dict[str, Any] = dict(row.extra or {})
    for name in _RUN_COLUMNS:
        out[name] = getattr(row, name)
    out["created_at"] = _aware(row.created_at)
    out["finished_at"] = _aware(row.finished_at)
    return out


def _dedupe(refs: Iterable[Reference]) -> list[Reference]:
    seen: set[tuple[str, str, str | None]] = set()
    out: list[Reference] = []
    for ref in refs:
        key = (ref.source_id, ref.target_text, ref.target_id)
        if key not in seen:
            seen.add(key)
            out.append(ref)
    return out


class Catalog:
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

    # ---------------------------------------------------------------- collections

    def ensure_collection(
        self, name: str, embedding_model: str, dim: int, backend: str
    ) -> CollectionInfo:
        """Create the collection, or check that it was built with this model, dim and backend.

        Returns:
            The collection's info (with counts).

        Raises:
            EmbeddingModelMismatch: the collection exists with another embedding model or
                dimension; the message names both models and dims and the collection.
            ConfigError: the collection exists on another index backend.
            UserError: an invalid collection name (checked before anything is created).
        """
        validate_collection_name(name)
        existing = self.check_collection(name, embedding_model, dim, backend)
        if existing is not None:
            return existing
        with self._create_lock, self._session() as session:
            try:
                session.add(
                    _CollectionRow(
                        name=name, embedding_model=embedding_model, dim=dim, backend=backend
                    )
                )
                session.commit()
            except IntegrityError:  # created concurrently: check it instead
                session.rollback()
        info = self.check_collection(name, embedding_model, dim, backend)
        assert info is not None
        return info

    def check_collection(
        self,
        name: str,
        embedding_model: str,
        dim: int | None = None,
        backend: str | None = None,
    ) -> CollectionInfo | None:
        """Check an existing collection against a model (and optionally dim and backend).

        Useful before the embedding model is loaded (its dim unknown yet).

        Returns:
            The collection's info, or ``None`` if it does not exist.

        Raises:
            EmbeddingModelMismatch: another embedding model or dimension.
            ConfigError: another index backend.
            UserError: an invalid collection name (see :func:`validate_collection_name`).
        """
        validate_collection_name(name)
        info = self.get_collection(name)
        if info is None:
            return None
        if info.embedding_model != embedding_model or (dim is not None and info.dim != dim):
            wanted = f"'{embedding_model}'" + (f" (dim {dim})" if dim is not None else "")
            raise EmbeddingModelMismatch(
                f"collection '{name}' was built with embedding model '{info.embedding_model}' "
                f"(dim {info.dim}), but the configured model is {wanted}; set "
                f"SLEUTH_EMBEDDING_MODEL={info.embedding_model} or use another collection"
            )
        if backend is not None:
            check_backend(info, backend)
        return info

    def get_collection(self, name: str) -> CollectionInfo | None:
        """The collection's info with counts, or ``None`` if it does not exist."""
        with self._session() as session:
            row = session.scalar(select(_CollectionRow).where(_CollectionRow.name == name))
            if row is None:
                return None
            return self._collection_info(session, [row])[0]

    def list_collections(self, owner: str | None = None) -> list[CollectionInfo]:
        """Every collection (or those of the user id ``owner``), by name, with document and
        chunk counts."""
        stmt = select(_CollectionRow).order_by(_CollectionRow.name)
        if owner is not None:
            stmt = stmt.join(
                _CollectionOwnerRow, _CollectionOwnerRow.collection == _CollectionRow.name
            ).where(_CollectionOwnerRow.user_id == owner)
        with self._session() as session:
            rows = list(session.scalars(stmt))
            return self._collection_info(session, rows)

    @staticmethod
    def _collection_info(session: Session, rows: Sequence[_CollectionRow]) -> list[CollectionInfo]:
        names = [r.name for r in rows]
        if not names:
            return []
        doc_counts: dict[tuple[str, str], int] = {}
        for coll, status, n in session.execute(
            select(_DocumentRow.collection, _DocumentRow.status, func.count())
            .where(_DocumentRow.collection.in_(names))
            .group_by(_DocumentRow.collection, _DocumentRow.status)
        ):
            doc_counts[(coll, status)] = n
        chunk_counts = dict(
            session.execute(
                select(_ChunkRow.collection, func.count())
                .where(_ChunkRow.collection.in_(names))
                .group_by(_ChunkRow.collection)
            ).all()
        )
        return [
            CollectionInfo(
                name=r.name,
                embedding_model=r.embedding_model,
                dim=r.dim,
                backend=r.backend,
                created_at=_aware(r.created_at) or _now(),
                n_documents=doc_counts.get((r.name, "indexed"), 0),
                n_chunks=chunk_counts.get(r.name, 0),
                n_failed=doc_counts.get((r.name, "failed"), 0),
            )
            for r in rows
        ]

    def delete_collection(self, name: str) -> bool:
        """Delete a collection and all its documents, chunks and references (runs are kept).

        Returns:
            Whether the collection existed.
        """
        with self._session() as session, session.begin():
            session.execute(delete(_ReferenceRow).where(_ReferenceRow.collection == name))
            session.execute(delete(_ChunkRow).where(_ChunkRow.collection == name))
            session.execute(delete(_DocumentRow).where(_DocumentRow.collection == name))
            session.execute(
                delete(_CollectionOwnerRow).where(_CollectionOwnerRow.collection == name)
            )
            result = session.execute(delete(_CollectionRow).where(_CollectionRow.name == name))
            return bool(result.rowcount)  # type: ignore[attr-defined]

    def set_collection_backend(self, name: str, backend: str) -> None:
        """Record that the collection's index now lives in ``backend`` (after a migration).

        Raises:
            UserError: the collection does not exist.
        """
        with self._session() as session, session.begin():
            row = session.scalar(select(_CollectionRow).where(_CollectionRow.name == name))
            if row is None:
                raise UserError(f"collection '{name}' does not exist")
            row.backend = backend

    def set_collection_owner(self, collection: str, user_id: str | None) -> None:
        """Give a collection to the user ``user_id`` (``None``: no owner, CLI only).

        Raises:
            UserError: the collection or the user does not exist.
        """
        with self._session() as session, session.begin():
            if (
                session.scalar(select(_CollectionRow.id).where(_CollectionRow.name == collection))
                is None
            ):
                raise UserError(f"collection '{collection}' does not exist")
            if user_id is not None and session.get(_UserRow, user_id) is None:
                raise UserError(f"no user with id '{user_id}'")
            row = session.get(_CollectionOwnerRow, collection)
            if user_id is None:
                if row is not None:
                    session.delete(row)
            elif row is None:
                session.add(_CollectionOwnerRow(collection=collection, user_id=user_id))
            else:
                row.user_id = user_id

    def collection_owner(self, collection: str) -> str | None:
        """The user id owning ``collection``, or ``None`` (no owner, or no such collection)."""
        with self._session() as session:
            row = session.get(_CollectionOwnerRow, collection)
            return None if row is None else row.user_id

    # ---------------------------------------------------------------- users

    def add_user(self, user_id: str, name: str, key_hash: str) -> UserInfo:
        """Create a user with the hash of their API key (the key itself is never stored).

        Raises:
            UserError: a user with this name already exists.
        """
        with self._session() as session:
            try:
                row = _UserRow(id=user_id, name=name, key_hash=key_hash)
                session.add(row)
                session.commit()
            except IntegrityError as exc:
                session.rollback()
                raise UserError(f"a user named '{name}' already exists") from exc
            return _user_from_row(row)

    def user_key_hash(self, user_id: str) -> tuple[UserInfo, str] | None:
        """The user with id ``user_id`` and the stored hash of their key, or ``None``."""
        with self._session() as session:
            row = session.get(_UserRow, user_id)
            return None if row is None else (_user_from_row(row), row.key_hash)

    def get_user(self, name: str) -> UserInfo | None:
        """The user named ``name``, or ``None``."""
        with self._session() as session:
            row = session.scalar(select(_UserRow).where(_UserRow.name == name))
            return None if row is None else _user_from_row(row)

    def list_users(self) -> list[UserInfo]:
        """Every user, by name."""
        with self._session() as session:
            return [
                _user_from_row(r) for r in session.scalars(select(_UserRow).order_by(_UserRow.name))
            ]

    def set_user_disabled(self, name: str, disabled: bool = True) -> UserInfo:
        """Revoke (or restore) a user's API key.

        Raises:
            UserError: no user named ``name``.
        """
        with self._session() as session, session.begin():
            row = _named_user(session, name)
            row.disabled_at = (row.disabled_at or _now()) if disabled else None
            return _user_from_row(row)

    def set_user_key(self, name: str, key_hash: str) -> UserInfo:
        """Give a user a new API key (its hash): the old key stops working at once, and a
        revoked user is active again.

        Raises:
            UserError: no user named ``name``.
        """
        with self._session() as session, session.begin():
            row = _named_user(session, name)
            row.key_hash = key_hash
            row.disabled_at = None
            return _user_from_row(row)

    # ---------------------------------------------------------------- documents

    def get_document(self, collection: str, doc_id: str) -> DocumentInfo | None:
        """The document's record, or ``None``."""
        with self._session() as session:
            row = session.scalar(
                select(_DocumentRow).where(
                    _DocumentRow.collection == collection, _DocumentRow.doc_id == doc_id
                )
            )
            return None if row is None else _doc_from_row(row)

    def find_by_path(self, collection: str, path: str) -> list[DocumentInfo]:
        """Documents of the collection read from ``path`` (exact match)."""
        with self._session() as session:
            rows = session.scalars(
                select(_DocumentRow)
                .where(_DocumentRow.collection == collection, _DocumentRow.path == path)
                .order_by(_DocumentRow.doc_id)
            )
            return [_doc_from_row(r) for r in rows]

    def find_by_hash(self, collection: str, content_hash: str) -> DocumentInfo | None:
        """An *indexed* document of the collection with this content hash, or ``None``."""
        if not content_hash:
            return None
        with self._session() as session:
            row = session.scalar(
                select(_DocumentRow)
                .where(
                    _DocumentRow.collection == collection,
                    _DocumentRow.content_hash == content_hash,
                    _DocumentRow.status == "indexed",
                )
                .order_by(_DocumentRow.doc_id)
                .limit(1)
            )
            return None if row is None else _doc_from_row(row)

    def collection_version(self, collection: str) -> tuple[int, int, str]:
        """A cheap token that changes whenever a document of ``collection`` is added, replaced
        or deleted: (documents, chunks, latest update). Used to invalidate caches."""
        stmt = select(
            func.count(_DocumentRow.doc_id),
            func.coalesce(func.sum(_DocumentRow.n_chunks), 0),
            func.max(_DocumentRow.updated_at),
        ).where(_DocumentRow.collection == collection)
        with self._session() as session:
            n_docs, n_chunks, latest = session.execute(stmt).one()
        return int(n_docs), int(n_chunks), str(latest)

    def list_documents(self, collection: str) -> list[DocumentInfo]:
        """Every document record of the collection (any status), by doc_id."""
        with self._session() as session:
            rows = session.scalars(
                select(_DocumentRow)
                .where(_DocumentRow.collection == collection)
                .order_by(_DocumentRow.doc_id)
            )
            return [_doc_from_row(r) for r in rows]

    def save_document(self, collection: str, info: DocumentInfo, chunks: Sequence[Chunk]) -> None:
        """Store a document as indexed, replacing its previous chunks and references.

        One transaction: the old chunks/references go and the new ones arrive together.
        ``info.n_chunks`` and ``info.status`` are overwritten with ``len(chunks)`` and
        ``"indexed"``; references are taken from ``chunk.references``.

        Raises:
            sqlalchemy.exc.IntegrityError: the collection does not exist, or a chunk_id is
                already used in the collection by another document.
        """
        self.save_documents(collection, [(info, chunks)])

    def save_documents(
        self, collection: str, docs: Sequence[tuple[DocumentInfo, Sequence[Chunk]]]
    ) -> None:
        """:meth:`save_document` for several documents, in one transaction.

        Raises:
            sqlalchemy.exc.IntegrityError: as :meth:`save_document` (nothing is saved).
        """
        if not docs:
            return
        now = _now()
        chunk_rows: list[dict[str, Any]] = []
        ref_rows: list[dict[str, Any]] = []
        for info, chunks in docs:
            for c in chunks:
                chunk_rows.append(
                    {
                        "collection": collection,
                        "chunk_id": c.chunk_id,
                        "doc_id": info.doc_id,
                        "source_id": c.source_id,
                        "title_path": list(c.title_path),
                        "text": c.text,
                        "position": c.position,
                        "part": c.part,
                        "meta": dict(c.metadata),
                    }
                )
                ref_rows.extend(
                    {
                        "collection": collection,
                        "doc_id": info.doc_id,
                        "chunk_id": c.chunk_id,
                        "from_source_id": r.source_id or c.source_id,
                        "target_text": r.target_text,
                        "target_id": r.target_id,
                    }
                    for r in _dedupe(c.references)
                )
        with self._session() as session, session.begin():
            for info, chunks in docs:
                self._delete_doc_content(session, collection, info.doc_id)
                self._upsert_document(
                    session,
                    collection,
                    doc_id=info.doc_id,
                    path=info.path,
                    title=info.title,
                    content_hash=info.content_hash,
                    status="indexed",
                    error=None,
                    n_chunks=len(chunks),
                    updated_at=now,
                )
            session.flush()
            if chunk_rows:
                session.execute(insert(_ChunkRow), chunk_rows)
            if ref_rows:
                session.execute(insert(_ReferenceRow), ref_rows)

    def record_failure(
        self,
        collection: str,
        doc_id: str,
        path: str,
        error: str,
        status: DocStatus = "failed",
    ) -> None:
        """Record that a document could not be ingested (``status`` 'failed' or 'skipped').

        Any chunks and references previously stored for ``doc_id`` are removed.
        """
        with self._session() as session, session.begin():
            self._delete_doc_content(session, collection, doc_id)
            self._upsert_document(
                session,
                collection,
                doc_id=doc_id,
                path=path,
                title=None,
                content_hash="",
                status=status,
                error=error,
                n_chunks=0,
                updated_at=_now(),
            )

    def update_references(self, collection: str, resolved: Sequence[Reference]) -> int:
        """Set ``target_id`` of stored unresolved references (matched on source and text).

        Returns:
            How many reference rows were updated.
        """
        n = 0
        with self._session() as session, session.begin():
            for ref in _dedupe(resolved):
                if ref.target_id is None:
                    continue
                result = session.execute(
                    update(_ReferenceRow)
                    .where(
                        _ReferenceRow.collection == collection,
                        _ReferenceRow.from_source_id == ref.source_id,
                        _ReferenceRow.target_text == ref.target_text,
                        _ReferenceRow.target_id.is_(None),
                    )
                    .values(target_id=ref.target_id)
                    .execution_options(synchronize_session=False)
                )
                n += int(result.rowcount or 0)  # type: ignore[attr-defined]
        return n

    def chunks_with_unresolved_references(
        self, collection: str, exclude_doc_ids: Iterable[str] = (), limit: int | None = None
    ) -> list[Chunk] | None:
        """Chunks (with text) holding at least one unresolved reference.

        Returns:
            The chunks, in document order; ``None`` if there are more than ``limit``.
        """
        excluded = list(exclude_doc_ids)
        with self._session() as session:
            ids = select(_ReferenceRow.chunk_id).where(
                _ReferenceRow.collection == collection, _ReferenceRow.target_id.is_(None)
            )
            if excluded:
                ids = ids.where(_ReferenceRow.doc_id.not_in(excluded))
            chunk_ids = list(dict.fromkeys(session.scalars(ids)))
        if limit is not None and len(chunk_ids) > limit:
            return None
        chunks = self.get_chunks(collection, chunk_ids)
        return sorted(chunks, key=lambda c: (c.doc_id, c.position))

    def section_stubs(self, collection: str, exclude_doc_ids: Iterable[str] = ()) -> list[Chunk]:
        """One text-less chunk per section of the collection (its first part), doc order.

        Carries ``source_id``, ``doc_id``, ``title_path``, ``position`` and ``metadata``:
        the reference resolver uses such stand-ins as targets.
        """
        excluded = list(exclude_doc_ids)
        stmt = select(
            _ChunkRow.chunk_id,
            _ChunkRow.source_id,
            _ChunkRow.doc_id,
            _ChunkRow.title_path,
            _ChunkRow.position,
            _ChunkRow.part,
            _ChunkRow.meta,
        ).where(_ChunkRow.collection == collection, _ChunkRow.part == 0)
        if excluded:
            stmt = stmt.where(_ChunkRow.doc_id.not_in(excluded))
        stmt = stmt.order_by(_ChunkRow.doc_id, _ChunkRow.position)
        with self._session() as session:
            return [
                Chunk(
                    chunk_id=cid,
                    source_id=sid,
                    doc_id=did,
                    title_path=list(tp or []),
                    text="",
                    position=pos,
                    part=part,
                    metadata=dict(meta or {}),
                )
                for cid, sid, did, tp, pos, part, meta in session.execute(stmt)
            ]

    def clear_dangling_references(self, collection: str) -> int:
        """Unset ``target_id`` of references whose target section no longer exists.

        Returns:
            How many references were reset (they become unresolved).
        """
        existing = select(_ChunkRow.source_id).where(_ChunkRow.collection == collection)
        with self._session() as session, session.begin():
            result = session.execute(
                update(_ReferenceRow)
                .where(
                    _ReferenceRow.collection == collection,
                    _ReferenceRow.target_id.is_not(None),
                    _ReferenceRow.target_id.not_in(existing),
                )
                .values(target_id=None)
                .execution_options(synchronize_session=False)
            )
            return int(result.rowcount or 0)  # type: ignore[attr-defined]

    def unresolved_references(self, collection: str) -> list[Reference]:
        """Distinct references of the collection whose target is not resolved."""
        with self._session() as session:
            rows = session.execute(
                select(_ReferenceRow.from_source_id, _ReferenceRow.target_text)
                .where(_ReferenceRow.collection == collection, _ReferenceRow.target_id.is_(None))
                .distinct()
                .order_by(_ReferenceRow.from_source_id, _ReferenceRow.target_text)
            )
            return [Reference(source_id=s, target_text=t, target_id=None) for s, t in rows]

    def chunk_owners(self, collection: str, chunk_ids: Sequence[str]) -> dict[str, str]:
        """Map each of ``chunk_ids`` already stored in the collection to its doc_id."""
        out: dict[str, str] = {}
        ids = list(dict.fromkeys(chunk_ids))
        with self._session() as session:
            for start in range(0, len(ids), 500):
                batch = ids[start : start + 500]
                out.update(
                    session.execute(
                        select(_ChunkRow.chunk_id, _ChunkRow.doc_id).where(
                            _ChunkRow.collection == collection, _ChunkRow.chunk_id.in_(batch)
                        )
                    ).all()
                )
        return out

    def delete_document(self, collection: str, doc_id: str) -> bool:
        """Delete a document's record, chunks and references.

        Returns:
            Whether the document existed.
        """
        with self._session() as session, session.begin():
            self._delete_doc_content(session, collection, doc_id)
            result = session.execute(
                delete(_DocumentRow).where(
                    _DocumentRow.collection == collection, _DocumentRow.doc_id == doc_id
                )
            )
            return bool(result.rowcount)  # type: ignore[attr-defined]

    @staticmethod
    def _delete_doc_content(session: Session, collection: str, doc_id: str) -> None:
        session.execute(
            delete(_ReferenceRow).where(
                _ReferenceRow.collection == collection, _ReferenceRow.doc_id == doc_id
            )
        )
        session.execute(
            delete(_ChunkRow).where(_ChunkRow.collection == collection, _ChunkRow.doc_id == doc_id)
        )

    @staticmethod
    def _upsert_document(session: Session, collection: str, **values: Any) -> None:
        row = session.scalar(
            select(_DocumentRow).where(
                _DocumentRow.collection == collection,
                _DocumentRow.doc_id == values["doc_id"],
            )
        )
        if row is None:
            session.add(_DocumentRow(collection=collection, **values))
        else:
            for key, value in values.items():
                setattr(row, key, value)

    # ---------------------------------------------------------------- chunks and structure

    def _refs_by_chunk(
        self, session: Session, collection: str, chunk_ids: Sequence[str]
    ) -> dict[str, list[Reference]]:
        out: dict[str, list[Reference]] = {}
        ids = list(dict.fromkeys(chunk_ids))
        for start in range(0, len(ids), 500):
            rows = session.execute(
                select(
                    _ReferenceRow.chunk_id,
                    _ReferenceRow.from_source_id,
                    _ReferenceRow.target_text,
                    _ReferenceRow.target_id,
                )
                .where(
                    _ReferenceRow.collection == collection,
                    _ReferenceRow.chunk_id.in_(ids[start : start + 500]),
                )
                .order_by(_ReferenceRow.id)
            )
            for chunk_id, src, text, target in rows:
                out.setdefault(chunk_id, []).append(
                    Reference(source_id=src, target_text=text, target_id=target)
                )
        return out

    def chunks_for_source(self, collection: str, source_id: str) -> list[Chunk]:
        """Every chunk (part) of a section, ordered by part; ``[]`` if unknown."""
        with self._session() as session:
            rows = list(
                session.scalars(
                    select(_ChunkRow)
                    .where(_ChunkRow.collection == collection, _ChunkRow.source_id == source_id)
                    .order_by(_ChunkRow.part, _ChunkRow.position)
                )
            )
            refs = self._refs_by_chunk(session, collection, [r.chunk_id for r in rows])
            return [_chunk_from_row(r, refs.get(r.chunk_id, ())) for r in rows]

    def get_chunks(self, collection: str, chunk_ids: Sequence[str]) -> list[Chunk]:
        """The chunks with these ids, in the order asked; unknown ids are left out."""
        ids = list(dict.fromkeys(chunk_ids))
        found: dict[str, Chunk] = {}
        with self._session() as session:
            for start in range(0, len(ids), 500):
                batch = ids[start : start + 500]
                rows = list(
                    session.scalars(
                        select(_ChunkRow).where(
                            _ChunkRow.collection == collection, _ChunkRow.chunk_id.in_(batch)
                        )
                    )
                )
                refs = self._refs_by_chunk(session, collection, [r.chunk_id for r in rows])
                for r in rows:
                    found[r.chunk_id] = _chunk_from_row(r, refs.get(r.chunk_id, ()))
        return [found[i] for i in ids if i in found]

    def doc_chunks(self, collection: str, doc_id: str, references: bool = False) -> list[Chunk]:
        """Every chunk of a document in document order (with their references when
        ``references``)."""
        with self._session() as session:
            rows = list(
                session.scalars(
                    select(_ChunkRow)
                    .where(_ChunkRow.collection == collection, _ChunkRow.doc_id == doc_id)
                    .order_by(_ChunkRow.position, _ChunkRow.part)
                )
            )
            refs = (
                self._refs_by_chunk(session, collection, [r.chunk_id for r in rows])
                if references
                else {}
            )
            return [_chunk_from_row(r, refs.get(r.chunk_id, ())) for r in rows]

    def doc_id_for_source(self, collection: str, source_id: str) -> str | None:
        """The doc_id holding ``source_id``, or ``None`` if unknown."""
        with self._session() as session:
            return session.scalar(
                select(_ChunkRow.doc_id)
                .where(_ChunkRow.collection == collection, _ChunkRow.source_id == source_id)
                .limit(1)
            )

    def neighbours(self, collection: str, source_id: str) -> tuple[str | None, str | None]:
        """The previous and next section (source_id) in the same document, by position.

        Returns:
            ``(previous, next)``; either is ``None`` at a document edge, both if unknown.
        """
        with self._session() as session:
            bounds = session.execute(
                select(_ChunkRow.doc_id, func.min(_ChunkRow.position), func.max(_ChunkRow.position))
                .where(_ChunkRow.collection == collection, _ChunkRow.source_id == source_id)
                .group_by(_ChunkRow.doc_id)
                .limit(1)
            ).first()
            if bounds is None:
                return None, None
            doc_id, first, last = bounds
            base = select(_ChunkRow.source_id).where(
                _ChunkRow.collection == collection,
                _ChunkRow.doc_id == doc_id,
                _ChunkRow.source_id != source_id,
            )
            prev = session.scalar(
                base.where(_ChunkRow.position < first)
                .order_by(_ChunkRow.position.desc(), _ChunkRow.part.desc())
                .limit(1)
            )
            nxt = session.scalar(
                base.where(_ChunkRow.position > last)
                .order_by(_ChunkRow.position, _ChunkRow.part)
                .limit(1)
            )
            return prev, nxt

    def outline(self, collection: str, doc_id: str) -> list[OutlineEntry]:
        """One entry per section of the document, in document order.

        ``position`` is the position of the section's first chunk. ``[]`` if unknown.
        """
        with self._session() as session:
            rows = session.execute(
                select(_ChunkRow.source_id, _ChunkRow.title_path, _ChunkRow.position)
                .where(_ChunkRow.collection == collection, _ChunkRow.doc_id == doc_id)
                .order_by(_ChunkRow.position, _ChunkRow.part)
            )
            seen: dict[str, OutlineEntry] = {}
            for source_id, title_path, position in rows:
                if source_id not in seen:
                    seen[source_id] = OutlineEntry(
                        source_id=source_id, title_path=list(title_path or []), position=position
                    )
            return list(seen.values())

    def all_section_keys(self, collection: str) -> list[tuple[str, list[str]]]:
        """``(source_id, title_path)`` of every section of the collection, once each.

        Ordered by document then position; for cross-document reference resolution.
        """
        with self._session() as session:
            rows = session.execute(
                select(_ChunkRow.source_id, _ChunkRow.title_path)
                .where(_ChunkRow.collection == collection)
                .order_by(_ChunkRow.doc_id, _ChunkRow.position, _ChunkRow.part)
            )
            seen: dict[str, list[str]] = {}
            for source_id, title_path in rows:
                seen.setdefault(source_id, list(title_path or []))
            return list(seen.items())

    # ---------------------------------------------------------------- references

    def references_from(self, collection: str, source_id: str) -> list[Reference]:
        """References made by a section (all its parts), distinct, in text order."""
        with self._session() as session:
            rows = session.execute(
                select(
                    _ReferenceRow.from_source_id, _ReferenceRow.target_text, _ReferenceRow.target_id
                )
                .where(
                    _ReferenceRow.collection == collection,
                    _ReferenceRow.from_source_id == source_id,
                )
                .order_by(_ReferenceRow.id)
            )
            return _dedupe(Reference(source_id=s, target_text=t, target_id=g) for s, t, g in rows)

    def references_to(self, collection: str, source_id: str) -> list[Reference]:
        """Resolved references pointing at a section, distinct, by citing section."""
        with self._session() as session:
            rows = session.execute(
                select(
                    _ReferenceRow.from_source_id, _ReferenceRow.target_text, _ReferenceRow.target_id
                )
                .where(_ReferenceRow.collection == collection, _ReferenceRow.target_id == source_id)
                .order_by(_ReferenceRow.from_source_id, _ReferenceRow.id)
            )
            return _dedupe(Reference(source_id=s, target_text=t, target_id=g) for s, t, g in rows)

    # ---------------------------------------------------------------- runs

    def save_run(self, run: Mapping[str, Any]) -> None:
        """Insert or update an agent run.

        ``run`` must hold ``task_id``; on insert also ``collection``, ``question``, ``mode``
        and ``status``. On update only the keys present are changed. Known keys: task_id,
        collection, user_id, question, mode, status, answer, steps, trace (JSON-serialisable),
        error, created_at, finished_at (datetime, ISO string or Unix seconds); any other key is
        kept in an extra JSON field and returned by :meth:`get_run`.

        Raises:
            ValueError: ``task_id`` missing, or a required key missing on insert.
        """
        task_id = run.get("task_id")
        if not task_id:
            raise ValueError("save_run: the run has no 'task_id'")
        values: dict[str, Any] = {}
        extra: dict[str, Any] = {}
        for key, value in run.items():
            if key in _RUN_COLUMNS:
                values[key] = value
            else:
                extra[key] = value
        for key in ("created_at", "finished_at"):
            if key in values:
                values[key] = _to_datetime(values[key])
        if values.get("created_at") is None:
            values.pop("created_at", None)
        with self._session() as session, session.begin():
            row = session.get(_RunRow, task_id)
            if row is None:
                missing = [k for k in _RUN_REQUIRED if values.get(k) is None]
                if missing:
                    raise ValueError(f"save_run: new run '{task_id}' lacks {', '.join(missing)}")
                session.add(_RunRow(**values, extra=extra or None))
            else:
                for key, value in values.items():
                    setattr(row, key, value)
                if extra:
                    row.extra = {**(row.extra or {}), **extra}

    def get_run(self, task_id: str) -> dict[str, Any] | None:
        """The run as a dict (keys as in :meth:`save_run`, timestamps as UTC datetimes)."""
        with self._session() as session:
            row = session.get(_RunRow, task_id)
            return None if row is None else _run_to_dict(row)

    def list_runs(
        self,
        collection: str | None = None,
        user_id: str | None = None,
        limit: int = 50,
        status: str | None = None,
    ) -> list[dict[str, Any]]:
        """Runs, newest first, optionally of one collection, one user and/or one status."""
        stmt = select(_RunRow)
        if status is not None:
            stmt = stmt.where(_RunRow.status == status)
        if collection is not None:
            stmt = stmt.where(_RunRow.collection == collection)
        if user_id is not None:
            stmt = stmt.where(_RunRow.user_id == user_id)
        stmt = stmt.order_by(_RunRow.created_at.desc(), _RunRow.task_id).limit(max(0, limit))
        with self._session() as session:
            return [_run_to_dict(r) for r in session.scalars(stmt)]

    # ---------------------------------------------------------------- ingestion jobs

    def save_job(self, job: Mapping[str, Any]) -> None:
        """Insert or update an ingestion job (keys: the columns of :func:`get_job`; on
        insert ``job_id``, ``collection``, ``user_id``, ``state`` and ``staged`` at least).

        Raises:
            ValueError: ``job_id`` missing, an unknown key, or (on insert) a required one
                missing.
        """
        job_id = job.get("job_id")
        if not job_id:
            raise ValueError("save_job: the job has no 'job_id'")
        unknown = sorted(set(job) - set(_JOB_COLUMNS))
        if unknown:
            raise ValueError(f"save_job: unknown keys {', '.join(unknown)}")
        values = {k: (_to_datetime(v) if k in _JOB_TIMES else v) for k, v in job.items()}
        with self._session() as session, session.begin():
            row = session.get(_JobRow, job_id)
            if row is None:
                missing = [k for k in _JOB_REQUIRED if values.get(k) is None]
                if missing:
                    raise ValueError(f"save_job: a new job needs {', '.join(missing)}")
                session.add(_JobRow(**values))
            else:
                for key, value in values.items():
                    setattr(row, key, value)

    def get_job(self, job_id: str) -> dict[str, Any] | None:
        """The job as a dict: job_id, collection, user_id, state, staged (file name → path of
        the upload), progress, files, warnings (JSON), error, worker, heartbeat_at,
        created_at, started_at, finished_at (UTC datetimes)."""
        with self._session() as session:
            row = session.get(_JobRow, job_id)
            return None if row is None else _job_to_dict(row)

    def list_jobs(
        self, collection: str | None = None, states: Sequence[str] | None = None, limit: int = 1000
    ) -> list[dict[str, Any]]:
        """Jobs, newest first, optionally of one collection and in some states."""
        stmt = select(_JobRow)
        if collection is not None:
            stmt = stmt.where(_JobRow.collection == collection)
        if states is not None:
            stmt = stmt.where(_JobRow.state.in_(list(states)))
        stmt = stmt.order_by(_JobRow.created_at.desc(), _JobRow.job_id).limit(max(0, limit))
        with self._session() as session:
            return [_job_to_dict(r) for r in session.scalars(stmt)]

    def claim_job(self, job_id: str, worker: str, previous: str | None) -> bool:
        """Make ``worker`` the job's worker if its worker is still ``previous`` (one atomic
        conditional UPDATE: of several processes taking over the same job, exactly one
        succeeds, on SQLite and PostgreSQL alike). Returns whether this one did."""
        owner = _JobRow.worker.is_(None) if previous is None else _JobRow.worker == previous
        stmt = (
            update(_JobRow)
            .where(_JobRow.job_id == job_id, owner)
            .values(worker=worker, heartbeat_at=_now())
        )
        with self._session() as session, session.begin():
            return session.execute(stmt).rowcount == 1

    def touch_jobs(self, job_ids: Sequence[str], worker: str) -> None:
        """Renew the heartbeat of the jobs ``worker`` still holds."""
        stmt = (
            update(_JobRow)
            .where(_JobRow.job_id.in_(list(job_ids)), _JobRow.worker == worker)
            .values(heartbeat_at=_now())
        )
        with self._session() as session, session.begin():
            session.execute(stmt)

    def delete_jobs(self, collection: str) -> int:
        """Forget the jobs of a collection; returns how many."""
        with self._session() as session, session.begin():
            return session.execute(delete(_JobRow).where(_JobRow.collection == collection)).rowcount
