"""Wiring: one settings object → catalog, knowledge base, ingest pipeline, agent service.

The pipeline writes through the knowledge base's open indexes, so a search right after an
ingest sees the new chunks in the same process.

Each part's module is imported when the part is first used, not with this one: a command
that only reads the catalog never imports the ingest pipeline, the embedding model's code
or the agent (LangGraph, LangChain).
"""

from __future__ import annotations

from functools import cached_property
from typing import TYPE_CHECKING

from sleuth.config import Settings

if TYPE_CHECKING:
    from sleuth.agents.reasoner import Reasoner
    from sleuth.ingest.pipeline import IngestPipeline
    from sleuth.memory import AgentMemory
    from sleuth.retrieval.embeddings import Embedder
    from sleuth.retrieval.search import KnowledgeBase
    from sleuth.service import AgentService
    from sleuth.store.catalog import Catalog
    from sleuth.store.index import Index


class Sleuth:
    """The parts of a sleuth installation, created lazily from ``settings``.

    Args:
        settings: the configuration (``Settings()`` reads ``SLEUTH_*`` variables).
        embedder: overrides the embedding model named by the settings (tests pass
            :class:`~sleuth.retrieval.embeddings.HashingEmbedder`).
        reasoner: overrides the reasoner chosen by ``settings.llm``.
        ingest_embedder: the embedder of the ingest pipeline, when it must not be the one
            searches use (the HTTP API gives ingestion an instance of its own, so a query
            never waits behind an ingestion's embedding batches); default: ``embedder``.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        embedder: Embedder | None = None,
        reasoner: Reasoner | None = None,
        ingest_embedder: Embedder | None = None,
    ) -> None:
        self.settings = settings or Settings()
        self.settings.data_dir.mkdir(parents=True, exist_ok=True)
        self._embedder = embedder
        self._reasoner = reasoner
        self._ingest_embedder = ingest_embedder

    @cached_property
    def catalog(self) -> Catalog:
        """The SQL catalog (collections, documents, chunks, users, runs)."""
        from sleuth.store.catalog import Catalog

        return Catalog(self.settings.catalog_url)

    @cached_property
    def kb(self) -> KnowledgeBase:
        """The knowledge base: search and read access to the collections."""
        from sleuth.retrieval.search import KnowledgeBase

        return KnowledgeBase(self.settings, self.catalog, embedder=self._embedder)

    @cached_property
    def pipeline(self) -> IngestPipeline:
        """The ingest pipeline, writing through the knowledge base's open indexes."""
        from sleuth.ingest.pipeline import IngestPipeline

        def shared_index(_settings: Settings, collection: str, _dim: int) -> Index:
            return self.kb.index(collection)

        return IngestPipeline(
            self.settings,
            self.catalog,
            index_opener=shared_index,
            embedder=self._ingest_embedder or self._embedder,
        )

    @cached_property
    def memory(self) -> AgentMemory:
        """The users' run memory (its index opens on first use)."""
        from sleuth.memory import AgentMemory

        return AgentMemory(self.kb)

    @cached_property
    def agent(self) -> AgentService:
        """The agent service (ReAct and guided runs) over the knowledge base and memory."""
        from sleuth.service import AgentService

        return AgentService(self.settings, self.kb, reasoner=self._reasoner, memory=self.memory)

    def drop_collection(self, name: str) -> None:
        """Delete a collection with its index data and catalog records.

        See :meth:`KnowledgeBase.drop_collection`; the pipeline forgets the dropped index.
        """
        self.kb.drop_collection(name)
        pipeline = self.__dict__.get("pipeline")
        if pipeline is not None:
            with pipeline._lock:
                pipeline._indexes.pop(name, None)

    def close(self) -> None:
        """Close the parts that were opened (agent, memory, knowledge base indexes)."""
        if "agent" in self.__dict__:
            self.agent.close()
        if "memory" in self.__dict__:
            self.memory.close()
        if "kb" in self.__dict__:
            self.kb.close()
