"""Helpers shared by the agentic benchmarks (bench_hotpotqa.py, bench_guided.py).

Ranked-list metrics over source ids and the CRAG verdict calibration of guided runs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

VERDICTS = ("SUFFICIENT", "PARTIAL", "INSUFFICIENT")


def distinct(ids: Iterable[str | None]) -> list[str]:
    """``ids`` without repeats or ``None``, in order of first appearance."""
    return list(dict.fromkeys(i for i in ids if i))


def recall_at(ranked: Sequence[str], gold: set[str], k: int) -> float:
    """Share of ``gold`` among the first ``k`` of ``ranked`` (distinct ids)."""
    return len(gold & set(ranked[:k])) / len(gold) if gold else 0.0


def all_in(ranked: Iterable[str], gold: set[str]) -> bool:
    """Whether every gold id is in ``ranked``."""
    return bool(gold) and gold <= set(ranked)


def hit_at(ranked: Sequence[str], gold: str, k: int) -> bool:
    """Whether ``gold`` is among the first ``k`` of ``ranked``."""
    return gold in ranked[:k]


@dataclass
class CragCalibration:
    """CRAG verdicts of guided runs against the gold sections of their questions.

    One entry per evaluated round (``trace["agentic"]["crag"]``): the verdict and whether all
    / any of the question's gold ids were in the evidence the verdict was given on
    (``evidence_source_ids``). A decomposed question has rounds for each sub-question (their
    ``question`` differs from the run's question); they are counted like the others, against
    the gold of the whole question (sub-question gold is not known).
    """

    rounds: list[dict[str, Any]] = field(default_factory=list)
    runs: int = 0
    runs_without_rounds: int = 0

    def add(
        self, question: str, crag: Sequence[dict[str, Any]], gold: set[str]
    ) -> list[dict[str, Any]]:
        """Record the CRAG rounds of one guided run for ``question`` with ``gold`` ids; return
        them compacted (verdict, question, evidence ids) for the per-question results."""
        self.runs += 1
        if not crag:
            self.runs_without_rounds += 1
        targets = {r.get("question") for r in crag}
        decomposed = len(targets) > 1 or any(t and t != question for t in targets)
        for position, entry in enumerate(crag):
            evidence = set(entry.get("evidence_source_ids") or [])
            self.rounds.append(
                {
                    "verdict": str(entry.get("verdict")),
                    "round": entry.get("round", position),
                    "sub_question": entry.get("question") != question,
                    "decomposed_run": decomposed,
                    "evidence": len(evidence),
                    "all_gold": all_in(evidence, gold),
                    "any_gold": bool(gold & evidence),
                    # a sub-question needs only its own part of the gold (unknown which):
                    # at least one gold section; the whole question needs all of it
                    "gold_there": bool(gold & evidence)
                    if entry.get("question") != question
                    else all_in(evidence, gold),
                }
            )
        return [
            {
                "verdict": c.get("verdict"),
                "question": c.get("question"),
                "evidence_source_ids": c.get("evidence_source_ids", []),
            }
            for c in crag
        ]

    def summary(self) -> list[dict[str, Any]]:
        """Per verdict (known verdicts first): count, share of rounds, gold shares."""
        names = [v for v in VERDICTS if any(r["verdict"] == v for r in self.rounds)]
        names += sorted({r["verdict"] for r in self.rounds} - set(VERDICTS))
        out = []
        total = len(self.rounds)
        for name in [*names, "all"]:
            rows = [r for r in self.rounds if name == "all" or r["verdict"] == name]
            n = len(rows)
            out.append(
                {
                    "verdict": name,
                    "rounds": n,
                    "share_of_rounds": n / total if total else 0.0,
                    "all_gold_in_evidence": sum(r["all_gold"] for r in rows) / n if n else 0.0,
                    "any_gold_in_evidence": sum(r["any_gold"] for r in rows) / n if n else 0.0,
                    "gold_there": sum(r["gold_there"] for r in rows) / n if n else 0.0,
                    "whole_question_rounds": len(
                        whole := [r for r in rows if not r["sub_question"]]
                    ),
                    "whole_question_all_gold": (
                        sum(r["all_gold"] for r in whole) / len(whole) if whole else 0.0
                    ),
                    "mean_evidence_sections": sum(r["evidence"] for r in rows) / n if n else 0.0,
                    "rounds_of_decomposed_runs": sum(r["decomposed_run"] for r in rows),
                }
            )
        return out

    def table_rows(self) -> list[list[Any]]:
        """Rows for ``_common.table`` with :data:`CRAG_TABLE_HEADERS`."""
        return [
            [
                s["verdict"],
                s["rounds"],
                s["share_of_rounds"],
                s["gold_there"],
                s["whole_question_rounds"],
                s["whole_question_all_gold"],
                s["all_gold_in_evidence"],
                s["any_gold_in_evidence"],
                s["mean_evidence_sections"],
                s["rounds_of_decomposed_runs"],
            ]
            for s in self.summary()
        ]

    def note(self) -> str:
        """The counting rule, printed under the table."""
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
