"""Typed run events: one schema shared by the CLI trace, the SSE stream and the run store.

Every run emits events with strictly increasing ``seq`` numbers (starting at 1), in the order
observe → think → tool_call → tool_result → … → answer, and exactly one terminal event:
``done`` or ``error``.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, TypeAdapter

from sleuth.agents.answer import GeneratedAnswer
from sleuth.agents.safety import masked


class _Event(BaseModel):
    seq: int = 0
    task_id: str = ""
    timestamp: float = Field(default_factory=time.time, description="Unix time, seconds")


class ObserveEvent(_Event):
    """What the agent knows at the start of a step (question, tools, evidence so far)."""

    type: Literal["observe"] = "observe"
    content: str


class ThinkEvent(_Event):
    """The reasoner's thought before it acts."""

    type: Literal["think"] = "think"
    content: str
    iteration: int


class ToolCallEvent(_Event):
    """A tool call chosen by the reasoner."""

    type: Literal["tool_call"] = "tool_call"
    call_id: str
    tool: str
    arguments: dict[str, Any]


class ToolResultEvent(_Event):
    """The observation returned by a tool call."""

    type: Literal["tool_result"] = "tool_result"
    call_id: str
    tool: str
    ok: bool
    status: str = Field(description="One-line status, e.g. 'found 5 sections'")
    preview: str = Field(description="Short preview of the payload for display")
    payload: dict[str, Any] = Field(default_factory=dict)
    duration_ms: float


class AnswerEvent(_Event):
    """The final, citation-checked answer."""

    type: Literal["answer"] = "answer"
    answer: GeneratedAnswer
    status: str


class DoneEvent(_Event):
    """Terminal event of a run that produced an answer."""

    type: Literal["done"] = "done"
    status: str


class ErrorEvent(_Event):
    """Terminal event of a run that failed."""

    type: Literal["error"] = "error"
    message: str


AgentEvent = Annotated[
    ObserveEvent
    | ThinkEvent
    | ToolCallEvent
    | ToolResultEvent
    | AnswerEvent
    | DoneEvent
    | ErrorEvent,
    Field(discriminator="type"),
]
AgentEventAdapter: TypeAdapter[AgentEvent] = TypeAdapter(AgentEvent)

EventSink = Callable[[AgentEvent], None]


class EventEmitter:
    """Numbers events of one run and forwards them to sinks; keeps them for the run store.

    Thread-safe. ``seq`` starts at 1 and increases by one per event.
    """

    def __init__(self, task_id: str, sinks: list[EventSink] | None = None) -> None:
        self.task_id = task_id
        self.events: list[AgentEvent] = []
        self._sinks = list(sinks or [])
        self._lock = threading.Lock()

    def emit(self, event: AgentEvent) -> AgentEvent:
        """Number ``event``, keep it and hand it to every sink; credential-shaped strings in
        it (retrieved text shown in an observation) are masked first
        (:func:`sleuth.agents.safety.mask_secrets`)."""
        event = masked(event)
        with self._lock:
            event.seq = len(self.events) + 1
            event.task_id = self.task_id
            self.events.append(event)
        for sink in self._sinks:
            sink(event)
        return event

    @property
    def terminated(self) -> bool:
        return bool(self.events) and self.events[-1].type in ("done", "error")
