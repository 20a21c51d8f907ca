"""Follow-up questions in a conversation thread, against the same follow-ups asked alone.

``bench/data/statutes_dialogues.jsonl`` holds two- and three-turn dialogues over the BNS,
BNSS and BSA whose later turns lean on the earlier ones ("And for an attempt?", "Which
court tries it?"), each turn with its gold sections and key facts (checked by
``bench/data/check_statutes_dialogues.py``). For each dialogue of the split:

- **thread**: the turns are asked in order in one conversation thread (a follow-up is made
  standalone from the thread before searching: :mod:`sleuth.agents.followup`);
- **alone**: each follow-up is asked by itself, with no thread (what a user of a system
  without conversations gets).

Measured per turn: gold cited (a gold section among the answer's citations), key facts (the
share stated, :func:`sleuth.eval.metrics.key_fact_share`), latency, and with a model the
time to the first streamed answer token after retrieval ends (the last tool result before
the first ``answer_delta`` event). Memory is off, so no run recalls another. Per-turn
records go to ``bench/results/conversation-<llm>-<mode>-<split>.jsonl`` (first line: the
run's metadata). Run it alone: the local model needs both cores.

    python bench/bench_conversation.py --split dev --llm heuristic local
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import ACTS_3, REPO, bench_settings, commit, data_dir, load_average, statute_paths

DIALOGUES = REPO / "bench" / "data" / "statutes_dialogues.jsonl"
JUDGED = REPO / "bench" / "data" / "statutes_judged.jsonl"
RESULTS = REPO / "bench" / "results"


def _first_token_s(events: list[Any]) -> tuple[float | None, float | None]:
    """Seconds from the last tool result before the first ``answer_delta`` event to that
    event (retrieval done → first answer token), and from the run's first event to it."""
    first = next((i for i, e in enumerate(events) if e.type == "answer_delta"), None)
    if first is None:
        return None, None
    results = [e for e in events[:first] if e.type == "tool_result"]
    after = events[first].timestamp - results[-1].timestamp if results else None
    return after, events[first].timestamp - events[0].timestamp


def _run(app: Any, question: str, collection: str, mode: str, thread_id: str | None) -> dict:
    from sleuth.eval.metrics import ends_mid_sentence

    events: list[Any] = []
    started = time.perf_counter()
    response = app.agent.execute_agentic_search(
        question,
        collection,
        mode=mode,
        sinks=[events.append],
        use_memory=False,
        thread_id=thread_id,
    )
    after_retrieval, from_start = _first_token_s(events)
    answer = response.answer
    conversation = response.trace.get("conversation") or {}
    return {
        "status": response.status.value,
        "answer": answer.answer_text,
        "cited": list(dict.fromkeys(c.source_id for c in answer.citations)),
        "insufficient_context": answer.is_insufficient_context,
        "rewritten": conversation.get("rewritten_question"),
        "rewrite": conversation.get("rewrite"),
        "retrieved": list(response.trace.get("retrieved_source_ids") or [])[:20],
        "latency_s": round(time.perf_counter() - started, 2),
        "first_token_after_retrieval_s": None
        if after_retrieval is None
        else round(after_retrieval, 2),
        "first_token_s": None if from_start is None else round(from_start, 2),
        "answer_deltas": sum(1 for e in events if e.type == "answer_delta"),
        "revised": any(e.type == "answer" and e.revised for e in events),
        "ends_mid_sentence": ends_mid_sentence(answer.answer_text),
    }


def _scored(row: dict, turn: dict) -> dict:
    from sleuth.eval.metrics import key_fact_share

    gold = set(turn["gold_source_ids"])
    row["gold_source_ids"] = sorted(gold)
    row["gold_cited"] = bool(gold & set(row["cited"]))
    row["gold_retrieved"] = bool(gold & set(row["retrieved"]))
    facts = key_fact_share(row["answer"], turn["key_facts"])
    row["key_facts"] = 0.0 if row["insufficient_context"] or facts is None else facts
    return row


def _mean(rows: list[dict], key: str) -> float | None:
    values = [float(r[key]) for r in rows if r.get(key) is not None]
    return round(statistics.fmean(values), 3) if values else None


def _p50(rows: list[dict], key: str) -> float | None:
    values = [float(r[key]) for r in rows if r.get(key) is not None]
    return round(statistics.median(values), 2) if values else None


