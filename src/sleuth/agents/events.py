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

from sleuth.agents.answer import GeneratedAnswer, capped
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


class AnswerDeltaEvent(_Event):
    """A piece of the answer text as the model writes it, before any check.

    Pieces of one ``stream`` add up to the model's reply; a later stream (a repair round,
    ReAct's next answer) replaces the text of the one before. The ``answer`` event that
    follows carries the checked answer, which is the one to keep.
    """

    type: Literal["answer_delta"] = "answer_delta"
    delta: str
    stream: int = Field(ge=1, description="Which answer stream the piece belongs to (1, 2, …)")


class AnswerEvent(_Event):
    """The final, citation-checked answer."""

    type: Literal["answer"] = "answer"
    answer: GeneratedAnswer
    status: str
    revised: bool = Field(
        default=False,
        description="True when answer text was streamed and the checks changed it (more "
        "than its citation markers, beyond adding to its end): show this answer in its place",
    )


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
    | AnswerDeltaEvent
    | AnswerEvent
    | DoneEvent
    | ErrorEvent,
    Field(discriminator="type"),
]
AgentEventAdapter: TypeAdapter[AgentEvent] = TypeAdapter(AgentEvent)

EventSink = Callable[[AgentEvent], None]


def revised(streamed: str, final: str) -> bool:
    """Whether ``final`` (the checked answer) changed ``streamed`` (the model's reply as it
    was generated) rather than only adding to it (quoted evidence after it): ``final`` does
    not open with what ``streamed`` says, compared without citation markers (``[1]`` became
    ``[BNS_S303]``), labels, case and spacing (:func:`~sleuth.agents.drafting.bare_text`)."""
    from sleuth.agents.drafting import bare_text

    return not bare_text(final).startswith(bare_text(streamed))


class EventEmitter:
    """Numbers events of one run and forwards them to sinks; keeps them for the run store.

    Thread-safe. ``seq`` starts at 1 and increases by one per event.
    """

    def __init__(self, task_id: str, sinks: list[EventSink] | None = None) -> None:
        self.task_id = task_id
        self.events: list[AgentEvent] = []
        self._sinks = list(sinks or [])
        self._lock = threading.Lock()
        self._stream = 0
        self._streamed: list[str] = []
        self._earlier: list[str] = []

    def emit(self, event: AgentEvent) -> AgentEvent:
        """Number ``event``, keep it and hand it to every sink; credential-shaped strings in
        it (retrieved text shown in an observation) are masked first
        (:func:`sleuth.agents.safety.mask_secrets`). An ``answer`` event after streamed text
        is marked ``revised`` when its text differs from any stream's (:func:`revised`): a
        draft the run set aside (a first reply a repair round replaced) was shown too, and
        must not be read as the answer."""
        event = masked(event)
        if isinstance(event, AnswerEvent):  # an answer's text is bounded (answer.capped)
            event.answer = capped(event.answer)
        if isinstance(event, AnswerDeltaEvent):
            with self._lock:
                if event.stream != self._stream:
                    if self._streamed:
                        self._earlier.append("".join(self._streamed))
                    self._stream, self._streamed = event.stream, []
                self._streamed.append(event.delta)
        elif isinstance(event, AnswerEvent) and self._stream:
            shown = [*self._earlier, "".join(self._streamed)]
            event.revised = any(revised(text, event.answer.answer_text) for text in shown)
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
