"""``AgentService`` — the one entry point used by the CLI, the API, the MCP server and eval.

``execute_agentic_search`` runs one question through the ReAct graph and returns an
:class:`AgentSearchResponse`: the validated answer, the status, every step, the tool calls
and the trace metadata. The run is stored in the catalog.
"""

from __future__ import annotations

import time
import uuid
from functools import cached_property
from typing import Any, Literal

from pydantic import BaseModel, Field

from sleuth.agents.answer import GeneratedAnswer
from sleuth.agents.events import AnswerEvent, DoneEvent, ErrorEvent, EventEmitter, EventSink
from sleuth.agents.heuristic import HeuristicReasoner
from sleuth.agents.react import RunRuntime, build_react_graph
from sleuth.agents.reasoner import Reasoner
from sleuth.agents.state import AgentState, AgentStep, RunStatus
from sleuth.config import Settings
from sleuth.errors import UserError
from sleuth.retrieval.search import KnowledgeBase
from sleuth.tools.base import RunContext, ToolRegistry
from sleuth.tools.rag import build_rag_tools

AgentMode = Literal["react"]


class AgentSearchResponse(BaseModel):
    """Everything a run produced."""

    task_id: str
    query: str
    collection: str
    mode: str
    status: RunStatus
    answer: GeneratedAnswer
    reasoning_steps: list[AgentStep]
    tool_calls: list[dict[str, Any]] = Field(default_factory=list)
    artifacts: list[dict[str, Any]] = Field(default_factory=list)
    trace: dict[str, Any] = Field(default_factory=dict)


class AgentService:
    """Runs agentic searches over the knowledge base.

    Args:
        settings: configuration; ``settings.llm`` selects the reasoner.
        kb: the knowledge base (created from ``settings`` when omitted).
        reasoner: overrides the reasoner chosen by ``settings.llm`` (tests pass a scripted
            model wrapped in :class:`~sleuth.agents.llm_reasoner.LLMReasoner`).
    """

    def __init__(
        self,
        settings: Settings,
        kb: KnowledgeBase | None = None,
        reasoner: Reasoner | None = None,
    ) -> None:
        self.settings = settings
        self.kb = kb or KnowledgeBase(settings)
        self._reasoner = reasoner
        self._graph = build_react_graph()

    @cached_property
    def reasoner(self) -> Reasoner:
        if self._reasoner is not None:
            return self._reasoner
        from sleuth.llm.factory import make_chat_model

        model = make_chat_model(self.settings)
        if model is None:
            return HeuristicReasoner()
        from sleuth.agents.llm_reasoner import LLMReasoner

        return LLMReasoner(model, name=self.settings.llm)

    def tool_registry(self) -> ToolRegistry:
        """The tools offered to a run (built-in knowledge-base tools)."""
        return ToolRegistry(build_rag_tools(self.kb))

    def execute_agentic_search(
        self,
        query: str,
        collection: str | None = None,
        *,
        user_id: str | None = None,
        mode: AgentMode = "react",
        max_iterations: int | None = None,
        timeout_s: float | None = None,
        sinks: list[EventSink] | None = None,
        task_id: str | None = None,
    ) -> AgentSearchResponse:
        """Answer ``query`` from ``collection`` with the ReAct agent.

        Events are sent to ``sinks`` as they happen (the CLI trace, the SSE stream); exactly
        one terminal ``done`` or ``error`` event ends them.

        Raises:
            UserError: empty question or unknown collection (before any event is sent).
        """
        if not query.strip():
            raise UserError("the question is empty")
        collection = collection or self.settings.default_collection
        self.kb.index(collection)  # unknown collection / model mismatch fail here, cleanly
        task_id = task_id or uuid.uuid4().hex
        emitter = EventEmitter(task_id, sinks)
        ctx = RunContext(collection=collection, user_id=user_id)
        tools = self.tool_registry()
        limit = max_iterations or self.settings.max_iterations
        started = time.perf_counter()
        runtime = RunRuntime(
            ctx=ctx,
            tools=tools,
            reasoner=self.reasoner,
            emitter=emitter,
            deadline=time.monotonic() + (timeout_s or self.settings.run_timeout_s),
        )
        state = AgentState(
            task_id=task_id,
            collection=collection,
            original_query=query.strip(),
            user_id=user_id,
            max_iterations=limit,
            available_tools=tools.names,
        )
        error: str | None = None
        try:
            final = self._graph.invoke(
                state,
                config={"configurable": {"runtime": runtime}, "recursion_limit": 8 * limit + 20},
            )
            answer: GeneratedAnswer = final["final_answer"]
            status: RunStatus = final["status"]
            steps: list[AgentStep] = final["steps"]
            iterations = final["iteration_count"]
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}"
            answer = GeneratedAnswer(
                answer_text=f"The run failed before an answer could be written ({error}).",
                is_insufficient_context=True,
            )
            status, steps, iterations = RunStatus.ERROR, [], 0
            if not any(e.type == "answer" for e in emitter.events):
                emitter.emit(AnswerEvent(answer=answer, status=status.value))
        total_ms = (time.perf_counter() - started) * 1e3
        trace = {
            "mode": mode,
            "reasoner": self.reasoner.name,
            "iterations": iterations,
            "max_iterations": limit,
            "tool_trace": runtime.tool_trace,
            "citations_removed": [r.model_dump() for r in runtime.removed_citations],
            "retrieved_source_ids": list(ctx.retrieved),
            "timings_ms": {
                "total": round(total_ms, 1),
                **{k: round(v, 1) for k, v in runtime.stage_ms.items()},
            },
            "token_usage": ctx.usage,
            "error": error,
        }
        response = AgentSearchResponse(
            task_id=task_id,
            query=query,
            collection=collection,
            mode=mode,
            status=status,
            answer=answer,
            reasoning_steps=steps,
            tool_calls=runtime.tool_trace,
            trace=trace,
        )
        self._store(response, user_id, emitter)
        if error:
            emitter.emit(ErrorEvent(message=error))
        else:
            emitter.emit(DoneEvent(status=status.value))
        return response

    def _store(
        self, response: AgentSearchResponse, user_id: str | None, emitter: EventEmitter
    ) -> None:
        try:
            self.kb.catalog.save_run(
                {
                    "task_id": response.task_id,
                    "collection": response.collection,
                    "user_id": user_id,
                    "question": response.query,
                    "mode": response.mode,
                    "status": response.status.value,
                    "answer": response.answer.model_dump(),
                    "steps": [s.model_dump(mode="json") for s in response.reasoning_steps],
                    "trace": {**response.trace, "events": len(emitter.events) + 1},
                }
            )
        except Exception as exc:  # a failed store is reported in the trace, not raised
            response.trace["store_error"] = f"{type(exc).__name__}: {exc}"
