"""The structured-output bridge: one typed object from a chat model, or the fallback.

:func:`call_structured` asks a model for an instance of a Pydantic schema the way
``with_structured_output`` does: the schema is bound as the only tool and forced with
``tool_choice``; a reply in plain content holding JSON is accepted too (parsed leniently with
``json_repair``). An output that fails validation (the schema's own validators, then an
optional extra ``validator``) is sent back to the model with the error, up to
``max_retries`` times; after that — or at once when the model raises, or when there is no
model (``SLEUTH_LLM=heuristic``) — the heuristic ``fallback`` gives the value.

The result records which path produced the value and how many retries it took, for the
run's ``output_validation_retries`` trace.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar

import json_repair
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from pydantic import BaseModel, ValidationError

from sleuth.errors import ContextWindowExceeded
from sleuth.llm import calls
from sleuth.llm.toolcalls import ToolCallNormalizer, message_text
from sleuth.tools.base import json_parameters

if TYPE_CHECKING:
    from langchain_core.language_models import BaseChatModel

T = TypeVar("T", bound=BaseModel)

StructuredPath = Literal["llm", "llm_after_retry", "fallback", "heuristic"]
FIX_HINT = "Please fix your mistakes."
_FENCE = re.compile(r"^```[a-zA-Z]*\s*|\s*```$")


@dataclass
class StructuredResult(Generic[T]):
    """The outcome of :func:`call_structured`.

    Attributes:
        value: the validated object (from the model, or from the fallback).
        path: ``"llm"`` (first reply valid), ``"llm_after_retry"`` (valid after one or more
            corrections), ``"fallback"`` (no model, a model error, or still invalid after
            ``max_retries`` corrections), ``"heuristic"`` (the model was not asked: the
            heuristic was confident, see the guided runtime's ``llm_agents="auto"``).
        retries: how many times an invalid output was sent back to the model (0 without a
            model; ``max_retries`` when every output was invalid).
        errors: the validation / call errors met, in order.
    """

    value: T
    path: StructuredPath
    retries: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def from_model(self) -> bool:
        return self.path in ("llm", "llm_after_retry")


def tool_name_for(schema: type[BaseModel]) -> str:
    """Snake-case tool name for a schema (``CragVerdict`` → ``crag_verdict``)."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", schema.__name__).lower()


def schema_tool(
    schema: type[BaseModel], name: str, description: str | None = None
) -> dict[str, Any]:
    """OpenAI-style function spec whose parameters are ``schema``'s JSON schema."""
    parameters = json_parameters(schema)
    doc = description or (schema.__doc__ or name).strip().splitlines()[0]
    return {
        "type": "function",
        "function": {"name": name, "description": doc, "parameters": parameters},
    }


def validation_message(exc: ValidationError) -> str:
    """``loc: msg; loc: msg`` for a pydantic error (what the model is told)."""
    return "; ".join(
        f"{'.'.join(str(p) for p in e['loc']) or 'value'}: {e['msg']}" for e in exc.errors()
    )


def _json_object(text: str) -> dict[str, Any] | None:
    """The JSON object in a plain reply (code fences and surrounding prose tolerated)."""
    stripped = _FENCE.sub("", text.strip())
    start, end = stripped.find("{"), stripped.rfind("}")
    if start < 0 or end <= start:
        return None
    data = json_repair.loads(stripped[start : end + 1])
    return data if isinstance(data, dict) else None


def _unwrap(data: dict[str, Any], name: str) -> dict[str, Any]:
    """Accept ``{"tool": name, "arguments": {...}}`` and ``{name: {...}}`` wrappings."""
    for key in ("arguments", "args", "parameters"):
        inner = data.get(key)
        if isinstance(inner, dict) and set(data) <= {key, "tool", "name", "function"}:
            return inner
    inner = data.get(name)
    if isinstance(inner, dict) and len(data) == 1:
        return inner
    return data


