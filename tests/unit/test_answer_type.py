"""A short answer of the wrong shape (a name where the question asks for a year) is repaired."""

from __future__ import annotations

import pytest
from langchain_core.messages import AIMessage

from sleuth.agents.finish import answer_type, fits_type, shape_problem
from sleuth.agents.generation import EvidenceSection, explain_from_evidence, generation_messages
from sleuth.agents.reader import answer_kind
from sleuth.llm.testing import ScriptedChatModel
from tests.unit.test_guided import run_guided
from tests.unit.test_mentions import _corpus_app

YEAR = "In what year was the film directed by Adriana Trigiani released?"
NAMED = "Facts: Trigiani directed Big Stone Gap [Big_Stone_Gap_film].\nAnswer: Adriana Trigiani"
DATED = "Facts: Big Stone Gap is a 2014 film [Big_Stone_Gap_film].\nAnswer: 2014"


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("Are Quillmark and Dorrowind both card games?", "yes/no"),
        ("Does the architect Tomas Brell also have one?", "yes/no"),
        ("The painter A has a knighthood. Does the painter B also have one?", "yes/no"),
        ("Is St. Louis in Missouri?", "yes/no"),
        ("Mr. Smith is here. Who is he?", None),
        ("Is Nantong or Jingdezhen larger?", None),  # a choice: an entity
        ("Lantern Road is a remake of a film released in which year?", "year"),
        ("In what year was the man born?", "year"),
        ("When was the Welsh singer born?", "date"),
        ("How many times was he selected for the all-star game?", "number"),
        ("At the 1990 census, what was the population of the harbour town?", "number"),
        ("Who produced the album on which Lena Osk made her debut?", None),
    ],
)
def test_the_question_says_what_shape_its_short_answer_has(question: str, kind: str) -> None:
    assert answer_type(question) == kind


@pytest.mark.parametrize(
    ("short", "kind", "fits"),
    [
        ("Moshe Katsav", "year", False),
        ("15 June 1924", "year", True),
        ("the 1990s", "year", True),
        ("19th century", "date", True),
        ("in June", "date", True),
        ("Bonnie Tyler", "date", False),
        ("twice", "number", True),
        ("6,960", "number", True),
        ("Ezer Weizman", "number", False),
        ("No", "yes/no", True),
        ("Both are board games", "yes/no", False),
    ],
)
def test_short_answer_shapes(short: str, kind: str, fits: bool) -> None:
    assert fits_type(short, kind) is fits  # type: ignore[arg-type]


def test_a_name_given_for_a_year_gets_one_repair_round(tmp_path) -> None:
    app = _corpus_app(tmp_path)
    model = ScriptedChatModel(
        [
            AIMessage(NAMED),
            AIMessage(DATED),
        ]
    )
    result, _, _ = run_guided(app, YEAR, model, llm_agents="auto")
    assert "asks for a year, but your short answer 'Adriana Trigiani'" in str(
        model.calls[-1][-1].content
    )
    assert result.answer.short_answer == "2014"
    assert result.trace["repair_rounds"] == 1
    assert result.trace["answer_source"] == "repaired"


def test_a_yes_to_a_wh_question_gets_one_repair_round(tmp_path) -> None:
    app = _corpus_app(tmp_path)
    model = ScriptedChatModel(
        [
            AIMessage("Facts: [1]\nAnswer: Yes"),
            AIMessage("Facts: [1]\nAnswer: Big Stone Gap"),
        ]
    )
    question = "Which 2014 romantic comedy did Adriana Trigiani direct?"
    result, _, _ = run_guided(app, question, model, llm_agents="auto")
    assert "asks for a name or phrase, not yes or no, but your short answer 'Yes'" in str(
        model.calls[-1][-1].content
    )
    assert result.answer.short_answer == "Big Stone Gap"
    assert result.trace["repair_rounds"] == 1


def test_an_answer_that_repeats_the_question_gets_one_repair_round(tmp_path) -> None:
    app = _corpus_app(tmp_path)
    model = ScriptedChatModel(
        [
            AIMessage("Facts: [1]\nAnswer: Adriana Trigiani"),
            AIMessage("Facts: [1]\nAnswer: Big Stone Gap"),
        ]
    )
    question = "Which 2014 romantic comedy did Adriana Trigiani direct?"
    result, _, _ = run_guided(app, question, model, llm_agents="auto")
    assert "'Adriana Trigiani' only repeats a name the question already gives" in str(
        model.calls[-1][-1].content
    )
    assert result.answer.short_answer == "Big Stone Gap"


