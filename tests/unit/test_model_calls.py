"""Model calls under a run's limits (sleuth.llm.calls): the deadline, the context window,
a server's refusal of a long prompt — and the runs of both modes that meet them."""

from __future__ import annotations

import re
import time
from typing import Any

import pytest
from langchain_core.messages import HumanMessage, SystemMessage

from sleuth.agents.llm_reasoner import LLMReasoner
from sleuth.agents.state import RunStatus
from sleuth.errors import ContextWindowExceeded, ModelDeadlineExceeded
from sleuth.llm import calls
from sleuth.llm.calls import RunLimits, run_limits
from sleuth.llm.testing import ScriptedChatModel
from tests.helpers import make_service


def _hang(seconds: float):
    def reply(_messages):
        time.sleep(seconds)
        return "too late"

    return reply


class _Refusal(Exception):
    """What an OpenAI-compatible client raises for llama.cpp's context-length 400."""

    status_code = 400


def test_outside_a_run_a_call_is_a_plain_invoke() -> None:
    model = ScriptedChatModel(["hello"])
    assert calls.invoke(model, [HumanMessage("hi")]).content == "hello"
    assert calls.current() is None


def test_a_call_is_given_up_at_the_deadline_and_marks_the_run() -> None:
    model = ScriptedChatModel([_hang(3.0)])
    limits = RunLimits(deadline=time.monotonic() + 0.3)
    started = time.monotonic()
    with run_limits(limits), pytest.raises(ModelDeadlineExceeded, match="did not answer"):
        calls.invoke(model, [HumanMessage("hi")])
    assert time.monotonic() - started < 1.5
    assert limits.cut


def test_no_call_is_sent_after_the_deadline() -> None:
    model = ScriptedChatModel(["never"])
    limits = RunLimits(deadline=time.monotonic() - 1)
    with run_limits(limits), pytest.raises(ModelDeadlineExceeded, match="before this"):
        calls.invoke(model, [HumanMessage("hi")])
    assert model.calls == [] and limits.cut


def test_a_context_length_refusal_is_its_own_error() -> None:
    def refuse(_messages):
        raise _Refusal(
            "Error code: 400 - {'error': {'message': 'the request exceeds the available "
            "context size (5940 > 2048), try increasing it'}}"
        )

    with pytest.raises(ContextWindowExceeded, match="5940, 2048") as info:
        calls.invoke(ScriptedChatModel([refuse]), [HumanMessage("hi")])
    assert "SLEUTH_LLM_CONTEXT_TOKENS" in str(info.value)


def test_other_failures_pass_through_unchanged() -> None:
    def fail(_messages):
        raise _Refusal("Error code: 400 - invalid tool schema")

    with pytest.raises(_Refusal):
        calls.invoke(ScriptedChatModel([fail]), [HumanMessage("hi")])


def test_a_prompt_is_fitted_to_a_known_window_and_every_cut_is_reported() -> None:
    seen = []
    model = ScriptedChatModel([lambda messages: seen.append(messages) or "ok"])
    lines: list[str] = []
    limits = RunLimits(deadline=time.monotonic() + 30, context_tokens=1024, notify=lines.append)
    system = "Answer from the evidence. " * 10
    question = "What is the punishment for theft?"
    evidence = "Whoever commits theft shall be punished. " * 400  # ~16,000 chars
    with run_limits(limits):
        calls.invoke(model.bind(max_tokens=128), [SystemMessage(system), HumanMessage(evidence)])
    sent = seen[0]
    assert sent[0].content == system  # the system turn is cut last
    assert "[truncated: " in sent[1].content and "of 16400 chars]" in sent[1].content
    total = sum(calls.estimate_tokens(m.content) for m in sent)
    assert total <= 1024 - 128 - calls.PROMPT_OVERHEAD
    assert [t["role"] for t in limits.trims] == ["human"]
    assert limits.trims[0]["chars"] == len(evidence)
    assert lines and "context window" in lines[0]
    del question


def test_fit_turns_cuts_the_middle_and_raises_when_nothing_can_fit() -> None:
    turns = [("system", "s " * 30), ("human", "q " * 10), ("human", "e " * 2000)]
    texts = calls.fit_turns(turns, 300, lambda t: len(t.split()))
    assert texts[:2] == [turns[0][1], turns[1][1]]
    assert texts[2].startswith("e e") and texts[2].rstrip().endswith("e")
    assert sum(len(t.split()) for t in texts) <= 300
    with pytest.raises(ContextWindowExceeded, match="even after cutting"):
        calls.fit_turns(
            [("system", "s " * 200), ("human", "q " * 200)], 50, lambda t: len(t.split())
        )


