"""The model's judgement of coverage (sleuth.agents.coverage): asked only when the
cross-encoder finds the cited sections unrelated, and able to keep an answer the
cross-encoder would decline. Passages and questions are written for these tests."""

from __future__ import annotations

from collections.abc import Sequence

from langchain_core.messages import BaseMessage

from sleuth.agents.answer import Citation, GeneratedAnswer
from sleuth.agents.coverage import JUDGED_SECTIONS, CoverageJudge, excerpt
from sleuth.agents.finish import off_topic
from sleuth.agents.support import SupportChecker
from sleuth.llm.testing import ScriptedChatModel, final
from sleuth.retrieval.text import terms
from sleuth.tools.base import RunContext
from sleuth.types import Chunk


class OverlapScorer:
    """A cross-encoder double: logit = 8 × (share of the query's terms in the passage) − 4."""

    def logits(self, query: str, passages: Sequence[str]) -> list[float]:
        wanted = set(terms(query))
        return [8.0 * len(wanted & set(terms(p))) / max(1, len(wanted)) - 4.0 for p in passages]


class LogOddsModel:
    """A model double that exposes first-token log-odds: the value for each call, in turn,
    and the prompts it was shown."""

    def __init__(self, *values: float) -> None:
        self.values = list(values)
        self.prompts: list[list[BaseMessage]] = []

    def first_token_log_odds(
        self, messages: list[BaseMessage], yes: str, no: str
    ) -> tuple[float, dict[str, int]]:
        assert (yes, no) == ("Yes", "No")
        self.prompts.append(messages)
        return self.values.pop(0), {"input_tokens": 90, "output_tokens": 0}


GROPING = Chunk(
    chunk_id="TC_S74#0",
    doc_id="code",
    source_id="TC_S74",
    title_path=["Test code", "Assault on a woman with intent to outrage her modesty"],
    text=(
        "Whoever assaults or uses criminal force to any woman, intending to outrage her "
        "modesty, shall be punished with imprisonment of not less than one year. "
        "The offence is cognizable."
    ),
    position=0,
)
QUESTION = "A man groped a passenger on a crowded bus. What is the least jail term?"


def answered_run() -> tuple[RunContext, GeneratedAnswer]:
    ctx = RunContext(collection="c")
    ctx.retrieved["TC_S74"] = [GROPING]
    ctx.numbers["TC_S74"] = 1
    answer = GeneratedAnswer(
        answer_text="At least one year of imprisonment [TC_S74].",
        citations=[Citation(source_id="TC_S74", number=1)],
    )
    return ctx, answer


def checker(judge: CoverageJudge | None) -> SupportChecker:
    # a threshold the overlap double cannot reach for the plainly worded question
    return SupportChecker(
        cross_encoder=OverlapScorer(),  # type: ignore[arg-type]
        coverage_threshold=0.5,
        coverage_judge=judge,
    )


def test_without_a_judge_the_cross_encoder_declines_the_plain_question() -> None:
    ctx, answer = answered_run()
    why = off_topic(QUESTION, answer, ctx, checker(None))
    assert why is not None and "TC_S74" in why and "model" not in why


def test_the_model_keeps_an_answer_whose_section_it_finds_about_the_question() -> None:
    ctx, answer = answered_run()
    model = LogOddsModel(1.3)
    assert off_topic(QUESTION, answer, ctx, checker(CoverageJudge(model))) is None  # type: ignore[arg-type]
    shown = model.prompts[0][-1].content
    assert "Assault on a woman" in shown and QUESTION in shown
    # its prompt tokens are counted, under their own stage
    assert ctx.usage_by_stage["coverage"]["input_tokens"] == 90


def test_the_model_below_its_threshold_confirms_the_decline_and_says_so() -> None:
    ctx, answer = answered_run()
    judge = CoverageJudge(LogOddsModel(-0.4), threshold=0.26)  # type: ignore[arg-type]
    why = off_topic(QUESTION, answer, ctx, checker(judge))
    assert why is not None and "-0.40 < 0.26 log-odds" in why


def test_the_judge_is_not_asked_when_the_cross_encoder_finds_the_section_relevant() -> None:
    ctx, answer = answered_run()
    model = LogOddsModel()
    worded = "Whoever assaults a woman to outrage her modesty: what imprisonment at least?"
    assert off_topic(worded, answer, ctx, checker(CoverageJudge(model))) is None  # type: ignore[arg-type]
    assert model.prompts == []


