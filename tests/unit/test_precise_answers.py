"""Precise extractive answers: the main rule first, another section only for another part of
the question, prose without a title on every sentence (offline reasoner, both modes)."""

from __future__ import annotations

import pytest

from sleuth.agents.heuristic import compose_answer, compose_parts
from sleuth.tools.base import RunContext
from sleuth.tools.rag import build_rag_tools
from tests.helpers import make_app

SECTIONS = {
    "ACT_S10": (
        "Pilfering.",
        "(1) Whoever, intending to take dishonestly any movable thing out of the keeping of "
        "another person without consent, moves that thing, is said to commit pilfering. "
        "Illustrations. (a) A lifts a lamp from Z's stall, meaning to keep it. "
        "Here A has committed pilfering as soon as the lamp is moved. "
        "(2) Whoever commits pilfering shall be punished with imprisonment for a term which "
        "may extend to three years, or with fine, or with both. "
        "Provided that a first pilfering of a thing worth little may be punished with "
        "community service.",
    ),
    "ACT_S11": (
        "Pilfering in a dwelling.",
        "Whoever commits pilfering in any building used as a dwelling shall be punished with "
        "imprisonment for a term which may extend to seven years.",
    ),
    "ACT_S20": (
        "Punishment for arson.",
        "Whoever commits arson shall be punished with imprisonment for life.",
    ),
}


def _answer(tmp_path, question: str) -> str:  # type: ignore[no-untyped-def]
    app = make_app(tmp_path, SECTIONS)
    ctx = RunContext(collection="test")
    tools = {t.name: t for t in build_rag_tools(app.kb)}
    tools["rag_search"].invoke({"query": question, "top_k": 5}, ctx)
    for sid in list(ctx.retrieved):
        tools["read_section"].invoke({"source_id": sid}, ctx)
    draft = compose_answer(question, ctx)
    assert not draft.is_insufficient_context
    return draft.answer_text


def test_the_answer_leads_with_the_main_rule_not_an_illustration_or_proviso(tmp_path) -> None:
    text = _answer(tmp_path, "What is the punishment for pilfering?")
    assert text.startswith("(2) Whoever commits pilfering shall be punished")
    assert "Here A has committed" not in text and "A lifts a lamp" not in text
    assert "Provided that" not in text


def test_a_near_duplicate_section_is_not_cited_when_it_answers_no_other_part(tmp_path) -> None:
    text = _answer(tmp_path, "What is the punishment for pilfering?")
    assert "[ACT_S10]" in text and "[ACT_S11]" not in text


def test_another_section_is_cited_for_another_part_of_the_question(tmp_path) -> None:
    text = _answer(tmp_path, "What is the punishment for pilfering and for arson?")
    assert "[ACT_S10]" in text and "[ACT_S20]" in text


def test_sentences_read_as_prose_without_the_section_title_on_each(tmp_path) -> None:
    text = _answer(tmp_path, "What is pilfering and how is it punished?")
    assert "Section 10" not in text and "Pilfering:" not in text
    assert text.count("[ACT_S10]") >= 2


@pytest.mark.parametrize("mode", ["react", "guided"])
def test_both_modes_answer_with_the_main_rule(tmp_path, mode: str) -> None:
    app = make_app(tmp_path, SECTIONS)
    response = app.agent.execute_agentic_search(
        "What is the punishment for pilfering?", "test", mode=mode, use_memory=False
    )
    assert response.answer.answer_text.startswith("(2) Whoever commits pilfering")
    assert [c.source_id for c in response.answer.citations] == ["ACT_S10"]


def test_a_short_titled_section_does_not_displace_one_that_covers_the_question(tmp_path) -> None:
    # "Functions" is a title the question holds, so it ranks first; it cannot answer alone,
    # and the runner-up that covers the question leads (the demo's question, once declined)
    sections = {
        "REF_S1": ("Functions.", "A function object is created by a definition."),
        "REF_S2": (
            "Resolution of names.",
            "When a free variable is used in a nested function, Python resolves it in the "
            "nearest enclosing function scope that binds the name.",
        ),
    }
    app = make_app(tmp_path, sections)
    ctx = RunContext(collection="test")
    tools = {t.name: t for t in build_rag_tools(app.kb)}
    question = "How does Python resolve a free variable in a nested function?"
    tools["rag_search"].invoke({"query": question, "top_k": 5}, ctx)
    draft = compose_answer(question, ctx)
    assert not draft.is_insufficient_context
    assert draft.citations[0] == "REF_S2"


