"""The ingest pipeline: files → documents → chunks → references → vectors → index + catalog.

A file is identified by its (resolved) path. Its doc_id is the slug of its stem (``notes``),
or the one its content gives (statute acts: ``BNS``); a file whose stem id is already taken by
another path (in the catalog, or earlier in the batch) gets a distinct, stable id made from
its path (``notes_1a2b3c``, see :func:`~sleuth.ingest.loaders.distinct_doc_id`), and keeps it
on later runs. A document is never replaced by another file: a content-derived id already used
by another path fails the second file with the reason.

Per file the pipeline decides, from the catalog and the content hash, whether the document is

* ``added``: new to the collection;
* ``replaced``: same file (doc_id), new content (its old chunks leave the index and the
  catalog);
* ``unchanged``: same doc_id and content hash (nothing is re-embedded or rewritten);
* ``duplicate``: the same content is already indexed under another doc_id (not indexed again);
* ``skipped``: an empty file (never embedded; a warning);
* ``failed``: unreadable, corrupt, encrypted... (reported by file name with the reason and
  recorded in the catalog; the rest of the batch goes on).

New chunks are embedded in large batches on a background thread while later files are still
being read and chunked, and written by groups of documents as their vectors arrive, which keeps
the pipeline's throughput close to the embedder's own. The embedder is loaded lazily, so
re-ingesting unchanged files does not even load the model.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np
from pydantic import BaseModel, Field, computed_field

from sleuth.config import Settings
from sleuth.errors import ConfigError, IngestError, UserError
from sleuth.ingest.chunking import chunk_document
from sleuth.ingest.loaders import (
    SUPPORTED_SUFFIXES,
    EmptyDocumentError,
    default_doc_id,
    distinct_doc_id,
    doc_id_for_path,
    load_file,
)
from sleuth.ingest.progress import ProgressCallback
from sleuth.ingest.records import RecordOptions
from sleuth.ingest.references import resolve_references
from sleuth.retrieval.embeddings import Embedder, get_embedder
from sleuth.store.catalog import Catalog, DocumentInfo
from sleuth.store.factory import open_index
from sleuth.store.index import Index
from sleuth.types import Chunk, Document

logger = logging.getLogger(__name__)

FileStatus = Literal["added", "replaced", "unchanged", "duplicate", "skipped", "failed"]
IndexOpener = Callable[[Settings, str, int], Index]
_STATUSES: tuple[FileStatus, ...] = (
    "added",
    "replaced",
    "unchanged",
    "duplicate",
    "skipped",
    "failed",
)

WRITE_GROUP = 2048
"""Chunks written to the index (one call) and the catalog (one transaction) together."""

EMBED_JOB_MIN = 128
"""Fewest texts per call to the embedder (``4 × embedding_batch_size`` when larger)."""

UNSUPPORTED_EXAMPLES = 5
"""Names of skipped unsupported files shown in the report's warning."""

DISTINCT_ID_LENGTHS = (6, 8, 10, 12, 16, 40)
"""Hex digits of the path hash tried, in order, for a distinct doc_id."""

RERESOLVE_MAX_CHUNKS = 20_000
"""Retry other documents' unresolved references only when at most this many chunks hold
some (they are re-read from the catalog)."""


class FileOutcome(BaseModel):
    """What happened to one input file (or document)."""

    path: str
    doc_id: str | None = None
    status: FileStatus
    n_chunks: int = Field(default=0, description="Chunks of the document now in the index")
    message: str = ""


class IngestTimings(BaseModel):
    """Wall-clock seconds spent per stage."""

    load_s: float = 0.0
    chunk_s: float = Field(default=0.0, description="Chunking and reference resolution")
    embed_s: float = 0.0
    index_s: float = Field(default=0.0, description="Index and catalog writes")
    total_s: float = 0.0


