"""Retrieval quality on the statutes: section-level hit@1/5/10 for BM25, dense and hybrid.

Ingests all four statute files (BNS, BNSS, BSA, CPA: synthetic_qa.json has CPA questions)
into the collection ``statutes`` and runs the 996 questions of synthetic_qa.json through
``KnowledgeBase.search`` in each mode. Gold = abbreviate(source_act) + "_S" + source_section.
Ranking is at the section level: each search returns ``--k-search`` chunks (default 30) and
the distinct ``source_id`` s, in rank order, are the ranked sections (the agent's
``rag_search`` does the same). The single-shot bm25s baseline of
``../shared/tools/baseline_bm25.py`` is recomputed in the same run and printed beside the
reference numbers of ``../shared/data/README.md``.

Hybrid misses at 5 go to ``bench/results/retrieval_misses_hybrid_at5.jsonl`` (one JSON object
per question, with automatic tags) for analysis.

Target: hybrid hit@5 ≥ 0.90.

    python bench/bench_retrieval.py [--data-dir DIR] [--rebuild] [--k-search 30]

With ``--data-dir`` the index is kept between runs (re-ingesting unchanged files is a no-op);
``--rebuild`` deletes the collection's documents first (e.g. after a tokenizer change).
"""

from __future__ import annotations

import argparse
import json
import random
import re
import time
from collections import Counter
from typing import Any

from _common import (
    ACTS_4,
    BASELINE_BM25_STATUTES,
    COLLECTION,
    RESULTS,
    Question,
    bench_settings,
    data_dir,
    load_average,
    load_questions,
    print_header,
    run_shared_baseline,
    statute_paths,
    table,
    verdict,
)
from sleuth.app import Sleuth
from sleuth.retrieval.text import terms

MODES = ("bm25", "dense", "hybrid")
KS = (1, 5, 10)
TARGET_HYBRID_AT5 = 0.90
MISSES_FILE = RESULTS / "retrieval_misses_hybrid_at5.jsonl"
_SECTION_NUMBER_Q = re.compile(r"\bsection\s+\d+", re.IGNORECASE)
_MENTIONS = re.compile(r"\bsections?\s+\d+[A-Z]?(?:(?:\s*,\s*|\s+and\s+|\s+or\s+)\d+[A-Z]?)*", re.I)
_MENTIONED_NUMBERS = re.compile(r"\d+[A-Z]?")
AGENT_K = 15  # rag_search asks kb.search for 3 × top_k chunks, top_k = 5 by default
TEMPLATES = (  # question kinds of synthetic_qa.json, by template wording (first match wins)
    ("asks by section number", re.compile(r"\bSection \d+ of\b")),
    ("penalty / punishment", re.compile(r"penalty|punish|consequences", re.IGNORECASE)),
    ("definition / meaning", re.compile(r"defin|mean by", re.IGNORECASE)),
    ("procedure / steps / filing", re.compile(r"procedure|steps|file for", re.IGNORECASE)),
    ("what should I know", re.compile(r"should I know")),
    ("what happens if someone commits", re.compile(r"happens if")),
    ("rights / other", re.compile(r".")),
)


def baseline_same_run() -> dict[int, float] | None:
    """hit@1/5/10 of ../shared/tools/baseline_bm25.py's statutes(), run in this process."""
    out = run_shared_baseline("statutes")
    if out is None:
        return None
    found = re.findall(r"hit@(\d+) = ([0-9.]+)", out)
    return {int(k): float(v) for k, v in found}


def question_kind(text: str) -> str:
    """The template family of a synthetic question (see TEMPLATES)."""
    return next(name for name, pattern in TEMPLATES if pattern.search(text))


def ranked_sections(app: Sleuth, query: str, k: int, mode: str) -> list[str]:
    """Distinct source_ids of the top-k chunks, in rank order."""
    hits = app.kb.search(COLLECTION, query, k=k, mode=mode)  # type: ignore[arg-type]
    return list(dict.fromkeys(h.chunk.source_id for h in hits))


def norm_title(title_path: list[str]) -> str:
    """The section's own title without 'Section N.' and punctuation, lower-case."""
    title = title_path[-1] if title_path else ""
    title = re.sub(r"^section\s+\w+\.\s*", "", title, flags=re.IGNORECASE)
    return " ".join(re.findall(r"\w+", title.lower()))


