"""Request and response models of the HTTP API, with the examples shown in the OpenAPI docs.

The agent's own models are reused where they are the contract (:class:`Citation`,
:class:`AgentStep`, the event union of :mod:`sleuth.agents.events`); everything here is what
the API adds around them: requests with their limits, a flat search response, collections,
documents and ingestion jobs as a client sees them (no server paths).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, field_validator

from sleuth.agents.answer import Citation, GeneratedAnswer
from sleuth.agents.state import AgentStep
from sleuth.store.catalog import COLLECTION_NAME_PATTERN, CollectionInfo, DocumentInfo
from sleuth.types import question_problem

COLLECTION_NAME = COLLECTION_NAME_PATTERN.pattern
THREAD_ID = "[A-Za-z0-9_-]{1,64}"
MAX_QUERY_CHARS = 4000

RunState = Literal[
    "running",
    "completed",
    "insufficient_context",
    "max_iterations",
    "repeated_action",
    "timeout",
    "error",
    "interrupted",
]
"""``running`` while the run goes on, then the :class:`RunStatus` it ended with, or
``interrupted`` when the server stopped while it was in flight."""
_RUN_STATES = frozenset(get_args(RunState))


def run_state(value: str | None) -> RunState:
    """A stored status as a :data:`RunState` (anything unknown reads ``error``)."""
    return value if value in _RUN_STATES else "error"  # type: ignore[return-value]


class Problem(BaseModel):
    """An error response: ``detail`` says what is wrong, naming the field or the resource."""

    detail: Any = Field(description="A one-line message (or FastAPI's list of field errors)")
    message: str | None = Field(
        default=None, description="Validation errors only: the field errors on one line"
    )

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"detail": "collection 'laws' not found"}]}
    )


# ------------------------------------------------------------------------------ search


class AgentSearchRequest(BaseModel):
    """A question for the agent, over one of the caller's collections."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={
            "examples": [
                {
                    "query": "What is the punishment for murder?",
                    "collection": "statutes",
                    "mode": "react",
                    "stream": False,
                },
                {
                    "query": "Which section defines theft, and how is it punished?",
                    "collection": "statutes",
                    "mode": "guided",
                    "max_iterations": 6,
                    "timeout_s": 60,
                    "stream": True,
                },
            ]
        },
    )

    query: str = Field(
        min_length=1, max_length=MAX_QUERY_CHARS, description="The question (not blank)"
    )
    collection: str = Field(
        pattern=f"^{COLLECTION_NAME}$",
        description="One of the caller's collections (1-64 letters, digits, '_', '.', '-')",
    )
    mode: Literal["react", "guided"] = Field(
        default="react",
        description="'react': the open ReAct loop; 'guided': the constrained runtime "
        "(planner, CRAG verdicts, refinement)",
    )
    max_iterations: int | None = Field(
        default=None, ge=1, le=50, description="ReAct tool rounds at most (default: server)"
    )
    timeout_s: float | None = Field(
        default=None, gt=0, le=3600, description="Wall-clock cap of the run, seconds"
    )
    use_memory: bool = Field(
        default=True, description="Recall the caller's similar past runs and remember this one"
    )
    strict_grounding: bool | None = Field(
        default=None, description="Drop unsupported sentences (default: the server's setting)"
    )
    stream: bool = Field(
        default=False,
        description="true: answer 202 with the task_id at once (follow the run on "
        "/agent/search/{task_id}/stream); false: wait and answer with the result",
    )
    thread_id: str | None = Field(
        default=None,
        pattern=f"^{THREAD_ID}$",
        description="Ask in this conversation thread (one of the caller's, of this "
        "collection): a follow-up is made standalone from the thread's last turns before "
        "searching, and the run becomes the thread's next turn",
    )

    @field_validator("query")
    @classmethod
    def _not_blank(cls, value: str) -> str:
        problem = question_problem(value)
        if problem is not None:
            raise ValueError(problem)
        return value