def parse_reply(
    reply: AIMessage,
    schema: type[T],
    name: str,
    validator: Callable[[T], None] | None = None,
) -> tuple[T | None, str | None]:
    """Read a ``schema`` instance from a model reply.

    The reply is read by the LLM layer's normaliser (:mod:`sleuth.llm.toolcalls`): a call
    named ``name`` (else the first call), structured or written as text in any form, with its
    arguments decoded; else a JSON object in the text content (the bare arguments).

    Returns:
        ``(value, None)`` when valid, else ``(None, error message for the model)``.
    """
    data: Any = None
    parsed = ToolCallNormalizer({name: None}).normalize(reply)
    mine = [c for c in parsed.calls if c.name == name]
    if mine or parsed.calls:
        data = (mine or parsed.calls)[0].arguments
    elif parsed.errors:
        error = parsed.errors[0]
        if error.name == name or not error.name:
            raw = error.raw
            return None, f"Error: the arguments of `{name}` are not a valid JSON object: {raw!r}."
        # a call of another tool name: its arguments may still be this schema's object
        data = _json_object(error.raw) if error.raw else None
        if data is None:
            return None, f"Error: call the `{name}` tool, not `{error.name}`."
    else:
        text = parsed.text
        if not text.strip():
            return None, f"Error: empty reply. Call the `{name}` tool."
        data = _json_object(text)
        if data is None:
            return None, (
                f"Error: the reply is not a `{name}` call nor a JSON object. "
                f"Call the `{name}` tool with the required arguments."
            )
    if not isinstance(data, dict):
        return None, f"Error: the arguments of `{name}` must be a JSON object."
    try:
        value = schema.model_validate(_unwrap(data, name))
    except ValidationError as exc:
        return None, f"Error: invalid `{name}` arguments: {validation_message(exc)}."
    if validator is not None:
        try:
            validator(value)
        except ValueError as exc:
            return None, f"Error: invalid `{name}` arguments: {exc}."
    return value, None


def _feedback(reply: AIMessage, error: str, name: str) -> list[BaseMessage]:
    """Messages that tell the model what was wrong with ``reply``.

    Every tool call id of the reply gets a ``ToolMessage`` (providers require one answer per
    call); a reply without tool calls gets a human turn.
    """
    ids = [c.get("id") for c in reply.tool_calls] + [c.get("id") for c in reply.invalid_tool_calls]
    text = f"{error} {FIX_HINT}"
    if ids and all(ids):
        return [ToolMessage(text, tool_call_id=str(i), name=name) for i in ids]
    return [HumanMessage(text)]


def _bind(model: BaseChatModel, spec: dict[str, Any], name: str) -> tuple[Any, bool]:
    """The model with ``spec`` bound and forced; ``(model, False)`` if it cannot bind tools."""
    try:
        return model.bind_tools([spec], tool_choice=name), True
    except NotImplementedError:
        return model, False


def call_structured(
    model: BaseChatModel | None,
    schema: type[T],
    messages: Sequence[BaseMessage],
    *,
    max_retries: int = 2,
    fallback: Callable[[], T],
    name: str | None = None,
    validator: Callable[[T], None] | None = None,
    usage: Callable[[dict[str, int]], None] | None = None,
) -> StructuredResult[T]:
    """Ask ``model`` for one ``schema`` object; correct it up to ``max_retries`` times.

    Args:
        model: a LangChain chat model, or ``None`` (heuristic mode: the fallback at once).
        schema: the Pydantic model to return (bound as the only tool, forced by name).
        messages: the prompt (system + human turns).
        max_retries: corrections allowed after the first invalid output (≥ 0).
        fallback: builds the value when the model is absent, fails, or stays invalid; it
            must not raise.
        name: the tool name (default: the schema's name in snake case).
        validator: an extra output validator; raises ``ValueError`` with a message the
            model can act on (e.g. "cite only the given source_ids").
        usage: receives each reply's ``usage_metadata`` (token counts).

    Returns:
        A :class:`StructuredResult`; ``retries`` counts corrections sent to the model.

    Errors: none raised — model exceptions (network, server) are recorded in ``errors``
    and end the attempts (a correction cannot fix them); the fallback answers.
    """
    if model is None:
        return StructuredResult(value=fallback(), path="fallback")
    name = name or tool_name_for(schema)
    spec = schema_tool(schema, name)
    bound, tools_bound = _bind(model, spec, name)
    conversation = list(messages)
    if not tools_bound:
        schema_json = json.dumps(spec["function"]["parameters"])
        conversation.append(
            HumanMessage(f"Reply with only one JSON object matching this schema: {schema_json}")
        )
    errors: list[str] = []
    retries = 0
    for attempt in range(max_retries + 1):
        retries = attempt
        try:
            reply = calls.invoke(bound, conversation)
        except ContextWindowExceeded:
            raise  # a configuration fault the fallback would hide as missing evidence
        except Exception as exc:
            errors.append(f"{type(exc).__name__}: {exc}")
            break
        if not isinstance(reply, AIMessage):
            reply = AIMessage(content=message_text(reply))
        if usage is not None and reply.usage_metadata:
            usage(dict(reply.usage_metadata))
        value, error = parse_reply(reply, schema, name, validator)
        if value is not None:
            return StructuredResult(
                value=value,
                path="llm" if attempt == 0 else "llm_after_retry",
                retries=attempt,
                errors=errors,
            )
        errors.append(error or "invalid output")
        if attempt < max_retries:
            # a fresh id, so providers and graph reducers see a new assistant turn
            conversation.append(reply.model_copy(update={"id": None}))
            conversation.extend(_feedback(reply, error or "invalid output", name))
    return StructuredResult(value=fallback(), path="fallback", retries=retries, errors=errors)
