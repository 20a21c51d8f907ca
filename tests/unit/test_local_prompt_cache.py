"""The in-process model's prompt cache plumbing, with a scripted stand-in for llama.cpp."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
from langchain_core.messages import HumanMessage

from sleuth.llm import local
from sleuth.llm.local import LlamaCppChatModel, _Call, _Generated
from sleuth.tools.base import RunContext


class FakeLlama:
    """Streams scripted chat chunks; records whether the stream was read to its end (where
    llama-cpp-python stores the prompt's state in its cache)."""

    def __init__(self, pieces: list[str]) -> None:
        self.pieces = pieces
        self.finished = False
        self.cache: dict[tuple[int, ...], str] = {}
        self.input_ids = np.arange(100, dtype=np.intc)
        self.n_tokens = 42

    def create_chat_completion(self, **_: Any) -> Iterator[dict[str, Any]]:
        for piece in self.pieces:
            yield {"choices": [{"delta": {"content": piece}, "finish_reason": None}]}
        yield {"choices": [{"delta": {}, "finish_reason": "stop"}]}
        self.finished = True  # the cache save of llama-cpp-python happens here

    def save_state(self) -> str:
        return f"state of {self.n_tokens} tokens"

    def tokenize(self, text: bytes, add_bos: bool = False) -> list[int]:
        return list(range(len(text.split())))


def _model() -> LlamaCppChatModel:
    return LlamaCppChatModel(model_path="unused.gguf", timeout_s=None)


def _generate(llama: FakeLlama, names: list[str]) -> tuple[str, str | None, int]:
    out = _Generated()
    call = _Call(llama, threading.Lock(), [], None, names, 64)
    pieces = list(_model()._pieces(call, None, out))
    assert pieces == out.pieces
    return "".join(out.pieces), out.finish_reason, out.tokens


def test_a_completed_reply_is_read_to_the_stream_end() -> None:
    llama = FakeLlama(["Facts: [1]\n", "Answer: 7 years"])
    text, reason, chunks = _generate(llama, [])
    assert (text, reason, chunks) == ("Facts: [1]\nAnswer: 7 years", "stop", 2)
    assert llama.finished
    assert llama.cache == {}  # llama-cpp-python saved it itself


def test_a_tool_call_cut_at_its_json_end_keeps_the_prompt_state() -> None:
    llama = FakeLlama(['{"tool": "rag_search", ', '"arguments": {"query": "bail"}}', " more"])
    text, reason, _ = _generate(llama, ["rag_search"])
    assert reason == "tool_call"
    assert text.endswith("}}")
    assert not llama.finished
    assert llama.cache == {tuple(range(42)): "state of 42 tokens"}


def test_prompt_tokens_read_from_a_cache_are_counted_apart() -> None:
    ctx = RunContext(collection="c")
    ctx.add_usage(
        {
            "input_tokens": 1200,
            "output_tokens": 30,
            "input_token_details": {"cache_read": 900},
        },
        stage="generator",
    )
    ctx.add_usage({"input_tokens": 100, "output_tokens": 5})
    assert ctx.usage == {"input_tokens": 1300, "output_tokens": 35, "cached_input_tokens": 900}
    assert ctx.usage_by_stage["generator"]["cached_input_tokens"] == 900


def test_an_answer_streams_piece_by_piece_with_its_token_counts_last(monkeypatch: Any) -> None:
    llama = FakeLlama(["Seven", " years", " [1]."])
    monkeypatch.setattr(local, "_load", lambda *_: (llama, threading.Lock()))
    chunks = list(_model().stream([HumanMessage("How long?")]))
    assert [c.content for c in chunks if c.content] == ["Seven", " years", " [1]."]
    whole = chunks[0]
    for chunk in chunks[1:]:
        whole = whole + chunk
    assert whole.content == "Seven years [1]."
    assert whole.usage_metadata is not None and whole.usage_metadata["output_tokens"] == 3
    assert whole.response_metadata["finish_reason"] == "stop"
    assert llama.finished


def test_a_reply_with_tools_bound_comes_whole_as_a_parsed_call(monkeypatch: Any) -> None:
    llama = FakeLlama(['{"tool": "rag_search", ', '"arguments": {"query": "bail"}}'])
    monkeypatch.setattr(local, "_load", lambda *_: (llama, threading.Lock()))
    spec = {
        "type": "function",
        "function": {
            "name": "rag_search",
            "description": "search",
            "parameters": {"type": "object", "properties": {"query": {"type": "string"}}},
        },
    }
    chunks = list(_model().bind_tools([spec]).stream([HumanMessage("bail?")]))
    assert not any(c.content for c in chunks)  # a call's JSON is never shown as text
    whole = chunks[0]
    for chunk in chunks[1:]:
        whole = whole + chunk
    assert [(c["name"], c["args"]) for c in whole.tool_calls] == [("rag_search", {"query": "bail"})]
