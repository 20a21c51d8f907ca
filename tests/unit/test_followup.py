"""Follow-ups made standalone, and answer text streamed while the model writes it."""

from __future__ import annotations

import time
from typing import Any

from langchain_core.messages import HumanMessage

from sleuth.agents.answer import GeneratedAnswer
from sleuth.agents.events import AnswerDeltaEvent, AnswerEvent, EventEmitter, revised
from sleuth.agents.followup import (
    PriorTurn,
    StandaloneQuestion,
    history_for_model,
    keeps_question,
    standalone_question,
)
from sleuth.llm import calls
from sleuth.llm.testing import ScriptedChatModel

THEFT = PriorTurn("Someone took my phone from my desk. What jail term can they get?", ("BNS_S303",))


def test_a_first_turn_is_asked_as_typed() -> None:
    rewrite = standalone_question("  What is theft?  ", [])
    assert (rewrite.question, rewrite.method, rewrite.carried_citations) == (
        "What is theft?",
        "none",
        [],
    )


def test_offline_the_previous_question_is_carried_with_its_citations() -> None:
    rewrite = standalone_question("And for an attempt?", [THEFT])
    assert rewrite.method == "context"
    assert rewrite.question == (
        "And for an attempt (Someone took my phone from my desk; What jail term can they get)?"
    )
    assert rewrite.carried_citations == ["BNS_S303"]
    assert rewrite.to_dict()["original_question"] == "And for an attempt?"


def test_the_model_rewrites_the_follow_up_from_the_earlier_questions() -> None:
    model = ScriptedChatModel(["Rewritten: What jail term can someone get for attempting theft?"])
    rewrite = standalone_question("And for an attempt?", [THEFT], model)
    assert rewrite.method == "model"
    assert rewrite.question == "What jail term can someone get for attempting theft?"
    assert rewrite.carried_citations == ["BNS_S303"]
    prompt = str(model.calls[0][-1].content)
    assert f"Earlier question: {THEFT.question}" in prompt
    assert prompt.endswith("Last question: And for an attempt?\nRewritten:")


def test_a_model_rewrite_that_drops_what_is_asked_gives_way_to_the_carried_subject() -> None:
    # the model swapped in the earlier question: the follow-up's own words are gone
    model = ScriptedChatModel(["What jail term can someone get for theft?"])
    rewrite = standalone_question("Which court tries a case like that?", [THEFT], model)
    assert rewrite.method == "context"
    assert rewrite.question.startswith("Which court tries a case like that (Someone took")
    assert "dropped what the question asks" in rewrite.errors[0]


def test_an_empty_or_failed_model_rewrite_falls_back_to_the_carried_subject() -> None:
    empty = standalone_question("Which court tries it?", [THEFT], ScriptedChatModel([""]))
    assert empty.method == "context" and empty.errors
    failed = standalone_question("Which court tries it?", [THEFT], ScriptedChatModel([]))
    assert failed.method == "context" and "ScriptExhausted" in failed.errors[0]


def test_keeps_question_allows_one_dropped_term_and_any_added_ones() -> None:
    assert keeps_question("Can he get bail for that?", "Can a man who stole a phone get bail?")
    assert keeps_question("Would a daytime break-in carry less?", "Would a break-in carry less?")
    assert not keeps_question(
        "Apart from experts, whose opinion on that signature counts?",
        "Can a magistrate make someone give samples of handwriting?",
    )


def test_history_shown_to_the_model_keeps_the_newest_questions_within_the_budget() -> None:
    turns = [PriorTurn(f"question {i} " + "word " * 40) for i in range(6)]
    kept = history_for_model(turns, budget_tokens=200)
    assert kept and kept[-1] == turns[-1]  # the newest is always kept
    assert 1 < len(kept) < len(turns) and kept == turns[-len(kept) :]
    assert sum(calls.estimate_tokens(t.question) for t in kept) <= 200
    alone = history_for_model([PriorTurn("w " * 2000 + "What is asked?")], budget_tokens=64)
    assert len(alone) == 1 and alone[0].question.endswith("What is asked?")
    assert calls.estimate_tokens(alone[0].question) <= 64 + 2


