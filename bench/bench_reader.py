"""The reader on the judged statute set: answers with a model against answers without one.

``bench/data/statutes_judged.jsonl`` holds natural questions written from the BNS, BNSS and
BSA (no section title in them), each with its gold sections and 1–3 key facts (each a set of
alternative phrasings), the verdict of the yes/no ones, plus questions the three acts do not
answer (``kind: out_of_scope``). Every run is scored automatically:

- key facts: the share of a question's key facts the answer states (a decline scores 0;
  a number counts however it is written, "1 year" for "one year");
- lead key facts: the same for the answer's first sentence only (questions that are not
  yes/no): a wrong short answer ("5 years.") is not saved by the quotes that follow it;
- gold cited: a gold section among the answer's citations;
- no ungrounded: no answer sentence left without a supporting citation;
- declined with gold: a decline although every gold section was retrieved;
- verdict correct: the answer opens with the right Yes/No (yes/no questions);
- mid-sentence: an answer that stops without closing its last sentence (every run);
- out of scope declined.

Each configuration (``heuristic``: no model; ``local``: the bundled Qwen2.5-Coder-1.5B in
process; any ``SLEUTH_LLM`` value) runs in ``guided`` and/or ``react`` mode over one split
(``dev`` to tune on, ``test`` to report; :func:`sleuth.eval.datasets.split_of`), with the
cross-encoder reranker on or off. Per-question records go to
``bench/results/reader-<llm>-<mode>-<split>[-norerank].jsonl`` (one JSON object per line;
the first line is the run's metadata), from which ``bench/results_tables.py`` builds the
tables in bench/README.md. Run it alone: the local model needs both cores.

    python bench/bench_reader.py --split dev --llm heuristic local --modes guided

``--ids`` runs only the given questions of the split (records ``…-subset``);
``--kind-from-labels`` gives the reader each question's ``answer_type`` label as its answer
kind (records ``…-labelkinds``): what the reader does with a perfect
:func:`~sleuth.agents.reader.answer_kind`.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (
    ACTS_3,
    REPO,
    bench_settings,
    commit,
    data_dir,
    load_average,
    print_header,
    statute_paths,
)

JUDGED = REPO / "bench" / "data" / "statutes_judged.jsonl"
LAY = (
    REPO / "bench" / "data" / "statutes_dialogues.jsonl",
    REPO / "bench" / "data" / "statutes_yes_no.jsonl",
)
"""``--set lay``: the first turns of the dialogue set (each under its dialogue's id, so its
split is the dialogue's) and the held-out yes/no set — natural questions written from the
acts by others than the reader's authors, in corpus, with gold sections and key facts."""
RESULTS = REPO / "bench" / "results"
KEEP = (
    "id",
    "split",
    "status",
    "answer",
    "cited",
    "gold_source_ids",
    "key_facts",
    "lead_key_facts",
    "verdict",
    "verdict_correct",
    "gold_cited",
    "declined_with_gold",
    "all_gold_retrieved",
    "ends_mid_sentence",
    "ungrounded_sentences",
    "insufficient_context",
    "out_of_scope",
    "answer_source",
    "answer_replaced",
    "latency_s",
    "timings_ms",
    "tokens",
    "tokens_by_stage",
    "yes_no_check",
    "quantity_check",
)


def lay_items() -> list[dict[str, Any]]:
    """The ``--set lay`` questions in the judged set's JSONL form (see :data:`LAY`)."""
    items = []
    for path in LAY:
        for line in path.read_text(encoding="utf-8").splitlines():
            item = json.loads(line)
            turn = item["turns"][0] if "turns" in item else item
            items.append(
                {
                    "id": item["id"],
                    "question": turn["question"],
                    "gold_source_ids": turn["gold_source_ids"],
                    "key_facts": turn["key_facts"],
                    "verdict": item.get("verdict"),
                    "answer_type": "yes_no" if item.get("verdict") else "",
                }
            )
    return items


def compact(record: dict[str, Any], kinds: dict[str, str]) -> dict[str, Any]:
    """The fields of a run record the tables read, plus the question's answer type."""
    row = {k: record.get(k) for k in KEEP}
    row["answer_type"] = kinds.get(record["id"], "")
    row["retrieved"] = record.get("retrieved", [])[:10]
    return row


def read_kinds_from_labels(items: list[dict[str, Any]]) -> None:
    """Make the reader take each labelled question's ``answer_type`` as its answer kind
    (``--kind-from-labels``): every module that reads
    :func:`sleuth.agents.reader.answer_kind` gets a version that returns the label of a
    question it knows (whitespace aside) and reads any other question's form."""
    import sleuth.agents.finish
    import sleuth.agents.generation
    import sleuth.agents.profile
    from sleuth.agents import reader

    labels = {
        " ".join(i["question"].split()): i["answer_type"] for i in items if i.get("answer_type")
    }

    def labelled_kind(question: str) -> reader.AnswerKind:
        return labels.get(" ".join(question.split())) or reader.answer_kind(question)

    for module in (sleuth.agents.generation, sleuth.agents.profile, sleuth.agents.finish):
        module.answer_kind = labelled_kind  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=("dev", "test", "all"), default="dev")
    parser.add_argument("--llm", nargs="+", default=["heuristic", "local"])
    parser.add_argument("--modes", nargs="+", default=["guided"], choices=("guided", "react"))
    parser.add_argument("--no-rerank", action="store_true", help="turn the reranker off")
    parser.add_argument("--limit", type=int, help="first N questions of the split")
    parser.add_argument(
        "--set",
        choices=("judged", "lay"),
        default="judged",
        help="the judged set, or the dialogue first turns and held-out yes/no questions",
    )
    parser.add_argument("--ids", help="comma-separated question ids: only these of the split")
    parser.add_argument(
        "--kind-from-labels",
        action="store_true",
        help="the reader takes each question's answer_type label as its answer kind (the "
        "reader's bound for a perfect answer_kind; records named ...-labelkinds)",
    )
    parser.add_argument("--data-dir", help="keep the index here (default: a temp dir)")
    parser.add_argument("--out", default=str(RESULTS), help="folder for the JSONL records")
    parser.add_argument(
        "--prompt-cache-mb",
        type=int,
        default=512,
        help="SLEUTH_LLM_PROMPT_CACHE_MB of the local model (0: no prompt cache)",
    )
    args = parser.parse_args()

    from sleuth.app import Sleuth
    from sleuth.eval.datasets import load_jsonl
    from sleuth.eval.runner import EvalConfig, prepare_collection, run_eval
    from sleuth.llm import testing
    from sleuth.retrieval.rerank import clear_shared_cache

    testing.ALLOW_MODEL_REQUESTS = True
    dataset = load_jsonl(JUDGED, statute_paths(ACTS_3))
    items = list(map(json.loads, JUDGED.read_text(encoding="utf-8").splitlines()))
    if args.set == "lay":
        items = lay_items()
        with tempfile.TemporaryDirectory() as tmp:
            questions = Path(tmp) / "statutes_lay.jsonl"
            questions.write_text("".join(json.dumps(i) + "\n" for i in items), encoding="utf-8")
            # the same corpus, so the judged set's collection (no second ingest)
            lay = load_jsonl(questions, statute_paths(ACTS_3))
        dataset = replace(lay, collection=dataset.collection)
    kinds = {str(item["id"]): item.get("answer_type", "") for item in items}
    if args.ids:
        wanted = set(args.ids.split(","))
        dataset = replace(dataset, questions=[q for q in dataset.questions if q.id in wanted])
    if args.kind_from_labels:
        read_kinds_from_labels(items)
    rev = commit()
    print_header(
        "bench_reader",
        [
            ("split", args.split),
            ("rerank", str(not args.no_rerank)),
            ("commit", rev),
        ],
    )
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    with data_dir(args.data_dir, "sleuth-reader-") as ddir:
        for llm in args.llm:
            settings = bench_settings(ddir).model_copy(
                update={
                    "llm": llm,
                    "rerank": "off" if args.no_rerank else "on",
                    "llm_prompt_cache_mb": args.prompt_cache_mb,
                }
            )
            app = Sleuth(settings)
            prepared = prepare_collection(app, dataset)
            for mode in args.modes:
                config = EvalConfig(mode=mode, split=args.split, limit=args.limit)
                # each run starts cold: the process-wide cross-encoder caches scores, and a
                # run after another over the same questions would retrieve ~2.7 s faster
                clear_shared_cache()
                t0 = time.perf_counter()
                run = run_eval(app, dataset, config, prepared=prepared)
                name = f"reader-{llm.replace(':', '_')}-{mode}-{args.split}"
                name += "-lay" if args.set == "lay" else ""
                name += "-norerank" if args.no_rerank else ""
                name += "-subset" if args.ids else ""
                name += "-labelkinds" if args.kind_from_labels else ""
                path = out_dir / f"{name}.jsonl"
                meta = {
                    "meta": True,
                    "llm": llm,
                    "mode": mode,
                    "set": args.set
                    + (f", {len(dataset.questions)} ids" if args.ids else "")
                    + (", label kinds" if args.kind_from_labels else ""),
                    "split": args.split,
                    "rerank": not args.no_rerank,
                    "prompt_cache_mb": args.prompt_cache_mb,
                    "commit": rev,
                    "questions": len(run.records),
                    "load_average_end": load_average(),
                    "wall_s": round(time.perf_counter() - t0, 1),
                }
                lines = [meta, *(compact(r, kinds) for r in run.records)]
                path.write_text(
                    "".join(json.dumps(x, ensure_ascii=False, default=str) + "\n" for x in lines),
                    encoding="utf-8",
                )
                answer = run.summary["answer"]
                print(
                    f"{llm} {mode}: {len(run.records)} runs in {meta['wall_s']} s -> {path}\n"
                    + json.dumps(
                        {
                            k: answer.get(k)
                            for k in ("judged", "out_of_scope", "mid_sentence", "model_answer_kept")
                        },
                        indent=1,
                    ),
                    flush=True,
                )
            app.close()


if __name__ == "__main__":
    main()
