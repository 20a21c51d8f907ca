"""Answer quality on the handed sets and on questions the collection cannot answer, per split.

For each reasoner (``heuristic``; ``local``: the Qwen2.5-Coder-1.5B of ``SLEUTH_LLM=local``,
in process) and each set, both modes through ``sleuth.eval.run_eval`` (the records and
metrics of ``sleuth eval``), beside a same-run single-shot baseline (one hybrid
``search_sections`` of the question, top :data:`BASELINE_K`), on one split (``--split``, a
hash of each question id: rules and thresholds are chosen on ``dev``, numbers reported from
``test``):

* ``musique`` — the MuSiQue dev questions (2 to 4 hops) over their 1,890 paragraphs;
* ``hotpotqa`` — the HotpotQA questions over their corpus;
* ``statutes`` — the questions of ``synthetic_qa.json`` over the four acts, in two groups:
  ``titled`` (the question holds its gold section's title, as 879 of the 996 do) and
  ``untitled`` (it does not) — the first group measures title matching more than search;
* ``out_of_corpus`` — questions the collection does not hold the answer to, over BNS, BNSS
  and BSA (the Consumer Protection Act left out): **every** CPA question (``cpa_named`` when
  it names the act, ``cpa_unnamed`` when it does not: "What steps should I follow for
  appeal?") and 50 HotpotQA questions (``off_topic``). Every one should be declined; the
  statutes set's declines (the same acts, in the collection) are the false declines beside it.

Per run it writes one compact record per question to
``bench/results/quality-<reasoner>-<split>.jsonl`` (first line: the run's metadata), from
which ``bench/results_tables.py`` builds the README tables; it prints the same measures.

Measures: all gold retrieved (every gold section among the run's retrieved sections),
hit@5 (all gold in the first five), recall@10, answer contains gold, F1, citation precision
(share of cited sections that are gold), gold cited (runs citing at least one gold section),
declined (insufficient context), sections retrieved per run, p50 seconds.

Targets (issue 26, test split): MuSiQue all gold (guided, heuristic) ≥ 0.75 at ≤ 20 sections
read, beside single-shot at the same depth; untitled statute questions hit@5 ≥ 0.95, gold
cited ≥ 0.90, citation precision ≥ 0.85; out of corpus declined ≥ 0.90 with in-corpus
false declines ≤ 0.05.

    python bench/bench_quality.py [--split test] [--reasoners heuristic local]
        [--sets musique hotpotqa statutes out_of_corpus] [--model-sets musique]
        [--limit N] [--data-dir DIR] [--out bench/results]
"""

from __future__ import annotations

import dataclasses
import json
import random
import time
from collections.abc import Sequence
from typing import Any

from _common import (
    DATA,
    bench_settings,
    commit,
    data_dir,
    load_average,
    print_header,
    split_parser,
    table,
    write_records,
)
from sleuth.eval.metrics import all_in, mean, percentile, recall_at

SETS = ("musique", "hotpotqa", "statutes", "out_of_corpus")
MODES = ("guided", "react")
BASELINE_K = 20
"""Depth of the single-shot baseline: MuSiQue's target compares at ≤ 20 sections read."""
OFF_TOPIC = 50


def section_titles() -> dict[str, str]:
    """``{source_id: casefolded title without its final period}`` over the four acts."""
    from sleuth.eval.datasets import STATUTE_ACTS
    from sleuth.ingest.records import abbreviate

    titles = {}
    for name in STATUTE_ACTS:
        act = json.loads((DATA / "statutes" / name).read_text(encoding="utf-8"))
        for section in act["sections"]:
            title = " ".join(str(section.get("title") or "").split()).rstrip(".").casefold()
            titles[f"{abbreviate(act['name'])}_S{section['section_number']}"] = title
    return titles


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
        EvalQuestion(id=f"hp{q.id}", question=q.question, type="off_topic")
        for q in hotpot[:OFF_TOPIC]
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


def group_of(name: str, question: Any, titles: dict[str, str]) -> str:
    """The reporting group: ``titled``/``untitled`` (statutes), hop count (MuSiQue's
    ``3hop1`` → ``3hop``), else the question's type."""
    if name == "statutes":
        title = titles.get(question.gold_source_ids[0], "") if question.gold_source_ids else ""
        return "titled" if title and title in question.question.casefold() else "untitled"
    kind = str(question.type or "")
    return kind[:4] if kind[:1].isdigit() else kind


def compact(name: str, mode: str, group: str, record: dict[str, Any]) -> dict[str, Any]:
    """The fields of one run's record that the tables read."""
    gold = bool(record["gold_source_ids"])
    return {
        "set": name,
        "mode": mode,
        "id": record["id"],
        "group": group,
        "status": record["status"],
        "declined": bool(record["insufficient_context"]),
        "all_gold": record["all_gold_retrieved"] if gold else None,
        "hit@5": record["all_gold_at"]["5"] if gold else None,
        "recall@10": record["recall_at"]["10"] if gold else None,
        "contains": record.get("answer_contains") if record["answers"] else None,
        "f1": record.get("f1") if record["answers"] else None,
        "cite_prec": record.get("citation_precision") if gold else None,
        "gold_cited": record.get("gold_cited"),
        "retrieved": len(record["retrieved"]),
        "latency_s": record["latency_s"],
    }


