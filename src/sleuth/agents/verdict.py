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
  state a limit, so "not" before a comparative (:data:`_BOUND`) is no cue.

The verdict is used to confirm or overturn a model's opening Yes/No and to open an
extractive answer, and the trace records which sentence and clause decided it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sleuth.agents.safety import quotable_sentences
from sleuth.retrieval.rerank import CrossEncoder, sigmoid
from sleuth.retrieval.search import join_parts
from sleuth.types import Chunk

_NEGATION = re.compile(
    r"\b(?:not|no|never|nothing|none|neither|nor|nobody|cannot)\b|n't\b", re.IGNORECASE
)
_BOUND = re.compile(
    r"\bnot\s+(?:less|more|fewer|greater|below|above|under|over|exceeding|later|earlier|"
    r"beyond|before|after)\b",
    re.IGNORECASE,
)
_CLAUSE = re.compile(r"\s*[,;:\u2014]\s*|\s+--?\s+")
MIN_CLAUSE_WORDS = 4
"""A clause shorter than this ("Save as aforesaid", "(2) Where") joins the next one."""
MAX_SENTENCES = 60
"""Sentences scored per verdict at most (cited sections first)."""


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


def negated(text: str) -> bool:
    """Whether ``text`` negates: an odd number of negation cues ("not", "no", "nothing",
    "never", "cannot", "n't" …), a bound ("not less than") not counted."""
    return len(_NEGATION.findall(_BOUND.sub(" ", text))) % 2 == 1


def clauses(sentence: str) -> list[str]:
    """``sentence`` split at clause boundaries (commas, semicolons, colons, dashes), a
    clause of fewer than :data:`MIN_CLAUSE_WORDS` words joined to the next one."""
    out: list[str] = []
    carry = ""
    for part in _CLAUSE.split(sentence):
        part = f"{carry} {part}".strip() if carry else part.strip()
        if len(part.split()) < MIN_CLAUSE_WORDS:
            carry = part
            continue
        out.append(part)
        carry = ""
    if carry:
        if out:
            out[-1] = f"{out[-1]} {carry}"
        else:
            out.append(carry)
    return out or [sentence]


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
