"""Every model call of a run, held to the run's limits: its deadline and the model's window.

A run sets its limits once (:func:`run_limits`, in :class:`sleuth.service.AgentService`);
the agents send each request through :func:`invoke`, which

* never waits past the run's deadline: the request runs in a worker thread and is given up
  when the remaining time is spent (an OpenAI-compatible client also gets the remaining time
  as its request timeout, so the abandoned request ends as well, and the in-process model
  stops generating, :func:`deadline`); a request due after the deadline is not sent. Both
  raise :class:`~sleuth.errors.ModelDeadlineExceeded` and mark the run as cut
  (:attr:`RunLimits.cut`), so it ends with status ``timeout``;
* fits the prompt into the model's context window when the window is known
  (``RunLimits.context_tokens``; the in-process model fits with its own tokenizer,
  :func:`fit_turns`): older turns lose their middle first, then the last turn, then the
  system prompt, each cut visible in the text as ``[truncated: N of M chars]`` and reported
  to the run (:func:`report_trim`); long arguments of earlier tool calls are cut too;
* turns a server's refusal of a prompt for its length into
  :class:`~sleuth.errors.ContextWindowExceeded`, which ends the run as an error that says so
  rather than as missing evidence.

Outside a run (no limits set) :func:`invoke` is a plain ``runnable.invoke``.
"""

from __future__ import annotations

import contextvars
import json
import math
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from sleuth.errors import ContextWindowExceeded, ModelDeadlineExceeded
from sleuth.llm.toolcalls import VisibleStream, closes_unopened_reasoning

DEFAULT_OUTPUT_RESERVE = 512
"""Tokens kept free for the reply when the call does not bind its own ``max_tokens``."""
MIN_OUTPUT_RESERVE = 128
"""A small window still leaves the reply this many tokens at least (else 1/16 of it)."""
TURN_OVERHEAD = 8
"""Tokens a chat template adds around each turn (role markers), counted when fitting."""
PROMPT_OVERHEAD = 32
"""Tokens a chat template adds once (begin/end markers, a default system line)."""
MAX_ARGUMENT_CHARS = 300
"""A string argument of an earlier tool call is cut to this many characters when fitting."""
MIN_TURN_TOKENS = 48
"""The last turn and the system turns are never cut below this many tokens; older turns
(the run's history) only go below it, down to the bare mark, once the last turn is there."""
BYTES_PER_TOKEN = 3.0
"""Estimate for a server whose tokenizer is unknown: one token per 3 UTF-8 bytes (BPE
vocabularies average ~4 characters per English token and ~1 per CJK character, i.e. 3
bytes), so the estimate errs on the long side and a fitted prompt stays inside the window."""

_CONTEXT_REFUSAL = re.compile(
    r"context (?:length|size|window)|maximum context|exceeds? the (?:available )?context|"
    r"n_ctx|prompt is too long|too many tokens",
    re.I,
)
_NUMBERS = re.compile(r"\d[\d,]*")


@dataclass
class RunLimits:
    """The limits of one run, shared by every model call made inside :func:`run_limits`.

    Attributes:
        deadline: ``time.monotonic()`` value past which no model call is waited for.
        context_tokens: the model's context window in tokens, when known (prompts of a
            remote model are fitted to it); ``None``: not fitted.
        notify: receives one line per event worth showing (a trimmed prompt).
        cut: set when a model call was given up or not sent because of the deadline.
        trims: one record per trimmed prompt: ``{"turn", "role", "chars", "kept_chars",
            "tokens", "budget"}``.
        answer_delta: receives ``(text, stream)`` for each piece of answer text a model
            generates in a call made with ``stream_answer=True`` (:func:`invoke`); ``stream``
            numbers those calls from 1 (a repair round's answer is a new stream).
        streams: how many answer streams the run has started.
        reasoning_first: a reply of this run's model closed a reasoning block it never
            opened (its chat template opens it): its streamed answers are held back until
            the closing tag (:class:`~sleuth.llm.toolcalls.VisibleStream`).
    """

    deadline: float | None = None
    context_tokens: int | None = None
    notify: Callable[[str], None] | None = None
    cut: bool = False
    trims: list[dict[str, Any]] = field(default_factory=list)
    answer_delta: Callable[[str, int], None] | None = None
    streams: int = 0
    reasoning_first: bool = False

    def remaining(self) -> float | None:
        """Seconds left before the deadline (may be ≤ 0); ``None`` without a deadline."""
        return None if self.deadline is None else self.deadline - time.monotonic()