def tag_miss(
    q: Question,
    ranks: dict[str, int | None],
    top: list[str],
    titles: dict[str, list[str]],
    by_title: dict[str, list[str]],
) -> list[str]:
    """Automatic hints for why a hybrid@5 miss happened (several may apply)."""
    tags = []
    gold_title = norm_title(titles.get(q.gold, []))
    if len(by_title.get(gold_title, [])) > 1:
        tags.append("duplicate-title")
    if any(norm_title(titles.get(s, [])) == gold_title for s in top[:5]):
        tags.append("same-title-section-in-top5")
    if _SECTION_NUMBER_Q.search(q.text):
        tags.append("asks-by-section-number")
    mentioned = set(_MENTIONED_NUMBERS.findall(" ".join(_MENTIONS.findall(q.text))))
    if any(s != q.gold and s.split("_S")[-1] in mentioned for s in top[:5]):
        tags.append("sections-the-question-mentions-ahead")
    if not any(s.split("_S")[0] == q.act for s in top[:5]):
        tags.append("no-gold-act-in-top5")
    title_terms = set(terms(gold_title))
    q_terms = set(terms(q.text))
    overlap = len(title_terms & q_terms) / len(title_terms) if title_terms else 0.0
    if overlap >= 0.8:
        tags.append("title-in-question")
    elif overlap < 0.5:
        tags.append("question-shares-little-of-title")
    if len(title_terms) <= 2:
        tags.append("short-generic-title")
    r = ranks["hybrid"]
    tags.append("hybrid-rank-6-10" if r and r <= 10 else "hybrid-rank>10" if r else "not-in-top-k")
    for mode in ("bm25", "dense"):
        if ranks[mode] is not None and ranks[mode] <= 5:  # type: ignore[operator]
            tags.append(f"{mode}-alone-had-it@5")
    return tags


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", help="keep the index here between runs (default: temp)")
    parser.add_argument("--rebuild", action="store_true", help="re-ingest from scratch")
    parser.add_argument("--k-search", type=int, default=30, help="chunks per search (30)")
    parser.add_argument("--show-misses", type=int, default=30, help="misses to print (30)")
    args = parser.parse_args()
    paths = statute_paths(ACTS_4)
    questions = load_questions()

    with data_dir(args.data_dir, "sleuth-bench-retrieval-") as ddir:
        print_header(
            "bench_retrieval: section-level hit@k on synthetic_qa.json (4 acts)",
            [
                ("data dir", f"{ddir}{' (kept)' if args.data_dir else ' (temporary)'}"),
                ("questions", str(len(questions))),
                ("chunks per search", f"{args.k_search} (deduplicated to sections)"),
            ],
        )
        app = Sleuth(bench_settings(ddir))
        if args.rebuild and app.catalog.get_collection(COLLECTION) is not None:
            for doc in app.catalog.list_documents(COLLECTION):
                app.pipeline.delete(COLLECTION, doc.doc_id)
        t0 = time.perf_counter()
        report = app.pipeline.ingest(paths, COLLECTION)
        ingest_s = time.perf_counter() - t0
        info = app.catalog.get_collection(COLLECTION)
        assert info is not None
        print(
            f"ingest: {ingest_s:.1f} s, {report.n_embedded} chunks embedded, "
            f"files {report.totals}; collection: {info.n_documents} documents, "
            f"{info.n_chunks} chunks"
        )
        if not report.ok:
            raise SystemExit(f"ingest failed: {[f.message for f in report.by_status('failed')]}")
        titles = dict(app.catalog.all_section_keys(COLLECTION))
        by_title: dict[str, list[str]] = {}
        for sid, path in titles.items():
            by_title.setdefault(norm_title(path), []).append(sid)
        missing_gold = sorted({q.gold for q in questions} - set(titles))
        print(f"sections: {len(titles)}; gold ids not in the collection: {missing_gold or 'none'}")
        app.kb.search(COLLECTION, "warm up", k=5, mode="hybrid")  # loads the model and postings
        print(f"load average after ingest: {load_average()}")
        print()

        ranks: dict[str, list[int | None]] = {m: [] for m in MODES}
        tops: dict[str, list[list[str]]] = {m: [] for m in MODES}
        depth: dict[str, list[int]] = {m: [] for m in MODES}
        seconds: dict[str, float] = {}
        for mode in MODES:
            t0 = time.perf_counter()
            for q in questions:
                sections = ranked_sections(app, q.text, args.k_search, mode)
                rank = sections.index(q.gold) + 1 if q.gold in sections else None
                ranks[mode].append(rank)
                tops[mode].append(sections[:10])
                depth[mode].append(len(sections))
            seconds[mode] = time.perf_counter() - t0
        agent_ranks: list[int | None] = []
        for q in questions:
            sections = ranked_sections(app, q.text, AGENT_K, "hybrid")
            agent_ranks.append(sections.index(q.gold) + 1 if q.gold in sections else None)
        ranks["hybrid k=15"] = agent_ranks

        n = len(questions)

        def hit(mode: str, k: int, subset: list[int] | None = None) -> float:
            idx = subset if subset is not None else list(range(n))
            return sum(1 for i in idx if (r := ranks[mode][i]) is not None and r <= k) / len(idx)

        def mrr10(mode: str) -> float:
            return sum(1 / r for r in ranks[mode] if r is not None and r <= 10) / n

        baseline = baseline_same_run()
        rows: list[list[Any]] = [
            ["bm25s baseline (README reference)", *[BASELINE_BM25_STATUTES[k] for k in KS], "", ""]
        ]
        if baseline:
            rows.append(["bm25s baseline (same run)", *[baseline.get(k, 0.0) for k in KS], "", ""])
        for mode in MODES:
            rows.append(
                [
                    f"sleuth {mode}",
                    *[hit(mode, k) for k in KS],
                    mrr10(mode),
                    f"{sum(depth[mode]) / n:.1f}",
                ]
            )
        rows.append(
            [
                f"sleuth hybrid, k={AGENT_K} (the agent's rag_search depth)",
                *[hit("hybrid k=15", k) for k in KS],
                mrr10("hybrid k=15"),
                "",
            ]
        )
        print(
            table(
                ["retriever", "hit@1", "hit@5", "hit@10", "MRR@10", "sections/search"],
                rows,
                title=f"Section-level hit@k over {n} questions",
            )
        )
        print()
        by_act: dict[str, list[int]] = {}
        for i, q in enumerate(questions):
            by_act.setdefault(q.act, []).append(i)
        print(
            table(
                ["act", "questions", *[f"{m} hit@5" for m in MODES], "hybrid hit@10"],
                [
                    [act, len(idx), *[hit(m, 5, idx) for m in MODES], hit("hybrid", 10, idx)]
                    for act, idx in sorted(by_act.items())
                ],
                title="hit@5 per act",
            )
        )
        print()
        by_kind: dict[str, list[int]] = {}
        for i, q in enumerate(questions):
            by_kind.setdefault(question_kind(q.text), []).append(i)
        kinds = [name for name, _ in TEMPLATES if name in by_kind]
        print(
            table(
                ["question kind", "questions", *[f"{m} hit@5" for m in MODES], "hybrid misses@5"],
                [
                    [
                        kind,
                        len(by_kind[kind]),
                        *[hit(m, 5, by_kind[kind]) for m in MODES],
                        round(len(by_kind[kind]) * (1 - hit("hybrid", 5, by_kind[kind]))),
                    ]
                    for kind in kinds
                ],
                title="hit@5 per question kind (template wording)",
            )
        )
        print()
        print(
            table(
                ["mode", "seconds for all questions", "ms/question"],
                [[m, seconds[m], seconds[m] / n * 1e3] for m in MODES],
                title="Evaluation time (includes query embedding; see bench_latency.py)",
            )
        )
        print()

        misses = [i for i in range(n) if not (ranks["hybrid"][i] and ranks["hybrid"][i] <= 5)]  # type: ignore[operator]
        RESULTS.mkdir(parents=True, exist_ok=True)
        tag_counts: Counter[str] = Counter()
        records = []
        for i in misses:
            q = questions[i]
            q_ranks = {m: ranks[m][i] for m in MODES}
            top = tops["hybrid"][i]
            tags = tag_miss(q, q_ranks, top, titles, by_title)
            tag_counts.update(tags)
            records.append(
                {
                    "index": i,
                    "kind": question_kind(q.text),
                    "question": q.text,
                    "gold": q.gold,
                    "gold_title": (titles.get(q.gold) or ["?"])[-1],
                    "same_title_sections": by_title.get(norm_title(titles.get(q.gold, [])), []),
                    "ranks": q_ranks,
                    "hybrid_top5": [
                        {"id": s, "title": (titles.get(s) or ["?"])[-1]} for s in top[:5]
                    ],
                    "bm25_top3": tops["bm25"][i][:3],
                    "dense_top3": tops["dense"][i][:3],
                    "tags": tags,
                }
            )
        with MISSES_FILE.open("w", encoding="utf-8") as f:
            for record in records:
                f.write(json.dumps(record, ensure_ascii=False) + "\n")
        print(
            table(
                ["tag (automatic; several per miss)", "misses", "share of misses"],
                [[t, c, c / max(len(misses), 1)] for t, c in tag_counts.most_common()],
                title=f"Hybrid misses at 5: {len(misses)} of {n} (written to "
                f"{MISSES_FILE.relative_to(MISSES_FILE.parents[2])})",
            )
        )
        print()
        sample = sorted(random.Random(7).sample(misses, min(args.show_misses, len(misses))))
        print(
            table(
                ["#", "gold", "gold title", "hyb", "bm25", "dense", "hybrid top 3", "question"],
                [
                    [
                        i,
                        questions[i].gold,
                        (titles.get(questions[i].gold) or ["?"])[-1][:38],
                        str(ranks["hybrid"][i] or "-"),
                        str(ranks["bm25"][i] or "-"),
                        str(ranks["dense"][i] or "-"),
                        " ".join(tops["hybrid"][i][:3]),
                        questions[i].text[:90],
                    ]
                    for i in sample
                ],
                title=f"{len(sample)} hybrid misses (seeded sample; ranks are section ranks)",
            )
        )
        print()
        h5 = hit("hybrid", 5)
        print(
            f"Target: hybrid hit@5 ≥ {TARGET_HYBRID_AT5}: {h5:.3f} → "
            f"{verdict(h5, TARGET_HYBRID_AT5, higher_is_better=True)}"
        )
        print(f"load average at the end: {load_average()}")
        app.close()
        app.catalog.close()


if __name__ == "__main__":
    main()
