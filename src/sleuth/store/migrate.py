"""Move a collection from the local index backend into PostgreSQL, without re-embedding.

The chunks and their stored vectors are read from the local index
(:class:`~sleuth.store.local_index.LocalIndex`), the document records, chunks and
references from the source catalog, and written document by document to a
:class:`~sleuth.store.postgres_index.PostgresIndex` and the catalog in the target database:
first the document's chunks into the index (one transaction), then its catalog record (one
transaction), as ingestion does; into an empty index the HNSW graph and the BM25 key are
built once at the end (:meth:`PostgresIndex.deferred_indexes`). A document already in the
target (same content hash, every chunk in the index) is skipped, so an interrupted
migration resumes where it stopped. The source is only read: nothing is deleted there.

When the source catalog is the target database itself (``SLEUTH_DATABASE_URL`` already
pointed at it, with a local index), only the index is copied and the collection's backend
is switched to ``postgres`` at the end.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
from sqlalchemy.engine import URL

from sleuth.config import Settings, mask_url
from sleuth.errors import ConfigError, UserError
from sleuth.store.catalog import Catalog, DocumentInfo, validate_collection_name
from sleuth.store.local_index import LocalIndex
from sleuth.store.postgres_index import PostgresIndex, postgres_url

Progress = Callable[[int, int], None]
"""Called after each document with (documents done, documents in all)."""


@dataclass
class MigrationReport:
    """What a migration did: documents and chunks copied, documents found already there."""

    collection: str
    documents_copied: int = 0
    documents_skipped: int = 0
    failed_records_copied: int = 0
    chunks_copied: int = 0
    warnings: list[str] = field(default_factory=list)


def migrate_collection(
    settings: Settings,
    collection: str,
    target_url: str,
    progress: Progress | None = None,
) -> MigrationReport:
    """Copy ``collection`` from the local backend into the PostgreSQL database ``target_url``.

    Args:
        settings: the settings the collection was built with (its data dir and catalog).
        collection: the collection's name.
        target_url: SQLAlchemy URL of the PostgreSQL database (``postgresql+psycopg://…``).
        progress: called after each document (done, total).

    Returns:
        The counts; run again after an interruption to finish (done documents are skipped).

    Raises:
        UserError: the collection does not exist, or is not on the local backend.
        ConfigError: ``target_url`` is not a reachable PostgreSQL database with pgvector
            (the message names ``--to``, the password masked).
        MissingExtraError: ``sleuth[postgres]`` is not installed.
    """
    validate_collection_name(collection)
    shown = mask_url(target_url)
    target_parsed = postgres_url(target_url, "--to")
    source = Catalog(settings.catalog_url)
    same_catalog = _same_database(source.url, target_parsed)
    try:
        target = source if same_catalog else Catalog(target_url)
    except ConfigError as exc:
        source.close()
        cause = exc.__cause__ or exc
        raise ConfigError(f"cannot open --to {shown}: {' '.join(str(cause).split())}") from exc
    report = MigrationReport(collection)
    try:
        info = source.get_collection(collection)
        if info is None:
            raise UserError(
                f"collection '{collection}' does not exist in the source catalog "
                f"({mask_url(settings.catalog_url)}); migrate reads from the catalog of "
                "SLEUTH_DATABASE_URL (SQLite in the data dir when unset)"
            )
        if same_catalog and info.backend == "postgres":
            raise UserError(f"collection '{collection}' is already in PostgreSQL")
        if info.backend != "local":
            raise UserError(
                f"collection '{collection}' lives in the '{info.backend}' backend; "
                "only 'local' collections can be migrated"
            )
        directory = settings.data_dir / "indexes" / collection
        if not (directory / "meta.json").exists():
            raise UserError(f"the local index of '{collection}' is missing ({directory})")
        if not same_catalog:
            target.ensure_collection(collection, info.embedding_model, info.dim, "postgres")
            _copy_owner(source, target, collection, report)
        docs = source.list_documents(collection)
        with (
            LocalIndex(directory, info.dim) as local,
            PostgresIndex(target_url, collection, info.dim) as pg,
        ):
            have = pg.chunk_ids()
            # into an empty index: load, then build the HNSW graph and BM25 key once
            with pg.deferred_indexes() if not have else contextlib.nullcontext():
                for done, doc in enumerate(docs, start=1):
                    _copy_document(source, target, local, pg, collection, doc, have, report)
                    if progress is not None:
                        progress(done, len(docs))
        if same_catalog:
            target.set_collection_backend(collection, "postgres")
        return report
    finally:
        if target is not source:
            target.close()
        source.close()


def _same_database(a: URL, b: URL) -> bool:
    """Whether two URLs name one database (drivers and spelling aside)."""
    return a.set(drivername="postgresql") == b.set(drivername="postgresql")


def _copy_document(
    source: Catalog,
    target: Catalog,
    local: LocalIndex,
    pg: PostgresIndex,
    collection: str,
    doc: DocumentInfo,
    have: set[str],
    report: MigrationReport,
) -> None:
    if doc.status != "indexed":
        if target is not source:
            target.record_failure(collection, doc.doc_id, doc.path, doc.error or "", doc.status)
        report.failed_records_copied += 1
        return
    stored = source.doc_chunks(collection, doc.doc_id, references=True)
    ids = [c.chunk_id for c in stored]
    there = target.get_document(collection, doc.doc_id)
    if (
        there is not None
        and there.status == "indexed"
        and there.content_hash == doc.content_hash
        and all(i in have for i in ids)
    ):
        report.documents_skipped += 1
        return
    chunks = local.get_chunks(ids)
    vectors = local.chunk_vectors(ids)
    if len(chunks) != len(ids):
        missing = sorted(set(ids) - {c.chunk_id for c in chunks})
        raise UserError(
            f"the local index of '{collection}' lacks {len(missing)} chunk(s) of document "
            f"'{doc.doc_id}' (first: {missing[0]}); re-ingest it before migrating"
        )
    rows = [vectors[c.chunk_id] for c in chunks]
    pg.add(chunks, np.stack(rows) if rows else np.zeros((0, pg.dim), dtype=np.float32))
    if target is not source:
        target.save_documents(collection, [(doc, stored)])
    have.update(ids)
    report.documents_copied += 1
    report.chunks_copied += len(chunks)


def _copy_owner(source: Catalog, target: Catalog, collection: str, report: MigrationReport) -> None:
    owner = source.collection_owner(collection)
    if owner is None:
        return
    users = {u.id for u in target.list_users()}
    if owner in users:
        target.set_collection_owner(collection, owner)
    else:
        report.warnings.append(
            f"the collection's owner (user id {owner}) is not a user of the target database: "
            "the collection has no owner there; give it one with the API or the users command"
        )
