"""Evaluation metrics: ranked retrieval, answer match, citations and CRAG verdict calibration.

Everything here works on source ids (the citable unit: a statute section, a HotpotQA
paragraph title) and on plain strings; nothing runs a model.

- Ranked lists: recall@k, all-gold@k and MRR over a run's retrieved source ids, in order of
  first retrieval (Manning, Raghavan & Schütze, *Introduction to Information Retrieval*,
  ch. 8).
- Answers: exact match and token F1 after the HotpotQA / SQuAD answer normalisation
  (lower-case, drop punctuation, the articles a/an/the and extra whitespace; Rajpurkar et al.
  2016, Yang et al. 2018, the official ``hotpot_evaluate_v1.py``), best over the gold answers.
- Citations: precision and recall of the cited source ids against the gold ids.
- Judged answers (long-form): the share of a question's key facts the answer states (each
  fact a set of alternative phrasings, matched on word boundaries after normalisation), the
  yes/no verdict the answer opens with, whether the answer ends mid-sentence, its length in
  words and the sentences that restate another.
- CRAG calibration: each verdict of the guided evaluator against whether the gold sections
  were in the evidence it judged (Yan et al. 2024, *Corrective Retrieval Augmented
  Generation*).
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from text_to_num import alpha2digit

from sleuth.retrieval.text import sentences, terms

VERDICTS = ("SUFFICIENT", "PARTIAL", "INSUFFICIENT")
_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = str.maketrans("", "", string.punctuation)
_YES_NO = frozenset({"yes", "no", "noanswer"})
_MARKER = re.compile(r"\s*\[[^\[\]]{1,80}\]")


def distinct(ids: Iterable[str | None]) -> list[str]:
    """``ids`` without repeats or empty values, in order of first appearance."""
    return list(dict.fromkeys(i for i in ids if i))


def recall_at(ranked: Sequence[str], gold: set[str], k: int) -> float:
    """Share of ``gold`` among the first ``k`` of ``ranked`` (distinct ids); 0.0 without gold."""
    return len(gold & set(ranked[:k])) / len(gold) if gold else 0.0


def all_in(ranked: Iterable[str], gold: set[str]) -> bool:
    """Whether every gold id is in ``ranked`` (``False`` without gold)."""
    return bool(gold) and gold <= set(ranked)


def hit_at(ranked: Sequence[str], gold: str, k: int) -> bool:
    """Whether ``gold`` is among the first ``k`` of ``ranked``."""
    return gold in ranked[:k]


def reciprocal_rank(ranked: Sequence[str], gold: set[str]) -> float:
    """1 / (1-based rank of the first gold id in ``ranked``); 0.0 when none is there."""
    for rank, source_id in enumerate(ranked, start=1):
        if source_id in gold:
            return 1.0 / rank
    return 0.0


def strip_citations(text: str) -> str:
    """``text`` without its ``[source_id]`` citation markers (they are not part of the
    answer an exact match or F1 compares)."""
    return _MARKER.sub("", text).strip()


def normalize_answer(text: str) -> str:
    """The HotpotQA / SQuAD answer normalisation: lower-case, punctuation removed, articles
    (a, an, the) removed, whitespace collapsed."""
    text = text.lower().translate(_PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, answers: Sequence[str]) -> float:
    """1.0 if the normalised prediction equals a normalised gold answer, else 0.0."""
    predicted = normalize_answer(prediction)
    return float(any(predicted == normalize_answer(a) for a in answers))


def _f1(prediction: str, answer: str) -> float:
    predicted, gold = normalize_answer(prediction), normalize_answer(answer)
    # hotpot_evaluate_v1: a yes/no/noanswer answer only scores by an exact match
    if (predicted in _YES_NO or gold in _YES_NO) and predicted != gold:
        return 0.0
    p_tokens, g_tokens = predicted.split(), gold.split()
    common = sum((Counter(p_tokens) & Counter(g_tokens)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p_tokens), common / len(g_tokens)
    return 2 * precision * recall / (precision + recall)


def f1_score(prediction: str, answers: Sequence[str]) -> float:
    """Token F1 of the normalised prediction, best over ``answers``; 0.0 without answers."""
    return max((_f1(prediction, a) for a in answers), default=0.0)


def answer_contains(prediction: str, answers: Sequence[str]) -> float:
    """1.0 if a normalised gold answer occurs, on word boundaries, in the normalised
    prediction (the lenient "answer recall" used for long-form answers), else 0.0."""
    predicted = f" {normalize_answer(prediction)} "
    return float(any(n and f" {n} " in predicted for n in map(normalize_answer, answers)))


_VERDICT = re.compile(r"^\W*(yes|no)(?=[.,;:!]|\s*$)", re.I)
_COMPLETE_END = re.compile(r"[.!?…][\"')\]]*$")


def _stated_form(text: str) -> str:
    """``text`` normalised (:func:`normalize_answer`) with its numbers in digits, a lone
    "one" included (``text_to_num.alpha2digit``): "1 year" states "one year"."""
    return normalize_answer(alpha2digit(strip_citations(text), "en", threshold=0))


def key_fact_share(prediction: str, facts: Sequence[Sequence[str]]) -> float | None:
    """The share of ``facts`` the prediction states: a fact counts when one of its
    alternative phrasings occurs, on word boundaries, in the normalised prediction
    (:func:`normalize_answer`, citation markers removed, numbers in digits however written);
    ``None`` without facts."""
    if not facts:
        return None
    predicted = f" {_stated_form(prediction)} "
    found = sum(
        any((n := _stated_form(a)) and f" {n} " in predicted for a in fact) for fact in facts
    )
    return found / len(facts)


def lead_key_fact_share(prediction: str, facts: Sequence[Sequence[str]]) -> float | None:
    """:func:`key_fact_share` of the answer's first sentence only — what a reader takes as
    the answer: a short answer ("5 years.") is judged by itself, not by the quotes after it
    ("… not less than one year …") that the whole-answer share also counts."""
    lead = sentences(strip_citations(prediction))
    return key_fact_share(lead[0] if lead else "", facts)


def stated_verdict(prediction: str) -> str | None:
    """``"yes"`` or ``"no"`` when the answer opens with one as a word of its own ("No. A
    confession …", "Yes, …"), else ``None``: a quoted rule that opens with the word ("No
    person shall be compelled …") states no verdict."""
    match = _VERDICT.match(strip_citations(prediction))
    return match.group(1).lower() if match else None


def ends_mid_sentence(prediction: str) -> bool:
    """Whether the answer, citation markers removed, stops without closing its last sentence
    (no final ``.``, ``!``, ``?`` or ``…``, optionally followed by closing quotes or
    brackets): the mark of an answer cut by an output budget."""
    text = strip_citations(prediction).rstrip()
    return bool(text) and not _COMPLETE_END.search(text)


def answer_words(prediction: str) -> int:
    """Words of the answer, citation markers removed (its length as a reader sees it)."""
    return len(strip_citations(prediction).split())


REPEAT_SHARE = 0.8
"""Share of a sentence's terms another sentence of the answer holds for it to count as a
repeat (a restatement: the model's paraphrase of a rule beside the rule's quote, a point
made twice)."""


def repeated_sentences(prediction: str) -> int:
    """Sentences of the answer (:func:`~sleuth.retrieval.text.sentences`, citation markers
    removed) that restate another: at least :data:`REPEAT_SHARE` of the terms of the one
    with fewer terms (:func:`~sleuth.retrieval.text.terms`, four at least) are in the other.
    Each sentence counts once; ``0`` for an answer of one sentence."""
    said = [set(terms(s)) for s in sentences(strip_citations(prediction))]
    said = [t for t in said if len(t) >= 4]
    repeats = 0
    for i, mine in enumerate(said):
        for other in said[:i]:
            small, large = (mine, other) if len(mine) <= len(other) else (other, mine)
            if len(small & large) >= REPEAT_SHARE * len(small):
                repeats += 1
                break
    return repeats


def citation_scores(cited: Sequence[str], gold: set[str]) -> tuple[float | None, float | None]:
    """(precision, recall) of the cited source ids against ``gold``.

    Precision is ``None`` when nothing is cited, recall ``None`` when there is no gold (the
    run does not enter that mean)."""
    cited_set = set(cited)
    precision = len(cited_set & gold) / len(cited_set) if cited_set else None
    recall = len(cited_set & gold) / len(gold) if gold else None
    return precision, recall


def repeated_calls(tool_trace: Sequence[dict[str, Any]]) -> int:
    """How many tool calls repeat an earlier call of the same run (same tool, same
    arguments)."""
    seen: set[str] = set()
    repeats = 0
    for call in tool_trace:
        signature = f"{call.get('tool')}|{sorted((call.get('arguments') or {}).items())!r}"
        repeats += signature in seen
        seen.add(signature)
    return repeats


@dataclass
class CragCalibration:
    """CRAG verdicts of guided runs against the gold sections of their questions.

    One entry per evaluated round (``trace["agentic"]["crag"]``): the verdict and whether all
    / any of the question's gold ids were in the evidence the verdict was given on
    (``evidence_source_ids``). A decomposed question has rounds for each sub-question (their
    ``question`` differs from the run's question); they are counted like the others, against
    the gold of the whole question (sub-question gold is not known), and for "gold there"
    a sub-question round needs only one gold id.
    """

    rounds: list[dict[str, Any]] = field(default_factory=list)
    runs: int = 0
    runs_without_rounds: int = 0

    def add(
        self, question: str, crag: Sequence[dict[str, Any]], gold: set[str]
    ) -> list[dict[str, Any]]:
        """Record the CRAG rounds of one guided run for ``question`` with ``gold`` ids; return
        them compacted (verdict, question, evidence ids, gold there) for per-question
        results."""
        self.runs += 1
        if not crag:
            self.runs_without_rounds += 1
        targets = {r.get("question") for r in crag}
        decomposed = len(targets) > 1 or any(t and t != question for t in targets)
        compact = []
        for position, entry in enumerate(crag):
            evidence = set(entry.get("evidence_source_ids") or [])
            sub_question = entry.get("question") != question
            gold_there = bool(gold & evidence) if sub_question else all_in(evidence, gold)
            self.rounds.append(
                {
                    "verdict": str(entry.get("verdict")),
                    "round": entry.get("round", position),
                    "sub_question": sub_question,
                    "decomposed_run": decomposed,
                    "evidence": len(evidence),
                    "all_gold": all_in(evidence, gold),
                    "any_gold": bool(gold & evidence),
                    "gold_there": gold_there,
                }
            )
            compact.append(
                {
                    "verdict": entry.get("verdict"),
                    "question": entry.get("question"),
                    "evidence_source_ids": entry.get("evidence_source_ids", []),
                    "gold_there": gold_there,
                }
            )
        return compact

    def summary(self) -> list[dict[str, Any]]:
        """Per verdict (known verdicts first, then ``"all"``): rounds, share of rounds, and
        the shares of rounds whose evidence held the gold ("gold there", all, any)."""
        names = [v for v in VERDICTS if any(r["verdict"] == v for r in self.rounds)]
        names += sorted({r["verdict"] for r in self.rounds} - set(VERDICTS))
        total = len(self.rounds)

        def share(rows: list[dict[str, Any]], key: str) -> float:
            return sum(r[key] for r in rows) / len(rows) if rows else 0.0

        out = []
        for name in [*names, "all"]:
            rows = [r for r in self.rounds if name == "all" or r["verdict"] == name]
            whole = [r for r in rows if not r["sub_question"]]
            out.append(
                {
                    "verdict": name,
                    "rounds": len(rows),
                    "share_of_rounds": len(rows) / total if total else 0.0,
                    "gold_there": share(rows, "gold_there"),
                    "all_gold_in_evidence": share(rows, "all_gold"),
                    "any_gold_in_evidence": share(rows, "any_gold"),
                    "whole_question_rounds": len(whole),
                    "whole_question_all_gold": share(whole, "all_gold"),
                    "mean_evidence_sections": share(rows, "evidence"),
                    "rounds_of_decomposed_runs": sum(r["decomposed_run"] for r in rows),
                }
            )
        return out

    def table_rows(self) -> list[list[Any]]:
        """Rows for a plain-text table with :data:`CRAG_TABLE_HEADERS`."""
        keys = (
            "verdict",
            "rounds",
            "share_of_rounds",
            "gold_there",
            "whole_question_rounds",
            "whole_question_all_gold",
            "all_gold_in_evidence",
            "any_gold_in_evidence",
            "mean_evidence_sections",
            "rounds_of_decomposed_runs",
        )
        return [[s[k] for k in keys] for s in self.summary()]

    def note(self) -> str:
        """The counting rule, for under the table."""
        decomposed = sum(r["decomposed_run"] for r in self.rounds)
        sub = sum(r["sub_question"] for r in self.rounds)
        return (
            f"{len(self.rounds)} CRAG rounds from {self.runs} guided runs "
            f"({self.runs_without_rounds} runs without a verdict). Every round is counted, "
            f"including refinement rounds and the rounds of decomposed questions "
            f"({decomposed} rounds in decomposed runs, {sub} of them on a sub-question). "
            "'gold there': all gold sections in the evidence for a round on the whole "
            "question, at least one for a round on a sub-question (its share of the gold is "
            "not known); the all / any columns score every round against the whole question."
        )


CRAG_TABLE_HEADERS = (
    "verdict",
    "rounds",
    "share",
    "gold there",
    "whole-q rounds",
    "whole-q all gold",
    "all gold in evidence",
    "any gold in evidence",
    "mean evidence sections",
    "rounds in decomposed runs",
)


def percentile(values: Sequence[float], p: float) -> float | None:
    """The p-th percentile (0-100), linear interpolation (numpy's default); ``None`` if
    ``values`` is empty."""
    if not values:
        return None
    ordered = sorted(values)
    pos = (len(ordered) - 1) * p / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def mean(values: Iterable[float | None]) -> float | None:
    """Mean of the values that are not ``None``; ``None`` when there are none."""
    kept = [float(v) for v in values if v is not None]
    return sum(kept) / len(kept) if kept else None
