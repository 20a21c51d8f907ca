"""The knowledge base: one entry point for searching and reading a collection.

Wraps the catalog (sections, outline, references) and the per-collection index (BM25,
dense, hybrid), sharing one embedder and one open index per collection.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import Literal

import numpy as np

from sleuth.config import Settings
from sleuth.errors import EmbeddingModelMismatch, UserError
from sleuth.ingest.references import SOURCE_ID_TOKEN, SectionLookup, extract_references
from sleuth.retrieval.embeddings import Embedder, get_embedder
from sleuth.retrieval.mentions import TitleMentions
from sleuth.retrieval.rerank import CrossEncoder, shared_cross_encoder, sigmoid
from sleuth.store.catalog import Catalog, check_backend, validate_collection_name
from sleuth.store.factory import open_index
from sleuth.store.index import Index
from sleuth.types import Chunk, Hit, Reference

SearchMode = Literal["hybrid", "bm25", "dense"]
IndexOpener = Callable[[Settings, str, int], Index]
MAX_NAMED_SECTIONS = 5
"""At most this many explicitly named sections are put ahead of a hybrid ranking."""
SECTION_OVERSAMPLING = 3
""":meth:`KnowledgeBase.search_sections` asks for this many chunks per section wanted."""
MAX_SECTION_CANDIDATES = 1000
"""... and never more than this many chunks in all."""
QUERY_VECTOR_CACHE = 2048
"""Query embeddings kept, most recently used first (~1.5 KB each for a 384-d model): a run
searches the same text more than once (a section search that widens, the hops of a chain,
refinements), and users ask the same questions again."""


class KnowledgeBase:
    """Search and read access to the collections of one sleuth installation.

    Args:
        settings: the configuration (data dir, backend, embedding model).
        catalog: the SQL catalog; created from ``settings`` when omitted.
        embedder: the embedding model; loaded lazily from ``settings`` when omitted.
        index_opener: opens the index of a collection (tests inject a fake).
    """

    def __init__(
        self,
        settings: Settings,
        catalog: Catalog | None = None,
        embedder: Embedder | None = None,
        index_opener: IndexOpener = open_index,
    ) -> None:
        self.settings = settings
        self.catalog = catalog or Catalog(settings.catalog_url)
        self._embedder = embedder
        self._index_opener = index_opener
        self._indexes: dict[str, Index] = {}
        self._lookups: dict[str, tuple[tuple[int, int, str], SectionLookup]] = {}
        self._mentions: dict[str, tuple[tuple[int, int, str], TitleMentions]] = {}
        self._lock = threading.RLock()
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()
        self._vectors_lock = threading.Lock()
        self._cross_encoder: CrossEncoder | None = None

    @property
    def reranking(self) -> bool:
        """Whether hybrid searches are reranked (``settings.rerank``; ``auto``: when a model
        answers)."""
        if self.settings.rerank == "auto":
            return self.settings.llm.strip().lower() != "heuristic"
        return self.settings.rerank == "on"

    @property
    def cross_encoder(self) -> CrossEncoder | None:
        """The packaged cross-encoder (:mod:`sleuth.retrieval.rerank`) when reranking or
        ``settings.cross_encoder`` wants it, loaded on first use; else ``None``.

        Raises:
            ConfigError: the model is wanted and cannot be loaded.
        """
        if not (self.settings.cross_encoder or self.reranking):
            return None
        with self._lock:
            if self._cross_encoder is None:
                self._cross_encoder = shared_cross_encoder()
            return self._cross_encoder

    @property
    def embedder(self) -> Embedder:
        with self._lock:
            if self._embedder is None:
                self._embedder = get_embedder(
                    self.settings.embedding_model, self.settings.embedding_batch_size
                )
            return self._embedder

    def index(self, collection: str) -> Index:
        """The open index of ``collection``.

        Raises:
            UserError: an invalid name, or the collection does not exist (the message lists
                those that do).
            ConfigError: it was built on another index backend than ``settings.index_backend``
                (checked before any index is opened or created).
            EmbeddingModelMismatch: it was built with another embedding model.
        """
        with self._lock:
            if collection in self._indexes:
                return self._indexes[collection]
            validate_collection_name(collection)
            info = self.catalog.get_collection(collection)
            if info is None:
                names = ", ".join(c.name for c in self.catalog.list_collections()) or "none"
                local = self.settings.data_dir / "indexes" / collection / "meta.json"
                if self.settings.index_backend == "postgres" and local.exists():
                    raise UserError(
                        f"collection '{collection}' is not in this PostgreSQL database "
                        f"(collections: {names}), but a local index of it is in "
                        f"{self.settings.data_dir}: move it there with: sleuth migrate -c "
                        f"{collection} --to <SLEUTH_DATABASE_URL> (run with the settings it "
                        "was built with)"
                    )
                raise UserError(
                    f"collection '{collection}' does not exist (collections: {names}); "
                    "create it with: sleuth ingest PATH --collection " + collection
                )
            check_backend(info, self.settings.index_backend)
            configured = self.settings.embedding_model.removeprefix("sentence-transformers/")
            if info.embedding_model != configured:
                raise EmbeddingModelMismatch(
                    f"collection '{collection}' was built with embedding model "
                    f"'{info.embedding_model}' ({info.dim}-d) but the configured model is "
                    f"'{configured}'"
                )
            index = self._index_opener(self.settings, collection, info.dim)
            self._indexes[collection] = index
            return index

    def register_index(self, collection: str, index: Index) -> None:
        """Share an index opened elsewhere (e.g. by the ingest pipeline)."""
        with self._lock:
            self._indexes[collection] = index

    def drop_collection(self, collection: str) -> None:
        """Delete a collection: its index data (LocalIndex directory, Milvus collection)
        and its catalog records (documents, chunks, references).

        The index is opened without loading the embedding model. A collection name that
        breaks today's naming rule but exists in the catalog (left by an older version) can
        still be deleted; it has no index.

        Raises:
            UserError: the collection does not exist, or an invalid name.
            ConfigError: the collection lives on another index backend than the configured
                one (its index data could not be reached, so nothing is deleted).
        """
        with self._lock:
            info = self.catalog.get_collection(collection)
            if info is None:
                validate_collection_name(collection)
                raise UserError(f"collection '{collection}' does not exist")
            check_backend(info, self.settings.index_backend)
            index = self._indexes.pop(collection, None)
            self._lookups.pop(collection, None)
            self._mentions.pop(collection, None)
            try:
                valid = validate_collection_name(collection) == collection
            except UserError:
                valid = False
            if index is None and valid:
                index = self._index_opener(self.settings, collection, info.dim)
            if index is not None:
                drop = getattr(index, "drop", None)
                if callable(drop):
                    drop()
                else:
                    index.close()
            self.catalog.delete_collection(collection)

    def forget_index(self, collection: str) -> None:
        with self._lock:
            index = self._indexes.pop(collection, None)
        if index is not None:
            index.close()

    def search(
        self,
        collection: str,
        query: str,
        k: int = 5,
        mode: SearchMode = "hybrid",
        doc_ids: list[str] | None = None,
        rerank: bool = True,
    ) -> list[Hit]:
        """Top-``k`` chunks for ``query``: BM25, dense, or hybrid.

        Hybrid is RRF fusion of BM25 and dense (see :func:`sleuth.store.index.rrf_fuse`);
        when :attr:`reranking`, the first ``max(k, settings.rerank_candidates)`` fused chunks
        are reordered by the cross-encoder (:mod:`sleuth.retrieval.rerank`; their score is
        then its sigmoid, in (0, 1)). Both are preceded by the sections the query names
        explicitly ("section 26 of the Bharatiya Nagarik Suraksha Sanhita", "See section
        Naming and binding"): a user who names a
        section wants that section, which neither ranking reliably puts first. Those hits
        carry score 1.0 (above any RRF score, which is at most 2/61). ``rerank=False`` skips
        the cross-encoder for this search (a caller that scores a few filtered hits itself).

        Raises:
            UserError: an invalid or unknown collection (see :meth:`index`).
            EmbeddingModelMismatch: the collection was built with another embedding model,
                or (dense, hybrid) the model now gives vectors of another dimension.
        """
        index = self.index(collection)
        if mode == "bm25":
            return index.search_bm25(query, k, doc_ids)
        vector = self._query_vector(collection, index, query)
        if mode == "dense":
            return index.search_dense(vector, k, doc_ids)
        reranker = self.cross_encoder if rerank and self.reranking else None
        if reranker is None:
            fused = index.search_hybrid(query, vector, k, doc_ids)
        else:
            pool = index.search_hybrid(
                query, vector, max(k, self.settings.rerank_candidates), doc_ids
            )
            order = reranker.rerank(query, [h.chunk.index_text() for h in pool])
            fused = [
                pool[i].model_copy(update={"score": sigmoid(logit), "rank": rank})
                for rank, (i, logit) in enumerate(order[:k], 1)
            ]
        named = self._named_sections(collection, query, doc_ids)
        if not named:
            return fused
        pinned = {c.source_id for c in named}
        kept = [h for h in fused if h.chunk.source_id not in pinned]
        rest = [h.chunk for h in kept]
        scores = [1.0] * len(named) + [h.score for h in kept]
        return [
            Hit(chunk=chunk, score=score, rank=rank, retriever="hybrid")
            for rank, (chunk, score) in enumerate(zip([*named, *rest], scores, strict=True), 1)
        ][:k]

    def search_sections(
        self,
        collection: str,
        query: str,
        k: int = 5,
        mode: SearchMode = "hybrid",
        doc_ids: list[str] | None = None,
        rerank: bool = True,
    ) -> list[Hit]:
        """Top-``k`` sections for ``query``: the best-ranked chunk of each, re-ranked 1..n.

        Sub-chunks of one section share its ``source_id``; :meth:`search` may return several
        of them. This asks :meth:`search` for ``SECTION_OVERSAMPLING * k`` chunks (more, up
        to ``MAX_SECTION_CANDIDATES``, while that yields fewer than ``k`` sections) and
        keeps the first chunk of each section, with its score.

        Returns:
            Up to ``k`` hits with distinct ``source_id``, best first (fewer when the
            collection has fewer matching sections).

        Raises:
            The errors of :meth:`search`.
        """
        fetch = max(1, k) * SECTION_OVERSAMPLING
        while True:
            fetch = min(fetch, MAX_SECTION_CANDIDATES)
            hits = self.search(
                collection, query, k=fetch, mode=mode, doc_ids=doc_ids, rerank=rerank
            )
            best = best_per_section(hits, k)
            if len(best) >= k or len(hits) < fetch or fetch >= MAX_SECTION_CANDIDATES:
                return best
            fetch *= SECTION_OVERSAMPLING

    def _query_vector(self, collection: str, index: Index, query: str) -> np.ndarray:
        """The query's embedding, checked against the dimension of the collection's index.

        Raises:
            EmbeddingModelMismatch: the model gives vectors of another dimension than the
                index holds (e.g. another model was put at the path the collection was built
                with); the message names both dimensions.
        """
        embedder = self.embedder
        vector = self.embed_queries([query])[0]
        expected = getattr(index, "dim", None)
        shape = np.shape(vector)
        got = int(shape[-1]) if shape else 0
        if expected is not None and got != int(expected):
            configured = self.settings.embedding_model.removeprefix("sentence-transformers/")
            model = getattr(embedder, "name", None) or configured
            raise EmbeddingModelMismatch(
                f"collection '{collection}' holds {expected}-d vectors, but the embedding "
                f"model '{model}' now gives {got}-d vectors (another model at the same name "
                f"or path?); restore the {expected}-d model, or ingest again into a new "
                "collection"
            )
        return vector

    def embed_queries(self, queries: Sequence[str]) -> np.ndarray:
        """The embeddings of ``queries``, shape ``(len(queries), dim)``, float32, one row per
        query in order.

        Queries embedded before are taken from a cache (at most :data:`QUERY_VECTOR_CACHE`,
        least recently used dropped first); the others are embedded in one call, so a caller
        about to run several searches (the queries of a multi-hop step) embeds them in one
        batch by calling this first. The array returned is the caller's (a new one).
        """
        if not queries:
            return np.zeros((0, 0), dtype=np.float32)
        with self._vectors_lock:
            known = {q: self._vectors[q] for q in queries if q in self._vectors}
            for q in known:
                self._vectors.move_to_end(q)
        missing = list(dict.fromkeys(q for q in queries if q not in known))
        if missing:
            embedded = np.asarray(self.embedder.embed(missing), dtype=np.float32)
            with self._vectors_lock:
                for q, row in zip(missing, embedded, strict=True):
                    row = row.copy()  # not a view: the cache must not keep the whole batch
                    row.flags.writeable = False
                    known[q] = self._vectors[q] = row
                while len(self._vectors) > QUERY_VECTOR_CACHE:
                    self._vectors.popitem(last=False)
        return np.stack([known[q] for q in queries])

    def chunk_vectors(self, collection: str, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The vectors ``collection``'s index holds for these chunks (``chunk_id`` → shape
        ``(dim,)``, the embedding of ``Chunk.index_text()``); unknown ids, and every id when
        the index backend cannot return vectors (Milvus), are left out."""
        read = getattr(self.index(collection), "chunk_vectors", None)
        return read(chunk_ids) if read is not None else {}

    def _section_lookup(self, collection: str) -> SectionLookup:
        """The collection's section lookup, rebuilt only when its documents changed."""
        version = self.catalog.collection_version(collection)
        with self._lock:
            cached = self._lookups.get(collection)
            if cached is not None and cached[0] == version:
                return cached[1]
        lookup = SectionLookup(self.catalog.section_stubs(collection))
        with self._lock:
            self._lookups[collection] = (version, lookup)
        return lookup

    def title_mentions(self, collection: str) -> TitleMentions:
        """The collection's title index (see :mod:`sleuth.retrieval.mentions`), rebuilt only
        when its documents changed."""
        version = self.catalog.collection_version(collection)
        with self._lock:
            cached = self._mentions.get(collection)
            if cached is not None and cached[0] == version:
                return cached[1]
        mentions = TitleMentions(self.catalog.section_stubs(collection))
        with self._lock:
            self._mentions[collection] = (version, mentions)
        return mentions

    def with_mentions(self, collection: str, chunks: list[Chunk]) -> list[Chunk]:
        """Copies of ``chunks`` whose ``references`` also hold the sections their text names
        by title (``target_text`` = the title), after the stored cross-references."""
        mentions = self.title_mentions(collection)
        if not len(mentions):
            return chunks
        out = []
        for chunk in chunks:
            known = {r.target_id for r in chunk.references}
            named = mentions.in_text(chunk.text, exclude=chunk.source_id)
            extra = [
                Reference(source_id=chunk.source_id, target_text=name, target_id=sid)
                for sid, name in named.items()
                if sid not in known
            ]
            out.append(
                chunk.model_copy(update={"references": [*chunk.references, *extra]})
                if extra
                else chunk
            )
        return out

    def _named_sections(
        self, collection: str, query: str, doc_ids: list[str] | None
    ) -> list[Chunk]:
        """First chunk of each section the query names (``[]`` for most queries: cheap)."""
        if not extract_references(query) and not SOURCE_ID_TOKEN.search(query):
            return []
        named = []
        for sid in self._section_lookup(collection).named_in(query)[:MAX_NAMED_SECTIONS]:
            chunks = self.catalog.chunks_for_source(collection, sid)
            if chunks and (doc_ids is None or chunks[0].doc_id in doc_ids):
                named.append(chunks[0])
        return named

    def section(self, collection: str, source_id: str) -> list[Chunk]:
        """Every chunk of a section, in order; ``[]`` when the id is unknown."""
        return self.catalog.chunks_for_source(collection, source_id)

    def close(self) -> None:
        with self._lock:
            for index in self._indexes.values():
                index.close()
            self._indexes.clear()


def best_per_section(hits: Sequence[Hit], k: int) -> list[Hit]:
    """The first (best-ranked) hit of each section (``source_id``), at most ``k``, with
    ranks renumbered 1..n; scores and retrievers are kept."""
    seen: set[str] = set()
    out: list[Hit] = []
    for hit in hits:
        if hit.chunk.source_id in seen:
            continue
        seen.add(hit.chunk.source_id)
        out.append(hit.model_copy(update={"rank": len(out) + 1}))
        if len(out) >= k:
            break
    return out


def join_parts(chunks: list[Chunk]) -> str:
    """Rebuild a section's text from its overlapping parts (drops the repeated words)."""
    if not chunks:
        return ""
    text_words = chunks[0].text.split()
    for chunk in chunks[1:]:
        nxt = chunk.text.split()
        overlap = 0
        for size in range(min(len(text_words), len(nxt), 200), 0, -1):
            if text_words[-size:] == nxt[:size]:
                overlap = size
                break
        text_words.extend(nxt[overlap:])
    return " ".join(text_words) if len(chunks) > 1 else chunks[0].text
