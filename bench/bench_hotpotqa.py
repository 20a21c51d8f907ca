"""Multi-hop retrieval on HotpotQA: single-shot BM25 / hybrid against guided and react runs.

Ingests ``hotpotqa_train_corpus.json`` (994 paragraphs, one JSON object ``{title:
[sentences]}``: one section per title, ``source_id`` = :func:`sleuth.ingest.records.
title_source_id`) into the collection ``hotpotqa`` and answers the 100 questions of
``hotpotqa_train.json`` (78 bridge, 22 comparison). Gold = the titles of ``supporting_facts``
(two per question), mapped to source ids with :func:`sleuth.ingest.records.title_source_ids`
(the loader's mapping). All numbers are title-level, in one run:

- single-shot ``KnowledgeBase.search`` in ``bm25`` and ``hybrid`` mode (``--k-search`` chunks,
  deduplicated to sections in rank order): recall@2/5/10 (share of the gold titles among the
  first k distinct source ids) and both-gold@10;
- ``execute_agentic_search`` in ``guided`` and ``react`` mode (heuristic reasoner, memory
  off): the same recall@k over ``trace["retrieved_source_ids"]`` (order of first retrieval),
  both gold retrieved at all, mean sections retrieved, both gold among the final citations,
  mean run latency;
- both-gold per question type (bridge / comparison);
- the CRAG verdict calibration of the guided runs: per verdict, the rounds and the share
  whose evidence held all / any gold title.

Reference: single-shot bm25s over the pooled corpus, from ``../shared/data/README.md``
(recall@2/5/10 0.60 / 0.76 / 0.88, both-gold@10 0.77; recomputed in the same run when
``bm25s`` is importable). Target: agentic both-gold-in-retrieved ≥ 0.90.

Results (summary and one record per question) go to ``bench/results/hotpotqa.json``.

    python bench/bench_hotpotqa.py [--data-dir DIR] [--limit N] [--k-search 30]

The index is kept in ``--data-dir`` (default ``bench/results/hotpotqa-data``); a later run
reuses it (re-ingesting the unchanged file is a no-op). ``--limit N`` takes the first N
questions.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import time
from collections import Counter
from typing import Any

from _common import (
    DATA,
    RESULTS,
    bench_settings,
    data_dir,
    load_average,
    percentile,
    print_header,
    run_shared_baseline,
    table,
)
from sleuth.app import Sleuth
from sleuth.eval.metrics import CRAG_TABLE_HEADERS, CragCalibration, all_in, distinct, recall_at
from sleuth.ingest.records import title_source_ids

HOTPOT = DATA / "hotpotqa"
CORPUS = HOTPOT / "hotpotqa_train_corpus.json"
QUESTIONS = HOTPOT / "hotpotqa_train.json"
COLLECTION = "hotpotqa"
DEFAULT_DATA_DIR = RESULTS / "hotpotqa-data"
RESULTS_FILE = RESULTS / "hotpotqa.json"
KS = (2, 5, 10)
SEARCH_MODES = ("bm25", "hybrid")
AGENT_MODES = ("guided", "react")
# Single-shot bm25s over the pooled corpus, title-level (../shared/data/README.md).
BASELINE_BM25_HOTPOT = {"recall@2": 0.60, "recall@5": 0.76, "recall@10": 0.88, "both@10": 0.77}
TARGET_BOTH_RETRIEVED = 0.90


def load_hotpot(limit: int | None) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """The questions (first ``limit``) with ``gold`` source ids, and the title -> id map."""
    for path in (CORPUS, QUESTIONS):
        if not path.is_file():
            raise SystemExit(f"missing data file: {path}")
    corpus = json.loads(CORPUS.read_text(encoding="utf-8"))
    ids = title_source_ids(corpus)
    raw = json.loads(QUESTIONS.read_text(encoding="utf-8"))
    questions = []
    for index, q in enumerate(raw[:limit] if limit else raw):
        titles = list(dict.fromkeys(t for t, _ in q["supporting_facts"]))
        missing = [t for t in titles if t not in ids]
        if missing:
            raise SystemExit(f"question {index}: gold titles not in the corpus: {missing}")
        questions.append(
            {
                "index": index,
                "id": q.get("_id", str(index)),
                "question": q["question"],
                "answer": q.get("answer", ""),
                "type": q.get("type", "?"),
                "level": q.get("level", "?"),
                "gold_titles": titles,
                "gold": [ids[t] for t in titles],
            }
        )
    return questions, ids


def baseline_same_run() -> dict[str, float] | None:
    """Title-level recall of ../shared/tools/baseline_bm25.py's hotpotqa(), in this process."""
    text = run_shared_baseline("hotpotqa")
    if text is None:
        return None
    out: dict[str, float] = {}
    for k, rec, both in re.findall(r"recall@(\d+) = ([0-9.]+)\s+both@\d+ = ([0-9.]+)", text):
        out[f"recall@{k}"] = float(rec)
        out[f"both@{k}"] = float(both)
    return out or None


