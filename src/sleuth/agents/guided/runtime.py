"""The guided runtime: narrow typed agents on an explicit LangGraph ``StateGraph``.

Instead of one open ReAct loop, a fixed control graph calls small agents with typed outputs
(:mod:`sleuth.agents.guided.agents`) and runs the knowledge-base tools itself::

    START ─┬─ route ─┐                       (router + optional intent parser)
           └─ plan ──┴─ decide ─┬─ skip ─────────────────────────────────────┐
                                ├─ decompose ─┐                              │
                                └─────────────┴─ retrieve ⇄ evaluate ⇄ refine │
                                                   (per sub-question)        │
                                  evaluate ─ enrich ─ [compress] ─ generate ─┴─ finalize ─ END

* ``route`` ∥ ``plan`` run concurrently (parallel branches of one superstep);
* ``skip``: the plan's ``clarify`` / ``hard_block`` / ``llm_only`` answers without retrieval;
* ``retrieve``: ``rag_search`` with the plan's primary query (the router's normalized query
  when the plan passes the question through) and, once, the complementary queries; then
  ``follow_references`` of the best hits that cite or name other sections (graph expansion:
  the second hop of a multi-hop question);
* ``evaluate``: the CRAG evaluator (Yan et al. 2024, "Corrective Retrieval Augmented
  Generation", arXiv:2401.15884) grades the evidence; on PARTIAL / INSUFFICIENT ``refine``
  follows the links of the best sections not yet followed or, when there are none, rewrites
  the query from the gap hint and retrieval runs again, at most ``max_refinements`` rounds
  per (sub-)question;
* ``decompose`` (when the plan flags a multi-part question): each sub-question is retrieved,
  evaluated and refined on its own; the generator cites across them;
* ``enrich``: ``read_section`` of the top 2 sections per (sub-)question, ``follow_references``
  of the top sections when the route's ``graph_hint`` is set, ``outline`` for document
  granularity;
* ``compress`` when the evidence exceeds the token budget; ``generate`` writes a structured
  :class:`~sleuth.agents.answer.AnswerDraft` (model) or the extractive
  :func:`~sleuth.agents.heuristic.compose_answer` (no model); ``finalize`` validates the
  citations and emits the one ``answer`` event.

Every agent decision is a ``think`` event (e.g. ``CRAG verdict: PARTIAL — missing: arson``),
every tool call a ``tool_call`` / ``tool_result`` pair: the same event and step vocabulary as
the ReAct mode, and the same answer schema and citation rules.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from langchain_core.messages import AIMessage, HumanMessage, SystemMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel, Field

from sleuth.agents.answer import AnswerDraft, GeneratedAnswer, closest_found
from sleuth.agents.chained import (
    HOP_SECTIONS,
    Hop,
    answer_in_hops,
    chained_draft,
    read_hop,
)
from sleuth.agents.citations import RemovedCitation, clean_answer_text
from sleuth.agents.coverage import JUDGED_SECTIONS
from sleuth.agents.events import (
    AnswerEvent,
    EventEmitter,
    ObserveEvent,
    ThinkEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from sleuth.agents.finish import RECITE_THRESHOLD, finish_answer, sections_relevance
from sleuth.agents.generation import (
    GENERATION_SECTIONS,
    SHORT_FORM_KINDS,
    EvidenceSection,
    evidence_section,
    explained_draft,
    focused_evidence,
    generate_draft,
    generation_messages,
    read_answer_reply,
)
from sleuth.agents.guided.agents import (
    approx_tokens,
    compress_evidence,
    decompose_question,
    evaluate_evidence,
    heuristic_compression,
    heuristic_plan,
    heuristic_route,
    heuristic_verdict,
    parse_intent,
    plan_question,
    planner_needed,
    refine_query,
    top_k_for,
)
from sleuth.agents.guided.schemas import CragVerdict, IntentParse, Plan, Verdict
from sleuth.agents.heuristic import (
    compose_answer,
    compose_parts,
    named_sections,
    rank_sections,
    section_relevance,
    set_aside,
    with_bridges,
)
from sleuth.agents.multihop import MAX_DEPTH, hop_starts
from sleuth.agents.profile import profile_of
from sleuth.agents.question import in_context
from sleuth.agents.quotes import QUOTES, answering_quotes, quoted_draft
from sleuth.agents.state import AgentStep, AgentStepType, RunStatus
from sleuth.agents.structured import StructuredResult
from sleuth.agents.support import CROSS_ENCODER_THRESHOLD, SupportChecker
from sleuth.errors import ConfigError, ContextWindowExceeded, ToolError, describe_failure
from sleuth.llm import calls
from sleuth.llm.toolcalls import content_parts
from sleuth.prompts import load_prompt
from sleuth.retrieval.rerank import sigmoid
from sleuth.retrieval.text import novel_query, terms
from sleuth.tools.base import RunContext, ToolRegistry, ToolResult

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

LLMAgents = Literal["auto", "all"]
"""Which guided agents ask the model: ``all`` of them, or (``auto``) only where the
heuristic is unsure — the planner for messages that may not be questions, decomposition, the
generator; the CRAG evaluator, refinement, the intent parser and compression stay heuristic
(measured with Qwen2.5-Coder-1.5B on 2 CPU cores: a model CRAG round costs 25-30 s and ~2,000
prompt tokens and did not find more gold than the coverage verdict)."""

DEFAULT_MAX_REFINEMENTS = 2
DEFAULT_TOKEN_BUDGET = 1500
"""Approximate tokens of evidence handed to the generator before compression kicks in."""
MIN_INTENT_CONFIDENCE = 0.5
"""An LLM intent parse below this confidence is replaced by the heuristic router's."""
READ_PER_TARGET = 2
MAX_READS = 4
MAX_FOLLOWS = 2
MAX_GENERATION_SECTIONS = 8
PREVIEW_CHARS = 300


class GuidedResult(BaseModel):
    """What one guided run produced.

    Attributes:
        answer: the citation-checked answer (always present).
        status: why the run ended (``completed``, ``insufficient_context``, ``timeout``,
            ``error``).
        steps: the run's steps (observe / think / act / final), in order.
        removed_citations: cited ids dropped because they were not retrieved in the run.
        trace: run metadata: ``planner_runtime``, ``planner_run_id``, ``planner_path``,
            ``tool_trace``, ``output_validation_retries``, ``agentic`` (``crag``,
            ``complementary``, ``compression``, ``decomposition``, ``chain``: the chained
            sub-questions, each with its answer and sections), ``timings_ms``, plus
            ``route``, ``plan``, ``agents``, ``retrieved_source_ids``, ``token_usage``,
            ``citations_removed``, ``error``.
        error: ``"Type: message"`` when the graph itself failed (status ``error``).
    """

    answer: GeneratedAnswer
    status: RunStatus
    steps: list[AgentStep] = Field(default_factory=list)
    removed_citations: list[RemovedCitation] = Field(default_factory=list)
    trace: dict[str, Any] = Field(default_factory=dict)
    error: str | None = None

    @property
    def tool_calls(self) -> list[dict[str, Any]]:
        """The tool trace: ``{tool, arguments, ok, status, duration_ms}`` per call."""
        return list(self.trace.get("tool_trace", []))


@dataclass
class GuidedState:
    """The graph state: the decisions of the agents and the loop position."""

    question: str
    route: IntentParse | None = None
    plan: Plan | None = None
    targets: list[str] = field(default_factory=list)
    target_index: int = 0
    round: int = 0
    query: str = ""
    verdicts: list[CragVerdict | None] = field(default_factory=list)
    evidence: list[EvidenceSection] = field(default_factory=list)
    draft: AnswerDraft | None = None
    stop_status: RunStatus | None = None
    next_step: str = ""
    final_answer: GeneratedAnswer | None = None
    status: RunStatus | None = None


