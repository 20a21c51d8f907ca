"""The in-process model's prompt cache plumbing, with a scripted stand-in for llama.cpp."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np

from sleuth.llm.local import LlamaCppChatModel
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


def _model() -> LlamaCppChatModel:
    return LlamaCppChatModel(model_path="unused.gguf", timeout_s=None)


def test_a_completed_reply_is_read_to_the_stream_end() -> None:
    llama = FakeLlama(["Facts: [1]\n", "Answer: 7 years"])
    text, reason, chunks = _model()._stream_text(
        llama, [], grammar=None, stop=None, stop_at_json=False
    )
    assert (text, reason, chunks) == ("Facts: [1]\nAnswer: 7 years", "stop", 2)
    assert llama.finished
    assert llama.cache == {}  # llama-cpp-python saved it itself


def test_a_tool_call_cut_at_its_json_end_keeps_the_prompt_state() -> None:
    llama = FakeLlama(['{"tool": "rag_search", ', '"arguments": {"query": "bail"}}', " more"])
    text, reason, _ = _model()._stream_text(llama, [], grammar=None, stop=None, stop_at_json=True)
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
