"""Smoke test: llama.cpp's ``llama-server`` (Qwen2.5-Coder-0.5B) through sleuth's provider.

Checks the wiring only: the server started by ``qwen05_server`` answers a chat completion
through ``make_chat_model(openai:qwen0.5b)`` with text and token usage.
"""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage

from sleuth.config import Settings
from sleuth.llm import testing
from sleuth.llm.factory import make_chat_model

pytestmark = pytest.mark.integration


def test_qwen05_server_answers_through_openai_provider(qwen05_server: str) -> None:
    with testing.block_model_requests(False):
        model = make_chat_model(
            Settings(llm="openai:qwen0.5b", llm_base_url=qwen05_server, llm_timeout_s=120)
        )
    assert model is not None
    reply = model.invoke("Say hello")
    assert isinstance(reply, AIMessage)
    assert isinstance(reply.content, str)
    assert reply.content.strip()
    assert reply.usage_metadata is not None
    assert reply.usage_metadata["input_tokens"] > 0
    assert reply.usage_metadata["output_tokens"] > 0
