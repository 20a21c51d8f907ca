"""The LLM reasoner: a chat model chooses tools by function calling.

The model sees the system prompt, the question and the conversation so far (its tool calls
and the tools' observations, the evidence numbered ``[1]``, ``[2]`` …). Its replies are read
by the one normaliser of the LLM layer (:mod:`sleuth.llm.toolcalls`): structured calls or
calls written as text, in any of the forms real models emit. It answers in plain text or by
calling ``final_answer`` (argument schema :class:`AnswerDraft`). A reply that calls tools
*and* answers runs the tools and ignores the premature answer. Unknown tools, undecodable or
invalid arguments and invalid final answers become error observations sent back to it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from pydantic import ValidationError

from sleuth.agents.answer import AnswerDraft
from sleuth.agents.chained import HOP_SECTIONS, Hop, chained_draft, next_question, read_hop
from sleuth.agents.citations import clean_answer_text
from sleuth.agents.drafting import draft_from_text
from sleuth.agents.generation import evidence_section, generate_draft
from sleuth.agents.heuristic import compose_answer, rank_sections, with_bridges
from sleuth.agents.multihop import run_hop_starts
from sleuth.agents.reasoner import Decision
from sleuth.agents.reflection import CRITIQUE_NOTE
from sleuth.agents.state import AgentState, RunStatus, ToolCallRequest
from sleuth.errors import ContextWindowExceeded
from sleuth.llm import calls
from sleuth.llm.toolcalls import NormalizedReply, ToolCallNormalizer, content_parts
from sleuth.prompts import load_prompt
from sleuth.tools.base import RunContext, ToolRegistry, json_parameters

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

FINAL_TOOL = "final_answer"
FIX_HINT = "Please fix your mistakes."
SYNTHESIS_SECTIONS = 5
"""Sections the final answer is written from (the guided generator reads as many)."""
MIN_SEARCHES_BEFORE_DECLINE = 2
"""A model's "insufficient context" after fewer searches is sent back once: search again."""
BRIDGE_CALL_PREFIX = "call_bridge_"
"""Id prefix of the ``follow_references`` calls of the bridge step (:func:`_bridge_step`)."""
REVISION_CALL_PREFIX = "call_revision_"
"""Id prefix of the search the critique asked for (:func:`_revision_step`)."""
HOP_CALL_PREFIX = "call_hop_"
"""Id prefix of a compositional question's hop searches (:meth:`LLMReasoner._chain_step`)."""
HOPS_KEY = "sleuth_hops"
"""Where a hop turn keeps the hops answered before it (``additional_kwargs``)."""
BRIDGE_FROM = 3
"""Top-ranked sections whose links the bridge step may follow."""
MAX_BRIDGE_FOLLOWS = 2


def final_answer_spec() -> dict[str, Any]:
    """The ``final_answer`` tool's OpenAI-style function spec (parameters: AnswerDraft)."""
    return {
        "type": "function",
        "function": {
            "name": FINAL_TOOL,
            "description": "Give the final answer (citing results as [1], [2]) and end the run.",
            "parameters": json_parameters(AnswerDraft),
        },
    }


def _validation_message(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors()
    )


