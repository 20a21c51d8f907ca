"""``AgentService`` — the one entry point used by the CLI, the API, the MCP server and eval.

``execute_agentic_search`` runs one question through the ReAct graph and returns an
:class:`AgentSearchResponse`: the validated answer, the status, every step, the tool calls
and the trace metadata. The run is stored in the catalog.
"""

from __future__ import annotations

import threading
import time
import uuid
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, Field

from sleuth.agents.answer import GeneratedAnswer, capped
from sleuth.agents.coverage import CoverageJudge
from sleuth.agents.events import (
    AnswerDeltaEvent,
    AnswerEvent,
    DoneEvent,
    ErrorEvent,
    EventEmitter,
    EventSink,
    ObserveEvent,
)
from sleuth.agents.followup import PriorTurn, Rewrite, standalone_question
from sleuth.agents.guided import GuidedRuntime
from sleuth.agents.heuristic import HeuristicReasoner
from sleuth.agents.planning import PlanningAgent
from sleuth.agents.profile import QuestionProfile, analyse_question
from sleuth.agents.react import RunRuntime, build_react_graph
from sleuth.agents.reasoner import Reasoner
from sleuth.agents.safety import masked
from sleuth.agents.state import AgentState, AgentStep, AgentStepType, RunStatus
from sleuth.agents.support import SupportChecker
from sleuth.config import Settings
from sleuth.errors import NotFoundError, UserError, describe_failure
from sleuth.llm.calls import RunLimits, run_limits
from sleuth.llm.retry_notice import retry_notices
from sleuth.memory import AgentMemory, Memory
from sleuth.retrieval.search import KnowledgeBase
from sleuth.retrieval.text import terms
from sleuth.tools.base import RunContext, Tool, ToolRegistry
from sleuth.tools.memory import build_memory_tools
from sleuth.tools.rag import build_rag_tools
from sleuth.types import question_problem

if TYPE_CHECKING:
    from sleuth.llm.factory import ServerFacts
    from sleuth.mcp.client import MCPToolbox
    from sleuth.store.catalog import ThreadInfo

AgentMode = Literal["react", "guided"]


@dataclass
class _Outcome:
    """What one mode's run produced, before it becomes a response."""

    answer: GeneratedAnswer
    status: RunStatus
    steps: list[AgentStep]
    trace: dict[str, Any] = field(default_factory=dict)
    error: str | None = None


def _failed(exc: Exception, emitter: EventEmitter) -> _Outcome:
    """The outcome of a run whose graph raised: an honest answer and status ``error``."""
    error = describe_failure(exc)
    answer = GeneratedAnswer(
        answer_text=f"The run failed before an answer could be written ({error}).",
        is_insufficient_context=True,
    )
    if not any(e.type == "answer" for e in emitter.events):
        emitter.emit(AnswerEvent(answer=answer, status=RunStatus.ERROR.value))
    return _Outcome(answer=answer, status=RunStatus.ERROR, steps=[], error=error)


SIMILAR_QUESTION = 0.5
"""Jaccard overlap of content terms above which a remembered question counts as similar
(its cited sections are re-read first by the plan)."""


def _similar(question: str, other: str) -> bool:
    a, b = set(terms(question)), set(terms(other))
    return bool(a and b) and len(a & b) / len(a | b) >= SIMILAR_QUESTION


