"""The ReAct loop driven by scripted chat models and by the heuristic reasoner."""

from __future__ import annotations

import time

import pytest
from langchain_core.messages import AIMessage, ToolMessage

from sleuth.agents.llm_reasoner import LLMReasoner
from sleuth.agents.state import AgentStepType, RunStatus
from sleuth.errors import UserError
from sleuth.llm.testing import ScriptedChatModel, final, tool_call
from tests.helpers import make_app, make_document, make_service


def _answer_call(text: str, citations: list[str], insufficient: bool = False) -> AIMessage:
    args = {"answer_text": text, "citations": citations, "is_insufficient_context": insufficient}
    return tool_call("final_answer", args)


def test_broken_json_arguments_are_repaired_and_the_call_runs(tmp_path):
    model = ScriptedChatModel(
        [
            tool_call("rag_search", '{"query": "punishment for murder", "top_k": 3'),
            final(
                "Thought: I now know the answer.\nAction: none\n"
                "Final Answer: Murder is punished with death or imprisonment for life [BNS_S103]."
            ),
        ]
    )
    service = make_service(tmp_path, reasoner=LLMReasoner(model))
    response = service.execute_agentic_search("What is the punishment for murder?", "test")

    # the cut-off JSON of the arguments is repaired, not rejected: the search runs once
    assert [(c["tool"], c["arguments"], c["ok"]) for c in response.tool_calls] == [
        ("rag_search", {"query": "punishment for murder", "top_k": 3}, True)
    ]
    assert response.status == RunStatus.COMPLETED


def test_unknown_tool_lists_valid_tools_and_the_run_completes(tmp_path):
    model = ScriptedChatModel(
        [
            tool_call("web_search", {"query": "murder"}),
            tool_call("rag_search", {"query": "murder punishment"}),
            _answer_call("Death or imprisonment for life [BNS_S103].", ["BNS_S103"]),
        ]
    )
    service = make_service(tmp_path, reasoner=LLMReasoner(model))
    response = service.execute_agentic_search("What is the punishment for murder?", "test")

    tool_messages = [m for m in model.calls[1] if isinstance(m, ToolMessage)]
    assert "unknown tool 'web_search'" in tool_messages[0].content
    for name in ("rag_search", "read_section", "outline", "follow_references"):
        assert name in tool_messages[0].content
    # a first reply without a usable search is replaced by a search with the question
    assert response.tool_calls[0]["tool"] == "rag_search"
    assert response.tool_calls[0]["arguments"] == {"query": "What is the punishment for murder?"}
    assert all(c["tool"] != "web_search" for c in response.tool_calls)
    assert response.status == RunStatus.COMPLETED
    assert response.answer.citations[0].source_id == "BNS_S103"


def test_repeating_the_same_search_stops_early_with_a_final_answer(tmp_path):
    model = ScriptedChatModel([tool_call("rag_search", {"query": "murder"})], repeat_last=True)
    service = make_service(tmp_path, reasoner=LLMReasoner(model))
    response = service.execute_agentic_search(
        "What is the punishment for murder?", "test", max_iterations=6
    )

    assert response.status in (RunStatus.REPEATED_ACTION, RunStatus.MAX_ITERATIONS)
    assert response.status == RunStatus.REPEATED_ACTION
    assert response.trace["iterations"] < 6
    assert response.answer.answer_text  # the evidence-based fallback still answers
    final_steps = [s for s in response.reasoning_steps if s.step_type == AgentStepType.FINAL]
    assert len(final_steps) == 1


def test_max_iterations_caps_the_loop_with_a_final_answer(tmp_path):
    queries = iter(f"murder {i}" for i in range(100))
    model = ScriptedChatModel(
        [lambda _m: tool_call("rag_search", {"query": next(queries)})], repeat_last=True
    )
    service = make_service(tmp_path, reasoner=LLMReasoner(model))
    response = service.execute_agentic_search("punishment for murder?", "test", max_iterations=3)
    assert response.status == RunStatus.MAX_ITERATIONS
    assert response.trace["iterations"] == 3
    assert response.answer.answer_text


