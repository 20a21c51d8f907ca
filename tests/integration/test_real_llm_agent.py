"""The agent with a real model over the wire.

* Through llama.cpp's own ``llama-server`` (fixtures in ``conftest.py``) with
  Qwen2.5-Coder-0.5B (fast) and one 1.5B run: a ReAct run executes a tool and ends with the
  model's own cited answer (never replaced by the extractive one); a guided run likewise.
* Through a loopback OpenAI-compatible HTTP server that replays the awkward replies real
  servers send — tool-call arguments encoded twice, content as a list of parts with a
  thinking part — so the provider's own parsing is in the path.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import pytest

from sleuth.agents.llm_reasoner import LLMReasoner
from sleuth.agents.state import RunStatus
from sleuth.config import Settings
from sleuth.llm import testing
from sleuth.llm.factory import make_chat_model
from tests.helpers import make_service

pytestmark = pytest.mark.integration

MURDER = "What is the punishment for murder?"


def _reasoner(url: str, name: str) -> LLMReasoner:
    settings = Settings(
        llm=f"openai:{name}", llm_base_url=url, llm_timeout_s=180, llm_max_tokens=256
    )
    with testing.block_model_requests(False):
        model = make_chat_model(settings)
    assert model is not None
    return LLMReasoner(model, name=settings.llm)


def _local_model() -> Any:
    """The in-process 1.5B model (``SLEUTH_LLM=local``); skips when it is not installed."""
    pytest.importorskip("llama_cpp", reason='llama-cpp-python is not installed ("sleuth[local]")')
    from sleuth.errors import SleuthError

    try:
        with testing.block_model_requests(False):
            model = make_chat_model(Settings(llm="local", llm_timeout_s=180))
    except SleuthError as exc:
        pytest.skip(f"the local 1.5B model is not available: {exc}")
    assert model is not None
    return model


def _assert_models_own_cited_answer(response: Any) -> None:
    assert response.status == RunStatus.COMPLETED, response.answer.answer_text
    assert response.tool_calls and response.tool_calls[0]["tool"] == "rag_search"
    assert response.trace.get("answer_replaced") is None
    assert response.trace["answer_source"] in ("model", "repaired")
    cited = {c.source_id for c in response.answer.citations}
    assert cited and cited <= set(response.trace["retrieved_source_ids"])
    text = response.answer.answer_text
    assert "```" not in text and "{" not in text and "answer_text" not in text


@pytest.mark.parametrize("mode", ["react", "guided"])
def test_qwen_05b_over_llama_server_answers_with_its_own_cited_answer(
    tmp_path: Path, qwen05_server: str, mode: str
) -> None:
    service = make_service(tmp_path, reasoner=_reasoner(qwen05_server, "qwen0.5b"))
    with testing.block_model_requests(False):
        response = service.execute_agentic_search(
            MURDER, "test", mode=mode, timeout_s=240, use_memory=False
        )
    # the 0.5B model is weak: it may decline, but it searches, and whatever it writes is its
    # own (never swapped for the extractive answer), clean of JSON and fences
    assert response.tool_calls and response.tool_calls[0]["tool"] == "rag_search"
    assert response.trace.get("answer_replaced") is None
    assert response.status in (RunStatus.COMPLETED, RunStatus.INSUFFICIENT_CONTEXT)
    text = response.answer.answer_text
    assert text.strip() and "```" not in text and "answer_text" not in text
    if response.status == RunStatus.COMPLETED:
        _assert_models_own_cited_answer(response)


def test_qwen_15b_over_llama_server_react_run(tmp_path: Path, qwen15_server: str) -> None:
    service = make_service(tmp_path, reasoner=_reasoner(qwen15_server, "qwen1.5b"))
    with testing.block_model_requests(False):
        response = service.execute_agentic_search(MURDER, "test", timeout_s=300, use_memory=False)
    # over llama-server the 1.5B has been seen to decline this question (see the in-process
    # test below for the answer itself): the contract is a search and the model's own words
    assert response.tool_calls and response.tool_calls[0]["tool"] == "rag_search"
    assert response.trace.get("answer_replaced") is None
    if response.status == RunStatus.COMPLETED:
        _assert_models_own_cited_answer(response)


@pytest.mark.parametrize("mode", ["react", "guided"])
def test_qwen_15b_in_process_answers_with_its_own_cited_answer(tmp_path: Path, mode: str) -> None:
    service = make_service(tmp_path, reasoner=LLMReasoner(_local_model(), name="local"))
    with testing.block_model_requests(False):
        response = service.execute_agentic_search(
            MURDER, "test", mode=mode, timeout_s=300, use_memory=False
        )
    _assert_models_own_cited_answer(response)
    assert response.answer.citations[0].source_id == "BNS_S103"
    assert "death" in response.answer.answer_text.lower()


# ---------------------------------------------------------------- replayed server replies


class _Replay(BaseHTTPRequestHandler):
    replies: ClassVar[list[dict[str, Any]]] = []
    requests: ClassVar[list[dict[str, Any]]] = []
    throttled: ClassVar[int] = 0
    """Requests answered ``429`` with ``Retry-After: 1`` before the replies start."""

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        if type(self).throttled > 0:
            type(self).throttled -= 1
            error = b'{"error": {"message": "Rate limit reached", "type": "rate_limit"}}'
            self.send_response(429)
            self.send_header("Retry-After", "1")
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(error)))
            self.end_headers()
            self.wfile.write(error)
            return
        type(self).requests.append(body)
        message = type(self).replies[min(len(type(self).requests), len(type(self).replies)) - 1]
        payload = json.dumps(
            {
                "id": f"chatcmpl-{len(type(self).requests)}",
                "object": "chat.completion",
                "created": 0,
                "model": "replay",
                "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture
def replay_server() -> Iterator[type[_Replay]]:
    handler = type("Replay", (_Replay,), {"replies": [], "requests": []})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    handler.url = f"http://127.0.0.1:{server.server_address[1]}/v1"  # type: ignore[attr-defined]
    try:
        yield handler
    finally:
        server.shutdown()


def test_double_encoded_arguments_and_content_parts_over_the_wire(
    tmp_path: Path, replay_server: type[_Replay]
) -> None:
    twice = json.dumps(json.dumps({"query": "punishment for murder", "top_k": 3}))
    replay_server.replies = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "rag_search", "arguments": twice},
                }
            ],
        },
        {
            "role": "assistant",
            "content": "<think>S103 holds it.</think>Death or imprisonment for life [1].",
        },
    ]
    service = make_service(tmp_path, reasoner=_reasoner(replay_server.url, "replay"))  # type: ignore[attr-defined]
    with testing.block_model_requests(False):
        response = service.execute_agentic_search(MURDER, "test", use_memory=False)
    assert [(c["tool"], c["arguments"]) for c in response.tool_calls] == [
        ("rag_search", {"query": "punishment for murder", "top_k": 3})
    ]
    text = response.answer.answer_text
    assert text.startswith("Death or imprisonment for life [BNS_S103].\n")
    assert "shall be punished with death" in text  # the rule, quoted after the model's answer
    assert "S103 holds it" not in text
    # the second request carried the call back in structured form, answered by its result
    second = replay_server.requests[1]["messages"]
    assert any(m.get("tool_calls") for m in second if m["role"] == "assistant")
    assert any(m["role"] == "tool" and m.get("tool_call_id") == "call_1" for m in second)


def test_a_rate_limited_request_says_so_in_the_trace_while_it_waits(
    tmp_path: Path, replay_server: type[_Replay]
) -> None:
    replay_server.throttled = 1
    replay_server.replies = [
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "rag_search", "arguments": '{"query": "murder"}'},
                }
            ],
        },
        {"role": "assistant", "content": "Death or imprisonment for life [1]."},
    ]
    events: list[Any] = []
    service = make_service(tmp_path, reasoner=_reasoner(replay_server.url, "replay"))  # type: ignore[attr-defined]
    with testing.block_model_requests(False):
        response = service.execute_agentic_search(
            MURDER, "test", use_memory=False, sinks=[events.append]
        )
    waits = [e.content for e in events if e.type == "observe" and "retrying in" in e.content]
    assert waits == [
        "The model request did not go through (a rate limit, a busy server or a timeout): "
        "retrying in 1 s (retry 1 of 2)."
    ]
    # shown while the first (forced) search call waits, before it runs
    wait_at = next(i for i, e in enumerate(events) if getattr(e, "content", "") == waits[0])
    assert wait_at < next(i for i, e in enumerate(events) if e.type == "tool_call")
    assert response.status == RunStatus.COMPLETED


def test_qwen_15b_in_process_reads_the_generators_instructions_from_the_prompt_cache(
    tmp_path: Path,
) -> None:
    """Two guided runs with another prompt between them (as ReAct's loop turns or a
    decomposition come between two generator calls): the second run's generator does not
    evaluate its instructions again — they come from the prompt cache, as the trace's
    token counts show."""
    from langchain_core.messages import HumanMessage, SystemMessage

    model = _local_model()
    service = make_service(tmp_path, reasoner=LLMReasoner(model, name="local"))
    with testing.block_model_requests(False):
        service.execute_agentic_search(
            MURDER, "test", mode="guided", timeout_s=300, use_memory=False
        )
        model.invoke([SystemMessage("Reply with one word."), HumanMessage("Name a colour.")])
        response = service.execute_agentic_search(
            "What is the punishment for theft?",
            "test",
            mode="guided",
            timeout_s=300,
            use_memory=False,
        )
    generator = response.trace["token_usage_by_stage"]["generator"]
    assert generator["input_tokens"] > 300
    assert generator["cached_input_tokens"] >= 150  # the instructions (~190 tokens)


def test_qwen_15b_in_process_judges_whether_a_section_is_about_a_question() -> None:
    """The coverage judge's forward pass on the real model: a section about the situation
    gets higher log-odds of "Yes" than one about something else, and a second judgement
    with the same instructions does not evaluate them again."""
    from sleuth.agents.coverage import judge_messages

    model = _local_model()
    theft = (
        "Section: Theft\nWhoever, intending to take dishonestly any movable property out of "
        "the possession of any person without that person's consent, moves that property in "
        "order to such taking, is said to commit theft."
    )
    ferries = (
        "Section: Licences of ferries\nNo ferry shall carry passengers unless its owner holds "
        "a licence issued by the port officer."
    )
    question = "Someone walked off with my bag while I was not looking. What offence is that?"
    with testing.block_model_requests(False):
        about, _ = model.first_token_log_odds(judge_messages(question, theft), "Yes", "No")
        other, usage = model.first_token_log_odds(judge_messages(question, ferries), "Yes", "No")
    assert about > other
    assert about > 0 > other or about - other > 2
    assert usage["input_token_details"]["cache_read"] >= 20  # the judge's instructions


def test_qwen_15b_in_process_reads_a_yes_no_verdict_off_a_section() -> None:
    """The verdict judge's forward pass on the real model: the same question read on a
    section that permits the act gets higher log-odds of "Yes" than on one that forbids it."""
    from sleuth.agents.verdict import judge_messages

    model = _local_model()
    question = "May a ferry carry passengers at night?"
    permits = (
        "Section: Night sailings\nA ferry may carry passengers at night when two lamps are "
        "lit on its deck."
    )
    forbids = (
        "Section: Night sailings\nNo ferry shall carry passengers at night, whatever lamps "
        "are lit on its deck."
    )
    with testing.block_model_requests(False):
        yes, _ = model.first_token_log_odds(judge_messages(question, permits), "Yes", "No")
        no, _ = model.first_token_log_odds(judge_messages(question, forbids), "Yes", "No")
    assert yes > no
    assert yes - no > 1.0


def test_qwen_15b_in_process_answers_a_prohibition_no(tmp_path: Path) -> None:
    """A yes/no question a prohibition answers: whatever the 1.5B model writes or reads (it
    leans to Yes), the shipped verdict is the rule's No, with the rule cited."""
    sections = {
        "HC_S40": (
            "Statements to harbour guards.",
            "(1) No statement made to a harbour guard shall be proved against a ferry captain. "
            "(2) A harbour guard may record a statement in writing.",
        ),
        "HC_S41": (
            "Night sailings.",
            "A ferry may carry passengers at night when two lamps are lit on its deck.",
        ),
    }  # written for this test
    service = make_service(
        tmp_path, sections=sections, reasoner=LLMReasoner(_local_model(), name="local")
    )
    question = "Can a statement made to a harbour guard be proved against a ferry captain?"
    with testing.block_model_requests(False):
        response = service.execute_agentic_search(
            question, "test", mode="guided", timeout_s=300, use_memory=False
        )
    assert response.answer.answer_text.startswith("No."), response.answer.answer_text
    assert "HC_S40" in [c.source_id for c in response.answer.citations]
    check = response.trace.get("yes_no_check") or ""
    assert "overturned to yes" not in check