@pytest.mark.parametrize("mode", ["guided", "react"])
def test_a_hung_model_ends_the_run_as_timeout_with_an_answer(tmp_path, mode) -> None:
    model = ScriptedChatModel([_hang(5.0)] * 12)
    service = make_service(tmp_path, reasoner=LLMReasoner(model))
    started = time.monotonic()
    response = service.execute_agentic_search(
        "What is the punishment for murder?", "test", mode=mode, timeout_s=1.5
    )
    elapsed = time.monotonic() - started
    assert response.status == RunStatus.TIMEOUT
    assert elapsed < 1.5 + 2.0
    assert response.answer.answer_text
    assert response.trace["deadline_cut_model_call"] is True


@pytest.mark.parametrize("mode", ["guided", "react"])
def test_a_refused_prompt_ends_the_run_as_an_error_not_as_missing_evidence(tmp_path, mode) -> None:
    def refuse(_messages):
        raise _Refusal("Error code: 400 - exceeds the available context size (5940 > 2048)")

    service = make_service(tmp_path, reasoner=LLMReasoner(ScriptedChatModel([refuse] * 12)))
    response = service.execute_agentic_search(
        "What is the punishment for murder?", "test", mode=mode
    )
    assert response.status == RunStatus.ERROR
    assert "context window" in (response.trace["error"] or "")
    assert "does not contain" not in response.answer.answer_text


def test_a_long_section_is_read_with_a_visible_cut_at_a_word(tmp_path) -> None:
    from sleuth.tools.base import RunContext
    from sleuth.tools.rag import SECTION_CHARS, build_rag_tools, clip
    from tests.helpers import STATUTE_SECTIONS, make_app

    long_text = " ".join(f"Lantern {i} has its wick entered in the register." for i in range(900))
    app = make_app(tmp_path, {**STATUTE_SECTIONS, "LAMP_S1": ("Lanterns.", long_text)})
    tools = {t.name: t for t in build_rag_tools(app.kb)}
    ctx = RunContext(collection="test")
    tools["rag_search"].invoke({"query": "lantern wick register"}, ctx)
    result = tools["read_section"].invoke({"source_id": "LAMP_S1"}, ctx)
    assert result.payload["truncated"] is True
    text = result.payload["text"]
    assert len(text) <= SECTION_CHARS + 60
    assert text.endswith("chars]") and "[truncated: " in text
    head = text.split(" [truncated: ")[0]
    assert long_text.startswith(head) and long_text[len(head)] == " "  # cut at a word
    left_out, total = map(int, re.findall(r"\[truncated: (\d+) of (\d+) chars\]$", text)[0])
    assert total >= len(long_text) - 10 and left_out == total - len(head)
    assert clip("short text", 100) == "short text"
    app.close()


def test_loading_an_in_process_model_is_told_to_the_run(tmp_path, monkeypatch) -> None:
    from sleuth.llm import local

    class FakeLlama:
        def __init__(self, **kwargs) -> None:
            self.kwargs = kwargs

        def eval(self, tokens) -> None:
            pass

        def close(self) -> None:
            pass

    fake = type("llama_cpp", (), {"Llama": FakeLlama})
    monkeypatch.setattr(local, "require", lambda *a: fake)
    monkeypatch.setattr(local, "_CACHE", {})
    gguf = tmp_path / "tiny.gguf"
    gguf.write_bytes(b"x" * 1000)
    lines: list[str] = []
    with run_limits(RunLimits(notify=lines.append)):
        llama, _ = local._load(str(gguf), 1024, 1, prompt_cache_mb=0)
        local._load(str(gguf), 1024, 1, prompt_cache_mb=0)  # loaded once: told once
    assert isinstance(llama, FakeLlama) and llama.kwargs["n_ctx"] == 1024
    assert len(lines) == 1 and "Loading the model tiny.gguf" in lines[0]
    assert "n_ctx 1024" in lines[0]