def test_citation_of_a_section_not_retrieved_is_removed_and_recorded(tmp_path):
    model = ScriptedChatModel(
        [
            tool_call("rag_search", {"query": "punishment for murder", "top_k": 1}),
            _answer_call(
                "Murder is punished with death [BNS_S103]. Theft is also a crime [BNS_S303].",
                ["BNS_S103", "BNS_S303", "XYZ_S9"],
            ),
        ]
    )
    service = make_service(tmp_path, reasoner=LLMReasoner(model))
    response = service.execute_agentic_search("What is the punishment for murder?", "test")

    retrieved = set(response.trace["retrieved_source_ids"])
    assert "BNS_S103" in retrieved and "BNS_S303" not in retrieved
    assert [c.source_id for c in response.answer.citations] == ["BNS_S103"]
    removed = {r["source_id"]: r["reason"] for r in response.trace["citations_removed"]}
    assert removed == {
        "BNS_S303": "not retrieved in this run",
        "XYZ_S9": "not retrieved in this run",
    }
    assert "[BNS_S303]" not in response.answer.answer_text
    assert "[BNS_S103]" in response.answer.answer_text


def test_fictional_fact_collection_answers_insufficient_context(tmp_path):
    sections = {
        "ZORB_S1": ("The Zorblat river.", "The Zorblat river flows through the city of Quenia "
                    "and freezes every winter."),
    }  # fmt: skip
    service = make_service(tmp_path, sections=sections)
    response = service.execute_agentic_search("What is the capital of France?", "test")
    assert response.answer.is_insufficient_context is True
    assert response.answer.citations == []
    assert response.status == RunStatus.INSUFFICIENT_CONTEXT

    # the same collection does answer what it holds
    held = service.execute_agentic_search("Which river flows through Quenia?", "test")
    assert held.answer.is_insufficient_context is False
    assert [c.source_id for c in held.answer.citations] == ["ZORB_S1"]


def test_heuristic_reasoner_searches_reads_follows_and_cites(tmp_path):
    events = []
    service = make_service(tmp_path)
    response = service.execute_agentic_search(
        "What is the punishment for murder?", "test", sinks=[events.append]
    )
    tools_used = [t["tool"] for t in response.tool_calls]
    assert tools_used[0] == "rag_search"
    assert "read_section" in tools_used and "follow_references" in tools_used
    assert response.status == RunStatus.COMPLETED
    assert response.answer.citations[0].source_id == "BNS_S103"
    assert "death or imprisonment for life" in response.answer.answer_text

    # event stream contract: seq 1..n, think before its tool call, one terminal event, last
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    types = [e.type for e in events]
    assert types.index("think") < types.index("tool_call") < types.index("tool_result")
    assert types[-2:] == ["answer", "done"]
    assert sum(t in ("done", "error") for t in types) == 1


def test_model_exception_ends_with_error_status_and_an_answer(tmp_path):
    def explode(_messages):
        raise ConnectionError("model server unreachable")

    service = make_service(tmp_path, reasoner=LLMReasoner(ScriptedChatModel([explode])))
    response = service.execute_agentic_search("What is the punishment for murder?", "test")
    assert response.status == RunStatus.ERROR
    assert response.answer.answer_text
    assert any("unreachable" in s.content for s in response.reasoning_steps)


def test_wall_clock_timeout_stops_the_run(tmp_path):
    def slow(_messages):
        time.sleep(0.3)
        return tool_call("rag_search", {"query": f"murder {time.time()}"})

    service = make_service(
        tmp_path, reasoner=LLMReasoner(ScriptedChatModel([slow], repeat_last=True))
    )
    response = service.execute_agentic_search(
        "What is the punishment for murder?", "test", timeout_s=0.5, max_iterations=50
    )
    assert response.status == RunStatus.TIMEOUT
    assert response.trace["iterations"] < 50
    assert response.answer.answer_text


def test_runs_are_stored_in_the_catalog(tmp_path):
    service = make_service(tmp_path)
    response = service.execute_agentic_search("What is the punishment for murder?", "test")
    stored = service.kb.catalog.get_run(response.task_id)
    assert stored is not None
    assert stored["status"] == "completed"
    assert stored["answer"]["citations"][0]["source_id"] == "BNS_S103"


def test_deleted_document_is_never_cited(tmp_path):
    extra = {"THEFT_S1": ("Theft of cattle.", "Whoever steals cattle shall be punished with "
                          "imprisonment for seven years.")}  # fmt: skip
    app = make_app(tmp_path)
    service = app.agent
    app.pipeline.ingest_documents([make_document(extra, doc_id="THEFT")], "test")
    question = "What is the punishment for theft of cattle?"
    before = service.execute_agentic_search(question, "test")
    assert "THEFT_S1" in [c.source_id for c in before.answer.citations]

    app.pipeline.delete("test", "THEFT")
    after = service.execute_agentic_search(question, "test")
    assert "THEFT_S1" not in after.trace["retrieved_source_ids"]
    assert "THEFT_S1" not in [c.source_id for c in after.answer.citations]


