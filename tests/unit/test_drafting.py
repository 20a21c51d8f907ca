"""Reading a model's plain-text answer: the Answer/Explanation form, labels, JSON, declines."""

from __future__ import annotations

import pytest

from sleuth.agents.drafting import draft_from_text


def test_answer_and_explanation_become_short_answer_and_cited_text() -> None:
    draft = draft_from_text("Answer: 1998\nExplanation: How to Eat is a 1998 book [1].")
    assert draft is not None
    assert (draft.short_answer, draft.answer_text) == ("1998", "How to Eat is a 1998 book [1].")
    assert not draft.is_insufficient_context


def test_leading_markers_move_after_their_claims_and_echoed_headers_are_dropped() -> None:
    draft = draft_from_text(
        "Answer: Yes\n[1] Medici_board_game · Medici\n"
        "Explanation: [1] Medici is a board game. [2] Senet is a board game."
    )
    assert draft is not None and draft.short_answer == "Yes"
    assert draft.answer_text == "Medici is a board game [1]. Senet is a board game [2]."


@pytest.mark.parametrize(
    "reply",
    [
        "Answer: Insufficient context\nExplanation: nothing about DJs.",
        "Answer: Unknown\nExplanation: the results do not name a DJ.",
        "Insufficient context: nothing about DJs.",
    ],
)
def test_declines_are_insufficient_context(reply: str) -> None:
    draft = draft_from_text(reply)
    assert draft is not None and draft.is_insufficient_context
    assert draft.answer_text.startswith("Insufficient context")


def test_a_long_answer_line_is_a_sentence_not_a_short_answer() -> None:
    long = "Murder is punished with death or imprisonment for life " * 3
    draft = draft_from_text(f"Answer: {long}\nExplanation: See section 103 [1].")
    assert draft is not None and not draft.short_answer
    assert draft.answer_text.startswith("Murder is punished")


@pytest.mark.parametrize(
    ("reply", "short", "text", "citations"),
    [
        # the guided generator's form: facts first, then the answer
        (
            "Facts: Kuklinski worked with the DeCavalcante family [1].\n"
            "Answer: DeCavalcante crime family",
            "DeCavalcante crime family",
            "Kuklinski worked with the DeCavalcante family [1].",
            ["1"],
        ),
        ("Facts: [1], [2]\nAnswer: Sandra Oh", "Sandra Oh", "[1], [2]", ["1", "2"]),
        # echoed headers keep only the number of the evidence they name
        (
            "Facts: [1] Funchal · corpus > Funchal\n[2] Lisbon · corpus > Lisbon\n\nAnswer: Lisbon",
            "Lisbon",
            "[1]\n[2]",
            ["1", "2"],
        ),
    ],
)
def test_facts_first_replies_are_read(
    reply: str, short: str, text: str, citations: list[str]
) -> None:
    draft = draft_from_text(reply)
    assert draft is not None and not draft.is_insufficient_context
    assert (draft.short_answer, draft.answer_text, draft.citations) == (short, text, citations)


def test_a_facts_first_decline_says_what_is_missing() -> None:
    draft = draft_from_text("Facts: none\nAnswer: Insufficient context")
    assert draft is not None and draft.is_insufficient_context
    assert draft.answer_text == "Insufficient context: the evidence does not answer the question."
    draft = draft_from_text("Facts: no year of founding is given\nAnswer: Insufficient context")
    assert draft is not None
    assert draft.answer_text == "Insufficient context: no year of founding is given"


@pytest.mark.parametrize(
    "reply",
    ["Insufficient context: [1], [2]", "Facts: [1]\nAnswer: Insufficient context: [1], [2]"],
)
def test_a_decline_of_markers_only_is_a_decline_in_words_with_no_citations(reply: str) -> None:
    # seen from the local 1.5B model: shipped as "Insufficient context: [BNS_S281],
    # [BNS_S117]", an answer that ended mid-sentence and cited what it had only read
    draft = draft_from_text(reply)
    assert draft is not None and draft.is_insufficient_context
    assert draft.citations == []
    assert (
        draft.answer_text == "Insufficient context: the sections read do not answer the question."
    )


def test_a_decline_that_explains_itself_keeps_its_words() -> None:
    draft = draft_from_text("Insufficient context: the sections speak of theft, not refunds.")
    assert draft is not None and draft.is_insufficient_context
    assert draft.answer_text == "Insufficient context: the sections speak of theft, not refunds."


@pytest.mark.parametrize(
    "reply",
    [
        "```\nMurder is punished with death [BNS_S103].\n```",
        "```text\nMurder is punished with death [BNS_S103].\n```\n",
        "Here is the answer:\n```markdown\nMurder is punished with death [BNS_S103].\n```",
    ],
)
def test_a_fenced_answer_keeps_its_text_without_the_fence(reply: str) -> None:
    # once: ReAct shipped "```. Murder is punished …" (bench_robustness, fenced answers)
    draft = draft_from_text(reply)
    assert draft is not None and "`" not in draft.answer_text
    assert draft.answer_text.endswith("Murder is punished with death [BNS_S103].")
    assert draft.citations == ["BNS_S103"]