@dataclass
class _Run:
    """Per-run collaborators and records, handed to the nodes through the run config."""

    question: str
    ctx: RunContext
    tools: ToolRegistry
    emitter: EventEmitter
    model: BaseChatModel | None
    deadline: float | None
    max_refinements: int
    max_retries: int
    token_budget: int
    use_intent_parser: bool
    checker: SupportChecker | None = None
    strict_grounding: bool = False
    recalled: list[str] = field(default_factory=list)
    steps: list[AgentStep] = field(default_factory=list)
    path: list[str] = field(default_factory=list)
    tool_trace: list[dict[str, Any]] = field(default_factory=list)
    removed: list[RemovedCitation] = field(default_factory=list)
    citation_trace: dict[str, Any] = field(default_factory=dict)
    stage_ms: dict[str, float] = field(default_factory=dict)
    retries: dict[str, int] = field(default_factory=dict)
    agent_calls: list[dict[str, Any]] = field(default_factory=list)
    crag: list[dict[str, Any]] = field(default_factory=list)
    complementary: list[str] = field(default_factory=list)
    complementary_done: bool = False
    chain: list[dict[str, Any]] = field(default_factory=list)
    """The chained sub-questions asked (:func:`_chained`): question, answer, source_ids."""
    compression: dict[str, Any] = field(
        default_factory=lambda: {"applied": False, "tokens_before": 0, "tokens_after": 0}
    )
    decomposition: dict[str, Any] = field(
        default_factory=lambda: {
            "applied": False,
            "sub_questions": [],
            "synthesis_hint": "",
            "path": None,
        }
    )
    route_source: str = "heuristic_router"
    target_sources: dict[int, list[str]] = field(default_factory=dict)
    shared_sources: list[str] = field(default_factory=list)
    refinements: int = 0
    decisions: int = 0
    calls: int = 0
    results: dict[str, StructuredResult[Any]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)
    llm_agents: LLMAgents = "auto"
    generation: tuple[str, list[EvidenceSection], list[str]] | None = None
    overall: Verdict | None = None
    """The evidence's verdict for the whole question, decided once (:func:`_overall`)."""
    quotable: bool = True
    """Whether the extractive reader would answer this run (what :func:`_overall` decides
    without a model): its quotes then stand in for a model answer the finish checks
    decline."""

    # ------------------------------------------------------------ records

    def timed(self, stage: str, started: float) -> None:
        with self.lock:
            ms = (time.perf_counter() - started) * 1e3
            self.stage_ms[stage] = self.stage_ms.get(stage, 0.0) + ms

    def expired(self) -> bool:
        return self.deadline is not None and time.monotonic() > self.deadline

    def record(self, agent: str, result: StructuredResult[Any]) -> None:
        """Note an agent call: its path, retries and errors (thread-safe)."""
        with self.lock:
            self.retries[agent] = self.retries.get(agent, 0) + result.retries
            self.agent_calls.append(
                {
                    "agent": agent,
                    "path": result.path,
                    "retries": result.retries,
                    "errors": list(result.errors),
                }
            )
            self.results[agent] = result

    def think(
        self, content: str, agent: str | None = None, result: StructuredResult[Any] | None = None
    ) -> None:
        """Emit a ``think`` event and record the matching THINK step."""
        reasoning = None
        if agent is not None:
            reasoning = f"agent={agent}"
            if result is not None:
                reasoning += f"; path={result.path}; retries={result.retries}"
                if result.errors:
                    reasoning += "; errors: " + " | ".join(e[:200] for e in result.errors)
        self.emitter.emit(ThinkEvent(content=content, iteration=self.decisions))
        self.decisions += 1
        self.steps.append(
            AgentStep(step_type=AgentStepType.THINK, content=content, reasoning=reasoning)
        )

    def observe(self, content: str) -> None:
        self.emitter.emit(ObserveEvent(content=content))
        self.steps.append(AgentStep(step_type=AgentStepType.OBSERVE, content=content))

    def call_tool(self, name: str, arguments: dict[str, Any]) -> ToolResult:
        """Run one tool with the run's context, emitting ``tool_call`` / ``tool_result``.

        Tool errors become a failed :class:`ToolResult`; a :class:`~sleuth.errors.ConfigError`
        (an index built with another embedding model …), which no other call can get past,
        is raised: the run ends ``error`` with its message.
        """
        self.calls += 1
        call_id = f"g{self.calls}"
        self.emitter.emit(ToolCallEvent(call_id=call_id, tool=name, arguments=arguments))
        started = time.perf_counter()
        tool = self.tools.get(name)
        if tool is None:
            result = ToolResult(ok=False, status=f"Error: unknown tool '{name}'")
        else:
            try:
                result = tool.invoke(arguments, self.ctx)
            except ToolError as exc:
                result = ToolResult(ok=False, status=f"Error: {exc}")
            except ConfigError:
                raise
            except Exception as exc:
                result = ToolResult(
                    ok=False, status=f"Error: {name} failed: {type(exc).__name__}: {exc}"
                )
        ms = round((time.perf_counter() - started) * 1e3, 2)
        body = json.dumps(result.payload, ensure_ascii=False)
        preview = body if len(body) <= PREVIEW_CHARS else body[: PREVIEW_CHARS - 1] + "…"
        self.emitter.emit(
            ToolResultEvent(
                call_id=call_id,
                tool=name,
                ok=result.ok,
                status=result.status,
                preview=preview,
                payload=result.payload,
                duration_ms=ms,
            )
        )
        self.tool_trace.append(
            {
                "tool": name,
                "arguments": arguments,
                "ok": result.ok,
                "status": result.status,
                "duration_ms": ms,
            }
        )
        return result

    def act_step(self, calls: list[tuple[str, dict[str, Any], ToolResult]]) -> None:
        """Record an ACT step for a batch of tool calls and observe their status lines."""
        self.steps.append(
            AgentStep(
                step_type=AgentStepType.ACT,
                content="Executed: " + ", ".join(name for name, _, _ in calls),
                tool_calls=[{"name": n, "arguments": a} for n, a, _ in calls],
                tool_results=[{"tool": n, "ok": r.ok, "status": r.status} for n, _, r in calls],
            )
        )
        self.observe("Observed: " + " | ".join(r.status for _, _, r in calls))

    # ------------------------------------------------------------ evidence

    def section(self, source_id: str) -> EvidenceSection:
        return evidence_section(source_id, self.ctx)

    def ranked(self, question: str, among: list[str] | None = None) -> list[str]:
        """Retrieved source_ids ranked for ``question`` (optionally only those in ``among``)."""
        ranked = [sid for sid, _ in rank_sections(question, self.ctx)]
        if among is None:
            return ranked
        keep = set(among)
        return [sid for sid in ranked if sid in keep]

    def target_evidence(self, index: int, question: str) -> list[EvidenceSection]:
        """The sections a (sub-)question's searches (and the complementary ones) surfaced."""
        among = [*self.target_sources.get(index, []), *self.shared_sources]
        return [self.section(sid) for sid in self.ranked(question, among)]

    def usage_for(self, agent: str) -> Callable[[dict[str, int]], None]:
        """A token sink for one agent: counted in the run's total and under ``agent``."""

        def add(usage: dict[str, int]) -> None:
            self.ctx.add_usage(usage, stage=agent)

        return add


def _rt(config: RunnableConfig) -> _Run:
    return config["configurable"]["guided_run"]


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _query_for(question: str) -> str:
    """The router's normalized search query for a (sub-)question."""
    return heuristic_route(question).normalized_query


