"""Answers are bounded: a section with no sentence breaks, or a model that does not stop,
never makes a megabyte answer (issue 28: a 2,000,048-char answer from one huge chunk)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sleuth.agents.answer import MAX_ANSWER_CHARS, GeneratedAnswer, capped
from tests.helpers import STATUTE_SECTIONS, make_app


def test_a_long_answer_is_cut_at_a_sentence_with_a_visible_mark() -> None:
    text = "The register records each wick [LAMP_S1]. " * 400
    cut = capped(GeneratedAnswer(answer_text=text), limit=1000)
    assert len(cut.answer_text) <= 1000
    assert cut.answer_text.split(" [truncated: ")[0].endswith("[LAMP_S1].")
    left_out = len(text) - len(cut.answer_text.split(" [truncated: ")[0])
    assert cut.answer_text.endswith(f"[truncated: {left_out} of {len(text)} chars]")


def test_text_without_breaks_is_cut_where_the_limit_falls_and_a_short_answer_is_kept() -> None:
    blob = GeneratedAnswer(answer_text="x" * 5000)
    assert capped(blob, limit=500).answer_text.startswith("x" * 400)
    assert len(capped(blob, limit=500).answer_text) <= 500
    short = GeneratedAnswer(answer_text="Death [BNS_S103].")
    assert capped(short) is short


@pytest.mark.parametrize("mode", ["guided", "react"])
def test_a_run_over_one_huge_unbroken_section_returns_a_bounded_answer(
    tmp_path: Path, mode: str
) -> None:
    sections = {
        **STATUTE_SECTIONS,
        "LAMP_S1": ("Lanterns.", "lantern wick register " + "x" * 2_000_000),
    }
    app = make_app(tmp_path, sections)
    response = app.agent.execute_agentic_search(
        "What does the lantern wick register record?", "test", mode=mode
    )
    app.close()
    assert len(response.answer.answer_text) <= MAX_ANSWER_CHARS