class LLMReasoner:
    """Function-calling ReAct reasoner over any LangChain chat model."""

    def __init__(self, model: BaseChatModel, name: str = "llm") -> None:
        self.model = model
        self.name = name

    def _prompt(self, state: AgentState) -> list[BaseMessage]:
        system = load_prompt("react_system").replace("{collection}", state.collection)
        if state.plan is not None:
            system += (
                "\n\nYour plan (follow it; adapt when an observation contradicts it): "
                + state.plan.render()
            )
        return [SystemMessage(system), HumanMessage(state.original_query), *state.messages]

    def decide(self, state: AgentState, ctx: RunContext, tools: ToolRegistry) -> Decision:
        # the first step always searches: the agent looks at the evidence before answering
        # (small models otherwise answer from memory); later steps are the model's choice
        revision = _revision_step(state, ctx, tools)
        if revision is not None:
            return revision
        held = _held_answer(state)
        if held is not None and _is_held_turn(_last_call_turn(state), BRIDGE_CALL_PREFIX):
            deeper = _bridge_step(state, ctx, tools, held, follow=False)
            if deeper is not None:
                return deeper
        if held is not None:
            chained = self._chain_step(state, ctx, tools, held)
            if chained is not None:
                return chained
            # the last round followed the top sections' links: the answer is written now,
            # from the evidence with the bridges in it (the model is not asked again)
            draft = self.synthesize(state.original_query, ctx, lambda: held)
            revised = _is_held_turn(_last_call_turn(state), REVISION_CALL_PREFIX)
            return Decision(
                thought=f"The {'search is done' if revised else 'links are followed'}; the "
                "answer is written from the best sections found.",
                draft=draft,
                message=AIMessage(_spoken(draft)),
            )
        first = not ctx.searches and "rag_search" in tools
        specs = [*tools.specs(), final_answer_spec()]
        bound = self.model.bind_tools(specs, tool_choice="rag_search" if first else "auto")
        reply = calls.invoke(bound, self._prompt(state))
        if not isinstance(reply, AIMessage):
            reply = AIMessage(content=str(getattr(reply, "content", reply)))
        ctx.add_usage(dict(reply.usage_metadata or {}))
        parsed = ToolCallNormalizer(specs).normalize(reply)
        decision = self._decision(state, parsed, first=first, searches=len(ctx.searches))
        if decision.draft is not None and ctx.retrieved and _knowledge_base_only(state, tools):
            bridge = _bridge_step(state, ctx, tools, decision.draft)
            if bridge is not None:
                return bridge
            chained = self._chain_step(state, ctx, tools, decision.draft)
            if chained is not None:
                return chained
            loop_draft = decision.draft
            decision.draft = self.synthesize(state.original_query, ctx, lambda: loop_draft)
            decision.thought += " (the answer is written from the best sections found)"
        return decision

    def synthesize(
        self, question: str, ctx: RunContext, fallback: Callable[[], AnswerDraft]
    ) -> AnswerDraft:
        """The final answer, written by the model from the run's best evidence (runs that
        read only the knowledge base; sleuth's own tools, not an MCP server's).

        The loop's history is long (every observation) and a small model answers from it
        poorly; once it decides to answer (or to decline), the sections it found are ranked
        for the question (:func:`~sleuth.agents.heuristic.rank_sections`, each of the top
        ones followed by the section it links to, :func:`~sleuth.agents.heuristic.with_bridges`)
        and handed, numbered as in the run, to the guided generator's prompt
        (:func:`~sleuth.agents.guided.agents.generate_draft`). ``fallback`` (the loop's own
        answer) when the call fails or nothing was retrieved.
        """
        ranked = [sid for sid, _ in rank_sections(question, ctx)]
        top = with_bridges(ranked[:3], ranked, ctx)
        ids = list(dict.fromkeys([*top, *ranked]))
        evidence = [evidence_section(sid, ctx) for sid in ids[:SYNTHESIS_SECTIONS]]
        if not evidence:
            return fallback()
        result = generate_draft(
            question, evidence, self.model, fallback=fallback, usage=ctx.add_usage
        )
        return result.value

    def _chain_step(
        self, state: AgentState, ctx: RunContext, tools: ToolRegistry, held: AnswerDraft
    ) -> Decision | None:
        """A compositional question answered hop by hop (:mod:`sleuth.agents.chained`), once
        the loop holds an answer: each sub-question is a visible ``rag_search`` round
        (:data:`HOP_SECTIONS` sections); at the next step the model reads what it found, and
        its answer fills the next query. The hops answered so far travel in the hop turn
        (:data:`HOPS_KEY`). Returns the next hop's round, or the chain's answer once the
        filled question is answered; ``None`` (the answer is synthesised as before) when the
        question is not compositional, a hop finds no answer, the run has no round left, or
        the chain already ran.
        """
        if "rag_search" not in tools or not _knowledge_base_only(state, tools):
            return None
        last = _last_call_turn(state)
        hops: list[Hop] = []
        if isinstance(last, AIMessage) and _is_held_turn(last, HOP_CALL_PREFIX):
            hops = [Hop.from_dict(h) for h in last.additional_kwargs.get(HOPS_KEY, [])]
            hops.append(self._read_hop(str(last.tool_calls[0]["args"]["query"]), ctx))
        elif any(_is_held_turn(m, HOP_CALL_PREFIX) for m in state.messages):
            return None
        asked = next_question(state.original_query, hops)
        if asked is None:
            draft = chained_draft(hops)
            if draft is None:
                return None
            return Decision(
                thought="The chain is answered: "
                + "; ".join(f"'{h.question}' → '{h.answer}'" for h in hops)
                + ".",
                draft=draft,
                message=AIMessage(_spoken(draft)),
                checked=True,
            )
        if state.iteration_count + 1 >= state.max_iterations:
            return None
        call = ToolCallRequest(
            id=f"{HOP_CALL_PREFIX}{state.iteration_count}",
            name="rag_search",
            arguments={"query": asked, "top_k": HOP_SECTIONS},
        )
        if hops:
            thought = f"'{hops[-1].question}' → '{hops[-1].answer}'; next, searching '{asked}'."
        else:
            thought = f"The question describes what it asks about: first, searching '{asked}'."
        return Decision(
            thought=thought,
            tool_calls=[call],
            message=AIMessage(
                content=thought,
                tool_calls=[{"name": call.name, "args": call.arguments, "id": call.id}],
                additional_kwargs={HOPS_KEY: [h.to_dict() for h in hops]},
            ),
            held=held,
        )

    def _read_hop(self, question: str, ctx: RunContext) -> Hop:
        """The model's answer to one hop's question from the sections its search found."""
        ids = ctx.found.get(question, [])[:HOP_SECTIONS]
        evidence = [evidence_section(sid, ctx) for sid in ids if sid in ctx.retrieved]
        return read_hop(question, evidence, self.model, usage=ctx.add_usage)[0]

    def _decision(
        self, state: AgentState, parsed: NormalizedReply, first: bool, searches: int = 1
    ) -> Decision:
        thought = clean_answer_text(parsed.text) if parsed.calls or parsed.errors else ""
        if parsed.thinking:
            thought = (parsed.thinking + ("\n" + thought if thought else "")).strip()
        tool_calls = [c for c in parsed.calls if c.name != FINAL_TOOL]
        finals = [c for c in parsed.calls if c.name == FINAL_TOOL]
        errors = [e.message + " " + FIX_HINT for e in parsed.errors]
        calls = [ToolCallRequest(id=c.id, name=c.name, arguments=c.arguments) for c in tool_calls]
        notes: list[str] = []
        draft: AnswerDraft | None = None
        if finals and calls:
            notes.append("a final answer given together with tool calls was ignored")
        elif finals:
            try:
                draft = AnswerDraft.model_validate(finals[0].arguments)
            except ValidationError as exc:
                errors.append(
                    f"Error: invalid {FINAL_TOOL} arguments: {_validation_message(exc)}. "
                    + FIX_HINT
                )
        elif not calls and not parsed.errors:
            draft = draft_from_text(parsed.text)
            if draft is None and parsed.thinking:
                errors.append(
                    "Error: the reply held only reasoning (a <think> block that never closed, "
                    f"or nothing after it), no tool call and no answer. Call a tool or answer. "
                    f"{FIX_HINT}"
                )
            elif draft is None:
                errors.append(f"Error: empty reply. Call a tool or answer. {FIX_HINT}")
        if (
            draft is not None
            and draft.is_insufficient_context
            and searches < MIN_SEARCHES_BEFORE_DECLINE
            and not any("search again" in str(m.content) for m in state.messages[-4:])
        ):
            # a small model gives up after one search: it is asked once to try other words
            draft = None
            errors.append(
                "Before concluding that the knowledge base lacks the answer, call rag_search "
                "again with different key words (for a question about 'the X of the Y', search "
                "for Y first, then for X with Y's name)."
            )
        if first and not calls:
            # the evidence comes first: a model that answers (or errs) before searching is
            # made to search with the question itself (an answer it wrote is not used)
            calls = [
                ToolCallRequest(
                    id=f"call_search_{state.iteration_count}",
                    name="rag_search",
                    arguments={"query": state.original_query},
                )
            ]
            notes.append("the model did not call rag_search first; searching with the question")
            draft = None
        message = _history_message(parsed, calls, finals)
        feedback: list[BaseMessage] = []
        for error in parsed.errors:
            feedback.append(
                ToolMessage(
                    error.message + " " + FIX_HINT,
                    tool_call_id=error.id,
                    name=error.name or "unknown_tool",
                )
            )
        if finals and calls:  # every call in the history gets an answer
            feedback.extend(
                ToolMessage(
                    "Ignored: give the final answer after reading the tool results.",
                    tool_call_id=c.id,
                    name=FINAL_TOOL,
                )
                for c in finals
            )
        if draft is None and not calls and errors and not parsed.errors:
            feedback.append(HumanMessage(" ".join(errors)))
        if notes:
            thought = (thought + " " if thought else "") + "(" + "; ".join(notes) + ")"
        if draft is not None:
            return Decision(thought=thought or "I have the answer.", draft=draft, message=message)
        return Decision(
            thought=thought or (thought_for(calls) if calls else "The reply was not usable."),
            tool_calls=calls,
            errors=errors,
            message=message,
            feedback=feedback,
        )

    def repair(
        self, state: AgentState, ctx: RunContext
    ) -> Callable[[str, AnswerDraft], AnswerDraft | None]:
        """The repair round of :func:`~sleuth.agents.finish.finish_answer`: the model is
        shown its draft and told what was wrong; its new plain-text answer is read (None
        when the call fails or the reply is empty)."""

        def run(problem: str, draft: AnswerDraft) -> AnswerDraft | None:
            messages = [*self._prompt(state)]
            if messages and isinstance(messages[-1], AIMessage):  # the draft's own turn
                messages = messages[:-1]
            messages += [AIMessage(draft.answer_text), HumanMessage(problem)]
            try:
                reply = calls.invoke(self.model, messages, stream_answer=True)
            except ContextWindowExceeded:
                raise
            except Exception:
                return None
            ctx.add_usage(dict(getattr(reply, "usage_metadata", None) or {}))
            text, _ = content_parts(reply.content, getattr(reply, "additional_kwargs", None))
            return draft_from_text(text)

        return run

    def conclude(self, state: AgentState, ctx: RunContext, reason: RunStatus) -> AnswerDraft:
        """The answer when the loop was stopped (iterations, timeout, repeats): written from
        the evidence found so far (:meth:`synthesize`), else extractive."""
        question = state.original_query
        return self.synthesize(question, ctx, lambda: compose_answer(question, ctx))