@pytest.mark.parametrize(
    ("question", "short", "problem"),
    [
        ("Under what name did the founder of Glass Heron record?", "Glass Heron", True),
        ("Which poet is Canadian, Ada Pell or Roan Vesk?", "Roan Vesk", False),
        ("Between Orla Fenn and Ivo Stace, which writer was older?", "Ivo Stace", False),
        ("Who produced the album on which Lena Osk debuted?", "Mira Taal", False),
        ("Who produced the album on which Lena Osk debuted?", "No", True),
        # the question's other words are no echo: a number with its unit, a scenario's word
        ("My cat vanished years ago. After how many years is it presumed lost?", "7 years", False),
        ("If a gang burns a barn down, what can the court sentence them to?", "Burns", False),
        ("Which Tarn Vale novel did Mira Okes write first?", "Tarn Vale", True),
        ("Mira Okes wrote which novel first?", "Mira Okes", True),  # a name opening it
    ],
)
def test_shape_problems(question: str, short: str, problem: bool) -> None:
    assert (shape_problem(question, short) is not None) is problem


def test_a_yes_no_question_with_a_wh_clause_is_not_asked_for_a_date() -> None:
    # "When …, must I …?" asks yes or no: read with the question's answer kind, a "No" fits
    question = "When the inspector visits my shop, must I show him my licence?"
    kind = answer_kind(question)
    assert kind == "yes_no"
    assert shape_problem(question, "No", kind) is None
    assert shape_problem(question, "Tuesday", kind) is not None


def test_a_repair_of_the_wrong_shape_again_keeps_the_first_answer(tmp_path) -> None:
    app = _corpus_app(tmp_path)
    model = ScriptedChatModel(
        [
            AIMessage(NAMED),
            AIMessage("Facts: [1]\nAnswer: Big Stone Gap"),
        ]
    )
    result, _, _ = run_guided(app, YEAR, model, llm_agents="auto")
    assert len(model.calls) == 2
    assert result.answer.short_answer == "Adriana Trigiani"


def test_a_short_answer_of_the_right_shape_is_not_asked_again(tmp_path) -> None:
    app = _corpus_app(tmp_path)
    model = ScriptedChatModel([AIMessage(DATED)])
    result, _, _ = run_guided(app, YEAR, model, llm_agents="auto")
    assert len(model.calls) == 1
    assert result.answer.short_answer == "2014"
    assert result.trace["repair_rounds"] == 0


CARD_GAMES = [
    EvidenceSection(
        "Quillmark_game", "Quillmark (card game)", "Quillmark is a card game by Ilse Varn.", 1
    ),
    EvidenceSection("Dorrowind", "Dorrowind", "Dorrowind is a card game from old Kesh.", 2),
]


def test_a_yes_backed_by_numbers_is_explained_from_the_cited_sections() -> None:
    # "yes" is in no section; the cited sections, read by the question's terms, explain it
    text = explain_from_evidence(
        "Are Quillmark and Dorrowind both card games?", "Yes", ["1", "2"], CARD_GAMES
    )
    assert text == (
        "Quillmark is a card game by Ilse Varn [1]. Dorrowind is a card game from old Kesh [2]."
    )


def test_an_option_of_the_question_is_explained_without_numbers() -> None:
    # the answer's words all come from the question ("Dorrowind or Quillmark"): the sections
    # that share most of the question's terms explain the pick
    text = explain_from_evidence(
        "Which is older, Dorrowind or Quillmark?", "Dorrowind", [], CARD_GAMES
    )
    assert "[2]" in text and "old Kesh" in text


def test_an_answer_from_memory_is_still_not_explained() -> None:
    assert explain_from_evidence("Who designed Quillmark?", "Aron Belt", ["1"], CARD_GAMES) == ""


def test_a_sentence_given_as_the_short_answer_is_kept_as_a_claim_with_its_numbers() -> None:
    # a whole sentence in "Answer:" is a claim for the support check, not an entity whose
    # every word ("very", "still", "played") a section must hold
    from sleuth.agents.answer import AnswerDraft
    from sleuth.agents.generation import explained_draft

    draft = AnswerDraft(
        answer_text="[2]",
        short_answer="Yes, Dorrowind is a very old card game that is still played in Kesh today",
        citations=["2"],
    )
    out = explained_draft("Is Dorrowind a card game?", draft, CARD_GAMES)
    assert not out.is_insufficient_context
    assert out.short_answer == ""
    assert out.answer_text == (
        "Yes, Dorrowind is a very old card game that is still played in Kesh today [2]."
    )
    # a short answer (an entity) is still held to the words of the evidence
    short = AnswerDraft(answer_text="[1]", short_answer="Aron Belt", citations=["1"])
    assert explained_draft("Who designed Quillmark?", short, CARD_GAMES).is_insufficient_context


def test_a_yes_no_question_is_asked_for_its_facts_before_its_verdict() -> None:
    evidence = [EvidenceSection("HC_S9", "Night", "A ferry may sail at night with two lamps.", 1)]
    short = generation_messages("May a ferry sail at night?", evidence)[0].content
    assert "Facts:" in short and "Answer:" in short
    # a long-form question is asked for its facts first too, then a whole answer sentence
    explained = generation_messages("Why must a ferry carry two lamps at night?", evidence)
    prompt = explained[0].content
    assert prompt.index("Facts:") < prompt.index("Answer: <one complete sentence")
