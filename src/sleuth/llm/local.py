"""An in-process llama.cpp chat model with prompt-based tool calling.

``LlamaCppChatModel`` runs a GGUF model through ``llama_cpp.Llama`` (imported lazily; extra
``local``). Tool calling does not rely on the model's own tool template (small models have
none): the bound tools are described in the system prompt and the model is asked to reply
either with one JSON object ``{"tool": NAME, "arguments": {...}}`` or with a plain-text
answer. The reply is parsed leniently with ``json_repair``; a recognised call becomes
``AIMessage.tool_calls``, a call to an unknown tool becomes ``invalid_tool_calls``, anything
else is the answer text. With a forced ``tool_choice`` the reply is grammar-constrained to
a valid call, so it always parses. Tool results (``ToolMessage``) are fed back as user turns.

The default model is Qwen2.5-Coder-1.5B-Instruct (see :mod:`sleuth.llm.models`); replies
are read by the LLM layer's normaliser (:mod:`sleuth.llm.toolcalls`) as well.
"""

from __future__ import annotations

import atexit
import ctypes
import json
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.language_models import BaseChatModel, LanguageModelInput
from langchain_core.messages import (
    AIMessage,
    AIMessageChunk,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages.tool import (
    InvalidToolCall,
    ToolCall,
    invalid_tool_call,
    tool_call_chunk,
)
from langchain_core.messages.tool import tool_call as make_tool_call
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.runnables import Runnable
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import Field

from sleuth.errors import require
from sleuth.llm import calls
from sleuth.llm.toolcalls import ToolCallNormalizer, object_end

_CACHE: dict[tuple[str, int, int], tuple[Any, threading.Lock]] = {}
_CACHE_LOCK = threading.Lock()

PROMPT_CACHE_MB = 512
"""RAM for the KV states of earlier prompts (:func:`_with_prompt_cache`), in MiB. A state
holds ~28 KB per token for Qwen2.5-1.5B (28 layers, 2 KV heads of 128, f16): a 1,200-token
prompt ~34 MB, so 512 MiB keeps the last ~15 calls' states."""

_ANSWER_KEYS = ("answer", "final_answer", "response", "message", "content")


def load_llama(
    model_path: str,
    n_ctx: int = 4096,
    n_threads: int | None = None,
    prompt_cache_mb: int = PROMPT_CACHE_MB,
) -> Any:
    """Load (once per process) and return the ``llama_cpp.Llama`` for these settings.

    Args:
        model_path: path of the GGUF file.
        n_ctx: context window in tokens.
        n_threads: CPU threads; ``os.cpu_count()`` when None.
        prompt_cache_mb: RAM for earlier prompts' KV states (:func:`_with_prompt_cache`);
            0 turns the cache off. Read when the model is first loaded.

    Raises:
        MissingExtraError: llama-cpp-python is not installed (extra ``local``).
        ValueError: llama.cpp could not load the file.
    """
    return _load(model_path, n_ctx, n_threads, prompt_cache_mb)[0]


def _with_prompt_cache(llama_cpp: Any, llama: Any, capacity_mb: int) -> None:
    """Give ``llama`` a prompt cache: the KV state after each completed call is kept (LRU,
    ``capacity_mb``), and a later prompt that shares a longer token prefix with a kept state
    than with the context's current one starts from that state
    (``llama_cpp.LlamaRAMCache``, consulted by ``Llama.create_completion``).

    llama.cpp by itself reuses only the prefix shared with the *previous* call; sleuth
    interleaves prompts (ReAct's loop turns with the generator's prompt, a guided run's
    decomposition with the next run's generator), so each agent's static prefix (system
    prompt, tool descriptions, the evidence of a repair round) was evaluated again.

    ``Llama.save_state`` also copies the ``n_batch`` × vocabulary score matrix (311 MB for
    Qwen2.5's 151,936 tokens, 0.66 s a call, held by every cached state), which nothing
    reads when ``logits_all`` is off: a restored state replays its last token to refresh the
    logits. The states kept here carry the KV data and the tokens only.
    """
    if capacity_mb <= 0:
        return

    def save_state() -> Any:
        ctx = llama._ctx.ctx
        size = int(llama_cpp.llama_state_get_size(ctx))
        buffer = (ctypes.c_uint8 * size)()
        used = int(llama_cpp.llama_state_get_data(ctx, buffer, size))
        if used > size:
            raise RuntimeError("llama.cpp wrote more state than it sized")
        return llama_cpp.LlamaState(
            input_ids=llama.input_ids.copy(),
            scores=numpy.zeros((0, 0), dtype=numpy.single),
            n_tokens=llama.n_tokens,
            llama_state=bytes(memoryview(buffer)[:used]),
            llama_state_size=used,
            seed=llama._seed,
        )

    def load_state(state: Any) -> None:
        data = (ctypes.c_uint8 * state.llama_state_size).from_buffer_copy(state.llama_state)
        if llama_cpp.llama_state_set_data(llama._ctx.ctx, data, state.llama_state_size) != (
            state.llama_state_size
        ):
            raise RuntimeError("llama.cpp did not take the cached prompt state")
        llama.input_ids = state.input_ids.copy()
        llama.n_tokens = state.n_tokens
        llama._requires_eval = True  # the next decode refreshes the logits
        llama._seed = state.seed

    llama.save_state = save_state
    llama.load_state = load_state
    llama.set_cache(llama_cpp.LlamaRAMCache(capacity_bytes=capacity_mb << 20))


def _count_reuse(llama: Any) -> None:
    """Record, on ``llama.sleuth_reused``, how many tokens were already in the context when
    a call's first decode began (the prefix kept from the previous call or restored from the
    prompt cache); the caller sets it to ``None`` before the call."""
    evaluate = llama.eval

    def eval_and_count(tokens: Sequence[int]) -> None:
        if llama.sleuth_reused is None:
            llama.sleuth_reused = int(llama.n_tokens)
        evaluate(tokens)

    llama.sleuth_reused = None
    llama.eval = eval_and_count


def _load(
    model_path: str, n_ctx: int, n_threads: int | None, prompt_cache_mb: int = PROMPT_CACHE_MB
) -> tuple[Any, threading.Lock]:
    threads = n_threads or os.cpu_count() or 1
    key = (os.path.abspath(model_path), n_ctx, threads)
    with _CACHE_LOCK:
        entry = _CACHE.get(key)
        if entry is None:
            llama_cpp = require("llama_cpp", "local", "the local llama.cpp model")
            size = os.path.getsize(key[0]) / 1e9 if os.path.exists(key[0]) else 0.0
            calls.notice(
                f"Loading the model {os.path.basename(key[0])} ({size:.1f} GB, n_ctx {n_ctx}) "
                "into memory: once per process; `sleuth serve` keeps it loaded."
            )
            llama = llama_cpp.Llama(  # type: ignore[attr-defined]
                model_path=key[0],
                n_ctx=n_ctx,
                n_threads=threads,
                n_threads_batch=threads,
                # measured with bench/bench_llm_engine.py (1.5B, 2 cores): +8 % prompt and
                # +11 % generation tokens/s over llama-cpp-python's default (off)
                flash_attn=True,
                verbose=False,
            )
            _with_prompt_cache(llama_cpp, llama, prompt_cache_mb)
            _count_reuse(llama)
            if not _CACHE:
                atexit.register(close_models)
            entry = (llama, threading.Lock())
            _CACHE[key] = entry
        return entry


def _chat_formatter(llama: Any, model_path: str) -> Any:
    """The loaded model's own chat template (GGUF ``tokenizer.chat_template``) as
    llama-cpp-python's formatter, the assistant's turn opened at the end.

    Raises:
        ValueError: the model has no chat template.
    """
    llama_cpp = require("llama_cpp", "local", "the local llama.cpp model")
    template = llama.metadata.get("tokenizer.chat_template")
    if not template:
        raise ValueError(f"{os.path.basename(model_path)} has no chat template")

    def token_text(token: int) -> str:
        return llama._model.token_get_text(token) if token != -1 else ""

    return llama_cpp.llama_chat_format.Jinja2ChatFormatter(
        template=template,
        eos_token=token_text(llama.token_eos()),
        bos_token=token_text(llama.token_bos()),
    )


def close_models() -> None:
    """Free every loaded model (run at interpreter exit: llama-cpp-python's own finaliser,
    left to module teardown, prints "Exception ignored in Llama.__del__" tracebacks)."""
    with _CACHE_LOCK:
        entries = list(_CACHE.values())
        _CACHE.clear()
    for llama, lock in entries:
        if lock.acquire(timeout=5):  # a generation still running holds it: leave that one
            try:
                llama.close()
            finally:
                lock.release()


def _text(message: BaseMessage) -> str:
    content = message.content
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
        elif isinstance(block, dict) and isinstance(block.get("text"), str):
            parts.append(block["text"])
    return "".join(parts)


def _type_hint(schema: dict[str, Any]) -> str:
    if "enum" in schema:
        return " | ".join(json.dumps(value) for value in schema["enum"])
    kind = schema.get("type")
    if isinstance(kind, list):
        return " | ".join(str(k) for k in kind)
    if kind == "array":
        return f"list of {_type_hint(schema.get('items', {}))}"
    return str(kind or "any")


def describe_tools(tools: Sequence[dict[str, Any]], forced: bool = False) -> str:
    """The system-prompt section that teaches the JSON tool-call protocol.

    Args:
        tools: OpenAI-format tool schemas (``{"type": "function", "function": {...}}``).
        forced: the model must call a tool (no plain-text answer allowed).

    Returns:
        Text listing each tool with its arguments, the reply format and an example.
    """
    lines = ["You can call these tools:"]
    for tool in tools:
        function = tool["function"]
        params = function.get("parameters") or {}
        required = set(params.get("required") or ())
        args = ", ".join(
            f"{name}: {_type_hint(spec)}{'' if name in required else ' (optional)'}"
            for name, spec in (params.get("properties") or {}).items()
        )
        description = " ".join((function.get("description") or "").split())
        lines.append(f"- {function['name']}({args}): {description}".rstrip(": "))
    first = tools[0]["function"]
    first_props = list((first.get("parameters") or {}).get("properties") or {})
    example_args = {first_props[0]: "..."} if first_props else {}
    example = json.dumps({"tool": first["name"], "arguments": example_args})
    lines += [
        "",
        "To call a tool, reply with only one JSON object and nothing else, for example:",
        example,
    ]
    if forced:
        lines.append("You must call a tool now.")
    else:
        lines.append("When you can answer, reply with the answer as plain text, without any JSON.")
    return "\n".join(lines)


def _tool_call_json(call: ToolCall) -> str:
    return json.dumps({"tool": call["name"], "arguments": call["args"]}, ensure_ascii=False)


def to_llama_messages(
    messages: Sequence[BaseMessage], tool_prompt: str | None = None
) -> list[dict[str, str]]:
    """Convert LangChain messages into llama.cpp chat dicts (system/user/assistant only).

    System messages are merged into one leading system message (with ``tool_prompt``
    appended); assistant tool calls are rendered as the JSON protocol; tool results become
    user turns ``Result of tool NAME:``; consecutive turns of one role are merged.

    Returns:
        ``[{"role": "system" | "user" | "assistant", "content": str}, ...]``.
    """
    system_parts: list[str] = []
    turns: list[dict[str, str]] = []
    call_names: dict[str, str] = {}

    def add(role: str, content: str) -> None:
        if turns and turns[-1]["role"] == role:
            turns[-1]["content"] += "\n\n" + content
        else:
            turns.append({"role": role, "content": content})

    for message in messages:
        text = _text(message)
        if isinstance(message, SystemMessage):
            system_parts.append(text)
        elif isinstance(message, AIMessage):
            parts = [text] if text.strip() else []
            for call in message.tool_calls:
                if call.get("id"):
                    call_names[call["id"]] = call["name"]
                parts.append(_tool_call_json(call))
            for bad in message.invalid_tool_calls:
                parts.append(json.dumps({"tool": bad.get("name"), "arguments": bad.get("args")}))
            add("assistant", "\n".join(parts))
        elif isinstance(message, ToolMessage):
            name = message.name or call_names.get(message.tool_call_id, "tool")
            add("user", f"Result of tool {name}:\n{text}")
        elif isinstance(message, HumanMessage):
            add("user", text)
        elif isinstance(message, ChatMessage) and message.role in ("system", "assistant"):
            if message.role == "system":
                system_parts.append(text)
            else:
                add("assistant", text)
        else:
            add("user", text)
    if tool_prompt:
        system_parts.append(tool_prompt)
    system = "\n\n".join(part for part in system_parts if part.strip())
    return ([{"role": "system", "content": system}] if system else []) + turns


def parse_tool_reply(
    text: str, tool_names: Sequence[str]
) -> tuple[str, list[ToolCall], list[InvalidToolCall]]:
    """Parse a model reply under the JSON tool-call protocol, with the LLM layer's normaliser
    (:class:`~sleuth.llm.toolcalls.ToolCallNormalizer`: every text form of a call, several
    calls, fences, broken JSON, string arguments).

    Besides: an ``{"answer": TEXT}`` object is the answer; when exactly one tool is bound, a
    bare object without a tool name is taken as that tool's arguments.

    Args:
        text: the raw model reply.
        tool_names: the bound tool names.

    Returns:
        ``(content, tool_calls, invalid_tool_calls)``; content is ``""`` when a call (valid or
        not) was found, else the answer text.
    """
    names = list(tool_names)
    if not names or not text.strip():
        return text.strip(), [], []
    reply = ToolCallNormalizer(dict.fromkeys(names)).normalize_text(text)
    calls = [make_tool_call(name=c.name, args=c.arguments, id=c.id) for c in reply.calls]
    invalid = [
        invalid_tool_call(name=e.name, args=e.raw, id=e.id, error=e.message) for e in reply.errors
    ]
    if calls or invalid:
        return "", calls, invalid
    bare = _bare_object(text)
    if bare is not None:
        answer = next((bare[k] for k in _ANSWER_KEYS if isinstance(bare.get(k), str)), None)
        if answer is not None:
            return answer.strip(), [], []
        if len(names) == 1:
            return (
                "",
                [make_tool_call(name=names[0], args=bare, id=f"call_{uuid.uuid4().hex[:12]}")],
                [],
            )
    return text.strip(), [], []


def _bare_object(text: str) -> dict[str, Any] | None:
    """The reply as one JSON object (code fences allowed), else None."""
    import json_repair

    cleaned = re.sub(r"```[a-zA-Z]*", "", text).strip()
    if not cleaned.startswith("{"):
        return None
    try:
        value = json_repair.loads(cleaned)
    except Exception:
        return None
    return value if isinstance(value, dict) and value else None


def _leading_json_done(pieces: list[str]) -> bool:
    """True when the text starts (after whitespace / a code fence) with a complete object."""
    text = "".join(pieces).lstrip()
    if text.startswith("```"):
        text = text.split("\n", 1)[1] if "\n" in text else ""
    return text.startswith("{") and object_end(text, 0) is not None


def _forced_tools(tools: list[dict[str, Any]], tool_choice: Any) -> list[dict[str, Any]] | None:
    """The tools the model must choose from, or None when it may answer in text."""
    if not tools or tool_choice in (None, "auto", "none", False):
        return None
    if tool_choice in ("any", "required", True):
        return tools
    name = tool_choice
    if isinstance(tool_choice, dict):
        name = (tool_choice.get("function") or {}).get("name") or tool_choice.get("name")
    chosen = [tool for tool in tools if tool["function"]["name"] == name]
    if not chosen:
        raise ValueError(f"tool_choice {name!r} is not among the bound tools")
    return chosen


def _call_schema(tools: list[dict[str, Any]]) -> dict[str, Any]:
    variants = [
        {
            "type": "object",
            "properties": {
                "tool": {"const": tool["function"]["name"]},
                "arguments": tool["function"].get("parameters") or {"type": "object"},
            },
            "required": ["tool", "arguments"],
        }
        for tool in tools
    ]
    return variants[0] if len(variants) == 1 else {"oneOf": variants}


class LlamaCppChatModel(BaseChatModel):
    """A chat model running a GGUF file in process through llama.cpp.

    Args:
        model_path: the GGUF file.
        n_ctx: context window in tokens (default 4096).
        n_threads: CPU threads (default ``os.cpu_count()``).
        temperature: sampling temperature (0 = greedy).
        max_tokens: cap on generated tokens per call.
        repeat_penalty: >1 discourages the loops small models fall into.
        timeout_s: wall-clock budget of one generation (prompt evaluation excluded); past it
            generation stops and the partial text is parsed (finish_reason ``"timeout"``).
        prompt_cache_mb: RAM for earlier prompts' KV states (:func:`_with_prompt_cache`), 0
            for none; read when the model is first loaded in the process.

    The loaded ``Llama`` is cached per (path, n_ctx, n_threads) and shared by all instances;
    calls on one cached model are serialised by a lock.

    Raises (at call time):
        MissingExtraError: llama-cpp-python is not installed.
        ValueError: the GGUF cannot be loaded, or ``tool_choice`` names an unbound tool.
    """

    model_path: str
    n_ctx: int = Field(default=4096, ge=256)
    n_threads: int | None = None
    temperature: float = 0.0
    max_tokens: int = Field(default=512, ge=1)
    repeat_penalty: float = 1.1
    timeout_s: float | None = 120.0
    seed: int = 0
    prompt_cache_mb: int = Field(default=PROMPT_CACHE_MB, ge=0)

    @property
    def _llm_type(self) -> str:
        return "sleuth-llamacpp"

    @property
    def _identifying_params(self) -> dict[str, Any]:
        return {"model_path": self.model_path, "n_ctx": self.n_ctx}

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | Any],
        *,
        tool_choice: str | dict[str, Any] | bool | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        """Bind tools (anything ``convert_to_openai_tool`` accepts).

        Args:
            tools: the tools.
            tool_choice: None/``"auto"`` (call a tool or answer), ``"none"`` (ignore the
                tools), ``"any"``/``"required"``/True (must call one), or a tool name /
                ``{"type": "function", "function": {"name": ...}}`` (must call that one).
            **kwargs: passed to ``bind``.
        """
        formatted = [convert_to_openai_tool(tool) for tool in tools]
        return super().bind(tools=formatted, tool_choice=tool_choice, **kwargs)

    def _fit_context(self, llama: Any, chat: list[dict[str, str]]) -> list[dict[str, str]]:
        """The turns cut (middle first, :func:`sleuth.llm.calls.fit_turns`, with the model's
        own tokenizer) until the prompt fits ``n_ctx - max_tokens``; each cut is visible in
        the text and reported to the run.

        Raises:
            ContextWindowExceeded: the prompt cannot be made to fit (``n_ctx`` far too small).
        """

        def count(text: str) -> int:
            return len(llama.tokenize(text.encode("utf-8"), add_bos=False))

        budget = self.n_ctx - self.max_tokens - calls.PROMPT_OVERHEAD
        budget -= calls.TURN_OVERHEAD * len(chat)
        texts = calls.fit_turns([(t["role"], t["content"]) for t in chat], budget, count)
        return [{**turn, "content": text} for turn, text in zip(chat, texts, strict=True)]

    def _generate(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> ChatResult:
        call = self._prepare(messages, tools, tool_choice, kwargs)
        return ChatResult(generations=[ChatGeneration(message=self._whole(call, stop))])

    def first_token_log_odds(
        self, messages: list[BaseMessage], yes: str, no: str
    ) -> tuple[float, dict[str, Any]]:
        """How much more the model would open its reply to ``messages`` with ``yes`` than
        with ``no``: the difference of their first tokens' logits (the log-odds of the two
        replies, the rest of the vocabulary aside), from one forward pass of the prompt — no
        token is generated or sampled, so the judgement is as graded as the model is, where
        its greedy reply would only say which side wins.

        The prompt is the model's own chat template (GGUF ``tokenizer.chat_template``) with
        the assistant's turn opened; the prefix it shares with the context's current tokens
        is not evaluated again.

        Returns:
            ``(log_odds, usage)``: ``usage`` has ``input_tokens`` and
            ``input_token_details.cache_read`` (tokens kept from the previous call), in the
            form :meth:`~sleuth.tools.base.RunContext.add_usage` reads.

        Raises:
            ValueError: the model has no chat template, or the prompt does not fit ``n_ctx``.
        """
        llama, lock = _load(self.model_path, self.n_ctx, self.n_threads, self.prompt_cache_mb)
        formatter = getattr(llama, "sleuth_chat_formatter", None)
        if formatter is None:
            formatter = llama.sleuth_chat_formatter = _chat_formatter(llama, self.model_path)
        prompt = formatter(messages=to_llama_messages(messages, None)).prompt
        with lock:
            tokens = llama.tokenize(prompt.encode("utf-8"), add_bos=False, special=True)
            if len(tokens) >= self.n_ctx:
                raise ValueError(f"the prompt ({len(tokens)} tokens) does not fit n_ctx")
            shared = llama.longest_token_prefix(llama.input_ids[: llama.n_tokens], tokens)
            kept = min(shared, len(tokens) - 1)  # at least one token evaluated: its logits
            llama.n_tokens = kept
            llama.sleuth_reused = None
            llama.eval(tokens[kept:])
            logits = numpy.ctypeslib.as_array(llama._ctx.get_logits(), shape=(llama.n_vocab(),))
            first = [llama.tokenize(w.encode("utf-8"), add_bos=False)[0] for w in (yes, no)]
            log_odds = float(logits[first[0]] - logits[first[1]])
        usage = {
            "input_tokens": len(tokens),
            "output_tokens": 0,
            "total_tokens": len(tokens),
            "input_token_details": {"cache_read": kept},
        }
        return log_odds, usage

    def _whole(self, call: _Call, stop: list[str] | None) -> AIMessage:
        """The reply of ``call`` generated to its end, under the model's lock."""
        with call.lock:
            out = _Generated()
            for _ in self._pieces(call, stop, out):
                pass
            return self._message(call, out)

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: list[str] | None = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        tools: list[dict[str, Any]] | None = None,
        tool_choice: Any = None,
        **kwargs: Any,
    ) -> Iterator[ChatGenerationChunk]:
        """The reply piece by piece as llama.cpp generates it; the last chunk carries the
        token counts. With tools bound the reply may be a call, so it comes whole, parsed,
        in one chunk."""
        call = self._prepare(messages, tools, tool_choice, kwargs)
        if call.names:
            message = self._whole(call, stop)
            yield ChatGenerationChunk(
                message=AIMessageChunk(
                    content=message.content,
                    tool_call_chunks=[
                        tool_call_chunk(
                            name=c["name"], args=json.dumps(c["args"]), id=c["id"], index=i
                        )
                        for i, c in enumerate(message.tool_calls)
                    ],
                    response_metadata=message.response_metadata,
                    usage_metadata=message.usage_metadata,
                )
            )
            return
        with call.lock:
            out = _Generated()
            for piece in self._pieces(call, stop, out):
                chunk = ChatGenerationChunk(message=AIMessageChunk(content=piece))
                if run_manager is not None:
                    run_manager.on_llm_new_token(piece, chunk=chunk)
                yield chunk
            message = self._message(call, out)
        yield ChatGenerationChunk(
            message=AIMessageChunk(
                content="",
                response_metadata=message.response_metadata,
                usage_metadata=message.usage_metadata,
            )
        )

    def _prepare(
        self,
        messages: list[BaseMessage],
        tools: list[dict[str, Any]] | None,
        tool_choice: Any,
        kwargs: dict[str, Any],
    ) -> _Call:
        """The loaded model, its lock and the prompt of one call, its grammar (a forced tool
        call) and its output budget (a per-call ``max_tokens`` below the model's cap)."""
        llama, lock = _load(self.model_path, self.n_ctx, self.n_threads, self.prompt_cache_mb)
        tools = list(tools or []) if tool_choice != "none" else []
        forced = _forced_tools(tools, tool_choice)
        tool_prompt = describe_tools(forced or tools, forced=forced is not None) if tools else None
        chat = to_llama_messages(messages, tool_prompt)
        if not chat or chat[-1]["role"] == "assistant":
            chat.append({"role": "user", "content": "Continue."})

        grammar = None
        if forced is not None:
            llama_cpp = require("llama_cpp", "local", "the local llama.cpp model")
            schema = json.dumps(_call_schema(forced))
            try:
                grammar = llama_cpp.LlamaGrammar.from_json_schema(  # type: ignore[attr-defined]
                    schema, verbose=False
                )
            except Exception:
                grammar = llama_cpp.LlamaGrammar.from_string(  # type: ignore[attr-defined]
                    llama_cpp.llama_grammar.JSON_GBNF,  # type: ignore[attr-defined]
                    verbose=False,
                )
        names = [tool["function"]["name"] for tool in tools]
        budget = min(int(kwargs.get("max_tokens") or self.max_tokens), self.max_tokens)
        return _Call(llama, lock, chat, grammar, names, budget)

    def _message(self, call: _Call, out: _Generated) -> AIMessage:
        """The reply of a finished generation: text (or parsed tool calls) and token counts."""
        llama = call.llama
        input_tokens = max(int(getattr(llama, "n_tokens", 0)) - out.tokens, 0)
        reused = getattr(llama, "sleuth_reused", None)
        cached = min(input_tokens, input_tokens if reused is None else reused)
        raw = "".join(out.pieces)
        if call.names:
            content, calls_, invalid = parse_tool_reply(raw, call.names)
        else:
            content, calls_, invalid = raw.strip(), [], []
        return AIMessage(
            content=content,
            tool_calls=calls_,
            invalid_tool_calls=invalid,
            response_metadata={
                "model_name": os.path.basename(self.model_path),
                "finish_reason": out.finish_reason,
                "raw_output": raw,
            },
            usage_metadata={
                "input_tokens": input_tokens,
                "output_tokens": out.tokens,
                "total_tokens": input_tokens + out.tokens,
                # prompt tokens not evaluated again: kept from the previous call or restored
                # from the prompt cache (:func:`_with_prompt_cache`)
                "input_token_details": {"cache_read": cached},
            },
        )

    def _pieces(self, call: _Call, stop: list[str] | None, out: _Generated) -> Iterator[str]:
        """Generate (under ``call.lock``, held by the caller), yielding each piece of text;
        stops early on timeout or, with tools bound and none forced, after a complete
        leading JSON object. ``out`` gets the pieces, the finish reason (llama.cpp's
        ``"stop"``/``"length"``, ``"tool_call"``: JSON complete, ``"timeout"``) and the
        number of generated chunks."""
        llama = call.llama
        call.chat = self._fit_context(llama, call.chat)
        llama.sleuth_reused = None
        stop_at_json = bool(call.names) and call.grammar is None
        deadline = time.monotonic() + self.timeout_s if self.timeout_s else None
        run_deadline = calls.deadline()  # the run's, when sooner: no generation outlives it
        if run_deadline is not None:
            deadline = run_deadline if deadline is None else min(deadline, run_deadline)
        stream = llama.create_chat_completion(
            messages=call.chat,
            temperature=self.temperature,
            max_tokens=call.budget,
            repeat_penalty=self.repeat_penalty,
            stop=stop or [],
            seed=self.seed,
            grammar=call.grammar,
            stream=True,
        )
        try:
            for chunk in stream:
                choice = chunk["choices"][0]
                delta = (choice.get("delta") or {}).get("content") or ""
                if delta:
                    out.pieces.append(delta)
                    out.tokens += 1
                    yield delta
                if choice.get("finish_reason"):
                    # read on to the stream's end: llama-cpp-python keeps the prompt's state
                    # in the prompt cache only once its generator finishes
                    out.finish_reason = out.finish_reason or choice["finish_reason"]
                    continue
                if deadline is not None and time.monotonic() > deadline:
                    out.finish_reason = "timeout"
                    break
                if stop_at_json and delta and "}" in delta and _leading_json_done(out.pieces):
                    out.finish_reason = "tool_call"
                    break
        finally:
            close = getattr(stream, "close", None)
            if close is not None:
                close()
        if out.finish_reason == "tool_call" and getattr(llama, "cache", None) is not None:
            # stopped before the stream's end: the state is kept here (the ReAct loop's turns
            # share the system prompt, the tools and the history so far)
            llama.cache[tuple(llama.input_ids[: llama.n_tokens].tolist())] = llama.save_state()


@dataclass
class _Call:
    """One call's loaded model, lock, prompt, grammar, bound tool names and output budget."""

    llama: Any
    lock: threading.Lock
    chat: list[dict[str, str]]
    grammar: Any
    names: list[str]
    budget: int


@dataclass
class _Generated:
    """What a generation produced: its text pieces, finish reason and chunk count."""

    pieces: list[str] = field(default_factory=list)
    finish_reason: str | None = None
    tokens: int = 0