def _aggregate(verdicts: list[CragVerdict | None]) -> Verdict:
    """All SUFFICIENT → SUFFICIENT, all INSUFFICIENT → INSUFFICIENT, else PARTIAL."""
    names = [v.verdict if v is not None else "PARTIAL" for v in verdicts]
    if names and all(n == "SUFFICIENT" for n in names):
        return "SUFFICIENT"
    if names and all(n == "INSUFFICIENT" for n in names):
        return "INSUFFICIENT"
    return "PARTIAL"


def _overall(rt: _Run, state: GuidedState) -> Verdict:
    """The evidence's verdict on the whole question, once per run.

    The evaluators' aggregate, except that an INSUFFICIENT reached by the word-coverage
    heuristic (the evaluator without a model, or under ``llm_agents="auto"``) is not trusted
    to decline unread when a cross-encoder can read: a paraphrased question ("too drunk to
    know what he was doing") shares few words with the section that answers it. The
    cross-encoder then reads the top :data:`MAX_READS` sections sentence by sentence
    (:func:`~sleuth.agents.finish.sections_relevance`); at or above the coverage threshold
    (``SLEUTH_COVERAGE_THRESHOLD``, the same one the finished answer is held to,
    :func:`~sleuth.agents.finish.off_topic`) the verdict becomes PARTIAL and the model reads
    the evidence. Without a model the quotes the cross-encoder picks are the answer, and no
    model reads them before they ship: the sentence must reach the cross-encoder's own
    decision boundary (:data:`~sleuth.agents.finish.RECITE_THRESHOLD`, probability 0.5)
    as well. Below, with a model, the model itself judges the first sections
    (:class:`~sleuth.agents.coverage.CoverageJudge`, when the checker has one): the
    cross-encoder misreads plainly worded questions. Else the run declines as before.
    (Judged statute set, dev split, no model: at the coverage threshold alone, three of
    eight out-of-scope questions were answered with quotes of loosely related provisions.)
    """
    if rt.overall is not None:
        return rt.overall
    overall = _aggregate(state.verdicts) if state.verdicts else "PARTIAL"
    checker = rt.checker
    heuristic = not any(c.get("path") in ("llm", "llm_after_retry") for c in rt.crag)
    rt.quotable = overall != "INSUFFICIENT"
    if (
        overall == "INSUFFICIENT"
        and heuristic
        and checker is not None
        and checker.cross_encoder is not None
        and checker.coverage_threshold > 0
    ):
        top = rt.ranked(state.question)[:MAX_READS]
        score = sections_relevance(state.question, top, rt.ctx, checker.cross_encoder)
        # without a model the quotes are the answer: the cross-encoder must itself call a
        # sentence relevant (its decision boundary), not merely not unrelated
        quoting = max(checker.coverage_threshold, RECITE_THRESHOLD)
        rt.quotable = score is not None and score >= quoting
        least = checker.coverage_threshold if rt.model is not None else quoting
        if score is not None and score >= least:
            overall = "PARTIAL"
            rt.think(
                "The word-coverage verdict is INSUFFICIENT, but the cross-encoder finds a "
                f"sentence of {', '.join(top)} relevant to the question ({score:.3f} ≥ "
                f"{least}): "
                + ("the model reads" if rt.model is not None else "answering from")
                + " the evidence.",
                agent="crag_evaluator",
            )
        elif rt.model is not None and checker.coverage_judge is not None:
            judge = checker.coverage_judge
            odds = judge.log_odds(state.question, top, rt.ctx, checker.cross_encoder)
            if odds is not None and odds >= judge.threshold:
                overall = "PARTIAL"
                rt.think(
                    "The word-coverage verdict is INSUFFICIENT and the cross-encoder finds "
                    "no sentence relevant, but the model judges a section of "
                    f"{', '.join(top[:JUDGED_SECTIONS])} about the question (log-odds "
                    f"{odds:.2f} ≥ {judge.threshold}): the model reads the evidence.",
                    agent="crag_evaluator",
                )
    rt.overall = overall
    return overall


def _timeout(rt: _Run, stage: str) -> dict[str, Any]:
    rt.think(f"Stopping before {stage}: timeout; answering from the evidence so far.")
    return {"stop_status": RunStatus.TIMEOUT, "next_step": "generate"}


# ---------------------------------------------------------------- nodes


def route(state: GuidedState, config: RunnableConfig) -> dict[str, Any]:
    """Heuristic router, then (with a model) the intent parser; the router is its fallback."""
    rt = _rt(config)
    started = time.perf_counter()
    heuristic = heuristic_route(state.question)
    chosen = heuristic
    if rt.model is not None and rt.use_intent_parser and rt.llm_agents == "all":
        result = parse_intent(
            state.question,
            rt.model,
            collection=rt.ctx.collection,
            max_retries=rt.max_retries,
            usage=rt.usage_for("intent_parser"),
        )
        rt.record("intent_parser", result)
        if result.from_model and result.value.confidence >= MIN_INTENT_CONFIDENCE:
            chosen = result.value
            rt.route_source = "intent_parser"
    rt.timed("route", started)
    return {"route": chosen}


def plan(state: GuidedState, config: RunnableConfig) -> dict[str, Any]:
    """The planner agent (pass-through plan without a model)."""
    rt = _rt(config)
    started = time.perf_counter()
    if rt.model is not None and rt.llm_agents == "auto" and not planner_needed(state.question):
        result = StructuredResult(value=heuristic_plan(state.question), path="heuristic")
    else:
        result = plan_question(
            state.question,
            rt.model,
            collection=rt.ctx.collection,
            max_retries=rt.max_retries,
            usage=rt.usage_for("planner"),
        )
    rt.record("planner", result)
    rt.timed("plan", started)
    return {"plan": result.value}


def decide(state: GuidedState, config: RunnableConfig) -> dict[str, Any]:
    """Join of route ∥ plan: report both decisions, then skip, decompose or retrieve."""
    rt = _rt(config)
    started = time.perf_counter()
    rt.path.extend(["route", "plan", "decide"])
    assert state.route is not None and state.plan is not None
    r, p = state.route, state.plan
    rt.think(
        f"Route ({rt.route_source.replace('_', ' ')}): profile {r.retrieval_profile}, "
        f"granularity {r.granularity}, follow references: {'yes' if r.graph_hint else 'no'}, "
        f"query '{r.normalized_query}' (confidence {r.confidence:.2f}).",
        agent="intent_parser" if "intent_parser" in rt.results else "router",
        result=rt.results.get("intent_parser"),
    )
    extra = (
        f"; complementary: {', '.join(repr(q) for q in p.complementary_queries)}"
        if p.complementary_queries
        else ""
    )
    rt.think(
        f"Plan: {p.intent_class}, retrieval "
        f"{'skipped (' + p.skip_retrieval + ')' if p.skip_retrieval != 'none' else 'needed'}, "
        f"primary query '{p.primary_query}', multi-part: {'yes' if p.is_multi_part else 'no'}, "
        f"strict grounding: {'yes' if p.strict_grounding else 'no'}{extra}.",
        agent="planner",
        result=rt.results.get("planner"),
    )
    update: dict[str, Any]
    if p.skip_retrieval != "none":
        update = {"next_step": "skip"}
    elif p.is_multi_part:
        update = {"next_step": "decompose"}
    else:
        # a pass-through plan leaves the query to the router's normalization
        query = (
            r.normalized_query
            if _norm(p.primary_query) == _norm(state.question)
            else (p.primary_query)
        )
        update = {
            "next_step": "retrieve",
            "targets": [state.question],
            "verdicts": [None],
            "query": query,
        }
    rt.timed("decide", started)
    return update