@dataclass(frozen=True)
class _Checks:
    """The citation checks of one run."""

    checker: SupportChecker
    strict_grounding: bool


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
        memory: the users' run memory (created over ``kb`` when omitted; used unless
            ``settings.memory`` is false or a request opts out).
        mcp: the tools of external MCP servers (created from ``settings.mcp_servers`` on
            first use when omitted; none when no server is configured).
    """

    def __init__(
        self,
        settings: Settings,
        kb: KnowledgeBase | None = None,
        reasoner: Reasoner | None = None,
        memory: AgentMemory | None = None,
        mcp: MCPToolbox | None = None,
    ) -> None:
        self.settings = settings
        self.kb = kb or KnowledgeBase(settings)
        self._reasoner = reasoner
        self.memory = memory if memory is not None else AgentMemory(self.kb)
        self._graph = build_react_graph()
        self._mcp = mcp
        self._mcp_loaded = mcp is not None
        self._mcp_lock = threading.Lock()

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

    @cached_property
    def server_facts(self) -> ServerFacts:
        """The model's context window that prompts are fitted to, and whether it writes its
        reasoning first (see :func:`sleuth.llm.factory.server_facts`); nothing known
        without a model."""
        from sleuth.llm.factory import ServerFacts, server_facts

        model = getattr(self.reasoner, "model", None)
        if model is None:
            return ServerFacts()
        if isinstance(getattr(model, "n_ctx", None), int):  # in process: its own window
            return ServerFacts(int(model.n_ctx))
        return server_facts(self.settings)

    @property
    def context_tokens(self) -> int | None:
        """The model's context window in tokens (``None``: no model, or unknown)."""
        return self.server_facts.context_tokens

    @property
    def mcp(self) -> MCPToolbox | None:
        """The tools of the MCP servers of ``settings.mcp_servers`` (``None``: none configured),
        created on first use.

        Raises:
            ConfigError: invalid ``SLEUTH_MCP_SERVERS``, or the ``mcp`` extra is missing.
        """
        with self._mcp_lock:
            if not self._mcp_loaded:
                if self.settings.mcp_servers:
                    from sleuth.mcp.client import MCPToolbox

                    self._mcp = MCPToolbox.from_settings(self.settings)
                self._mcp_loaded = True
            return self._mcp

    def close(self) -> None:
        """Close the MCP sessions (stdio servers are stopped), if any were opened."""
        with self._mcp_lock:
            toolbox, self._mcp, self._mcp_loaded = self._mcp, None, False
        if toolbox is not None:
            toolbox.close()

    def tool_registry(self, memory: bool = False, mcp: bool = True) -> ToolRegistry:
        """The tools offered to a run: the built-in knowledge-base tools, plus
        ``recall_similar`` (the user's past runs) when ``memory`` is true, plus, when ``mcp``
        is true, the tools of the reachable MCP servers (``<server>__<tool>``)."""
        tools: list[Tool] = list(build_rag_tools(self.kb))
        if memory:
            tools.extend(build_memory_tools(self.memory))
        if mcp and self.mcp is not None:
            tools.extend(self.mcp.tools())
        return ToolRegistry(tools)

    @cached_property
    def guided_runtime(self) -> GuidedRuntime:
        """The compiled guided graph (shared by all guided runs; thread-safe)."""
        return GuidedRuntime()

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
        use_memory: bool = True,
        strict_grounding: bool | None = None,
        thread_id: str | None = None,
    ) -> AgentSearchResponse:
        """Answer ``query`` from ``collection``.

        ``mode="react"`` runs the ReAct loop (the reasoner chooses tools until it answers);
        ``mode="guided"`` runs the constrained runtime (planner, CRAG evaluator, refinement,
        decomposition, compression on a fixed graph). Both use the same tools, events, answer
        schema and citation validation. Events are sent to ``sinks`` as they happen (the CLI
        trace, the SSE stream); exactly one terminal ``done`` or ``error`` event ends them.

        With memory on (``use_memory`` and ``settings.memory``), the user's similar past runs
        are recalled first (their task ids in ``trace["memory"]["recalled"]``), the run gets
        the ``recall_similar`` tool, and a ``completed`` or ``insufficient_context`` run is
        remembered for ``user_id`` afterwards. ``use_memory=False`` opts this request out:
        nothing recalled, no tool, nothing stored. Memory failures never fail the run:
        ``trace["memory"]`` = ``{"enabled", "recalled", "stored", "error"}``.

        Citations are checked sentence by sentence (retrieved in this run, and supported by
        the cited section: :mod:`sleuth.agents.support`); ``strict_grounding`` (default:
        ``settings.strict_grounding``) drops sentences left without a supporting citation.

        With a model, the answer's text is sent as ``answer_delta`` events while the model
        writes it; the ``answer`` event then carries the checked answer.

        ``thread_id`` makes the run a turn of that conversation thread (the user's own; its
        collection unless ``collection`` names the same one): the question is made
        standalone from the thread's last turns first (:mod:`sleuth.agents.followup`; the
        sections the previous turn cited are read first), and the question, its rewrite,
        the answer and its citations are stored as the thread's next turn
        (``trace["conversation"]``).

        Raises:
            UserError: an empty, wordless or too long question
                (:func:`~sleuth.types.question_problem`), unknown mode or unknown
                collection, a thread of another collection (before any event).
            NotFoundError: no such thread of this user.
        """
        problem = question_problem(query)
        if problem is not None:
            raise UserError(problem)
        if mode not in ("react", "guided"):
            raise UserError(f"unknown mode '{mode}': use 'react' or 'guided'")
        thread = self.thread(thread_id, user_id) if thread_id is not None else None
        if thread is not None:
            if collection is not None and collection != thread.collection:
                raise UserError(
                    f"thread '{thread.thread_id}' belongs to collection '{thread.collection}', "
                    f"not '{collection}'"
                )
            collection = thread.collection
        collection = collection or self.settings.default_collection
        self.kb.index(collection)  # unknown collection / model mismatch fail here, cleanly
        task_id = task_id or uuid.uuid4().hex
        emitter = EventEmitter(task_id, sinks)
        ctx = RunContext(
            collection=collection,
            user_id=user_id,
            scorer=self.kb.cross_encoder if self.kb.reranking else None,
        )
        started = time.perf_counter()
        deadline = time.monotonic() + (timeout_s or self.settings.run_timeout_s)
        model = getattr(self.reasoner, "model", None)
        notices: list[AgentStep] = []

        def notify(line: str) -> None:
            """A notice of the run's model calls: an observation step and event."""
            notices.append(AgentStep(step_type=AgentStepType.OBSERVE, content=line))
            emitter.emit(ObserveEvent(content=line))

        limits = RunLimits(
            deadline=deadline,
            context_tokens=self.context_tokens,
            reasoning_first=self.server_facts.reasoning_first,
            notify=notify,
            answer_delta=lambda text, stream: emitter.emit(
                AnswerDeltaEvent(delta=text, stream=stream)
            ),
        )
        question = query.strip()
        rewrite: Rewrite | None = None
        if thread is not None:
            with run_limits(limits):
                rewrite = self._standalone(question, thread, model, ctx)
            question = rewrite.question
            if rewrite.method != "none":
                how = "by the model" if rewrite.method == "model" else "earlier questions carried"
                emitter.emit(ObserveEvent(content=f"Follow-up made standalone ({how}): {question}"))
        ctx.profile = analyse_question(question)
        if rewrite is not None and rewrite.method == "context":
            # what the follow-up asks (its kind, its parts) is read from it alone: the carried
            # subject only widens what is searched
            asked = analyse_question(rewrite.original)
            ctx.profile = replace(
                ctx.profile,
                parts=asked.parts,
                multi_part=asked.multi_part,
                answer_kind=asked.answer_kind,
                hop=asked.hop,
            )
        if ctx.profile.named_documents:  # the answer must come from the document it names
            ctx.documents = [
                d.title or d.doc_id
                for d in self.kb.catalog.list_documents(collection)
                if d.status == "indexed"
            ]
        use_memory = use_memory and self.settings.memory
        # MCP tools: for a model choosing tools in the ReAct loop (the heuristic reasoner and
        # the guided runtime use the built-in tools only, so no server is contacted for them)
        use_mcp = mode == "react" and model is not None
        tools = self.tool_registry(memory=use_memory, mcp=use_mcp)
        memory, recalled = self._recall(question, collection, user_id, use_memory)
        checks = _Checks(
            SupportChecker(
                self.kb.embedder,
                stored=lambda ids: self.kb.chunk_vectors(collection, ids),
                cross_encoder=self.kb.cross_encoder,
                coverage_threshold=self.settings.coverage_threshold,
                coverage_judge=(
                    CoverageJudge(model)
                    if model is not None and self.settings.coverage_judge
                    else None
                ),
            ),
            self.settings.strict_grounding if strict_grounding is None else strict_grounding,
        )
        similar = [m.citations for m in recalled if _similar(question, m.question)]
        if rewrite is not None and rewrite.carried_citations:  # the previous turn's sections
            similar.insert(0, rewrite.carried_citations)
        recalled_citations = similar[0] if similar else []
        # a model request waiting out a 429 Retry-After (or a 5xx) says so in the trace;
        # every model call obeys the run's deadline and the model's window (sleuth.llm.calls)
        with (
            retry_notices(notify),
            run_limits(limits),
        ):
            if mode == "guided":
                outcome = self._run_guided(
                    question, ctx, tools, emitter, deadline, checks, recalled_citations
                )
            else:
                limit = max_iterations or self.settings.max_iterations
                outcome = self._run_react(
                    question, ctx, tools, emitter, deadline, limit, task_id, checks, similar
                )
        trace = outcome.trace
        trace.update(
            mode=mode,
            reasoner=self.reasoner.name,
            retrieved_source_ids=list(ctx.retrieved),
            token_usage=ctx.usage,
            token_usage_by_stage=ctx.usage_by_stage,
            error=outcome.error,
            memory=memory,
            context_tokens=limits.context_tokens,
            prompt_trims=list(limits.trims),
            deadline_cut_model_call=limits.cut,
            question_profile=ctx.profile.to_dict(),
        )
        if use_mcp and self.mcp is not None:  # servers, their tools, unreachable ones
            trace["mcp"] = self.mcp.status()
        trace.setdefault("timings_ms", {})["total"] = round(
            (time.perf_counter() - started) * 1e3, 1
        )
        response = AgentSearchResponse(  # secrets in quoted sections masked, as in events
            task_id=task_id,
            query=query,
            collection=collection,
            mode=mode,
            status=outcome.status,
            answer=capped(outcome.answer),
            # the run's notices (a trimmed prompt, a retried call) among its steps, in time
            reasoning_steps=sorted([*outcome.steps, *notices], key=lambda s: s.timestamp),
            tool_calls=trace.get("tool_trace", []),
            trace=trace,
        )
        response = masked(response)
        if thread is not None and rewrite is not None:
            self._add_turn(thread, rewrite, response)
        if use_memory and not outcome.error:
            self._remember(response, user_id, memory)
        self._store(response, user_id, emitter)
        if outcome.error:
            emitter.emit(ErrorEvent(message=outcome.error))
        else:
            emitter.emit(DoneEvent(status=outcome.status.value))
        return response

    def thread(self, thread_id: str, user_id: str | None) -> ThreadInfo:
        """The conversation thread ``thread_id`` of ``user_id``.

        Raises:
            NotFoundError: no such thread, or another user's (not told apart).
        """
        info = self.kb.catalog.get_thread(thread_id)
        if info is None or info.user_id != user_id:
            raise NotFoundError(f"thread '{thread_id}' not found")
        return info

    def _standalone(
        self, question: str, thread: ThreadInfo, model: Any, ctx: RunContext
    ) -> Rewrite:
        """``question`` made standalone from ``thread``'s last turns: by ``model`` when one is
        configured and ``settings.followup_rewrite`` is ``model`` (its tokens count under the
        ``followup`` stage), else by carrying the thread's questions."""
        s = self.settings
        turns = self.kb.catalog.thread_turns(thread.thread_id, last=s.thread_history_turns)
        history = [PriorTurn(t.question, tuple(t.citations)) for t in turns]
        return standalone_question(
            question,
            history,
            model if s.followup_rewrite == "model" else None,
            budget_tokens=s.thread_history_tokens,
            usage=lambda usage: ctx.add_usage(usage, stage="followup"),
        )

    def _add_turn(
        self, thread: ThreadInfo, rewrite: Rewrite, response: AgentSearchResponse
    ) -> None:
        """Store the run as ``thread``'s next turn and say so in its trace (never raises: a
        failed store is in ``trace["conversation"]["store_error"]``)."""
        info: dict[str, Any] = {"thread_id": thread.thread_id, **rewrite.to_dict()}
        response.trace["conversation"] = info
        try:
            turn = self.kb.catalog.add_turn(
                thread.thread_id,
                question=rewrite.original,
                rewritten_question=None if rewrite.method == "none" else rewrite.question,
                answer=response.answer.answer_text,
                citations=list(dict.fromkeys(c.source_id for c in response.answer.citations)),
                status=response.status.value,
                task_id=response.task_id,
                max_turns=self.settings.thread_max_turns,
            )
            info["turn"] = turn.position
        except Exception as exc:
            info["store_error"] = f"{type(exc).__name__}: {exc}"

    def _run_react(
        self,
        question: str,
        ctx: RunContext,
        tools: ToolRegistry,
        emitter: EventEmitter,
        deadline: float,
        limit: int,
        task_id: str,
        checks: _Checks,
        recalled: list[list[str]],
    ) -> _Outcome:
        model = getattr(self.reasoner, "model", None)  # LLMReasoner.model; None = heuristic
        s = self.settings
        runtime = RunRuntime(
            ctx=ctx,
            tools=tools,
            reasoner=self.reasoner,
            emitter=emitter,
            deadline=deadline,
            checker=checks.checker,
            strict_grounding=checks.strict_grounding,
            planner=PlanningAgent(model if _use_model(s.planner, ctx.profile) else None),
            critic_model=model if _use_model(s.reflection, ctx.profile) else None,
            reflection=s.reflection != "off",
            recalled=recalled,
        )
        state = AgentState(
            task_id=task_id,
            collection=ctx.collection,
            original_query=question,
            user_id=ctx.user_id,
            max_iterations=limit,
            available_tools=tools.names,
        )
        trace: dict[str, Any] = {"max_iterations": limit}
        try:
            final = self._graph.invoke(
                state,
                config={"configurable": {"runtime": runtime}, "recursion_limit": 8 * limit + 20},
            )
            outcome = _Outcome(
                answer=final["final_answer"], status=final["status"], steps=final["steps"]
            )
            trace["iterations"] = final["iteration_count"]
        except Exception as exc:  # every run ends with an answer and a status
            outcome = _failed(exc, emitter)
            trace["iterations"] = 0
        outcome.error = outcome.error or runtime.error
        trace.update(
            planner_runtime="llm"
            if model is not None and _use_model(s.planner, ctx.profile)
            else "heuristic",
            planner_run_id=uuid.uuid4().hex,
            planner_path=list(runtime.path),
            output_validation_retries=dict(runtime.retries),
            agentic={
                "crag": [],
                "complementary": [],
                "compression": {"applied": False},
                "planning": {
                    **runtime.planning,
                    "path": "heuristic"
                    if runtime.planner is not None and runtime.planner.model is None
                    else runtime.planning.get("path"),
                },
                "reflection": list(runtime.reflections),
            },
            tool_trace=runtime.tool_trace,
            citations_removed=[r.model_dump() for r in runtime.removed_citations],
            timings_ms={k: round(v, 1) for k, v in runtime.stage_ms.items()},
        )
        trace.update(runtime.citation_trace)
        outcome.trace = trace
        return outcome

    def _run_guided(
        self,
        question: str,
        ctx: RunContext,
        tools: ToolRegistry,
        emitter: EventEmitter,
        deadline: float,
        checks: _Checks,
        recalled: list[str],
    ) -> _Outcome:
        model = getattr(self.reasoner, "model", None)  # LLMReasoner.model; None = heuristic
        result = self.guided_runtime.run(
            question,
            ctx,
            tools,
            emitter,
            model,
            deadline=deadline,
            max_refinements=self.settings.max_refinements,
            checker=checks.checker,
            strict_grounding=checks.strict_grounding,
            recalled=recalled,
            llm_agents=self.settings.guided_llm_agents,
        )
        trace = {**result.trace, "iterations": len(result.trace["agentic"]["crag"])}
        return _Outcome(
            answer=result.answer,
            status=result.status,
            steps=result.steps,
            trace=trace,
            error=result.error,
        )

    def _recall(
        self, question: str, collection: str, user_id: str | None, enabled: bool
    ) -> tuple[dict[str, Any], list[Memory]]:
        """Recall the user's similar past runs (for the planner); never raises."""
        info: dict[str, Any] = {"enabled": enabled, "recalled": [], "stored": False, "error": None}
        recalled: list[Memory] = []
        if enabled:
            try:
                recalled = self.memory.recall_similar(user_id, question, 3, collection=collection)
                info["recalled"] = [m.task_id for m in recalled]
            except Exception as exc:
                info["error"] = f"recall: {type(exc).__name__}: {exc}"
        return info, recalled

    def _remember(
        self, response: AgentSearchResponse, user_id: str | None, info: dict[str, Any]
    ) -> None:
        """Store the run in the user's memory (if its status is remembered); never raises."""
        try:
            crag = (response.trace.get("agentic") or {}).get("crag") or []
            verdicts = [str(c["verdict"]) for c in crag if isinstance(c, dict) and c.get("verdict")]
            stored = self.memory.remember(
                user_id,
                response.query,
                response.answer,
                response.status,
                response.task_id,
                verdicts,
                collection=response.collection,
            )
            info["stored"] = stored is not None
        except Exception as exc:
            error = f"remember: {type(exc).__name__}: {exc}"
            info["error"] = f"{info['error']}; {error}" if info["error"] else error

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


def _use_model(policy: str, profile: QuestionProfile) -> bool:
    """Whether a ReAct agent set to ``policy`` (``llm``, ``auto``, ``heuristic``, ``off``)
    asks the model for the question ``profile`` reads: ``auto`` only when it asks several
    things (``multi_part``), where a plan or a critique can change what is searched."""
    if policy == "llm":
        return True
    return policy == "auto" and profile.multi_part
