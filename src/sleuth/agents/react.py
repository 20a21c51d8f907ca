"""The ReAct loop as an explicit LangGraph ``StateGraph``: observe → think → act → observe.

::

    START → observe → plan → think ⇄ act → observe (→ re-plan on contradiction) → think …
                               think (draft) → reflect → finalize → END
                                                   └→ think (one revision) …

* ``observe`` records the question and the tools; each tool round's observation is made at
  the end of ``act`` (the same OBSERVE step and event, one graph node less per iteration);
* ``plan``: the :class:`~sleuth.agents.planning.PlanningAgent` writes the plan the reasoner
  follows; after each tool round the observation is checked against it and a contradiction
  re-plans (at most :data:`~sleuth.agents.planning.MAX_REPLANS` times);
* ``reflect``: the critic (:mod:`sleuth.agents.reflection`) checks the draft against its
  evidence; a critique that finds a gap sends the loop back to ``think`` once.

Loop control lives here, not in the reasoner: ``max_iterations`` tool rounds, a wall-clock
deadline, identical repeated tool calls, and a bound on consecutive unusable model outputs.
Whatever happens, the ``finalize`` node produces exactly one validated answer and a status.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.runnables import RunnableConfig
from langgraph.graph import END, START, StateGraph

from sleuth.agents.answer import AnswerDraft
from sleuth.agents.citations import RemovedCitation
from sleuth.agents.events import (
    AnswerEvent,
    EventEmitter,
    ObserveEvent,
    ThinkEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from sleuth.agents.finish import finish_answer
from sleuth.agents.heuristic import compose_answer
from sleuth.agents.planning import MAX_REPLANS, PlanningAgent, contradiction
from sleuth.agents.reasoner import Decision, Reasoner
from sleuth.agents.reflection import CRITIQUE_NOTE, MAX_REVISIONS, critique_draft
from sleuth.agents.state import AgentState, AgentStep, AgentStepType, RunStatus, ToolCallRequest
from sleuth.agents.structured import FIX_HINT
from sleuth.agents.support import SupportChecker
from sleuth.errors import ConfigError, ModelDeadlineExceeded, ToolError
from sleuth.llm import calls
from sleuth.tools.base import RunContext, ToolRegistry, ToolResult

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

MAX_OUTPUT_RETRIES = 3
"""Consecutive unusable model outputs (broken JSON, empty replies) before the run stops."""
MAX_REPEATS = 2
"""Identical repeated tool calls tolerated (each answered with a warning) before stopping."""
PREVIEW_CHARS = 300


@dataclass
class RunRuntime:
    """Per-run collaborators handed to the graph nodes through the run config."""

    ctx: RunContext
    tools: ToolRegistry
    reasoner: Reasoner
    emitter: EventEmitter
    deadline: float
    checker: SupportChecker | None = None
    strict_grounding: bool = False
    tool_trace: list[dict[str, Any]] = field(default_factory=list)
    removed_citations: list[RemovedCitation] = field(default_factory=list)
    citation_trace: dict[str, Any] = field(default_factory=dict)
    planner: PlanningAgent | None = None
    critic_model: BaseChatModel | None = None
    reflection: bool = True
    recalled: list[list[str]] = field(default_factory=list)
    last_round: list[tuple[str, dict[str, Any], ToolResult]] = field(default_factory=list)
    planning: dict[str, Any] = field(default_factory=dict)
    reflections: list[dict[str, Any]] = field(default_factory=list)
    retries: dict[str, int] = field(default_factory=dict)
    path: list[str] = field(default_factory=list)
    seen_calls: set[str] = field(default_factory=set)
    stage_ms: dict[str, float] = field(default_factory=dict)
    error: str | None = None

    def timed(self, stage: str, started: float) -> None:
        self.stage_ms[stage] = self.stage_ms.get(stage, 0.0) + (time.perf_counter() - started) * 1e3

    def retried(self, agent: str, retries: int) -> None:
        self.retries[agent] = self.retries.get(agent, 0) + retries


def _runtime(config: RunnableConfig) -> RunRuntime:
    return config["configurable"]["runtime"]


def _signature(call: ToolCallRequest) -> str:
    return f"{call.name}:{json.dumps(call.arguments, sort_keys=True, default=str)}"


def _preview(result: ToolResult) -> str:
    body = json.dumps(result.payload, ensure_ascii=False)
    return body if len(body) <= PREVIEW_CHARS else body[: PREVIEW_CHARS - 1] + "…"


def observe(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
    """The first observation: the question, the collection and the tools."""
    return _observation(state, _runtime(config), None, state.iteration_count)


def _observation(
    state: AgentState, rt: RunRuntime, last: AgentStep | None, iteration: int
) -> dict[str, Any]:
    """Observe ``last`` (the act step just taken; ``None`` at the start) and re-plan when the
    observation contradicts the plan. Returns the state update (an OBSERVE step, and the
    re-plan's plan, note and THINK step when one happens)."""
    rt.path.append("observe")
    if last is None:
        content = (
            f"Question: {state.original_query} | collection: {state.collection} | "
            f"tools: {', '.join(rt.tools.names)}"
        )
    else:
        lines = [r.get("status", "") for r in last.tool_results or []]
        content = "Observed: " + (" | ".join(lines) if lines else last.content)
    rt.emitter.emit(ObserveEvent(content=content))
    step = AgentStep(step_type=AgentStepType.OBSERVE, content=content)
    update: dict[str, Any] = {"steps": [step]}
    calls, rt.last_round = rt.last_round, []
    if calls and state.plan is not None and rt.planner is not None and state.replans < MAX_REPLANS:
        reason = contradiction(state.original_query, calls, state.plan)
        if reason is not None:
            update.update(_replan(state, rt, reason, iteration))
            update["steps"] = [*update["steps"], *update.pop("replan_steps")]
    return update


def _replan(state: AgentState, rt: RunRuntime, reason: str, iteration: int) -> dict[str, Any]:
    """A new plan after ``reason`` contradicted the current one (also told to a model)."""
    assert rt.planner is not None and state.plan is not None
    rt.ctx.stage = "plan"
    started = time.perf_counter()
    result = rt.planner.replan(state.original_query, state.plan, reason, rt.ctx, rt.ctx.add_usage)
    rt.retried("planner", result.retries)
    new = result.value
    rt.planning.setdefault("replans", []).append(
        {"reason": reason, "plan": [s.model_dump() for s in new.steps], "path": result.path}
    )
    thought = f"Re-planning: {reason}. New plan: {new.render()}."
    rt.emitter.emit(ThinkEvent(content=thought, iteration=iteration))
    rt.timed("plan", started)
    return {
        "plan": new,
        "replans": state.replans + 1,
        "messages": [HumanMessage(f"Note: {reason}. Revised plan: {new.render()}.")],
        "replan_steps": [
            AgentStep(
                step_type=AgentStepType.THINK,
                content=thought,
                reasoning=f"agent=planner; path={result.path}; retries={result.retries}",
            )
        ],
    }


def plan(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
    """The planning agent writes the plan before the first action."""
    rt = _runtime(config)
    rt.path.append("plan")
    rt.ctx.stage = "plan"
    assert rt.planner is not None
    if time.monotonic() > rt.deadline:
        return {}  # think stops the run with status timeout
    started = time.perf_counter()
    result = rt.planner.plan(
        state.original_query, rt.tools.names, rt.recalled, usage=rt.ctx.add_usage
    )
    rt.retried("planner", result.retries)
    new = result.value
    rt.planning.update(
        plan=[s.model_dump() for s in new.steps],
        rationale=new.rationale,
        path=result.path,
        recalled_sections=list(dict.fromkeys(sid for run in rt.recalled for sid in run)),
    )
    thought = f"Plan ({new.rationale}): {new.render()}." if new.rationale else new.render()
    rt.emitter.emit(ThinkEvent(content=thought, iteration=state.iteration_count))
    rt.timed("plan", started)
    return {
        "plan": new,
        "steps": [
            AgentStep(
                step_type=AgentStepType.THINK,
                content=thought,
                reasoning=f"agent=planner; path={result.path}; retries={result.retries}",
            )
        ],
    }


def think(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
    rt = _runtime(config)
    rt.path.append("think")
    rt.ctx.stage = "think"
    started = time.perf_counter()
    stop: RunStatus | None = None
    if rt.error is not None:  # a tool met a configuration error: no call can succeed
        stop = RunStatus.ERROR
    elif time.monotonic() > rt.deadline:
        stop = RunStatus.TIMEOUT
    elif state.iteration_count >= state.max_iterations:
        stop = RunStatus.MAX_ITERATIONS
    if stop is not None:
        thought = f"Stopping: {stop.value.replace('_', ' ')}; answering from the evidence so far."
        rt.emitter.emit(ThinkEvent(content=thought, iteration=state.iteration_count))
        return {
            "stop_status": stop,
            "steps": [AgentStep(step_type=AgentStepType.THINK, content=thought)],
        }
    try:
        decision = rt.reasoner.decide(state, rt.ctx, rt.tools)
    except ModelDeadlineExceeded:  # the model did not answer in the run's time
        thought = "Stopping: timeout; answering from the evidence so far."
        rt.timed("think", started)
        rt.emitter.emit(ThinkEvent(content=thought, iteration=state.iteration_count))
        return {
            "stop_status": RunStatus.TIMEOUT,
            "steps": [AgentStep(step_type=AgentStepType.THINK, content=thought)],
        }
    except Exception as exc:  # a failing model must not crash the run
        rt.error = f"the reasoner failed: {type(exc).__name__}: {exc}"
        decision = Decision(thought=rt.error[0].upper() + rt.error[1:])
        rt.timed("think", started)
        rt.emitter.emit(ThinkEvent(content=decision.thought, iteration=state.iteration_count))
        return {
            "stop_status": RunStatus.ERROR,
            "steps": [AgentStep(step_type=AgentStepType.THINK, content=decision.thought)],
        }
    rt.timed("think", started)
    rt.emitter.emit(ThinkEvent(content=decision.thought, iteration=state.iteration_count))
    update: dict[str, Any] = {"pending_calls": [], "held_draft": decision.held}
    steps = [
        AgentStep(
            step_type=AgentStepType.THINK,
            content=decision.thought,
            tool_calls=[c.model_dump() for c in decision.tool_calls] or None,
        )
    ]
    message = decision.message or _synthetic_message(decision)
    # a fresh message id: add_messages would otherwise merge a repeated reply into the old one
    messages: list[BaseMessage] = [message.model_copy(update={"id": None})]
    messages.extend(decision.feedback)
    if decision.draft is not None:
        update.update(draft=decision.draft, is_complete=True, draft_checked=decision.checked)
    elif decision.errors and not decision.tool_calls:
        failures = state.parse_failures + 1
        note = "Observation: " + " ".join(decision.errors)
        rt.emitter.emit(ObserveEvent(content=note))
        steps.append(AgentStep(step_type=AgentStepType.OBSERVE, content=note))
        update["parse_failures"] = failures
        if failures > MAX_OUTPUT_RETRIES:
            update["stop_status"] = RunStatus.ERROR
            # what the model was told, without the instruction meant for it
            said = " ".join(e.replace(FIX_HINT, "").strip() for e in decision.errors)
            rt.error = f"the model's last {failures} replies could not be used: {said}"
    else:
        fresh = [c for c in decision.tool_calls if _signature(c) not in rt.seen_calls]
        if decision.tool_calls and not fresh:
            repeats = state.repeats + 1
            update["repeats"] = repeats
            warning = (
                "Error: you already made this exact tool call and saw its result. Use other "
                "arguments or give your final answer."
            )
            messages.extend(
                ToolMessage(warning, tool_call_id=c.id, name=c.name) for c in decision.tool_calls
            )
            rt.emitter.emit(ObserveEvent(content="Observation: repeated tool call skipped."))
            steps.append(AgentStep(step_type=AgentStepType.OBSERVE, content=warning))
            if repeats >= MAX_REPEATS:
                update["stop_status"] = RunStatus.REPEATED_ACTION
        else:
            update["pending_calls"] = decision.tool_calls
            update["parse_failures"] = 0
        if decision.errors:
            note = "Observation: " + " ".join(decision.errors)
            rt.emitter.emit(ObserveEvent(content=note))
    update["steps"] = steps
    update["messages"] = messages
    return update


def _synthetic_message(decision: Decision) -> AIMessage:
    """The AI message a reasoner without a model would have sent (keeps history uniform)."""
    return AIMessage(
        content=decision.thought,
        tool_calls=[{"name": c.name, "args": c.arguments, "id": c.id} for c in decision.tool_calls],
    )


def act(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
    rt = _runtime(config)
    rt.path.append("act")
    started = time.perf_counter()
    messages: list[BaseMessage] = []
    results: list[dict[str, Any]] = []
    for call in state.pending_calls:
        rt.seen_calls.add(_signature(call))
        rt.emitter.emit(ToolCallEvent(call_id=call.id, tool=call.name, arguments=call.arguments))
        t0 = time.perf_counter()
        tool = rt.tools.get(call.name)
        if tool is None:
            result = ToolResult(
                ok=False,
                status=f"Error: unknown tool '{call.name}'. Valid tools: "
                f"{', '.join(rt.tools.names)}. Please fix your mistakes.",
            )
        else:
            try:
                result = tool.invoke(call.arguments, rt.ctx)
            except ToolError as exc:
                result = ToolResult(ok=False, status=f"Error: {exc}. Please fix your mistakes.")
            except ConfigError as exc:  # e.g. an index built with another embedding model
                rt.error = f"{call.name} cannot run: {exc}"
                result = ToolResult(ok=False, status=f"Error: {rt.error}")
            except Exception as exc:
                result = ToolResult(
                    ok=False, status=f"Error: {call.name} failed: {type(exc).__name__}: {exc}"
                )
        ms = (time.perf_counter() - t0) * 1e3
        rt.emitter.emit(
            ToolResultEvent(
                call_id=call.id,
                tool=call.name,
                ok=result.ok,
                status=result.status,
                preview=_preview(result),
                payload=result.payload,
                duration_ms=round(ms, 2),
            )
        )
        rt.tool_trace.append(
            {
                "tool": call.name,
                "arguments": call.arguments,
                "ok": result.ok,
                "status": result.status,
                "duration_ms": round(ms, 2),
            }
        )
        messages.append(ToolMessage(result.observation(), tool_call_id=call.id, name=call.name))
        rt.last_round.append((call.name, call.arguments, result))
        results.append({"tool": call.name, "ok": result.ok, "status": result.status})
    rt.timed("act", started)
    step = AgentStep(
        step_type=AgentStepType.ACT,
        content="Executed: " + ", ".join(c.name for c in state.pending_calls),
        tool_calls=[c.model_dump() for c in state.pending_calls],
        tool_results=results,
    )
    # the observation of this round, in the same graph step (one node less per iteration)
    seen = _observation(state, rt, step, state.iteration_count + 1)
    return {
        **seen,
        "messages": [*messages, *seen.get("messages", [])],
        "pending_calls": [],
        "iteration_count": state.iteration_count + 1,
        "steps": [step, *seen["steps"]],
    }


def reflect(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
    """Critique the draft against its evidence; one revision round when it finds a gap."""
    rt = _runtime(config)
    draft = state.draft
    if (
        not rt.reflection
        or draft is None
        or draft.is_insufficient_context
        or state.draft_checked
        or state.reflections >= MAX_REVISIONS
        or state.iteration_count >= state.max_iterations
        or time.monotonic() > rt.deadline
    ):
        return {}
    rt.path.append("reflect")
    rt.ctx.stage = "reflect"
    started = time.perf_counter()
    result = critique_draft(
        state.original_query,
        draft,
        rt.ctx,
        rt.critic_model,
        rt.checker,
        usage=rt.ctx.add_usage,
    )
    rt.retried("reflection", result.retries)
    critique = result.value
    rt.reflections.append({**critique.model_dump(), "path": result.path})
    thought = f"Reflection: {critique.summary()}."
    rt.emitter.emit(ThinkEvent(content=thought, iteration=state.iteration_count))
    steps = [
        AgentStep(
            step_type=AgentStepType.THINK,
            content=thought,
            reasoning=f"agent=critic; path={result.path}; retries={result.retries}",
        )
    ]
    rt.timed("reflect", started)
    if not critique.needs_revision:
        return {"critique": critique, "steps": steps}
    note = (
        f"{CRITIQUE_NOTE} {critique.summary()}. Search for what is missing (for example "
        f"'{critique.revision_query}'), then give the final answer again."
    )
    last = state.messages[-1] if state.messages else None
    if isinstance(last, AIMessage) and last.tool_calls:
        feedback: list[BaseMessage] = [
            ToolMessage(note, tool_call_id=c["id"] or "final", name=c["name"])
            for c in last.tool_calls
        ]
    else:
        feedback = [HumanMessage(note)]
    return {
        "critique": critique,
        "reflections": state.reflections + 1,
        "draft": None,
        "held_draft": draft,
        "is_complete": False,
        "messages": feedback,
        "steps": steps,
    }


def finalize(state: AgentState, config: RunnableConfig) -> dict[str, Any]:
    rt = _runtime(config)
    rt.path.append("finalize")
    rt.ctx.stage = "finalize"  # the conclusion after a stop, the repair round
    started = time.perf_counter()
    question = state.original_query
    draft: AnswerDraft | None = state.draft
    search = rt.tools.get("rag_search")
    if draft is None and not rt.ctx.searches and search is not None and rt.error is None:
        # stopped before any search (the model hung or failed on its first reply): the
        # first step always searches, with the question itself when the model did not
        try:
            search.invoke({"query": question}, rt.ctx)
            rt.emitter.emit(
                ObserveEvent(
                    content="The run stopped before any search: searched with the question."
                )
            )
        except (ToolError, ConfigError):
            pass
    if draft is None:
        reason = state.stop_status or RunStatus.ERROR
        if rt.error is not None:  # the reasoner is failing: answer from the evidence alone
            draft = compose_answer(question, rt.ctx)
        else:
            try:
                draft = rt.reasoner.conclude(state, rt.ctx, reason)
            except Exception:  # the evidence-based fallback always answers
                draft = compose_answer(question, rt.ctx)
    model_repair = getattr(rt.reasoner, "repair", None)
    from_model = getattr(rt.reasoner, "model", None) is not None and not draft.extractive
    stop = state.stop_status or (RunStatus.TIMEOUT if calls.was_cut() else None)
    finished = finish_answer(
        question,
        draft,
        rt.ctx,
        stop,
        rt.error,
        checker=rt.checker,
        strict_grounding=rt.strict_grounding,
        from_model=from_model,
        repair=model_repair(state, rt.ctx)
        if from_model and model_repair and rt.error is None and time.monotonic() < rt.deadline
        else None,
    )
    answer, removed, status = finished.answer, finished.removed, finished.status
    rt.citation_trace = finished.trace()
    rt.removed_citations.extend(removed)
    rt.timed("finalize", started)
    rt.emitter.emit(AnswerEvent(answer=answer, status=status.value))
    return {
        "final_answer": answer,
        "status": status,
        "is_complete": True,
        "steps": [
            AgentStep(
                step_type=AgentStepType.FINAL,
                content=answer.answer_text,
                reasoning=finished.summary(),
            )
        ],
    }


def _after_observe(state: AgentState, config: RunnableConfig) -> str:
    return "plan" if state.plan is None and _runtime(config).planner is not None else "think"


def _after_think(state: AgentState) -> str:
    if state.stop_status is not None:
        return "finalize"
    if state.is_complete:
        return "reflect"
    return "act" if state.pending_calls else "think"


def _after_reflect(state: AgentState) -> str:
    return "finalize" if state.is_complete or state.stop_status is not None else "think"


def build_react_graph():  # type: ignore[no-untyped-def]
    """Compile the ReAct graph (see the module docstring for its shape)."""
    graph = StateGraph(AgentState)
    graph.add_node("observe", observe)
    graph.add_node("plan", plan)
    graph.add_node("think", think)
    graph.add_node("act", act)
    graph.add_node("reflect", reflect)
    graph.add_node("finalize", finalize)
    graph.add_edge(START, "observe")
    graph.add_conditional_edges("observe", _after_observe, {"plan": "plan", "think": "think"})
    graph.add_edge("plan", "think")
    graph.add_conditional_edges(
        "think",
        _after_think,
        {"act": "act", "think": "think", "reflect": "reflect", "finalize": "finalize"},
    )
    graph.add_conditional_edges(
        "reflect", _after_reflect, {"think": "think", "finalize": "finalize"}
    )
    graph.add_conditional_edges("act", _after_observe, {"plan": "plan", "think": "think"})
    graph.add_edge("finalize", END)
    return graph.compile()