class AgentSearchAccepted(BaseModel):
    """The answer to a streamed search: where to follow the run."""

    task_id: str
    status: Literal["running"] = "running"
    stream_url: str = Field(description="Server-Sent Events of the run")
    result_url: str = Field(description="The run (its result once it has ended)")

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "task_id": "4f1c2d3e4b5a69788796a5b4c3d2e1f0",
                    "status": "running",
                    "stream_url": "/agent/search/4f1c2d3e4b5a69788796a5b4c3d2e1f0/stream",
                    "result_url": "/agent/search/4f1c2d3e4b5a69788796a5b4c3d2e1f0",
                }
            ]
        }
    )


_CITATION_EXAMPLE = {
    "source_id": "BNS_S103",
    "number": 1,
    "title": "The Bharatiya Nyaya Sanhita, 2023 > Section 103. Punishment for murder.",
    "text": "(1) Whoever commits murder shall be punished with death or imprisonment for life, "
    "and shall also be liable to fine. ...",
    "support": 0.82,
}


class AgentSearchResponse(BaseModel):
    """A run: its answer with the cited sections' text, its steps, tool calls and trace.

    While the run goes on (``status`` = ``running``) ``answer`` is null and the lists are
    empty; follow ``/agent/search/{task_id}/stream`` for its steps.
    """

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "task_id": "4f1c2d3e4b5a69788796a5b4c3d2e1f0",
                    "query": "What is the punishment for murder?",
                    "collection": "statutes",
                    "mode": "react",
                    "status": "completed",
                    "answer": "Whoever commits murder shall be punished with death or "
                    "imprisonment for life, and shall also be liable to fine [BNS_S103].",
                    "key_points": ["Death or imprisonment for life, and a fine [BNS_S103]"],
                    "citations": [_CITATION_EXAMPLE],
                    "is_insufficient_context": False,
                    "ungrounded_sentences": [],
                    "reasoning_steps": [
                        {
                            "step_type": "think",
                            "content": "Search for the punishment of murder.",
                            "timestamp": 1796040000.0,
                        }
                    ],
                    "tool_calls": [
                        {"tool": "rag_search", "arguments": {"query": "punishment for murder"}}
                    ],
                    "artifacts": [],
                    "trace": {"iterations": 2, "reasoner": "heuristic"},
                    "error": None,
                    "created_at": "2026-11-30T12:00:00Z",
                    "finished_at": "2026-11-30T12:00:01Z",
                }
            ]
        }
    )

    task_id: str
    query: str
    collection: str
    mode: str
    status: RunState
    answer: str | None = Field(
        default=None, description="The answer text with [source_id] markers; null while running"
    )
    key_points: list[str] = Field(default_factory=list)
    citations: list[Citation] = Field(
        default_factory=list, description="The cited sections, with their text"
    )
    is_insufficient_context: bool = False
    ungrounded_sentences: list[str] = Field(default_factory=list)
    reasoning_steps: list[AgentStep] = Field(default_factory=list)
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    artifacts: list[dict[str, Any]] = Field(default_factory=list)
    trace: dict[str, Any] = Field(default_factory=dict)
    error: str | None = Field(default=None, description="Why the run failed (status 'error')")
    created_at: datetime | None = None
    finished_at: datetime | None = None

    @classmethod
    def from_answer(cls, answer: GeneratedAnswer | None, **fields: Any) -> AgentSearchResponse:
        """Flatten a :class:`GeneratedAnswer` into the response's answer fields."""
        if answer is not None:
            fields.update(
                answer=answer.answer_text,
                key_points=answer.key_points,
                citations=answer.citations,
                is_insufficient_context=answer.is_insufficient_context,
                ungrounded_sentences=answer.ungrounded_sentences,
            )
        return cls(**fields)

    @classmethod
    def from_record(cls, run: dict[str, Any]) -> AgentSearchResponse:
        """A response from a run stored in the catalog (:meth:`Catalog.get_run`)."""
        trace = run.get("trace") or {}
        answer = run.get("answer")
        return cls.from_answer(
            GeneratedAnswer.model_validate(answer) if answer else None,
            task_id=run["task_id"],
            query=run.get("question") or "",
            collection=run.get("collection") or "",
            mode=run.get("mode") or "",
            status=run_state(run.get("status")),
            reasoning_steps=[AgentStep.model_validate(s) for s in run.get("steps") or []],
            tool_calls=list(trace.get("tool_trace") or []),
            trace=trace,
            error=run.get("error") or trace.get("error"),
            created_at=run.get("created_at"),
            finished_at=run.get("finished_at"),
        )


