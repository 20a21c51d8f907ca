"""doc2query: section hit@k of the plain index against one expanded with model-written questions.

The BNS, BNSS and BSA are ingested twice into one data dir: as they are, and with
``SLEUTH_DOC2QUERY=N`` (``--n``, 3), the questions written by ``--llm`` (``local``: the bundled
Qwen2.5-Coder-1.5B; cached in ``<data_dir>/doc2query.sqlite3``, so a second run asks the
model nothing). Each question of one ``--split`` goes through
``KnowledgeBase.search_sections`` (hybrid, k = 10) on both indexes, reranker off and on, and
the gold section's rank is read off each list; a third configuration, ``candidates``, keeps
the plain index and adds to the reranker's pool the five sections whose questions come
nearest the question (:class:`QuestionCandidates`). Question sets (:func:`questions`):

- ``judged``: the judged set's in-corpus questions (``bench/data/statutes_judged.jsonl``);
- ``lay``: the dialogue set's first turns and the held-out yes/no set (``bench_reader.py
  --set lay``), written by others than the reader's authors;
- ``synthetic, no title``: ``synthetic_qa.json``'s BNS/BNSS questions without their
  section's title (the template questions BM25 does not match by title).

Prints hit@1/5/10, MRR@10 and the p50 ms per search per set and configuration, and the
ingest's doc2query cost (sections questioned by the model or read from the cache, seconds).
Per-question records to ``bench/results/doc2query-<split>.jsonl``. Run it alone (2 cores).

    python bench/bench_doc2query.py --split dev --data-dir /tmp/sleuth-bench
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

from _common import (
    ACTS_3,
    RESULTS,
    bench_settings,
    commit,
    data_dir,
    load_average,
    print_header,
    statute_paths,
)
from bench_reader import lay_items
from bench_rerank import questions as rerank_questions
from bench_rerank import rank_of

PLAIN = "doc2query_plain"
CONFIGS = ("plain", "expanded", "candidates")
EXTRA_SECTIONS = 5
"""``candidates``: sections whose questions come closest to the question, added to the plain
index's reranked pool (the design kept apart from the index text: the questions only bring
candidates, the cross-encoder judges the sections' own text)."""


class QuestionCandidates:
    """The expanded collection's questions, embedded once: the sections whose questions are
    nearest a query (cosine, best question per section)."""

    def __init__(self, app: Any, collection: str) -> None:
        import numpy as np

        self.first: dict[str, Any] = {}
        texts, owners = [], []
        for doc in app.catalog.list_documents(collection):
            for chunk in app.catalog.doc_chunks(collection, doc.doc_id):
                self.first.setdefault(chunk.source_id, chunk)
        for sid, chunk in self.first.items():
            for question in chunk.metadata.get("doc2query") or []:
                texts.append(question)
                owners.append(sid)
        self.owners = owners
        self.vectors = np.asarray(app.kb.embedder.embed(texts), dtype=np.float32)

    def nearest(self, vector: Any, k: int) -> list[str]:
        best: dict[str, float] = {}
        for sid, score in zip(self.owners, self.vectors @ vector, strict=True):
            best[sid] = max(best.get(sid, -2.0), float(score))
        return sorted(best, key=lambda sid: -best[sid])[:k]


def with_candidates(app: Any, extra: QuestionCandidates, question: str) -> list[str]:
    """Section ids of ``search_sections(PLAIN, question, k=10)`` with the reranker on, the
    pool widened by the :data:`EXTRA_SECTIONS` sections whose questions are nearest."""
    from sleuth.retrieval.search import best_per_section
    from sleuth.types import Hit

    kb = app.kb
    vector = kb.embed_queries([question])[0]
    pool = kb.index(PLAIN).search_hybrid(question, vector, max(30, app.settings.rerank_candidates))
    held = {h.chunk.source_id for h in pool}
    pool += [
        Hit(chunk=extra.first[sid], score=0.0, rank=len(pool) + 1, retriever="dense")
        for sid in extra.nearest(vector, EXTRA_SECTIONS)
        if sid not in held
    ]
    order = kb.cross_encoder.rerank(question, [h.chunk.passage_text() for h in pool])
    return [h.chunk.source_id for h in best_per_section([pool[i] for i, _ in order], 10)]


