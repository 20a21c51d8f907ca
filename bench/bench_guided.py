"""Guided mode on the statutes: citation hit@k, CRAG verdict calibration, react for comparison.

Ingests the four statute files (BNS, BNSS, BSA, CPA) into the collection ``statutes`` (or
reuses the index in ``--data-dir``) and answers the synthetic_qa.json questions (all 996 by
default) with ``execute_agentic_search`` (heuristic reasoner, memory off) in each of
``--modes`` (default ``guided,react``), warm. Gold = abbreviate(source_act) + "_S" +
source_section. Per mode:

- citation hit@1 / hit@5: the gold section among the first k final citations
  (``response.answer.citations``, in answer order);
- gold retrieved at all during the run (``trace["retrieved_source_ids"]``);
- status counts, run latency p50 / p95, mean citations and sections retrieved;
- hit@5 per act.

For guided runs, the CRAG verdict calibration: each evaluated round of
``trace["agentic"]["crag"]`` with its verdict and whether the gold section was in the
evidence the verdict was given on (``evidence_source_ids``). Results (summary and one record
per question) go to ``bench/results/guided_statutes.json``.

    python bench/bench_guided.py [--data-dir DIR] [--limit N] [--modes guided,react] [--rebuild]

The index is kept in ``--data-dir`` (default ``bench/results/statutes-data``, the directory
bench_retrieval.py's documented command uses); re-ingesting unchanged files is a no-op, and
``--rebuild`` re-ingests from scratch (e.g. after a chunking change). ``--limit N`` takes
N evenly spaced questions (the file is ordered by act, so every act is sampled).
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections import Counter
from typing import Any

from _common import (
    ACTS_4,
    COLLECTION,
    RESULTS,
    bench_settings,
    data_dir,
    load_average,
    load_questions,
    percentile,
    print_header,
    statute_paths,
    table,
)
from sleuth.app import Sleuth
from sleuth.eval.metrics import CRAG_TABLE_HEADERS, CragCalibration, distinct, hit_at

DEFAULT_DATA_DIR = RESULTS / "statutes-data"
RESULTS_FILE = RESULTS / "guided_statutes.json"
KNOWN_MODES = ("guided", "react")
WARMUP_QUESTION = "What is the punishment for theft?"


def parse_modes(value: str) -> list[str]:
    modes = [m.strip() for m in value.split(",") if m.strip()]
    unknown = [m for m in modes if m not in KNOWN_MODES]
    if unknown or not modes:
        raise argparse.ArgumentTypeError(f"modes are {', '.join(KNOWN_MODES)}; got {value!r}")
    return list(dict.fromkeys(modes))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data-dir",
        default=str(DEFAULT_DATA_DIR),
        help="keep/reuse the index here (default bench/results/statutes-data)",
    )
    parser.add_argument(
        "--limit", type=int, default=None, help="N evenly spaced questions (all 996)"
    )
    parser.add_argument(
        "--modes", type=parse_modes, default=list(KNOWN_MODES), help="guided,react (both)"
    )
    parser.add_argument("--rebuild", action="store_true", help="re-ingest from scratch")
    args = parser.parse_args()
    paths = statute_paths(ACTS_4)
    questions = load_questions()
    if args.limit and args.limit < len(questions):  # evenly spaced: every act is sampled
        step = len(questions) / args.limit
        questions = [questions[int(i * step)] for i in range(args.limit)]
    n = len(questions)

    with data_dir(args.data_dir, "sleuth-bench-guided-") as ddir:
        settings = bench_settings(ddir)
        print_header(
            "bench_guided: guided (and react) runs on the statutes, citation hit@k and CRAG",
            [
                ("data dir", f"{ddir} (kept)"),
                (
                    "questions",
                    f"{n} of synthetic_qa.json" + (" (evenly spaced)" if args.limit else ""),
                ),
                ("modes", ", ".join(args.modes)),
                ("reasoner / max iterations", f"{settings.llm} / {settings.max_iterations}"),
                ("guided max refinements / memory", f"{settings.max_refinements} / off"),
            ],
        )
        app = Sleuth(settings)
        if args.rebuild and app.catalog.get_collection(COLLECTION) is not None:
            for doc in app.catalog.list_documents(COLLECTION):
                app.pipeline.delete(COLLECTION, doc.doc_id)
        t0 = time.perf_counter()
        report = app.pipeline.ingest(paths, COLLECTION)
        ingest_s = time.perf_counter() - t0
        if not report.ok:
            raise SystemExit(f"ingest failed: {[f.message for f in report.by_status('failed')]}")
        sections = {sid for sid, _ in app.catalog.all_section_keys(COLLECTION)}
        missing_gold = sorted({q.gold for q in questions} - sections)
        print(
            f"ingest: {ingest_s:.1f} s, {report.n_embedded} chunks embedded, files "
            f"{report.totals}; {len(sections)} sections; gold ids not in the collection: "
            f"{missing_gold or 'none'}"
        )
        for mode in args.modes:
            app.agent.execute_agentic_search(
                WARMUP_QUESTION, COLLECTION, mode=mode, use_memory=False
            )
        print(f"load average before the timed runs: {load_average()}")
        print()

        records: list[dict[str, Any]] = [
            {"index": q.index, "question": q.text, "gold": q.gold, "act": q.act} for q in questions
        ]
        calibration = CragCalibration()
        seconds: dict[str, list[float]] = {m: [] for m in args.modes}
        statuses: dict[str, Counter[str]] = {m: Counter() for m in args.modes}
        for mode in args.modes:
            for q, rec in zip(questions, records, strict=True):
                t0 = time.perf_counter()
                resp = app.agent.execute_agentic_search(
                    q.text, COLLECTION, mode=mode, use_memory=False
                )
                seconds[mode].append(time.perf_counter() - t0)
                statuses[mode][resp.status.value] += 1
                rec[mode] = {
                    "status": resp.status.value,
                    "cited": distinct(c.source_id for c in resp.answer.citations),
                    "retrieved": distinct(resp.trace.get("retrieved_source_ids", [])),
                    "seconds": round(seconds[mode][-1], 4),
                }
                if mode == "guided":
                    crag = resp.trace.get("agentic", {}).get("crag", [])
                    rec[mode]["crag"] = calibration.add(q.text, crag, {q.gold})
        load_after = load_average()

        def share(mode: str, test: Any, recs: list[dict[str, Any]] | None = None) -> float:
            recs = records if recs is None else recs
            return sum(1 for r in recs if test(r[mode], r["gold"])) / len(recs) if recs else 0.0

        summary: dict[str, Any] = {}
        for mode in args.modes:
            summary[mode] = {
                "runs": n,
                "cite_hit@1": share(mode, lambda m, g: hit_at(m["cited"], g, 1)),
                "cite_hit@5": share(mode, lambda m, g: hit_at(m["cited"], g, 5)),
                "gold_retrieved": share(mode, lambda m, g: g in m["retrieved"]),
                "mean_citations": statistics.mean(len(r[mode]["cited"]) for r in records),
                "mean_retrieved": statistics.mean(len(r[mode]["retrieved"]) for r in records),
                "p50_s": percentile(seconds[mode], 50),
                "p95_s": percentile(seconds[mode], 95),
                "mean_s": statistics.mean(seconds[mode]),
                "statuses": dict(statuses[mode].most_common()),
            }
        print(
            table(
                [
                    "mode",
                    "runs",
                    "cite hit@1",
                    "cite hit@5",
                    "gold retrieved",
                    "mean citations",
                    "mean retrieved",
                    "p50 s",
                    "p95 s",
                ],
                [
                    [
                        mode,
                        s["runs"],
                        s["cite_hit@1"],
                        s["cite_hit@5"],
                        s["gold_retrieved"],
                        s["mean_citations"],
                        s["mean_retrieved"],
                        s["p50_s"],
                        s["p95_s"],
                    ]
                    for mode, s in summary.items()
                ],
                title=f"Agentic runs over {n} synthetic questions (hit@k of the final citations)",
            )
        )
        print()
        seen = sorted({s for counts in statuses.values() for s in counts})
        print(
            table(
                ["mode", *seen],
                [[m, *[statuses[m].get(s, 0) for s in seen]] for m in args.modes],
                title="Status counts",
            )
        )
        print()
        by_act: dict[str, list[dict[str, Any]]] = {}
        for r in records:
            by_act.setdefault(r["act"], []).append(r)
        print(
            table(
                ["act", "questions", *[f"{m} cite hit@5" for m in args.modes]],
                [
                    [
                        act,
                        len(recs),
                        *[
                            share(m, lambda x, g: hit_at(x["cited"], g, 5), recs)
                            for m in args.modes
                        ],
                    ]
                    for act, recs in sorted(by_act.items())
                ],
                title="Citation hit@5 per act",
            )
        )
        print()
        if "guided" in args.modes:
            print(
                table(
                    list(CRAG_TABLE_HEADERS),
                    calibration.table_rows(),
                    title="CRAG verdict calibration (guided runs; the gold section in the "
                    "evidence the verdict was given on)",
                )
            )
            print(calibration.note() + " One gold section per question: all = any.")
            print()
        print(f"load average after the runs: {load_after}; at the end: {load_average()}")

        RESULTS.mkdir(parents=True, exist_ok=True)
        payload = {
            "benchmark": "bench_guided",
            "questions": n,
            "modes": args.modes,
            "reasoner": settings.llm,
            "summary": summary,
            "crag_calibration": calibration.summary() if "guided" in args.modes else None,
            "per_question": records,
        }
        RESULTS_FILE.write_text(json.dumps(payload, indent=1, ensure_ascii=False), encoding="utf-8")
        print(f"results: {RESULTS_FILE.relative_to(RESULTS.parents[1])}")
        app.close()


if __name__ == "__main__":
    main()
