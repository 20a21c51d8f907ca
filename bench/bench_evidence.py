"""Gold among the guided generator's evidence: where retrieval leaves the reader.

The guided generator reads the sections ``_generation_evidence`` hands it (the first
``GENERATION_SECTIONS`` focused, up to ``MAX_GENERATION_SECTIONS`` in all), ranked by the
cross-encoder. A gold section that is not among them cannot be cited, whatever the model.
This runs the guided mode without a model (the reranker on, as with one) over the judged
set's or the lay set's in-corpus questions of one split and records, per question, the
evidence handed to the generator and the gold section's position in it; the table gives
``ev@k`` (gold among the first k sections, k = 1, 3, 5, 8) and the no-model answer's key
facts and gold cited.

``--also-question`` measures one alternative that was tried (2026-12-07, not adopted): the
question as asked searched once beside the router's key phrase.

    python bench/bench_evidence.py --set lay --split dev --data-dir DIR
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ACTS_3, bench_settings, commit, data_dir, print_header, statute_paths
from bench_reader import JUDGED, lay_items

KS = (1, 3, 5, 8)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--set", choices=("judged", "lay"), default="lay")
    parser.add_argument("--split", choices=("dev", "test", "all"), default="dev")
    parser.add_argument("--also-question", action="store_true", help="see the module doc")
    parser.add_argument("--data-dir", help="keep the indexes here (default: a temp dir)")
    parser.add_argument("--out", help="write the per-question records to this JSONL file")
    args = parser.parse_args()

    import sleuth.agents.guided.runtime as runtime
    from sleuth.app import Sleuth
    from sleuth.eval.datasets import load_jsonl
    from sleuth.eval.runner import EvalConfig, prepare_collection, run_eval

    handed: dict[str, list[str]] = {}
    evidence_of = runtime._generation_evidence

    def recorded(rt: Any, state: Any) -> Any:
        out = evidence_of(rt, state)
        handed[state.question] = [e.source_id for e in out]
        return out

    runtime._generation_evidence = recorded
    if args.also_question:
        plan_of = runtime.plan_question

        def with_question(question: str, model: Any, **kwargs: Any) -> Any:
            result = plan_of(question, model, **kwargs)
            plan = result.value
            queries = [*plan.complementary_queries, question.strip()]
            plan = plan.model_copy(update={"complementary_queries": queries})
            return dataclasses.replace(result, value=plan)

        runtime.plan_question = with_question

    dataset = load_jsonl(JUDGED, statute_paths(ACTS_3))
    if args.set == "lay":
        with tempfile.TemporaryDirectory() as tmp:
            questions = Path(tmp) / "statutes_lay.jsonl"
            questions.write_text(
                "".join(json.dumps(i) + "\n" for i in lay_items()), encoding="utf-8"
            )
            lay = load_jsonl(questions, statute_paths(ACTS_3))
        dataset = replace(lay, collection=dataset.collection)
    rev = commit()
    print_header(
        "bench_evidence",
        [("set", args.set), ("split", args.split), ("also question", str(args.also_question))],
    )
    with data_dir(args.data_dir, "sleuth-evidence-") as ddir:
        settings = bench_settings(ddir).model_copy(update={"llm": "heuristic", "rerank": "on"})
        app = Sleuth(settings)
        prepared = prepare_collection(app, dataset)
        started = time.perf_counter()
        run = run_eval(app, dataset, EvalConfig(mode="guided", split=args.split), prepared=prepared)
        wall = time.perf_counter() - started
        app.close()
    records = []
    for r in run.records:
        gold = r.get("gold_source_ids") or []
        if not gold:
            continue  # out of scope
        given = handed.get(r["question"], [])
        at = min((given.index(g) for g in gold if g in given), default=None)
        records.append(
            {
                "id": r["id"],
                "position": at,
                "evidence": given,
                "key_facts": r.get("key_facts"),
                "gold_cited": r.get("gold_cited"),
            }
        )
    if args.out:
        meta = {"meta": True, "set": args.set, "split": args.split, "commit": rev}
        meta["also_question"] = args.also_question
        Path(args.out).write_text(
            "".join(json.dumps(x) + "\n" for x in [meta, *records]), encoding="utf-8"
        )
    n = len(records)
    row = {
        f"ev@{k}": sum(x["position"] is not None and x["position"] < k for x in records) / n
        for k in KS
    }
    row["key facts"] = sum(x["key_facts"] or 0 for x in records) / n
    row["gold cited"] = sum(bool(x["gold_cited"]) for x in records) / n
    print(f"{args.set} {args.split} ({n} in corpus), {wall:.0f} s")
    print("| " + " | ".join(row) + " |")
    print("|" + "---|" * len(row))
    print("| " + " | ".join(f"{v:.2f}" for v in row.values()) + " |")


if __name__ == "__main__":
    main()
