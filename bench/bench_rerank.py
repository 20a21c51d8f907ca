"""The cross-encoder reranker: section hit@k with and without it, and what it costs a search.

Over the BNS, BNSS and BSA, each question goes through ``KnowledgeBase.search_sections``
(hybrid, k = 10: 30 fused chunks, reranked when on) twice — reranking off, then on — and the
gold section's rank is read off both lists. Two question sets, one split (``--split``; a
hash of each id, :func:`sleuth.eval.datasets.split_of`):

- the judged set's in-corpus questions (``bench/data/statutes_judged.jsonl``: natural
  questions that never hold their section's title);
- ``synthetic_qa.json``'s BNS and BNSS template questions (ids ``synthetic-<index>``),
  reported apart for the questions that hold their section's title verbatim and those that
  do not (the template's title is what BM25 matches; the CPA questions are left out: the
  CPA is not in this collection).

Per-question records go to ``bench/results/rerank-<split>.jsonl``; hit@1, hit@5, MRR@10 and
the added p50/p95 milliseconds per search are printed. Run it alone (2 cores).

    python bench/bench_rerank.py --split test --data-dir /tmp/sleuth-bench
"""

from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    ACTS_3,
    REPO,
    STATUTES,
    data_dir,
    print_header,
    split_parser,
    statute_paths,
    write_records,
)

JUDGED = REPO / "bench" / "data" / "statutes_judged.jsonl"
COLLECTION = "rerank_bench"


def questions(split: str) -> list[dict[str, Any]]:
    """``{"id", "set", "question", "gold"}`` of both sets in ``split``."""
    from sleuth.eval.datasets import split_of
    from sleuth.ingest.records import abbreviate

    out = []
    for line in JUDGED.read_text(encoding="utf-8").splitlines():
        item = json.loads(line)
        if item["gold_source_ids"]:
            out.append(
                {
                    "id": item["id"],
                    "set": "judged",
                    "question": item["question"],
                    "gold": item["gold_source_ids"],
                }
            )
    raw = json.loads((STATUTES / "synthetic_qa.json").read_text(encoding="utf-8"))
    acts = {
        json.loads((STATUTES / name).read_text(encoding="utf-8"))["name"]: name for name in ACTS_3
    }
    titles: dict[str, str] = {}
    for name in acts.values():
        act = json.loads((STATUTES / name).read_text(encoding="utf-8"))
        for section in act["sections"]:
            sid = f"{abbreviate(act['name'])}_S{section['section_number']}"
            titles[sid] = section["title"].strip().rstrip(".").lower()
    for index, item in enumerate(raw):
        if item["source_act"] not in acts:
            continue
        sid = f"{abbreviate(item['source_act'])}_S{item['source_section']}"
        titled = bool(titles.get(sid)) and titles[sid] in item["instruction"].lower()
        out.append(
            {
                "id": f"synthetic-{index}",
                "set": "synthetic, title in question" if titled else "synthetic, no title",
                "question": item["instruction"],
                "gold": [sid],
            }
        )
    return [q for q in out if split == "all" or split_of(q["id"]) == split]


def rank_of(ids: list[str], gold: list[str]) -> int | None:
    """1-based rank of the first gold id in ``ids``, or None."""
    return next((i for i, sid in enumerate(ids, 1) if sid in gold), None)


def main() -> None:
    args = split_parser(__doc__, "test").parse_args()

    from sleuth.app import Sleuth
    from sleuth.config import Settings

    print_header("bench_rerank", [("split", args.split)])
    items = questions(args.split)
    records = []
    with data_dir(args.data_dir, "sleuth-rerank-") as ddir:
        apps = {
            flag: Sleuth(Settings(data_dir=ddir, rerank=flag, llm="heuristic"))
            for flag in ("off", "on")
        }
        apps["off"].pipeline.ingest(statute_paths(ACTS_3), COLLECTION)
        for app in apps.values():
            app.kb.search_sections(COLLECTION, "warm up", k=10)
        for item in items:
            row: dict[str, Any] = {k: item[k] for k in ("id", "set", "gold")}
            for flag, app in apps.items():
                t0 = time.perf_counter()
                hits = app.kb.search_sections(COLLECTION, item["question"], k=10)
                row[f"ms_{flag}"] = round(1000 * (time.perf_counter() - t0), 1)
                row[f"rank_{flag}"] = rank_of([h.chunk.source_id for h in hits], item["gold"])
            records.append(row)
    path = write_records(args.out, f"rerank-{args.split}.jsonl", records)
    print(f"{len(records)} questions -> {path}\n")
    print("| set | questions | rerank | hit@1 | hit@5 | MRR@10 | p50 ms | p95 ms |")
    print("|---|---|---|---|---|---|---|---|")
    for name in sorted({r["set"] for r in records}):
        group = [r for r in records if r["set"] == name]
        for flag in ("off", "on"):
            ranks = [r[f"rank_{flag}"] for r in group]
            ms = sorted(r[f"ms_{flag}"] for r in group)

            def hit(k: int, ranks: list[int | None] = ranks) -> float:
                return sum(1 for x in ranks if x is not None and x <= k) / len(ranks)

            mrr = sum(1 / x for x in ranks if x is not None) / len(ranks)
            p95 = ms[max(0, round(0.95 * len(ms)) - 1)]
            print(
                f"| {name} | {len(group)} | {flag} | {hit(1):.3f} | {hit(5):.3f} | {mrr:.3f} "
                f"| {statistics.median(ms):.0f} | {p95:.0f} |"
            )


if __name__ == "__main__":
    main()