def _spoken(draft: AnswerDraft) -> str:
    """A draft as the assistant turn that says it (the answer prompts' labelled form, which
    :func:`~sleuth.agents.drafting.draft_from_text` reads back)."""
    if draft.short_answer and not draft.is_insufficient_context:
        return f"Answer: {draft.short_answer}\nExplanation: {draft.answer_text}"
    return draft.answer_text


def _bridge_step(
    state: AgentState,
    ctx: RunContext,
    tools: ToolRegistry,
    draft: AnswerDraft,
    follow: bool = True,
) -> Decision | None:
    """Before the answer is written: follow the links of the best sections found, and the
    question's multi-hop chain.

    The second hop of a multi-hop question ("the director of the film in which X debuted")
    is usually a section the top hit names but that shares few words with the question, and
    a small model seldom calls ``follow_references`` or ``next_hop`` itself. When the model
    answers (or declines), up to :data:`MAX_BRIDGE_FOLLOWS` of the :data:`BRIDGE_FROM`
    best-ranked sections that cite or name sections not yet retrieved are followed, and
    ``next_hop`` runs from where the chain stands
    (:func:`~sleuth.agents.multihop.hop_starts`), as a visible tool round; the model's answer
    is held in that turn and the next THINK writes the final answer from the evidence
    (:func:`_held_answer`). ``follow=False`` (the rounds after the first): only the chain's
    next hop. None when there is nothing to follow, the tools are absent, the run has no
    tool round left, or the step was already taken. The held answer is the synthesis's
    fallback.
    """
    if state.iteration_count + 1 >= state.max_iterations:
        return None
    if follow and any(_is_held_turn(m, BRIDGE_CALL_PREFIX) for m in state.messages):
        return None
    sources: list[str] = []
    if follow and "follow_references" in tools:
        ranked = [sid for sid, _ in rank_sections(state.original_query, ctx)][:BRIDGE_FROM]
        sources = [
            sid
            for sid in ranked
            if sid not in ctx.followed
            and any(
                r.target_id and r.target_id != sid and r.target_id not in ctx.retrieved
                for c in ctx.retrieved.get(sid, [])
                for r in c.references
            )
        ][:MAX_BRIDGE_FOLLOWS]
    starts: list[str] = []
    if "next_hop" in tools:
        starts = run_hop_starts(state.original_query, ctx)
    requests = [("follow_references", {"source_id": sid}) for sid in sources] + [
        ("next_hop", {"question": state.original_query, "source_id": sid}) for sid in starts
    ]
    if not requests:
        return None
    calls = [
        ToolCallRequest(
            id=f"{BRIDGE_CALL_PREFIX}{state.iteration_count}_{i}", name=name, arguments=args
        )
        for i, (name, args) in enumerate(requests)
    ]
    message = AIMessage(
        content=_spoken(draft),
        tool_calls=[{"name": c.name, "args": c.arguments, "id": c.id} for c in calls],
    )
    said = []
    if sources:
        said.append(f"following the links of {', '.join(sources)}")
    if starts:
        said.append(f"searching the next hop from {', '.join(starts)}")
    return Decision(
        thought=f"Before answering, {' and '.join(said)}: the rest of the answer may be in a "
        "section they cite or name.",
        tool_calls=calls,
        message=message,
        held=draft,
    )