def skip(state: GuidedState, config: RunnableConfig) -> dict[str, Any]:
    """Answer without retrieval: clarify, hard block, or a conversational reply."""
    rt = _rt(config)
    started = time.perf_counter()
    rt.path.append("skip")
    assert state.plan is not None
    mode = state.plan.skip_retrieval
    if mode == "clarify":
        draft = AnswerDraft(answer_text=state.plan.clarification, is_insufficient_context=True)
    elif mode == "hard_block":
        draft = AnswerDraft(
            answer_text="I can't help with this request.", is_insufficient_context=True
        )
    else:
        text = ""
        if rt.model is not None:
            try:
                reply = calls.invoke(
                    rt.model,
                    [SystemMessage(load_prompt("guided_direct")), HumanMessage(state.question)],
                    stream_answer=True,
                )
                rt.usage_for("direct")(dict(getattr(reply, "usage_metadata", None) or {}))
                visible, _ = content_parts(reply.content, getattr(reply, "additional_kwargs", None))
                text = clean_answer_text(visible)
            except ContextWindowExceeded:
                raise
            except Exception as exc:
                rt.think(f"The direct reply failed ({type(exc).__name__}); using a canned one.")
        draft = AnswerDraft(
            answer_text=text
            or f"Hello! Ask me a question about the collection '{rt.ctx.collection}'."
        )
    rt.think(f"No retrieval ({mode}): answering directly.", agent="planner")
    rt.timed("skip", started)
    return {"draft": draft}


def decompose(state: GuidedState, config: RunnableConfig) -> dict[str, Any]:
    """Split a multi-part question; each sub-question is then retrieved on its own."""
    rt = _rt(config)
    started = time.perf_counter()
    rt.path.append("decompose")
    assert state.plan is not None and state.route is not None
    result = decompose_question(
        state.question, rt.model, max_retries=rt.max_retries, usage=rt.usage_for("decomposition")
    )
    rt.record("decomposition", result)
    subs = in_context(state.question, result.value.sub_questions)
    rt.decomposition = {
        "applied": len(subs) >= 2,
        "sub_questions": list(subs),
        "synthesis_hint": result.value.synthesis_hint,
        "path": result.path,
    }
    if len(subs) >= 2:
        listing = " ".join(f"({i}) {q}" for i, q in enumerate(subs, 1))
        rt.think(f"Decomposition: {len(subs)} sub-questions: {listing}", "decomposition", result)
        targets, query = list(subs), _query_for(subs[0])
    else:
        rt.think(
            "Decomposition: no usable split; retrieving the question whole.",
            "decomposition",
            result,
        )
        targets = [state.question]
        p = state.plan
        query = (
            state.route.normalized_query
            if _norm(p.primary_query) == _norm(state.question)
            else p.primary_query
        )
    rt.timed("decompose", started)
    return {
        "next_step": "retrieve",
        "targets": targets,
        "verdicts": [None] * len(targets),
        "target_index": 0,
        "round": 0,
        "query": query,
    }


def retrieve(state: GuidedState, config: RunnableConfig) -> dict[str, Any]:
    """``rag_search`` the current query (and, once per run, the complementary queries)."""
    rt = _rt(config)
    rt.path.append("retrieve")
    if rt.expired():
        return _timeout(rt, "retrieval")
    started = time.perf_counter()
    assert state.route is not None and state.plan is not None
    top_k = top_k_for(state.route.retrieval_profile)
    calls: list[tuple[str, dict[str, Any], ToolResult]] = []
    args = {"query": state.query, "top_k": top_k}
    result = rt.call_tool("rag_search", args)
    calls.append(("rag_search", args, result))
    sources = rt.target_sources.setdefault(state.target_index, [])
    sources.extend(dict.fromkeys(c.source_id for c in result.chunks if c.source_id not in sources))
    # graph expansion: the sections the best hits cite or name join the evidence before it is
    # judged (the second hop of a multi-hop question is usually one of them)
    target = state.targets[state.target_index]
    for sid in _unfollowed_links(rt, state.target_index, target):
        link_args = {"source_id": sid}
        linked = rt.call_tool("follow_references", link_args)
        calls.append(("follow_references", link_args, linked))
        sources.extend(
            dict.fromkeys(c.source_id for c in linked.chunks if c.source_id not in sources)
        )
    if state.round == 0 and "next_hop" in rt.tools:
        # the chain of a multi-hop question: from the sections the (sub-)question names,
        # search the entities they name with what it still asks (IRCoT-style, no model)
        for _ in range(MAX_DEPTH):
            starts = hop_starts(target, rt.ctx, sources)
            for sid in starts:
                hop_args = {"question": target, "source_id": sid}
                hopped = rt.call_tool("next_hop", hop_args)
                calls.append(("next_hop", hop_args, hopped))
                sources.extend(
                    dict.fromkeys(c.source_id for c in hopped.chunks if c.source_id not in sources)
                )
            if not starts:
                break
    if not rt.complementary_done:
        rt.complementary_done = True
        for query in state.plan.complementary_queries:
            extra_args = {"query": query, "top_k": top_k}
            extra = rt.call_tool("rag_search", extra_args)
            calls.append(("rag_search", extra_args, extra))
            rt.complementary.append(query)
            rt.shared_sources.extend(
                c.source_id for c in extra.chunks if c.source_id not in rt.shared_sources
            )
    rt.act_step(calls)
    rt.timed("retrieve", started)
    return {"next_step": "evaluate"}


def _advance(state: GuidedState) -> dict[str, Any]:
    """After a (sub-)question is done: the next sub-question, else enrichment."""
    nxt = state.target_index + 1
    if nxt < len(state.targets):
        return {
            "next_step": "retrieve",
            "target_index": nxt,
            "round": 0,
            "query": _query_for(state.targets[nxt]),
        }
    return {"next_step": "enrich"}


def evaluate(state: GuidedState, config: RunnableConfig) -> dict[str, Any]:
    """The CRAG evaluator on the current (sub-)question's evidence; refine or move on."""
    rt = _rt(config)
    rt.path.append("evaluate")
    if rt.expired():
        return _timeout(rt, "evaluation")
    started = time.perf_counter()
    index = state.target_index
    target = state.targets[index]
    evidence = rt.target_evidence(index, target)
    coverage = heuristic_verdict(target, evidence)
    if rt.model is not None and rt.llm_agents == "auto":
        result = StructuredResult(value=coverage, path="heuristic")
    else:
        result = evaluate_evidence(
            target,
            evidence,
            rt.model,
            max_retries=rt.max_retries,
            usage=rt.usage_for("crag_evaluator"),
        )
    rt.record("crag_evaluator", result)
    verdict = result.value
    rt.crag.append(
        {
            "round": state.round,
            "verdict": verdict.verdict,
            "missing_information": verdict.missing_information,
            "query": state.query,
            "question": target,
            "rationale": verdict.rationale,
            "path": result.path,
            "evidence_source_ids": [e.source_id for e in evidence],
        }
    )
    verdicts = list(state.verdicts) or [None] * len(state.targets)
    verdicts[index] = verdict
    about = f" for '{target}'" if len(state.targets) > 1 else ""
    detail = (
        f"missing: {verdict.missing_information}"
        if verdict.verdict != "SUFFICIENT"
        else verdict.rationale or "the evidence answers the question"
    )
    note = ""
    update: dict[str, Any] = {"verdicts": verdicts}
    if verdict.verdict != "SUFFICIENT" and state.round < rt.max_refinements:
        update["next_step"] = "refine"
        note = " I will refine the query."
    else:
        if verdict.verdict != "SUFFICIENT":
            note = f" Refinement budget spent ({state.round}/{rt.max_refinements}); moving on."
        update.update(_advance(state))
    rt.think(
        f"CRAG verdict{about}: {verdict.verdict} — {detail} "
        f"(round {state.round}, query '{state.query}').{note}",
        "crag_evaluator",
        result,
    )
    rt.timed("evaluate", started)
    return update