_limits: contextvars.ContextVar[RunLimits | None] = contextvars.ContextVar(
    "sleuth_run_limits", default=None
)


@contextmanager
def run_limits(limits: RunLimits) -> Iterator[RunLimits]:
    """Within the block (this thread or task, and work it hands a copied context), every
    :func:`invoke` obeys ``limits``."""
    token = _limits.set(limits)
    try:
        yield limits
    finally:
        _limits.reset(token)


def current() -> RunLimits | None:
    """The limits of the run in progress in this context, if any."""
    return _limits.get()


def deadline() -> float | None:
    """The current run's deadline (``time.monotonic()`` seconds), if any."""
    limits = _limits.get()
    return None if limits is None else limits.deadline


def was_cut() -> bool:
    """Whether a model call of the current run was given up or not sent for its deadline."""
    limits = _limits.get()
    return limits is not None and limits.cut


def notice(line: str) -> None:
    """Tell the current run's trace ``line`` (an observation), if a run is in progress."""
    limits = _limits.get()
    if limits is not None and limits.notify is not None:
        limits.notify(line)


def report_trim(record: dict[str, Any]) -> None:
    """Record a trimmed prompt turn on the current run and tell its trace."""
    limits = _limits.get()
    if limits is None:
        return
    limits.trims.append(record)
    how = "summarised" if record.get("summarised") else "cut"
    notice(
        f"The prompt did not fit the model's context window ({record['budget']} tokens "
        f"for the prompt): the {record['role']} turn was {how} from {record['chars']} to "
        f"{record['kept_chars']} characters."
    )


def estimate_tokens(text: str) -> int:
    """Tokens ``text`` is assumed to take on a server whose tokenizer is unknown
    (:data:`BYTES_PER_TOKEN`)."""
    return math.ceil(len(text.encode("utf-8")) / BYTES_PER_TOKEN)


def truncation_mark(left_out: int, total: int) -> str:
    """The visible mark of a middle cut: ``" [truncated: 1200 of 5000 chars] "``."""
    return f" [truncated: {left_out} of {total} chars] "


def cut_middle(text: str, keep: int) -> str:
    """``text`` cut to about ``keep`` characters: two thirds from the head, one third from
    the tail, with :func:`truncation_mark` between; unchanged when already that short."""
    if keep >= len(text):
        return text
    keep = max(keep, 0)
    head = keep * 2 // 3
    tail = keep - head
    mark = truncation_mark(len(text) - keep, len(text))
    return text[:head] + mark + (text[len(text) - tail :] if tail > 0 else "")


USER_ROLES = frozenset({"human", "user"})
"""Roles of a user's turn in the ``(role, text)`` pairs :func:`fit_turns` is given."""
DIGEST_LINE_CHARS = 160
"""A line of a summarised history turn is cut to this many characters."""


def summary_of(text: str, keep: int) -> str | None:
    """A history turn summarised in at most ``keep`` characters: its first line, then the
    first line of each paragraph after it — for a tool result, its status line and the
    heading of each section it returned (``[3] BNS_S103 · Section 103. …``), which the model
    can read again — under a mark saying what was left out. ``None`` when the turn has fewer
    than two paragraphs or the summary would not fit (the caller cuts the middle instead).
    """
    first, _, rest = text.strip().partition("\n")
    paragraphs = [p.strip() for p in rest.split("\n\n") if p.strip()]
    if len(paragraphs) < 2:
        return None
    heads = [first, *(p.splitlines()[0] for p in paragraphs)]
    lines = [h if len(h) <= DIGEST_LINE_CHARS else h[: DIGEST_LINE_CHARS - 1] + "…" for h in heads]
    mark = (
        f"[summarised: the first line of each of its {len(paragraphs)} parts kept, "
        f"{len(text)} chars in all]"
    )
    summary = "\n".join([mark, *lines])
    return summary if len(summary) <= keep and len(summary) < len(text) else None