def _revision_step(state: AgentState, ctx: RunContext, tools: ToolRegistry) -> Decision | None:
    """After a critique that found a gap: run the search it names, holding the draft.

    The critic (:mod:`sleuth.agents.reflection`) names the search that would fill the gap;
    a small model asked to revise mostly answers again without searching, which costs a long
    call and adds no evidence. So the search runs as a visible tool round, and the answer is
    then written again from the evidence (:func:`_held_answer`), the critiqued draft held as
    the fallback. None when the last turn is not a critique with a search to run, or the
    run has read other tools than the knowledge base's.
    """
    critique = state.critique
    last = state.messages[-1] if state.messages else None
    if (
        critique is None
        or not critique.needs_revision
        or not critique.revision_query
        or "rag_search" not in tools
        or critique.revision_query in ctx.searches
        or not isinstance(last, HumanMessage | ToolMessage)
        or not str(last.content).startswith(CRITIQUE_NOTE)
        or not _knowledge_base_only(state, tools)
    ):
        return None
    call = ToolCallRequest(
        id=f"{REVISION_CALL_PREFIX}{state.iteration_count}",
        name="rag_search",
        arguments={"query": critique.revision_query},
    )
    return Decision(
        thought=f"Revising: searching '{critique.revision_query}' for what the critique found "
        "missing; the answer is then written again from the evidence.",
        tool_calls=[call],
        message=AIMessage(
            content="Searching for what the critique found missing.",
            tool_calls=[{"name": call.name, "args": call.arguments, "id": call.id}],
        ),
        held=state.held_draft,
    )


