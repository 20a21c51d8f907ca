"""The ``Index`` interface shared by every search backend, and RRF fusion.

An index holds the chunks of one collection with their dense vectors and answers BM25,
dense and hybrid queries. Backends: :mod:`sleuth.store.local_index` (embedded default)
and :mod:`sleuth.store.milvus_index`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import numpy as np

from sleuth.types import Chunk, Hit

RRF_K = 60
"""RRF constant k from Cormack, Clarke & Büttcher (SIGIR 2009), 'Reciprocal Rank Fusion
outperforms Condorcet and individual rank learning methods'."""


@runtime_checkable
class Index(Protocol):
    """A searchable store of one collection's chunks.

    Vectors are float32 arrays of shape ``(n, dim)``, L2-normalised (so dot = cosine).
    ``doc_ids`` filters restrict results to chunks of those documents.
    """

    dim: int

    def add(self, chunks: Sequence[Chunk], vectors: np.ndarray) -> None:
        """Insert chunks (or replace those with the same ``chunk_id``)."""
        ...

    def delete_document(self, doc_id: str) -> int:
        """Remove every chunk of a document; return how many were removed."""
        ...

    def count(self) -> int:
        """Number of chunks held."""
        ...

    def search_bm25(self, query: str, k: int, doc_ids: Sequence[str] | None = None) -> list[Hit]:
        """Top-k chunks by BM25 over ``Chunk.index_text()``."""
        ...

    def search_dense(
        self, vector: np.ndarray, k: int, doc_ids: Sequence[str] | None = None
    ) -> list[Hit]:
        """Top-k chunks by cosine similarity to ``vector`` (shape ``(dim,)``)."""
        ...

    def search_hybrid(
        self,
        query: str,
        vector: np.ndarray,
        k: int,
        doc_ids: Sequence[str] | None = None,
    ) -> list[Hit]:
        """Top-k chunks by RRF fusion of BM25 and dense rankings."""
        ...

    def close(self) -> None:
        """Release files, connections and locks."""
        ...


def rrf_fuse(rankings: Sequence[Sequence[Hit]], k: int, rrf_k: int = RRF_K) -> list[Hit]:
    """Fuse several rankings with Reciprocal Rank Fusion.

    score(d) = Σ_r 1 / (rrf_k + rank_r(d)), ranks 1-based (Cormack et al., SIGIR 2009).

    Args:
        rankings: lists of hits, each ordered best first.
        k: how many fused hits to return.
        rrf_k: the RRF constant (60 in the paper).

    Returns:
        Up to ``k`` hits with ``retriever="hybrid"``, ordered by fused score; ties are
        broken by ``chunk_id`` so the order is deterministic.
    """
    scores: dict[str, float] = {}
    chunks: dict[str, Chunk] = {}
    for ranking in rankings:
        for rank, hit in enumerate(ranking, start=1):
            cid = hit.chunk.chunk_id
            scores[cid] = scores.get(cid, 0.0) + 1.0 / (rrf_k + rank)
            chunks.setdefault(cid, hit.chunk)
    ordered = sorted(scores, key=lambda cid: (-scores[cid], cid))[:k]
    return [
        Hit(chunk=chunks[cid], score=scores[cid], rank=i, retriever="hybrid")
        for i, cid in enumerate(ordered, start=1)
    ]


def check_k(k: int) -> None:
    """Raise ``ValueError`` unless ``k`` (hits wanted) is at least 1."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")


def query_vector(vector: np.ndarray, dim: int) -> np.ndarray:
    """A query vector as float32 of shape ``(dim,)`` (``(1, dim)`` is accepted).

    Raises:
        ValueError: another shape.
    """
    q = np.asarray(vector, dtype=np.float32)
    if q.ndim == 2 and q.shape[0] == 1:
        q = q[0]
    if q.shape != (dim,):
        raise ValueError(f"query vector must have shape ({dim},), got {q.shape}")
    return q
