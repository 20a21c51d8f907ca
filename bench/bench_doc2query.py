"""doc2query, tried: section hit@k with model-written questions per section, against without.

Document expansion by query prediction (Nogueira, Yang, Lin & Cho, "Document Expansion by
Query Prediction", 2019, arXiv:1904.08375): a model reads each section once and writes the
questions it answers, so that lay wording ("Can I be jailed for taking someone's bag?") meets
statutory wording ("Whoever, intending to take dishonestly any movable property …"). Here the
writer is ``--llm`` (``local``: the bundled Qwen2.5-Coder-1.5B), prompted with each section's
heading and first 700 characters for ``--n`` (3) questions; its replies are cached in
``<data_dir>/doc2query.sqlite3`` (by model, prompt and passage), so a second run asks the
model nothing (the first: ~3.5 s a section on 2 cores, 1,059 sections).

Three configurations of ``search_sections`` (hybrid, k = 10) over the BNS, BNSS and BSA:

- ``plain``: the index as sleuth builds it, reranker off and on;
- ``expanded``: the questions joined to every chunk's index text (heading, questions, body:
  what BM25, the embedder and the cross-encoder read; the reader would still read the body),
  reranker off and on — classic doc2query;
- ``candidates``: the plain index, with the :data:`EXTRA_SECTIONS` sections whose questions
  come nearest the question (cosine, best question per section) added to the reranker's pool;
  the cross-encoder reads only the sections' own text. This skips sleuth's pinning of sections
  a question names by number, so it is reported for the judged and lay sets only.

Question sets of one ``--split``: ``judged`` (the judged set's in-corpus questions), ``lay``
(the dialogue set's first turns and the held-out yes/no set), ``synthetic, no title``
(``synthetic_qa.json``'s BNS/BNSS questions without their section's title). Prints hit@1/5/10
and MRR@10 per set and configuration; per-question records to
``bench/results/doc2query-<split>.jsonl``. Run it alone (2 cores).

    python bench/bench_doc2query.py --split dev --data-dir /tmp/sleuth-bench
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sqlite3
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
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
EXPANDED = "doc2query_expanded"
EXTRA_SECTIONS = 5
PASSAGE_CHARS = 700
MODEL_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
"""The cache key's model name for ``--llm local`` (the bundled GGUF's file name)."""
PROMPT = (
    "Statute section:\n{heading}\n{passage}\n\n"
    "Write {n} different questions that a person with no legal training might ask, in "
    "everyday words, whose answer is in this section. Do not mention the section, its number "
    "or the Act. One question per line, no numbering."
)
_NUMBERING = re.compile(r"^\s*(?:[-*\u2022]|\(?\d{1,2}[.)])\s*")


def parse_questions(reply: str, n: int) -> list[str]:
    """The questions of a reply: one per line, numbering removed, lines not ending in "?"
    and repeats left out; at most ``n``."""
    out: list[str] = []
    for line in reply.splitlines():
        text = _NUMBERING.sub("", line).strip().strip('"').strip()
        if text.endswith("?") and len(text) >= 8 and text.lower() not in map(str.lower, out):
            out.append(text)
    return out[:n]


def first_chunks(app: Any) -> dict[str, Any]:
    """``source_id`` → the first chunk (lowest part) of each section of the plain collection."""
    first: dict[str, Any] = {}
    for doc in app.catalog.list_documents(PLAIN):
        for chunk in app.catalog.doc_chunks(PLAIN, doc.doc_id):
            if chunk.source_id not in first or chunk.part < first[chunk.source_id].part:
                first[chunk.source_id] = chunk
    return first


def write_questions(app: Any, llm: str, n: int) -> tuple[dict[str, list[str]], dict[str, Any]]:
    """``source_id`` → the questions of each section of the plain collection (read off its
    first chunk: heading and first :data:`PASSAGE_CHARS` characters), and the cost (sections
    written by the model, read from the cache, seconds)."""
    from langchain_core.messages import HumanMessage

    from sleuth.llm.factory import make_chat_model

    ddir = app.settings.data_dir
    db = sqlite3.connect(str(ddir / "doc2query.sqlite3"))
    db.execute("CREATE TABLE IF NOT EXISTS questions (key TEXT PRIMARY KEY, questions TEXT)")
    model: Any = None
    name = MODEL_NAME if llm == "local" else llm
    out: dict[str, list[str]] = {}
    cost = {"written": 0, "cached": 0, "seconds": 0.0}
    for sid, chunk in first_chunks(app).items():
        heading = chunk.title_path[-1] if chunk.title_path else ""
        passage = chunk.text[:PASSAGE_CHARS]
        raw = json.dumps([1, name, n, heading, passage])
        key = hashlib.sha256(raw.encode("utf-8")).hexdigest()
        row = db.execute("SELECT questions FROM questions WHERE key = ?", (key,)).fetchone()
        if row is not None:
            out[sid] = json.loads(row[0])
            cost["cached"] += 1
            continue
        if model is None:
            model = make_chat_model(app.settings.model_copy(update={"llm": llm}))
        t0 = time.perf_counter()
        prompt = PROMPT.format(heading=heading, passage=passage, n=n)
        reply = model.invoke([HumanMessage(content=prompt)], max_tokens=30 * n)
        cost["seconds"] += time.perf_counter() - t0
        found = parse_questions(str(reply.content), n)
        with db:
            db.execute("INSERT OR REPLACE INTO questions VALUES (?, ?)", (key, json.dumps(found)))
        out[sid] = found
        cost["written"] += 1
    db.close()
    cost["seconds"] = round(cost["seconds"], 1)
    return out, cost


@contextmanager
def expanded_text(asked: dict[str, list[str]]) -> Iterator[None]:
    """``Chunk.index_text`` with the section's questions between heading and body."""
    from sleuth.types import Chunk

    plain = Chunk.index_text

    def index_text(chunk: Chunk) -> str:
        lines = "\n".join(asked.get(chunk.source_id) or [])
        return f"{chunk.heading}\n{lines}\n{chunk.text}" if lines else plain(chunk)

    Chunk.index_text = index_text  # type: ignore[method-assign]
    try:
        yield
    finally:
        Chunk.index_text = plain  # type: ignore[method-assign]