def refine(state: GuidedState, config: RunnableConfig) -> dict[str, Any]:
    """The refinement agent: a new query from the evaluator's gap hint."""
    rt = _rt(config)
    rt.path.append("refine")
    if rt.expired():
        return _timeout(rt, "refinement")
    started = time.perf_counter()
    verdict = state.verdicts[state.target_index]
    assert verdict is not None
    target = state.targets[state.target_index]
    linked = _unfollowed_links(rt, state.target_index, target)
    if linked:
        # corrective action without a new query: the gap may be in the sections the best
        # ones name (the bridge of a multi-hop question), so follow their links first
        rt.refinements += 1
        rt.think(
            f"Refinement (round {state.round + 1}): following the links of "
            f"{', '.join(linked)} — what is missing ({verdict.missing_information}) may be in "
            "the sections they cite or name.",
            agent="refinement",
        )
        calls = []
        sources = rt.target_sources.setdefault(state.target_index, [])
        for sid in linked:
            args = {"source_id": sid}
            result_ = rt.call_tool("follow_references", args)
            calls.append(("follow_references", args, result_))
            sources.extend(
                dict.fromkeys(c.source_id for c in result_.chunks if c.source_id not in sources)
            )
        rt.act_step(calls)
        rt.timed("refine", started)
        return {"next_step": "evaluate", "round": state.round + 1}
    judged = rt.results.get("crag_evaluator")
    by_model = rt.llm_agents == "all" or (judged is not None and judged.from_model)
    among = [*rt.target_sources.get(state.target_index, []), *rt.shared_sources]
    titles = [
        rt.section(sid).title.split(" > ")[-1] for sid in rt.ranked(target, among)[:READ_PER_TARGET]
    ]
    result = refine_query(
        target,
        verdict,
        list(rt.ctx.searches),
        rt.model if by_model else None,
        max_retries=rt.max_retries,
        usage=rt.usage_for("refinement"),
        found=titles,
    )
    rt.record("refinement", result)
    query = result.value.refined_query
    if not novel_query(query, rt.ctx.searches):
        rt.think(
            f"Refinement: '{query}' would find nothing new (a repeat or part of an earlier "
            "search, or fewer than two key words); moving on.",
            "refinement",
            result,
        )
        update = _advance(state)
    else:
        rt.refinements += 1
        rt.think(
            f"Refinement (round {state.round + 1}): searching '{query}' — "
            f"{result.value.rationale or 'targets the missing information'}",
            "refinement",
            result,
        )
        update = {"next_step": "retrieve", "query": query, "round": state.round + 1}
    rt.timed("refine", started)
    return update


def _unfollowed_links(rt: _Run, index: int, target: str) -> list[str]:
    """The (sub-)question's top sections that cite or name other sections, not yet followed."""
    among = [*rt.target_sources.get(index, []), *rt.shared_sources]
    return [
        sid
        for sid in rt.ranked(target, among)[:READ_PER_TARGET]
        if sid not in rt.ctx.followed
        and any(r.target_id for c in rt.ctx.retrieved.get(sid, []) for r in c.references)
    ][:MAX_FOLLOWS]


def _generation_evidence(rt: _Run, state: GuidedState) -> list[EvidenceSection]:
    """Top sections per (sub-)question first, each of the first two followed by the best
    retrieved section it links to (:func:`~sleuth.agents.heuristic.with_bridges`); then the
    rest ranked for the whole question. The multi-hop chain's hops are not put first: a
    compositional question is answered hop by hop (:func:`_chained`), and for the others
    they took the generator's few places from better sections (local model, HotpotQA F1
    0.419 with them first, 0.455 without; MuSiQue contains 0.412 → 0.451)."""
    order: list[str] = []
    for index, target in enumerate(state.targets):
        among = [*rt.target_sources.get(index, []), *rt.shared_sources]
        top = with_bridges(rt.ranked(target, among)[:3], rt.ranked(target), rt.ctx)
        order.extend(top)
    order.extend(rt.ranked(state.question))
    ids = list(dict.fromkeys(order))[:MAX_GENERATION_SECTIONS]
    return [rt.section(sid) for sid in ids]


def enrich(state: GuidedState, config: RunnableConfig) -> dict[str, Any]:
    """Read the top sections, follow their references (graph hint), outline (document)."""
    rt = _rt(config)
    rt.path.append("enrich")
    if rt.expired():
        return _timeout(rt, "enrichment")
    started = time.perf_counter()
    assert state.route is not None and state.plan is not None
    if _overall(rt, state) == "INSUFFICIENT":
        rt.think("Enrichment skipped: the evidence does not answer the question.")
        rt.timed("enrich", started)
        return {"evidence": _generation_evidence(rt, state), "next_step": "generate"}
    top: list[str] = []
    for index, target in enumerate(state.targets):
        among = [*rt.target_sources.get(index, []), *rt.shared_sources]
        top.extend(rt.ranked(target, among)[:READ_PER_TARGET])
    top = list(dict.fromkeys(top))[:MAX_READS]
    # sections a similar earlier question of this user cited are re-read (memory)
    to_read = [sid for sid in dict.fromkeys([*rt.recalled, *top]) if sid not in rt.ctx.read]
    to_follow: list[str] = []
    if state.route.graph_hint:
        to_follow = [
            sid
            for sid in top
            if sid not in rt.ctx.followed
            and any(r.target_id for c in rt.ctx.retrieved.get(sid, []) for r in c.references)
        ][:MAX_FOLLOWS]
    outline_of = top[0] if state.route.granularity == "document" and top else None
    plan_parts = []
    fresh = [sid for sid in to_read if sid not in rt.recalled]
    remembered = [sid for sid in to_read if sid in rt.recalled]
    if fresh:
        plan_parts.append("reading " + ", ".join(fresh))
    if remembered:
        plan_parts.append(
            "re-reading " + ", ".join(remembered) + " (cited by a similar earlier question)"
        )
    if to_follow:
        plan_parts.append("following the cross-references of " + ", ".join(to_follow))
    elif state.route.graph_hint:
        plan_parts.append("no cross-references to follow in the top sections")
    if outline_of:
        plan_parts.append(f"outlining around {outline_of}")
    calls: list[tuple[str, dict[str, Any], ToolResult]] = []
    if to_read or to_follow or outline_of:
        rt.think("Enrichment: " + "; ".join(plan_parts) + ".", agent="router")
        for sid in to_read:
            args = {"source_id": sid}
            calls.append(("read_section", args, rt.call_tool("read_section", args)))
        for sid in to_follow:
            args = {"source_id": sid}
            calls.append(("follow_references", args, rt.call_tool("follow_references", args)))
        if outline_of:
            args = {"target": outline_of}
            calls.append(("outline", args, rt.call_tool("outline", args)))
        rt.act_step(calls)
    evidence = _generation_evidence(rt, state)
    tokens = approx_tokens(" ".join(e.text for e in evidence))
    threshold = rt.token_budget // 2 if state.plan.needs_compression else rt.token_budget
    rt.compression = {"applied": False, "tokens_before": tokens, "tokens_after": tokens}
    rt.timed("enrich", started)
    # a model's generator reads each section's head (generation_messages cuts the text), so
    # under ``auto`` the sentence filter — which drops bridge facts that share no word with
    # the question — is not run for it
    compress_it = tokens > threshold and not (rt.model is not None and rt.llm_agents == "auto")
    return {"evidence": evidence, "next_step": "compress" if compress_it else "generate"}