class RunSummary(BaseModel):
    """One of the caller's runs, as listed by ``GET /agent/search``."""

    task_id: str
    query: str
    collection: str
    mode: str
    status: RunState
    created_at: datetime | None = None
    finished_at: datetime | None = None


# ------------------------------------------------------------------------------ collections


class CollectionCreate(BaseModel):
    """A new collection, owned by the caller."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"name": "statutes"}]}
    )

    name: str = Field(
        pattern=f"^{COLLECTION_NAME}$",
        description="1 to 64 characters: letters, digits, '_', '.' or '-', starting with a "
        "letter or digit; unique on the server",
    )


class CollectionOut(BaseModel):
    """A collection with its embedding model and its size."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "name": "statutes",
                    "embedding_model": "all-MiniLM-L6-v2",
                    "dim": 384,
                    "backend": "local",
                    "created_at": "2026-11-30T12:00:00Z",
                    "n_documents": 4,
                    "n_chunks": 2431,
                    "n_failed": 0,
                }
            ]
        }
    )

    name: str
    embedding_model: str
    dim: int
    backend: str
    created_at: datetime
    n_documents: int = Field(description="Documents indexed")
    n_chunks: int
    n_failed: int = Field(description="Documents that failed to ingest")

    @classmethod
    def of(cls, info: CollectionInfo) -> CollectionOut:
        return cls.model_validate(info.model_dump())


class DocumentOut(BaseModel):
    """A document of a collection (its file name, not the server's path)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "doc_id": "BNS",
                    "name": "the_bharatiya_nyaya_sanhita_2023.json",
                    "title": "The Bharatiya Nyaya Sanhita, 2023",
                    "status": "indexed",
                    "error": None,
                    "n_chunks": 610,
                    "content_hash": "9b2f...",
                    "updated_at": "2026-11-30T12:00:00Z",
                }
            ]
        }
    )

    doc_id: str
    name: str = Field(description="The file name the document was ingested from")
    title: str | None = None
    status: Literal["indexed", "failed", "skipped"]
    error: str | None = None
    n_chunks: int = 0
    content_hash: str = ""
    updated_at: datetime | None = None

    @classmethod
    def of(cls, info: DocumentInfo) -> DocumentOut:
        name = info.path.replace("\\", "/").rsplit("/", 1)[-1]
        return cls(name=name, **info.model_dump(exclude={"path"}))


class OutlineItem(BaseModel):
    """One section of a document's outline."""

    source_id: str
    title: str = Field(description="The section's title path within its document, ' > '-joined")


