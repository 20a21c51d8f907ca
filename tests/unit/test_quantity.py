"""A short answer's quantity read again by the model from the sentences that state it
(:mod:`sleuth.agents.quantity`). Passages and questions are written for these tests; the
model is a scripted double."""

from __future__ import annotations

import time
from collections.abc import Sequence

from sleuth.agents.answer import AnswerDraft
from sleuth.agents.coverage import CoverageJudge
from sleuth.agents.finish import finish_answer
from sleuth.agents.quantity import quantities, reread_quantity
from sleuth.agents.support import SupportChecker
from sleuth.llm import calls
from sleuth.llm.testing import ScriptedChatModel, final
from sleuth.retrieval.text import terms
from sleuth.tools.base import RunContext
from sleuth.types import Chunk

LAMPS = Chunk(
    chunk_id="HC_S7#0",
    doc_id="code",
    source_id="HC_S7",
    title_path=["Harbour code", "Sailing without lamps"],
    text=(
        "Whoever sails a ferry at night without lamps shall be punished with imprisonment for "
        "a term which shall not be less than one year but which may extend to five years."
    ),
    position=0,
)
QUESTION = "What is the least jail term for sailing a ferry at night without lamps?"


class OverlapScorer:
    """A cross-encoder double: logit = 8 × (share of the query's terms in the passage) − 4."""

    def logits(self, query: str, passages: Sequence[str]) -> list[float]:
        wanted = set(terms(query))
        return [8.0 * len(wanted & set(terms(p))) / max(1, len(wanted)) - 4.0 for p in passages]


def ctx() -> RunContext:
    context = RunContext(collection="c")
    context.track([LAMPS])
    return context


def finished(
    reply: str, short: str = "5 years", question: str = QUESTION
) -> tuple[str, str | None, ScriptedChatModel]:
    model = ScriptedChatModel([final(reply)])
    checker = SupportChecker(
        cross_encoder=OverlapScorer(),  # type: ignore[arg-type]
        coverage_threshold=0.5,
        coverage_judge=CoverageJudge(model),
    )
    draft = AnswerDraft(
        answer_text="Sailing without lamps is punished with imprisonment [HC_S7].",
        short_answer=short,
        citations=["HC_S7"],
    )
    done = finish_answer(question, draft, ctx(), checker=checker, from_model=True)
    return done.answer.answer_text, done.quantity_check, model


def test_quantities_count_a_lone_one_and_skip_places() -> None:
    assert quantities("not less than one year") == {"1"}
    assert quantities("1 year") == quantities("one year")
    assert quantities("sub-section (2) of section 9 sets five years") == {"5"}


def test_a_short_answer_naming_the_wrong_bound_is_read_again_from_the_rule() -> None:
    text, note, model = finished("1 year")
    assert text.startswith("1 year. ")
    assert "not be less than one year" in text  # the quoted rule still follows
    assert note == "'5 years' re-read as '1 year' from the quoted sentences"
    shown = str(model.calls[0][-1].content)
    assert shown.startswith("Text: ") and "[HC_S7]" not in shown  # markers removed
    assert shown.endswith(f"Question: {QUESTION}")


def test_a_re_read_bringing_its_own_number_or_dropping_a_part_is_not_taken() -> None:
    text, note, _ = finished("2 years")  # no sentence shown states two years
    assert text.startswith("5 years. ")
    assert note is not None and note.startswith("kept '5 years'")
    text, note, _ = finished("1 year", short="1 year, 5 years")
    assert text.startswith("1 year, 5 years. ")
    assert note is not None and "fewer numbers" in note
    text, note, _ = finished("five years")
    assert text.startswith("5 years. ") and note == "kept '5 years': the re-read agrees"
    text, note, _ = finished("1")  # "1." would not say one of what
    assert text.startswith("5 years. ") and note == "kept '5 years': the re-read '1' has no unit"


def test_a_question_asking_several_things_is_not_read_again_for_one_number() -> None:
    question = "What is the least jail term for sailing without lamps, and who collects the fine?"
    text, note, model = finished("1 year", question=question)
    assert note is None and model.calls == []
    assert text.startswith("5 years. ")


def test_no_re_read_without_a_quantity_or_a_model() -> None:
    model = ScriptedChatModel([])
    assert reread_quantity(QUESTION, "the harbour master", LAMPS.text, model, ctx()) is None
    assert reread_quantity(QUESTION, "5 years", "No lamps, no sailing.", model, ctx()) is None
    checker = SupportChecker(cross_encoder=OverlapScorer(), coverage_threshold=0.5)  # type: ignore[arg-type]
    draft = AnswerDraft(answer_text="It is punished [HC_S7].", short_answer="5 years")
    done = finish_answer(QUESTION, draft, ctx(), checker=checker, from_model=True)
    assert done.quantity_check is None and done.answer.answer_text.startswith("5 years. ")


def test_past_the_run_deadline_or_on_a_failed_call_the_short_answer_stands() -> None:
    model = ScriptedChatModel([final("1 year")])
    with calls.run_limits(calls.RunLimits(deadline=time.monotonic() - 1.0)) as limits:
        found = reread_quantity(QUESTION, "5 years", LAMPS.text, model, ctx())
    assert found is not None and found.short == "5 years"
    assert found.note == "kept '5 years': the run's deadline has passed"
    assert model.calls == [] and not limits.cut  # no call sent, the run not marked as cut
    empty = ScriptedChatModel([])  # a call that raises
    found = reread_quantity(QUESTION, "5 years", LAMPS.text, empty, ctx())
    assert found is not None and found.short == "5 years"
    assert found.note.startswith("kept '5 years': the re-read failed")