def summary(rows: list[dict]) -> dict[str, Any]:
    """The measures of one run: first turns, follow-ups in the thread and asked alone."""
    first = [r for r in rows if r["turn"] == 0]
    thread = [r for r in rows if r["turn"] > 0 and r["setting"] == "thread"]
    alone = [r for r in rows if r["turn"] > 0 and r["setting"] == "alone"]
    everything = [r for r in rows if r["setting"] == "thread"]
    return {
        "dialogues": len(first),
        "follow_ups": len(thread),
        "first_turn_gold_cited": _mean(first, "gold_cited"),
        "follow_up_gold_cited_thread": _mean(thread, "gold_cited"),
        "follow_up_gold_cited_alone": _mean(alone, "gold_cited"),
        "follow_up_key_facts_thread": _mean(thread, "key_facts"),
        "follow_up_key_facts_alone": _mean(alone, "key_facts"),
        "follow_up_gold_retrieved_thread": _mean(thread, "gold_retrieved"),
        "follow_up_gold_retrieved_alone": _mean(alone, "gold_retrieved"),
        "mid_sentence": _mean(everything, "ends_mid_sentence"),
        "p50_latency_s": _p50(everything, "latency_s"),
        "p50_first_token_after_retrieval_s": _p50(everything, "first_token_after_retrieval_s"),
        "p50_first_token_s": _p50(everything, "first_token_s"),
        "revised": _mean([r for r in everything if r["answer_deltas"]], "revised"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=("dev", "test", "all"), default="dev")
    parser.add_argument("--llm", nargs="+", default=["heuristic"])
    parser.add_argument("--mode", default="guided", choices=("guided", "react"))
    parser.add_argument("--limit", type=int, help="first N dialogues of the split")
    parser.add_argument("--no-alone", action="store_true", help="skip the follow-ups alone")
    parser.add_argument("--data-dir", help="keep the index here (default: a temp dir)")
    parser.add_argument("--out", default=str(RESULTS), help="folder for the JSONL records")
    args = parser.parse_args()

    from sleuth.app import Sleuth
    from sleuth.eval.datasets import load_jsonl, split_of
    from sleuth.eval.runner import prepare_collection
    from sleuth.llm import testing

    testing.ALLOW_MODEL_REQUESTS = True
    dialogues = [json.loads(line) for line in DIALOGUES.read_text(encoding="utf-8").splitlines()]
    if args.split != "all":
        dialogues = [d for d in dialogues if split_of(d["id"]) == args.split]
    dialogues = dialogues[: args.limit] if args.limit else dialogues
    # the judged set's collection: the same three acts, shared with bench_reader.py
    dataset = load_jsonl(JUDGED, statute_paths(ACTS_3))
    rev = commit()
    out_dir = Path(args.out)
    out_dir.mkdir(parents=True, exist_ok=True)
    with data_dir(args.data_dir, "sleuth-conversation-") as ddir:
        for llm in args.llm:
            app = Sleuth(bench_settings(ddir).model_copy(update={"llm": llm}))
            collection = prepare_collection(app, dataset)["collection"]
            rows: list[dict] = []
            t0 = time.perf_counter()
            for dialogue in dialogues:
                thread_id = app.catalog.create_thread(collection, None).thread_id
                for index, turn in enumerate(dialogue["turns"]):
                    row = _run(app, turn["question"], collection, args.mode, thread_id)
                    rows.append(
                        _scored(
                            {"id": dialogue["id"], "turn": index, "setting": "thread", **row}, turn
                        )
                    )
                    if index and not args.no_alone:
                        row = _run(app, turn["question"], collection, args.mode, None)
                        rows.append(
                            _scored(
                                {"id": dialogue["id"], "turn": index, "setting": "alone", **row},
                                turn,
                            )
                        )
                print(f"  {dialogue['id']}: {len(dialogue['turns'])} turns", flush=True)
            app.close()
            result = summary(rows)
            meta = {
                "meta": True,
                "llm": llm,
                "mode": args.mode,
                "split": args.split,
                "commit": rev,
                "load_average_end": load_average(),
                "wall_s": round(time.perf_counter() - t0, 1),
                **result,
            }
            name = f"conversation-{llm.replace(':', '_')}-{args.mode}-{args.split}.jsonl"
            path = out_dir / name
            path.write_text(
                "".join(json.dumps(x, ensure_ascii=False) + "\n" for x in [meta, *rows]),
                encoding="utf-8",
            )
            print(f"{llm} {args.mode} {args.split}: -> {path}")
            print(json.dumps(result, indent=1), flush=True)


if __name__ == "__main__":
    main()
