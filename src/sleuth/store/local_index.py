"""The embedded index: BM25 (bm25s) and exact dense search with numpy.

BM25 is computed by the bm25s library (``bm25s.BM25``, ``method="lucene"``, k1 = 1.5,
b = 0.75: Okapi BM25 as in Lucene, Kamphuis et al., ECIR 2020) over ``Chunk.index_text()``
tokenised by :func:`tokenize`, the shared analyzer :func:`sleuth.retrieval.text.analyze`
(Unicode words with accents folded, CJK character bigrams, emoji, and for English words
bm25s' stopwords and PyStemmer's English stemmer).
Term counts are computed once per chunk, when it is added, and persisted; bm25s has no
incremental updates, so its index is rebuilt from those counts (token ids, no re-tokenising)
on the first BM25 search after a change: ~1 s for 20k chunks of ~120 words.

Dense search is an exact dot product against a float32 matrix of L2-normalised vectors
(dot = cosine), or, with ``ann="hnsw"``, an approximate search in a faiss HNSW graph
(Malkov & Yashunin, "Efficient and robust approximate nearest neighbor search using
Hierarchical Navigable Small World graphs", IEEE TPAMI 2018), see :class:`LocalIndex`.
Hybrid search fuses the two rankings with Reciprocal Rank Fusion
(Cormack et al., SIGIR 2009), see :func:`sleuth.store.index.rrf_fuse`.

On-disk layout under ``directory`` (format version 1)::

    meta.json              {"format", "format_version", "dim", "generation", "analyzer"}
    chunks-<gen>.jsonl     snapshot: one Chunk as JSON per line, in row order
    vectors-<gen>.npy      snapshot: float32 (n, dim), row i belongs to line i
    terms-<gen>.npz        snapshot: ids, doc ids and BM25 term counts of each row
    journal-<gen>.jsonl    changes since the snapshot, one JSON record per line (an add
                           holds its chunks, vectors and BM25 term counts, so that opening
                           the index re-tokenises nothing)
    .lock                  advisory file lock (POSIX flock) shared by processes

Every change is one line appended to the journal and fsync'ed, so adding or deleting a
document costs O(size of the change), not O(size of the index); nothing is re-embedded.
When the journal outgrows half the snapshot, a new generation is written (temp files +
fsync + ``os.replace``) and committed by atomically replacing ``meta.json``. A torn last
journal line (crash during a write) is ignored, and truncated by the next writer. Several
processes may open one directory: writers take an exclusive ``flock``, and every call
first catches up with changes another process made (two ``stat`` calls when none).

``analyzer`` in ``meta.json`` is the :data:`~sleuth.retrieval.text.ANALYZER_VERSION` the
snapshot's term counts were made with (missing: 1, the ASCII-only analyzer of earlier
versions). An index made with another version has its BM25 term counts rebuilt from the
stored chunk texts when it is opened (nothing is re-embedded; about as long as re-tokenising
at ingest), and the result is saved as a new generation.
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
import os
import re
import shutil
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import bm25s
import numpy as np
from bm25s.tokenization import Tokenized

from sleuth.errors import ConfigError, EmbeddingModelMismatch, SleuthError
from sleuth.retrieval.text import ANALYZER_VERSION, analyze
from sleuth.store.index import check_k, query_vector, rrf_fuse
from sleuth.types import Chunk, Hit, Retriever

try:  # POSIX advisory locks; on other platforms only the in-process lock applies.
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None  # type: ignore[assignment]

logger = logging.getLogger(__name__)

FORMAT = "sleuth-local-index"
FORMAT_VERSION = 1
BM25_K1 = 1.5
BM25_B = 0.75
_META = "meta.json"
_LOCK = ".lock"
_MIN_COMPACT_BYTES = 4 * 1024 * 1024
_FILE_RE = re.compile(r"^(chunks|vectors|terms|journal)-(\d{8})\.(jsonl|npy|npz)(\.tmp)?$")
_EXT = {"chunks": "jsonl", "vectors": "npy", "terms": "npz", "journal": "jsonl"}
_TERMS_ARRAYS = ("lens", "terms", "tfs", "doclen", "ids", "vocab")
AnnKind = Literal["exact", "hnsw"]


def tokenize(text: str) -> list[str]:
    """The BM25 analyzer of :class:`LocalIndex`: :func:`sleuth.retrieval.text.analyze`.

    Words of any script, split at ``'``, ``_`` and ``-`` and accent-folded; CJK runs as
    character bigrams; emoji one token each; English words without bm25s' stopwords and
    stemmed with the Snowball English stemmer (PyStemmer). Thread-safe.

    Returns:
        The terms, in text order (duplicates kept: they count as term frequency).
    """
    return analyze(text)


def _fsync_dir(directory: Path) -> None:
    if os.name != "posix":  # pragma: no cover
        return
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_atomic(path: Path, write: Any) -> int:
    """Write a file through ``path.tmp`` + fsync + ``os.replace``; return its size."""
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path.stat().st_size


def _stat_sig(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:
        return None
    return (st.st_ino, st.st_mtime_ns, st.st_size)


def _json_array(value: object) -> np.ndarray:
    return np.frombuffer(json.dumps(value).encode("utf-8"), dtype=np.uint8)


class LocalIndex:
    """Embedded BM25 + exact dense index of one collection, persisted under ``directory``.

    Implements :class:`sleuth.store.index.Index`. Thread-safe (one re-entrant lock per
    instance); safe to open from several processes (see the module docstring).

    Dense search is exact by default. With ``ann="hnsw"`` it uses a faiss
    ``IndexHNSWFlat`` (inner product) graph (Malkov & Yashunin, IEEE TPAMI 2018): ``M``
    neighbours per node (``hnsw_m``), ``efConstruction`` (``ef_construction``) when
    building, and a search beam of ``max(ef_search, k)`` candidates (``ef_search`` may be
    changed on the instance between searches). The graph lives in memory only: it is built
    on the first dense search after the index is opened or reloaded (about 2.5 minutes for
    1M 384-d vectors on 2 cores, M = 32), extended in place when chunks are appended, and
    rebuilt from scratch after a delete or a replaced chunk. faiss keeps its own copy of
    the vectors, so memory grows by about ``4 * dim + 8 * M`` bytes per chunk. The graph's
    candidates are re-scored exactly and ordered like the exact search (score, then
    ``chunk_id``). A search with a ``doc_ids`` filter stays exact (filter first, then the
    dot products), so filters are always honoured. Needs the ``faiss-cpu`` package.

    Args:
        directory: where the index files live; created if missing.
        dim: dimension of the dense vectors.
        ann: ``"exact"`` (default) or ``"hnsw"``.
        hnsw_m: HNSW neighbours per node (``ann="hnsw"`` only).
        ef_construction: HNSW build beam width (``ann="hnsw"`` only).
        ef_search: HNSW search beam width, at least ``k`` (``ann="hnsw"`` only).

    Raises:
        ValueError: an unknown ``ann`` or a non-positive HNSW parameter.
        ConfigError: ``ann="hnsw"`` without faiss installed.
        EmbeddingModelMismatch: the directory holds an index of another dimension.
        ConfigError: the directory holds an index of an unknown format version.
        SleuthError: the index files are corrupt (snapshot files disagree).
    """

    def __init__(
        self,
        directory: Path,
        dim: int,
        ann: AnnKind = "exact",
        hnsw_m: int = 32,
        ef_construction: int = 64,
        ef_search: int = 64,
    ) -> None:
        if dim < 1:
            raise ValueError(f"dim must be >= 1, got {dim}")
        if ann not in ("exact", "hnsw"):
            raise ValueError(f"ann must be 'exact' or 'hnsw', got {ann!r}")
        if min(hnsw_m, ef_construction, ef_search) < 1:
            raise ValueError("hnsw_m, ef_construction and ef_search must be >= 1")
        self.ann: AnnKind = ann
        self.hnsw_m = int(hnsw_m)
        self.ef_construction = int(ef_construction)
        self.ef_search = int(ef_search)
        self._faiss: Any = None
        if ann == "hnsw":
            try:
                import faiss
            except ImportError as exc:
                raise ConfigError(
                    "HNSW search (SLEUTH_LOCAL_ANN=hnsw) needs the package 'faiss-cpu': "
                    'pip install "sleuth[ann]"'
                ) from exc
            self._faiss = faiss
        self.directory = Path(directory)
        self.dim = int(dim)
        self._lock = threading.RLock()
        self._closed = False
        self._reset_memory()
        self._gen = 0
        self._meta_sig: tuple[int, int, int] | None = None
        self._journal_offset = 0
        self._snapshot_bytes = 0
        self.directory.mkdir(parents=True, exist_ok=True)
        self._lock_fd: int | None = os.open(self.directory / _LOCK, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            with self._flock(exclusive=True):
                if not (self.directory / _META).exists():
                    self._write_snapshot(1)
                self._reload()
                if self._stale_analyzer:  # save the rebuilt terms (journal folded in)
                    self._write_snapshot(self._gen + 1)
                self._truncate_torn_tail()
                self._remove_stale_files()
        except BaseException:
            os.close(self._lock_fd)
            self._lock_fd = None
            raise

    # ------------------------------------------------------------------ Index protocol

    def add(self, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        """Insert chunks with their vectors; a chunk whose ``chunk_id`` exists replaces it.

        Nothing is re-embedded; the BM25 index is rebuilt lazily on the next BM25 search.

        Args:
            chunks: the chunks; a repeated ``chunk_id`` in one call keeps the last one.
            vectors: float array of shape ``(len(chunks), dim)``, rows L2-normalised.

        Raises:
            ValueError: the shape of ``vectors`` does not match.
        """
        vecs = np.ascontiguousarray(vectors, dtype=np.float32)
        if vecs.ndim != 2 or vecs.shape != (len(chunks), self.dim):
            raise ValueError(
                f"vectors must have shape ({len(chunks)}, {self.dim}), got {vecs.shape}"
            )
        if not chunks:
            return
        lines = [c.model_dump_json() for c in chunks]
        counts = [Counter(tokenize(c.index_text())) for c in chunks]
        record = (
            '{"op":"add","vectors":"'
            + base64.b64encode(vecs.astype("<f4").tobytes()).decode("ascii")
            + '","chunks":['
            + ",".join(lines)
            + f'],"analyzer":{ANALYZER_VERSION},"terms":'
            + json.dumps(counts, ensure_ascii=False, separators=(",", ":"))
            + "}\n"
        )
        with self._lock:
            self._check_open()
            with self._flock(exclusive=True):
                self._catch_up(writer=True)
                self._append_journal(record)
                self._apply_add(list(chunks), vecs, lines, counts)
                self._maybe_compact()

    def delete_document(self, doc_id: str) -> int:
        """Remove every chunk of ``doc_id``.

        Returns:
            How many chunks were removed (0 if the document is unknown).
        """
        with self._lock:
            self._check_open()
            with self._flock(exclusive=True):
                self._catch_up(writer=True)
                if self._count_doc(doc_id) == 0:
                    return 0
                self._append_journal(json.dumps({"op": "delete", "doc_id": doc_id}) + "\n")
                removed = self._apply_delete(doc_id)
                self._maybe_compact()
                return removed

    def count(self) -> int:
        """Number of chunks held."""
        with self._lock:
            self._check_open()
            self._catch_up()
            return self._n

    def search_bm25(self, query: str, k: int, doc_ids: Sequence[str] | None = None) -> list[Hit]:
        """Top-k chunks by BM25 over ``Chunk.index_text()``.

        Args:
            query: free text, analysed by :func:`tokenize`.
            k: number of hits wanted (>= 1).
            doc_ids: if given, only chunks of these documents are ranked (filter first).

        Returns:
            Up to ``k`` hits with a positive BM25 score, best first, equal scores ordered
            by ``chunk_id`` (which of several chunks tied at the k-th place is kept is up
            to bm25s' top-k); ``[]`` if the index is empty or the query has no indexed term
            (e.g. only stopwords).

        Raises:
            ValueError: ``k`` < 1.
        """
        check_k(k)
        with self._lock:
            self._check_open()
            self._catch_up()
            return self._hits(self._bm25_rows(query, k, doc_ids), "bm25", copy=True)

    def search_dense(
        self, vector: np.ndarray, k: int, doc_ids: Sequence[str] | None = None
    ) -> list[Hit]:
        """Top-k chunks by cosine similarity (dot product of normalised vectors), exact.

        Args:
            vector: float array of shape ``(dim,)`` (or ``(1, dim)``), L2-normalised.
            k: number of hits wanted (>= 1).
            doc_ids: if given, only chunks of these documents are ranked (filter first).

        Returns:
            Up to ``k`` hits, best first, ties broken by ``chunk_id``; ``[]`` if empty.

        Raises:
            ValueError: ``k`` < 1 or the vector has the wrong shape.
        """
        check_k(k)
        q = query_vector(vector, self.dim)
        with self._lock:
            self._check_open()
            self._catch_up()
            return self._hits(self._dense_rows(q, k, doc_ids), "dense", copy=True)

    def search_hybrid(
        self,
        query: str,
        vector: np.ndarray,
        k: int,
        doc_ids: Sequence[str] | None = None,
    ) -> list[Hit]:
        """Top-k chunks by RRF fusion of the BM25 and dense rankings.

        Each ranking contributes its top ``max(50, 4k)`` candidates (after the ``doc_ids``
        filter); scores are ``Σ 1/(60 + rank)`` (Cormack et al., SIGIR 2009).

        Raises:
            ValueError: ``k`` < 1 or the vector has the wrong shape.
        """
        check_k(k)
        q = query_vector(vector, self.dim)
        n_cand = max(50, 4 * k)
        with self._lock:
            self._check_open()
            self._catch_up()
            bm25 = self._hits(self._bm25_rows(query, n_cand, doc_ids), "bm25", copy=False)
            dense = self._hits(self._dense_rows(q, n_cand, doc_ids), "dense", copy=False)
            fused = rrf_fuse([bm25, dense], k)
            return [h.model_copy(update={"chunk": h.chunk.model_copy(deep=True)}) for h in fused]

    def close(self) -> None:
        """Release the lock file and the memory; later calls raise ``RuntimeError``."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if self._lock_fd is not None:
                os.close(self._lock_fd)
                self._lock_fd = None
            self._reset_memory()

    def drop(self) -> None:
        """Delete the whole index (irreversible): close it and remove its directory.

        Every file of the index goes, the journal included (it holds the chunk texts).
        """
        with self._lock:
            self._check_open()
            with self._flock(exclusive=True):
                shutil.rmtree(self.directory, ignore_errors=True)
            self.close()

    # ------------------------------------------------------------------ extras

    def get_chunks(self, chunk_ids: Sequence[str]) -> list[Chunk]:
        """The chunks with these ids, in the order asked; unknown ids are skipped."""
        with self._lock:
            self._check_open()
            self._catch_up()
            return [
                self._chunk(self._row[cid]).model_copy(deep=True)
                for cid in chunk_ids
                if cid in self._row
            ]

    def chunk_vectors(self, chunk_ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored vectors of these chunks (copies, shape ``(dim,)``); unknown ids are
        left out."""
        with self._lock:
            self._check_open()
            self._catch_up()
            return {cid: self._vecs[self._row[cid]].copy() for cid in chunk_ids if cid in self._row}

    def compact(self) -> None:
        """Fold the journal into a new snapshot generation now (it also happens by itself)."""
        with self._lock:
            self._check_open()
            with self._flock(exclusive=True):
                self._catch_up(writer=True)
                self._write_snapshot(self._gen + 1)

    def __enter__(self) -> LocalIndex:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"LocalIndex({str(self.directory)!r}, dim={self.dim})"

    # ------------------------------------------------------------------ memory state
    # Row i of every list/array below is the same chunk; rows are dense (0..n-1).

    def _reset_memory(self) -> None:
        self._lines: list[str] = []  # JSON of each chunk (what snapshots store)
        self._parsed: list[Chunk | None] = []  # parsed lazily from _lines
        self._ids: list[str] = []  # chunk_id of each row
        self._row: dict[str, int] = {}  # chunk_id -> row
        self._terms: list[np.ndarray] = []  # distinct term ids of each row, int32
        self._tfs: list[np.ndarray] = []  # their counts, float32
        self._vocab: dict[str, int] = {}  # term -> id, ids in insertion order
        self._vecs = np.zeros((0, self.dim), dtype=np.float32)  # capacity >= n
        self._codes = np.zeros(0, dtype=np.int32)  # doc code of each row
        self._doclen = np.zeros(0, dtype=np.float32)  # number of terms of each row
        self._doc_ids: list[str] = []  # doc_id of each code
        self._code_of: dict[str, int] = {}  # doc_id -> code
        self._n = 0
        self._bm25: bm25s.BM25 | None = None  # built from _terms/_tfs when dirty
        self._bm25_dirty = True
        self._hnsw: Any = None  # faiss HNSW graph over rows 0.._hnsw_rows-1 (ann="hnsw")
        self._hnsw_rows = 0
        self._stale_analyzer = False  # the loaded snapshot's terms were re-counted

    def _chunk(self, row: int) -> Chunk:
        chunk = self._parsed[row]
        if chunk is None:
            chunk = self._parsed[row] = Chunk.model_validate_json(self._lines[row])
        return chunk

    def _reserve(self, n: int) -> None:
        if n <= self._vecs.shape[0]:
            return
        cap = max(n, 2 * self._vecs.shape[0], 64)
        vecs = np.zeros((cap, self.dim), dtype=np.float32)
        vecs[: self._n] = self._vecs[: self._n]
        codes = np.zeros(cap, dtype=np.int32)
        codes[: self._n] = self._codes[: self._n]
        doclen = np.zeros(cap, dtype=np.float32)
        doclen[: self._n] = self._doclen[: self._n]
        self._vecs, self._codes, self._doclen = vecs, codes, doclen

    def _doc_code(self, doc_id: str) -> int:
        code = self._code_of.get(doc_id)
        if code is None:
            code = self._code_of[doc_id] = len(self._doc_ids)
            self._doc_ids.append(doc_id)
        return code

    def _term_counts(self, counts: dict[str, int]) -> tuple[np.ndarray, np.ndarray, int]:
        """Term ids (added to the vocabulary when new), their counts, and the row length."""
        vocab = self._vocab
        ids = [vocab.setdefault(t, len(vocab)) for t in counts]
        terms = np.array(ids, dtype=np.int32)
        tfs = np.fromiter(counts.values(), dtype=np.float32, count=len(counts))
        return terms, tfs, int(sum(counts.values()))

    def _apply_add(
        self,
        chunks: list[Chunk],
        vecs: np.ndarray,
        lines: list[str],
        counts: Sequence[dict[str, int]] | None = None,
    ) -> None:
        """Add or replace rows; ``counts`` are the chunks' BM25 term counts by
        :func:`tokenize` (counted here when not given)."""
        self._reserve(self._n + len(chunks))
        if counts is None:
            counts = [Counter(tokenize(c.index_text())) for c in chunks]
        for chunk, vec, line, tf in zip(chunks, vecs, lines, counts, strict=True):
            terms, tfs, length = self._term_counts(tf)
            row = self._row.get(chunk.chunk_id)
            if row is None:
                row = self._n
                self._n += 1
                self._row[chunk.chunk_id] = row
                self._ids.append(chunk.chunk_id)
                self._parsed.append(None)  # parsed from `line` when first hit
                self._lines.append(line)
                self._terms.append(terms)
                self._tfs.append(tfs)
            else:
                if row < self._hnsw_rows:  # a vector inside the graph changed: rebuild
                    self._hnsw = None
                    self._hnsw_rows = 0
                self._parsed[row] = None
                self._lines[row] = line
                self._terms[row] = terms
                self._tfs[row] = tfs
            self._doclen[row] = length
            self._vecs[row] = vec
            self._codes[row] = self._doc_code(chunk.doc_id)
        self._bm25_dirty = True

    def _count_doc(self, doc_id: str) -> int:
        code = self._code_of.get(doc_id)
        if code is None:
            return 0
        return int(np.count_nonzero(self._codes[: self._n] == code))

    def _apply_delete(self, doc_id: str) -> int:
        code = self._code_of.get(doc_id)
        if code is None:
            return 0
        kept = np.flatnonzero(self._codes[: self._n] != code)
        removed = self._n - kept.size
        if removed == 0:
            return 0
        m = kept.size
        self._vecs[:m] = self._vecs[kept]
        self._codes[:m] = self._codes[kept]
        self._doclen[:m] = self._doclen[kept]
        rows = kept.tolist()
        for name in ("_lines", "_parsed", "_ids", "_terms", "_tfs"):
            old = getattr(self, name)
            setattr(self, name, [old[i] for i in rows])
        self._row = {cid: i for i, cid in enumerate(self._ids)}
        self._n = m
        self._bm25_dirty = True
        self._hnsw = None  # rows were renumbered: rebuild the graph on the next search
        self._hnsw_rows = 0
        return removed

    # ------------------------------------------------------------------ search internals

    def _allowed(self, doc_ids: Sequence[str] | None) -> np.ndarray | None:
        if doc_ids is None:
            return None
        codes = [self._code_of[d] for d in set(doc_ids) if d in self._code_of]
        return np.isin(self._codes[: self._n], np.asarray(codes, dtype=np.int32))

    def _ensure_bm25(self) -> bm25s.BM25 | None:
        """(Re)build the bm25s index if chunks changed since the last build."""
        if not self._bm25_dirty:
            return self._bm25
        n = self._n
        lens = self._doclen[:n].astype(np.int64)  # tokens per row (sum of its counts)
        self._bm25 = None
        if n and lens.any():
            # bm25s takes token-id lists (it counts repeats itself): expand the counts.
            tokens = np.repeat(
                np.concatenate(self._terms), np.concatenate(self._tfs).astype(np.int64)
            ).tolist()
            corpus, start = [], 0
            for end in np.cumsum(lens).tolist():
                corpus.append(tokens[start:end])
                start = end
            bm25 = bm25s.BM25(k1=BM25_K1, b=BM25_B, method="lucene", csc_backend="scipy")
            # A copy of the vocabulary: ours grows on add, the built index's must not.
            tokenized = Tokenized(ids=corpus, vocab=dict(self._vocab))
            bm25.index(tokenized, create_empty_token=False, show_progress=False)
            self._bm25 = bm25
        self._bm25_dirty = False
        return self._bm25

    def _bm25_rows(
        self, query: str, k: int, doc_ids: Sequence[str] | None
    ) -> list[tuple[int, float]]:
        bm25 = self._ensure_bm25()
        if bm25 is None:
            return []
        vocab = bm25.vocab_dict
        # A repeated query term counts again (bm25s sums over the query's token ids).
        term_ids = [vocab[t] for t in tokenize(query) if t in vocab]
        if not term_ids:
            return []
        allowed = self._allowed(doc_ids)
        if allowed is not None and not allowed.any():
            return []
        rows, scores = bm25.retrieve(
            [term_ids],
            k=min(k, self._n),  # bm25s refuses k > number of documents
            show_progress=False,
            n_threads=0,  # in this thread: no pool
            backend_selection="numpy",
            weight_mask=None if allowed is None else allowed.astype(np.float32),
        )
        ids = self._ids
        # bm25s pads with zero scores (no query term, or masked out by the filter).
        pairs = [(int(r), float(s)) for r, s in zip(rows[0], scores[0], strict=True) if s > 0]
        pairs.sort(key=lambda p: (-p[1], ids[p[0]]))
        return pairs

    def _dense_rows(
        self, q: np.ndarray, k: int, doc_ids: Sequence[str] | None
    ) -> list[tuple[int, float]]:
        if self._n == 0:
            return []
        if self.ann == "hnsw" and doc_ids is None:
            return self._hnsw_rows_for(q, k)
        # einsum, not BLAS: a memory-bound matvec gains nothing from BLAS threads, which
        # stall for ms on a busy machine, and einsum's result does not depend on them.
        scores = np.einsum("ij,j->i", self._vecs[: self._n], q)
        return self._top_rows(scores, doc_ids, k)

    def ensure_ann(self) -> None:
        """Build (or extend) the HNSW graph now instead of on the next dense search.

        A no-op for ``ann="exact"``.
        """
        with self._lock:
            self._check_open()
            self._catch_up()
            if self.ann == "hnsw":
                self._ensure_hnsw()

    def _ensure_hnsw(self) -> Any:
        """The HNSW graph over all rows: built, or extended with appended rows, as needed."""
        if self._hnsw is None:
            faiss = self._faiss
            graph = faiss.IndexHNSWFlat(self.dim, self.hnsw_m, faiss.METRIC_INNER_PRODUCT)
            graph.hnsw.efConstruction = self.ef_construction
            self._hnsw, self._hnsw_rows = graph, 0
        if self._hnsw_rows < self._n:  # appended rows only: earlier ones are unchanged
            self._hnsw.add(self._vecs[self._hnsw_rows : self._n])
            self._hnsw_rows = self._n
        return self._hnsw

    def _hnsw_rows_for(self, q: np.ndarray, k: int) -> list[tuple[int, float]]:
        graph = self._ensure_hnsw()
        params = self._faiss.SearchParametersHNSW()
        params.efSearch = max(self.ef_search, k)
        _, found = graph.search(q[None, :], min(k, self._n), params=params)
        rows = found[0][found[0] >= 0]
        # Exact scores of the candidates, ordered as the exact search orders them.
        scores = np.einsum("ij,j->i", self._vecs[rows], q)
        ids = self._ids
        pairs = [(int(r), float(s)) for r, s in zip(rows, scores, strict=True)]
        pairs.sort(key=lambda p: (-p[1], ids[p[0]]))
        return pairs[:k]

    def _top_rows(
        self, scores: np.ndarray, doc_ids: Sequence[str] | None, k: int
    ) -> list[tuple[int, float]]:
        """Rows of the k best finite scores among allowed rows; ties by ``chunk_id``."""
        mask = np.isfinite(scores)
        allowed = self._allowed(doc_ids)
        if allowed is not None:
            mask &= allowed
        rows = np.flatnonzero(mask)
        if rows.size == 0:
            return []
        sel = scores[rows]
        if rows.size > k:
            kth = np.partition(sel, rows.size - k)[rows.size - k]
            keep = sel >= kth  # keeps every tie at the threshold, sorted below
            rows, sel = rows[keep], sel[keep]
        ids = self._ids
        pairs = [(int(r), float(s)) for r, s in zip(rows, sel, strict=True)]
        pairs.sort(key=lambda p: (-p[1], ids[p[0]]))
        return pairs[:k]

    def _hits(self, rows: list[tuple[int, float]], retriever: Retriever, copy: bool) -> list[Hit]:
        hits = []
        for rank, (row, score) in enumerate(rows, start=1):
            chunk = self._chunk(row)
            if copy:  # callers may mutate what they get; the index must not change
                chunk = chunk.model_copy(deep=True)
            hits.append(Hit(chunk=chunk, score=score, rank=rank, retriever=retriever))
        return hits

    # ------------------------------------------------------------------ persistence

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError(f"{self!r} is closed")

    @contextlib.contextmanager
    def _flock(self, exclusive: bool) -> Iterator[None]:
        if fcntl is None or self._lock_fd is None:  # pragma: no cover
            yield
            return
        fcntl.flock(self._lock_fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH)
        try:
            yield
        finally:
            fcntl.flock(self._lock_fd, fcntl.LOCK_UN)

    def _path(self, kind: str, gen: int) -> Path:
        return self.directory / f"{kind}-{gen:08d}.{_EXT[kind]}"

    @property
    def _journal(self) -> Path:
        return self._path("journal", self._gen)

    def _read_meta(self) -> dict[str, Any]:
        path = self.directory / _META
        try:
            meta = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise SleuthError(f"{path}: cannot read index metadata: {exc}") from exc
        if meta.get("format") != FORMAT or meta.get("format_version") != FORMAT_VERSION:
            raise ConfigError(
                f"{self.directory}: unsupported index format "
                f"{meta.get('format')!r} version {meta.get('format_version')!r} "
                f"(this sleuth reads {FORMAT!r} version {FORMAT_VERSION}); rebuild the index"
            )
        if meta.get("dim") != self.dim:
            raise EmbeddingModelMismatch(
                f"{self.directory}: the index holds {meta.get('dim')}-d vectors but the "
                f"embedding model gives {self.dim}-d; use the model the collection was "
                "built with, or rebuild it"
            )
        return meta

    def _reload(self) -> None:
        """Load meta, snapshot and journal from disk (caller holds a file lock)."""
        meta_sig = _stat_sig(self.directory / _META)
        meta = self._read_meta()
        gen = int(meta["generation"])
        paths = [self._path(kind, gen) for kind in ("chunks", "vectors", "terms")]
        try:
            lines = paths[0].read_text(encoding="utf-8").splitlines()
            vecs = np.load(paths[1])
            with np.load(paths[2]) as npz:
                terms = {name: npz[name] for name in _TERMS_ARRAYS}
            ids, doc_ids = json.loads(terms["ids"].tobytes())
            vocab: list[str] = json.loads(terms["vocab"].tobytes())
        except (OSError, ValueError, KeyError) as exc:
            raise SleuthError(f"{self.directory}: corrupt index ({exc}); rebuild it") from exc
        n = len(lines)
        lens = terms["lens"]
        if vecs.shape != (n, self.dim) or len(ids) != n or len(doc_ids) != n or lens.size != n:
            raise SleuthError(
                f"{self.directory}: corrupt index: {n} chunks, vectors {vecs.shape}, "
                f"{len(ids)} ids; rebuild it"
            )
        self._reset_memory()
        self._gen = gen
        self._meta_sig = meta_sig
        self._journal_offset = 0
        self._snapshot_bytes = sum(p.stat().st_size for p in paths)
        self._lines = lines
        self._parsed = [None] * n
        self._ids = ids
        self._row = {cid: i for i, cid in enumerate(ids)}
        self._vocab = {t: i for i, t in enumerate(vocab)}
        split = np.cumsum(lens)[:-1] if n else []
        self._terms = np.split(terms["terms"].astype(np.int32), split) if n else []
        self._tfs = np.split(terms["tfs"].astype(np.float32), split) if n else []
        self._reserve(n)
        self._vecs[:n] = vecs
        self._doclen[:n] = terms["doclen"]
        self._codes[:n] = [self._doc_code(d) for d in doc_ids]
        self._n = n
        self._bm25_dirty = True
        analyzer = meta.get("analyzer", 1)
        self._stale_analyzer = analyzer != ANALYZER_VERSION
        if self._stale_analyzer:
            self._retokenize(analyzer)
        self._replay_journal()

    def _retokenize(self, analyzer: object) -> None:
        """Recount every row's BM25 terms from its stored chunk text with :func:`tokenize`
        (the snapshot was made by another analyzer version)."""
        logger.warning(
            "%s: the index was built with analyzer version %s; rebuilding its BM25 terms "
            "with version %s from the %d stored chunks",
            self.directory,
            analyzer,
            ANALYZER_VERSION,
            self._n,
        )
        self._vocab = {}
        for row in range(self._n):
            text = Chunk.model_validate_json(self._lines[row]).index_text()
            self._terms[row], self._tfs[row], length = self._term_counts(Counter(tokenize(text)))
            self._doclen[row] = length

    def _replay_journal(self) -> None:
        """Apply complete journal lines past ``_journal_offset``; stop at a torn one."""
        try:
            with open(self._journal, "rb") as f:
                f.seek(self._journal_offset)
                data = f.read()
        except FileNotFoundError:
            return
        pos = 0
        while True:
            end = data.find(b"\n", pos)
            if end < 0:
                break
            try:
                self._apply_record(json.loads(data[pos:end]))
            except (ValueError, KeyError, TypeError) as exc:
                logger.warning("%s: ignoring unreadable journal record: %s", self._journal, exc)
                break
            pos = end + 1
        self._journal_offset += pos

    def _apply_record(self, record: dict[str, Any]) -> None:
        if record["op"] == "add":
            chunks = [Chunk.model_validate(c) for c in record["chunks"]]
            raw = base64.b64decode(record["vectors"])
            vecs = np.frombuffer(raw, dtype="<f4").astype(np.float32).reshape(-1, self.dim)
            if vecs.shape[0] != len(chunks):
                raise ValueError("journal record: chunks and vectors differ in number")
            # term counts stored by this analyzer version are reused (no re-tokenising);
            # records of earlier versions, or without counts, are counted again
            counts = record.get("terms") if record.get("analyzer") == ANALYZER_VERSION else None
            if counts is not None and len(counts) != len(chunks):
                raise ValueError("journal record: chunks and term counts differ in number")
            self._apply_add(chunks, vecs, [c.model_dump_json() for c in chunks], counts)
        elif record["op"] == "delete":
            self._apply_delete(str(record["doc_id"]))
        else:
            raise ValueError(f"unknown journal op {record['op']!r}")

    def _catch_up(self, writer: bool = False) -> None:
        """Apply what other processes changed since we last looked (cheap when nothing).

        Writers call this holding LOCK_EX; readers take LOCK_SH only when something changed.
        """
        journal = _stat_sig(self._journal)
        stale = (
            _stat_sig(self.directory / _META) != self._meta_sig
            or journal is None  # our generation was compacted away
            or journal[2] != self._journal_offset
        )
        if stale:
            with contextlib.nullcontext() if writer else self._flock(exclusive=False):
                journal = _stat_sig(self._journal)
                if _stat_sig(self.directory / _META) != self._meta_sig or journal is None:
                    self._reload()
                elif journal[2] != self._journal_offset:
                    self._replay_journal()
        if writer:
            self._truncate_torn_tail()

    def _truncate_torn_tail(self) -> None:
        """Cut journal bytes past the last applied record (a crashed write); hold LOCK_EX."""
        sig = _stat_sig(self._journal)
        if sig is not None and sig[2] > self._journal_offset:
            logger.warning(
                "%s: truncating %d bytes of an incomplete record",
                self._journal,
                sig[2] - self._journal_offset,
            )
            os.truncate(self._journal, self._journal_offset)

    def _append_journal(self, record: str) -> None:
        data = record.encode("utf-8")
        with open(self._journal, "ab") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        self._journal_offset += len(data)

    def _maybe_compact(self) -> None:
        if self._journal_offset > max(_MIN_COMPACT_BYTES, self._snapshot_bytes // 2):
            self._write_snapshot(self._gen + 1)

    def _write_snapshot(self, gen: int) -> None:
        """Write generation ``gen`` from memory and commit it via ``meta.json`` (LOCK_EX)."""
        n = self._n
        lines = self._lines[:n]
        all_terms = np.concatenate(self._terms) if n else np.zeros(0, dtype=np.int32)
        used = np.unique(all_terms)  # drop terms only deleted chunks had
        remap = np.zeros(len(self._vocab), dtype=np.int32)
        remap[used] = np.arange(used.size, dtype=np.int32)
        words = list(self._vocab)  # ids were given in insertion order
        terms = {
            "lens": np.fromiter((t.size for t in self._terms), dtype=np.int32, count=n),
            "terms": remap[all_terms],
            "tfs": np.concatenate(self._tfs) if n else np.zeros(0, dtype=np.float32),
            "doclen": self._doclen[:n],
            "ids": _json_array([self._ids, [self._doc_ids[c] for c in self._codes[:n]]]),
            "vocab": _json_array([words[i] for i in used]),
        }

        def write_chunks(f: Any) -> None:
            for line in lines:
                f.write(line.encode("utf-8"))
                f.write(b"\n")

        size = _write_atomic(self._path("chunks", gen), write_chunks)
        size += _write_atomic(self._path("vectors", gen), lambda f: np.save(f, self._vecs[:n]))
        size += _write_atomic(self._path("terms", gen), lambda f: np.savez(f, **terms))
        _write_atomic(self._path("journal", gen), lambda f: None)
        meta = {
            "format": FORMAT,
            "format_version": FORMAT_VERSION,
            "dim": self.dim,
            "analyzer": ANALYZER_VERSION,
        }
        _write_atomic(
            self.directory / _META,
            lambda f: f.write(json.dumps({**meta, "generation": gen}).encode("utf-8")),
        )
        _fsync_dir(self.directory)
        old = self._gen
        self._gen = gen
        self._meta_sig = _stat_sig(self.directory / _META)
        self._journal_offset = 0
        self._snapshot_bytes = size
        if old and old != gen:
            self._remove_stale_files()

    def _remove_stale_files(self) -> None:
        """Delete files of other generations and leftover temp files (hold LOCK_EX)."""
        for path in self.directory.iterdir():
            m = _FILE_RE.match(path.name)
            if m and (m.group(4) or int(m.group(2)) != self._gen):
                with contextlib.suppress(OSError):
                    path.unlink()
