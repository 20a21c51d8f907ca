"""Agent state and steps (the ``AgentState`` / ``AgentStep`` of the ReAct seed design).

``AgentState`` is also the LangGraph state schema: list fields carry reducers, so a node
returns only what it changes.
"""

from __future__ import annotations

import operator
import time
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Annotated, Any

from langchain_core.messages import AnyMessage
from langgraph.graph.message import add_messages
from pydantic import BaseModel, Field

from sleuth.agents.answer import AnswerDraft, GeneratedAnswer
from sleuth.agents.planning import ReactPlan
from sleuth.agents.reflection import Critique


class AgentStepType(StrEnum):
    OBSERVE = "observe"
    THINK = "think"
    ACT = "act"
    FINAL = "final"


class RunStatus(StrEnum):
    """Why a run ended."""

    COMPLETED = "completed"
    INSUFFICIENT_CONTEXT = "insufficient_context"
    MAX_ITERATIONS = "max_iterations"
    REPEATED_ACTION = "repeated_action"
    TIMEOUT = "timeout"
    ERROR = "error"


class ToolCallRequest(BaseModel):
    """A tool call chosen by the reasoner (already parsed)."""

    id: str
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class AgentStep(BaseModel):
    """One step of the loop, as shown in traces and stored with the run."""

    step_type: AgentStepType
    content: str
    tool_calls: list[dict[str, Any]] | None = None
    tool_results: list[dict[str, Any]] | None = None
    reasoning: str | None = None
    timestamp: float = Field(default_factory=time.time)


@dataclass
class AgentState:
    """State carried across ReAct iterations (the LangGraph state schema)."""

    task_id: str
    collection: str
    original_query: str
    user_id: str | None = None
    max_iterations: int = 10
    steps: Annotated[list[AgentStep], operator.add] = field(default_factory=list)
    messages: Annotated[list[AnyMessage], add_messages] = field(default_factory=list)
    available_tools: list[str] = field(default_factory=list)
    pending_calls: list[ToolCallRequest] = field(default_factory=list)
    iteration_count: int = 0
    parse_failures: int = 0
    repeats: int = 0
    is_complete: bool = False
    draft: AnswerDraft | None = None
    held_draft: AnswerDraft | None = None
    """An answer the reasoner held while its last tool round ran (``Decision.held``)."""
    draft_checked: bool = False
    """The draft was checked as it was built (``Decision.checked``): the critic skips it."""
    plan: ReactPlan | None = None
    replans: int = 0
    critique: Critique | None = None
    reflections: int = 0
    stop_status: RunStatus | None = None
    final_answer: GeneratedAnswer | None = None
    status: RunStatus | None = None