def fit_turns(
    turns: Sequence[tuple[str, str]],
    budget: int,
    count: Callable[[str], int],
) -> list[str]:
    """The texts of ``turns`` (``(role, text)``) cut until their tokens fit ``budget``.

    Older non-system turns other than the user's first (a tool loop's question) are cut
    first — summarised (:func:`summary_of`: a tool result's
    status and the headings of the sections it returned) where that fits, else by
    :func:`cut_middle` — then the last turn and the question (each to no fewer than
    :data:`MIN_TURN_TOKENS` tokens), then the older turns again down to the bare mark (they
    are the run's history), then the system turns; the longest turn of a tier first. Each
    cut is reported (:func:`report_trim`).

    Args:
        turns: the prompt's turns in order.
        budget: tokens the turns may take in all (template overhead already deducted).
        count: tokens of one text (the model's tokenizer, or :func:`estimate_tokens`).

    Returns:
        The (possibly cut) texts, one per turn.

    Raises:
        ContextWindowExceeded: the turns cannot be cut to fit (a window far too small).
    """
    texts = [text for _, text in turns]
    counts = [count(text) for text in texts]
    if sum(counts) <= budget:
        return texts
    original = list(texts)
    last = len(texts) - 1
    roles = [role for role, _ in turns]
    # the user's first turn is the question of a tool loop: cut like the last turn, never
    # down to the bare mark (issue 28: a question cut 805 -> 31 tokens)
    asked = next((i for i, role in enumerate(roles) if role in USER_ROLES), last)
    kept = {last, asked}
    middle = [i for i in range(len(texts)) if i not in kept and roles[i] != "system"]
    system = [i for i in range(len(texts)) if roles[i] == "system"]
    tiers = [(middle, MIN_TURN_TOKENS), (sorted(kept), MIN_TURN_TOKENS), (middle, 0)]
    tiers.append((system, MIN_TURN_TOKENS))
    for tier, least in tiers:
        while sum(counts) > budget:
            shrinkable = [
                i for i in tier if counts[i] > least and texts[i].strip() and not _bare(texts[i])
            ]
            if not shrinkable:
                break
            i = max(shrinkable, key=lambda j: counts[j])
            target = max(counts[i] - (sum(counts) - budget) - 24, least)
            source = original[i]
            keep = int(len(texts[i]) * target / counts[i]) if least else 0
            summary = summary_of(source, keep) if tier is middle and least else None
            cut = summary or cut_middle(source, min(keep, len(source) - 1))
            new = count(cut)
            if new >= counts[i]:
                break
            texts[i], counts[i] = cut, new
    if sum(counts) > budget:
        raise ContextWindowExceeded(
            f"the prompt needs {sum(counts)} tokens even after cutting every turn; the "
            f"model's context window leaves {budget} for it"
        )
    for i, text in enumerate(texts):
        if text != original[i]:
            report_trim(
                {
                    "turn": i,
                    "role": roles[i],
                    "chars": len(original[i]),
                    "kept_chars": len(text),
                    "summarised": text.startswith("[summarised: "),
                    "tokens": counts[i],
                    "budget": budget,
                }
            )
    return texts


def _bare(text: str) -> bool:
    """Whether ``text`` is a truncation mark and nothing else."""
    return bool(re.fullmatch(r"\s*\[truncated: \d+ of \d+ chars\]\s*", text))