def test_a_model_behind_a_server_answers_in_words() -> None:
    ctx, answer = answered_run()
    yes = ScriptedChatModel([final("Yes")])
    assert off_topic(QUESTION, answer, ctx, checker(CoverageJudge(yes))) is None
    no = ScriptedChatModel([final("No.")])
    assert off_topic(QUESTION, answer, ctx, checker(CoverageJudge(no))) is not None
    # a reply that is neither leaves the cross-encoder's verdict standing
    vague = ScriptedChatModel([final("It depends on the facts.")])
    assert off_topic(QUESTION, answer, ctx, checker(CoverageJudge(vague))) is not None


def test_a_failing_model_leaves_the_cross_encoder_verdict() -> None:
    ctx, answer = answered_run()
    empty = ScriptedChatModel([])  # raises: its script is exhausted
    assert off_topic(QUESTION, answer, ctx, checker(CoverageJudge(empty))) is not None


def test_at_most_two_sections_are_judged_and_the_best_counts() -> None:
    ctx = RunContext(collection="c")
    sids = [f"TC_S{n}" for n in (1, 2, 3)]
    for sid in sids:
        ctx.retrieved[sid] = [GROPING.model_copy(update={"source_id": sid})]
    model = LogOddsModel(-1.0, 0.2, 5.0)
    judge = CoverageJudge(model, threshold=0.26)  # type: ignore[arg-type]
    assert judge.log_odds(QUESTION, sids, ctx, OverlapScorer()) == 0.2  # type: ignore[arg-type]
    assert len(model.prompts) == JUDGED_SECTIONS == 2
    # a section not retrieved in this run is never shown
    assert judge.log_odds(QUESTION, ["TC_S99"], ctx, OverlapScorer()) is None  # type: ignore[arg-type]


def test_the_excerpt_holds_the_title_the_first_sentence_and_the_best_one() -> None:
    text = (
        "This code applies to public roads. "
        + " ".join(f"Rule {n} concerns parking meters." for n in range(5))
        + " A passenger groped on a bus may complain to the conductor."
    )
    section = [GROPING.model_copy(update={"text": text})]
    shown = excerpt("Where does a groped bus passenger complain?", section, OverlapScorer())  # type: ignore[arg-type]
    assert shown.startswith("Section: Assault on a woman")
    assert "applies to public roads" in shown and "complain to the conductor" in shown
    assert "parking meters" not in shown


class TitleModel:
    """A model double whose log-odds of "Yes" depend on the section title it is shown."""

    def __init__(self, by_title: dict[str, float]) -> None:
        self.by_title = by_title
        self.shown: list[str] = []

    def first_token_log_odds(
        self, messages: list[BaseMessage], yes: str, no: str
    ) -> tuple[float, dict[str, int]]:
        text = str(messages[-1].content)
        title = next(t for t in self.by_title if f"Section: {t}\n" in text)
        self.shown.append(title)
        return self.by_title[title], {"input_tokens": 50}


def titled_run(*titles: str) -> RunContext:
    ctx = RunContext(collection="c")
    for n, title in enumerate(titles, 1):
        ctx.retrieved[f"TC_S{n}"] = [
            GROPING.model_copy(update={"source_id": f"TC_S{n}", "title_path": ["Test code", title]})
        ]
    return ctx


def test_a_section_judged_once_in_a_run_is_not_judged_again() -> None:
    ctx = titled_run("Theft", "Assault on a woman")
    model = TitleModel({"Theft": -0.3, "Assault on a woman": 2.5})
    judge = CoverageJudge(model)  # type: ignore[arg-type]
    assert judge.log_odds(QUESTION, ["TC_S1", "TC_S2"], ctx, OverlapScorer()) == 2.5  # type: ignore[arg-type]
    # the finish check asks about the second section again: no model call
    assert judge.log_odds(QUESTION, ["TC_S2"], ctx, OverlapScorer()) == 2.5  # type: ignore[arg-type]
    assert model.shown == ["Theft", "Assault on a woman"]
    # another question about the same section is judged anew
    assert judge.section_log_odds("Who may be arrested?", "TC_S1", ctx, OverlapScorer()) == -0.3  # type: ignore[arg-type]
    assert len(model.shown) == 3


def test_a_model_answering_in_words_gives_the_first_section_it_says_yes_to() -> None:
    ctx = titled_run("Theft", "Assault on a woman", "Forgery")
    model = ScriptedChatModel([final("No"), final("Yes"), final("Yes")])
    best = CoverageJudge(model).best_section(
        QUESTION, ["TC_S1", "TC_S2", "TC_S3"], ctx, OverlapScorer()
    )  # type: ignore[arg-type]
    assert best == ("TC_S2", 1.0)
    assert len(model.calls) == 2  # a worded "Yes" cannot be outdone: the third is not asked
