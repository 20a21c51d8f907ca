"""Agent memory: each user's past runs, recalled by similarity.

A finished run (``completed`` or ``insufficient_context``) is remembered as one entry: the
question, the answer text, the cited ``source_id`` s, the CRAG verdicts (guided mode), the
status, the collection and the time. BM25 indexes the question and the answer; the dense
vector is the question's (a new question is compared with past questions), which the
service's recall at the start of the run has already computed: remembering a run embeds
nothing new. Entries live in an internal index of the configured
backend (``<data_dir>/indexes/_memory_<model>``, or the Milvus collection
``sleuth__memory_<model>``; see :func:`sleuth.store.factory.open_internal_index`), embedded
with the knowledge base's embedding model; ``<model>`` is a digest of that model's name, so a
change of model starts an empty memory instead of mixing vector spaces. The memory index has
no catalog record: it is not a collection, ``sleuth collections`` does not list it, and
deleting a collection leaves it alone.

Memory never crosses users. Every entry of a user sits in one index "document" whose id is
:func:`memory_doc_id` of that user, and every recall searches with that document as the
index's ``doc_ids`` filter (applied before ranking, in both backends), then drops anything of
another document. Users are told apart by a SHA-256 digest of ``user_id`` (the raw id is not
stored in the index); runs without a user (``user_id=None``: the CLI, anonymous API calls)
share their own bucket, ``"anonymous"``, which no named user can reach (a user literally
called ``"anonymous"`` gets a digest like everyone else).

Memories are not evidence: the ``recall_similar`` tool (:mod:`sleuth.tools.memory`) shows
them to the agent without adding anything to the run's retrieved sections, so an answer can
only cite sections read again in the run.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
from pydantic import BaseModel, Field

from sleuth.agents.answer import GeneratedAnswer
from sleuth.config import Settings
from sleuth.retrieval.embeddings import Embedder
from sleuth.retrieval.search import KnowledgeBase
from sleuth.store.factory import open_internal_index
from sleuth.store.index import Index
from sleuth.types import Chunk

ANONYMOUS = "anonymous"
"""The memory bucket of runs without a ``user_id``."""
MEMORY_INDEX_PREFIX = "_memory_"
REMEMBERED_STATUSES = frozenset({"completed", "insufficient_context"})
"""Run statuses worth remembering; errors, timeouts and loop caps are not."""
MAX_RECALL = 10
"""Most memories one recall returns."""
_MAX_FETCH = 2000
_VECTOR_CACHE = 256

MemoryIndexOpener = Callable[[Settings, str, int], Index]


class Memory(BaseModel):
    """One remembered run, as recalled."""

    task_id: str
    question: str
    answer_text: str
    citations: list[str] = Field(
        default_factory=list, description="source_ids the run's answer cited"
    )
    verdicts: list[str] = Field(
        default_factory=list, description="CRAG verdicts of the run (guided mode), in order"
    )
    status: str
    collection: str = ""
    score: float = Field(default=0.0, description="Hybrid (RRF) score of the recall; 0 if stored")
    created_at: datetime


def user_key(user_id: str | None) -> str:
    """The memory bucket of a user: ``"anonymous"`` for ``None``, else ``u-<sha256>``."""
    if user_id is None:
        return ANONYMOUS
    return "u-" + hashlib.sha256(user_id.encode("utf-8")).hexdigest()


def memory_doc_id(user_id: str | None) -> str:
    """The index document holding every memory of ``user_id`` (the recall filter)."""
    return f"memory:{user_key(user_id)}"


def memory_index_name(embedding_model: str) -> str:
    """The internal index name of the memory for an embedding model."""
    digest = hashlib.sha1(embedding_model.encode("utf-8"), usedforsecurity=False).hexdigest()
    return MEMORY_INDEX_PREFIX + digest[:12]


class AgentMemory:
    """Per-user memory of completed runs, searched like a collection (hybrid BM25 + dense).

    Thread-safe; the index is opened on first use. Failures raise: callers that must not
    fail (the agent service) catch them.

    Args:
        kb: the knowledge base; its settings choose the backend and its embedder embeds
            memories (the same model as the collections, so no second model is loaded).
        index_opener: opens the memory index (default: the configured backend).
    """

    def __init__(
        self, kb: KnowledgeBase, index_opener: MemoryIndexOpener = open_internal_index
    ) -> None:
        self.kb = kb
        self._index_opener = index_opener
        self._index: Index | None = None
        self._lock = threading.Lock()
        self._vectors: OrderedDict[str, np.ndarray] = OrderedDict()

    @property
    def settings(self) -> Settings:
        return self.kb.settings

    @property
    def embedder(self) -> Embedder:
        return self.kb.embedder

    def index(self) -> Index:
        """The open memory index (opened, and created if missing, on first call)."""
        with self._lock:
            if self._index is None:
                embedder = self.embedder
                name = memory_index_name(embedder.name)
                self._index = self._index_opener(self.settings, name, embedder.dim)
            return self._index

    def _embed(self, text: str) -> np.ndarray:
        """The embedding of ``text``; the last few texts are cached (recall, then remember)."""
        with self._lock:
            vector = self._vectors.get(text)
            if vector is not None:
                self._vectors.move_to_end(text)
                return vector
        vector = self.embedder.embed([text])[0]
        with self._lock:
            self._vectors[text] = vector
            while len(self._vectors) > _VECTOR_CACHE:
                self._vectors.popitem(last=False)
        return vector

    def remember(
        self,
        user_id: str | None,
        question: str,
        answer: GeneratedAnswer,
        status: str,
        task_id: str,
        verdicts: Sequence[str] = (),
        *,
        collection: str = "",
        created_at: datetime | None = None,
    ) -> Memory | None:
        """Store a finished run in ``user_id``'s memory (the same ``task_id`` replaces it).

        Args:
            user_id: the user (``None``: the anonymous bucket).
            question: the question as asked.
            answer: the run's validated answer.
            status: the run status; only ``completed`` and ``insufficient_context`` runs are
                remembered (see :data:`REMEMBERED_STATUSES`).
            task_id: the run's id.
            verdicts: the run's CRAG verdicts (guided mode), if any.
            collection: the collection the run searched.
            created_at: when the run finished (default: now, UTC).

        Returns:
            The stored memory, or ``None`` when the status is not remembered.
        """
        status = str(getattr(status, "value", status))
        if status not in REMEMBERED_STATUSES:
            return None
        memory = Memory(
            task_id=task_id,
            question=question.strip(),
            answer_text=answer.answer_text,
            citations=list(dict.fromkeys(c.source_id for c in answer.citations)),
            verdicts=[str(v) for v in verdicts],
            status=status,
            collection=collection,
            created_at=created_at or datetime.now(UTC),
        )
        chunk = _to_chunk(user_id, memory)
        vector = self._embed(memory.question)
        self.index().add([chunk], vector.reshape(1, -1))
        return memory

    def recall_similar(
        self,
        user_id: str | None,
        query: str,
        limit: int = 3,
        *,
        collection: str | None = None,
    ) -> list[Memory]:
        """The ``limit`` past runs of ``user_id`` most similar to ``query``, best first.

        Hybrid search (RRF of BM25 over question + answer, dense over the question),
        restricted to the user's own memories; never another user's.

        Args:
            user_id: the user (``None``: the anonymous bucket).
            query: the question or topic.
            limit: how many memories at most (1 to :data:`MAX_RECALL`; clamped).
            collection: only runs over this collection (default: any collection).

        Returns:
            Up to ``limit`` memories, one per run; ``[]`` for an empty query or memory.
        """
        limit = max(1, min(int(limit), MAX_RECALL))
        if not query.strip():
            return []
        doc_id = memory_doc_id(user_id)
        vector = self._embed(query.strip())
        index = self.index()
        k = limit if collection is None else max(4 * limit, 20)
        while True:
            hits = index.search_hybrid(query, vector, k, doc_ids=[doc_id])
            found: dict[str, Memory] = {}
            for hit in hits:
                if hit.chunk.doc_id != doc_id:  # the filter already guarantees it
                    continue
                memory = _from_chunk(hit.chunk, hit.score)
                if memory is None or (collection is not None and memory.collection != collection):
                    continue
                found.setdefault(memory.task_id, memory)
            if len(found) >= limit or len(hits) < k or k >= _MAX_FETCH:
                return list(found.values())[:limit]
            k = min(4 * k, _MAX_FETCH)

    def forget(self, user_id: str | None) -> int:
        """Delete every memory of ``user_id``; returns how many were removed."""
        return self.index().delete_document(memory_doc_id(user_id))

    def close(self) -> None:
        """Close the memory index (it reopens on next use)."""
        with self._lock:
            index, self._index = self._index, None
        if index is not None:
            index.close()


def _to_chunk(user_id: str | None, memory: Memory) -> Chunk:
    key = user_key(user_id)
    meta: dict[str, Any] = memory.model_dump(mode="json", exclude={"score"})
    return Chunk(
        chunk_id=f"memory:{key}:{memory.task_id}",
        source_id=f"memory:{memory.task_id}",
        doc_id=memory_doc_id(user_id),
        title_path=[],
        text=f"{memory.question}\n{memory.answer_text}",
        position=0,
        metadata={"memory": meta},
    )


def _from_chunk(chunk: Chunk, score: float) -> Memory | None:
    data = chunk.metadata.get("memory")
    if not isinstance(data, dict):
        return None
    try:
        return Memory.model_validate({**data, "score": score})
    except ValueError:
        return None
