"""Tables from the committed per-question records in ``bench/results/``.

Every number the README and bench/README report for the reader and for answer quality on the
handed sets comes from here: this script reads each ``bench/results/reader-*.jsonl`` (written by
``bench/bench_reader.py``), ``rerank-*``, ``verdict-*``, ``realllm-*`` (written by
``bench/bench_real_llm.py``) and ``quality-*.jsonl`` (written by ``bench/bench_quality.py``)
— first line: the run's metadata; then one record per question — aggregates them, and prints
Markdown.
With ``--write`` it replaces the block between ``<!-- reader-results:begin -->`` and
``<!-- reader-results:end -->`` in README.md (the ``test`` split) and bench/README.md (every
split) — no hand-pasted numbers.

    python bench/results_tables.py            # print
    python bench/results_tables.py --write    # regenerate bench/README.md's block
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sleuth.eval.metrics import answer_words, lead_key_fact_share, repeated_sentences

REPO = Path(__file__).resolve().parents[1]
RESULTS = REPO / "bench" / "results"
READMES = (REPO / "README.md", REPO / "bench" / "README.md")
BEGIN, END = "<!-- reader-results:begin -->", "<!-- reader-results:end -->"
QUESTIONS = [
    REPO / "bench" / "data" / name
    for name in ("statutes_judged.jsonl", "statutes_dialogues.jsonl", "statutes_yes_no.jsonl")
]


def key_facts_by_id() -> dict[str, list[list[str]]]:
    """The key facts of every judged-set and lay-set question that is not yes/no, by id (a
    dialogue's are its first turn's)."""
    found: dict[str, list[list[str]]] = {}
    for path in QUESTIONS:
        for line in path.read_text(encoding="utf-8").splitlines():
            item = json.loads(line)
            turn = item["turns"][0] if "turns" in item else item
            if turn.get("key_facts") and not item.get("verdict"):
                found[item["id"]] = turn["key_facts"]
    return found


def lead_share(records: Sequence[dict[str, Any]]) -> float | None:
    """Mean key-fact share of the answers' first sentences (a decline: 0) over the records
    of questions that are not yes/no (:func:`~sleuth.eval.metrics.lead_key_fact_share`);
    read off the answer text, so older records get it too."""
    facts = key_facts_by_id()
    values = [
        0.0
        if r["insufficient_context"]
        else lead_key_fact_share(r["answer"] or "", facts[r["id"]]) or 0.0
        for r in records
        if r["id"] in facts
    ]
    return sum(values) / len(values) if values else None


def load(path: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(metadata, records)`` of one results file."""
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line]
    meta = rows[0] if rows and rows[0].get("meta") else {}
    return meta, [r for r in rows if not r.get("meta")]


def share(rows: Sequence[dict[str, Any]], key: str) -> float | None:
    """Mean of ``key`` over the rows where it is set (booleans as 0/1)."""
    values = [float(r[key]) for r in rows if r.get(key) is not None]
    return sum(values) / len(values) if values else None


