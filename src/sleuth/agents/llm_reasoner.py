"""The LLM reasoner: a chat model chooses tools by function calling.

The model sees the system prompt, the question and the conversation so far (its tool calls
and the tools' observations). It answers by calling the ``final_answer`` tool, whose
argument schema is :class:`AnswerDraft`; a plain-text reply is accepted as the answer too.
Malformed tool calls and invalid final answers become error observations sent back to it.
"""

from __future__ import annotations

import json
from typing import Any

import json_repair
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from pydantic import ValidationError

from sleuth.agents.answer import AnswerDraft
from sleuth.agents.citations import cited_ids, clean_answer_text
from sleuth.agents.heuristic import compose_answer
from sleuth.agents.reasoner import Decision
from sleuth.agents.state import AgentState, RunStatus, ToolCallRequest
from sleuth.prompts import load_prompt
from sleuth.tools.base import RunContext, ToolRegistry, json_parameters

FINAL_TOOL = "final_answer"
FIX_HINT = "Please fix your mistakes."
_INSUFFICIENT_MARKERS = ("insufficient context", "not enough information", "does not contain")


def final_answer_spec() -> dict[str, Any]:
    """The ``final_answer`` tool's OpenAI-style function spec (parameters: AnswerDraft)."""
    return {
        "type": "function",
        "function": {
            "name": FINAL_TOOL,
            "description": "Give the final, cited answer and end the run.",
            "parameters": json_parameters(AnswerDraft),
        },
    }


def _validation_message(exc: ValidationError) -> str:
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors()
    )


def draft_from_text(text: str) -> AnswerDraft | None:
    """Read a final answer from a model's plain reply: JSON if it is JSON, else prose."""
    stripped = text.strip()
    if not stripped:
        return None
    if stripped.startswith(("{", "```")):
        data = json_repair.loads(stripped.strip("`").removeprefix("json"))
        if isinstance(data, dict) and "answer_text" in data:
            try:
                return AnswerDraft.model_validate(data)
            except ValidationError:
                pass
    prose = clean_answer_text(stripped)
    if not prose:
        return None
    insufficient = any(m in prose.lower() for m in _INSUFFICIENT_MARKERS)
    return AnswerDraft(
        answer_text=prose,
        citations=[] if insufficient else cited_ids(prose),
        is_insufficient_context=insufficient,
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
        first = not ctx.searches and "rag_search" in tools
        bound = self.model.bind_tools(
            [*tools.specs(), final_answer_spec()],
            tool_choice="rag_search" if first else "auto",
        )
        reply = bound.invoke(self._prompt(state))
        if not isinstance(reply, AIMessage):
            reply = AIMessage(content=str(reply.content))
        ctx.add_usage(dict(reply.usage_metadata or {}))
        thought = clean_answer_text(_text(reply.content))
        errors: list[str] = []
        feedback: list[BaseMessage] = []
        calls: list[ToolCallRequest] = []
        draft: AnswerDraft | None = None

        def reject(message: str, call_id: str | None, name: str | None) -> None:
            errors.append(message)
            if call_id:
                feedback.append(ToolMessage(message, tool_call_id=call_id, name=name or "tool"))
            else:
                feedback.append(HumanMessage(message))

        for bad in reply.invalid_tool_calls:
            reject(
                f"Error: the arguments of your call to '{bad.get('name')}' are not valid JSON "
                f"({bad.get('error') or 'parse error'}): {bad.get('args')!r}. {FIX_HINT}",
                bad.get("id"),
                bad.get("name"),
            )
        for n, call in enumerate(reply.tool_calls):
            call_id = call.get("id") or f"call_{state.iteration_count}_{n}"
            if call["name"] != FINAL_TOOL:
                calls.append(ToolCallRequest(id=call_id, name=call["name"], arguments=call["args"]))
                continue
            try:
                draft = AnswerDraft.model_validate(call["args"])
            except ValidationError as exc:
                reject(
                    f"Error: invalid {FINAL_TOOL} arguments: {_validation_message(exc)}. "
                    + FIX_HINT,
                    call_id,
                    FINAL_TOOL,
                )
        if draft is not None:
            return Decision(thought=thought, draft=draft, message=reply)
        if calls and not _text(reply.content).strip():
            # some OpenAI-compatible servers reject an assistant turn with null content
            reply = reply.model_copy(update={"content": thought_for(calls)})
        if not reply.tool_calls and not reply.invalid_tool_calls:
            draft = draft_from_text(_text(reply.content))
            if draft is not None:
                return Decision(thought="I have the answer.", draft=draft, message=reply)
            reject(f"Error: empty reply. Call a tool or {FINAL_TOOL}. {FIX_HINT}", None, None)
        return Decision(
            thought=thought or (thought_for(calls) if calls else "The reply was not usable."),
            tool_calls=calls,
            errors=errors,
            message=reply,
            feedback=feedback,
        )

    def conclude(self, state: AgentState, ctx: RunContext, reason: RunStatus) -> AnswerDraft:
        messages = [*self._prompt(state)]
        if messages and isinstance(messages[-1], AIMessage) and messages[-1].tool_calls:
            messages = messages[:-1]
        messages.append(HumanMessage(load_prompt("react_final")))
        try:
            reply = self.model.invoke(messages)
            ctx.add_usage(dict(getattr(reply, "usage_metadata", None) or {}))
            draft = draft_from_text(_text(reply.content))
        except Exception:
            draft = None
        return draft or compose_answer(state.original_query, ctx)


def thought_for(calls: list[ToolCallRequest]) -> str:
    """A one-line description of tool calls, used when the model gave no thought."""
    return "Calling " + ", ".join(f"{c.name}({json.dumps(c.arguments)})" for c in calls) + "."


def _text(content: Any) -> str:
    """Flatten LangChain message content (a string or a list of parts) to text."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            part.get("text", "") if isinstance(part, dict) else str(part) for part in content
        )
    return json.dumps(content) if content is not None else ""