def test_heuristic_agent_on_the_milvus_backend(tmp_path):
    pytest.importorskip("pymilvus")
    pytest.importorskip("milvus_lite")
    service = make_service(tmp_path, index_backend="milvus")
    response = service.execute_agentic_search("What is the punishment for murder?", "test")
    assert response.status == RunStatus.COMPLETED
    assert response.answer.citations[0].source_id == "BNS_S103"
    service.kb.close()


def test_heuristic_answers_from_the_section_the_question_names(tmp_path):
    # BNS_S103 mentions "section 101" and shares more words with the question than S101
    service = make_service(tmp_path)
    response = service.execute_agentic_search(
        "Explain section 101 on murder and punishment in simple terms", "test"
    )
    assert response.tool_calls[0]["arguments"]["query"].startswith("Explain section 101")
    assert response.answer.citations[0].source_id == "BNS_S101"


def test_concurrent_runs_see_only_their_own_evidence(tmp_path):
    from concurrent.futures import ThreadPoolExecutor

    service = make_service(tmp_path)
    questions = [
        "What is the punishment for murder?",
        "What is theft of movable property?",
        "What is culpable homicide?",
        "Which river flows through Quenia?",
    ] * 3
    # memory off: a remembered earlier run of the same question would (rightly) change the
    # plan; this test is about runs sharing no mutable state
    expected = {
        q: service.execute_agentic_search(q, "test", use_memory=False) for q in questions[:4]
    }
    events: dict[int, list] = {i: [] for i in range(len(questions))}
    with ThreadPoolExecutor(max_workers=6) as pool:
        futures = [
            pool.submit(
                service.execute_agentic_search,
                q,
                "test",
                sinks=[events[i].append],
                use_memory=False,
            )
            for i, q in enumerate(questions)
        ]
        results = [f.result() for f in futures]
    for i, (question, response) in enumerate(zip(questions, results, strict=True)):
        alone = expected[question]
        assert response.trace["retrieved_source_ids"] == alone.trace["retrieved_source_ids"]
        assert response.answer == alone.answer
        assert {e.task_id for e in events[i]} == {response.task_id}
        assert [e.seq for e in events[i]] == list(range(1, len(events[i]) + 1))


def test_an_uncited_model_answer_is_replaced_by_the_cited_evidence(tmp_path):
    model = ScriptedChatModel(
        [
            tool_call("rag_search", {"query": "punishment for murder"}),
            final("Murder is punished by exile to a distant island."),
        ]
    )
    service = make_service(tmp_path, reasoner=LLMReasoner(model))
    response = service.execute_agentic_search("What is the punishment for murder?", "test")
    assert "exile" not in response.answer.answer_text
    assert response.answer.citations[0].source_id == "BNS_S103"
    assert response.trace["answer_replaced"] == "the answer cited no section retrieved in this run"


def test_an_uncited_answer_without_evidence_is_insufficient_context(tmp_path):
    model = ScriptedChatModel([final("The capital of France is Paris.")], repeat_last=True)
    service = make_service(tmp_path, reasoner=LLMReasoner(model))
    response = service.execute_agentic_search("What is the capital of France?", "test")
    assert response.answer.is_insufficient_context
    assert response.status == RunStatus.INSUFFICIENT_CONTEXT
    assert "Paris" not in response.answer.answer_text


def test_a_failing_model_is_reported_as_an_error_not_as_an_answer(tmp_path):
    def down(_messages):
        raise ConnectionError("connection refused")

    events = []
    service = make_service(tmp_path, reasoner=LLMReasoner(ScriptedChatModel([down])))
    response = service.execute_agentic_search(
        "What is the punishment for murder?", "test", sinks=[events.append]
    )
    assert response.status == RunStatus.ERROR
    assert "connection refused" in response.trace["error"]
    assert "connection refused" in response.answer.answer_text
    assert events[-1].type == "error" and "connection refused" in events[-1].message


def test_questions_without_searchable_terms_or_on_a_neighbouring_topic(tmp_path):
    sections = {
        "BNS_S230": ("Giving false evidence to procure conviction of capital offence.",
                     "Whoever gives false evidence intending to procure a conviction of a "
                     "capital offence shall be punished with imprisonment for life."),
    }  # fmt: skip
    service = make_service(tmp_path, sections=sections)
    for question in ("What is the capital of France?", "हत्या के लिए सजा क्या है?"):
        response = service.execute_agentic_search(question, "test")
        assert response.answer.is_insufficient_context, question
        assert response.answer.citations == [], question
    # no word at all: refused before any run, as an empty question is
    with pytest.raises(UserError, match="holds no words"):
        service.execute_agentic_search("?", "test")