def measures(records: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The judged-set measures of one run (module docstring of bench_reader.py)."""
    inside = [r for r in records if not r.get("out_of_scope")]
    outside = [r for r in records if r.get("out_of_scope")]
    answered = [r for r in records if not r["insufficient_context"] and r["status"] != "error"]
    latencies = [r["latency_s"] for r in records]
    return {
        "questions": f"{len(inside)} + {len(outside)}",
        "key facts": share(inside, "key_facts"),
        "lead key facts": lead_share(inside),
        "gold cited": share(inside, "gold_cited"),
        "no ungrounded": (
            sum(r["ungrounded_sentences"] == 0 for r in inside) / len(inside) if inside else None
        ),
        "declined w/ gold": share(inside, "declined_with_gold"),
        "verdict correct": share(inside, "verdict_correct"),
        "out of scope declined": share(outside, "insufficient_context"),
        "mid-sentence": share(answered, "ends_mid_sentence"),
        # read off the answer text, so older records get them too
        "words p50": (
            statistics.median(answer_words(r["answer"]) for r in answered) if answered else None
        ),
        "repeats": (
            sum(repeated_sentences(r["answer"]) > 0 for r in answered) / len(answered)
            if answered
            else None
        ),
        "p50 s": statistics.median(latencies) if latencies else None,
        "p95 s": (
            sorted(latencies)[max(0, round(0.95 * len(latencies)) - 1)] if latencies else None
        ),
    }


def cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.2f}" if value < 10 else f"{value:.0f}"
    return str(value)


def reader_table(files: Sequence[Path], split: str | None = None) -> str:
    """One Markdown row per results file (only ``split``'s when given), grouped by split."""
    rows = []
    for path in files:
        meta, records = load(path)
        if not records or (split is not None and meta.get("split") != split):
            continue
        row = measures(records)
        rows.append(
            (
                meta.get("split", "?"),
                meta.get("set", "judged"),
                meta.get("llm", "?"),
                meta.get("mode", "?"),
                "on" if meta.get("rerank", True) else "off",
                meta.get("commit", "?"),
                row,
            )
        )
    if not rows:
        return "(no results)"
    keys = list(rows[0][6])
    head = ["split", "set", "llm", "mode", "rerank", "commit", *keys]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for split, name, llm, mode, rerank, rev, row in sorted(rows, key=lambda r: r[:5]):
        values = [split, name, llm, mode, rerank, f"`{rev}`", *(cell(row[k]) for k in keys)]
        lines.append("| " + " | ".join(values) + " |")
    return "\n".join(lines)


def rerank_table(files: Sequence[Path]) -> str:
    """Section hit@1/5, MRR@10 and ms per search with the reranker off and on, per question
    set, from ``bench/results/rerank-<split>.jsonl`` (written by bench_rerank.py)."""
    lines = [
        "| split | set | questions | rerank | hit@1 | hit@5 | MRR@10 | p50 ms | p95 ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for path in files:
        split = path.stem.removeprefix("rerank-")
        records = [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x]
        for name in sorted({r["set"] for r in records}):
            group = [r for r in records if r["set"] == name]
            for flag in ("off", "on"):
                ranks = [r[f"rank_{flag}"] for r in group]
                ms = sorted(r[f"ms_{flag}"] for r in group)
                hit1 = sum(1 for x in ranks if x is not None and x <= 1) / len(ranks)
                hit5 = sum(1 for x in ranks if x is not None and x <= 5) / len(ranks)
                mrr = sum(1 / x for x in ranks if x is not None) / len(ranks)
                p95 = ms[max(0, round(0.95 * len(ms)) - 1)]
                lines.append(
                    f"| {split} | {name} | {len(group)} | {flag} | {hit1:.3f} | {hit5:.3f} | "
                    f"{mrr:.3f} | {statistics.median(ms):.0f} | {p95:.0f} |"
                )
    return "\n".join(lines) if len(lines) > 2 else "(no results)"


def verdict_table(files: Sequence[Path]) -> str:
    """The yes/no verdict reader alone, from ``bench/results/verdict-<split>.jsonl``
    (written by bench_verdict.py): per set, split, sections read and reading, the
    verdicts given and the share agreeing with the gold verdict (of those given, of all); with
    ``--llm``, the model's reading of each order's first section (``model (bands)``)."""
    lines = [
        "| set | split | questions | sections read | reading | verdict given | "
        "agrees (of given) | agrees (of all) |",
        "|---|---|---|---|---|---|---|---|",
    ]
    records = [
        json.loads(x) for path in files for x in path.read_text(encoding="utf-8").splitlines() if x
    ]
    for name in dict.fromkeys(r["set"] for r in records):
        for split in ("dev", "test"):
            group = [r for r in records if r["set"] == name and r["split"] == split]
            if not group:
                continue
            for order in ("gold", "ranked"):
                given = [r for r in group if r[order] is not None]
                for reading in ("sentence", "clause"):
                    agree = sum(1 for r in given if r[order][reading] == r["verdict"])
                    of_given = f"{agree / len(given):.2f}" if given else "—"
                    lines.append(
                        f"| {name} | {split} | {len(group)} | {order} | {reading} | "
                        f"{len(given)} | {of_given} | {agree / len(group):.2f} |"
                    )
                read = [
                    (r["model"][order]["verdict"], r["verdict"]) for r in group if r.get("model")
                ]
                if read:
                    said = [(mine, gold) for mine, gold in read if mine]
                    agree = sum(1 for mine, gold in said if mine == gold)
                    of_given = f"{agree / len(said):.2f}" if said else "—"
                    lines.append(
                        f"| {name} | {split} | {len(group)} | {order} | model (bands) | "
                        f"{len(said)} | {of_given} | {agree / len(group):.2f} |"
                    )
    return "\n".join(lines) if len(lines) > 2 else "(no results)"


QUALITY_MEASURES = (
    "all_gold",
    "hit@5",
    "recall@10",
    "contains",
    "f1",
    "cite_prec",
    "gold_cited",
    "declined",
    "retrieved",
)
QUALITY_TARGETS = (
    # (set, mode, group, measure, target, higher is better): issue 26's done-when
    ("musique", "guided", "all", "all_gold", 0.75, True),
    ("statutes", "guided", "untitled", "hit@5", 0.95, True),
    ("statutes", "guided", "untitled", "gold_cited", 0.90, True),
    ("statutes", "guided", "untitled", "cite_prec", 0.85, True),
    ("out_of_corpus", "guided", "all", "declined", 0.90, True),
    ("statutes", "guided", "all", "declined", 0.05, False),
)


def quality_rows(records: Sequence[dict[str, Any]]) -> list[tuple[str, str, str, dict]]:
    """``(set, mode, group, measures)`` per set, mode and group (and ``all``) of one
    ``quality-*.jsonl`` file; measures are means over the records that have them."""
    rows = []
    for name in dict.fromkeys(r["set"] for r in records):
        mine = [r for r in records if r["set"] == name]
        for mode in dict.fromkeys(r["mode"] for r in mine):
            group_rows = [r for r in mine if r["mode"] == mode]
            groups = sorted({r["group"] for r in group_rows})
            for group in [*groups, "all"] if len(groups) > 1 else ["all"]:
                part = [r for r in group_rows if group in ("all", r["group"])]
                values = {k: share(part, k) for k in QUALITY_MEASURES}
                latencies = [r["latency_s"] for r in part if "latency_s" in r]
                values["p50 s"] = statistics.median(latencies) if latencies else None
                values["n"] = len(part)
                rows.append((name, mode, group, values))
    return rows


def quality_table(files: Sequence[Path], split: str | None = None) -> str:
    """Answer quality per set, mode and group from ``bench/results/quality-*.jsonl``
    (written by bench_quality.py), with issue 26's targets checked below the table."""
    head = ["split", "reasoner", "commit", "set", "run", "group", "n", *QUALITY_MEASURES]
    lines = ["| " + " | ".join([*head, "p50 s"]) + " |", "|" + "---|" * (len(head) + 1)]
    checks = []
    for path in files:
        meta, records = load(path)
        if not records or (split is not None and meta.get("split") != split):
            continue
        fixed = [meta.get("split", "?"), meta.get("reasoner", "?"), f"`{meta.get('commit')}`"]
        found = {}
        for name, mode, group, values in quality_rows(records):
            found[name, mode, group] = values
            cells = [cell(values[k]) for k in ("n", *QUALITY_MEASURES, "p50 s")]
            lines.append("| " + " | ".join([*fixed, name, mode, group, *cells]) + " |")
        for name, mode, group, key, target, higher in QUALITY_TARGETS:
            value = found.get((name, mode, group), {}).get(key)
            if value is None or meta.get("reasoner") != "heuristic":
                continue
            met = value >= target if higher else value <= target
            sign = "≥" if higher else "≤"
            checks.append(
                f"- {meta.get('split')}, {name} {mode} {group}: {key} {value:.3f} "
                f"(target {sign} {target}) → {'met' if met else 'MISSED'}"
            )
    if len(lines) == 2:
        return "(no results)"
    return "\n".join(lines) + ("\n\n" + "\n".join(checks) if checks else "")


REALLLM_MEASURES = ("em", "f1", "contains", "all_gold", "cite_prec")


def realllm_summary(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Means of one set and mode's compact ``realllm-*`` records (bench_real_llm.py):
    exact match, F1, answer contains gold, all gold retrieved, citation precision; ``kept``:
    the share of the answers the model wrote (``model``, ``repaired`` or ``replaced``) whose
    model text reached the user (``model``, ``repaired``); runs with a tool; mean prompt and
    output tokens; p50/p95 seconds."""
    written = [r for r in rows if r.get("answer_source") in ("model", "repaired", "replaced")]
    kept = [r for r in written if r["answer_source"] in ("model", "repaired")]
    latencies = sorted(r["latency_s"] for r in rows)
    out: dict[str, Any] = {"n": len(rows)}
    out.update({k: share(rows, k) for k in REALLLM_MEASURES})
    out["kept"] = len(kept) / len(written) if written else None
    out["with_tool"] = sum(r["tool_calls"] >= 1 for r in rows) / len(rows) if rows else None
    out["prompt_tok"] = statistics.mean(r["prompt_tok"] for r in rows) if rows else None
    out["out_tok"] = statistics.mean(r["out_tok"] for r in rows) if rows else None
    out["p50 s"] = statistics.median(latencies) if latencies else None
    out["p95 s"] = latencies[max(0, round(0.95 * len(latencies)) - 1)] if latencies else None
    return out


def realllm_table(files: Sequence[Path], split: str | None = None) -> str:
    """One row per file, set and mode of ``bench/results/realllm-*.jsonl``."""
    head = ["split", "llm", "commit", "set", "mode", "n", *REALLLM_MEASURES, "kept"]
    head += ["with tool", "prompt tok", "out tok", "p50 s", "p95 s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for path in files:
        meta, records = load(path)
        if not records or (split is not None and meta.get("split") != split):
            continue
        fixed = [meta.get("split", "?"), meta.get("llm", "?"), f"`{meta.get('commit')}`"]
        for name in dict.fromkeys(r["set"] for r in records):
            for mode in dict.fromkeys(r["mode"] for r in records if r["set"] == name):
                rows = [r for r in records if r["set"] == name and r["mode"] == mode]
                values = realllm_summary(rows)
                cells = [cell(v) for v in values.values()]
                lines.append("| " + " | ".join([*fixed, name, mode, *cells]) + " |")
    return "\n".join(lines) if len(lines) > 2 else "(no results)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--write", action="store_true", help="update bench/README.md")
    args = parser.parse_args()
    files = sorted(RESULTS.glob("reader-*.jsonl"))
    intro = (
        "From `bench/results/reader-*.jsonl` by `bench/results_tables.py`; key facts, gold "
        "cited, no ungrounded, declined w/ gold and verdict correct over the in-corpus "
        "questions (lead key facts: those the answer's first sentence states, over the "
        "questions that are not yes/no), mid-sentence over every answered run; p50/p95 per "
        "run, seconds.\n\n"
    )
    reranked = rerank_table(sorted(RESULTS.glob("rerank-*.jsonl")))
    rerank_intro = (
        "\n\nThe cross-encoder reranker alone (`bench/bench_rerank.py`: "
        "`search_sections`, hybrid, k = 10, 30 fused chunks reranked; section-level gold):\n\n"
    )
    verdicts = verdict_table(sorted(RESULTS.glob("verdict-*.jsonl")))
    verdict_intro = (
        '\n\nThe yes/no verdict readers alone (`bench/bench_verdict.py`; "sentence": '
        'negation parity over the whole rule sentence, the earlier reader; "clause": the '
        'clause that answers, bounds not counted; "model (bands)": the local 1.5B model\'s '
        "log-odds of Yes on the order's first section, a verdict only beyond the bands, "
        "`--llm local`):\n\n"
    )
    realllm_files = sorted(RESULTS.glob("realllm-*.jsonl"))
    realllm_intro = (
        "\n\nA real model on the handed sets (`bench/bench_real_llm.py`: guided and ReAct "
        "runs beside a same-run naive RAG, top-5 hybrid and one generation with the same model "
        "and prompt; a seeded sample of the split):\n\n"
    )
    tail = (
        rerank_intro
        + reranked
        + verdict_intro
        + verdicts
        + realllm_intro
        + realllm_table(realllm_files)
    )
    quality_files = sorted(RESULTS.glob("quality-*.jsonl"))
    quality_intro = (
        "\n\nAnswer quality on the handed sets (`bench/bench_quality.py`, no LLM unless the "
        "reasoner says; single-shot: one hybrid search, top 20; statutes `titled`: the "
        "question holds its section's title; out of corpus: every Consumer Protection Act "
        "question and 50 HotpotQA questions over BNS + BNSS + BSA, all to be declined):\n\n"
    )
    blocks = {
        READMES[0]: intro
        + reader_table(files, "test")
        + tail
        + quality_intro
        + quality_table(quality_files, "test"),
        READMES[1]: intro
        + reader_table(files)
        + tail
        + quality_intro
        + quality_table(quality_files),
    }
    print(blocks[READMES[1]])
    if args.write:
        for path, block in blocks.items():
            text = path.read_text(encoding="utf-8")
            if BEGIN not in text or END not in text:
                raise SystemExit(f"{path}: no {BEGIN} … {END} block to fill")
            head, rest = text.split(BEGIN, 1)
            tail = rest.split(END, 1)[1]
            path.write_text(f"{head}{BEGIN}\n{block}\n{END}{tail}", encoding="utf-8")


if __name__ == "__main__":
    main()
