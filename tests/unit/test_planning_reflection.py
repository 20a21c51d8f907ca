"""The ReAct planning agent and self-reflection: scripted models, fallbacks, and the loop."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage

from sleuth.agents.answer import AnswerDraft
from sleuth.agents.llm_reasoner import LLMReasoner
from sleuth.agents.planning import (
    MAX_REPLANS,
    PlanningAgent,
    ReactPlan,
    contradiction,
    heuristic_react_plan,
)
from sleuth.agents.reflection import Critique, critique_draft, heuristic_critique
from sleuth.agents.support import SupportChecker
from sleuth.llm.testing import ScriptedChatModel, tool_call
from sleuth.retrieval.text import novel_query
from sleuth.tools.base import RunContext, ToolResult
from tests.helpers import make_service
from tests.unit.test_citations import _chunk

MURDER = "What is the punishment for murder?"
TWO_PART = "What is the punishment for murder and what is theft?"
VALID_PLAN = {
    "steps": [
        {"action": "search", "target": "punishment for murder", "purpose": "find it"},
        {"action": "read", "target": "", "purpose": "read"},
        {"action": "answer", "target": "", "purpose": ""},
    ],
    "rationale": "one search",
}
NO_SEARCH_PLAN = {"steps": [{"action": "answer"}], "rationale": "answer directly"}


def _final(text: str, citations: list[str] | None = None) -> AIMessage:
    return tool_call(
        "final_answer",
        {"answer_text": text, "citations": citations or [], "is_insufficient_context": False},
    )


# ---------------------------------------------------------------- the planning agent


def test_heuristic_plan_searches_each_part_and_rereads_remembered_sections() -> None:
    one = heuristic_react_plan(MURDER)
    assert one.searches() == ["punishment murder"]
    assert [s.action for s in one.steps] == ["search", "read", "follow_references", "answer"]
    two = heuristic_react_plan(TWO_PART, recalled=[["BNS_S103", "BNS_S101"], ["BNS_S303"]])
    assert two.searches() == ["punishment murder", "theft"]
    # only the most similar run's citations are re-read, first
    assert two.reads() == ["BNS_S103", "BNS_S101"]
    assert [s.action for s in two.steps[:2]] == ["read", "read"]


def test_planner_valid_output_is_used() -> None:
    model = ScriptedChatModel([tool_call("plan", VALID_PLAN)])
    result = PlanningAgent(model).plan(MURDER, ["rag_search", "read_section"])
    assert result.path == "llm" and result.retries == 0
    assert result.value.searches() == ["punishment for murder"]


def test_planner_invalid_then_valid_output_is_corrected() -> None:
    model = ScriptedChatModel([tool_call("plan", NO_SEARCH_PLAN), tool_call("plan", VALID_PLAN)])
    result = PlanningAgent(model).plan(MURDER, ["rag_search"])
    assert result.path == "llm_after_retry" and result.retries == 1
    assert "at least one search step" in result.errors[0]
    # the validation error went back to the model
    assert "at least one search step" in str(model.calls[1][-1].content)


def test_planner_always_invalid_falls_back_to_the_heuristic_plan() -> None:
    model = ScriptedChatModel([tool_call("plan", NO_SEARCH_PLAN)], repeat_last=True)
    result = PlanningAgent(model, max_retries=2).plan(MURDER, ["rag_search"])
    assert result.path == "fallback" and result.retries == 2
    assert result.value == heuristic_react_plan(MURDER)


def test_a_search_that_finds_nothing_related_contradicts_the_plan() -> None:
    plan = ReactPlan.model_validate(VALID_PLAN)
    empty = ToolResult(status="0 sections", payload={"results": []})
    related = ToolResult(
        status="1 section",
        payload={"results": [{"title": "Punishment for murder", "snippet": "death"}]},
    )
    args = {"query": "punishment for murder"}
    assert "found nothing related" in (
        contradiction(MURDER, [("rag_search", args, empty)], plan) or ""
    )
    assert contradiction(MURDER, [("rag_search", args, related)], plan) is None
    # a search the plan did not ask for is the reasoner's own business
    assert contradiction(MURDER, [("rag_search", {"query": "other"}, empty)], plan) is None


def test_react_run_plans_first_and_replans_when_the_search_finds_nothing(tmp_path) -> None:
    service = make_service(tmp_path)
    response = service.execute_agentic_search("Which river flows through Quenia?", "test")
    trace = response.trace
    assert trace["planner_path"][:3] == ["observe", "plan", "think"]
    planning = trace["agentic"]["planning"]
    assert planning["path"] == "heuristic" and planning["plan"][0]["action"] == "search"
    assert 1 <= len(planning["replans"]) <= MAX_REPLANS
    assert "found nothing related" in planning["replans"][0]["reason"]
    thoughts = [s.content for s in response.reasoning_steps if s.step_type == "think"]
    assert thoughts[0].startswith("Plan (") and any(t.startswith("Re-planning:") for t in thoughts)
    assert response.answer.is_insufficient_context


def test_the_llm_reasoner_sees_the_plan_in_its_prompt(tmp_path) -> None:
    model = ScriptedChatModel(
        [
            tool_call("plan", VALID_PLAN),
            tool_call("rag_search", {"query": "punishment for murder"}),
            _final("Whoever commits murder shall be punished with death [BNS_S103]."),
        ]
    )
    service = make_service(tmp_path, reasoner=LLMReasoner(model))
    service.settings.planner = "llm"
    response = service.execute_agentic_search(MURDER, "test", use_memory=False)
    assert response.trace["planner_runtime"] == "llm"
    assert response.trace["agentic"]["planning"]["path"] == "llm"
    reasoner_prompt = str(model.calls[1][0].content)
    assert "Your plan" in reasoner_prompt and "search 'punishment for murder'" in reasoner_prompt
    assert [c.source_id for c in response.answer.citations] == ["BNS_S103"]


def test_memory_shapes_the_plan_only_for_the_same_user(tmp_path) -> None:
    service = make_service(tmp_path)
    service.execute_agentic_search(MURDER, "test", user_id="alice")
    again = service.execute_agentic_search(MURDER, "test", user_id="alice")
    other = service.execute_agentic_search(MURDER, "test", user_id="bob")
    assert again.trace["agentic"]["planning"]["recalled_sections"]
    assert again.trace["agentic"]["planning"]["plan"][0]["action"] == "read"
    assert other.trace["agentic"]["planning"]["recalled_sections"] == []
    assert other.trace["agentic"]["planning"]["plan"][0]["action"] == "search"


# ---------------------------------------------------------------- self-reflection


@pytest.fixture
def ctx() -> RunContext:
    ctx = RunContext(collection="test", searches=["punishment murder"])
    ctx.track([_chunk("BNS_S103"), _chunk("BNS_S101")])
    return ctx


def test_heuristic_critique_finds_the_missing_part(ctx: RunContext) -> None:
    draft = AnswerDraft(
        answer_text="Whoever commits murder shall be punished with death [BNS_S103].",
        citations=["BNS_S103"],
    )
    critique = heuristic_critique(TWO_PART, draft, ctx, SupportChecker())
    assert critique.missing_parts == ["What is theft?"]
    assert critique.needs_revision and critique.revision_query == "theft"


def test_heuristic_critique_never_revises_with_a_left_over_word() -> None:
    # the first search was the question itself; the words the answer leaves out ("year")
    # are a subset of it, and one generic word would match everything
    question = "Salt and Smoke, released in which year, is a book by Marta Quell?"
    ctx = RunContext(collection="test", searches=[question])
    ctx.track([_chunk("BNS_S103")])
    draft = AnswerDraft(answer_text="Marta Quell wrote a cookery book [BNS_S103].")
    critique = heuristic_critique(question, draft, ctx, SupportChecker())
    assert critique.missing_parts  # the gap is reported ...
    # ... and searched only together with what the best section found is about
    title = ctx.retrieved["BNS_S103"][0].title_path[-1]
    assert critique.revision_query == f"{title} salt smoke released year"
    # once that ran too, nothing new is left to search
    ctx.searches.append(critique.revision_query)
    again = heuristic_critique(question, draft, ctx, SupportChecker())
    assert not again.needs_revision and again.revision_query == ""


@pytest.mark.parametrize(
    ("query", "earlier", "novel"),
    [
        ("Marta Quell books", ["salt and smoke"], True),
        ("year", [], False),  # one left-over word
        ("from the", [], False),  # no content terms at all
        ("danish copenhagen rare", ["danish heavy metal band from copenhagen rare demo"], False),
        ("Punishment  for MURDER", ["punishment murder"], False),  # a repeat, normalised
        ("punishment murder life", ["punishment murder"], True),  # adds a term
    ],
)
def test_novel_query(query: str, earlier: list[str], novel: bool) -> None:
    assert novel_query(query, earlier) is novel


def test_heuristic_critique_accepts_a_complete_supported_draft(ctx: RunContext) -> None:
    draft = AnswerDraft(
        answer_text="Whoever commits murder shall be punished with death or imprisonment for "
        "life [BNS_S103]."
    )
    critique = heuristic_critique(MURDER, draft, ctx, SupportChecker())
    assert critique == Critique()


def test_heuristic_critique_flags_unsupported_sentences(ctx: RunContext) -> None:
    draft = AnswerDraft(
        answer_text="Whoever commits murder shall be punished with death [BNS_S103]. "
        "The accused may also be exiled to the moon [BNS_S101]."
    )
    critique = heuristic_critique(MURDER, draft, ctx, SupportChecker())
    assert critique.unsupported_claims == ["The accused may also be exiled to the moon."]


CRITIQUE = {
    "missing_parts": ["theft"],
    "unsupported_claims": [],
    "needs_revision": True,
    "revision_query": "theft",
}


@pytest.mark.parametrize(
    ("replies", "path", "retries"),
    [
        ([CRITIQUE], "llm", 0),
        ([{**CRITIQUE, "revision_query": ""}, CRITIQUE], "llm_after_retry", 1),
        ([{**CRITIQUE, "revision_query": ""}] * 3, "fallback", 2),
    ],
)
def test_model_critic_valid_corrected_and_fallback_paths(
    ctx: RunContext, replies: list[dict[str, Any]], path: str, retries: int
) -> None:
    model = ScriptedChatModel([tool_call("critique", r) for r in replies])
    draft = AnswerDraft(answer_text="Murder is punished with death [BNS_S103].")
    result = critique_draft(TWO_PART, draft, ctx, model, SupportChecker(), max_retries=2)
    assert (result.path, result.retries) == (path, retries)
    assert result.value.needs_revision and result.value.revision_query == "theft"
    if path == "fallback":
        assert result.value.missing_parts == ["What is theft?"]


def test_reflection_revises_an_incomplete_answer_once(tmp_path) -> None:
    model = ScriptedChatModel(
        [
            tool_call("rag_search", {"query": "punishment for murder", "top_k": 2}),
            _final("Whoever commits murder shall be punished with death [BNS_S103]."),
            # each final answer is written again from the best sections (synthesis)
            AIMessage("Whoever commits murder shall be punished with death [BNS_S103]."),
            AIMessage(
                "Whoever commits murder shall be punished with death [BNS_S103]. Whoever "
                "intending to take dishonestly any movable property commits theft [BNS_S303]."
            ),
        ]
    )
    service = make_service(tmp_path, reasoner=LLMReasoner(model))
    response = service.execute_agentic_search(TWO_PART, "test", use_memory=False)
    reflections = response.trace["agentic"]["reflection"]
    assert len(reflections) == 1 and reflections[0]["needs_revision"]
    assert reflections[0]["revision_query"] == "theft"
    assert response.trace["planner_path"].count("reflect") == 1  # no second critique
    # the critique's search runs as a tool round of its own (the model is not asked to
    # revise: a small model answers again without searching), then the answer is rewritten
    searches = [c["arguments"]["query"] for c in response.tool_calls if c["tool"] == "rag_search"]
    assert searches == ["punishment for murder", "theft"]
    thoughts = [s.content for s in response.reasoning_steps if s.step_type == "think"]
    assert any(t.startswith("Revising: searching 'theft'") for t in thoughts)
    assert "Question: What is the punishment for murder and what is theft?" in str(
        model.calls[-1][-1].content
    )
    assert [c.source_id for c in response.answer.citations] == ["BNS_S103", "BNS_S303"]
    assert response.status == "completed" and model.remaining == 0


def test_reflection_off_skips_the_critique(tmp_path) -> None:
    service = make_service(tmp_path)
    service.settings.reflection = "off"
    response = service.execute_agentic_search(TWO_PART, "test", use_memory=False)
    assert response.trace["agentic"]["reflection"] == []
    assert "reflect" not in response.trace["planner_path"]


def test_guided_mode_rereads_what_a_similar_earlier_question_cited(tmp_path) -> None:
    service = make_service(tmp_path)
    first = service.execute_agentic_search(MURDER, "test", mode="guided", user_id="alice")
    again = service.execute_agentic_search(MURDER, "test", mode="guided", user_id="alice")
    other = service.execute_agentic_search(MURDER, "test", mode="guided", user_id="bob")
    cited = [c.source_id for c in first.answer.citations]
    assert again.trace["agentic"]["recalled_sections"] == cited[:2]
    assert other.trace["agentic"]["recalled_sections"] == []
    thoughts = " ".join(s.content for s in again.reasoning_steps)
    assert "cited by a similar earlier question" in thoughts


@pytest.mark.parametrize("mode", ["react", "guided"])
def test_every_run_carries_the_trace_metadata(tmp_path, mode: str) -> None:
    service = make_service(tmp_path)
    trace = service.execute_agentic_search(MURDER, "test", mode=mode).trace  # type: ignore[arg-type]
    for key in ("planner_runtime", "planner_run_id", "planner_path", "tool_trace"):
        assert trace[key], key
    assert isinstance(trace["output_validation_retries"], dict)
    assert {"crag", "complementary", "compression"} <= set(trace["agentic"])
    assert trace["timings_ms"]["total"] > 0 and "token_usage" in trace
    assert trace["planner_runtime"] == "heuristic"


def test_a_run_stopped_by_a_limit_does_not_blame_the_knowledge_base(tmp_path) -> None:
    service = make_service(tmp_path)
    # stopped before its first step, the run still searches once with the question
    response = service.execute_agentic_search(MURDER, "test", timeout_s=1e-9, use_memory=False)
    assert response.status == "timeout"
    assert "BNS_S103" in [c.source_id for c in response.answer.citations]
    # and when that search finds nothing that answers, the decline names the limit
    away = "Which river flows through the capital of Peru?"
    response = service.execute_agentic_search(away, "test", timeout_s=1e-9, use_memory=False)
    assert response.status == "timeout" and response.answer.is_insufficient_context
    assert "SLEUTH_RUN_TIMEOUT_S" in response.answer.answer_text
    assert "does not contain" not in response.answer.answer_text


def test_questions_naming_a_section_id_are_answered_in_guided_mode(tmp_path) -> None:
    service = make_service(tmp_path)
    for question in ("What does BNS_S103 provide?", "[BNS_S103]"):
        response = service.execute_agentic_search(question, "test", mode="guided")
        assert response.status == "completed", question
        assert response.answer.citations[0].source_id == "BNS_S103", question


def test_a_too_long_question_is_refused_before_the_run(tmp_path) -> None:
    from sleuth.errors import UserError
    from sleuth.types import MAX_QUESTION_CHARS

    service = make_service(tmp_path)
    with pytest.raises(UserError, match="too long"):
        service.execute_agentic_search("murder " * MAX_QUESTION_CHARS, "test")


def test_a_plan_written_with_tool_names_and_guessed_targets_is_read_not_rejected() -> None:
    # what Qwen2.5-Coder-1.5B wrote, the same at every retry: tool names as actions and a
    # made-up URL as the section to read
    plan = ReactPlan.model_validate(
        {
            "steps": [
                {"action": "rag_search", "target": "Jon L. Luther restaurant company"},
                {"action": "read_section", "target": "https://www.example.com/companies"},
                {"action": "outline", "target": "the best sections"},
                {"action": "follow_references", "target": "Jon_L._Luther"},
                {"action": "final_answer"},
            ]
        }
    )
    assert [(s.action, s.target) for s in plan.steps] == [
        ("search", "Jon L. Luther restaurant company"),
        ("read", ""),
        ("read", ""),
        ("follow_references", "Jon_L._Luther"),
        ("answer", ""),
    ]