def _is_held_turn(message: BaseMessage | None, prefix: str = "") -> bool:
    """An assistant turn of calls the reasoner made while holding an answer (the bridge
    step, the critique's search, or a chain's hop; ``prefix`` narrows to one)."""
    prefixes = (prefix,) if prefix else (BRIDGE_CALL_PREFIX, REVISION_CALL_PREFIX, HOP_CALL_PREFIX)
    return isinstance(message, AIMessage) and any(
        str(c.get("id") or "").startswith(prefixes) for c in message.tool_calls
    )


def _last_call_turn(state: AgentState) -> BaseMessage | None:
    """The last assistant turn of the history."""
    return next((m for m in reversed(state.messages) if isinstance(m, AIMessage)), None)


def _held_answer(state: AgentState) -> AnswerDraft | None:
    """The answer held by the bridge or revision step just taken (the history ends with that
    turn's tool results), else None."""
    tail = state.messages
    end = len(tail)
    while end and isinstance(tail[end - 1], ToolMessage):
        end -= 1
    if end == len(tail) or not end or not _is_held_turn(tail[end - 1]):
        return None
    return state.held_draft


def _knowledge_base_only(state: AgentState, tools: ToolRegistry) -> bool:
    """Whether every tool the loop ran read the knowledge base (or memory): an answer that
    rests on another tool's observation (an MCP tool) keeps the loop's own wording, since
    the synthesis from sections would not see it. Error observations (unknown tools, the
    ignored premature answer) do not count."""
    ran = {m.name for m in state.messages if isinstance(m, ToolMessage)}
    return not any(tool.external for tool in map(tools.get, ran) if tool is not None)


def _history_message(
    parsed: NormalizedReply, calls: list[ToolCallRequest], finals: list[Any]
) -> AIMessage:
    """The assistant turn as the conversation keeps it: the calls in structured form.

    Calls read from text become structured ``tool_calls`` (servers then render them with the
    model's own template, and each gets its ``ToolMessage``); rejected calls are kept with
    empty arguments so their error observations have a call to answer.
    """
    structured = [{"name": c.name, "args": c.arguments, "id": c.id} for c in calls]
    structured += [{"name": f.name, "args": f.arguments, "id": f.id} for f in finals]
    structured += [
        {"name": e.name or "unknown_tool", "args": {}, "id": e.id} for e in parsed.errors
    ]
    content = parsed.text if not structured else clean_answer_text(parsed.text)
    if structured and not content.strip():
        # some OpenAI-compatible servers reject an assistant turn with null content
        content = thought_for(calls) if calls else "Calling a tool."
    return AIMessage(content=content, tool_calls=structured)


def thought_for(calls: list[ToolCallRequest]) -> str:
    """A one-line description of tool calls, used when the model gave no thought."""
    return (
        "Calling "
        + ", ".join(f"{c.name}({json.dumps(c.arguments, ensure_ascii=False)})" for c in calls)
        + "."
    )
