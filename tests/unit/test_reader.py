"""The reader: answer kinds, whole sentences, long-form replies, yes/no verdicts, coverage,
and the judged-set metrics. Questions and passages are written for these tests."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from sleuth.agents.answer import AnswerDraft, Citation, GeneratedAnswer
from sleuth.agents.coverage import CoverageJudge
from sleuth.agents.drafting import draft_from_long_text
from sleuth.agents.finish import (
    BRIDGED,
    _judge_checked,
    _rule_checked,
    finish_answer,
    off_topic,
    opens_with,
    split_short_answer,
    trimmed_short_answer,
)
from sleuth.agents.negation import clauses, negated, prohibits
from sleuth.agents.reader import answer_kind, asks_yes_or_no, complete_sentences
from sleuth.agents.support import SupportChecker
from sleuth.agents.verdict import rule_verdict
from sleuth.eval.datasets import in_split, split_of
from sleuth.eval.metrics import (
    answer_words,
    ends_mid_sentence,
    key_fact_share,
    lead_key_fact_share,
    repeated_sentences,
    stated_verdict,
)
from sleuth.retrieval.search import join_parts
from sleuth.retrieval.text import digits, sentences, terms
from sleuth.tools.base import RunContext
from sleuth.types import Chunk


class OverlapScorer:
    """A cross-encoder double: logit = 8 × (share of the query's terms in the passage) − 4,
    so a passage holding every query term scores +4 and one holding none −4."""

    def logits(self, query: str, passages: Sequence[str]) -> list[float]:
        wanted = set(terms(query))
        return [8.0 * len(wanted & set(terms(p))) / max(1, len(wanted)) - 4.0 for p in passages]


def chunk(source_id: str, text: str, title: str = "Rule") -> Chunk:
    return Chunk(
        chunk_id=f"{source_id}#0",
        doc_id="code",
        source_id=source_id,
        title_path=["Test code", title],
        text=text,
        position=0,
    )


def ctx_with(*chunks: Chunk) -> RunContext:
    ctx = RunContext(collection="c")
    for n, c in enumerate(chunks, 1):
        ctx.retrieved[c.source_id] = [c]
        ctx.numbers[c.source_id] = n
    return ctx


def ferry_rules(other: Chunk) -> tuple[RunContext, SupportChecker]:
    """A run that retrieved ``other`` and the night-goods rule, and a checker with the
    overlap double as its cross-encoder and a coverage threshold."""
    night = chunk("HC_S9", "A ferry may carry goods at night with two lamps lit.", "Night")
    checker = SupportChecker(cross_encoder=OverlapScorer(), coverage_threshold=0.1)  # type: ignore[arg-type]
    return ctx_with(other, night), checker


@pytest.mark.parametrize(
    ("question", "kind"),
    [
        ("May a landlord keep the deposit after the lease ends?", "yes_no"),
        ("Should a ferry captain log every passenger?", "yes_no"),
        ("The gate was left open. Is the owner liable for the escaped goat?", "yes_no"),
        ("If the goat eats my roses, may I keep the goat?", "yes_no"),
        ("When the inspector visits my shop, must I show him my licence?", "yes_no"),
        ("My landlord kept my deposit. Can I sue him for what he owes me?", "yes_no"),
        ("In a town where the ferry stops at night, may the captain refuse a passenger?", "yes_no"),
        ("Does a bicycle or a scooter need a permit when it is ridden on a footpath?", "yes_no"),
        ("Had the boat sunk, how much would the owner pay?", "fact"),
        ("Is there a fee for a fishing permit, and what's the most it can be?", "fact"),
        ("Can you tell me what the fee for a fishing permit is?", "fact"),
        ("The harbour master, appointed by the council, is paid by which office?", "fact"),
        ("Is the fee paid by the buyer or by the seller?", "fact"),
        ("How long may a parking permit run?", "fact"),
        ("Who signs a ferry licence?", "fact"),
        ("What is the penalty for fishing without a permit?", "fact"),
        ("How do I appeal a parking fine?", "procedure"),
        ("What are the grounds for cancelling a fishing permit?", "list"),
        ("Which kinds of boats need a licence?", "list"),
        ("What does the harbour code say about anchoring near a pier?", "explanation"),
        ("Why must a pilot board a tanker?", "explanation"),
        # a wh-word before a plural noun asks for several items
        ("What papers must a ferry captain carry on board?", "list"),
        ("In which seasons does the harbour close to fishing boats?", "list"),
        ("What sorts of cargo count as dangerous goods?", "list"),
        # the manner, or when and by whom, something is or must be done: a rule
        ("How are harbour fees collected from foreign ships?", "explanation"),
        ("When does a mooring permit lapse?", "explanation"),
        ("Who can ask the harbour master to inspect a boat?", "explanation"),
        # asked in the past, or of one thing, the same words ask for a fact
        ("When was the harbour code passed?", "fact"),
        ("Who did the council appoint as harbour master?", "fact"),
        ("Which office pays the harbour master?", "fact"),
        ("What kind of boat sank in the harbour?", "fact"),
    ],
)
def test_answer_kind_reads_the_question_form(question: str, kind: str) -> None:
    assert answer_kind(question) == kind


@pytest.mark.parametrize(
    ("text", "said"),
    [
        # a cross-reference the source broke over lines is not a new clause
        (
            "A fine is set under sub-section\n(1)\n, and the harbour master may waive it.",
            ["A fine is set under sub-section (1) , and the harbour master may waive it."],
        ),
        (
            "The rules in clause\n(b)\n. apply at night.",
            ["The rules in clause (b) . apply at night."],
        ),
        # a clause mark that opens a line and its text is one
        (
            "The dues are:—\n(a) berthing;\n(b) pilotage.\n(2) Dues are paid monthly.",
            ["The dues are:—", "(a) berthing;", "(b) pilotage.", "(2) Dues are paid monthly."],
        ),
        # ... and one that names clauses across lines continues its sentence (a proviso
        # that refers to clauses (i) and (ii) stays whole, and so quotable)
        (
            "(i) no ferry sails at night;\n(ii) no ferry sails in a storm:\nProvided that "
            "a ferry referred to in clause\n(i)\nor clause\n(ii)\nmay sail if it carries "
            "the sick.\n(2) Fees under sub-sections (1) and\n(3) of section 4 are paid; and\n"
            "(b) dues.",
            [
                "(i) no ferry sails at night;",
                "(ii) no ferry sails in a storm:",
                "Provided that a ferry referred to in clause (i) or clause (ii) may sail if it "
                "carries the sick.",
                "(2) Fees under sub-sections (1) and (3) of section 4 are paid; and",
                "(b) dues.",
            ],
        ),
    ],
)
def test_sentences_split_at_clauses_not_at_broken_cross_references(
    text: str, said: list[str]
) -> None:
    assert sentences(text) == said


def test_a_looped_sentence_is_said_once() -> None:
    from sleuth.agents.reader import without_repeats

    # the local model's greedy loop on an illustration's conclusion (a dev run's answer)
    looped = "3 years. A has committed mischief. … " * 1 + "A has committed mischief. … " * 7
    looped += "(4) Whoever commits mischief shall be punished."
    assert without_repeats(looped) == (
        "3 years. A has committed mischief. … (4) Whoever commits mischief shall be punished."
    )
    # markers, case and spacing aside it is the same sentence; lines stay lines
    text = "Yes.\n- A ferry needs lamps [HC_S9].\n- a ferry  needs lamps.\n- 5 years.\n- 5 years."
    assert without_repeats(text) == "Yes.\n- A ferry needs lamps [HC_S9].\n- 5 years.\n- 5 years."
    # a stop before a digit or a lower-case word ends no sentence: no half is dropped
    fines = "The fine is Rs. 1.5 lakh for a ferry.\nThe fine is Rs. 2 lakh for a barge."
    assert without_repeats(fines) == fines


def test_complete_sentences_never_ends_mid_sentence() -> None:
    cut = "Yes, a ferry may sail at night [1]. It must then carry two lamps when the"
    assert complete_sentences(cut, cut=True) == "Yes, a ferry may sail at night [1]."
    assert complete_sentences("Only a fragment that stops in the", cut=True) == ""
    assert complete_sentences("The fee is ten coins [2]", cut=False) == "The fee is ten coins [2]."
    whole = "The permit lasts a year [1]."
    assert complete_sentences(whole, cut=True) == whole
    listed = "Grounds:\n- unpaid fees [1].\n- fishing out of"
    assert complete_sentences(listed, cut=True) == "Grounds:\n- unpaid fees [1]."
    assert not ends_mid_sentence(complete_sentences(cut, cut=True))


def test_an_answer_opens_as_a_sentence() -> None:
    from sleuth.agents.reader import sentence_opening

    # the statute's own lower-case words given as the short answer
    assert sentence_opening("imprisonment for a term of two years [1].") == (
        "Imprisonment for a term of two years [1]."
    )
    # the answer sentence skipped: the first supporting point opens the answer
    assert sentence_opening("- The ferry must carry two lamps [2].\n- It sails by day [1].") == (
        "The ferry must carry two lamps [2].\n- It sails by day [1]."
    )
    assert sentence_opening("-5 degrees is the limit [1].") == "-5 degrees is the limit [1]."
    assert sentence_opening("Yes. the ferry may sail [1].") == "Yes. The ferry may sail [1]."
    assert sentence_opening("No, the ferry may not sail [1].") == "No, the ferry may not sail [1]."
    assert sentence_opening("") == ""


def test_a_model_answer_in_lower_case_words_is_shipped_as_a_sentence() -> None:
    ctx = ctx_with(
        chunk("HC_S9", "A ferry may carry goods at night with two lamps lit.", "Ferries")
    )
    draft = AnswerDraft(
        answer_text="a ferry may carry goods at night with two lamps lit [HC_S9].",
        citations=["HC_S9"],
    )
    done = finish_answer("How may a ferry carry goods at night?", draft, ctx, from_model=True)
    assert done.answer.answer_text.startswith("A ferry may carry goods at night")


def test_long_reply_reads_answer_then_points_and_declines() -> None:
    draft = draft_from_long_text(
        "Answer: No, a ferry may not sail in a storm [1].\n- The captain must wait for calm "
        "water [2].\n- Unless the harbour master orders it, the",
        cut=True,
    )
    assert draft is not None
    assert draft.answer_text.startswith("No, a ferry may not sail in a storm [1].")
    assert draft.answer_text.endswith("[2].")
    assert draft.citations == ["1", "2"]
    echoed = draft_from_long_text(
        "Yes, [HC_S4] HC_S4 · Harbour code > Section 4. Storms [HC_S4].\n"
        "- No ferry shall sail in a storm [HC_S4]."
    )
    assert echoed is not None and "·" not in echoed.answer_text
    assert echoed.answer_text.endswith("No ferry shall sail in a storm [HC_S4].")
    # a label copied from the prompt's instructions is not part of the answer; one that
    # names something the prompt does not is
    copied = draft_from_long_text(
        "One complete sentence that answers the question directly: under the harbour code, "
        "a ferry waits for calm water [1].\n- Complete sentence: the master decides [2]."
    )
    assert copied is not None
    assert copied.answer_text.startswith("Under the harbour code, a ferry waits")
    assert "\n- The master decides [2]." in copied.answer_text
    kept = draft_from_long_text("Harbour code rule: a ferry waits for calm water [1].")
    assert kept is not None and kept.answer_text.startswith("Harbour code rule: a ferry")
    declined = draft_from_long_text("Insufficient context: the evidence is about taxes.")
    assert declined is not None and declined.is_insufficient_context


def test_long_reply_written_facts_first_reads_answer_first() -> None:
    facts_first = (
        "Facts:\n- A ferry shall wait for calm water [1].\n- The harbour master may order "
        "it out in a storm [2].\nAnswer: A ferry waits for calm water unless the harbour "
        "master orders it out [1]."
    )
    draft = draft_from_long_text(facts_first)
    assert draft is not None and not draft.is_insufficient_context
    assert draft.answer_text.split("\n") == [
        "A ferry waits for calm water unless the harbour master orders it out [1].",
        "- A ferry shall wait for calm water [1].",
        "- The harbour master may order it out in a storm [2].",
    ]
    assert draft.citations == ["1", "2"]
    # the budget stopped the answer sentence: the facts are the answer, the first leading
    cut = draft_from_long_text(facts_first[: facts_first.index("unless")], cut=True)
    assert cut is not None
    assert cut.answer_text.split("\n") == [
        "A ferry shall wait for calm water [1].",
        "- The harbour master may order it out in a storm [2].",
    ]
    # a fact copied with the statute's line breaks stays one point
    wrapped = draft_from_long_text(
        "Facts:\n(1) Whoever, being a member of a crew, either singly or\njointly, sinks a "
        "ferry commits wrecking [1].\n- (2) Wrecking is punished with a fine [1].\n"
        "Answer: A crew member who sinks a ferry commits wrecking [1]."
    )
    assert wrapped is not None
    assert wrapped.answer_text.split("\n")[1:] == [
        "- (1) Whoever, being a member of a crew, either singly or jointly, sinks a ferry "
        "commits wrecking [1].",
        "- (2) Wrecking is punished with a fine [1].",
    ]
    # "Answer:" alone on its line, the sentence below it
    below = draft_from_long_text("Facts: - A ferry waits [1].\nAnswer:\nIt waits for calm [1].")
    assert below is not None and below.answer_text.startswith("It waits for calm [1].\n- A")
    declined = draft_from_long_text(
        "Facts: the evidence is about taxes.\nAnswer: Insufficient context"
    )
    assert declined is not None and declined.is_insufficient_context
    assert declined.answer_text == "Insufficient context: the evidence is about taxes."


def test_negation_parity() -> None:
    assert negated("No ferry shall sail in a storm.")
    assert negated("A ferry cannot sail in a storm.")
    assert not negated("A ferry may sail at night.")
    assert not negated("Nothing in this rule does not apply.")  # two cues cancel
    # a bound is not a negation: "not less than" / "not below the rank of" state a limit
    assert not negated("A ferry shall carry not less than two lifeboats.")
    # a minimum term as statutes write it ("shall not be less than twenty years")
    assert not negated("The term shall not be less than two years but may extend to five.")
    assert negated("No ferry shall sail without a master not below the rank of mate.")


def test_clauses_split_provisos_and_keep_short_openers() -> None:
    assert clauses("Save in storms, no ferry shall sail at night, though a tug may.") == [
        "Save in storms no ferry shall sail at night",
        "though a tug may.",
    ]
    assert clauses("A ferry may sail.") == ["A ferry may sail."]


def test_rule_verdict_reads_the_clause_that_answers() -> None:
    sections = {
        "HC_S7": [
            chunk(
                "HC_S7",
                "When a ferry is inspected, its master shall be entitled to see the "
                "inspector's warrant, though not to keep a copy of it.",
            )
        ]
    }
    rule = rule_verdict(
        "Is the master entitled to see the inspector's warrant?",
        sections,
        ["HC_S7"],
        OverlapScorer(),  # type: ignore[arg-type]
        0.5,
    )
    assert rule is not None and rule.verdict == "yes"
    assert rule.clause.startswith("its master shall be entitled")


def test_rule_verdict_follows_the_most_relevant_sentence() -> None:
    sections = {
        "HC_S4": [chunk("HC_S4", "No ferry shall carry passengers during a storm warning.")],
        "HC_S9": [chunk("HC_S9", "A ferry may carry goods at night with two lamps lit.")],
    }
    scorer = OverlapScorer()
    rule = rule_verdict(
        "Can a ferry carry passengers during a storm warning?",
        sections,
        ["HC_S9", "HC_S4"],
        scorer,  # type: ignore[arg-type]
        0.5,
    )
    assert rule is not None and rule.verdict == "no" and rule.source_id == "HC_S4"
    yes = rule_verdict(
        "May a ferry carry goods at night?",
        sections,
        ["HC_S4", "HC_S9"],
        scorer,
        0.5,  # type: ignore[arg-type]
    )
    assert yes is not None and yes.verdict == "yes"
    assert (
        rule_verdict("Is rice taxed?", sections, ["HC_S4"], scorer, 0.5)  # type: ignore[arg-type]
        is None
    )


def test_a_yes_that_contradicts_its_rule_is_overturned() -> None:
    rule = chunk("HC_S4", "No ferry shall carry passengers during a storm warning.")
    ctx = ctx_with(rule)
    checker = SupportChecker(cross_encoder=OverlapScorer())  # type: ignore[arg-type]
    answer = GeneratedAnswer(
        answer_text="Yes. Ferries carry passengers during a storm warning [HC_S4].",
        citations=[Citation(source_id="HC_S4", number=1)],
    )
    fixed, short, note, _ = _rule_checked(
        "Can a ferry carry passengers during a storm warning?", answer, "Yes", ctx, checker
    )
    assert short == "No"
    assert fixed.answer_text.startswith("No. No ferry shall carry passengers")
    assert "[HC_S4]" in fixed.answer_text
    assert note is not None and note.startswith("yes overturned to no")


class VerdictModel:
    """A model double that scores its first token: a fixed log-odds of "Yes" over "No"."""

    def __init__(self, log_odds: float) -> None:
        self.log_odds = log_odds
        self.prompts: list[str] = []

    def first_token_log_odds(self, messages: list, yes: str, no: str) -> tuple[float, dict]:
        assert (yes, no) == ("Yes", "No")
        self.prompts.append(str(messages[-1].content))
        return self.log_odds, {"input_tokens": 120, "output_tokens": 0}


# the parity reader errs on this kind of rule: its most relevant clause negates ("no
# immediate prospect") while the rule answers Yes (the court proceeds)
ABSCONDED = chunk(
    "HC_S31",
    "When a captain has absconded to evade trial and there is no immediate prospect of "
    "arresting him, the Court shall proceed with the trial as if he was present.",
    title="Trial of an absconding captain",
)
ABSCONDED_Q = "Can the trial of a captain who has absconded go ahead?"


def judged(log_odds: float, text: str) -> tuple[GeneratedAnswer, str | None, str | None]:
    checker = SupportChecker(
        cross_encoder=OverlapScorer(),  # type: ignore[arg-type]
        coverage_judge=CoverageJudge(VerdictModel(log_odds)),  # type: ignore[arg-type]
    )
    answer = GeneratedAnswer(answer_text=text, citations=[Citation(source_id="HC_S31", number=1)])
    return _judge_checked(ABSCONDED_Q, answer, None, ctx_with(ABSCONDED), checker)


def test_a_verdict_the_model_reads_confidently_the_other_way_is_overturned() -> None:
    fixed, short, note = judged(2.3, "No. The captain cannot be tried in his absence [HC_S31].")
    assert short == "Yes"
    assert fixed.answer_text.startswith("Yes. When a captain has absconded")
    assert fixed.answer_text.endswith("[HC_S31].")
    assert "cannot be tried" not in fixed.answer_text
    assert note is not None and note.startswith("no overturned to yes")
    fixed, short, note = judged(-0.9, "Yes. The trial goes ahead [HC_S31].")
    assert short == "No" and fixed.answer_text.startswith("No. When a captain")


def test_a_verdict_the_model_reads_weakly_the_other_way_stands() -> None:
    # the small model leans to Yes: a weak Yes is no evidence against a No
    fixed, short, note = judged(0.8, "No. The captain cannot be tried in his absence [HC_S31].")
    assert short is None and fixed.answer_text.startswith("No. The captain")
    assert note is not None and note.startswith("kept no")
    fixed, _, note = judged(0.0, "Yes. The trial goes ahead [HC_S31].")
    assert fixed.answer_text == "Yes. The trial goes ahead [HC_S31]."


def test_the_verdict_judge_reads_the_cited_section_and_needs_a_scoring_model() -> None:
    model = VerdictModel(2.0)
    checker = SupportChecker(
        cross_encoder=OverlapScorer(),  # type: ignore[arg-type]
        coverage_judge=CoverageJudge(model),  # type: ignore[arg-type]
    )
    answer = GeneratedAnswer(
        answer_text="No. It cannot [HC_S31].", citations=[Citation(source_id="HC_S31", number=1)]
    )
    ctx = ctx_with(ABSCONDED)
    _judge_checked(ABSCONDED_Q, answer, None, ctx, checker)
    assert len(model.prompts) == 1
    assert (
        "Section: Trial of an absconding captain\nWhen a captain has absconded"
        in (model.prompts[0])
    )
    assert ABSCONDED_Q in model.prompts[0]
    assert ctx.usage_by_stage["verdict"]["input_tokens"] == 120
    # a model behind a server (no first-token scores): no judgement, the answer stands
    worded = SupportChecker(
        cross_encoder=OverlapScorer(),  # type: ignore[arg-type]
        coverage_judge=CoverageJudge(object()),  # type: ignore[arg-type]
    )
    same, short, note = _judge_checked(ABSCONDED_Q, answer, None, ctx_with(ABSCONDED), worded)
    assert same is answer and short is None and note is None


# written for this test: a prohibition, its negation the subject of the whole rule
LANDING = chunk(
    "HC_S40",
    "(1) No statement made to a harbour guard shall be proved against a ferry captain.",
    title="Statements to harbour guards",
)
LANDING_Q = "Can a statement made to a harbour guard be proved against a ferry captain?"


@pytest.mark.parametrize(
    ("rule", "question", "said", "shipped", "asked"),
    [
        # the model's reading (it leans to Yes) never overturns a prohibition's No
        (LANDING, LANDING_Q, "Yes", "No", False),
        # a rule whose clause only contains a negation is still read by the model
        (ABSCONDED, ABSCONDED_Q, "No", "Yes", True),
    ],
)
def test_the_models_reading_does_not_overturn_a_prohibition(
    rule: Chunk, question: str, said: str, shipped: str, asked: bool
) -> None:
    model = VerdictModel(2.3)  # a confident Yes: past the band that overturns a No
    checker = SupportChecker(
        cross_encoder=OverlapScorer(),  # type: ignore[arg-type]
        coverage_judge=CoverageJudge(model),  # type: ignore[arg-type]
    )
    draft = AnswerDraft(
        answer_text=f"{said}. {rule.text} [{rule.source_id}]", key_points=[], citations=[]
    )
    done = finish_answer(question, draft, ctx_with(rule), checker=checker, from_model=True)
    assert done.answer.short_answer == shipped
    assert done.answer.answer_text.startswith(f"{shipped}. ")
    assert bool(model.prompts) is asked
    assert prohibits(rule.text) is (rule is LANDING)


def test_a_comparison_is_not_judged_on_one_section() -> None:
    model = VerdictModel(-2.0)
    checker = SupportChecker(
        cross_encoder=OverlapScorer(),  # type: ignore[arg-type]
        coverage_judge=CoverageJudge(model),  # type: ignore[arg-type]
    )
    ctx = ctx_with(
        chunk("HC_S40", "The Gull is a ferry built in Harbour Town.", title="The Gull"),
        chunk("HC_S41", "The Tern is a ferry built in Harbour Town.", title="The Tern"),
    )
    answer = GeneratedAnswer(
        answer_text="Yes. Both were built in Harbour Town [HC_S40].",
        citations=[Citation(source_id="HC_S40", number=1)],
    )
    same, _, note = _judge_checked(
        "Were The Gull and The Tern both built in Harbour Town?", answer, None, ctx, checker
    )
    assert same is answer and note is None and model.prompts == []


def test_a_confirmed_verdict_that_only_restates_the_question_gets_its_rule() -> None:
    rule = chunk("HC_S9", "A ferry may carry goods at night with two lamps lit.")
    ctx = ctx_with(rule)
    checker = SupportChecker(cross_encoder=OverlapScorer())  # type: ignore[arg-type]
    answer = GeneratedAnswer(answer_text="Yes. My ferry may carry goods at night.", citations=[])
    fixed, short, note, _ = _rule_checked(
        "May a ferry carry goods at night?", answer, "Yes", ctx, checker
    )
    assert short == "Yes"
    # the model's own answer first, the rule that confirms it after
    assert fixed.answer_text == (
        "Yes. My ferry may carry goods at night.\n"
        "A ferry may carry goods at night with two lamps lit [HC_S9]."
    )
    assert [c.source_id for c in fixed.citations] == ["HC_S9"]
    assert note is not None and note.startswith("confirmed yes, its rule added")


def test_a_verdict_given_in_one_sentence_keeps_a_sentence_before_its_rule() -> None:
    # "Yes, my ferry may …": what followed the verdict word is a sentence of its own, not a
    # lower-case fragment, and the rule follows it
    rule = chunk("HC_S9", "A ferry may carry goods at night with two lamps lit.")
    ctx = ctx_with(rule)
    checker = SupportChecker(cross_encoder=OverlapScorer())  # type: ignore[arg-type]
    answer = GeneratedAnswer(answer_text="Yes, my ferry may carry goods at night.", citations=[])
    fixed, *_ = _rule_checked("May a ferry carry goods at night?", answer, "Yes", ctx, checker)
    assert fixed.answer_text.startswith("Yes. My ferry may carry goods at night.\nA ferry")


def test_an_answer_without_a_verdict_gets_the_rules() -> None:
    rule = chunk("HC_S9", "A ferry may carry goods at night with two lamps lit.")
    ctx = ctx_with(rule)
    checker = SupportChecker(cross_encoder=OverlapScorer())  # type: ignore[arg-type]
    answer = GeneratedAnswer(
        answer_text="A ferry may carry goods at night with two lamps lit [HC_S9].",
        citations=[Citation(source_id="HC_S9", number=1)],
    )
    fixed, short, *_ = _rule_checked(
        "May a ferry carry goods at night?", answer, None, ctx, checker
    )
    assert short == "Yes" and fixed.answer_text.startswith("Yes. A ferry may carry goods")
    assert fixed.answer_text.count("two lamps") == 1


def test_an_answer_resting_on_unrelated_sections_is_declined() -> None:
    ctx, checker = ferry_rules(
        chunk("HC_S4", "No ferry shall carry passengers during a storm warning.", "Storms")
    )
    quoted = GeneratedAnswer(
        answer_text="A ferry may carry goods at night with two lamps lit [HC_S9].",
        citations=[Citation(source_id="HC_S9", number=2)],
    )
    assert off_topic("Can a ferry carry goods at night?", quoted, ctx, checker) is None
    why = off_topic("How is income from shares taxed?", quoted, ctx, checker)
    assert why is not None and why.startswith("Insufficient context") and "HC_S9" in why
    off = SupportChecker(cross_encoder=OverlapScorer(), coverage_threshold=0.0)  # type: ignore[arg-type]
    assert off_topic("How is income from shares taxed?", quoted, ctx, off) is None
    assert off_topic("How is income from shares taxed?", quoted, ctx, SupportChecker()) is None
    # an MCP result is not a retrieved section: nothing to score, nothing declined
    elsewhere = quoted.model_copy(update={"citations": [Citation(source_id="web:1")]})
    assert off_topic("How is income from shares taxed?", elsewhere, ctx, checker) is None


def test_a_faithful_quote_of_an_unrelated_section_is_not_shipped() -> None:
    ctx = ctx_with(chunk("HC_S9", "A ferry may carry goods at night with two lamps lit.", "Night"))
    checker = SupportChecker(cross_encoder=OverlapScorer(), coverage_threshold=0.1)  # type: ignore[arg-type]
    draft = AnswerDraft(
        answer_text="A ferry may carry goods at night with two lamps lit [HC_S9].",
        citations=["HC_S9"],
    )
    done = finish_answer(
        "How is income from shares taxed?", draft, ctx, checker=checker, from_model=True
    )
    assert done.answer.is_insufficient_context and not done.answer.citations
    assert done.status.value == "insufficient_context" and done.source == "replaced"
    kept = finish_answer(
        "May a ferry carry goods at night?", draft, ctx, checker=checker, from_model=True
    )
    assert not kept.answer.is_insufficient_context and kept.answer.citations


def test_cross_encoder_support_judges_a_paraphrase() -> None:
    section = [chunk("HC_S4", "No ferry shall carry passengers during a storm warning.")]
    plain = SupportChecker()
    with_model = SupportChecker(cross_encoder=OverlapScorer())  # type: ignore[arg-type]
    claim = "During a storm warning passengers stay off ferries and every harbour closes."
    assert not plain.check(claim, "HC_S4", section).supported
    assert with_model.check(
        "Passengers are barred from a ferry during a storm warning.", "HC_S4", section
    ).supported
    assert not with_model.check("Shares are taxed at ten percent.", "HC_S4", section).supported


def test_numbers_match_in_words_or_digits() -> None:
    assert digits("within twenty-four hours") == "within 24 hours"
    assert "24" in terms(digits("twenty-four hours"))


def test_judged_metrics() -> None:
    facts = [["ten coins", "10 coins"], ["harbour master"]]
    assert key_fact_share("The fee is 10 coins [1].", facts) == 0.5
    assert key_fact_share("The harbour master sets a fee of ten coins.", facts) == 1.0
    assert key_fact_share("anything", []) is None
    # a number states its fact however it is written, a lone "one" too
    assert key_fact_share("It costs 1 coin and a licence.", [["one coin"]]) == 1.0
    assert key_fact_share("It costs one coin.", [["1 coin"]]) == 1.0
    assert key_fact_share("It costs eleven coins.", [["one coin"]]) == 0.0
    # the lead: a wrong short answer is not saved by the quote after it
    lead = "5 coins. The fee shall not be less than one coin but may reach five coins [HC_S4]."
    assert key_fact_share(lead, [["one coin"]]) == 1.0
    assert lead_key_fact_share(lead, [["one coin"]]) == 0.0
    assert lead_key_fact_share("One coin [HC_S4]. It is paid yearly.", [["one coin"]]) == 1.0
    assert stated_verdict("No. No ferry shall sail [HC_S4].") == "no"
    assert stated_verdict("[1] Yes, it may.") == "yes"
    assert stated_verdict("Nobody may sail.") is None
    # a quoted rule that opens with "No" states no verdict
    assert stated_verdict("No ferry shall sail at night [HC_S4].") is None
    assert ends_mid_sentence("It must then carry two lamps when the")
    assert not ends_mid_sentence("It must carry two lamps [HC_S9].")
    assert not ends_mid_sentence('He said "stop."')
    assert answer_words("No. A ferry may not sail [HC_S4].") == 6


def test_repeated_sentences_counts_restatements_once() -> None:
    rule = "A ferry shall carry two lamps when it sails at night [HC_S9]."
    paraphrase = "The evidence states that a ferry shall carry two lamps at night [HC_S9]."
    other = "The harbour master may fine a master who sails without them [HC_S10]."
    assert repeated_sentences(f"{rule} {other}") == 0
    assert repeated_sentences(f"{rule} {paraphrase} {other}") == 1
    # the same point three times: two restatements
    assert repeated_sentences(f"{rule} {paraphrase} {rule}") == 2
    assert repeated_sentences(rule) == 0
    assert repeated_sentences("Yes. Yes.") == 0  # too few terms to judge


def test_split_is_a_stable_half_by_id() -> None:
    ids = [f"q{i}" for i in range(400)]
    test = [i for i in ids if split_of(i) == "test"]
    assert 150 < len(test) < 250
    assert split_of("q7") == split_of("q7")
    from sleuth.eval.datasets import EvalQuestion

    questions = [EvalQuestion(id=i, question="?") for i in ids[:20]]
    dev, held = in_split(questions, "dev"), in_split(questions, "test")
    assert len(dev) + len(held) == 20 and not {q.id for q in dev} & {q.id for q in held}
    assert in_split(questions, "all") == questions
    with pytest.raises(Exception, match="unknown split"):
        in_split(questions, "train")


def test_a_preamble_of_statements_is_context_not_a_part() -> None:
    from sleuth.agents.question import asked, is_multi_part, split_question

    story = (
        "I found a lost kite in the park and kept it without looking for its owner. "
        "Have I broken a harbour rule?"
    )
    assert asked(story) == "Have I broken a harbour rule?"
    assert not is_multi_part(story)
    assert split_question(story) == ([], "")
    two = "Who licenses ferries? And who inspects them?"
    assert asked(two) == two and is_multi_part(two)


def test_a_short_form_reply_stopped_by_its_budget_keeps_whole_sentences() -> None:
    from langchain_core.messages import AIMessage

    from sleuth.agents.generation import read_answer_reply

    def fallback() -> AnswerDraft:
        return AnswerDraft(answer_text="extractive", is_insufficient_context=True)

    cut = AIMessage(
        content="Answer: 40 days\nExplanation: A permit runs for forty days [1]. It may be "
        "renewed once, for a further term of",
        response_metadata={"finish_reason": "length"},
    )
    draft = read_answer_reply(cut, fallback).value
    assert draft.answer_text == "A permit runs for forty days [1]."
    assert draft.short_answer == "40 days"
    fragment = AIMessage(
        content="Answer: 40 days\nExplanation: A permit runs for forty",
        response_metadata={"finish_reason": "length"},
    )
    assert read_answer_reply(fragment, fallback).value.answer_text == "40 days."


def test_evidence_headers_copied_into_a_short_form_reply_are_removed() -> None:
    from sleuth.agents.drafting import draft_from_text

    draft = draft_from_text(
        "A permit runs for forty days [1] HC_S9 · Test code > Section 9. Permits\n"
        "It may be renewed once [2]."
    )
    assert draft is not None and "·" not in draft.answer_text
    assert "forty days" in draft.answer_text and "renewed once [2]" in draft.answer_text


def test_a_model_answer_never_ends_on_a_dangling_mark() -> None:
    ctx = ctx_with(chunk("HC_S9", "A ferry may carry goods at night with two lamps lit.", "Night"))
    draft = AnswerDraft(
        answer_text="A ferry may carry goods at night with two lamps lit [HC_S9],",
        citations=["HC_S9"],
    )
    done = finish_answer("May a ferry carry goods at night?", draft, ctx, from_model=True)
    assert not ends_mid_sentence(done.answer.answer_text)
    assert done.answer.answer_text.rstrip().endswith(("]", "."))


def test_a_verdict_given_with_its_reason_is_split_into_verdict_and_claim() -> None:
    from sleuth.agents.finish import split_short_answer

    draft = AnswerDraft(
        answer_text="A ferry may carry goods at night with two lamps lit [HC_S9].",
        short_answer="Yes, if two lamps are lit",
    )
    short, rest = split_short_answer(draft)
    assert short == "Yes"
    assert rest.answer_text.startswith("If two lamps are lit. A ferry may carry goods")


def long_ferry_section(last: int, rule: str) -> str:
    """A section of ``last`` numbered sub-sections: a licence rule, registers of no interest,
    then ``rule`` as the last one."""
    filler = " ".join(
        f"({n}) A harbour master keeps register number {n} open." for n in range(2, last)
    )
    return f"(1) No ferry shall sail without a licence. {filler} ({last}) {rule}"


def test_a_long_section_is_focused_on_the_sentences_that_answer() -> None:
    from sleuth.agents.generation import EvidenceSection, focused_evidence

    text = long_ferry_section(40, "A ferry may carry goods at night with two lamps lit.")
    long = EvidenceSection("HC_S9", "Test code > Ferries", text, 1)
    short = EvidenceSection("HC_S4", "Test code > Storms", "No ferry sails in a storm.", 2)
    focused = focused_evidence(
        "May a ferry carry goods at night?", [long, short], OverlapScorer(), chars=300
    )
    body = focused[0].text
    assert body.startswith("(1) No ferry shall sail without a licence.")
    assert "(40) A ferry may carry goods at night with two lamps lit." in body
    assert "…" in body and len(body) <= 300
    assert focused[1] == short  # a section that fits is read whole
    assert focused_evidence("May a ferry carry goods?", [long], None)[0] == long


def test_an_answer_citing_an_unrelated_section_is_re_cited_to_the_one_that_answers() -> None:
    ctx, checker = ferry_rules(
        chunk("HC_S2", "Harbour dues are paid every month by the owner.", "Dues")
    )
    draft = AnswerDraft(
        answer_text="Harbour dues are paid every month by the owner [HC_S2].",
        citations=["HC_S2"],
    )
    done = finish_answer(
        "Can a ferry carry goods at night?", draft, ctx, checker=checker, from_model=True
    )
    assert not done.answer.is_insufficient_context
    assert [c.source_id for c in done.answer.citations] == ["HC_S9"]
    assert "two lamps lit [HC_S9]" in done.answer.answer_text
    assert done.replaced is not None and "rewritten" in done.replaced


def test_a_multi_hop_short_answer_keeps_its_section_behind_the_one_that_names_it() -> None:
    # the team's section holds the answer but says nothing about the player; the player's
    # section addresses the question and names the team: both are cited, the answer kept
    player = chunk(
        "Dan_Hale", "Dan Hale played for the Riverton Owls from 1945 to 1949.", "Dan Hale"
    )
    team = chunk(
        "Riverton_Owls", "The Riverton Owls are a football club based in Ohio.", "Riverton Owls"
    )
    checker = SupportChecker(cross_encoder=OverlapScorer(), coverage_threshold=0.3)  # type: ignore[arg-type]
    question = "From 1945 to 1949 Dan Hale played for a team based in what state?"
    draft = AnswerDraft(
        answer_text="The Riverton Owls are a football club based in Ohio [Riverton_Owls].",
        short_answer="Ohio",
        citations=["Riverton_Owls"],
    )
    done = finish_answer(question, draft, ctx_with(player, team), checker=checker, from_model=True)
    assert done.answer.short_answer == "Ohio"
    assert [c.source_id for c in done.answer.citations][:2] == ["Dan_Hale", "Riverton_Owls"]
    assert done.replaced == BRIDGED
    # a section the relevant one never names is no hop: the short answer is not kept
    stray = chunk("Lake_Ohio", "Lake Ohio is a club based in Ohio.", "Lake Ohio")
    draft = AnswerDraft(
        answer_text="Lake Ohio is a club based in Ohio [Lake_Ohio].",
        short_answer="Ohio",
        citations=["Lake_Ohio"],
    )
    done = finish_answer(question, draft, ctx_with(player, stray), checker=checker, from_model=True)
    assert done.answer.short_answer is None
    assert [c.source_id for c in done.answer.citations] == ["Dan_Hale"]


@pytest.mark.parametrize(
    ("question", "short", "trimmed"),
    [
        (
            "Which tree is taller, the Velmora or the Carrow?",
            "The Velmora is taller",
            "Velmora",
        ),
        (
            "Which came first the forming of The Larks or the birth of Edwin Marsh?",
            "Edwin Marsh (painter) came first",
            "Edwin Marsh",
        ),
        ("Who was born first, Ann Smith or Bob Jones?", "Bob Jones", "Bob Jones"),
        # names of both options, or of neither: kept as written
        (
            "Who was born first, Ann Smith or Bob Jones?",
            "Ann Smith, before Bob Jones",
            "Ann Smith, before Bob Jones",
        ),
        ("Is theft or robbery punished more severely?", "Robbery", "Robbery"),
        (
            "When was the singer of Diamond Cut born?",
            "8 June 1951, Bonnie Tyler, Diamond Cut",
            "8 June 1951",
        ),
        ("How many days may the police hold him?", "seven, then a magistrate", "seven"),
        ("What was the town's population in 2011?", "6,960", "6,960"),
        ("What was the town's population in 2011?", "6,960, in Young", "6,960"),
        # a question that asks two things keeps both answers
        (
            "How long can he be jailed the first time, and how long after that?",
            "3 years, 5 years",
            "3 years, 5 years",
        ),
        ("Who founded the band, and when?", "Ann Smith, 1990", "Ann Smith, 1990"),
        # ... but not the names around them, wherever the question reads two parts
        (
            "When was the painter born who is known for seascapes and whose first show was "
            '"Low Tide"?',
            "3 May 1920, Ada Kerr, Low Tide",
            "3 May 1920",
        ),
        (
            "How long can he be jailed the first time, and how long after that?",
            "3 years for theft, the thief, 5 years",
            "3 years for theft, 5 years",
        ),
    ],
)
def test_a_short_answer_is_cut_to_what_the_question_asks(
    question: str, short: str, trimmed: str
) -> None:
    assert trimmed_short_answer(question, short) == trimmed


def test_a_two_fact_short_answer_is_explained_from_two_sections_in_words_or_digits() -> None:
    from sleuth.agents.generation import EvidenceSection, explain_from_evidence

    evidence = [
        EvidenceSection(
            "HC_S3", "Code > Reports", "The master shall report within twenty-four hours.", 1
        ),
        EvidenceSection(
            "HC_S8", "Code > Appeals", "An appeal lies within seven days of the order.", 2
        ),
        EvidenceSection("HC_S9", "Code > Lamps", "A ferry may carry goods at night.", 3),
    ]
    question = "How soon must the master report, and how long is there to appeal?"
    said = explain_from_evidence(question, "24 hours, 7 days", ["1"], evidence)
    assert "twenty-four hours [1]" in said and "seven days of the order [2]" in said
    assert "[3]" not in said
    # a fact no section holds is never dressed up with a cited sentence
    assert explain_from_evidence(question, "24 hours, 30 days", ["1"], evidence) == ""


# ---------------------------------------------------------------- quotes


def test_an_answer_ends_with_the_sentence_that_answers_quoted_and_cited() -> None:
    night = chunk(
        "HC_S9",
        "(1) No ferry shall sail without a licence. (2) A ferry may carry goods at night "
        "with two lamps lit. (3) Fees are paid yearly.",
        "Ferries",
    )
    dues = chunk("HC_S2", "Harbour dues are paid every month by the owner.", "Dues")
    ctx = ctx_with(dues, night)
    checker = SupportChecker(cross_encoder=OverlapScorer(), coverage_threshold=0.5)  # type: ignore[arg-type]
    draft = AnswerDraft(answer_text="With two lamps [HC_S9].", citations=["HC_S9"])
    done = finish_answer(
        "How may a ferry carry goods at night?", draft, ctx, checker=checker, from_model=True
    )
    text = done.answer.answer_text
    assert text == (
        "With two lamps [HC_S9].\n(2) A ferry may carry goods at night with two lamps lit [HC_S9]."
    )  # neither the licence rule nor the dues section answers the question
    assert [c.source_id for c in done.answer.citations] == ["HC_S9"]
    # the same answer from the same run, without a cross-encoder: nothing quoted
    plain = finish_answer("How may a ferry carry goods at night?", draft, ctx, from_model=True)
    assert "lamps lit" not in plain.answer.answer_text


def test_quotes_reach_the_threshold_skip_fragments_and_what_the_answer_states() -> None:
    from sleuth.agents.quotes import answering_quotes, with_quotes

    night = chunk(
        "HC_S9",
        "A ferry may carry goods at night with two lamps lit. (iii) of goods. "
        "Goods carried at night are listed in the night register of the ferry.",
        "Ferries",
    )
    ctx = ctx_with(night)
    scorer = OverlapScorer()
    question = "May a ferry carry goods at night?"
    quotes = answering_quotes(question, ["HC_S9"], ctx, scorer, threshold=0.5)  # type: ignore[arg-type]
    assert [q.sentence for q in quotes] == [
        "A ferry may carry goods at night with two lamps lit.",
        "Goods carried at night are listed in the night register of the ferry.",
    ]  # "(iii) of goods." is a fragment of the numbering, never quoted
    assert answering_quotes(question, ["HC_S9"], ctx, scorer, threshold=0.999) == []  # type: ignore[arg-type]
    stated = GeneratedAnswer(answer_text="A ferry may carry goods at night with two lamps lit.")
    quoted = with_quotes(stated, quotes, ctx).answer_text
    assert quoted.count("two lamps lit") == 1 and "night register of the ferry [HC_S9]." in quoted
    declined = GeneratedAnswer(answer_text="Insufficient context.", is_insufficient_context=True)
    assert with_quotes(declined, quotes, ctx) == declined


def test_a_paraphrase_gives_way_to_the_rule_it_restates() -> None:
    from sleuth.agents.answer import Citation
    from sleuth.agents.quotes import Quote, with_quotes

    ctx = ctx_with(
        chunk("HC_S9", "A ferry may carry goods at night with two lamps lit.", "Ferries"),
        chunk("HC_S4", "The harbour master keeps a register of night cargo.", "Register"),
    )
    lamps = Quote("HC_S9", "A ferry may carry goods at night with two lamps lit.", 3.0)
    register = Quote("HC_S4", "The harbour master keeps a register of night cargo.", 1.0)
    answer = GeneratedAnswer(
        answer_text="Yes, a ferry may carry goods at night [HC_S9].\n"
        "- It states that at night a ferry may carry goods with two lamps lit [HC_S9].\n"
        "- The master of the ferry pays harbour dues monthly [HC_S9].",
        citations=[Citation(source_id="HC_S9", sentence="a ferry may carry goods", support=0.9)],
    )
    text = with_quotes(answer, [lamps], ctx).answer_text
    # the answer sentence stays, the restating line gives way, the other point stays
    assert text.startswith("Yes, a ferry may carry goods at night [HC_S9].\n")
    assert "It states that" not in text
    assert "harbour dues monthly" in text
    assert text.endswith("with two lamps lit [HC_S9].")
    # an answer sentence that states the rule in other words: the quote is not added
    said = GeneratedAnswer(
        answer_text="A register of night cargo is kept by the harbour master [HC_S4]."
    )
    assert with_quotes(said, [register], ctx).answer_text == said.answer_text
    # a later line that does: the rule's own words instead
    later = GeneratedAnswer(answer_text=f"Yes [HC_S4].\n{said.answer_text}")
    assert with_quotes(later, [register], ctx).answer_text == (
        "Yes [HC_S4].\nThe harbour master keeps a register of night cargo [HC_S4]."
    )


def test_only_a_dropped_lines_citation_leaves_and_never_by_a_prefix_of_its_id() -> None:
    from sleuth.agents.answer import Citation
    from sleuth.agents.quotes import Quote, with_quotes

    ctx = ctx_with(
        chunk("HC_S3", "Dues are paid by the owner of a ferry.", "Dues"),
        chunk("HC_S30", "A ferry may carry goods at night with two lamps lit.", "Ferries"),
        chunk("HC_S7", "The harbour master inspects the lamps.", "Inspection"),
    )
    lamps = Quote("HC_S30", "A ferry may carry goods at night with two lamps lit.", 3.0)

    def cite(sid: str) -> Citation:
        return Citation(source_id=sid, sentence="", support=0.9)

    answer = GeneratedAnswer(
        answer_text="Yes, with lamps [HC_S30].\n"
        "- At night a ferry may carry goods with two lamps lit [HC_S3].",
        citations=[cite("HC_S30"), cite("HC_S3"), cite("HC_S7")],
    )
    done = with_quotes(answer, [lamps], ctx)
    assert "[HC_S3]" not in done.answer_text  # its only line restated the quote: dropped
    # HC_S3 left with that line although "HC_S3" is a prefix of HC_S30, which stays;
    # HC_S7 had no marker in a dropped line: kept
    assert [c.source_id for c in done.citations] == ["HC_S30", "HC_S7"]


def test_the_extractive_answer_is_its_quotes_after_a_short_answer_they_do_not_hold() -> None:
    from sleuth.agents.quotes import Quote, quoted_draft

    lamps = Quote("HC_S9", "A ferry may carry goods at night with two lamps lit.", 3.0)
    register = Quote("HC_S4", "Night cargo is listed in the register;", 1.0)
    draft = quoted_draft([lamps, register], short="Two lamps")
    assert draft is not None and draft.extractive
    assert draft.answer_text == (
        "A ferry may carry goods at night with two lamps lit [HC_S9]. "
        "Night cargo is listed in the register [HC_S4]."
    )  # the quotes hold "two lamps": not said twice
    assert draft.short_answer == "Two lamps" and draft.citations == ["HC_S9", "HC_S4"]
    other = quoted_draft([register], short="Yes")
    assert other is not None and other.answer_text.startswith("Yes. Night cargo")
    assert quoted_draft([]) is None


def test_a_model_answer_a_check_declines_gives_way_to_the_extractive_quotes() -> None:
    from sleuth.agents.finish import EXTRACTIVE, OFF_TOPIC
    from sleuth.agents.quotes import answering_quotes, quoted_draft

    ctx, checker = ferry_rules(
        chunk("HC_S2", "Harbour dues are paid every month by the owner.", "Dues")
    )
    # no sentence answers it well enough to re-cite (probability 0.36 < 0.5), but one
    # reaches the coverage threshold (0.1): the extractive reader would answer with it
    question = "May a ferry carry cattle at night under the harbour code in winter?"
    quotes = answering_quotes(question, ["HC_S9"], ctx, checker.cross_encoder, 0.1)  # type: ignore[arg-type]
    draft = AnswerDraft(answer_text="Dues are paid monthly [HC_S2].", citations=["HC_S2"])
    done = finish_answer(
        question, draft, ctx, checker=checker, from_model=True, fallback=quoted_draft(quotes)
    )
    assert done.replaced == EXTRACTIVE and done.source == "replaced"
    assert done.answer.answer_text.startswith(
        "A ferry may carry goods at night with two lamps lit [HC_S9]."
    )
    assert [c.source_id for c in done.answer.citations] == ["HC_S9"]
    alone = finish_answer(question, draft, ctx, checker=checker, from_model=True)
    assert alone.replaced == OFF_TOPIC and alone.answer.is_insufficient_context


def test_a_models_own_decline_gives_way_to_quotes_that_answer() -> None:
    from sleuth.agents.finish import OVERRULED
    from sleuth.agents.quotes import answering_quotes, quoted_draft

    ctx, checker = ferry_rules(
        chunk("HC_S2", "Harbour dues are paid every month by the owner.", "Dues")
    )
    question = "May a ferry carry goods at night?"
    declined = AnswerDraft(
        answer_text="Insufficient context: the question does not say which ferry.",
        is_insufficient_context=True,
    )
    quotes = answering_quotes(question, ["HC_S9", "HC_S2"], ctx, checker.cross_encoder, 0.5)  # type: ignore[arg-type]
    done = finish_answer(
        question, declined, ctx, checker=checker, from_model=True, overrule=quoted_draft(quotes)
    )
    assert done.replaced == OVERRULED and done.source == "replaced"
    assert not done.answer.is_insufficient_context
    assert "two lamps lit [HC_S9]" in done.answer.answer_text
    # with nothing that answers (no overruling answer), the model's decline stands
    kept = finish_answer(question, declined, ctx, checker=checker, from_model=True)
    assert kept.answer.is_insufficient_context and kept.replaced is None
    # an answer citing nothing, asked to cite, and a repair round that declines instead
    uncited = AnswerDraft(answer_text="That depends on the season.")
    repaired = finish_answer(
        question,
        uncited,
        ctx,
        checker=checker,
        from_model=True,
        repair=lambda problem, draft: declined,
        overrule=quoted_draft(quotes),
    )
    assert repaired.replaced == OVERRULED and not repaired.answer.is_insufficient_context
    assert "two lamps lit [HC_S9]" in repaired.answer.answer_text


def test_an_initial_is_no_sentence_end_of_a_short_answer() -> None:
    def short(text: str) -> str | None:
        return split_short_answer(AnswerDraft(answer_text=text))[0]

    assert short("J. K. Rowling. She wrote the books [1].") == "J. K. Rowling"
    # a whole first sentence of more words than a short answer has: none split off
    assert (
        short("E. B. White and Dan Masterson were both American writers of verse [1]. So.") is None
    )
    assert short("Paris. It is the capital [1].") == "Paris"


def test_a_short_answer_that_begins_a_longer_claim_stays_in_it() -> None:
    # once: "Answer: death" with "death or imprisonment for life [1]" became
    # "death. or imprisonment for life [1]" (bench_robustness, ReAct, Facts/Answer replies)
    draft = AnswerDraft(answer_text="death or imprisonment for life [1]", short_answer="death")
    short, rest = split_short_answer(draft)
    assert short == "death" and rest.answer_text == "death or imprisonment for life [1]"
    draft = AnswerDraft(answer_text="Chief of Protocol. She served two years [2].")
    _, rest = split_short_answer(draft.model_copy(update={"short_answer": "Chief of Protocol"}))
    assert rest.answer_text == "She served two years [2]."


def test_a_quoted_lead_in_carries_the_items_it_enumerates() -> None:
    from sleuth.agents.quotes import answering_quotes, with_quotes

    rule = chunk(
        "HC_S12",
        "A harbour master may seize a ferry in the cases hereinafter enumerated, namely:—\n"
        "(a) smuggling;\n(b) sailing without lamps after dark;\n"
        "(c) carrying more passengers than its licence allows.\n"
        "(2) A seized ferry is returned within seven days of the fine being paid.",
        "Seizure of ferries",
    )
    ctx = ctx_with(rule)
    question = "In which cases may a harbour master seize a ferry?"
    quotes = answering_quotes(question, ["HC_S12"], ctx, OverlapScorer(), threshold=0.5)  # type: ignore[arg-type]
    first = quotes[0].sentence
    assert first.startswith("A harbour master may seize a ferry")
    assert "(a) smuggling;" in first and "(c) carrying more passengers" in first
    assert "(2) A seized ferry" not in first  # a numbered sub-section is no item
    # an item is never quoted a second time beside its lead-in
    assert sum("smuggling" in q.sentence for q in quotes) == 1
    # a model answer that copied only the lead-in gets the items quoted after it
    lead_only = GeneratedAnswer(
        answer_text="A harbour master may seize a ferry in the cases hereinafter enumerated, "
        "namely:— [HC_S12]."
    )
    assert "sailing without lamps" in with_quotes(lead_only, quotes[:1], ctx).answer_text
    whole = GeneratedAnswer(answer_text=quotes[0].cited())
    assert with_quotes(whole, quotes[:1], ctx) == whole
    respaced = GeneratedAnswer(answer_text=quotes[0].cited().replace(";", " ;").replace("\n", " "))
    assert with_quotes(respaced, quotes[:1], ctx) == respaced  # spacing is no difference


def test_enumerated_items_stop_at_the_first_sentence_that_is_no_item() -> None:
    from sleuth.retrieval.text import enumerated_items, sentences

    said = sentences(
        "The following persons may apply, namely:-\n(i) the owner;\n(ii) the master.\n"
        "Provided that no person applies twice. (b) stray clause."
    )
    lead = next(i for i, s in enumerate(said) if s.endswith("namely:-"))
    assert [said[j] for j in enumerated_items(said, lead)] == ["(i) the owner;", "(ii) the master."]
    assert enumerated_items(said, lead + 1) == []  # an item introduces nothing
    assert enumerated_items(["A ferry sails at dawn.", "(a) stray."], 0) == []


def test_a_focused_section_keeps_a_lead_in_with_its_items() -> None:
    from sleuth.agents.generation import EvidenceSection, focused_evidence

    text = long_ferry_section(
        30,
        "A harbour master may seize a ferry in these cases, namely:—\n(a) smuggling;\n"
        "(b) sailing without lamps;\n(c) overloading.",
    )
    long = EvidenceSection("HC_S12", "Test code > Seizure of ferries", text, 1)
    focused = focused_evidence(
        "When may a harbour master seize a ferry?", [long], OverlapScorer(), chars=300
    )
    body = focused[0].text
    assert "namely:— (a) smuggling; (b) sailing without lamps; (c) overloading." in body
    assert len(body) <= 300


def test_a_sub_section_past_the_sentence_cap_is_still_quotable() -> None:
    from sleuth.agents.quotes import SENTENCES_PER_SECTION, answering_quotes

    illustrations = " ".join(
        f"({chr(97 + n % 26)}) A rows boat number {n} across the bay." for n in range(45)
    )
    rule = chunk(
        "HC_S20",
        "(1) Whoever rows a ferry without a licence commits ferrying. Illustrations "
        + illustrations
        + " (2) Whoever commits ferrying shall be punished with a fine of ten rupees.",
        "Ferrying",
    )
    ctx = ctx_with(rule)
    question = "What is the punishment for ferrying?"
    assert len(sentences(join_parts([rule]))) > SENTENCES_PER_SECTION + 2
    quotes = answering_quotes(question, ["HC_S20"], ctx, OverlapScorer(), threshold=0.5)  # type: ignore[arg-type]
    assert any(q.sentence.startswith("(2) Whoever commits ferrying") for q in quotes)


def test_sections_bearing_on_no_question_are_set_aside_unless_linked() -> None:
    from sleuth.agents.heuristic import set_aside
    from sleuth.types import Reference

    lamps = chunk("HC_S2", "Harbour dues are paid monthly by the owner of the vessel.", "Dues")
    night = chunk("HC_S9", "A ferry may carry goods at night with two lamps lit.", "Night")
    night.references = [Reference(source_id="HC_S9", target_text="section 4", target_id="HC_S4")]
    licence = chunk("HC_S4", "The licence is issued by the harbour master.", "Licence")
    pilots = chunk("HC_S7", "Pilots retire at sixty.", "Pilots")
    ctx = ctx_with(lamps, night, licence, pilots)
    ctx.scorer = OverlapScorer()  # type: ignore[assignment]
    order = ["HC_S2", "HC_S9", "HC_S4", "HC_S7"]
    question = "May a ferry carry goods at night?"
    # HC_S2 is first (kept whatever it says); HC_S9 bears on the question; HC_S4 is cited by
    # it (a bridge); HC_S7 shares nothing with the question and links to nothing kept
    assert set_aside([question], order, ctx, threshold=0.5) == {"HC_S7"}
    # a chain of links: HC_S4 (kept as HC_S9's bridge) cites HC_S7, which is kept in turn
    licence.references = [Reference(source_id="HC_S4", target_text="s. 7", target_id="HC_S7")]
    assert set_aside([question], order, ctx, threshold=0.5) == set()
    licence.references = []
    # a sub-question that HC_S7 bears on keeps it
    assert set_aside([question, "When do pilots retire?"], order, ctx, threshold=0.5) == set()
    # no threshold, or no cross-encoder: nothing is set aside
    assert set_aside([question], order, ctx, threshold=0.0) == set()
    ctx.scorer = None
    assert set_aside([question], order, ctx, threshold=0.5) == set()


def test_a_section_is_judged_by_the_deep_passage_a_search_found() -> None:
    """A section whose rule opens in its own terms but whose illustration matches the
    question (a lay question: "found a purse, may I keep it") is judged by that passage
    when a search returned it — not set aside for its opening, and ranked by it."""
    from sleuth.agents.heuristic import rank_sections, set_aside

    opening = [
        "Whoever dishonestly takes a thing found commits finding.",
        "Finding is punished with a fine of ten rupees.",
        "The harbour master keeps a register of findings.",
    ]
    parts = [
        Chunk(
            chunk_id=f"HC_S5#{n}",
            doc_id="code",
            source_id="HC_S5",
            title_path=["Test code", "Finding"],
            text=text,
            position=n,
            part=n,
        )
        for n, text in enumerate(
            [*opening, "Illustration: A ferry passenger keeps a purse found on the deck."]
        )
    ]
    dues = chunk("HC_S2", "Ferry passengers pay harbour dues on the deck.", "Dues")
    ctx = ctx_with(dues)
    ctx.retrieved["HC_S5"] = parts
    ctx.numbers["HC_S5"] = 2
    ctx.scorer = OverlapScorer()  # type: ignore[assignment]
    question = "May a ferry passenger keep a purse found on the deck?"
    order = ["HC_S2", "HC_S5"]
    # read whole, no search returned its illustration: judged by its opening only
    assert set_aside([question], order, ctx, threshold=0.5) == {"HC_S5"}
    assert rank_sections(question, ctx)[0][0] == "HC_S2"
    ctx.hits.add("HC_S5#3")  # a search returned the illustration as HC_S5's best passage
    assert set_aside([question], order, ctx, threshold=0.5) == set()
    assert rank_sections(question, ctx)[0][0] == "HC_S5"


def test_a_verdict_is_put_before_a_rule_that_opens_with_no() -> None:
    # the short answer "No" is not already stated by a quote that opens "No ferry shall …":
    # the answer opens with the verdict, then the rule
    rule = "No ferry shall sail at night without two lamps lit [HC_S9]."
    assert not opens_with(rule, "No")
    assert opens_with("No. " + rule, "No")
    assert opens_with("No, it may not [HC_S9].", "no")
    assert opens_with("Two lamps [HC_S9].", "two lamps")
    # nor is that "No" split off a model's text as its short answer
    text = f"{rule} It must also carry a bell [HC_S9]."
    short, draft = split_short_answer(AnswerDraft(answer_text=text))
    assert short is None
    assert draft.answer_text == text


@pytest.mark.parametrize(
    ("question", "asks"),
    [
        ("What is the fee for mooring a houseboat overnight?", False),
        ("A vendor sold fake lottery tickets at the pier. What's the penalty for that?", False),
        ("Who may inspect the harbour register?", False),
        ("Can you tell me what the mooring fee is?", False),
        ("Is a permit needed to moor overnight? What does it cost?", True),
        ("How long may a boat stay at the quay, and can the master ask for more time?", True),
        ("If the harbour master refuses, may I appeal?", True),
        ("My boat was towed. Does the owner pay the towing charge?", True),
    ],
)
def test_asks_yes_or_no_finds_a_yes_or_no_part_anywhere_in_the_question(
    question: str, asks: bool
) -> None:
    assert asks_yes_or_no(question) is asks


# written for this test: a section whose later sub-sections are shorter, so a score that
# favours short sentences would read them first
SECTION_40 = chunk(
    "HC_S40",
    "(1) Every ferry owner shall keep a register of the passengers carried on each crossing "
    "of the harbour, with the names, the addresses, the ages and the ports of departure and "
    "of arrival of all of them, and of every child travelling with them, and of the goods "
    "each of them brings on board, in the form the harbour master sets by order from time "
    "to time. "
    "(2) The register shall be shown to a harbour guard on demand at any hour of the day or "
    "of the night, at the quay or on board, and a copy of any page of it shall be given to "
    "the guard when the guard asks for one in writing. "
    "(3) A register shall be kept for one year.",
    title="Registers of passengers",
)


def test_a_named_section_is_quoted_in_its_own_order() -> None:
    """ "What does section 40 say?" asks what the section says: its sentences come as it
    states them, (1) before (3), however the scores rank them — in the extractive answer and
    in the quotes the finish step adds."""
    from sleuth.agents.heuristic import compose_answer
    from sleuth.agents.quotes import Quote, in_section_order, sentence_passages

    ctx = ctx_with(SECTION_40, chunk("HC_S9", "A ferry may carry goods at night.", "Night"))
    text = compose_answer("What does section 40 of the Harbour Code say?", ctx).answer_text
    marks = [text.find(f"({n})") for n in (1, 2, 3) if f"({n})" in text]
    assert len(marks) >= 2 and marks == sorted(marks), text
    sentences = [s for s, _ in sentence_passages(ctx.retrieved["HC_S40"])]
    best_first = [Quote("HC_S40", s, float(i)) for i, s in enumerate(sentences)][::-1]
    assert [q.sentence for q in in_section_order(best_first, ctx)] == sentences
