"""Answer quality on the handed sets and on questions the collection cannot answer.

For each reasoner (``heuristic``; ``local``: the Qwen2.5-Coder-1.5B of ``SLEUTH_LLM=local``,
in process) and each set, both modes through ``sleuth.eval.run_eval`` (the records and
metrics of ``sleuth eval``), beside a same-run single-shot baseline (one hybrid
``search_sections`` of the question, top 10):

* ``musique`` — the 51 MuSiQue dev questions (2 to 4 hops) over their 1,890 paragraphs;
* ``hotpotqa`` — the 100 HotpotQA questions over their corpus;
* ``statutes`` — the 996 questions of ``synthetic_qa.json`` over the four acts;
* ``out_of_corpus`` — questions the collection does not hold the answer to, over BNS, BNSS
  and BSA (the Consumer Protection Act left out): the CPA questions that name the act
  (``cpa_named``) and 50 HotpotQA questions (``encyclopedic``). Every one should be
  declined. The CPA questions that do not name it ("What steps should I follow for
  appeal?") are run too (``cpa_unnamed``) and reported without a target: BNSS has appeals,
  limitation periods and commissions of its own, so an answer from it may be fair.

Reported per set and mode: all gold retrieved, recall@10 (over the run's retrieved sections
in order), all gold by hop count (MuSiQue), answer contains gold, F1, citation precision
(share of cited sections that are gold), gold cited (runs citing at least one gold section),
declined (insufficient context), sections retrieved per run, p50 seconds.

Targets (issue 12): MuSiQue all gold ≥ 0.65 guided and ≥ 0.60 react; HotpotQA all gold
≥ 0.94; statutes gold cited ≥ 0.95 with citation precision ≥ 0.80; out-of-corpus declined
≥ 0.95; with the local model, MuSiQue answer contains ≥ 0.40.

    python bench/bench_quality.py [--reasoners heuristic local] [--model-sets musique]
        [--model-limit 51] [--data-dir DIR] [--records FILE]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

from _common import DATA, bench_settings, data_dir, load_average, print_header, table, verdict
from sleuth.eval.metrics import mean, percentile

SETS = ("musique", "hotpotqa", "statutes", "out_of_corpus")
MODES = ("guided", "react")
BASELINE_K = 10
HOTPOTQA_OUT = 50


def out_of_corpus() -> Any:
    """The out-of-corpus questions over BNS, BNSS and BSA (see the module docstring)."""
    from sleuth.eval.datasets import STATUTE_ACTS, EvalDataset, EvalQuestion, load_hotpotqa

    raw = json.loads((DATA / "statutes" / "synthetic_qa.json").read_text(encoding="utf-8"))
    questions = []
    for index, item in enumerate(raw):
        if "Consumer Protection" not in item["source_act"]:
            continue
        named = "consumer protection act" in item["instruction"].lower()
        questions.append(
            EvalQuestion(
                id=f"cpa{index}",
                question=item["instruction"],
                type="cpa_named" if named else "cpa_unnamed",
            )
        )
    hotpot = list(load_hotpotqa(DATA).questions)
    random.Random(12).shuffle(hotpot)
    questions += [
        EvalQuestion(id=f"hp{q.id}", question=q.question, type="encyclopedic")
        for q in hotpot[:HOTPOTQA_OUT]
    ]
    acts = tuple(DATA / "statutes" / name for name in STATUTE_ACTS if "consumer" not in name)
    return EvalDataset(
        name="out_of_corpus",
        questions=tuple(questions),
        corpus=acts,
        collection="eval_statutes_without_cpa",
        source="synthetic_qa.json (CPA) + hotpotqa",
    )


def load(name: str) -> Any:
    from sleuth.eval.datasets import load_dataset

    return out_of_corpus() if name == "out_of_corpus" else load_dataset(name, DATA)


def hops(kind: str) -> str:
    """MuSiQue's ``2hop``, ``3hop1``… → ``2hop``; other sets keep their type."""
    return kind[:4] if kind[:1].isdigit() else kind