def test_compact_tools_keep_names_types_and_required_fields() -> None:
    tools = [
        {
            "type": "function",
            "function": {
                "name": "rag_search",
                "description": "Search the collection. Returns sections with scores.",
                "parameters": {
                    "type": "object",
                    "properties": {
                        "query": {"type": "string", "description": "What to look for."},
                        "top_k": {"type": "integer", "description": "How many.", "default": 5},
                    },
                    "required": ["query"],
                },
            },
        }
    ]
    (short,) = calls.compact_tools(tools)
    assert short["function"]["description"] == "Search the collection."
    params = short["function"]["parameters"]
    assert params["required"] == ["query"]
    assert params["properties"] == {
        "query": {"type": "string"},
        "top_k": {"type": "integer", "default": 5},
    }


# ---------------------------------------------------------------- reasoning kept out of streams


def _stream_pieces(
    replies: list[str], streamed: list[bool], **limits: Any
) -> list[tuple[str, int]]:
    pieces: list[tuple[str, int]] = []
    run = RunLimits(answer_delta=lambda t, s: pieces.append((t, s)), **limits)
    model = ScriptedChatModel(replies)
    with run_limits(run):
        for stream in streamed:
            calls.invoke(model, [HumanMessage("q")], stream_answer=stream)
    return pieces


def test_reasoning_is_never_streamed_as_answer_text() -> None:
    pieces = _stream_pieces(["<think>weigh the DECOY</think>Seven years [1]."], [True])
    assert "".join(t for t, _ in pieces).strip() == "Seven years [1]."


def test_reasoning_shown_before_a_bare_closing_tag_is_replaced_by_a_new_stream() -> None:
    pieces = _stream_pieces(["weigh the DECOY</think> Seven years [1]."], [True])
    last = max(s for _, s in pieces)
    assert last == 2
    assert "".join(t for t, s in pieces if s == last).strip() == "Seven years [1]."


def test_a_model_seen_closing_an_unopened_block_has_its_next_stream_held() -> None:
    reply = "weigh the DECOY</think> Seven years [1]."
    pieces = _stream_pieces(["plan</think> search", reply], [False, True])
    assert "DECOY" not in "".join(t for t, _ in pieces)
    assert {s for _, s in pieces} == {1}
    held = _stream_pieces([reply], [True], reasoning_first=True)
    assert "".join(t for t, _ in held).strip() == "Seven years [1]."


def test_an_older_tool_result_is_summarised_to_the_headings_of_its_sections() -> None:
    from langchain_core.messages import AIMessage, ToolMessage

    seen = []
    model = ScriptedChatModel([lambda messages: seen.append(messages) or "ok"])
    limits = RunLimits(context_tokens=1024)
    blocks = [
        f"[{n}] HC_S{n} · Section {n}. Ferry rule {n}\n"
        + f"Every ferry {n} shall carry lamps. " * 60
        for n in range(1, 6)
    ]
    found = "Found 5 sections for 'ferry lamps'.\n" + "\n\n".join(blocks)
    conversation = [
        SystemMessage("Answer with tools."),
        HumanMessage("Must a ferry carry lamps?"),
        AIMessage("", tool_calls=[{"id": "c1", "name": "rag_search", "args": {"query": "x"}}]),
        ToolMessage(found, tool_call_id="c1"),
        HumanMessage("Answer now from the sections found."),
    ]
    with run_limits(limits):
        calls.invoke(model.bind(max_tokens=128), conversation)
    kept = seen[0][3].content
    assert kept.startswith("[summarised: the first line of each of its 5 parts kept")
    assert "Found 5 sections" in kept
    assert all(f"[{n}] HC_S{n} · Section {n}. Ferry rule {n}" in kept for n in range(1, 6))
    assert "shall carry lamps" not in kept
    assert seen[0][4].content == "Answer now from the sections found."  # the last turn whole
    assert limits.trims[0]["summarised"] is True


def test_a_tool_loops_question_is_never_cut_to_the_bare_mark() -> None:
    # issue 28 (and a real llama-server -c 2048 run): ReAct's question, an earlier turn, was
    # cut to "[truncated: … of 3985 chars]" while the system prompt kept its thousands
    question = "Which register records each lantern wick of the harbour? " * 20
    turns = [
        ("system", "Use the tools. " * 200),
        ("human", question),
        ("ai", "calling rag_search"),
        ("tool", "Found sections. " * 400),
        ("human", "Answer now."),
    ]
    texts = calls.fit_turns(turns, budget=700, count=calls.estimate_tokens)
    assert "Which register records each lantern wick" in texts[1]
    assert calls.estimate_tokens(texts[1]) >= calls.MIN_TURN_TOKENS
    assert sum(calls.estimate_tokens(t) for t in texts) <= 700