def questions(split: str) -> list[dict[str, Any]]:
    """``{"id", "set", "question", "gold"}`` of the three sets in ``split``."""
    from sleuth.eval.datasets import split_of

    out = [q for q in rerank_questions(split) if q["set"] in ("judged", "synthetic, no title")]
    for item in lay_items():
        if split in ("all", split_of(str(item["id"]))):
            out.append(
                {
                    "id": item["id"],
                    "set": "lay",
                    "question": item["question"],
                    "gold": item["gold_source_ids"],
                }
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--split", choices=("dev", "test", "all"), default="dev")
    parser.add_argument("--n", type=int, default=3, help="questions per section")
    parser.add_argument("--llm", default="local", help="the model writing them")
    parser.add_argument("--data-dir", help="keep the indexes here (default: a temp dir)")
    parser.add_argument("--out", default=str(RESULTS))
    args = parser.parse_args()

    from sleuth.app import Sleuth
    from sleuth.config import Settings
    from sleuth.llm import testing

    testing.ALLOW_MODEL_REQUESTS = True
    rev = commit()
    print_header("bench_doc2query", [("split", args.split), ("n", str(args.n)), ("commit", rev)])
    items = questions(args.split)
    expanded = f"doc2query_d2q{args.n}"
    records: list[dict[str, Any]] = []
    with data_dir(args.data_dir, "sleuth-doc2query-") as ddir:

        def settings(**update: Any) -> Settings:
            return bench_settings(ddir).model_copy(update=update)

        writer = Sleuth(settings(llm=args.llm, doc2query=args.n))
        t0 = time.perf_counter()
        report = writer.pipeline.ingest(statute_paths(ACTS_3), expanded)
        cost = {
            "written": report.questions_written,
            "cached": report.questions_cached,
            "doc2query_s": round(report.timings.doc2query_s, 1),
            "ingest_s": round(time.perf_counter() - t0, 1),
        }
        writer.close()
        plain = Sleuth(settings())
        plain.pipeline.ingest(statute_paths(ACTS_3), PLAIN)
        plain.close()
        apps = {flag: Sleuth(settings(rerank=flag)) for flag in ("off", "on")}
        for app in apps.values():
            app.kb.search_sections(PLAIN, "warm up", k=10)
            app.kb.search_sections(expanded, "warm up", k=10)
        extra = QuestionCandidates(apps["on"], expanded)
        for item in items:
            row: dict[str, Any] = {k: item[k] for k in ("id", "set", "gold")}
            for config, collection in zip(CONFIGS[:2], (PLAIN, expanded), strict=True):
                for flag, app in apps.items():
                    started = time.perf_counter()
                    hits = app.kb.search_sections(collection, item["question"], k=10)
                    key = f"{config}_{flag}"
                    row[f"ms_{key}"] = round(1000 * (time.perf_counter() - started), 1)
                    row[f"rank_{key}"] = rank_of([h.chunk.source_id for h in hits], item["gold"])
            started = time.perf_counter()
            ids = with_candidates(apps["on"], extra, item["question"])
            row["ms_candidates_on"] = round(1000 * (time.perf_counter() - started), 1)
            row["rank_candidates_on"] = rank_of(ids, item["gold"])
            records.append(row)
        for app in apps.values():
            app.close()
    meta = {
        "meta": True,
        "split": args.split,
        "n": args.n,
        "llm": args.llm,
        "commit": rev,
        "doc2query": cost,
        "load_average_end": load_average(),
    }
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"doc2query-{args.split}.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in [meta, *records]), encoding="utf-8")
    print(f"{len(records)} questions -> {path}; doc2query ingest: {json.dumps(cost)}\n")
    print(table(records))


def table(records: list[dict[str, Any]]) -> str:
    """hit@1/5/10, MRR@10 and p50 ms per set, index and reranker setting (Markdown)."""
    lines = [
        "| set | questions | index | rerank | hit@1 | hit@5 | hit@10 | MRR@10 | p50 ms |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name in sorted({r["set"] for r in records}):
        group = [r for r in records if r["set"] == name]
        for config in CONFIGS:
            for flag in ("off", "on") if config != "candidates" else ("on",):
                ranks = [r[f"rank_{config}_{flag}"] for r in group]

                def hit(k: int, ranks: list[int | None] = ranks) -> float:
                    return sum(1 for x in ranks if x is not None and x <= k) / len(ranks)

                mrr = sum(1 / x for x in ranks if x is not None) / len(ranks)
                ms = statistics.median(r[f"ms_{config}_{flag}"] for r in group)
                lines.append(
                    f"| {name} | {len(group)} | {config} | {flag} | {hit(1):.2f} | {hit(5):.2f} "
                    f"| {hit(10):.2f} | {mrr:.2f} | {ms:.0f} |"
                )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