def compress(state: GuidedState, config: RunnableConfig) -> dict[str, Any]:
    """Cut the evidence to the token budget (compression agent or sentence filter)."""
    rt = _rt(config)
    rt.path.append("compress")
    started = time.perf_counter()
    q_terms = set(terms(state.question))
    for target in state.targets:
        q_terms.update(terms(target))
    budget = (
        rt.token_budget // 2 if state.plan and state.plan.needs_compression else (rt.token_budget)
    )
    if rt.model is not None and rt.llm_agents == "auto":
        result = StructuredResult(
            value=heuristic_compression(q_terms, state.evidence, budget), path="heuristic"
        )
    else:
        result = compress_evidence(
            state.question,
            q_terms,
            state.evidence,
            budget,
            rt.model,
            max_retries=rt.max_retries,
            usage=rt.usage_for("compression"),
        )
    rt.record("compression", result)
    titles = {e.source_id: e.title for e in state.evidence}
    evidence = [
        EvidenceSection(
            source_id=p.source_id,
            title=titles.get(p.source_id, ""),
            text=p.text,
            number=rt.ctx.numbers.get(p.source_id),
        )
        for p in result.value.passages
    ]
    before = rt.compression["tokens_before"]
    after = approx_tokens(" ".join(e.text for e in evidence))
    rt.compression = {
        "applied": True,
        "tokens_before": before,
        "tokens_after": after,
        "budget": budget,
        "path": result.path,
    }
    rt.think(
        f"Compression: evidence cut from ~{before} to ~{after} tokens "
        f"({len(evidence)} sections kept, budget {budget}).",
        "compression",
        result,
    )
    rt.timed("compress", started)
    return {"evidence": evidence, "next_step": "generate"}


def _insufficient(rt: _Run, state: GuidedState) -> AnswerDraft:
    gaps = "; ".join(
        v.missing_information.strip() for v in state.verdicts if v and v.missing_information.strip()
    )
    return AnswerDraft(
        answer_text=(
            "Insufficient context: no section retrieved answers this question"
            + (f" (missing: {gaps})" if gaps else "")
            + closest_found(rt.ranked(state.question)[:3])
        ),
        is_insufficient_context=True,
    )


def _heuristic_draft(rt: _Run, state: GuidedState) -> AnswerDraft:
    """The extractive answer: with a cross-encoder, the sentences of the generation evidence
    that answer the question best, quoted (:func:`~sleuth.agents.quotes.quoted_draft`)
    after the short answer ``compose_answer`` finds for a factoid question, or "insufficient
    context" when none reaches the coverage threshold; without one ``compose_answer`` on the
    question, or one per sub-question, synthesized."""
    targets = state.targets if len(state.targets) > 1 else []
    composed = compose_parts(state.question, targets, rt.ctx)
    checker = rt.checker
    if not targets and named_sections(state.question, rt.ctx):
        # "What does section 69 of … say?": the answer is what the named section says
        # (compose_answer leads with it), however little of its text the question's words
        # or the cross-encoder find in it
        return composed
    if checker is not None and checker.cross_encoder is not None:
        ranked = [e.source_id for e in _generation_evidence(rt, state)]
        quotes = answering_quotes(
            state.question, ranked, rt.ctx, checker.cross_encoder, checker.coverage_threshold
        )
        if targets and quotes:
            # scored against the whole question, one part's sentences can fill every place:
            # after the whole question's best sentence, each part's own best one joins when
            # the cross-encoder calls it relevant (its decision boundary, not merely the
            # coverage threshold: a part alone is easier to half-match)
            firsts = [
                part[0]
                for index, target in enumerate(targets)
                if (
                    part := answering_quotes(
                        target,
                        [e.source_id for e in rt.target_evidence(index, target)],
                        rt.ctx,
                        checker.cross_encoder,
                        max(checker.coverage_threshold, RECITE_THRESHOLD),
                    )
                )
            ]
            lead = quotes[:1]
            added = [q for q in firsts if q.sentence not in {x.sentence for x in lead}]
            said = {q.sentence for q in [*lead, *added]}
            rest = [q for q in quotes[1:] if q.sentence not in said]
            quotes = [*lead, *added, *rest][: max(QUOTES, 1 + len(added))]
        short = "" if composed.is_insufficient_context else composed.short_answer
        draft = quoted_draft(quotes, short)
        if draft is None:  # no sentence of the evidence answers the question
            rt.think(
                "Generation (extractive): no sentence of the evidence reaches the "
                f"cross-encoder's coverage threshold ({checker.coverage_threshold}).",
                agent="generator",
            )
            return _insufficient(rt, state)
        return draft
    return composed


def _with_gaps(draft: AnswerDraft, state: GuidedState) -> AnswerDraft:
    """Say, in an extractive answer, what the evaluator found missing (PARTIAL verdicts)."""
    gaps = [v.missing_information for v in state.verdicts if v and v.verdict == "PARTIAL"]
    if draft.is_insufficient_context or not gaps:
        return draft
    note = "Not covered by the retrieved sections: " + "; ".join(dict.fromkeys(gaps)) + "."
    return draft.model_copy(update={"answer_text": f"{draft.answer_text}\n{note}"})


def generate(state: GuidedState, config: RunnableConfig) -> dict[str, Any]:
    """The answer draft: structured model output, or the extractive heuristic."""
    rt = _rt(config)
    rt.path.append("generate")
    started = time.perf_counter()
    if state.stop_status is None and _overall(rt, state) == "INSUFFICIENT":
        rt.think(
            "Generation: the evaluator found the evidence insufficient after "
            f"{rt.refinements} refinement(s); answering 'insufficient context'.",
            agent="generator",
        )
        draft = _insufficient(rt, state)
    elif rt.model is None or state.stop_status is not None:
        draft = _with_gaps(_heuristic_draft(rt, state), state)
        rt.think(
            "Generation (extractive): "
            + (
                "answering from the evidence"
                if not draft.is_insufficient_context
                else "the evidence does not answer the question"
            )
            + ".",
            agent="generator",
        )
    elif (chained := _chained(rt, state)) is not None:
        draft = chained
    else:
        found = state.evidence or _generation_evidence(rt, state)
        checker = rt.checker
        aside = set_aside(
            list(dict.fromkeys([state.question, *state.targets])),
            [e.source_id for e in found if e.source_id in rt.ctx.retrieved],
            rt.ctx,
            checker.coverage_threshold if checker is not None else 0.0,
        )
        aside -= _rescued(rt, state.question, [e.source_id for e in found], aside)
        found = [e for e in found if e.source_id not in aside]
        evidence = [
            *focused_evidence(state.question, found[:GENERATION_SECTIONS], rt.ctx.scorer),
            *found[GENERATION_SECTIONS:],
        ]
        notes = []
        if len(state.targets) > 1:
            subs = "\n".join(f"- {q}" for q in state.targets)
            hint = rt.decomposition.get("synthesis_hint") or "Answer each part."
            notes.append(f"Sub-questions (answer each, citing across them):\n{subs}\n{hint}")
        # a model verdict's gap is worth telling the generator; the coverage heuristic's is a
        # guess at missing words that makes a small model decline answers it has
        judged = [c for c in rt.crag if c.get("path") in ("llm", "llm_after_retry")]
        gaps = [
            str(c["missing_information"])
            for c in judged
            if c["verdict"] != "SUFFICIENT" and c["missing_information"]
        ]
        if gaps:
            notes.append(
                "The evidence evaluator found gaps (" + "; ".join(gaps) + "): say what the "
                "evidence does not cover."
            )
        rt.generation = (state.question, list(evidence), list(notes))
        result = generate_draft(
            state.question,
            evidence,
            rt.model,
            fallback=lambda: _heuristic_draft(rt, state),
            notes=notes,
            usage=rt.usage_for("generator"),
        )
        rt.record("generator", result)
        draft = result.value
        rt.think(
            f"Generation: answer drafted from {min(len(evidence), GENERATION_SECTIONS)} sections"
            + (
                f" ({', '.join(sorted(aside))} set aside: no passage reaches the coverage "
                "threshold)"
                if aside
                else ""
            )
            + (" (fallback: extractive)" if not result.from_model else "")
            + ".",
            "generator",
            result,
        )
    rt.timed("generate", started)
    return {"draft": draft}