def _bound(runnable: Any) -> tuple[Any, dict[str, Any]]:
    """The chat model under ``runnable`` (a ``bind``/``bind_tools`` result) and the bound
    keyword arguments."""
    kwargs: dict[str, Any] = {}
    while hasattr(runnable, "bound") and hasattr(runnable, "kwargs"):
        kwargs = {**dict(runnable.kwargs or {}), **kwargs}
        runnable = runnable.bound
    return runnable, kwargs


def _is_local(model: Any) -> bool:
    return getattr(model, "_llm_type", "") == "sleuth-llamacpp"


def _is_openai(model: Any) -> bool:
    return any(cls.__name__ == "BaseChatOpenAI" for cls in type(model).__mro__)


def output_budget(model: Any, bound: dict[str, Any]) -> int:
    """Tokens the reply may take: the call's bound ``max_tokens``, else the model's own cap,
    else :data:`DEFAULT_OUTPUT_RESERVE`."""
    value = bound.get("max_tokens") or getattr(model, "max_tokens", None)
    return int(value or DEFAULT_OUTPUT_RESERVE)


def _schema_tokens(tools: Any) -> int:
    return estimate_tokens(json.dumps(tools, separators=(",", ":")))


def compact_tools(tools: Sequence[Any]) -> list[Any]:
    """OpenAI-style tool specs in their short form, for a small context window: each tool's
    description cut to its first sentence, its parameters' descriptions and examples
    dropped (names, types and required lists kept, so calls stay valid)."""

    def params(schema: Any) -> Any:
        if not isinstance(schema, dict):
            return schema
        out = {k: v for k, v in schema.items() if k not in ("description", "examples", "title")}
        if isinstance(out.get("properties"), dict):
            out["properties"] = {k: params(v) for k, v in out["properties"].items()}
        if isinstance(out.get("items"), dict):
            out["items"] = params(out["items"])
        return out

    short = []
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if not isinstance(function, dict):
            short.append(tool)
            continue
        description = str(function.get("description") or "")
        first = re.split(r"(?<=[.!?])\s", description, maxsplit=1)[0]
        short.append(
            {
                **tool,
                "function": {
                    **function,
                    "description": first,
                    "parameters": params(function.get("parameters") or {}),
                },
            }
        )
    return short


def fit_messages(messages: Any, reserve: int, tools: Any, window: int) -> Any:
    """``messages`` (a list of LangChain messages) with their text cut to fit ``window``
    tokens, counting ``reserve`` tokens for the reply and the bound tools' schemas; other
    inputs as they are."""
    if not isinstance(messages, list) or not all(hasattr(m, "content") for m in messages):
        return messages
    messages = [_short_arguments(m) for m in messages]
    schema = _schema_tokens(tools) if tools else 0
    # what cannot be cut: the tool calls of earlier assistant turns, non-text content
    fixed = sum(
        estimate_tokens(json.dumps(getattr(m, "tool_calls", None) or [], default=str))
        + (0 if isinstance(m.content, str) else estimate_tokens(json.dumps(m.content)))
        for m in messages
    )
    budget = window - reserve - schema - fixed - PROMPT_OVERHEAD - TURN_OVERHEAD * len(messages)
    textual = [i for i, m in enumerate(messages) if isinstance(m.content, str)]
    turns = [(messages[i].type, messages[i].content) for i in textual]
    try:
        texts = fit_turns(turns, budget, estimate_tokens)
    except ContextWindowExceeded as exc:
        if schema > window // 3:
            raise ContextWindowExceeded(
                f"{exc}: the tools' descriptions alone take ~{schema} of the {window}-token "
                "window; use guided mode (--mode guided) or a larger window "
                "(SLEUTH_LLM_CONTEXT_TOKENS, the server's -c)"
            ) from exc
        raise
    out = list(messages)
    for i, text in zip(textual, texts, strict=True):
        if text != messages[i].content:
            out[i] = messages[i].model_copy(update={"content": text})
    return out