DOWRY = {
    "LAW_S80": (
        "Section 80. Dowry death",
        "(1) Where the death of a woman is caused by any burns or bodily injury or occurs "
        "otherwise than under normal circumstances within seven years of her marriage and it "
        "is shown that soon before her death she was subjected to cruelty or harassment by "
        "her husband or any relative of her husband for, or in connection with, any demand "
        "for dowry, such death shall be called dowry death, and such husband or relative "
        "shall be deemed to have caused her death. (2) Whoever commits dowry death shall be "
        "punished with imprisonment for a term which shall not be less than seven years.",
    ),
    "LAW_S81": (
        "Section 81. Abetment of suicide",
        "Whoever abets the commission of suicide shall be punished with imprisonment.",
    ),
}


def _law_ctx(tmp_path) -> RunContext:  # type: ignore[no-untyped-def]
    app = make_app(tmp_path, DOWRY)
    ctx = RunContext(collection="test")
    for sid in DOWRY:
        ctx.track(app.kb.section("test", sid))
    return ctx


def test_a_what_is_question_leads_with_the_defining_sentence(tmp_path) -> None:
    ctx = _law_ctx(tmp_path)
    draft = compose_answer("What is dowry death?", ctx)
    assert draft.answer_text.startswith("(1) Where the death of a woman")
    # the punishment question still leads with the punishment
    punished = compose_answer("What is the punishment for dowry death?", ctx)
    assert punished.answer_text.startswith("(2) Whoever commits dowry death")


def test_a_sentence_that_answers_two_parts_is_quoted_once(tmp_path) -> None:
    ctx = _law_ctx(tmp_path)
    draft = compose_parts(
        "What is dowry death and how is it punished?",
        ["What is dowry death?", "How is dowry death punished?"],
        ctx,
    )
    assert draft.answer_text.count("Whoever commits dowry death") == 1
    assert draft.answer_text.count("Where the death of a woman") == 1


def test_a_see_also_list_is_an_aside_not_the_answer(tmp_path) -> None:
    app = make_app(
        tmp_path,
        {
            "REF_F": (
                "Function definitions",
                "See also: PEP 3107 - how a function definition binds annotations to the "
                "function object. A function definition binds the function name to a "
                "function object.",
            )
        },
    )
    ctx = RunContext(collection="test")
    ctx.track(app.kb.section("test", "REF_F"))
    draft = compose_answer("What does a function definition bind?", ctx)
    assert draft.answer_text.startswith("A function definition binds")


RELEASE = {
    # the non-X section comes first in the index and shares as many words with the question
    "CODE_S40": (
        "Section 40. When release may be granted in case of non-summary offence",
        "When any person accused of a non-summary offence is detained by an officer, he may be "
        "released on a bond by the Court.",
    ),
    "CODE_S38": (
        "Section 38. In what cases release to be granted",
        "When any person other than a person accused of a nonsummary offence is detained by "
        "an officer, he shall be released on a bond.",
    ),
}


def test_a_negated_compound_is_not_an_answer_to_the_plain_term(tmp_path) -> None:
    # "non-summary offence" is the other kind of offence (the bail question's kind: BNSS 480
    # on non-bailable offences answered "bail in a bailable offence"); "other than ... a
    # nonsummary offence" is the drafting idiom for the summary case
    app = make_app(tmp_path, RELEASE)
    ctx = RunContext(collection="test")
    for sid in RELEASE:
        ctx.track(app.kb.section("test", sid))
    draft = compose_answer("When is a person accused of a summary offence released?", ctx)
    assert draft.citations[0] == "CODE_S38", draft.answer_text
    assert "non-summary" not in draft.answer_text.split("[CODE_S38]")[0]
    # a question about the negated kind still gets its section
    other = compose_answer("When is a person accused of a non-summary offence released?", ctx)
    assert other.citations[0] == "CODE_S40", other.answer_text


def test_polarity_of_negated_compounds() -> None:
    from sleuth.retrieval.text import polarity

    q = "Can a person accused of a bailable offence get bail?"
    assert polarity(q, "accused of a non-bailable offence") == (set(), {"bailabl"})
    assert polarity(q, "any person other than one accused of a nonbailable offence") == (
        {"bailabl"},
        set(),
    )
    assert polarity(q, "bailable and non-bailable offences alike") == (set(), set())
    assert polarity("What is a non-bailable offence?", "a non-bailable offence") == (set(), set())
    assert polarity(q, "nonetheless, none was granted") == (set(), set())