class SectionOut(BaseModel):
    """A section's text and its place in its document's outline (the sections around it)."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "source_id": "BNS_S103",
                    "doc_id": "BNS",
                    "title": "The Bharatiya Nyaya Sanhita, 2023 > Section 103. Punishment for "
                    "murder.",
                    "text": "(1) Whoever commits murder shall be punished with death or "
                    "imprisonment for life, and shall also be liable to fine. ...",
                    "previous": "BNS_S102",
                    "next": "BNS_S104",
                    "outline_total": 358,
                    "outline_start": 96,
                    "outline": [{"source_id": "BNS_S103", "title": "Section 103. Punishment"}],
                }
            ]
        }
    )

    source_id: str
    doc_id: str
    title: str = Field(description="The section's title path, ' > '-joined")
    text: str = Field(description="The section's whole text")
    previous: str | None = Field(default=None, description="The section before it")
    next: str | None = Field(default=None, description="The section after it")
    outline_total: int = Field(description="Sections in the document")
    outline_start: int = Field(description="Index (0-based) of the first outline entry shown")
    outline: list[OutlineItem] = Field(
        default_factory=list, description="The sections around this one, in document order"
    )


JobState = Literal["queued", "running", "succeeded", "failed"]


class JobProgress(BaseModel):
    """How far an ingestion job has come."""

    files_total: int = 0
    files_done: int = 0
    chunks_total: int = Field(default=0, description="Chunks to embed (known once chunked)")
    chunks_embedded: int = 0


class SearchHitOut(BaseModel):
    """One ranked section (or chunk) of a retrieval-only search."""

    rank: int = Field(description="1 = best")
    source_id: str = Field(description="The section's citation id")
    chunk_id: str
    doc_id: str
    title: str = Field(description="The section's title path, ' > '-joined")
    score: float = Field(description="RRF score (hybrid), BM25 score or cosine (dense)")
    retriever: str = Field(description="hybrid, bm25 or dense")
    text: str = Field(description="The chunk's text")


class JobFile(BaseModel):
    """What happened to one uploaded file."""

    name: str
    doc_id: str | None = None
    status: str = Field(
        description="added, replaced, unchanged, duplicate, skipped or failed (pending: not "
        "yet processed)"
    )
    n_chunks: int = 0
    message: str = ""


class JobOut(BaseModel):
    """An ingestion job: its state, progress and, once finished, one outcome per file."""

    model_config = ConfigDict(
        json_schema_extra={
            "examples": [
                {
                    "job_id": "0b7e1f2a3c4d5e6f",
                    "collection": "statutes",
                    "state": "running",
                    "progress": {
                        "files_total": 2,
                        "files_done": 1,
                        "chunks_total": 900,
                        "chunks_embedded": 512,
                    },
                    "files": [
                        {"name": "bns.json", "doc_id": "BNS", "status": "added", "n_chunks": 610},
                        {"name": "notes.pdf", "status": "pending"},
                    ],
                    "warnings": [],
                    "error": None,
                    "created_at": "2026-11-30T12:00:00Z",
                    "started_at": "2026-11-30T12:00:00Z",
                    "finished_at": None,
                    "status_url": "/collections/statutes/jobs/0b7e1f2a3c4d5e6f",
                }
            ]
        }
    )

    job_id: str
    collection: str
    state: JobState = Field(
        description="queued, running, succeeded (every file has an outcome; some may have "
        "failed, see files) or failed (the job itself failed, see error)"
    )
    progress: JobProgress = Field(default_factory=JobProgress)
    files: list[JobFile] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)
    error: str | None = None
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    status_url: str


class Health(BaseModel):
    """The server answers."""

    status: Literal["ok"] = "ok"
    version: str

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"status": "ok", "version": "0.1.0"}]}
    )


class ThreadCreate(BaseModel):
    """A new conversation thread over one of the caller's collections."""

    model_config = ConfigDict(
        extra="forbid",
        json_schema_extra={"examples": [{"collection": "statutes", "title": "Theft questions"}]},
    )

    collection: str = Field(
        pattern=f"^{COLLECTION_NAME}$", description="One of the caller's collections"
    )
    title: str = Field(
        default="",
        max_length=200,
        description="A title (default: the first question, once asked)",
    )


class ThreadOut(BaseModel):
    """A conversation thread."""

    thread_id: str
    collection: str
    title: str
    created_at: datetime
    updated_at: datetime
    turn_count: int


class TurnOut(BaseModel):
    """One turn of a thread: a question, the standalone question that was run (for a
    follow-up), and the answer with the source_ids it cited."""

    position: int = Field(description="0 for the thread's first kept turn, then 1, 2, …")
    question: str
    rewritten_question: str | None = Field(
        default=None, description="The follow-up made standalone (None: asked as typed)"
    )
    answer: str
    citations: list[str]
    status: str
    task_id: str | None = Field(default=None, description="The run (GET /agent/search/{id})")
    created_at: datetime


class ThreadDetail(ThreadOut):
    """A thread with its turns, oldest first."""

    turns: list[TurnOut]