def test_calls_written_as_text_run_and_a_premature_answer_beside_them_is_ignored(tmp_path):
    # what llama-server returned for Qwen2.5-Coder-1.5B: both calls as text in content
    model = ScriptedChatModel(
        [
            final(
                '{{"name": "rag_search", "arguments": {"query": "murder punishment", '
                '"top_k": 2}}}\n'
                '{{"name": "final_answer", "arguments": {"answer_text": "Exile [9]."}}}'
            ),
            final("Death or imprisonment for life [1]."),
        ]
    )
    service = make_service(tmp_path, reasoner=LLMReasoner(model))
    response = service.execute_agentic_search("What is the punishment for murder?", "test")

    calls = [(c["tool"], c["arguments"]) for c in response.tool_calls]
    assert calls[0] == ("rag_search", {"query": "murder punishment", "top_k": 2})
    assert {name for name, _ in calls[1:]} <= {"follow_references"}  # the bridge step
    assert "Exile" not in response.answer.answer_text
    assert response.answer.answer_text == "Death or imprisonment for life [BNS_S103]."
    assert response.trace["answer_source"] == "model"
    assert response.trace.get("answer_replaced") is None
    # the text calls went back to the model as structured calls, each with its result
    history = model.calls[1]
    ai = next(m for m in history if isinstance(m, AIMessage))
    assert [c["name"] for c in ai.tool_calls] == ["rag_search", "final_answer"]
    answered = {m.tool_call_id for m in history if isinstance(m, ToolMessage)}
    assert {c["id"] for c in ai.tool_calls} <= answered


def test_an_unmarked_model_answer_gets_its_citation_attached_not_replaced(tmp_path):
    model = ScriptedChatModel(
        [
            tool_call("rag_search", {"query": "punishment for murder"}),
            final("Murder is punished with death or imprisonment for life, and a fine."),
        ]
    )
    service = make_service(tmp_path, reasoner=LLMReasoner(model))
    response = service.execute_agentic_search("What is the punishment for murder?", "test")
    assert response.answer.answer_text == (
        "Murder is punished with death or imprisonment for life, and a fine [BNS_S103]."
    )
    assert response.trace["answer_source"] == "repaired"
    assert [a["source_id"] for a in response.trace["citations_added"]] == ["BNS_S103"]


def test_a_factoid_answer_keeps_its_short_answer_first(tmp_path):
    model = ScriptedChatModel(
        [
            tool_call("rag_search", {"query": "punishment for murder"}),
            final("Death. Whoever commits murder shall be punished with death [1]."),
        ]
    )
    service = make_service(tmp_path, reasoner=LLMReasoner(model))
    response = service.execute_agentic_search("What is the punishment for murder?", "test")
    assert response.answer.short_answer == "Death"
    assert response.answer.answer_text.startswith("Death. Whoever commits murder")
    assert response.answer.ungrounded_sentences == []


def test_a_short_answer_written_as_a_source_id_reads_as_its_title(tmp_path):
    # small models copy the evidence header ("[1] BNS_S103 · Section 103. …") into the answer
    model = ScriptedChatModel(
        [
            tool_call("rag_search", {"query": "punishment for murder"}),
            final("Answer: BNS_S103\nExplanation: Murder is punished with death [1]."),
        ]
    )
    service = make_service(tmp_path, reasoner=LLMReasoner(model))
    response = service.execute_agentic_search("What is the punishment for murder?", "test")
    assert response.answer.short_answer == "Section 103. Punishment for murder"
    assert "BNS_S103." not in response.answer.answer_text


def test_the_final_answer_is_written_from_the_best_sections_found(tmp_path):
    # the loop's own answer (a wrong decline) is not the last word: the model writes the
    # answer again from the ranked evidence, numbered as in the run
    model = ScriptedChatModel(
        [
            tool_call("rag_search", {"query": "punishment for murder"}),
            tool_call("rag_search", {"query": "murder sentence"}),
            final("Insufficient context: the results do not say."),
            AIMessage("Facts: [1]\nAnswer: Death or imprisonment for life"),
        ]
    )
    service = make_service(tmp_path, reasoner=LLMReasoner(model))
    response = service.execute_agentic_search("What is the punishment for murder?", "test")
    prompt = model.calls[-1]
    assert "Evidence:\n[1] BNS_S103" in str(prompt[-1].content)
    assert response.status == "completed"
    assert response.answer.short_answer == "Death or imprisonment for life"
    assert "shall be punished with death or imprisonment for life" in response.answer.answer_text
    assert [c.source_id for c in response.answer.citations] == ["BNS_S103"]
    assert response.trace["answer_source"] == "model"


