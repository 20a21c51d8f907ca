"""The reasoner interface: what drives the ReAct graph's THINK step.

Two implementations share one graph: :class:`~sleuth.agents.heuristic.HeuristicReasoner`
(deterministic, no model) and :class:`~sleuth.agents.llm_reasoner.LLMReasoner` (a chat model
choosing tools by function calling).
"""

from __future__ import annotations

from typing import Protocol

from langchain_core.messages import AIMessage, BaseMessage
from pydantic import BaseModel, ConfigDict, Field

from sleuth.agents.answer import AnswerDraft
from sleuth.agents.state import AgentState, RunStatus, ToolCallRequest
from sleuth.tools.base import RunContext, ToolRegistry


class Decision(BaseModel):
    """The outcome of one THINK step.

    Exactly one of: ``tool_calls`` to execute, a ``draft`` final answer, or ``errors`` (the
    model's output could not be used; each error is sent back to it as an observation).
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    thought: str
    tool_calls: list[ToolCallRequest] = Field(default_factory=list)
    draft: AnswerDraft | None = None
    errors: list[str] = Field(default_factory=list)
    message: AIMessage | None = None
    feedback: list[BaseMessage] = Field(default_factory=list)
    held: AnswerDraft | None = None
    """With ``tool_calls``: an answer the reasoner holds while they run (kept in
    :attr:`AgentState.held_draft` for the next THINK step)."""
    checked: bool = False
    """With ``draft``: the reasoner checked it as it built it (each hop of a chained
    answer read from its own search), so the critic does not send it back for revision:
    a revision would answer the whole question again from all the evidence, the very
    reading the chain replaced."""


class Reasoner(Protocol):
    """Chooses the next action from the state, and writes the answer when forced to stop."""

    name: str

    def decide(self, state: AgentState, ctx: RunContext, tools: ToolRegistry) -> Decision:
        """The next step: tool calls, a final draft, or errors to send back."""
        ...

    def conclude(self, state: AgentState, ctx: RunContext, reason: RunStatus) -> AnswerDraft:
        """A final answer from the evidence so far (the loop was stopped for ``reason``)."""
        ...