class QuestionCandidates:
    """The sections whose questions come nearest a query (cosine, best question per
    section), and the first chunk of each section."""

    def __init__(self, app: Any, asked: dict[str, list[str]]) -> None:
        import numpy as np

        self.first = first_chunks(app)
        pairs = [(sid, q) for sid, qs in asked.items() if sid in self.first for q in qs]
        self.owners = [sid for sid, _ in pairs]
        self.vectors = np.asarray(app.kb.embedder.embed([q for _, q in pairs]), dtype=np.float32)

    def nearest(self, vector: Any, k: int) -> list[str]:
        best: dict[str, float] = {}
        for sid, score in zip(self.owners, self.vectors @ vector, strict=True):
            best[sid] = max(best.get(sid, -2.0), float(score))
        return sorted(best, key=lambda sid: -best[sid])[:k]


def with_candidates(app: Any, extra: QuestionCandidates, question: str) -> list[str]:
    """Section ids of a reranked hybrid search of the plain index (the fused chunks
    ``search_sections(k=10)`` reranks) whose pool also holds the nearest sections by
    question."""
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
    order = kb.cross_encoder.rerank(question, [h.chunk.index_text() for h in pool])
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
    from sleuth.llm import testing

    testing.ALLOW_MODEL_REQUESTS = True
    rev = commit()
    print_header("bench_doc2query", [("split", args.split), ("n", str(args.n)), ("commit", rev)])
    items = questions(args.split)
    records: list[dict[str, Any]] = []
    with data_dir(args.data_dir, "sleuth-doc2query-") as ddir:
        builder = Sleuth(bench_settings(ddir))
        builder.pipeline.ingest(statute_paths(ACTS_3), PLAIN)
        asked, cost = write_questions(builder, args.llm, args.n)
        with expanded_text(asked):
            builder.pipeline.ingest(statute_paths(ACTS_3), EXPANDED)
        builder.close()
        apps = {
            f: Sleuth(bench_settings(ddir).model_copy(update={"rerank": f})) for f in ("off", "on")
        }
        extra = QuestionCandidates(apps["on"], asked)
        for item in items:
            row: dict[str, Any] = {k: item[k] for k in ("id", "set", "gold")}
            for flag, app in apps.items():
                hits = app.kb.search_sections(PLAIN, item["question"], k=10)
                row[f"rank_plain_{flag}"] = rank_of([h.chunk.source_id for h in hits], item["gold"])
                with expanded_text(asked):
                    hits = app.kb.search_sections(EXPANDED, item["question"], k=10)
                row[f"rank_expanded_{flag}"] = rank_of(
                    [h.chunk.source_id for h in hits], item["gold"]
                )
            if item["set"] != "synthetic, no title":
                ids = with_candidates(apps["on"], extra, item["question"])
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
    print(f"{len(records)} questions -> {path}; questions: {json.dumps(cost)}\n")
    print(table(records))


def table(records: list[dict[str, Any]]) -> str:
    """hit@1/5/10 and MRR@10 per set, configuration and reranker setting (Markdown)."""
    lines = [
        "| set | questions | configuration | rerank | hit@1 | hit@5 | hit@10 | MRR@10 |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name in sorted({r["set"] for r in records}):
        group = [r for r in records if r["set"] == name]
        for key in sorted({k for r in group for k in r if k.startswith("rank_")}):
            _, config, flag = key.split("_")
            ranks = [r[key] for r in group]

            def hit(k: int, ranks: list[int | None] = ranks) -> float:
                return sum(1 for x in ranks if x is not None and x <= k) / len(ranks)

            mrr = sum(1 / x for x in ranks if x is not None) / len(ranks)
            lines.append(
                f"| {name} | {len(group)} | {config} | {flag} | {hit(1):.2f} | {hit(5):.2f} "
                f"| {hit(10):.2f} | {mrr:.2f} |"
            )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
