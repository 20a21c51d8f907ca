"""The yes/no verdict a rule states: "No confession … shall be proved" answers "Is a
confession … admissible?" with No.

A yes/no question about a rule ("Can police arrest without a warrant?", "Is a confession to
the police admissible?") is answered by the sentence of the evidence that states the rule.
The cross-encoder (:mod:`sleuth.retrieval.rerank`) picks that sentence among the cited (or,
failing those, the best retrieved) sections' sentences: the one most relevant to the
question. Its verdict is the *parity* of negation: a rule that negates ("no …", "not",
"nothing", "never", "cannot", "neither … nor") against a question that does not gives "no";
both or neither give "yes". When no sentence is relevant enough
(:data:`~sleuth.agents.support.CROSS_ENCODER_THRESHOLD`), the evidence does not plainly
state the rule and there is no verdict.

Negation scope is read in two steps, both general features of how statutes are drafted:

* **the clause that answers**: a rule sentence carries its conditions and provisos in
  clauses ("…, though not throughout interrogation"; "Save in exceptional circumstances,
  no woman shall …"); the sentence is split at clause boundaries (``,`` ``;`` ``:`` and a
  dash) and the cross-encoder picks the clause most relevant to the question, whose
  negation alone counts;
* **bounds are not negations**: "not less than", "not exceeding", "not below the rank of"
  state a limit, so "not" before a comparative is no cue (:mod:`sleuth.agents.negation`).

The verdict is used to confirm or overturn a model's opening Yes/No and to open an
extractive answer, and the trace records which sentence and clause decided it.

Negation parity is a rule of thumb: "when a person declared as a proclaimed offender … has
absconded … and there is **no** immediate prospect of arresting him, … the Court shall …
proceed with the trial" answers "Can the trial go ahead?" with Yes, yet its most relevant
clause negates. Where the configured model can score its first token, it reads the meaning
instead (:func:`judged_verdict`): shown the section the answer cites (focused on the question
as the generator reads it) and asked whether, according to it, the answer is Yes or No, its
log-odds of "Yes" over "No" overturn the answer's verdict when they lie beyond
:data:`JUDGED_YES_LOG_ODDS` or :data:`JUDGED_NO_LOG_ODDS`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from sleuth.agents.generation import GENERATION_EVIDENCE_CHARS, evidence_section, focused_evidence
from sleuth.agents.negation import clauses, negated
from sleuth.agents.safety import quotable_sentences
from sleuth.prompts import load_prompt
from sleuth.retrieval.rerank import CrossEncoder, sigmoid
from sleuth.retrieval.search import join_parts
from sleuth.tools.base import RunContext
from sleuth.types import Chunk

MAX_SENTENCES = 60
"""Sentences scored per verdict at most (cited sections first)."""
JUDGED_YES_LOG_ODDS = 1.5
JUDGED_NO_LOG_ODDS = -0.2
"""The model's log-odds of "Yes" over "No" (:func:`judged_verdict`) at or above which it
overturns an answer's No, and at or below which it overturns a Yes; between them the answer's
verdict stands. The 1.5B model leans to Yes: on the 25 ``dev`` yes/no questions of the judged
and held-out sets, read on the section the local run's answer cites first (records of
``e8f4bd8`` and ``8ad40e8``), its log-odds ranged 0.06–2.40 where the gold verdict is Yes and
−0.39–0.98 where it is No, so a Yes it gives weakly is no evidence against a No. Chosen on
those ``dev`` records: beyond the bands every judgement agreed with the gold verdict, and the
two answers they would overturn were both wrong (17 → 19 of 25 right)."""


@dataclass(frozen=True)
class RuleVerdict:
    """The verdict of the evidence on a yes/no question.

    Attributes:
        verdict: ``"yes"`` or ``"no"``.
        sentence: the rule sentence that decided it.
        clause: the clause of it whose negation was read.
        source_id: its section.
        score: the cross-encoder's probability that the sentence answers the question.
    """

    verdict: str
    sentence: str
    clause: str
    source_id: str
    score: float


def rule_verdict(
    question: str,
    sections: Mapping[str, Sequence[Chunk]],
    order: Sequence[str],
    scorer: CrossEncoder,
    threshold: float,
) -> RuleVerdict | None:
    """The verdict the evidence states on ``question`` (module docstring), or ``None``.

    Args:
        question: a yes/no question.
        sections: ``source_id`` → its chunks (the run's retrieved sections).
        order: the sections to read, most trusted first (the answer's citations, then the
            retrieved ones by rank).
        scorer: the cross-encoder.
        threshold: the least probability for a sentence to count as the rule.
    """
    candidates: list[tuple[str, str]] = []
    for sid in dict.fromkeys(order):
        chunks = sections.get(sid) or []
        # text inside chat markup and injected instructions never decide a verdict
        kept = quotable_sentences(join_parts(list(chunks)))[0]
        candidates += [(sid, s) for s in kept if len(s) > 20]
        if len(candidates) >= MAX_SENTENCES:
            break
    candidates = candidates[:MAX_SENTENCES]
    if not candidates:
        return None
    logits = scorer.logits(question, [s for _, s in candidates])
    best = max(range(len(candidates)), key=lambda i: logits[i])
    score = sigmoid(logits[best])
    if score < threshold:
        return None
    sid, sentence = candidates[best]
    parts = clauses(sentence)
    clause = parts[0]
    if len(parts) > 1:
        weights = scorer.logits(question, parts)
        clause = parts[max(range(len(parts)), key=lambda i: weights[i])]
    verdict = "no" if negated(clause) != negated(question) else "yes"
    return RuleVerdict(
        verdict=verdict, sentence=sentence, clause=clause, source_id=sid, score=score
    )


def judge_messages(question: str, shown: str) -> list[BaseMessage]:
    """The verdict judge's prompt: ``prompts/verdict_judge.md``, then the section and the
    question."""
    return [
        SystemMessage(load_prompt("verdict_judge")),
        HumanMessage(
            f"{shown}\n\nQuestion: {question}\n\nAccording to this section, is the answer Yes "
            "or No?"
        ),
    ]


def judged_verdict(
    question: str, source_id: str, ctx: RunContext, model: Any, scorer: CrossEncoder
) -> float | None:
    """The model's log-odds that, according to the retrieved section ``source_id``, the
    answer to the yes/no ``question`` is Yes (positive) rather than No (negative).

    The section is shown as the generator reads it: its title and its text, focused on the
    question by ``scorer`` when longer than
    :data:`~sleuth.agents.generation.GENERATION_EVIDENCE_CHARS`
    (:func:`~sleuth.agents.generation.focused_evidence`). One forward pass of ``model``'s
    :meth:`~sleuth.llm.local.LlamaCppChatModel.first_token_log_odds`; its tokens are added
    to the run's usage under ``verdict``.

    Returns:
        The log-odds (any real number), or ``None`` when ``model`` cannot score its first
        token (a model behind a server), the section was not retrieved in the run, or the
        call failed (a judgement is advice: the answer's verdict then stands).
    """
    scored = getattr(model, "first_token_log_odds", None)
    if not callable(scored) or not ctx.retrieved.get(source_id):
        return None
    section = focused_evidence(
        question, [evidence_section(source_id, ctx)], scorer, GENERATION_EVIDENCE_CHARS
    )[0]
    shown = f"Section: {section.title.rsplit(' > ', 1)[-1]}\n{section.text}"
    try:
        value, usage = scored(judge_messages(question, shown), "Yes", "No")
    except Exception:
        return None
    ctx.add_usage(usage, "verdict")
    return float(value)