def _rescued(rt: _Run, question: str, ranked: list[str], aside: set[str]) -> set[str]:
    """The section set aside for the cross-encoder's low scores that the model, judging
    coverage (:meth:`~sleuth.agents.coverage.CoverageJudge.best_section`), finds most about
    the question — at most one, among the generator's first
    :data:`~sleuth.agents.generation.GENERATION_SECTIONS`, asked only when no section kept
    there reaches the cross-encoder's own decision boundary
    (:data:`~sleuth.agents.support.CROSS_ENCODER_THRESHOLD`): where it finds an answering
    section the cross-encoder can be trusted to set the others aside; where it finds none
    (a plainly worded question: "my neighbour hit me with an iron rod") it scores the
    section that answers like the rest. Empty without a judge or a cross-encoder."""
    checker = rt.checker
    judge = checker.coverage_judge if checker is not None else None
    scorer = rt.ctx.scorer
    head = ranked[:GENERATION_SECTIONS]
    candidates = [sid for sid in head if sid in aside]
    if judge is None or scorer is None or not candidates:
        return set()
    kept = [sid for sid in head if sid not in aside]
    relevance = section_relevance(question, kept, rt.ctx) if kept else {}
    if any(p >= CROSS_ENCODER_THRESHOLD for p in relevance.values()):
        return set()
    best = judge.best_section(question, candidates, rt.ctx, scorer)
    if best is None:
        return set()
    sid, log_odds = best
    rt.think(
        f"{sid} read although the cross-encoder found it unrelated: the model judges it "
        f"about the question (log-odds {log_odds:.2f} ≥ {judge.threshold}).",
        agent="generator",
    )
    return {sid}


def _chained(rt: _Run, state: GuidedState) -> AnswerDraft | None:
    """A compositional question answered hop by hop (:mod:`sleuth.agents.chained`): each
    sub-question searched (``rag_search``, :data:`HOP_SECTIONS`) and read by the generator,
    its answer filling the next; ``None`` (the whole-question generator runs) when the
    question is not compositional, is one of several parts, or a hop finds no answer."""
    if len(state.targets) > 1 or profile_of(state.question, rt.ctx).hop is None:
        return None
    assert rt.model is not None
    model = rt.model

    def read(question: str) -> Hop:
        if rt.expired():  # no time for another hop: the chain ends unanswered
            return Hop(
                question=question, draft=AnswerDraft(answer_text="", is_insufficient_context=True)
            )
        args = {"query": question, "top_k": HOP_SECTIONS}
        found = rt.call_tool("rag_search", args)
        rt.act_step([("rag_search", args, found)])
        ids = list(dict.fromkeys(c.source_id for c in found.chunks))
        evidence = [rt.section(sid) for sid in ids]
        hop, result = read_hop(question, evidence, model, usage=rt.usage_for("generator"))
        rt.record("generator", result)
        rt.chain.append({"question": question, "answer": hop.answer, "source_ids": ids})
        rt.generation = (question, evidence, [])
        rt.think(
            f"Hop: '{question}' → " + (f"'{hop.answer}'" if hop.answer else "no answer") + ".",
            "generator",
            result,
        )
        return hop

    hops = answer_in_hops(state.question, read)
    draft = chained_draft(hops)
    if draft is None:
        rt.generation = None
        rt.think(
            "Chained sub-questions: a hop found no answer; answering the whole question.",
            agent="generator",
        )
    return draft


def finalize(state: GuidedState, config: RunnableConfig) -> dict[str, Any]:
    """Validate citations, set the status, emit the one ``answer`` event."""
    rt = _rt(config)
    rt.path.append("finalize")
    started = time.perf_counter()
    draft = state.draft or compose_answer(state.question, rt.ctx)
    conversational = state.plan is not None and state.plan.skip_retrieval == "llm_only"
    strict = rt.strict_grounding or (state.plan is not None and state.plan.strict_grounding)
    from_model = rt.model is not None and not draft.extractive and not conversational
    ranked = [
        e.source_id
        for e in (rt.generation[1] if rt.generation else _generation_evidence(rt, state))
    ]
    fallback, overrule = _quoted_fallbacks(rt, state, ranked) if from_model else (None, None)
    stop = state.stop_status or (RunStatus.TIMEOUT if calls.was_cut() else None)
    finished = finish_answer(
        state.question,
        draft,
        rt.ctx,
        stop,
        require_citations=not conversational,
        checker=rt.checker,
        strict_grounding=strict and not conversational,
        from_model=from_model and state.plan is not None and state.plan.skip_retrieval == "none",
        repair=_repair(rt) if from_model and rt.generation and not rt.expired() else None,
        ranked=ranked,
        fallback=fallback,
        overrule=overrule,
    )
    answer, removed, status = finished.answer, finished.removed, finished.status
    rt.removed.extend(removed)
    rt.citation_trace = {**finished.trace(), "strict_grounding": strict}
    rt.emitter.emit(AnswerEvent(answer=answer, status=status.value))
    rt.steps.append(
        AgentStep(
            step_type=AgentStepType.FINAL,
            content=answer.answer_text,
            reasoning=finished.summary(),
        )
    )
    rt.timed("finalize", started)
    return {"final_answer": answer, "status": status}


def _quoted_fallbacks(
    rt: _Run, state: GuidedState, ranked: list[str]
) -> tuple[AnswerDraft | None, AnswerDraft | None]:
    """The answers the extractive reader would give this run (its quotes of ``ranked``):
    the one the finish checks ship when they decline the model's, and the one that
    overrules the model's own decline — only quotes that reach
    :data:`~sleuth.agents.finish.RECITE_THRESHOLD` (the boundary at which the no-model run
    answers over a word-coverage decline), which loosely related sentences must not. Each
    is ``None`` when it would decline too; both without a cross-encoder."""
    checker = rt.checker
    if checker is None or checker.cross_encoder is None or not rt.quotable:
        return None, None
    if _overall(rt, state) == "INSUFFICIENT":
        return None, None
    threshold = checker.coverage_threshold
    quotes = answering_quotes(state.question, ranked, rt.ctx, checker.cross_encoder, threshold)
    # quotes come best first: those over the stricter threshold are the best ones anyway
    confident = max(threshold, RECITE_THRESHOLD)
    return quoted_draft(quotes), quoted_draft([q for q in quotes if sigmoid(q.logit) >= confident])


def _repair(rt: _Run) -> Callable[[str, AnswerDraft], AnswerDraft | None]:
    """The repair round: the generator's prompt, its draft, and what was wrong with it."""

    def run(problem: str, draft: AnswerDraft) -> AnswerDraft | None:
        assert rt.model is not None and rt.generation is not None
        question, evidence, notes = rt.generation
        messages = [
            *generation_messages(question, evidence, notes),
            AIMessage(draft.answer_text),
            HumanMessage(problem),
        ]
        started = time.perf_counter()
        try:
            reply = calls.invoke(rt.model, messages, stream_answer=True)
        except ContextWindowExceeded:
            raise
        except Exception:
            return None
        finally:
            rt.timed("repair", started)
        rt.usage_for("repair")(dict(getattr(reply, "usage_metadata", None) or {}))
        result = read_answer_reply(
            reply,
            lambda: draft,
            long_form=profile_of(question, rt.ctx).answer_kind not in SHORT_FORM_KINDS,
        )
        return explained_draft(question, result.value, evidence) if result.from_model else None

    return run


