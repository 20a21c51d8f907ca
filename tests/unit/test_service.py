"""AgentService: both modes share tools, events, answer schema and the run store."""

from __future__ import annotations

import pytest

from sleuth.agents.state import RunStatus
from sleuth.errors import UserError
from tests.helpers import make_service

TRACE_KEYS = {
    "planner_runtime",
    "planner_run_id",
    "planner_path",
    "tool_trace",
    "output_validation_retries",
    "agentic",
}


def test_guided_mode_offline_answers_with_citations_and_trace(tmp_path) -> None:
    events = []
    service = make_service(tmp_path)
    response = service.execute_agentic_search(
        "What is the punishment for murder?", "test", mode="guided", sinks=[events.append]
    )
    assert response.status == RunStatus.COMPLETED
    assert "BNS_S103" in [c.source_id for c in response.answer.citations]
    assert response.trace.keys() >= TRACE_KEYS
    assert response.trace["mode"] == "guided"
    assert response.trace["planner_runtime"] == "heuristic"
    assert response.trace["agentic"]["crag"][0]["verdict"] in {"SUFFICIENT", "PARTIAL"}
    assert response.tool_calls and response.tool_calls[0]["tool"] == "rag_search"
    assert [e.type for e in events][-2:] == ["answer", "done"]
    stored = service.kb.catalog.get_run(response.task_id)
    assert stored is not None and stored["mode"] == "guided"


def test_both_modes_share_the_answer_schema(tmp_path) -> None:
    service = make_service(tmp_path)
    react = service.execute_agentic_search("What is the punishment for murder?", "test")
    guided = service.execute_agentic_search(
        "What is the punishment for murder?", "test", mode="guided"
    )
    assert type(react.answer) is type(guided.answer)
    assert react.trace["mode"] == "react" and "max_iterations" in react.trace
    for trace in (react.trace, guided.trace):
        assert {"tool_trace", "retrieved_source_ids", "timings_ms", "reasoner"} <= trace.keys()


def test_bad_requests_fail_before_any_event(tmp_path) -> None:
    events = []
    service = make_service(tmp_path)
    with pytest.raises(UserError, match="unknown mode 'plan'"):
        service.execute_agentic_search("q", "test", mode="plan", sinks=[events.append])  # type: ignore[arg-type]
    with pytest.raises(UserError, match="question is empty"):
        service.execute_agentic_search("   ", "test", sinks=[events.append])
    # nothing to search for: any section would be as good an "answer" as another
    with pytest.raises(UserError, match="holds no words to search for"):
        service.execute_agentic_search("?!? …", "test", sinks=[events.append])
    with pytest.raises(UserError, match="collection 'nope' does not exist"):
        service.execute_agentic_search("q", "nope", sinks=[events.append])
    assert events == []


@pytest.mark.parametrize(
    ("question", "problem"),
    [
        ("", "empty"),
        (" \t", "empty"),
        ("???", "no words"),
        ("!!! — 👍", "no words"),
        ("x" * 4001, "too long"),
        ("123", None),  # a section number is something to look up
        ("क्या पुलिस बिना वारंट गिरफ्तार कर सकती है?", None),  # words of any script
        ("Is theft bailable?", None),
    ],
)
def test_a_question_a_run_cannot_take_is_refused(question: str, problem: str | None) -> None:
    from sleuth.types import question_problem

    found = question_problem(question)
    assert (found is None) is (problem is None)
    if problem is not None:
        assert problem in str(found)
