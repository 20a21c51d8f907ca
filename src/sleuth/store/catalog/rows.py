"""The catalog's storage schema: the SQLAlchemy tables, the engine, and reading rows back.

Every table is a ``_...Row`` class on one declarative base, created by
:meth:`~sleuth.store.catalog.Catalog.__init__` with ``create_all``: a table added in a later
version appears in an existing catalog when it is next opened. Only portable column types are
used (JSON through :class:`sqlalchemy.JSON`), so any SQLAlchemy URL works unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

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
    event,
)
from sqlalchemy.engine import URL, Engine, make_url
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column
from sqlalchemy.pool import StaticPool

from sleuth.config import mask_url
from sleuth.errors import ConfigError
from sleuth.types import Chunk, Reference


def _now() -> datetime:
    return datetime.now(UTC)


def _aware(value: datetime | None) -> datetime | None:
    """SQLite drops tzinfo: stored values are UTC, so put it back."""
    if value is not None and value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value


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


class _ThreadRow(_Base):
    """A conversation: the questions asked in turn about one collection by one user."""

    __tablename__ = "threads"
    __table_args__ = (
        Index("ix_threads_collection", "collection"),
        Index("ix_threads_user_updated", "user_id", "updated_at"),
        Index("ix_threads_updated", "updated_at"),
    )

    thread_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    collection: Mapped[str] = mapped_column(String(255))
    user_id: Mapped[str | None] = mapped_column(String(255), nullable=True)
    title: Mapped[str] = mapped_column(String(200), default="")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)
    turn_count: Mapped[int] = mapped_column(Integer, default=0)


class _TurnRow(_Base):
    """One question of a thread and the answer it got (``position`` 0, 1, … per thread)."""

    __tablename__ = "thread_turns"
    __table_args__ = (
        ForeignKeyConstraint(["thread_id"], ["threads.thread_id"], ondelete="CASCADE"),
        Index("ix_thread_turns_thread_position", "thread_id", "position", unique=True),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    thread_id: Mapped[str] = mapped_column(String(64))
    position: Mapped[int] = mapped_column(Integer)
    question: Mapped[str] = mapped_column(Text)
    rewritten_question: Mapped[str | None] = mapped_column(Text, nullable=True)
    answer: Mapped[str] = mapped_column(Text)
    citations: Mapped[list[str]] = mapped_column(JSON)
    task_id: Mapped[str | None] = mapped_column(String(255), nullable=True)
    status: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=_now)


# --------------------------------------------------------------------------------------------
# Reading rows back
# --------------------------------------------------------------------------------------------


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


def _run_to_dict(row: _RunRow) -> dict[str, Any]:
    out: dict[str, Any] = dict(row.extra or {})
    for name in _RUN_COLUMNS:
        out[name] = getattr(row, name)
    out["created_at"] = _aware(row.created_at)
    out["finished_at"] = _aware(row.finished_at)
    return out


def _to_datetime(value: Any) -> datetime | None:
    """Accept a datetime, an ISO-8601 string or a Unix timestamp (seconds)."""
    if value is None or isinstance(value, datetime):
        return _aware(value)
    if isinstance(value, int | float):
        return datetime.fromtimestamp(float(value), UTC)
    if isinstance(value, str):
        return _aware(datetime.fromisoformat(value))
    raise ValueError(f"not a timestamp: {value!r}")


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


# --------------------------------------------------------------------------------------------
# Engine
# --------------------------------------------------------------------------------------------


_SQLITE_BUSY_TIMEOUT_MS = 30_000
"""How long a SQLite connection waits for another's write lock before failing."""
_SQLITE_AUTO_VACUUM_INCREMENTAL = 2
"""``PRAGMA auto_vacuum`` of a file whose free pages ``PRAGMA incremental_vacuum`` returns."""
_CHECKPOINT_WAIT_MS = 100
"""How long :func:`_release_free_pages` lets the WAL checkpoint wait for other connections."""


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
        Path(database).expanduser().parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(
            parsed,
            connect_args={"check_same_thread": False, "timeout": _SQLITE_BUSY_TIMEOUT_MS / 1000},
        )

    @event.listens_for(engine, "connect")
    def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            if not in_memory:
                if cursor.execute("PRAGMA page_count").fetchone()[0] == 0:
                    # a new file: the pages of deleted rows can then be given back to the
                    # OS (_release_free_pages). It only takes effect before the first table
                    # is created, so an older file keeps its mode.
                    cursor.execute("PRAGMA auto_vacuum=INCREMENTAL")
                cursor.execute("PRAGMA journal_mode=WAL")
                cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute("PRAGMA foreign_keys=ON")
            cursor.execute(f"PRAGMA busy_timeout={_SQLITE_BUSY_TIMEOUT_MS}")
        finally:
            cursor.close()

    return engine


def _release_free_pages(engine: Engine) -> None:
    """Give the pages of deleted rows back to the OS: a SQLite file created with
    ``auto_vacuum=INCREMENTAL`` (every file this catalog creates) shrinks by them.

    Nothing happens on another database or an older SQLite file (``auto_vacuum`` off: its free
    pages are reused by later writes instead). The WAL checkpoint that moves the shrinking
    into the file (and empties the WAL) waits at most :data:`_CHECKPOINT_WAIT_MS` for other
    connections, then does what it can without waiting.
    """
    if engine.dialect.name != "sqlite":
        return
    with engine.connect() as conn:
        mode = conn.exec_driver_sql("PRAGMA auto_vacuum").scalar()
        if mode != _SQLITE_AUTO_VACUUM_INCREMENTAL:
            return
        raw: Any = conn.connection.dbapi_connection
        # executescript steps the pragma to its end: execute() would step it once, which
        # frees a single page
        raw.executescript("PRAGMA incremental_vacuum")
        raw.execute(f"PRAGMA busy_timeout={_CHECKPOINT_WAIT_MS}")
        try:
            raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        finally:
            raw.execute(f"PRAGMA busy_timeout={_SQLITE_BUSY_TIMEOUT_MS}")


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
