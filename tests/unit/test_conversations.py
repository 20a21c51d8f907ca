"""Conversation threads through the agent service: follow-ups made standalone, turns stored,
answer text streamed while a model writes it."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage

from sleuth.agents.llm_reasoner import LLMReasoner
from sleuth.errors import NotFoundError, UserError
from sleuth.llm.testing import ScriptedChatModel
from tests.helpers import STATUTE_SECTIONS, make_service

MURDER = "What is the punishment for murder?"
ANSWER = "Death or imprisonment for life, and a fine [1]."
REWRITTEN = "What is the punishment for murder committed by a group of five persons?"


def _router(messages: list[BaseMessage]) -> AIMessage:
    """A scripted model for whole runs: the generator writes ``ANSWER``, the follow-up
    rewrite returns ``REWRITTEN``; every other agent gets an empty reply (its fallback)."""
    system = str(messages[0].content)
    if "rewrite the last question" in system:
        reply = AIMessage(REWRITTEN)
        reply.usage_metadata = {"input_tokens": 90, "output_tokens": 12, "total_tokens": 102}
        return reply
    if "numbered evidence" in system:
        return AIMessage(ANSWER)
    return AIMessage("")


def _model_service(tmp_path: Any):  # type: ignore[no-untyped-def]
    model = ScriptedChatModel([_router], repeat_last=True)
    return make_service(tmp_path, reasoner=LLMReasoner(model)), model


def test_a_follow_up_offline_carries_the_previous_question_and_is_stored(tmp_path) -> None:
    service = make_service(tmp_path)
    catalog = service.kb.catalog
    thread = catalog.create_thread("test", None)
    first = service.execute_agentic_search(
        MURDER, "test", mode="guided", thread_id=thread.thread_id
    )
    assert first.trace["conversation"]["rewrite"] == "none"
    assert first.trace["conversation"]["rewritten_question"] is None  # asked as typed
    assert first.trace["conversation"]["turn"] == 0

    events: list[Any] = []
    follow = service.execute_agentic_search(
        "And if a group of five persons commits it?",
        mode="guided",  # the collection comes from the thread
        thread_id=thread.thread_id,
        sinks=[events.append],
    )
    conversation = follow.trace["conversation"]
    assert conversation["rewrite"] == "context"
    assert conversation["turn"] == 1
    assert conversation["rewritten_question"] == (
        "And if a group of five persons commits it (What is the punishment for murder)?"
    )
    cited_first = [c.source_id for c in first.answer.citations]
    assert conversation["carried_citations"] == list(dict.fromkeys(cited_first))
    assert any(
        e.type == "observe" and e.content.startswith("Follow-up made standalone") for e in events
    )
    assert follow.query == "And if a group of five persons commits it?"  # the question as typed
    assert "BNS_S103" in [c.source_id for c in follow.answer.citations]

    turns = catalog.thread_turns(thread.thread_id)
    assert [t.question for t in turns] == [MURDER, "And if a group of five persons commits it?"]
    assert turns[0].rewritten_question is None
    assert turns[1].rewritten_question == conversation["rewritten_question"]
    assert turns[1].task_id == follow.task_id
    assert turns[1].citations == list(dict.fromkeys(c.source_id for c in follow.answer.citations))
    assert catalog.get_thread(thread.thread_id).turn_count == 2  # type: ignore[union-attr]


def test_another_users_thread_is_not_found_and_a_thread_keeps_its_collection(tmp_path) -> None:
    service = make_service(tmp_path)
    mine = service.kb.catalog.create_thread("test", "alice")
    with pytest.raises(NotFoundError, match="not found"):
        service.execute_agentic_search(MURDER, "test", user_id="bob", thread_id=mine.thread_id)
    with pytest.raises(NotFoundError):
        service.execute_agentic_search(MURDER, "test", thread_id="no-such-thread")
    with pytest.raises(UserError, match="belongs to collection 'test'"):
        service.execute_agentic_search(MURDER, "other", user_id="alice", thread_id=mine.thread_id)
    assert service.kb.catalog.thread_turns(mine.thread_id) == []


def test_a_thread_keeps_its_newest_turns_only(tmp_path) -> None:
    service = make_service(tmp_path)
    service.settings = service.settings.model_copy(update={"thread_max_turns": 2})
    thread = service.kb.catalog.create_thread("test", None)
    for question in (MURDER, "And culpable homicide?", "And theft?"):
        service.execute_agentic_search(question, "test", mode="guided", thread_id=thread.thread_id)
    turns = service.kb.catalog.thread_turns(thread.thread_id)
    assert [t.question for t in turns] == ["And culpable homicide?", "And theft?"]


def test_with_followup_rewrite_model_the_model_rewrites_the_follow_up(tmp_path) -> None:
    service, model = _model_service(tmp_path)
    service.settings = service.settings.model_copy(update={"followup_rewrite": "model"})
    thread = service.kb.catalog.create_thread("test", None)
    service.execute_agentic_search(MURDER, "test", mode="guided", thread_id=thread.thread_id)
    follow = service.execute_agentic_search(
        "And if five do it?", "test", mode="guided", thread_id=thread.thread_id
    )
    assert follow.trace["conversation"]["rewrite"] == "model"
    assert follow.trace["conversation"]["rewritten_question"] == REWRITTEN
    assert follow.trace["token_usage_by_stage"]["followup"]  # its tokens, counted apart
    rewrite_prompts = [c for c in model.calls if "rewrite the last question" in str(c[0].content)]
    assert len(rewrite_prompts) == 1  # one typed call, on the follow-up only
    assert MURDER in str(rewrite_prompts[0][-1].content)


def test_by_default_a_model_run_carries_the_subject_without_asking_the_model(tmp_path) -> None:
    service, model = _model_service(tmp_path)
    thread = service.kb.catalog.create_thread("test", None)
    service.execute_agentic_search(MURDER, "test", mode="guided", thread_id=thread.thread_id)
    follow = service.execute_agentic_search(
        "And if five do it?", "test", mode="guided", thread_id=thread.thread_id
    )
    assert follow.trace["conversation"]["rewrite"] == "context"
    assert not any("rewrite the last question" in str(c[0].content) for c in model.calls)


def test_the_answer_text_streams_as_the_model_writes_it(tmp_path) -> None:
    service, _ = _model_service(tmp_path)
    events: list[Any] = []
    response = service.execute_agentic_search(MURDER, "test", mode="guided", sinks=[events.append])
    deltas = [e for e in events if e.type == "answer_delta"]
    assert len(deltas) > 3  # piece by piece, not the whole answer at once
    assert "".join(d.delta for d in deltas if d.stream == deltas[0].stream) == ANSWER
    types = [e.type for e in events]
    assert types.index("answer_delta") < types.index("answer") < types.index("done")
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    stored = service.kb.catalog.get_run(response.task_id)
    assert stored is not None


def test_without_a_model_nothing_streams(tmp_path) -> None:
    events: list[Any] = []
    make_service(tmp_path).execute_agentic_search(
        MURDER, "test", mode="guided", sinks=[events.append]
    )
    assert not any(e.type == "answer_delta" for e in events)
    assert not next(e for e in events if e.type == "answer").revised


def test_sections_are_the_fixture_statutes() -> None:
    assert "BNS_S103" in STATUTE_SECTIONS