def summarize(records: list[dict[str, Any]]) -> dict[str, Any]:
    judged = [r for r in records if r["gold_source_ids"]]

    def share(rows: list[dict[str, Any]], key: str) -> float | None:
        return mean(None if r.get(key) is None else float(r[key]) for r in rows)

    by_type: dict[str, list[dict[str, Any]]] = {}
    for r in records:
        by_type.setdefault(hops(str(r.get("type") or "")), []).append(r)
    return {
        "n": len(records),
        "all_gold": share(judged, "all_gold_retrieved"),
        "recall@10": mean(r["recall_at"]["10"] for r in judged) if judged else None,
        "contains": share(judged, "answer_contains"),
        "f1": share(judged, "f1"),
        "cite_prec": share(judged, "citation_precision"),
        "gold_cited": mean(float(bool(set(r["cited"]) & set(r["gold_source_ids"]))) for r in judged)
        if judged
        else None,
        "declined": mean(float(r["insufficient_context"]) for r in records),
        "retrieved": mean(len(r["retrieved"]) for r in records),
        "p50_s": percentile([r["latency_s"] for r in records], 50),
        "by_type": {
            kind: {
                "n": len(rows),
                "all_gold": share([r for r in rows if r["gold_source_ids"]], "all_gold_retrieved"),
                "declined": mean(float(r["insufficient_context"]) for r in rows),
            }
            for kind, rows in sorted(by_type.items())
        },
    }


def baseline(app: Any, collection: str, questions: list[Any]) -> dict[str, Any]:
    """One hybrid search of each question, top :data:`BASELINE_K` sections."""
    rows, by_type = [], {}
    for q in questions:
        if not q.gold_source_ids:
            continue
        top = [
            h.chunk.source_id for h in app.kb.search_sections(collection, q.question, k=BASELINE_K)
        ]
        gold = set(q.gold_source_ids)
        ok = float(gold <= set(top))
        rows.append((ok, len(gold & set(top)) / len(gold)))
        by_type.setdefault(hops(q.type), []).append(ok)
    return {
        "n": len(rows),
        "all_gold": mean(r[0] for r in rows),
        "recall@10": mean(r[1] for r in rows),
        "by_type": {k: {"n": len(v), "all_gold": mean(v)} for k, v in sorted(by_type.items())},
    }


