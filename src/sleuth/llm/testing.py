"""Test doubles for chat models, shipped for users' tests and ours.

``ScriptedChatModel`` replays a fixed script of responses, one per call, and records what
it was asked; ``tool_call`` and ``final`` build the scripted messages. ``ALLOW_MODEL_REQUESTS``
is a process-wide switch read by :func:`sleuth.llm.factory.make_chat_model`: when it is
``False`` every real (non-heuristic) model is refused, so a test cannot reach a network
model or load weights by accident.

Example::

    model = ScriptedChatModel(
        [tool_call("search", {"query": "llama"}), final("Llamas are camelids [1].")]
    )
    agent_model = model.bind_tools([search])
    agent_model.invoke("What is a llama?").tool_calls[0]["name"]  # "search"
    model.bound_tool_names  # [] on the original; ["search"] on agent_model
"""

from __future__ import annotations

import json
import re
import threading
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.messages.tool import invalid_tool_call, tool_call_chunk
from langchain_core.messages.tool import tool_call as make_tool_call
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import ConfigDict, Field, PrivateAttr

ALLOW_MODEL_REQUESTS: bool = True
"""When ``False``, ``make_chat_model`` refuses to build any real model (tests set this)."""

ScriptedResponse = AIMessage | str | Callable[[list[BaseMessage]], AIMessage | str]
"""One step of a script: a message, a plain text answer, or ``(messages) -> AIMessage | str``."""


class ScriptExhaustedError(RuntimeError):
    """A ``ScriptedChatModel`` was called more times than its script has responses."""


@contextmanager
def block_model_requests(blocked: bool = True) -> Iterator[None]:
    """Temporarily set ``ALLOW_MODEL_REQUESTS`` to ``not blocked``; restores it on exit."""
    global ALLOW_MODEL_REQUESTS
    previous = ALLOW_MODEL_REQUESTS
    ALLOW_MODEL_REQUESTS = not blocked
    try:
        yield
    finally:
        ALLOW_MODEL_REQUESTS = previous


def _new_call_id() -> str:
    return f"call_{uuid.uuid4().hex[:12]}"


def tool_call(name: str, args: dict[str, Any] | str, id: str | None = None) -> AIMessage:
    """An ``AIMessage`` asking for one tool call, as a provider would return it.

    Args:
        name: the tool name.
        args: the arguments, as a dict, or as the raw JSON text the model emitted. Raw text
            that parses to a JSON object becomes a normal tool call; anything else (broken
            JSON, a JSON list...) lands in ``invalid_tool_calls`` with the same error text
            LangChain's OpenAI parser produces, and ``tool_calls`` stays empty.
        id: the tool call id; a random ``call_...`` id when omitted.

    Returns:
        ``AIMessage(content="", tool_calls=[...])`` or ``AIMessage(content="",
        invalid_tool_calls=[{"name", "args" (the raw string), "id", "error"}])``.
    """
    call_id = id or _new_call_id()
    if isinstance(args, dict):
        return AIMessage(content="", tool_calls=[make_tool_call(name=name, args=args, id=call_id)])
    try:
        parsed = json.loads(args) if args else {}
    except json.JSONDecodeError as exc:
        error = (
            f"Function {name} arguments:\n\n{args}\n\nare not valid JSON. "
            f"Received JSONDecodeError {exc}"
        )
    else:
        if isinstance(parsed, dict):
            return AIMessage(
                content="", tool_calls=[make_tool_call(name=name, args=parsed, id=call_id)]
            )
        error = f"Function {name} arguments must be a JSON object, got {type(parsed).__name__}"
    return AIMessage(
        content="",
        invalid_tool_calls=[invalid_tool_call(name=name, args=args, id=call_id, error=error)],
    )


def final(text: str) -> AIMessage:
    """An ``AIMessage`` with a final text answer and no tool calls."""
    return AIMessage(content=text)


class _ScriptState:
    """Script position and call log, shared by a model and every ``bind_tools`` copy."""

    def __init__(self) -> None:
        self.position = 0
        self.calls: list[list[BaseMessage]] = []
        self.call_tool_names: list[list[str]] = []
        self.lock = threading.Lock()


