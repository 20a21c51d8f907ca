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