def met(value: float, target: float) -> str:
    """'MET' or 'NOT MET (short by x)' for a higher-is-better target."""
    return "MET" if value >= target else f"NOT MET (short by {target - value:.3f})"


def mean(values: list[float]) -> float:
    return statistics.mean(values) if values else float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data-dir",
        default=str(DEFAULT_DATA_DIR),
        help="keep/reuse the index here (default bench/results/hotpotqa-data)",
    )
    parser.add_argument("--limit", type=int, default=None, help="first N questions (all 100)")
    parser.add_argument("--k-search", type=int, default=30, help="chunks per search (30)")
    args = parser.parse_args()
    questions, title_ids = load_hotpot(args.limit)
    n = len(questions)

    with data_dir(args.data_dir, "sleuth-bench-hotpotqa-") as ddir:
        settings = bench_settings(ddir)
        print_header(
            "bench_hotpotqa: multi-hop title-level recall, single-shot vs agentic (heuristic)",
            [
                ("data dir", f"{ddir} (kept)"),
                ("questions", f"{n} of hotpotqa_train.json"),
                ("corpus", f"{CORPUS.name}: {len(title_ids)} titles"),
                ("chunks per single-shot search", f"{args.k_search} (deduplicated to sections)"),
                ("reasoner / max iterations", f"{settings.llm} / {settings.max_iterations}"),
                ("guided max refinements / memory", f"{settings.max_refinements} / off"),
            ],
        )
        app = Sleuth(settings)
        t0 = time.perf_counter()
        report = app.pipeline.ingest([CORPUS], COLLECTION)
        ingest_s = time.perf_counter() - t0
        if not report.ok:
            raise SystemExit(f"ingest failed: {[f.message for f in report.by_status('failed')]}")
        info = app.catalog.get_collection(COLLECTION)
        assert info is not None
        sections = dict(app.catalog.all_section_keys(COLLECTION))
        missing_gold = sorted({g for q in questions for g in q["gold"]} - set(sections))
        print(
            f"ingest: {ingest_s:.1f} s, {report.n_embedded} chunks embedded, files "
            f"{report.totals}; collection: {len(sections)} sections, {info.n_chunks} chunks; "
            f"gold ids not in the collection: {missing_gold or 'none'}"
        )
        app.kb.search(COLLECTION, "warm up", k=5, mode="hybrid")
        app.agent.execute_agentic_search(
            "Which magazine was started first?", COLLECTION, mode="guided", use_memory=False
        )
        print(f"load average before the timed runs: {load_average()}")
        print()

        records: list[dict[str, Any]] = [dict(q) for q in questions]
        search_s: dict[str, list[float]] = {m: [] for m in SEARCH_MODES}
        for mode in SEARCH_MODES:
            for q, rec in zip(questions, records, strict=True):
                t0 = time.perf_counter()
                hits = app.kb.search(COLLECTION, q["question"], k=args.k_search, mode=mode)  # type: ignore[arg-type]
                search_s[mode].append(time.perf_counter() - t0)
                rec[mode] = {"ranked": distinct(h.chunk.source_id for h in hits)[:10]}

        calibration = CragCalibration()
        run_s: dict[str, list[float]] = {m: [] for m in AGENT_MODES}
        statuses: dict[str, Counter[str]] = {m: Counter() for m in AGENT_MODES}
        for mode in AGENT_MODES:
            for q, rec in zip(questions, records, strict=True):
                t0 = time.perf_counter()
                resp = app.agent.execute_agentic_search(
                    q["question"], COLLECTION, mode=mode, use_memory=False
                )
                run_s[mode].append(time.perf_counter() - t0)
                statuses[mode][resp.status.value] += 1
                retrieved = distinct(resp.trace.get("retrieved_source_ids", []))
                cited = distinct(c.source_id for c in resp.answer.citations)
                rec[mode] = {
                    "status": resp.status.value,
                    "retrieved": retrieved,
                    "cited": cited,
                    "seconds": round(run_s[mode][-1], 4),
                    "tool_calls": len(resp.tool_calls),
                    "answer": resp.answer.answer_text[:300],
                }
                if mode == "guided":
                    crag = resp.trace.get("agentic", {}).get("crag", [])
                    rec[mode]["crag"] = calibration.add(q["question"], crag, set(q["gold"]))
        load_after = load_average()

        def gold(rec: dict[str, Any]) -> set[str]:
            return set(rec["gold"])

        summary: dict[str, dict[str, Any]] = {}
        for mode in SEARCH_MODES:
            ranked = [(r[mode]["ranked"], gold(r)) for r in records]
            summary[f"single-shot {mode}"] = {
                **{f"recall@{k}": mean([recall_at(x, g, k) for x, g in ranked]) for k in KS},
                "both@10": mean([all_in(x[:10], g) for x, g in ranked]),
                "mean_latency_s": mean(search_s[mode]),
            }
        for mode in AGENT_MODES:
            ranked = [(r[mode]["retrieved"], gold(r)) for r in records]
            summary[f"agentic {mode}"] = {
                **{f"recall@{k}": mean([recall_at(x, g, k) for x, g in ranked]) for k in KS},
                "both@10": mean([all_in(x[:10], g) for x, g in ranked]),
                "both_retrieved": mean([all_in(x, g) for x, g in ranked]),
                "mean_retrieved": mean([len(x) for x, _ in ranked]),
                "both_cited": mean([all_in(r[mode]["cited"], gold(r)) for r in records]),
                "mean_citations": mean([len(r[mode]["cited"]) for r in records]),
                "mean_latency_s": mean(run_s[mode]),
                "p50_latency_s": percentile(run_s[mode], 50),
                "p95_latency_s": percentile(run_s[mode], 95),
                "statuses": dict(statuses[mode].most_common()),
            }

        baseline = baseline_same_run()
        rows: list[list[Any]] = [
            [
                "bm25s single-shot (README reference)",
                *[BASELINE_BM25_HOTPOT[f"recall@{k}"] for k in KS],
                BASELINE_BM25_HOTPOT["both@10"],
                *[""] * 5,
            ]
        ]
        if baseline:
            rows.append(
                [
                    "bm25s single-shot (same run, all 100)",
                    *[baseline.get(f"recall@{k}", float("nan")) for k in KS],
                    baseline.get("both@10", float("nan")),
                    *[""] * 5,
                ]
            )
        for name, s in summary.items():
            agentic = name.startswith("agentic")
            rows.append(
                [
                    f"sleuth {name}",
                    *[s[f"recall@{k}"] for k in KS],
                    s["both@10"],
                    s["both_retrieved"] if agentic else "",
                    f"{s['mean_retrieved']:.1f}" if agentic else "",
                    s["both_cited"] if agentic else "",
                    f"{s['mean_citations']:.1f}" if agentic else "",
                    f"{s['mean_latency_s'] * 1e3:.1f}",
                ]
            )
        print(
            table(
                [
                    "retriever",
                    "recall@2",
                    "recall@5",
                    "recall@10",
                    "both@10",
                    "both retrieved (all)",
                    "mean retrieved",
                    "both cited",
                    "mean cited",
                    "mean ms",
                ],
                rows,
                title=f"Title-level retrieval over {n} questions (agentic: recall@k over the "
                "order of first retrieval)",
            )
        )
        print()
        seen = sorted({s for counts in statuses.values() for s in counts})
        print(
            table(
                ["mode", *seen],
                [[m, *[statuses[m].get(s, 0) for s in seen]] for m in AGENT_MODES],
                title="Agentic run status counts",
            )
        )
        print()
        by_type: dict[str, list[dict[str, Any]]] = {}
        for r in records:
            by_type.setdefault(r["type"], []).append(r)
        type_rows = []
        for kind, recs in sorted(by_type.items()):
            row: list[Any] = [kind, len(recs)]
            row += [
                mean([all_in(r[m]["ranked"][:10], gold(r)) for r in recs]) for m in SEARCH_MODES
            ]
            for m in AGENT_MODES:
                row.append(mean([all_in(r[m]["retrieved"], gold(r)) for r in recs]))
                row.append(mean([all_in(r[m]["cited"], gold(r)) for r in recs]))
            type_rows.append(row)
            summary.setdefault("by_type", {})[kind] = dict(
                zip(
                    [
                        "questions",
                        "bm25 both@10",
                        "hybrid both@10",
                        "guided both retrieved",
                        "guided both cited",
                        "react both retrieved",
                        "react both cited",
                    ],
                    row[1:],
                    strict=True,
                )
            )
        print(
            table(
                [
                    "type",
                    "questions",
                    "bm25 both@10",
                    "hybrid both@10",
                    "guided both retrieved",
                    "guided both cited",
                    "react both retrieved",
                    "react both cited",
                ],
                type_rows,
                title="Both gold titles, per question type",
            )
        )
        print()
        print(
            table(
                list(CRAG_TABLE_HEADERS),
                calibration.table_rows(),
                title="CRAG verdict calibration (guided runs; gold titles in the evidence the "
                "verdict was given on)",
            )
        )
        print(calibration.note())
        print()
        print(
            "Reference (README, single-shot bm25s): "
            f"recall@10 {BASELINE_BM25_HOTPOT['recall@10']:.2f}, "
            f"both-gold@10 {BASELINE_BM25_HOTPOT['both@10']:.2f}"
        )
        for mode in AGENT_MODES:
            value = summary[f"agentic {mode}"]["both_retrieved"]
            print(
                f"Target: {mode} both-gold-in-retrieved ≥ {TARGET_BOTH_RETRIEVED:.2f}: "
                f"{value:.3f} → {met(value, TARGET_BOTH_RETRIEVED)}"
            )
        print(f"load average after the runs: {load_after}; at the end: {load_average()}")

        RESULTS.mkdir(parents=True, exist_ok=True)
        payload = {
            "benchmark": "bench_hotpotqa",
            "questions": n,
            "k_search": args.k_search,
            "reasoner": settings.llm,
            "reference_bm25s_readme": BASELINE_BM25_HOTPOT,
            "reference_bm25s_same_run": baseline,
            "target_both_retrieved": TARGET_BOTH_RETRIEVED,
            "summary": summary,
            "crag_calibration": calibration.summary(),
            "per_question": records,
        }
        RESULTS_FILE.write_text(json.dumps(payload, indent=1, ensure_ascii=False), encoding="utf-8")
        print(f"results: {RESULTS_FILE.relative_to(RESULTS.parents[1])}")
        app.close()


if __name__ == "__main__":
    main()
