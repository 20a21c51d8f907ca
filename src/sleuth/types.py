"""Shared vocabulary: documents, sections, chunks, references and search hits.

A loader turns a file into a :class:`Document` made of :class:`Section` s (the logical
units a user cites: a statute section, a heading's body). The chunker splits sections into
:class:`Chunk` s small enough to embed; sub-chunks of one section share its ``source_id``,
which is the citation id the agent and the user see (e.g. ``BNS_S103``).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, Field

MAX_QUESTION_CHARS = 4000
"""Longest question a run accepts, in characters (the question analysis is not meant for
whole documents)."""


def question_problem(question: str) -> str | None:
    """Why ``question`` cannot be run, or ``None``: empty (blank), longer than
    :data:`MAX_QUESTION_CHARS`, or without a single letter or digit in any script ("???",
    "!!!": nothing to search for, and any section would be as good an answer as another)."""
    if not question.strip():
        return "the question is empty"
    if len(question) > MAX_QUESTION_CHARS:
        return (
            f"the question is too long: {len(question):,} characters, at most "
            f"{MAX_QUESTION_CHARS:,}; ask about one thing at a time"
        )
    if not any(ch.isalnum() for ch in question):
        return "the question holds no words to search for (only punctuation or symbols)"
    return None


class Section(BaseModel):
    """One citable unit of a document, as produced by a loader.

    ``source_id`` is the citation id when the loader knows it (statute records, JSON records
    with an id template); otherwise the chunker derives one from the document and title path.
    """

    title_path: list[str] = Field(description="Hierarchy from document to this section")
    text: str
    source_id: str | None = None
    metadata: dict[str, Any] = Field(default_factory=dict)


class Document(BaseModel):
    """A parsed file: its identity, content hash and sections."""

    doc_id: str = Field(description="Stable id of the document within its collection")
    path: str = Field(description="Path (or URI) the document was read from")
    title: str
    content_hash: str = Field(
        description="sha256 hex digest of the raw file bytes (for JSON/JSONL: bytes plus the "
        "record options used), the identity of the content for re-ingestion"
    )
    sections: list[Section]
    metadata: dict[str, Any] = Field(default_factory=dict)


class Reference(BaseModel):
    """A cross-reference found in a chunk's text.

    ``target_id`` is the resolved ``source_id`` in the same collection, or ``None`` when the
    target could not be resolved (e.g. a section of another act not in the collection).
    """

    source_id: str
    target_text: str = Field(description="The reference as written, e.g. 'section 103'")
    target_id: str | None = None


class Chunk(BaseModel):
    """The unit of indexing and retrieval.

    ``chunk_id`` is unique in a collection (``f"{source_id}#{part}"``); ``source_id`` is the
    citation id shared by every part of one section.
    """

    chunk_id: str
    source_id: str
    doc_id: str
    title_path: list[str]
    text: str
    position: int = Field(description="Order of the chunk within its document (0-based)")
    part: int = Field(default=0, description="Index of this part within its section")
    references: list[Reference] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)

    @property
    def heading(self) -> str:
        """The title path joined with ' > ', used as the chunk's display title."""
        return " > ".join(self.title_path)

    def index_text(self) -> str:
        """Text sent to BM25 and the embedder: title path plus body."""
        return f"{self.heading}\n{self.text}" if self.title_path else self.text


Retriever = Literal["bm25", "dense", "hybrid"]


class Hit(BaseModel):
    """A chunk returned by a search, with its score and 1-based rank."""

    chunk: Chunk
    score: float
    rank: int
    retriever: Retriever