def _next(state: GuidedState) -> str:
    return state.next_step


def build_guided_graph():  # type: ignore[no-untyped-def]
    """Compile the guided graph (see the module docstring for its shape)."""
    graph = StateGraph(GuidedState)
    for name, node in (
        ("route", route),
        ("plan", plan),
        ("decide", decide),
        ("skip", skip),
        ("decompose", decompose),
        ("retrieve", retrieve),
        ("evaluate", evaluate),
        ("refine", refine),
        ("enrich", enrich),
        ("compress", compress),
        ("generate", generate),
        ("finalize", finalize),
    ):
        graph.add_node(name, node)
    graph.add_edge(START, "route")
    graph.add_edge(START, "plan")
    graph.add_edge(["route", "plan"], "decide")
    graph.add_conditional_edges(
        "decide", _next, {"skip": "skip", "decompose": "decompose", "retrieve": "retrieve"}
    )
    graph.add_edge("skip", "finalize")
    graph.add_conditional_edges("decompose", _next, {"retrieve": "retrieve"})
    graph.add_conditional_edges("retrieve", _next, {"evaluate": "evaluate", "generate": "generate"})
    graph.add_conditional_edges(
        "evaluate",
        _next,
        {"refine": "refine", "retrieve": "retrieve", "enrich": "enrich", "generate": "generate"},
    )
    graph.add_conditional_edges(
        "refine",
        _next,
        {
            "retrieve": "retrieve",
            "evaluate": "evaluate",
            "enrich": "enrich",
            "generate": "generate",
        },
    )
    graph.add_conditional_edges("enrich", _next, {"compress": "compress", "generate": "generate"})
    graph.add_edge("compress", "generate")
    graph.add_edge("generate", "finalize")
    graph.add_edge("finalize", END)
    return graph.compile()


class GuidedRuntime:
    """The guided ("constrained runtime") mode: one compiled graph, reusable across runs.

    Thread-safe: per-run state lives in the graph state and a per-run record object.
    """

    def __init__(self) -> None:
        self._graph = build_guided_graph()

    def run(
        self,
        question: str,
        ctx: RunContext,
        tools: ToolRegistry,
        emitter: EventEmitter,
        model: BaseChatModel | None,
        *,
        max_refinements: int = DEFAULT_MAX_REFINEMENTS,
        deadline: float | None = None,
        max_retries: int = 2,
        token_budget: int = DEFAULT_TOKEN_BUDGET,
        use_intent_parser: bool = True,
        checker: SupportChecker | None = None,
        strict_grounding: bool = False,
        recalled: list[str] | None = None,
        llm_agents: LLMAgents = "auto",
    ) -> GuidedResult:
        """Answer ``question`` with the guided graph.

        Args:
            question: the user's question (non-empty).
            ctx: the run's context (collection, retrieved chunks — what citations may name).
            tools: the tools (``rag_search`` required; ``read_section``,
                ``follow_references``, ``outline`` used when present).
            emitter: receives observe / think / tool_call / tool_result / answer events;
                the caller emits the terminal ``done`` / ``error`` event.
            model: the chat model for the agents, or ``None`` (every agent uses its
                heuristic fallback: deterministic, offline).
            max_refinements: refinement rounds allowed per (sub-)question (≥ 0).
            deadline: ``time.monotonic()`` value past which no further retrieval or model
                call starts (status ``timeout``, answer from the evidence so far).
            max_retries: corrections per agent call after an invalid structured output.
            token_budget: approximate evidence tokens before compression applies (half of
                it when the plan sets ``needs_compression``).
            use_intent_parser: call the LLM intent parser (with a model) before routing.
            checker: the citation support check (``None``: retrieved-only validation).
            strict_grounding: drop answer sentences without a supporting citation (also on
                when the planner asks for it).
            recalled: source_ids cited by a similar earlier question of the same user
                (agent memory); enrichment re-reads them.
            llm_agents: ``auto`` (the model only where the heuristic is unsure, see
                :data:`LLMAgents`) or ``all``; ignored without a model.

        Returns:
            A :class:`GuidedResult` with exactly one answer. Never raises: a failure of the
            graph itself gives status ``error``, an explanatory answer, and ``error`` set.
        """
        question = question.strip()
        rt = _Run(
            question=question,
            ctx=ctx,
            tools=tools,
            emitter=emitter,
            model=model,
            deadline=deadline,
            max_refinements=max(0, max_refinements),
            max_retries=max(0, max_retries),
            token_budget=max(1, token_budget),
            use_intent_parser=use_intent_parser,
            checker=checker,
            strict_grounding=strict_grounding,
            recalled=list(recalled or [])[:READ_PER_TARGET],
            llm_agents=llm_agents,
        )
        started = time.perf_counter()
        rt.observe(
            f"Question: {question} | collection: {ctx.collection} | "
            f"tools: {', '.join(tools.names)} | runtime: guided"
        )
        limit = 3 * 4 * (rt.max_refinements + 1) + 30
        error: str | None = None
        final: dict[str, Any] = {}
        try:
            final = self._graph.invoke(
                GuidedState(question=question),
                config={"configurable": {"guided_run": rt}, "recursion_limit": limit},
            )
            answer: GeneratedAnswer = final["final_answer"]
            status: RunStatus = final["status"]
        except Exception as exc:
            error = describe_failure(exc)
            answer = GeneratedAnswer(
                answer_text=f"The run failed before an answer could be written ({error}).",
                is_insufficient_context=True,
            )
            status = RunStatus.ERROR
            if not any(e.type == "answer" for e in emitter.events):
                emitter.emit(AnswerEvent(answer=answer, status=status.value))
        total_ms = (time.perf_counter() - started) * 1e3
        route_value = final.get("route")
        plan_value = final.get("plan")
        trace: dict[str, Any] = {
            "mode": "guided",
            "planner_runtime": "llm" if model is not None else "heuristic",
            "planner_run_id": uuid.uuid4().hex,
            "planner_path": list(rt.path),
            "tool_trace": list(rt.tool_trace),
            "output_validation_retries": dict(rt.retries),
            "agentic": {
                "crag": list(rt.crag),
                "complementary": list(rt.complementary),
                "compression": dict(rt.compression),
                "decomposition": dict(rt.decomposition),
                "chain": list(rt.chain),
                "recalled_sections": list(rt.recalled),
            },
            "timings_ms": {
                "total": round(total_ms, 1),
                **{k: round(v, 1) for k, v in rt.stage_ms.items()},
            },
            "agents": list(rt.agent_calls),
            "route": {
                "source": rt.route_source,
                **(route_value.model_dump() if route_value else {}),
            },
            "plan": plan_value.model_dump() if plan_value else None,
            "refinements": rt.refinements,
            "max_refinements": rt.max_refinements,
            "citations_removed": [r.model_dump() for r in rt.removed],
            **rt.citation_trace,
            "retrieved_source_ids": list(ctx.retrieved),
            "token_usage": dict(ctx.usage),
            "error": error,
        }
        return GuidedResult(
            answer=answer,
            status=status,
            steps=list(rt.steps),
            removed_citations=list(rt.removed),
            trace=trace,
            error=error,
        )
