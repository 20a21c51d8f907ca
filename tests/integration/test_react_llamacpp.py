"""The ReAct agent driven by a real OpenAI-compatible server (llama.cpp + SmolLM2-135M).

The model is tiny: these tests assert the contract — every run terminates with a valid
``GeneratedAnswer``, a status and one terminal event, citations only of retrieved sections —
not the quality of the answer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sleuth.agents.answer import GeneratedAnswer
from sleuth.agents.llm_reasoner import LLMReasoner
from sleuth.agents.state import AgentStepType, RunStatus
from sleuth.config import Settings
from sleuth.llm import testing
from sleuth.llm.factory import make_chat_model
from tests.helpers import make_service

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def server_reasoner(llamacpp_server: str) -> LLMReasoner:
    settings = Settings(
        llm="openai:smollm2", llm_base_url=llamacpp_server, llm_timeout_s=120, llm_max_tokens=96
    )
    with testing.block_model_requests(False):
        model = make_chat_model(settings)
    assert model is not None
    return LLMReasoner(model, name=settings.llm)


def test_react_run_through_openai_provider_terminates_with_a_valid_answer(
    tmp_path: Path, server_reasoner: LLMReasoner
) -> None:
    events = []
    service = make_service(tmp_path, reasoner=server_reasoner)
    response = service.execute_agentic_search(
        "What is the punishment for murder?",
        "test",
        max_iterations=3,
        timeout_s=240,
        sinks=[events.append],
    )
    assert isinstance(response.answer, GeneratedAnswer)
    GeneratedAnswer.model_validate(response.answer.model_dump())
    assert response.answer.answer_text.strip()
    assert response.status in set(RunStatus)
    assert response.trace["reasoner"] == "openai:smollm2"
    # the first step is always a search, made by the model through function calling
    assert response.tool_calls and response.tool_calls[0]["tool"] == "rag_search"
    retrieved = set(response.trace["retrieved_source_ids"])
    assert {c.source_id for c in response.answer.citations} <= retrieved
    finals = [s for s in response.reasoning_steps if s.step_type == AgentStepType.FINAL]
    assert len(finals) == 1
    terminal = [e.type for e in events if e.type in ("done", "error")]
    assert terminal == [events[-1].type] and len(terminal) == 1


def test_eval_counts_the_tokens_the_server_reports(
    tmp_path: Path, server_reasoner: LLMReasoner
) -> None:
    import time

    from sleuth.eval.datasets import EvalQuestion
    from sleuth.eval.runner import EvalConfig, score_run, summarize

    service = make_service(tmp_path, reasoner=server_reasoner)
    question = EvalQuestion(
        id="murder",
        question="What is the punishment for murder?",
        answers=("death or imprisonment for life",),
        gold_source_ids=("BNS_S103",),
    )
    t0 = time.perf_counter()
    response = service.execute_agentic_search(
        question.question, "test", max_iterations=3, timeout_s=240, use_memory=False
    )
    config = EvalConfig(price_input_per_mtok=1.0)
    # SmolLM2-135M may end a run in status error (replies it cannot use); the tokens of
    # every completion still count
    record = score_run(question, response, time.perf_counter() - t0, config)
    assert record["tokens"]["input_tokens"] > 100 and record["tokens"]["output_tokens"] > 0
    tokens = summarize([record])["tokens"]
    assert tokens["reported"]
    assert tokens["total"]["input_tokens"] == record["tokens"]["input_tokens"]
    assert record["cost_usd"] == pytest.approx(record["tokens"]["input_tokens"] / 1e6)
    assert tokens["cost_usd"] == record["cost_usd"]
