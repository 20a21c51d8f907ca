"""Tools the agent can call, and the registry that holds them.

A tool's ``description`` is the contract the LLM reads. Every tool returns a
:class:`ToolResult`: a one-line ``status`` plus a structured ``payload``.
"""

from __future__ import annotations

import copy
import functools
import json
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from sleuth.errors import ToolError
from sleuth.types import Chunk


class ToolResult(BaseModel):
    """What a tool returns: a status line, a payload, and the chunks it surfaced."""

    ok: bool = True
    status: str
    payload: dict[str, Any] = {}
    chunks: list[Chunk] = []
    text: str | None = None
    """The observation as prose for the model (e.g. numbered evidence); None: the payload."""

    def observation(self, max_chars: int = 6000) -> str:
        """Text sent back to the model: the status line and ``text`` (else the JSON payload),
        truncated to ``max_chars`` characters."""
        body = self.text if self.text is not None else json.dumps(self.payload, ensure_ascii=False)
        if len(body) > max_chars:
            body = body[:max_chars] + " …[truncated]"
        return f"{self.status}\n{body}"


@dataclass
class RunContext:
    """Per-run, per-request state the tools share: never shared between runs.

    ``retrieved`` maps each ``source_id`` surfaced in this run to its chunks (order of
    first retrieval); the citation validator only accepts ids found here. ``numbers`` gives
    each of them its evidence number (1, 2, … in order of first retrieval), never reassigned,
    so ``[3]`` means the same section in every round of a run.
    """

    collection: str
    user_id: str | None = None
    retrieved: dict[str, list[Chunk]] = field(default_factory=dict)
    numbers: dict[str, int] = field(default_factory=dict)
    read: set[str] = field(default_factory=set)
    followed: set[str] = field(default_factory=set)
    searches: list[str] = field(default_factory=list)
    found: dict[str, list[str]] = field(default_factory=dict)
    """Each ``rag_search`` query of the run → the section ids it returned, best first."""
    hits: set[str] = field(default_factory=set)
    """The ``chunk_id`` of each section's best passage a ``rag_search`` of the run returned:
    where a section answers deep in its text (an illustration, a proviso), the passage the
    search found is the one to judge it by (:func:`~sleuth.agents.heuristic.section_relevance`)."""
    hopped: set[str] = field(default_factory=set)
    """Sections a ``next_hop`` search started from."""
    hop_paths: dict[str, list[str]] = field(default_factory=dict)
    """Each section a ``next_hop`` search found → the chain of sections that led to it
    (its first one the anchor the question names)."""
    withheld: dict[str, str] = field(default_factory=dict)
    """Evidence sentences kept out of extractive answers (prompt injection, secrets: see
    :mod:`sleuth.agents.safety`) → why; reported in the trace by the citation check."""
    scorer: Any = None
    """The run's cross-encoder (:class:`~sleuth.retrieval.rerank.CrossEncoder`) when search
    results are reranked: the sections the reader sees are then ranked by it too
    (:func:`~sleuth.agents.heuristic.rank_sections`); ``None`` ranks them by term coverage."""
    external_tools: set[str] = field(default_factory=set)
    """Tools outside the knowledge base (MCP) the run called: their results are evidence
    no section can cite, so an answer's uncited sentences are then kept (listed)."""
    profile: Any = None
    """The run's question read once (:class:`~sleuth.agents.profile.QuestionProfile`: named
    documents, parts, answer kind, hop plan), set by the service when the run starts."""
    documents: list[str] | None = None
    """Titles of the collection's documents, loaded when the question names a document (an
    act, a code…): the final answer checks the collection holds it (:mod:`sleuth.agents.scope`)."""
    usage: dict[str, int] = field(default_factory=dict)
    usage_by_stage: dict[str, dict[str, int]] = field(default_factory=dict)
    stage: str = ""
    """The agent or graph stage now calling the model (``think``, ``generate``…): each
    call's tokens are also counted under it in ``usage_by_stage``."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def add_usage(self, usage: dict[str, int] | None, stage: str | None = None) -> None:
        """Add a model call's token counts (``input_tokens``, ``output_tokens``...), in total
        and under ``stage`` (default: :attr:`stage`, else ``"other"``). The prompt tokens
        served from a cache (LangChain's ``input_token_details.cache_read``) count as
        ``cached_input_tokens``."""
        if usage:
            details = usage.get("input_token_details")
            cached = details.get("cache_read") if isinstance(details, dict) else None
            counts = {k: v for k, v in usage.items() if isinstance(v, int)}
            if isinstance(cached, int):
                counts["cached_input_tokens"] = cached
            with self._lock:
                bucket = self.usage_by_stage.setdefault(stage or self.stage or "other", {})
                for key, value in counts.items():
                    self.usage[key] = self.usage.get(key, 0) + value
                    bucket[key] = bucket.get(key, 0) + value

    def track(self, chunks: Iterable[Chunk]) -> None:
        """Record chunks as retrieved in this run (thread-safe, de-duplicated)."""
        with self._lock:
            for chunk in chunks:
                bucket = self.retrieved.setdefault(chunk.source_id, [])
                self.numbers.setdefault(chunk.source_id, len(self.numbers) + 1)
                if all(c.chunk_id != chunk.chunk_id for c in bucket):
                    bucket.append(chunk)
                    bucket.sort(key=lambda c: c.part)


ToolFunc = Callable[[BaseModel, RunContext], ToolResult]


@functools.cache
def _json_schema(model: type[BaseModel]) -> dict[str, Any]:
    schema = model.model_json_schema()
    schema.pop("title", None)
    return schema


def json_parameters(model: type[BaseModel]) -> dict[str, Any]:
    """The JSON schema of ``model`` without its title, as a function's ``parameters``.

    Generated once per model class (pydantic's schema generation costs ~0.3 ms a model, paid
    at every ReAct step otherwise) and returned as a fresh deep copy, so callers may change it.
    """
    return copy.deepcopy(_json_schema(model))


@dataclass
class Tool:
    """A callable tool with a pydantic argument schema."""

    name: str
    description: str
    args_schema: type[BaseModel]
    func: ToolFunc

    @property
    def external(self) -> bool:
        """Whether an outside server runs the tool (an MCP tool): its observations are not
        the knowledge base's sections."""
        return False

    def spec(self) -> dict[str, Any]:
        """OpenAI-style function spec (accepted by LangChain's ``bind_tools``)."""
        return {
            "type": "function",
            "function": {
                "name": self.name,
                "description": self.description,
                "parameters": json_parameters(self.args_schema),
            },
        }

    def invoke(self, arguments: dict[str, Any], ctx: RunContext) -> ToolResult:
        """Validate ``arguments`` and run the tool.

        Raises:
            ToolError: invalid arguments (the message lists the problems) or a tool failure.
        """
        try:
            args = self.args_schema.model_validate(arguments)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}"
                for e in exc.errors()
            )
            raise ToolError(f"invalid arguments for {self.name}: {problems}") from exc
        return self.func(args, ctx)


class ToolRegistry:
    """The tools available to a run, by name."""

    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        for tool in tools:
            self.register(tool)

    def register(self, tool: Tool) -> None:
        if tool.name in self._tools:
            raise ValueError(f"duplicate tool name: {tool.name}")
        self._tools[tool.name] = tool

    def get(self, name: str) -> Tool | None:
        return self._tools.get(name)

    @property
    def names(self) -> list[str]:
        return list(self._tools)

    def specs(self) -> list[dict[str, Any]]:
        return [t.spec() for t in self._tools.values()]

    def __contains__(self, name: object) -> bool:
        return name in self._tools

    def __iter__(self):  # type: ignore[no-untyped-def]
        return iter(self._tools.values())
