"""A real llama.cpp server with a 2,048-token window: sleuth reads the window from the
server (``GET /props``) and fits every prompt to it — a 4,000-character question and a
2.4 MB section included — in both modes. llama-server refuses a longer prompt with an HTTP
400, which would end the run as an error (sleuth.llm.calls.ContextWindowExceeded)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sleuth.agents.state import RunStatus
from sleuth.app import Sleuth
from sleuth.config import Settings
from sleuth.llm import testing
from sleuth.retrieval.embeddings import HashingEmbedder
from tests.helpers import STATUTE_SECTIONS, make_document
from tests.integration.test_model_faults import HUGE

pytestmark = pytest.mark.integration


@pytest.mark.parametrize("mode", ["guided", "react"])
def test_every_prompt_fits_a_2048_token_server(
    qwen05_server_2k: str, tmp_path: Path, mode: str
) -> None:
    embedder = HashingEmbedder()
    settings = Settings(
        data_dir=tmp_path / "data",
        embedding_model=embedder.name,
        index_backend="local",
        llm="openai:qwen0.5b-2k",
        llm_base_url=qwen05_server_2k,
        llm_api_key="none",
        llm_timeout_s=120,
        planner="heuristic",
        reflection="heuristic",
        memory=False,
        max_iterations=3,
    )
    with testing.block_model_requests(False):
        app = Sleuth(settings, embedder=embedder)
        sections = {**STATUTE_SECTIONS, "LAMP_S1": ("Register of lanterns.", HUGE)}
        app.pipeline.ingest_documents([make_document(sections)], "test")
        question = "What must the register of lanterns record? " + "Be thorough. " * 290
        assert 3800 < len(question) <= 4000
        response = app.agent.execute_agentic_search(question, "test", mode=mode)
        app.close()
    assert response.trace["context_tokens"] == 2048
    assert response.status != RunStatus.ERROR, response.trace["error"]
    assert response.trace["prompt_trims"], "the question or the evidence had to be cut"
    assert response.answer.answer_text