class IngestReport(BaseModel):
    """The result of one ingest call: one outcome per input, warnings, timings."""

    collection: str
    files: list[FileOutcome] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    n_embedded: int = Field(default=0, description="Chunks embedded by this call")
    timings: IngestTimings = Field(default_factory=IngestTimings)
    stopped: bool = Field(
        default=False,
        description="Asked to stop: the files after the last outcome were not read",
    )

    @computed_field  # type: ignore[prop-decorator]
    @property
    def totals(self) -> dict[str, int]:
        """Number of inputs per status (every status present, zeros included)."""
        counts = dict.fromkeys(_STATUSES, 0)
        for outcome in self.files:
            counts[outcome.status] += 1
        return counts

    def by_status(self, status: FileStatus) -> list[FileOutcome]:
        """Outcomes with the given status, in input order."""
        return [f for f in self.files if f.status == status]

    @property
    def ok(self) -> bool:
        """``True`` when no input failed."""
        return not self.by_status("failed")


@dataclass
class _Pending:
    """A document whose chunks are to be embedded and written."""

    doc: Document
    chunks: list[Chunk]
    outcome: FileOutcome
    remove: list[str] = field(default_factory=list)  # doc_ids to delete first (old versions)


@dataclass
class _Batch:
    """What one ingest call has accepted so far."""

    pending: list[_Pending] = field(default_factory=list)
    docs: dict[str, str] = field(default_factory=dict)  # doc_id -> path (to be written)
    ids: dict[str, str] = field(default_factory=dict)  # doc_id -> path (every file seen)
    hashes: dict[str, str] = field(default_factory=dict)  # content hash -> doc_id
    chunks: dict[str, str] = field(default_factory=dict)  # chunk_id -> doc_id


