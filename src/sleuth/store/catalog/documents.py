"""Documents, their chunks and the references between sections: what is indexed, and the
structure (outline, neighbours, sections) the agent tools walk."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel
from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.orm import Session

from sleuth.store.catalog.rows import (
    _aware,
    _chunk_from_row,
    _ChunkRow,
    _DocumentRow,
    _now,
    _ReferenceRow,
)
from sleuth.types import Chunk, Reference

DocStatus = Literal["indexed", "failed", "skipped"]


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


def _dedupe(refs: Iterable[Reference]) -> list[Reference]:
    seen: set[tuple[str, str, str | None]] = set()
    out: list[Reference] = []
    for ref in refs:
        key = (ref.source_id, ref.target_text, ref.target_id)
        if key not in seen:
            seen.add(key)
            out.append(ref)
    return out


class DocumentsMixin:
    """The :class:`~sleuth.store.catalog.Catalog` methods on documents, chunks and
    references."""

    _session: Callable[[], Session]

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