def test_a_short_answer_from_memory_is_declined_not_dressed_in_quoted_evidence(tmp_path):
    # the quoted sentence is supported, but no retrieved section holds the answer itself
    model = ScriptedChatModel(
        [
            tool_call("rag_search", {"query": "capital of France"}),
            final("Paris."),
            AIMessage(
                "Facts: Whoever commits murder shall be punished with death [1].\nAnswer: Paris"
            ),
        ]
    )
    service = make_service(tmp_path, reasoner=LLMReasoner(model))
    response = service.execute_agentic_search("What is the capital of France?", "test")
    assert response.status == "insufficient_context"
    assert response.answer.citations == []
    assert "('Paris')" in response.answer.answer_text


def test_json_answer_text_never_reaches_the_user(tmp_path):
    model = ScriptedChatModel(
        [
            tool_call("rag_search", {"query": "punishment for murder"}),
            final('```json\n{ "answer_text": "Death or imprisonment for life [1]." }\n```'),
        ]
    )
    service = make_service(tmp_path, reasoner=LLMReasoner(model))
    response = service.execute_agentic_search("What is the punishment for murder?", "test")
    assert response.answer.answer_text == "Death or imprisonment for life [BNS_S103]."


def test_tokens_are_reported_per_stage(tmp_path):
    def with_usage(message: AIMessage, prompt: int, output: int) -> AIMessage:
        message.usage_metadata = {
            "input_tokens": prompt,
            "output_tokens": output,
            "total_tokens": prompt + output,
        }
        return message

    model = ScriptedChatModel(
        [
            with_usage(tool_call("rag_search", {"query": "punishment for murder"}), 600, 20),
            with_usage(final("Death or imprisonment for life [1]."), 900, 30),
        ]
    )
    service = make_service(tmp_path, reasoner=LLMReasoner(model))
    response = service.execute_agentic_search("What is the punishment for murder?", "test")
    assert response.trace["token_usage"]["input_tokens"] == 1500
    assert response.trace["token_usage_by_stage"] == {
        "think": {"input_tokens": 1500, "output_tokens": 50, "total_tokens": 1550}
    }
    assert response.trace["timings_ms"]["think"] >= 0


def test_replies_of_unclosed_reasoning_end_in_an_error_that_says_why(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """Replies that only open a <think> block never call a tool nor answer: the model is
    told so, and after the retries the run ends ``error`` with the reason in the trace and
    an answer from the evidence — never a decoy from inside the reasoning."""
    unclosed = AIMessage(content='<think>I should search. {"name": "final_answer"')
    model = ScriptedChatModel([unclosed], repeat_last=True)
    service = make_service(tmp_path, reasoner=LLMReasoner(model))
    result = service.execute_agentic_search("What is the punishment for murder?", "test")
    assert result.status == RunStatus.ERROR
    error = result.trace["error"]
    assert error is not None and "only reasoning" in error
    assert "Please fix your mistakes" not in error  # the instruction is the model's, not the user's
    observed = [s.content for s in result.reasoning_steps if s.step_type == AgentStepType.OBSERVE]
    assert any("never closed" in str(o) for o in observed)
    assert "final_answer" not in result.answer.answer_text


def test_an_index_of_another_embedding_model_ends_the_run_with_that_error(
    tmp_path, monkeypatch
) -> None:  # type: ignore[no-untyped-def]
    """A configuration error no call can get past ends the run at once with its message,
    instead of the model retrying until 'repeated the same tool call'."""
    from sleuth.errors import EmbeddingModelMismatch

    app = make_app(
        tmp_path,
        reasoner=LLMReasoner(
            ScriptedChatModel([tool_call("rag_search", {"query": "murder"})], repeat_last=True)
        ),
    )

    def mismatch(*args, **kwargs):  # type: ignore[no-untyped-def]
        raise EmbeddingModelMismatch("collection 'test' holds 64-d vectors, the model gives 384-d")

    monkeypatch.setattr(app.kb, "search", mismatch)
    result = app.agent.execute_agentic_search("What is the punishment for murder?", "test")
    assert result.status == RunStatus.ERROR
    assert "64-d vectors" in result.trace["error"]
    assert len(result.tool_calls) == 1
    guided = app.agent.execute_agentic_search(
        "What is the punishment for murder?", "test", mode="guided"
    )
    assert guided.status == RunStatus.ERROR
    assert "64-d vectors" in (guided.trace["error"] or "")