def _short_arguments(message: Any) -> Any:
    """``message`` with each long string argument of its tool calls (an earlier turn's
    ``rag_search`` of a whole long question) cut to :data:`MAX_ARGUMENT_CHARS`."""
    tool_calls = getattr(message, "tool_calls", None)
    if not tool_calls:
        return message

    def short(value: Any) -> Any:
        if isinstance(value, str) and len(value) > MAX_ARGUMENT_CHARS:
            return cut_middle(value, MAX_ARGUMENT_CHARS)
        return value

    cut = [
        {**c, "args": {k: short(v) for k, v in (c.get("args") or {}).items()}} for c in tool_calls
    ]
    return message if cut == tool_calls else message.model_copy(update={"tool_calls": cut})


def context_refusal(exc: BaseException) -> ContextWindowExceeded | None:
    """A :class:`ContextWindowExceeded` for a server's refusal of a too-long prompt (an
    HTTP 400 whose message speaks of the context length), else ``None``."""
    status = getattr(exc, "status_code", None)
    text = str(exc)
    if status not in (400, 413, None) or not _CONTEXT_REFUSAL.search(text):
        return None
    if status is None and "400" not in text:
        return None
    numbers = ", ".join(n for n in _NUMBERS.findall(text) if len(n) >= 3 and n != "400")
    detail = f" (the server's numbers: {numbers})" if numbers else ""
    return ContextWindowExceeded(
        f"the model server refused the prompt as longer than its context window{detail}; "
        "set SLEUTH_LLM_CONTEXT_TOKENS to the server's window so that prompts are fitted "
        f"to it, or start the server with a larger one. Server said: {text[:300]}"
    )