def test_the_standalone_question_must_be_a_question_of_a_sane_length() -> None:
    assert StandaloneQuestion(question="  Is   theft bailable? ").question == "Is theft bailable?"
    for bad in ("", "a", "x" * 5000):
        try:
            StandaloneQuestion(question=bad)
        except ValueError:
            continue
        raise AssertionError(f"accepted {bad[:20]!r}")


# ---------------------------------------------------------------- streamed answer text


def test_a_streamed_call_hands_each_piece_on_and_returns_the_whole_reply() -> None:
    pieces: list[tuple[str, int]] = []
    limits = calls.RunLimits(
        deadline=time.monotonic() + 30, answer_delta=lambda t, s: pieces.append((t, s))
    )
    model = ScriptedChatModel(["Up to three years [1].", "Seven years [2]."])
    with calls.run_limits(limits):
        first = calls.invoke(model, [HumanMessage("q")], stream_answer=True)
        second = calls.invoke(model, [HumanMessage("q")], stream_answer=True)
        plain = calls.invoke(ScriptedChatModel(["not streamed"]), [HumanMessage("q")])
    assert first.content == "Up to three years [1]." and second.content == "Seven years [2]."
    assert plain.content == "not streamed"
    assert "".join(t for t, s in pieces if s == 1) == "Up to three years [1]."
    assert "".join(t for t, s in pieces if s == 2) == "Seven years [2]."
    assert len([p for p in pieces if p[1] == 1]) == 5  # word by word, not in one piece


def test_a_call_marked_for_streaming_outside_a_run_is_a_plain_call() -> None:
    reply = calls.invoke(ScriptedChatModel(["whole"]), [HumanMessage("q")], stream_answer=True)
    assert reply.content == "whole"


def _answer_after(streamed: list[tuple[str, int]], final: str) -> AnswerEvent:
    events: list[Any] = []
    emitter = EventEmitter("t", [events.append])
    for text, stream in streamed:
        emitter.emit(AnswerDeltaEvent(delta=text, stream=stream))
    emitter.emit(AnswerEvent(answer=GeneratedAnswer(answer_text=final), status="completed"))
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    return events[-1]


def test_the_answer_says_when_the_checks_changed_the_streamed_text() -> None:
    same = _answer_after([("Up to", 1), (" three years [1].", 1)], "Up to three years [BNS_S303].")
    assert not same.revised  # only its citation markers differ
    added = _answer_after(
        [("Up to three years [1].", 1)],
        'Up to three years [BNS_S303]. "Whoever commits theft shall be punished …" [BNS_S303]',
    )
    assert not added.revised  # quoted evidence added after it: not a change
    changed = _answer_after([("Yes, always [1].", 1)], "No: a confession to a police officer …")
    assert changed.revised
    repaired = _answer_after([("Wrong [1].", 1), ("Seven years [2].", 2)], "Seven years [BNS_S5].")
    # the first reply was shown too (a user saw "30 %" for a question the run then declined):
    # the answer says the drafts above it were set aside
    assert repaired.revised
    again = _answer_after([("Seven [1]", 1), (" years.", 1)], "Seven years [BNS_S5].")
    assert not again.revised  # one stream, pieces of one reply
    assert not _answer_after([], "No streaming, no revision.").revised


def test_a_short_answer_explained_by_its_evidence_is_not_revised() -> None:
    # the local model over llama-server streamed this; the answer shown opens with it
    streamed = "Facts: [1], [2]\nAnswer: 3 years"
    final = "3 years. (2) Whoever commits snatching, shall be punished … [BNS_S304]."
    assert not revised(streamed, final)


def test_revised_ignores_labels_case_and_spacing() -> None:
    assert not revised("Facts: [1]\nAnswer:  Seven   YEARS", "seven years [BNS_S5]")
    assert revised("Seven years", "Three years")


def test_offline_a_third_turn_carries_the_first_and_the_previous_question_never_a_rewrite() -> None:
    second = PriorTurn("Can the police arrest him without a warrant?", ("BNSS_S35",))
    rewrite = standalone_question(
        "Within how many hours must he see a magistrate?", [THEFT, second]
    )
    assert rewrite.question == (
        "Within how many hours must he see a magistrate (Someone took my phone "
        "from my desk; What jail term can they get; Can the police arrest him without a "
        "warrant)?"
    )
    assert rewrite.carried_citations == ["BNSS_S35"]  # the previous turn's sections
