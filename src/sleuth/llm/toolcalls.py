"""One normaliser for what chat models send back: text, thinking and tool calls in any form.

Real models and servers disagree on how a tool call travels. :class:`ToolCallNormalizer` reads
all the forms met in practice and returns one :class:`NormalizedReply`:

* structured ``tool_calls`` (OpenAI function calling), with ``arguments`` as an object or as
  a JSON-encoded string (also twice encoded);
* calls written as text in ``content``: ``<tool_call>{…}</tool_call>`` (Qwen, Hermes),
  ``{"name": …, "arguments": …}`` objects alone or one per line, the doubled braces
  ``{{"name": …}}`` some chat templates leak, fenced ```` ```json ```` blocks, ``{"tool": …,
  "args": …}`` spellings and ``functions.NAME:{…}``; several calls in one reply;
* content as a string or a list of parts (``text``, ``thinking``/``reasoning``, empty or
  ``None`` parts), plus ``<think>…</think>`` spans and ``reasoning_content``: text parts are
  joined, thinking is kept apart (shown as a thought, never part of an answer); a bare
  ``</think>`` with no opening tag makes everything before it thinking.

Arguments are checked against each tool's JSON schema where that can be done without the
tool itself: an argument object encoded as a string is decoded; a string property that holds
a JSON object (``{"query": "{\\"query\\": \\"murder\\"}"}``) is unwrapped when the object
names that same property, otherwise refused; a required property that is missing is an
error. An unknown tool name is an error that lists the valid tools. Errors are messages meant
for the model (sent back as observations), never exceptions.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import json_repair

_NAME_KEYS = ("name", "tool", "tool_name", "function", "action")
_ARG_KEYS = ("arguments", "args", "parameters", "input", "action_input", "tool_input")
_THINK_SPAN = re.compile(r"<(think|thinking|reasoning)>(.*?)(?:</\1>|$)", re.S | re.I)
_BARE_CLOSE = re.compile(r"(.*)</(?:think|thinking|reasoning)>", re.S | re.I)
"""Text up to the last closing reasoning tag whose opening tag the server left out (some
reasoning models' chat templates put ``<think>`` in the prompt, so only ``</think>`` comes
back): all of it is reasoning."""
_TOOL_TAG = re.compile(r"<tool_call>\s*(.*?)\s*(?:</tool_call>|$)", re.S | re.I)
_FENCE = re.compile(r"```[A-Za-z0-9_-]*[ \t]*\n?(.*?)(?:```|$)", re.S)
_FUNCTIONS_PREFIX = re.compile(r"functions\.([A-Za-z0-9_\-]+)\s*:?\s*(?=\{)")
_THINKING_TYPES = frozenset({"thinking", "reasoning", "reasoning_content", "redacted_thinking"})


@dataclass(frozen=True)
class ParsedCall:
    """A tool call ready to execute: a known tool name and an argument object."""

    name: str
    arguments: dict[str, Any]
    id: str


@dataclass(frozen=True)
class CallError:
    """A call that cannot be executed, with the message the model is told."""

    name: str | None
    id: str
    message: str
    raw: str = ""


@dataclass
class NormalizedReply:
    """A model reply read into its parts.

    Attributes:
        text: the visible text with every recognised call (and its fences or tags) removed.
        thinking: reasoning the model marked as such (thinking parts, ``<think>`` spans).
        calls: executable calls, in reply order.
        errors: calls that could not be used (unknown tool, undecodable or invalid
            arguments), in reply order.
        from_text: True when the calls were read from the text rather than from structured
            ``tool_calls``.
    """

    text: str = ""
    thinking: str = ""
    calls: list[ParsedCall] = field(default_factory=list)
    errors: list[CallError] = field(default_factory=list)
    from_text: bool = False


def content_parts(content: Any, extra: Mapping[str, Any] | None = None) -> tuple[str, str]:
    """Split message content into ``(text, thinking)``.

    Args:
        content: a string, or a list of parts (strings, ``{"type": "text", "text": …}``,
            ``{"type": "thinking", "thinking": …}``, ``{"type": "reasoning", …}``, empty
            dicts, ``None``); anything else is rendered as JSON.
        extra: the message's ``additional_kwargs``; a ``reasoning_content`` string there
            (llama.cpp, DeepSeek) counts as thinking.

    Returns:
        The joined text parts (``<think>`` spans moved out) and the joined thinking.
    """
    texts: list[str] = []
    thoughts: list[str] = []
    if isinstance(content, str):
        texts.append(content)
    elif isinstance(content, list):
        for part in content:
            if part is None:
                continue
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict):
                kind = str(part.get("type") or "text")
                if kind in _THINKING_TYPES:
                    value = next(
                        (
                            part[k]
                            for k in ("thinking", "reasoning", "text", "summary")
                            if k in part
                        ),
                        "",
                    )
                    thoughts.append(value if isinstance(value, str) else _flatten(value))
                elif isinstance(part.get("text"), str):
                    texts.append(part["text"])
    elif content is not None:
        texts.append(json.dumps(content, ensure_ascii=False, default=str))
    if extra and isinstance(extra.get("reasoning_content"), str):
        thoughts.insert(0, extra["reasoning_content"])
    text = "".join(texts)

    def pull(match: re.Match[str]) -> str:
        thoughts.append(match.group(2))
        return ""

    text = _THINK_SPAN.sub(pull, text)
    if bare := _BARE_CLOSE.match(text):
        thoughts.append(bare.group(1))
        text = text[bare.end() :]
    return text.strip(), "\n".join(t.strip() for t in thoughts if t and t.strip())


def closes_unopened_reasoning(content: Any) -> bool:
    """Whether ``content`` (a reply's text) holds a closing reasoning tag with no opening
    one (the chat template opened the block in the prompt): that model writes its
    reasoning first, untagged, so a later streamed reply of it is held back as reasoning
    until its closing tag (:class:`VisibleStream`)."""
    return isinstance(content, str) and bool(_BARE_CLOSE.match(_THINK_SPAN.sub("", content)))


_TAG = re.compile(r"<(/?)(think|thinking|reasoning)>", re.I)
_TAG_PREFIXES = frozenset(
    f"<{slash}{name}>"[:n]
    for slash in ("", "/")
    for name in ("think", "thinking", "reasoning")
    for n in range(1, len(name) + 3 + len(slash))
)


class VisibleStream:
    """The visible text of a reply that arrives in pieces, as :func:`content_parts` reads a
    whole one: ``<think>``/``<thinking>``/``<reasoning>`` spans are held back (an unclosed
    one to the end), and a closing tag with no opening one makes everything before it
    reasoning — text already shown was reasoning, which :meth:`feed` reports as a restart
    (the caller starts a new answer stream that replaces it).

    Args:
        reasoning_first: the model is known to write untagged reasoning before a closing
            tag (:func:`closes_unopened_reasoning` of an earlier reply): text is held from
            the start until that tag, and given out at :meth:`end` if none comes.

    A tag split across pieces is recognised: a tail that could begin one is held until the
    next piece decides.
    """

    def __init__(self, reasoning_first: bool = False) -> None:
        self._held = ""
        self._inside: str | None = "" if reasoning_first else None
        """The reasoning tag being read ('' for an untagged start), None outside."""
        self._doubt = ""
        """Text held as untagged reasoning, shown at the end if no closing tag comes."""

    def feed(self, piece: str) -> tuple[str, bool]:
        """``(text to show now, restart)`` for the next piece; ``restart``: what was shown
        before was reasoning (a closing tag with no opening one arrived)."""
        self._held += piece
        shown: list[str] = []
        restart = False
        while match := _TAG.search(self._held):
            before, closing, name = self._held[: match.start()], match.group(1), match.group(2)
            self._held = self._held[match.end() :]
            if self._inside is not None:
                if closing and self._inside in ("", name.lower()):
                    self._inside = None
                    self._doubt = ""
                continue
            if closing:
                shown.clear()
                restart = True
                continue
            shown.append(before)
            self._inside = name.lower()
        keep = self._partial_tag_tail()
        settled, self._held = (
            self._held[: len(self._held) - keep],
            self._held[len(self._held) - keep :],
        )
        if self._inside is None:
            shown.append(settled)
        elif self._inside == "":
            self._doubt += settled
        return "".join(shown), restart

    def end(self) -> str:
        """The text still held that is not reasoning (an untagged start that never closed;
        a tail that turned out not to be a tag)."""
        tail = {None: self._held, "": self._doubt + self._held}.get(self._inside, "")
        self._held = self._doubt = ""
        return tail

    def _partial_tag_tail(self) -> int:
        """Length of the held text's tail that could be the start of a reasoning tag."""
        at = self._held.rfind("<")
        if at < 0:
            return 0
        tail = self._held[at:].lower()
        return len(tail) if tail in _TAG_PREFIXES else 0


def _flatten(value: Any) -> str:
    if isinstance(value, list):
        return " ".join(_flatten(v) for v in value)
    if isinstance(value, dict):
        return str(value.get("text") or "")
    return "" if value is None else str(value)


def message_text(message: Any) -> str:
    """The visible text of a LangChain message (or content value), thinking left out."""
    content = getattr(message, "content", message)
    extra = getattr(message, "additional_kwargs", None)
    return content_parts(content, extra)[0]


def _new_id() -> str:
    return f"call_{uuid.uuid4().hex[:12]}"


def _json_objects(text: str) -> list[tuple[int, int, Any]]:
    """Every top-level balanced ``{…}`` span of ``text`` that parses as JSON (leniently).

    Returns ``(start, end, value)`` triples in order; strings inside the objects are
    respected when matching braces.
    """
    found: list[tuple[int, int, Any]] = []
    i = 0
    while True:
        start = text.find("{", i)
        if start < 0:
            return found
        end = object_end(text, start)
        if end is None:  # unbalanced tail (a reply cut by max_tokens): repair what is there
            end = len(text)
        chunk = text[start:end]
        value = _loads(chunk)
        if isinstance(value, dict) and value:
            found.append((start, end, value))
            i = end
        else:
            i = start + 1


def object_end(text: str, start: int) -> int | None:
    """The index just past the ``}`` closing the object that opens at ``text[start]``
    (braces inside JSON strings ignored), or None when the text ends first."""
    return _scan_object(text, start)[0]


def _scan_object(text: str, start: int) -> tuple[int | None, bool]:
    """``(end, in_string)``: the index just past the ``}`` closing the object that opens at
    ``text[start]`` (None when the text ends first), and whether the text ended inside a
    JSON string."""
    depth, in_string, escaped = 0, False, False
    for j in range(start, len(text)):
        char = text[j]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return j + 1, False
    return None, in_string


def _ends_in_string(text: str, start: int) -> bool:
    """Whether the object opening at ``text[start]`` is never closed because the text ends
    inside one of its strings (a call cut off mid-value)."""
    end, in_string = _scan_object(text, start)
    return end is None and in_string


def _cut_message(name: str | None, shown: str) -> str:
    """What the model is told of a call whose arguments were cut off inside a value."""
    return (
        f"Error: the arguments of {name!r} were cut off inside a value ({shown}); "
        "send the complete call again."
    )


def _cut_inside_string(text: str) -> bool:
    """Whether ``text`` is a JSON object that is not valid and ends inside a string (a call
    whose arguments the reply's token budget cut off mid-value)."""
    start = text.find("{")
    if start < 0:
        return False
    try:
        json.loads(text)
        return False
    except ValueError:
        return _ends_in_string(text, start)


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        pass
    try:
        return json_repair.loads(text)
    except Exception:  # json_repair is lenient, but never let a parse error escape
        return None


def _undouble(text: str) -> str:
    """``{{"name": …}}`` → ``{"name": …}`` (template braces some servers leak)."""
    if "{{" not in text:
        return text
    return text.replace("{{", "{").replace("}}", "}")


def _call_parts(obj: dict[str, Any]) -> tuple[Any, Any, bool]:
    """``(name, raw_arguments, looks_like_a_call)`` of a parsed object."""
    raw_name: Any = next((obj[k] for k in _NAME_KEYS if k in obj), None)
    raw_args: Any = next((obj[k] for k in _ARG_KEYS if k in obj), None)
    if isinstance(raw_name, dict):  # {"function": {"name": ..., "arguments": ...}}
        raw_args = raw_name.get("arguments", raw_name.get("args", raw_args))
        raw_name = raw_name.get("name")
    if raw_name is None and isinstance(obj.get("type"), str) and obj.get("type") == "function":
        raw_name = obj.get("name")
    looks = isinstance(raw_name, str) and (
        raw_args is not None or set(obj) <= {*_NAME_KEYS, "type", "id"}
    )
    return raw_name, raw_args, looks


class ToolCallNormalizer:
    """Reads replies against a set of tools (see the module docstring).

    Args:
        tools: tool name → the JSON schema of its parameters (``None`` or ``{}`` when
            unknown: arguments then only need to be an object). An OpenAI-style spec list
            (``[{"type": "function", "function": {"name", "parameters"}}]``) is accepted too.
    """

    def __init__(self, tools: Mapping[str, dict[str, Any] | None] | Iterable[dict[str, Any]]):
        if isinstance(tools, Mapping):
            self.schemas = {name: dict(schema or {}) for name, schema in tools.items()}
        else:
            self.schemas = {
                spec["function"]["name"]: dict(spec["function"].get("parameters") or {})
                for spec in tools
            }
        self._lower = {name.lower(): name for name in self.schemas}

    @property
    def names(self) -> list[str]:
        return list(self.schemas)

    # ------------------------------------------------------------------ public

    def normalize(self, message: Any) -> NormalizedReply:
        """Read a LangChain ``AIMessage`` (or any object with ``content``/``tool_calls``)."""
        text, thinking = content_parts(
            getattr(message, "content", ""), getattr(message, "additional_kwargs", None)
        )
        reply = NormalizedReply(thinking=thinking)
        structured = list(getattr(message, "tool_calls", None) or [])
        invalid = list(getattr(message, "invalid_tool_calls", None) or [])
        for call in structured:
            self._add(reply, call.get("name"), call.get("args"), call.get("id"))
        for bad in invalid:
            self._add(reply, bad.get("name"), bad.get("args"), bad.get("id"))
        if structured or invalid:
            reply.text = text
            return reply
        reply.text = self._calls_from_text(text, reply)
        reply.from_text = bool(reply.calls or reply.errors)
        return reply

    def normalize_text(self, text: str) -> NormalizedReply:
        """Read a plain-text reply (e.g. from a completion endpoint)."""
        return self.normalize(_Plain(text))

    # ------------------------------------------------------------------ text forms

    def _calls_from_text(self, text: str, reply: NormalizedReply) -> str:
        """Find the calls written in ``text``; returns the text left once they are removed."""
        if not self.schemas or "{" not in text:
            return text
        remaining = text
        # 1. <tool_call>…</tool_call> blocks; 2. fenced blocks; 3. bare objects
        for pattern in (_TOOL_TAG, _FENCE):
            spans = []
            for match in pattern.finditer(remaining):
                if self._objects_as_calls(_undouble(match.group(1)), reply, require_call=True):
                    spans.append(match.span())
            remaining = _cut(remaining, spans)
        prefixed = _FUNCTIONS_PREFIX.sub(r'{"name": "\1", "arguments": ', remaining)
        if prefixed != remaining:
            prefixed = _close_prefixed(prefixed)
        candidate = _undouble(prefixed)
        spans = []
        for start, end, value in _json_objects(candidate):
            if self._object_as_call(value, reply, cut=_ends_in_string(candidate, start)):
                spans.append((start, end))
        if spans:
            remaining = _cut(candidate, spans)
        return _tidy(remaining)

    def _objects_as_calls(self, text: str, reply: NormalizedReply, require_call: bool) -> bool:
        found = False
        for start, _, value in _json_objects(text):
            cut = _ends_in_string(text, start)
            found = self._object_as_call(value, reply, cut=cut) or found
        if not found and require_call and len(self.schemas) == 1:
            value = _loads(text)
            if isinstance(value, dict):  # a bare argument object for the only tool
                self._add(reply, next(iter(self.schemas)), value, None)
                found = True
        return found

    def _object_as_call(self, value: Any, reply: NormalizedReply, cut: bool = False) -> bool:
        """Add the call(s) ``value`` holds; ``cut``: its text ended inside a JSON string (the
        reply's token budget ran out mid-value), so the call is a failed one that says so —
        ``{"source_id": "BNS_S1`` must not run as a read of BNS_S1."""
        if isinstance(value, list):
            return any([self._object_as_call(v, reply, cut) for v in value])
        if not isinstance(value, dict):
            return False
        if "tool_calls" in value and isinstance(value["tool_calls"], list):
            return any([self._object_as_call(v, reply, cut) for v in value["tool_calls"]])
        raw_name, raw_args, looks = _call_parts(value)
        if not looks:
            return False
        call_id = value.get("id")
        if cut:
            name = str(raw_name or "").strip() or None
            shown = json.dumps(raw_args, ensure_ascii=False, default=str)[:200]
            message = _cut_message(name, shown)
            reply.errors.append(CallError(name, str(call_id or _new_id()), message, shown))
            return True
        self._add(reply, raw_name, raw_args, call_id)
        return True

    # ------------------------------------------------------------------ arguments

    def _add(self, reply: NormalizedReply, raw_name: Any, raw_args: Any, call_id: Any) -> None:
        call_id = str(call_id) if call_id else _new_id()
        name = str(raw_name or "").strip().removeprefix("functions.")
        raw = raw_args if isinstance(raw_args, str) else json.dumps(raw_args, default=str)
        resolved = self.schemas and (
            name if name in self.schemas else self._lower.get(name.lower())
        )
        if not resolved:
            valid = ", ".join(self.schemas) or "none"
            reply.errors.append(
                CallError(
                    name or None,
                    call_id,
                    f"Error: unknown tool {name or '(no name)'!r}. Valid tools: {valid}.",
                    raw,
                )
            )
            return
        arguments, problem = self.arguments(resolved, raw_args)
        if problem is not None:
            reply.errors.append(CallError(resolved, call_id, problem, raw))
            return
        assert arguments is not None
        reply.calls.append(ParsedCall(resolved, arguments, call_id))

    def arguments(self, name: str, raw: Any) -> tuple[dict[str, Any] | None, str | None]:
        """Decode and check one call's arguments against the tool's schema.

        Returns:
            ``(arguments, None)`` when usable, else ``(None, error message for the model)``.
        """
        value = raw
        for _ in range(3):  # a JSON string, possibly encoded twice
            if not isinstance(value, str):
                break
            if not value.strip():
                value = {}
                break
            if _cut_inside_string(value):
                # '{"source_id": "BNS_S1' would run as BNS_S1, maybe not the section meant
                return None, _cut_message(name, repr(value[:200]))
            decoded = _loads(value)
            if decoded is None or decoded == value:
                break
            value = decoded
        if value is None:
            value = {}
        if not isinstance(value, dict):
            return None, (
                f"Error: the arguments of {name!r} must be a JSON object, got {str(raw)[:200]!r}."
            )
        schema = self.schemas.get(name) or {}
        properties: dict[str, Any] = schema.get("properties") or {}
        if len(value) == 1 and properties:
            ((key, inner),) = value.items()
            # {"arguments": {...}} or {name: {...}} wrappers around the real object
            if key not in properties and isinstance(inner, dict) and key in (*_ARG_KEYS, name):
                value = inner
        fixed: dict[str, Any] = {}
        for key, item in value.items():
            spec = properties.get(key) or {}
            if isinstance(item, str) and _is_string_type(spec) and item.lstrip().startswith("{"):
                inner = _loads(item)
                if isinstance(inner, dict):
                    if key in inner and not isinstance(inner[key], dict | list):
                        item = inner[key]
                    else:
                        return None, (
                            f"Error: argument {key!r} of {name!r} must be plain text, not a "
                            f"JSON object ({item[:120]!r}). Please fix your mistakes."
                        )
            fixed[key] = item
        missing = [k for k in schema.get("required") or () if k not in fixed]
        if missing:
            return None, (
                f"Error: {name!r} needs the argument(s) {', '.join(missing)}; "
                f"got {json.dumps(fixed, ensure_ascii=False)[:200]}. Please fix your mistakes."
            )
        return fixed, None


def _is_string_type(spec: Mapping[str, Any]) -> bool:
    kind = spec.get("type")
    if kind == "string" or (isinstance(kind, list) and "string" in kind):
        return True
    return any(_is_string_type(s) for s in spec.get("anyOf") or () if isinstance(s, dict))


def _cut(text: str, spans: list[tuple[int, int]]) -> str:
    for start, end in sorted(spans, reverse=True):
        text = text[:start] + "\n" + text[end:]
    return text


def _close_prefixed(text: str) -> str:
    """Close the objects opened by rewriting ``functions.NAME:{…}`` (one brace each)."""
    out, i = [], 0
    marker = '{"name": "'
    while True:
        at = text.find(marker, i)
        if at < 0:
            out.append(text[i:])
            return "".join(out)
        args_at = text.find('"arguments": ', at) + len('"arguments": ')
        spans = _json_objects(text[args_at:])
        if not spans or spans[0][0] != 0:
            out.append(text[i:args_at])
            i = args_at
            continue
        end = args_at + spans[0][1]
        out.append(text[i:end] + "}")
        i = end


def _tidy(text: str) -> str:
    text = re.sub(r"</?tool_call>", "", text)
    text = re.sub(r"```[A-Za-z0-9_-]*\s*```", "", text)
    return re.sub(r"\n{3,}", "\n\n", text).strip()


class _Plain:
    def __init__(self, text: str) -> None:
        self.content = text
        self.tool_calls: list[Any] = []
        self.invalid_tool_calls: list[Any] = []
        self.additional_kwargs: dict[str, Any] = {}


def decode_wire_arguments(response: dict[str, Any]) -> dict[str, Any]:
    """Fix an OpenAI-format chat completion in place before a client library parses it.

    Some servers send a tool call's ``function.arguments`` as an object, or as a JSON string
    that holds another JSON string (encoded twice); LangChain's OpenAI client then fails the
    whole reply (``Input should be a valid dictionary``). Each such value becomes the JSON
    text of its object; values that do not decode to an object are left for the normaliser
    to report.

    Returns:
        ``response`` (changed in place).
    """
    for choice in response.get("choices") or ():
        message = choice.get("message") if isinstance(choice, dict) else None
        for call in (message or {}).get("tool_calls") or ():
            function = call.get("function") if isinstance(call, dict) else None
            if not isinstance(function, dict):
                continue
            value: Any = function.get("arguments")
            for _ in range(3):
                if not isinstance(value, str):
                    break
                try:
                    value = json.loads(value)
                except ValueError:
                    break
            if isinstance(value, dict):
                function["arguments"] = json.dumps(value, ensure_ascii=False)
    return response