class IngestPipeline:
    """Ingest files or documents into a collection (index + catalog).

    Args:
        settings: data dir, chunk sizes, index backend, embedding model and batch size.
        catalog: the SQL catalog.
        index_opener: ``(settings, collection, dim) -> Index``; pass one returning a shared
            index to keep a :class:`~sleuth.retrieval.search.KnowledgeBase` in sync.
        embedder: the embedding model; ``get_embedder(settings.embedding_model, ...)`` on first
            need when omitted.

    One pipeline serialises its own calls (a lock); the indexes it opens are cached until
    :meth:`close` (which closes them: do not call it when ``index_opener`` hands out indexes
    shared with others).
    """

    def __init__(
        self,
        settings: Settings,
        catalog: Catalog,
        index_opener: IndexOpener = open_index,
        embedder: Embedder | None = None,
    ) -> None:
        self.settings = settings
        self.catalog = catalog
        self._index_opener = index_opener
        self._embedder = embedder
        self._indexes: dict[str, Index] = {}
        self._lock = threading.RLock()

    # ------------------------------------------------------------------ resources

    @property
    def embedder(self) -> Embedder:
        """The embedder, loaded on first use."""
        if self._embedder is None:
            self._embedder = get_embedder(
                self.settings.embedding_model, self.settings.embedding_batch_size
            )
        return self._embedder

    def index(self, collection: str, dim: int) -> Index:
        """The open index of ``collection`` (opened once, then cached)."""
        index = self._indexes.get(collection)
        if index is None:
            index = self._index_opener(self.settings, collection, dim)
            self._indexes[collection] = index
        return index

    def close(self) -> None:
        """Close the indexes this pipeline opened."""
        with self._lock:
            for index in self._indexes.values():
                index.close()
            self._indexes.clear()

    def _check_collection(self, collection: str) -> int:
        """Create or check the collection and return its dim.

        With no embedder yet, an existing collection is checked by model name only, so the
        model is not loaded; a new collection needs the model (for its dim).
        """
        backend = self.settings.index_backend
        if self._embedder is None:
            name = self.settings.embedding_model.removeprefix("sentence-transformers/")
            info = self.catalog.check_collection(collection, name, None, backend)
            if info is not None:
                return info.dim
        emb = self.embedder
        return self.catalog.ensure_collection(collection, emb.name, emb.dim, backend).dim

    def _check_chunking(self) -> None:
        words, overlap = self.settings.chunk_words, self.settings.chunk_overlap_words
        if not 0 <= overlap < words:
            raise ConfigError(
                f"chunk_overlap_words ({overlap}) must be smaller than chunk_words ({words})"
            )

    # ------------------------------------------------------------------ public API

    def ingest(
        self,
        paths: Sequence[Path],
        collection: str,
        options: RecordOptions | None = None,
        progress: ProgressCallback | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> IngestReport:
        """Ingest files, and directories searched recursively for supported suffixes.

        Args:
            paths: files and/or directories.
            collection: the target collection (created on first use).
            options: how to read JSON/JSONL records (``None``: auto-detect).
            progress: receives per-file and per-chunk progress.
            stop: asked before each file is read; when it returns true, no further file is
                read, the files read so far are embedded and written as usual (a safe point:
                whole documents only), and the report says ``stopped``.

        Returns:
            The report: one outcome per file in input order (directory files sorted),
            warnings (one names the files of directories skipped for their type), counts
            per status, timings.

        Raises:
            UserError: a path does not exist.
            ConfigError: inconsistent chunk settings; the collection is on another backend.
            EmbeddingModelMismatch: the collection was built with another embedding model
                (raised before any file is read).
        """
        with self._lock:
            start = time.perf_counter()
            files, unsupported = self._expand(paths)
            self._check_chunking()
            dim = self._check_collection(collection)
            report = IngestReport(collection=collection)
            if unsupported:
                report.warnings.append(_unsupported_warning(unsupported))
                logger.info("%s", report.warnings[-1])  # in the report: the caller shows it
            batch = _Batch()
            _start(progress, len(files))

            def items() -> Iterator[tuple[Path, Document | FileOutcome]]:
                for path in files:
                    if stop is not None and stop():
                        report.stopped = True
                        return
                    t0 = time.perf_counter()
                    try:
                        loaded: Document | FileOutcome = load_file(path, options)
                    except IngestError as exc:
                        loaded = self._not_loaded(collection, path, exc, options, report, batch)
                    report.timings.load_s += time.perf_counter() - t0
                    yield path, loaded

            self._run(items(), collection, dim, report, progress, batch, by_path=True)
            report.timings.total_s = time.perf_counter() - start
            return report

    def ingest_documents(
        self,
        docs: Sequence[Document],
        collection: str,
        progress: ProgressCallback | None = None,
    ) -> IngestReport:
        """Ingest already-parsed documents (e.g. :func:`~sleuth.ingest.pydoc_corpus.
        load_pydoc_topics`), with the same outcomes as :meth:`ingest`; ``load_s`` is 0.

        Raises:
            ConfigError: inconsistent chunk settings; the collection is on another backend.
            EmbeddingModelMismatch: the collection was built with another embedding model.
        """
        with self._lock:
            start = time.perf_counter()
            self._check_chunking()
            dim = self._check_collection(collection)
            report = IngestReport(collection=collection)
            _start(progress, len(docs))
            self._run(((Path(d.path), d) for d in docs), collection, dim, report, progress)
            report.timings.total_s = time.perf_counter() - start
            return report

    def delete(self, collection: str, doc_id_or_path: str | Path) -> bool:
        """Remove a document from the index and the catalog.

        Args:
            collection: the collection.
            doc_id_or_path: the doc_id, or the path the document was ingested from.

        Returns:
            ``True`` once removed.

        Raises:
            UserError: the collection or the document does not exist (named in the message).
        """
        with self._lock:
            info = self.catalog.get_collection(collection)
            if info is None:
                raise UserError(f"collection '{collection}' does not exist")
            doc = self._find_document(collection, doc_id_or_path)
            if doc is None:
                raise UserError(
                    f"no document '{doc_id_or_path}' in collection '{collection}' "
                    "(give a doc_id or the path it was ingested from)"
                )
            self.index(collection, info.dim).delete_document(doc.doc_id)
            self.catalog.delete_document(collection, doc.doc_id)
            self.catalog.clear_dangling_references(collection)
            return True

    @staticmethod
    def expand_paths(paths: Iterable[Path | str]) -> list[Path]:
        """The files to ingest: files as given, directories searched recursively.

        Paths are made absolute (the catalog records where a document came from). In
        directories only files with a supported suffix count, hidden files and folders are
        ignored, and files are sorted. Repeated files are kept once, in first order.

        Raises:
            UserError: a path does not exist.
        """
        return IngestPipeline._expand(paths)[0]

    @staticmethod
    def _expand(paths: Iterable[Path | str]) -> tuple[list[Path], list[Path]]:
        """:meth:`expand_paths`, plus the files of directories left out for their suffix
        (visible files only, sorted)."""
        given = [Path(p).expanduser() for p in paths]
        missing = [str(p) for p in given if not p.exists()]
        if missing:
            raise UserError(f"no such file or directory: {', '.join(missing)}")
        given = [p.resolve() for p in given]
        out: dict[Path, None] = {}
        unsupported: dict[Path, None] = {}
        for path in given:
            if not path.is_dir():
                out.setdefault(path, None)
                continue
            for child in sorted(path.rglob("*")):
                rel = child.relative_to(path).parts
                if any(part.startswith(".") for part in rel) or not child.is_file():
                    continue
                if child.suffix.lower() in SUPPORTED_SUFFIXES:
                    out.setdefault(child, None)
                else:
                    unsupported.setdefault(child, None)
        return list(out), [p for p in unsupported if p not in out]

    # ------------------------------------------------------------------ classification

    def _find_document(self, collection: str, key: str | Path) -> DocumentInfo | None:
        text = str(key)
        doc = self.catalog.get_document(collection, text)
        if doc is not None:
            return doc
        candidates = [text]
        with contextlib.suppress(OSError):
            candidates.append(str(Path(text).expanduser().resolve()))
        for candidate in candidates:
            found = self.catalog.find_by_path(collection, candidate)
            if found:
                return found[0]
        by_stem = self.catalog.get_document(collection, doc_id_for_path(Path(text)))
        if by_stem is not None and Path(by_stem.path).name == Path(text).name:
            return by_stem
        return None

    def _not_loaded(
        self,
        collection: str,
        path: Path,
        exc: IngestError,
        options: RecordOptions | None,
        report: IngestReport,
        batch: _Batch,
    ) -> FileOutcome:
        """Outcome of a file that could not be loaded: empty → skipped, else failed.

        A previously indexed version of the document (same path) is kept (and said so);
        otherwise the failure is recorded in the catalog, under an id of this path (never over
        another file's document).
        """
        status: FileStatus = "skipped" if isinstance(exc, EmptyDocumentError) else "failed"
        key = str(path)
        doc_id = doc_id_for_path(path, options)
        if doc_id == default_doc_id(path) or self._id_owner(collection, doc_id, key, batch):
            doc_id = self._file_doc_id(collection, path, batch)
        previous = self.catalog.get_document(collection, doc_id)
        if previous is None or previous.status != "indexed":
            mine = self.catalog.find_by_path(collection, key)
            previous = next((d for d in mine if d.status == "indexed"), previous)
            doc_id = previous.doc_id if previous is not None else doc_id
        batch.ids[doc_id] = key
        kept = previous is not None and previous.status == "indexed"
        message = f"{path.name}: {exc.reason}"
        # the report carries the outcome (the caller shows it): logged at INFO, not WARNING,
        # so that a command line without logging set up does not print it a second time
        if status == "skipped":
            message += ", skipped"
            report.warnings.append(message)
            logger.info("%s", message)
        else:
            logger.info("cannot ingest %s", message)
        if kept:
            message += "; the previously indexed version is kept"
        else:
            self.catalog.record_failure(collection, doc_id, str(path), exc.reason, status=status)
        return FileOutcome(
            path=str(path),
            doc_id=doc_id,
            status=status,
            n_chunks=previous.n_chunks if kept and previous is not None else 0,
            message=message,
        )

    def _run(
        self,
        items: Iterator[tuple[Path, Document | FileOutcome]],
        collection: str,
        dim: int,
        report: IngestReport,
        progress: ProgressCallback | None,
        batch: _Batch | None = None,
        by_path: bool = False,
    ) -> None:
        """Classify every item; chunk, resolve, embed and write the new and changed ones.

        With ``by_path`` (files) documents are identified by their path (see the module
        docstring); otherwise (documents given directly) by their doc_id.

        Chunks go to a background embedding thread as soon as their document is chunked, so
        reading, chunking, reference resolution and writing overlap with the embedding (the
        model releases the GIL while it computes).
        """
        batch = batch if batch is not None else _Batch()
        embedding: _BackgroundEmbedder | None = None

        def finish(outcome: FileOutcome) -> None:
            if progress is not None:
                progress.on_file(outcome.path, outcome.status)

        try:
            for path, item in items:
                if isinstance(item, FileOutcome):
                    report.files.append(item)
                    finish(item)
                    continue
                outcome = FileOutcome(path=str(path), doc_id=item.doc_id, status="added")
                report.files.append(outcome)  # in input order; completed when written
                pending = self._classify(
                    collection, dim, path, item, outcome, batch, report, by_path
                )
                if pending is None:
                    finish(outcome)
                    continue
                if embedding is None:
                    embedding = self._start_embedding(collection, progress)
                embedding.submit([c.index_text() for c in pending.chunks])

            if embedding is None:
                return
            embedding.close_input()
            t0 = time.perf_counter()
            removed = {d for p in batch.pending for d in p.remove}
            removed |= {p.doc.doc_id for p in batch.pending}
            targets = self.catalog.section_stubs(collection, exclude_doc_ids=sorted(removed))
            resolve_references([c for p in batch.pending for c in p.chunks] + targets)
            report.timings.chunk_s += time.perf_counter() - t0

            self._write(collection, dim, batch.pending, embedding, report, finish)
        finally:
            if embedding is not None:
                embedding.shutdown()
                report.timings.embed_s += embedding.seconds
                report.n_embedded += embedding.done

        t0 = time.perf_counter()
        if any(p.remove for p in batch.pending):
            self.catalog.clear_dangling_references(collection)
        self._reresolve(collection, exclude={p.doc.doc_id for p in batch.pending})
        report.timings.chunk_s += time.perf_counter() - t0

    def _classify(
        self,
        collection: str,
        dim: int,
        path: Path,
        doc: Document,
        outcome: FileOutcome,
        batch: _Batch,
        report: IngestReport,
        by_path: bool = False,
    ) -> _Pending | None:
        """Decide what to do with a loaded document; fill ``outcome``.

        With ``by_path`` the doc_id is settled first: a file keeps its stem id when no other
        path holds it, else gets its distinct id; a content-derived id held by another path
        fails the file.

        Returns:
            The document and its chunks when they are to be embedded and written (outcome
            ``added``/``replaced``), else ``None`` (outcome final: unchanged, duplicate,
            skipped or failed).
        """
        if by_path:
            key = str(path)
            if doc.doc_id == default_doc_id(path):
                doc = doc.model_copy(update={"doc_id": self._file_doc_id(collection, path, batch)})
                outcome.doc_id = doc.doc_id
            else:
                owner = self._id_owner(collection, doc.doc_id, key, batch)
                if owner is not None:
                    outcome.status = "failed"
                    outcome.message = (
                        f"{path.name}: its doc_id '{doc.doc_id}' comes from its content and is "
                        f"already the doc_id of {owner}; not indexed (the other document is "
                        "kept: delete it first to index this file instead)"
                    )
                    return None
            batch.ids[doc.doc_id] = key
        elif doc.doc_id in batch.docs:
            outcome.status = "failed"
            outcome.message = (
                f"{path.name}: its doc_id '{doc.doc_id}' is also the doc_id of "
                f"{batch.docs[doc.doc_id]} in this batch; rename one of the files"
            )
            return None
        existing = self.catalog.get_document(collection, doc.doc_id)
        indexed = existing if existing is not None and existing.status == "indexed" else None
        if indexed is not None and indexed.content_hash == doc.content_hash:
            outcome.status = "unchanged"
            outcome.n_chunks = indexed.n_chunks
            return None
        # an older version of this file indexed under another doc_id is replaced too
        stale = [
            d.doc_id
            for d in self.catalog.find_by_path(collection, doc.path)
            if d.doc_id != doc.doc_id and d.status == "indexed"
        ]
        remove = ([doc.doc_id] if indexed is not None else []) + stale
        same = self.catalog.find_by_hash(collection, doc.content_hash)
        duplicate_of = None
        if same is not None and same.doc_id != doc.doc_id and same.doc_id not in stale:
            duplicate_of = f"'{same.doc_id}' ({same.path})"
        elif doc.content_hash in batch.hashes:
            duplicate_of = f"'{batch.hashes[doc.content_hash]}' (ingested just before)"
        if duplicate_of is not None:
            outcome.status = "duplicate"
            outcome.message = f"{path.name}: same content as {duplicate_of}; not indexed again"
            if remove:  # the file changed into a copy of another document
                self._remove(collection, dim, remove)
                outcome.message += f"; its previous version ({', '.join(remove)}) was removed"
            return None

        t0 = time.perf_counter()
        chunks = chunk_document(doc, self.settings.chunk_words, self.settings.chunk_overlap_words)
        problem = self._chunk_id_problem(collection, doc.doc_id, chunks, batch.chunks, stale)
        report.timings.chunk_s += time.perf_counter() - t0
        if problem or not chunks:
            outcome.status = "failed" if problem else "skipped"
            reason = problem or "no text to index"
            outcome.message = f"{path.name}: {reason}"
            if indexed is not None:
                outcome.message += "; the previously indexed version is kept"
                outcome.n_chunks = indexed.n_chunks
            else:
                self.catalog.record_failure(
                    collection, doc.doc_id, doc.path, reason, status=outcome.status
                )
            if not problem:
                report.warnings.append(outcome.message)
            return None

        if remove:
            outcome.status = "replaced"
            notes = []
            if indexed is not None and indexed.path != doc.path:
                notes.append(f"replaces '{doc.doc_id}' read from {indexed.path}")
            if stale:
                notes.append(f"replaces {', '.join(stale)} (same path)")
            outcome.message = "; ".join(notes)
        outcome.n_chunks = len(chunks)
        batch.docs[doc.doc_id] = str(path)
        batch.hashes[doc.content_hash] = doc.doc_id
        batch.chunks.update((c.chunk_id, doc.doc_id) for c in chunks)
        pending = _Pending(doc, chunks, outcome, remove)
        batch.pending.append(pending)
        return pending

    def _id_owner(self, collection: str, doc_id: str, key: str, batch: _Batch) -> str | None:
        """Another path holding ``doc_id`` (earlier in the batch, or indexed), or ``None``."""
        owner = batch.ids.get(doc_id)
        if owner is not None and owner != key:
            return f"{owner} (earlier in this batch)"
        info = self.catalog.get_document(collection, doc_id)
        if info is not None and info.path != key and info.status == "indexed":
            return f"{info.path} (already indexed)"
        return None

    def _file_doc_id(self, collection: str, path: Path, batch: _Batch) -> str:
        """The doc_id of the file at ``path`` (absolute), identified by its path.

        Candidates: the stem id (``notes``), then distinct ids with more and more digits of
        the path hash (``notes_1a2b3c``...). A candidate this path already holds in the
        catalog wins (ids are stable across runs); else the first one that neither another
        path's catalog record nor another file of this batch holds.
        """
        key = str(path)
        candidates = [default_doc_id(path)]
        candidates += [distinct_doc_id(path, n) for n in DISTINCT_ID_LENGTHS]
        free = [c for c in candidates if batch.ids.get(c, key) == key]
        mine = {d.doc_id for d in self.catalog.find_by_path(collection, key)}
        for candidate in free:
            if candidate in mine:
                return candidate
        for candidate in free:
            info = self.catalog.get_document(collection, candidate)
            if info is None or info.path == key:
                return candidate
        return candidates[-1]

    def _chunk_id_problem(
        self,
        collection: str,
        doc_id: str,
        chunks: Sequence[Chunk],
        batch_chunks: dict[str, str],
        replaced: Sequence[str],
    ) -> str | None:
        """Why these chunk ids cannot be stored (used twice or by another document)."""
        ids = [c.chunk_id for c in chunks]
        if len(set(ids)) != len(ids):
            repeated = sorted(i for i, n in Counter(ids).items() if n > 1)
            return f"the document repeats chunk ids ({', '.join(repeated[:3])})"
        mine = {doc_id, *replaced}
        owners = {
            cid: owner
            for cid, owner in self.catalog.chunk_owners(collection, ids).items()
            if owner not in mine
        }
        owners.update({cid: batch_chunks[cid] for cid in ids if cid in batch_chunks})
        if not owners:
            return None
        cid, owner = min(owners.items())
        return (
            f"section id '{cid.split('#')[0]}' is already used by document '{owner}' "
            f"({len(owners)} chunk ids clash); not indexed"
        )

    # ------------------------------------------------------------------ writing

    def _remove(self, collection: str, dim: int, doc_ids: Iterable[str]) -> None:
        index = self.index(collection, dim)
        for doc_id in doc_ids:
            index.delete_document(doc_id)
            self.catalog.delete_document(collection, doc_id)
        self.catalog.clear_dangling_references(collection)

    def _start_embedding(
        self, collection: str, progress: ProgressCallback | None
    ) -> _BackgroundEmbedder:
        embedder = self.embedder
        # the model is loaded now: check its name and dim against the collection's
        self.catalog.ensure_collection(
            collection, embedder.name, embedder.dim, self.settings.index_backend
        )
        step = max(self.settings.embedding_batch_size * 4, EMBED_JOB_MIN)
        return _BackgroundEmbedder(embedder, step, progress)

    def _write(
        self,
        collection: str,
        dim: int,
        pending: list[_Pending],
        embedding: _BackgroundEmbedder,
        report: IngestReport,
        finish: Callable[[FileOutcome], None],
    ) -> None:
        """Write documents to the index and the catalog as their vectors arrive.

        Documents go by groups of at least :data:`WRITE_GROUP` chunks (or what is left): old
        versions deleted from the index, the group's chunks added in one call, then the
        catalog records saved in one transaction. Index first: a crash before the catalog
        write leaves the old hash in the catalog, so the next run redoes the document.
        """
        index = self.index(collection, dim)
        vectors = embedding.results()
        buffer: list[np.ndarray] = []
        n_buffered = 0
        group: list[_Pending] = []
        n_group = 0
        for i, p in enumerate(pending):
            group.append(p)
            n_group += len(p.chunks)
            if n_group < WRITE_GROUP and i < len(pending) - 1:
                continue
            while n_buffered < n_group:
                block = next(vectors)
                buffer.append(block)
                n_buffered += len(block)
            stacked = buffer[0] if len(buffer) == 1 else np.concatenate(buffer)
            rest = stacked[n_group:]
            buffer, n_buffered = ([rest] if len(rest) else []), len(rest)
            self._write_group(collection, index, group, stacked[:n_group], report)
            for done in group:
                finish(done.outcome)
            group, n_group = [], 0

    def _write_group(
        self,
        collection: str,
        index: Index,
        group: list[_Pending],
        vectors: np.ndarray,
        report: IngestReport,
    ) -> None:
        t0 = time.perf_counter()
        for p in group:
            for doc_id in p.remove:
                index.delete_document(doc_id)
        index.add([c for p in group for c in p.chunks], vectors)
        for p in group:
            for doc_id in p.remove:
                if doc_id != p.doc.doc_id:
                    self.catalog.delete_document(collection, doc_id)
        self.catalog.save_documents(
            collection,
            [
                (
                    DocumentInfo(
                        doc_id=p.doc.doc_id,
                        path=p.doc.path,
                        content_hash=p.doc.content_hash,
                        title=p.doc.title,
                    ),
                    p.chunks,
                )
                for p in group
            ],
        )
        report.timings.index_s += time.perf_counter() - t0

    def _reresolve(self, collection: str, exclude: set[str]) -> None:
        """Retry other documents' unresolved references against the sections now present.

        Skipped when more than :data:`RERESOLVE_MAX_CHUNKS` chunks hold such references.
        """
        citing = self.catalog.chunks_with_unresolved_references(
            collection, exclude_doc_ids=sorted(exclude), limit=RERESOLVE_MAX_CHUNKS
        )
        if not citing:
            return
        before = {
            (r.source_id, r.target_text) for c in citing for r in c.references if not r.target_id
        }
        resolve_references(citing + self.catalog.section_stubs(collection))
        found = [
            r
            for c in citing
            for r in c.references
            if r.target_id is not None and (r.source_id, r.target_text) in before
        ]
        if found:
            self.catalog.update_references(collection, found)


class _BackgroundEmbedder:
    """Embeds batches of texts on one background thread, in submission order.

    ``submit`` buffers texts and sends them in jobs of ``step`` texts; ``close_input`` sends
    the rest; ``results`` yields the vector blocks in order (re-raising an embedder error).
    Progress: ``on_chunks(done, submitted)`` after every job (``submitted`` grows while
    documents are still being read).
    """

    def __init__(self, embedder: Embedder, step: int, progress: ProgressCallback | None) -> None:
        self._embedder = embedder
        self._step = step
        self._progress = progress
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sleuth-embed")
        self._futures: list[Future[np.ndarray]] = []
        self._buffer: list[str] = []
        self._lock = threading.Lock()
        self.submitted = 0
        self.done = 0
        self.seconds = 0.0

    def submit(self, texts: Sequence[str]) -> None:
        self._buffer.extend(texts)
        while len(self._buffer) >= self._step:
            self._send(self._buffer[: self._step])
            del self._buffer[: self._step]

    def close_input(self) -> None:
        if self._buffer:
            self._send(self._buffer)
            self._buffer = []

    def _send(self, texts: list[str]) -> None:
        with self._lock:
            self.submitted += len(texts)
        self._futures.append(self._pool.submit(self._embed, list(texts)))

    def _embed(self, texts: list[str]) -> np.ndarray:
        t0 = time.perf_counter()
        vectors = np.asarray(self._embedder.embed(texts), dtype=np.float32)
        if vectors.shape != (len(texts), self._embedder.dim):
            raise ValueError(
                f"embedder '{self._embedder.name}' returned shape {vectors.shape} for "
                f"{len(texts)} texts (expected dim {self._embedder.dim})"
            )
        with self._lock:
            self.seconds += time.perf_counter() - t0
            self.done += len(texts)
            done, submitted = self.done, self.submitted
        if self._progress is not None:
            self._progress.on_chunks(done, submitted)
        return vectors

    def results(self) -> Iterator[np.ndarray]:
        for future in self._futures:
            yield future.result()

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def _unsupported_warning(files: Sequence[Path]) -> str:
    """``skipped 3 files with unsupported types (.xyz, .bin): a.xyz, b.bin, c.xyz``."""
    kinds = sorted({p.suffix.lower() or "(no suffix)" for p in files})
    names = ", ".join(p.name for p in files[:UNSUPPORTED_EXAMPLES])
    more = (
        f" and {len(files) - UNSUPPORTED_EXAMPLES} more"
        if len(files) > UNSUPPORTED_EXAMPLES
        else ""
    )
    noun = "file" if len(files) == 1 else "files"
    return (
        f"skipped {len(files)} {noun} with unsupported types ({', '.join(kinds)}): "
        f"{names}{more}; supported: {', '.join(SUPPORTED_SUFFIXES)}"
    )


def _start(progress: ProgressCallback | None, n_files: int) -> None:
    on_start = getattr(progress, "on_start", None)
    if callable(on_start):
        on_start(n_files)