def fmt(value: Any) -> str:
    return "-" if value is None else f"{value:.3f}" if isinstance(value, float) else str(value)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reasoners", nargs="+", default=["heuristic", "local"])
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    parser.add_argument(
        "--model-sets", nargs="+", default=["musique"], choices=SETS, help="sets a model runs"
    )
    parser.add_argument("--model-limit", type=int, default=51, help="questions per model set")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument("--data-dir", help="keep the indexes here (default: a temp dir)")
    parser.add_argument("--records", help="also write every run's record to this JSONL file")
    parser.add_argument("--json", help="also write the summaries to this file")
    args = parser.parse_args()

    from sleuth.app import Sleuth
    from sleuth.eval.runner import EvalConfig, prepare_collection, run_eval
    from sleuth.llm import testing

    testing.ALLOW_MODEL_REQUESTS = True
    print_header(
        "bench_quality",
        [
            ("reasoners", " ".join(args.reasoners)),
            ("model sets", f"{' '.join(args.model_sets)} (first {args.model_limit}, seed)"),
        ],
    )
    results: dict[str, Any] = {}
    with data_dir(args.data_dir, "sleuth-quality-") as ddir:
        for reasoner in args.reasoners:
            app = Sleuth(bench_settings(ddir).model_copy(update={"llm": reasoner}))
            sets = args.sets if reasoner == "heuristic" else args.model_sets
            for name in sets:
                dataset = load(name)
                prepared = prepare_collection(app, dataset)
                questions = list(dataset.questions)
                limit, seed = None, None
                if reasoner != "heuristic":
                    limit, seed = args.model_limit, args.seed
                    random.Random(seed).shuffle(questions)
                    questions = questions[:limit]
                rows = []
                if reasoner == args.reasoners[0]:
                    base = baseline(app, prepared["collection"], questions)
                    results[f"{name}/single-shot"] = base
                    if base["n"]:
                        rows.append(
                            ["single-shot", base["n"], base["all_gold"], base["recall@10"]]
                            + [None] * 7
                        )
                for mode in MODES:
                    t0 = time.perf_counter()
                    config = EvalConfig(mode=mode, limit=limit, seed=seed)
                    run = run_eval(app, dataset, config, prepared=prepared)
                    summary = summarize(run.records)
                    results[f"{name}/{reasoner}/{mode}"] = summary
                    rows.append(
                        [f"{reasoner} {mode}", *(v for k, v in summary.items() if k != "by_type")]
                    )
                    if args.records:
                        with open(args.records, "a", encoding="utf-8") as out:
                            for record in run.records:
                                tagged = {"set": name, "reasoner": reasoner, "mode": mode}
                                out.write(json.dumps({**tagged, **record}, default=str) + "\n")
                    print(
                        f"  {name} {reasoner} {mode}: {len(run.records)} runs in "
                        f"{time.perf_counter() - t0:.0f} s (load {load_average()})",
                        flush=True,
                    )
                headers = ["run", "n", "all_gold", "recall@10", "contains", "f1", "cite_prec"]
                headers += ["gold_cited", "declined", "retrieved", "p50_s"]
                print(table(headers, rows, title=f"{name} ({reasoner})"), flush=True)
                for key, value in results.items():
                    if key.startswith(f"{name}/") and len(value["by_type"]) > 1:
                        parts = ", ".join(
                            f"{k} {fmt(v['all_gold'])}"
                            + (f" declined {fmt(v['declined'])}" if "declined" in v else "")
                            + f" (n={v['n']})"
                            for k, v in value["by_type"].items()
                        )
                        print(f"  {key} by type: {parts}")
            app.close()
    print("\nTargets (issue 12)")
    checks = [
        ("musique/heuristic/guided", "all_gold", 0.65, "MuSiQue all gold, guided"),
        ("musique/heuristic/react", "all_gold", 0.60, "MuSiQue all gold, react"),
        ("hotpotqa/heuristic/guided", "all_gold", 0.94, "HotpotQA all gold, guided"),
        ("hotpotqa/heuristic/react", "all_gold", 0.94, "HotpotQA all gold, react"),
        ("statutes/heuristic/guided", "gold_cited", 0.95, "statutes gold cited, guided"),
        ("statutes/heuristic/guided", "cite_prec", 0.80, "statutes citation precision, guided"),
        ("statutes/heuristic/react", "gold_cited", 0.95, "statutes gold cited, react"),
        ("statutes/heuristic/react", "cite_prec", 0.80, "statutes citation precision, react"),
        ("musique/local/guided", "contains", 0.40, "MuSiQue answer contains, local guided"),
        ("musique/local/react", "contains", 0.40, "MuSiQue answer contains, local react"),
    ]
    for key, metric, target, label in checks:
        if key in results and results[key][metric] is not None:
            value = results[key][metric]
            print(f"  {label}: {value:.3f} (target ≥ {target}) → {verdict(value, target, True)}")
    for reasoner in args.reasoners:
        for mode in MODES:
            types = results.get(f"out_of_corpus/{reasoner}/{mode}", {}).get("by_type", {})
            out = [v for k, v in types.items() if k in ("cpa_named", "encyclopedic")]
            if out:
                n = sum(v["n"] for v in out)
                rate = sum(v["declined"] * v["n"] for v in out) / n
                print(
                    f"  out-of-corpus declined, {reasoner} {mode}: {rate:.3f} of {n} "
                    f"(target ≥ 0.95) → {verdict(rate, 0.95, True)}"
                )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
