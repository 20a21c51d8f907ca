"""Collections (the embedding model and index backend each was built with, and its owner)
and the users of the HTTP API."""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from datetime import datetime

from pydantic import BaseModel, Field
from sqlalchemy import delete, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from sleuth.errors import ConfigError, EmbeddingModelMismatch, UserError
from sleuth.store.catalog.rows import (
    _aware,
    _ChunkRow,
    _CollectionOwnerRow,
    _CollectionRow,
    _DocumentRow,
    _now,
    _ReferenceRow,
    _ThreadRow,
    _TurnRow,
    _UserRow,
)

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


class UserInfo(BaseModel):
    """A user of the HTTP API (never carries the key or its hash)."""

    id: str = Field(description="Stable id, e.g. 'u_3f9c0a1b2c4d5e6f'; runs and memory use it")
    name: str
    created_at: datetime
    disabled: bool = Field(default=False, description="Revoked: the key answers 403")


def _user_from_row(row: _UserRow) -> UserInfo:
    return UserInfo(
        id=row.id,
        name=row.name,
        created_at=_aware(row.created_at) or _now(),
        disabled=row.disabled_at is not None,
    )


def _named_user(session: Session, name: str) -> _UserRow:
    """The user row named ``name``; UserError when there is none."""
    row = session.scalar(select(_UserRow).where(_UserRow.name == name))
    if row is None:
        raise UserError(f"no user named '{name}'")
    return row


class CollectionsMixin:
    """The :class:`~sleuth.store.catalog.Catalog` methods on collections and users."""

    _create_lock: threading.Lock
    _session: Callable[[], Session]

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
        """Delete a collection and all its documents, chunks, references and conversation
        threads (runs are kept).

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
            threads = select(_ThreadRow.thread_id).where(_ThreadRow.collection == name)
            session.execute(
                delete(_TurnRow)
                .where(_TurnRow.thread_id.in_(threads))
                .execution_options(synchronize_session=False)
            )
            session.execute(delete(_ThreadRow).where(_ThreadRow.collection == name))
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