class ScriptedChatModel(BaseChatModel):
    """A chat model that returns scripted responses in order, one per ``invoke``/``ainvoke``.

    Args:
        responses: the script; each item is an ``AIMessage``, a string (a final answer), or a
            callable ``(messages) -> AIMessage | str`` computed at call time.
        repeat_last: after the script ends, keep returning the last response (default
            ``False``: raise ``ScriptExhaustedError``).

    Attributes:
        calls: every message list received, in order (shared with ``bind_tools`` copies).
        call_tool_names: for each call, the tool names bound on the model that got it.
        bound_tool_names / bound_tools: the tools of this copy (names / OpenAI schemas).
        bound_tool_choice, bound_kwargs: the other ``bind_tools`` arguments.
        remaining: how many scripted responses are left.

    Raises:
        ScriptExhaustedError: on a call past the end of the script without ``repeat_last``.
        TypeError: a callable response returned something other than an AIMessage or str.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    responses: list[Any] = Field(default_factory=list)
    repeat_last: bool = False
    bound_tools: list[dict[str, Any]] = Field(default_factory=list)
    bound_tool_choice: Any = None
    bound_kwargs: dict[str, Any] = Field(default_factory=dict)

    _state: _ScriptState = PrivateAttr(default_factory=_ScriptState)

    def __init__(self, responses: Sequence[ScriptedResponse] = (), **kwargs: Any) -> None:
        super().__init__(responses=list(responses), **kwargs)

    @property
    def _llm_type(self) -> str:
        return "sleuth-scripted"

    @property
    def calls(self) -> list[list[BaseMessage]]:
        return self._state.calls

    @property
    def call_tool_names(self) -> list[list[str]]:
        return self._state.call_tool_names

    @property
    def bound_tool_names(self) -> list[str]:
        return [tool["function"]["name"] for tool in self.bound_tools]

    @property
    def remaining(self) -> int:
        return max(len(self.responses) - self._state.position, 0)

    def bind_tools(
        self,
        tools: Sequence[Any],
        *,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> ScriptedChatModel:
        """A copy with ``tools`` recorded (as OpenAI tool schemas), sharing the script state.

        Args:
            tools: tools as accepted by ``convert_to_openai_tool`` (BaseTool, function,
                pydantic model, dict).
            tool_choice: recorded as ``bound_tool_choice``; not enforced.
            **kwargs: recorded as ``bound_kwargs``.
        """
        copy = self.model_copy(
            update={
                "bound_tools": [convert_to_openai_tool(tool) for tool in tools],
                "bound_tool_choice": tool_choice,
                "bound_kwargs": dict(kwargs),
            }
        )
        copy._state = self._state
        return copy

    def _next_response(self, messages: list[BaseMessage]) -> AIMessage:
        state = self._state
        with state.lock:
            state.calls.append(list(messages))
            state.call_tool_names.append(self.bound_tool_names)
            index = state.position
            repeated = False
            if index >= len(self.responses):
                if not (self.repeat_last and self.responses):
                    raise ScriptExhaustedError(
                        f"ScriptedChatModel script exhausted: it has {len(self.responses)} "
                        f"response(s) and this is call {index + 1}; pass more responses or "
                        "repeat_last=True"
                    )
                index = len(self.responses) - 1
                repeated = True
            state.position += 1
        response = self.responses[index]
        if callable(response) and not isinstance(response, BaseMessage):
            response = response(list(messages))
        if isinstance(response, str):
            return AIMessage(content=response)
        if not isinstance(response, AIMessage):
            raise TypeError(
                f"scripted response {index} must be an AIMessage or str, "
                f"got {type(response).__name__}"
            )
        message = response.model_copy(deep=True)
        if repeated:
            message.id = None  # a fresh id per repeat, so graph state appends, not replaces
        return message

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> ChatResult:
        return ChatResult(generations=[ChatGeneration(message=self._next_response(messages))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        """The scripted reply in pieces, one word (with its leading space) each, as a
        streaming server sends tokens; a reply with tool calls comes whole."""
        message = self._next_response(messages)
        text = message.content if isinstance(message.content, str) else ""
        calls = [(c["name"], json.dumps(c["args"]), c["id"]) for c in message.tool_calls]
        calls += [(c["name"], c["args"], c["id"]) for c in message.invalid_tool_calls]
        whole = AIMessageChunk(
            content="" if text and not calls else message.content,
            tool_call_chunks=[
                tool_call_chunk(name=name, args=args, id=call_id, index=i)
                for i, (name, args, call_id) in enumerate(calls)
            ],
            additional_kwargs=message.additional_kwargs,
            # a scripted reply is always whole: it says so as a streaming server does
            response_metadata={"finish_reason": "stop", **message.response_metadata},
            usage_metadata=message.usage_metadata,
        )
        if text and not calls:
            for piece in re.findall(r"\s*\S+", text):
                yield ChatGenerationChunk(message=AIMessageChunk(content=piece))
        yield ChatGenerationChunk(message=whole)