def invoke(runnable: Any, messages: Any, *, stream_answer: bool = False, **kwargs: Any) -> Any:
    """``runnable.invoke(messages, **kwargs)`` under the current run's limits (see the
    module doc).

    With ``stream_answer`` (a call whose reply is the answer the user reads) and a run whose
    limits take answer text (:attr:`RunLimits.answer_delta`), the reply is generated with
    ``runnable.stream`` instead and each piece of text is handed on as it comes
    (:func:`_streamed`); the call returns the whole reply all the same.

    Raises:
        ModelDeadlineExceeded: the deadline passed before or during the call.
        ContextWindowExceeded: the server refused the prompt for its length, or it cannot
            be fitted to the known window.
        Exception: whatever the model raises otherwise.
    """
    limits = _limits.get()
    if stream_answer and limits is not None and limits.answer_delta is not None:
        kwargs["_sleuth_stream"] = limits
    model, bound = _bound(runnable)
    reserve = output_budget(model, bound)
    window = limits.context_tokens if limits is not None and not _is_local(model) else None
    if window:
        # the reply's share of a small window is capped, and the request asks for no more
        reserve = min(reserve, max(MIN_OUTPUT_RESERVE, window // 16))
        tools = bound.get("tools")
        if tools and _schema_tokens(tools) > window // 3:
            # the tools' schemas would crowd out the conversation: their short form
            tools = kwargs["tools"] = compact_tools(tools)
        messages = fit_messages(messages, reserve, tools, window)
    if _is_openai(model) and (window or bound.get("max_tokens")):
        # an OpenAI-compatible server reads the body's max_tokens, which the client's
        # extra_body sets to the model's cap: the call's own budget must replace it there
        extra = getattr(model, "extra_body", None)
        kwargs.setdefault("max_tokens", reserve)
        kwargs.setdefault("extra_body", {**(extra or {}), "max_tokens": reserve})
    if limits is None:
        return _classified(runnable, messages, kwargs)
    left = limits.remaining()
    if left is None:
        return _classified(runnable, messages, kwargs)
    if left <= 0:
        limits.cut = True
        raise ModelDeadlineExceeded("the run's deadline passed before this model call")
    if _is_openai(model):
        own = getattr(model, "request_timeout", None)  # SLEUTH_LLM_TIMEOUT_S
        kwargs.setdefault("timeout", min(left, own) if isinstance(own, int | float) else left)
    done: Future[Any] = Future()
    context = contextvars.copy_context()

    def work() -> None:
        try:
            done.set_result(context.run(_classified, runnable, messages, kwargs))
        except BaseException as exc:  # handed to the waiting thread
            done.set_exception(exc)

    threading.Thread(target=work, name="sleuth-model-call", daemon=True).start()
    try:
        return done.result(timeout=max(left, 0.0))
    except Exception as exc:
        if not done.done():  # still waiting: the deadline came first
            if not limits.cut:
                notice(
                    f"The model did not answer within the run's remaining {left:.1f} s "
                    "(SLEUTH_RUN_TIMEOUT_S / timeout_s): the run stops there."
                )
            limits.cut = True
            raise ModelDeadlineExceeded(
                f"the model did not answer within the run's remaining {left:.1f} s"
            ) from None
        remaining = limits.remaining()
        if remaining is not None and remaining < 1.0 and _is_timeout(exc):
            limits.cut = True  # the client's own timeout, set to the time left
            raise ModelDeadlineExceeded(f"the model request timed out: {exc}") from exc
        raise


def _classified(runnable: Any, messages: Any, kwargs: dict[str, Any]) -> Any:
    stream_to = kwargs.pop("_sleuth_stream", None)
    try:
        if stream_to is not None:
            return _streamed(runnable, messages, kwargs, stream_to)
        reply = runnable.invoke(messages, **kwargs)
    except Exception as exc:
        refusal = context_refusal(exc)
        if refusal is not None:
            raise refusal from exc
        raise
    limits = _limits.get()
    if limits is not None and closes_unopened_reasoning(getattr(reply, "content", None)):
        limits.reasoning_first = True
    return reply


FINISH_KEYS = ("finish_reason", "stop_reason", "done_reason", "done")
"""Where providers say a reply is finished in its metadata: OpenAI-compatible servers and
the in-process model (``finish_reason``), Anthropic (``stop_reason``), Ollama (``done``)."""


class IncompleteStream(RuntimeError):
    """A streamed reply that ended without the model saying it was finished (a dropped
    connection): the caller treats it as a failed call."""


def _streamed(runnable: Any, messages: Any, kwargs: dict[str, Any], limits: RunLimits) -> Any:
    """The reply of ``runnable.stream(messages)``, its chunks added up into one message, the
    visible part of each chunk's text (reasoning held back:
    :class:`~sleuth.llm.toolcalls.VisibleStream`) handed to ``limits.answer_delta`` as it
    arrives. Reasoning found to have been shown already (a closing tag with no opening one)
    makes the rest a new stream, which replaces it. A model without streaming (LangChain
    then yields the whole reply as one chunk) gives one piece."""
    limits.streams += 1
    stream = limits.streams
    visible = VisibleStream(reasoning_first=limits.reasoning_first)
    reply: Any = None

    def show(text: str) -> None:
        if text and limits.answer_delta is not None:
            limits.answer_delta(text, stream)

    for chunk in runnable.stream(messages, **kwargs):
        reply = chunk if reply is None else reply + chunk
        text = chunk.content if isinstance(chunk.content, str) else ""
        if not text:
            continue
        shown, restart = visible.feed(text)
        if restart:  # what was shown was reasoning: a new stream replaces it, even if empty
            limits.reasoning_first = True
            limits.streams += 1
            stream = limits.streams
            if limits.answer_delta is not None:
                limits.answer_delta(shown, stream)
        else:
            show(shown)
    if reply is None:
        raise IncompleteStream("the model's stream ended without a reply")
    metadata = getattr(reply, "response_metadata", None) or {}
    if not any(metadata.get(key) for key in FINISH_KEYS):
        # the connection closed before the server said the reply was done: a cut reply
        # must not pass for a whole one
        raise IncompleteStream("the model's stream ended before its reply was finished")
    show(visible.end())
    return reply


def _is_timeout(exc: BaseException) -> bool:
    return "timeout" in type(exc).__name__.lower() or "timed out" in str(exc).lower()