def single_shot(app: Any, collection: str, name: str, question: Any, group: str) -> dict:
    """One hybrid search of the question, top :data:`BASELINE_K` sections, as a record."""
    top = [
        h.chunk.source_id
        for h in app.kb.search_sections(collection, question.question, k=BASELINE_K)
    ]
    gold = set(question.gold_source_ids)
    return {
        "set": name,
        "mode": "single-shot",
        "id": question.id,
        "group": group,
        "all_gold": all_in(top, gold),
        "all_gold@10": all_in(top[:10], gold),
        "hit@5": all_in(top[:5], gold),
        "recall@10": recall_at(top, gold, 10),
        "retrieved": len(top),
    }


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means of the compact records (each measure over the rows that have it)."""

    def share(key: str) -> float | None:
        return mean(None if r.get(key) is None else float(r[key]) for r in rows)

    return {
        "n": len(rows),
        "all_gold": share("all_gold"),
        "hit@5": share("hit@5"),
        "recall@10": share("recall@10"),
        "contains": share("contains"),
        "f1": share("f1"),
        "cite_prec": share("cite_prec"),
        "gold_cited": share("gold_cited"),
        "declined": share("declined"),
        "retrieved": share("retrieved"),
        "p50_s": percentile([r["latency_s"] for r in rows if "latency_s" in r], 50),
    }


def main() -> None:
    parser = split_parser(__doc__, "test")
    parser.add_argument("--reasoners", nargs="+", default=["heuristic"])
    parser.add_argument("--sets", nargs="+", default=list(SETS), choices=SETS)
    parser.add_argument(
        "--model-sets", nargs="+", default=["musique"], choices=SETS, help="sets a model runs"
    )
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--limit", type=int, help="questions per set (a seeded sample)")
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()

    from sleuth.app import Sleuth
    from sleuth.eval.datasets import in_split
    from sleuth.eval.runner import EvalConfig, prepare_collection, run_eval
    from sleuth.llm import testing
    from sleuth.retrieval.rerank import clear_shared_cache

    testing.ALLOW_MODEL_REQUESTS = True
    print_header(
        "bench_quality",
        [("split", args.split), ("reasoners", " ".join(args.reasoners))],
    )
    titles = section_titles()
    rev = commit()
    with data_dir(args.data_dir, "sleuth-quality-") as ddir:
        for reasoner in args.reasoners:
            app = Sleuth(bench_settings(ddir).model_copy(update={"llm": reasoner}))
            sets = args.sets if reasoner == "heuristic" else args.model_sets
            records: list[dict[str, Any]] = []
            started = time.perf_counter()
            for name in sets:
                dataset = load(name)
                prepared = prepare_collection(app, dataset)
                questions = in_split(list(dataset.questions), args.split)
                if args.limit is not None:
                    random.Random(args.seed).shuffle(questions)
                    questions = questions[: args.limit]
                dataset = dataclasses.replace(dataset, questions=tuple(questions))
                groups = {q.id: group_of(name, q, titles) for q in questions}
                for q in questions:
                    if q.gold_source_ids:
                        records.append(
                            single_shot(app, prepared["collection"], name, q, groups[q.id])
                        )
                for mode in args.modes:
                    clear_shared_cache()  # each mode's p50 cold, not after the other's scores
                    t0 = time.perf_counter()
                    run = run_eval(app, dataset, EvalConfig(mode=mode), prepared=prepared)
                    records += [compact(name, mode, groups[r["id"]], r) for r in run.records]
                    print(
                        f"  {name} {reasoner} {mode}: {len(run.records)} runs in "
                        f"{time.perf_counter() - t0:.0f} s (load {load_average()})",
                        flush=True,
                    )
                rows = []
                for mode in ("single-shot", *args.modes):
                    mine = [r for r in records if r["set"] == name and r["mode"] == mode]
                    for group in [*sorted({r["group"] for r in mine}), "all"]:
                        part = [r for r in mine if group in ("all", r["group"])]
                        if part:
                            rows.append([mode, group, *summarize(part).values()])
                headers = ["run", "group", "n", "all_gold", "hit@5", "recall@10", "contains"]
                headers += ["f1", "cite_prec", "gold_cited", "declined", "retrieved", "p50_s"]
                print(table(headers, rows, title=f"{name} ({reasoner}, {args.split})"), flush=True)
            app.close()
            meta = {
                "meta": True,
                "reasoner": reasoner,
                "split": args.split,
                "sets": sets,
                "modes": args.modes,
                "limit": args.limit,
                "commit": rev,
                "load_average_end": load_average(),
                "wall_s": round(time.perf_counter() - started, 1),
            }
            name = f"quality-{reasoner}-{args.split}.jsonl"
            path = write_records(args.out, name, [meta, *records])
            print(f"records: {path}")


if __name__ == "__main__":
    main()
