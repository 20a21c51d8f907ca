"""Chained sub-questions: a compositional question answered one description at a time.

Invented entities throughout (no dev-set question). The scripted model answers one-hop
questions from the evidence it is shown, as a small model does; asked the whole question, it
gives the bridge entity, the mistake chaining exists to avoid.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from langchain_core.messages import AIMessage, BaseMessage

from sleuth.agents.answer import AnswerDraft
from sleuth.agents.chained import (
    HOP_SECTIONS,
    Hop,
    answer_in_hops,
    chained_draft,
    slot_value,
    split_compositional,
)
from sleuth.agents.llm_reasoner import LLMReasoner
from sleuth.app import Sleuth
from sleuth.llm.testing import ScriptedChatModel, tool_call
from sleuth.types import Document, Section
from tests.helpers import make_app
from tests.unit.test_guided import run_guided, searches, thoughts


@pytest.mark.parametrize(
    ("question", "sub_question", "rest"),
    [
        (
            "Who is the spouse of the director of Glass Harbor?",
            "What is the name of the director of Glass Harbor?",
            "Who is the spouse of X?",
        ),
        (
            "What river flows through the city where Amara Quell was born?",
            "What is the name of the city where Amara Quell was born?",
            "What river flows through X?",
        ),
        (
            "What kind of plane flew over Tovin Rask's birthplace?",
            "What is the name of Tovin Rask's birthplace?",
            "What kind of plane flew over X?",
        ),
        (  # the possessive is the inner description, not "the spouse of Lark Emory"
            "Who is the spouse of Lark Emory's main producer?",
            "What is the name of Lark Emory's main producer?",
            "Who is the spouse of X?",
        ),
        (  # a clause whose name comes late runs to the end of the question
            "What is the native language of the poet who founded the Lumen Circle in 1910?",
            "Who is the poet who founded the Lumen Circle in 1910?",
            "What is the native language of X?",
        ),
        (  # the innermost of two: the author, then the birthplace
            "Which lake is near the birthplace of the author of Salt Lanterns?",
            "What is the name of the author of Salt Lanterns?",
            "Which lake is near the birthplace of X?",
        ),
        (  # an attribute inside ("the salt protests of 1930") does not hide the description
            "Who is the child of the person who ruled Brevania during the salt protests of 1930?",
            "Who is the person who ruled Brevania during the salt protests of 1930?",
            "Who is the child of X?",
        ),
        (  # a description opening the question keeps the sub-question lower-case
            "The state where Odo Brannick died has how many counties?",
            "What is the name of the state where Odo Brannick died?",
            "X has how many counties?",
        ),
    ],
)
def test_the_innermost_description_becomes_a_sub_question(
    question: str, sub_question: str, rest: str
) -> None:
    split = split_compositional(question)
    assert split is not None
    assert split.sub_question == sub_question
    assert split.fill("X") == rest


@pytest.mark.parametrize(
    "question",
    [
        "What is the punishment for murder?",
        "Who is the spouse of Orrin Vale?",  # one lookup: nothing is left around it
        "What is the scope of Section 2 of the BNSS?",  # a section reference is a name
        "Were Orrin Vale and Delia Marsh both directors?",
        "Which came first, the forming of Lumen Hall or the birth of Ro Young?",  # two parts
        "What was the profession of Amy Vell, who starred in Glass Harbor?",  # an attribute
        "Which of the founders of the Lumen Circle wrote Salt Lanterns?",  # several entities
        "The score is in the hand of a Brevanian musician whose teacher is whom?",  # adjective
        "Brevania's best selling beer brand is brewed where?",  # no end of the phrase in sight
    ],
)
def test_questions_that_describe_nothing_are_not_split(question: str) -> None:
    assert split_compositional(question) is None


def test_a_long_hop_answer_fills_the_slot_with_the_new_name_it_gives() -> None:
    long = "Salt Lanterns is a novel by the Brevanian writer Ilse Marrow."
    assert slot_value(long, "What is the name of the author of Salt Lanterns?") == "Ilse Marrow"
    assert (
        slot_value("Ilse Marrow.", "What is the name of the author of Salt Lanterns?")
        == "Ilse Marrow"
    )


def _answered(question: str, answer: str | None, source_id: str) -> Hop:
    if answer is None:
        draft = AnswerDraft(answer_text="Insufficient context.", is_insufficient_context=True)
    else:
        draft = AnswerDraft(answer_text=f"{answer} [{source_id}].", short_answer=answer)
    return Hop(question=question, draft=draft, source_ids=[source_id])


def test_each_answer_builds_the_next_query_until_the_filled_question_is_answered() -> None:
    answers = {
        "What is the name of the author of Salt Lanterns?": ("Ilse Marrow", "Salt_Lanterns"),
        "What is the name of the birthplace of Ilse Marrow?": ("Kettering Vale", "Ilse_Marrow"),
        "Which lake is near Kettering Vale?": ("Lake Ossun", "Kettering_Vale"),
    }
    asked: list[str] = []

    def read(question: str) -> Hop:
        asked.append(question)
        return _answered(question, *answers[question])

    hops = answer_in_hops("Which lake is near the birthplace of the author of Salt Lanterns?", read)
    assert asked == list(answers)
    draft = chained_draft(hops)
    assert draft is not None and draft.short_answer == "Lake Ossun"
    assert draft.answer_text == "Ilse Marrow [Salt_Lanterns]. Kettering Vale [Ilse_Marrow]. " + (
        "Lake Ossun [Kettering_Vale]."
    )


def test_a_hop_without_an_answer_ends_the_chain_and_gives_no_draft() -> None:
    def read(question: str) -> Hop:
        return _answered(question, None, "Nowhere")

    hops = answer_in_hops("Who is the spouse of the director of Glass Harbor?", read)
    assert [h.question for h in hops] == ["What is the name of the director of Glass Harbor?"]
    assert chained_draft(hops) is None
    assert answer_in_hops("What is the punishment for murder?", read) == []


FILMS = {
    "Glass_Harbor": (
        "Glass Harbor (film)",
        "Glass Harbor is a 1931 drama film directed by Orrin Vale and set on the coast.",
    ),
    "Orrin_Vale": (
        "Orrin Vale",
        "Orrin Vale was a film director. He married the actress Delia Marsh in 1925.",
    ),
    "Pale_Coast": (
        "Pale Coast (film)",
        "Pale Coast is a drama film whose director married a painter.",
    ),
}


def _films_app(tmp_path) -> Sleuth:  # type: ignore[no-untyped-def]
    app = make_app(tmp_path, {"X_S1": ("Unrelated.", "An unrelated section.")}, collection="x")
    document = Document(
        doc_id="films",
        path="films.json",
        title="films",
        content_hash="films-1",
        sections=[
            Section(title_path=["films", title], text=text, source_id=sid)
            for sid, (title, text) in FILMS.items()
        ],
    )
    app.pipeline.ingest_documents([document], "test")
    return app


def _reader(messages: list[BaseMessage]) -> AIMessage:
    """One-hop reading: the answer of the section the question names, by its number."""
    prompt = str(messages[-1].content)
    if "numbered evidence" not in str(messages[0].content):
        return AIMessage(content="not JSON")  # other agents fall back to their heuristics
    question = prompt.rsplit("Question:", 1)[1].strip()
    numbers = dict(re.findall(r"^\[(\d+)\] (\w+) ·", prompt, re.M)[::-1])
    number = {sid: n for n, sid in numbers.items()}
    if question == "What is the name of the director of Glass Harbor?" and "Glass_Harbor" in number:
        return AIMessage(
            content=f"Facts: Glass Harbor was directed by Orrin Vale [{number['Glass_Harbor']}]"
            "\nAnswer: Orrin Vale"
        )
    if question == "Who is the spouse of Orrin Vale?" and "Orrin_Vale" in number:
        return AIMessage(
            content=f"Facts: Orrin Vale married the actress Delia Marsh [{number['Orrin_Vale']}]"
            "\nAnswer: Delia Marsh"
        )
    ref = number.get("Glass_Harbor", "1")
    return AIMessage(content=f"Facts: directed by Orrin Vale [{ref}]\nAnswer: Orrin Vale")


def test_guided_answers_a_compositional_question_hop_by_hop(tmp_path) -> None:
    app = _films_app(tmp_path)
    model = ScriptedChatModel([_reader], repeat_last=True)
    question = "Who is the spouse of the director of Glass Harbor?"
    result, events, _ = run_guided(app, question, model, llm_agents="auto")
    answer = result.answer
    assert answer is not None and answer.short_answer == "Delia Marsh"
    assert {c.source_id for c in answer.citations} == {"Glass_Harbor", "Orrin_Vale"}
    assert searches(result)[-2:] == [
        "What is the name of the director of Glass Harbor?",
        "Who is the spouse of Orrin Vale?",
    ]
    chain = result.trace["agentic"]["chain"]
    assert [(h["question"], h["answer"]) for h in chain] == [
        ("What is the name of the director of Glass Harbor?", "Orrin Vale"),
        ("Who is the spouse of Orrin Vale?", "Delia Marsh"),
    ]
    assert "Orrin_Vale" in chain[1]["source_ids"]
    hops = [t for t in thoughts(events) if t.startswith("Hop:")]
    assert hops == [
        "Hop: 'What is the name of the director of Glass Harbor?' → 'Orrin Vale'.",
        "Hop: 'Who is the spouse of Orrin Vale?' → 'Delia Marsh'.",
    ]


def test_guided_answers_the_whole_question_when_a_hop_finds_nothing(tmp_path) -> None:
    app = _films_app(tmp_path)

    def reader(messages: list[BaseMessage]) -> Any:
        question = str(messages[-1].content).rsplit("Question:", 1)[-1].strip()
        if question == "What is the name of the director of Glass Harbor?":
            return AIMessage(content="Facts: nothing\nAnswer: Insufficient context")
        return _reader(messages)

    model = ScriptedChatModel([reader], repeat_last=True)
    result, events, _ = run_guided(
        app, "Who is the spouse of the director of Glass Harbor?", model, llm_agents="auto"
    )
    asked = [str(call[-1].content).rsplit("Question:", 1)[-1].strip() for call in model.calls]
    assert asked[-1] == "Who is the spouse of the director of Glass Harbor?"
    assert any("a hop found no answer" in t for t in thoughts(events))
    assert result.answer.short_answer == "Orrin Vale"  # the double's whole-question mistake


def test_react_answers_a_compositional_question_hop_by_hop(tmp_path) -> None:
    app = _films_app(tmp_path)
    question = "Who is the spouse of the director of Glass Harbor?"

    def loop_or_reader(messages: list[BaseMessage]) -> AIMessage:
        if "numbered evidence" in str(messages[0].content):
            return _reader(messages)
        if not any(isinstance(m, AIMessage) for m in messages):  # the first, forced search
            return tool_call("rag_search", {"query": "Glass Harbor director", "top_k": 1})
        return AIMessage(content="Answer: Orrin Vale")  # the loop's own (bridge) answer

    model = ScriptedChatModel([loop_or_reader], repeat_last=True)
    app.agent.reasoner = LLMReasoner(model)
    response = app.agent.execute_agentic_search(question, "test", use_memory=False)

    hop_searches = [
        c["arguments"]["query"]
        for c in response.tool_calls
        if c["tool"] == "rag_search" and c["arguments"].get("top_k") == HOP_SECTIONS
    ]
    assert hop_searches == [
        "What is the name of the director of Glass Harbor?",
        "Who is the spouse of Orrin Vale?",
    ]
    assert response.answer.short_answer == "Delia Marsh"
    assert {c.source_id for c in response.answer.citations} == {"Glass_Harbor", "Orrin_Vale"}
    said = [s.content for s in response.reasoning_steps if s.step_type == "think"]
    assert any(
        "'What is the name of the director of Glass Harbor?' → 'Orrin Vale'" in t for t in said
    )


def test_react_synthesises_the_whole_answer_when_a_hop_finds_nothing(tmp_path) -> None:
    app = _films_app(tmp_path)
    question = "Who is the spouse of the director of Glass Harbor?"

    def loop_or_reader(messages: list[BaseMessage]) -> AIMessage:
        prompt = str(messages[-1].content)
        if "numbered evidence" in str(messages[0].content):
            if prompt.rstrip().endswith(
                "Question: What is the name of the director of Glass Harbor?"
            ):
                return AIMessage(content="Facts: nothing\nAnswer: Insufficient context")
            return _reader(messages)
        if not any(isinstance(m, AIMessage) for m in messages):
            return tool_call("rag_search", {"query": "Glass Harbor director", "top_k": 1})
        return AIMessage(content="Answer: Orrin Vale")

    model = ScriptedChatModel([loop_or_reader], repeat_last=True)
    app.agent.reasoner = LLMReasoner(model)
    response = app.agent.execute_agentic_search(question, "test", use_memory=False)
    asked = [str(c[-1].content).rsplit("Question:", 1)[-1].strip() for c in model.calls]
    # one hop, then the synthesis reads the whole question from all the evidence
    assert "Who is the spouse of Orrin Vale?" not in asked
    assert asked[-1] == question
    assert response.answer.short_answer == "Orrin Vale"  # the double's whole-question reply
