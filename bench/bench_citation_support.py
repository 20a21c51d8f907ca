"""Choosing the citation support thresholds on the statutes data.

Claims are the sentences of the reference answers (``output``) of ``synthetic_qa.json``,
minus the "Under Section N of ..." header and the disclaimer, in two kinds:

* ``summary`` — "This section falls under the <Act> and provides guidance on <topic>.": a
  paraphrase of the section's title, the kind of sentence an LLM writes;
* ``quote`` — sentences of the quoted section text (extractive, possibly truncated).

Each claim is scored (lexical coverage and best claim-chunk cosine, see
:mod:`sleuth.agents.support`) against its gold section (positive), the best-ranked other
section a hybrid search of the claim finds (hard negative: usually a neighbouring section of
the same act), and a random other section (easy negative). The table gives, per threshold,
the share of positives accepted (TPR) and of negatives accepted (FPR), for each score and
for the rule sleuth uses (lexical ≥ t_lex OR semantic ≥ t_sem).

    python bench/bench_citation_support.py [--data-dir bench/results/statutes-data] [--n 300]
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

import numpy as np

from _common import (
    ACTS_4,
    COLLECTION,
    RESULTS,
    STATUTES,
    bench_settings,
    data_dir,
    print_header,
    statute_paths,
    table,
)
from sleuth.agents.support import LEXICAL_THRESHOLD, SEMANTIC_THRESHOLD
from sleuth.app import Sleuth
from sleuth.ingest.records import abbreviate
from sleuth.retrieval.text import sentences, terms

LEX_GRID = (0.3, 0.4, 0.5, 0.6, 0.7, 0.8)
SEM_GRID = (0.4, 0.5, 0.55, 0.6, 0.65, 0.7)


def claims_of(output: str) -> list[tuple[str, str]]:
    """(kind, claim) pairs from one reference answer."""
    found = []
    for block in output.split("\n\n")[1:]:
        if block.startswith("DISCLAIMER"):
            continue
        kind = "summary" if block.startswith("This section falls under") else "quote"
        for sentence in sentences(block):
            sentence = sentence.rstrip(". ").removesuffix("...").strip()
            if len(set(terms(sentence))) >= 3:
                found.append((kind, sentence))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", default=str(RESULTS / "statutes-data"))
    parser.add_argument("--n", type=int, default=300, help="questions sampled (fixed seed)")
    parser.add_argument("--seed", type=int, default=20261130)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    raw = json.loads((STATUTES / "synthetic_qa.json").read_text(encoding="utf-8"))
    sample = rng.sample(raw, min(args.n, len(raw)))
    print_header("Citation support thresholds (statutes)", [("questions", str(len(sample)))])
    with data_dir(args.data_dir, "sleuth-bench-support-") as root:
        app = Sleuth(bench_settings(root))
        if COLLECTION not in {c.name for c in app.catalog.list_collections()}:
            app.pipeline.ingest(statute_paths(ACTS_4), COLLECTION)
        kb = app.kb
        all_ids = sorted({c.source_id for c in kb.catalog.section_stubs(COLLECTION)})
        sections: dict[str, list] = {}

        def section(sid: str) -> list:
            if sid not in sections:
                sections[sid] = kb.section(COLLECTION, sid)
            return sections[sid]

        vectors: dict[str, np.ndarray] = {}

        def embed_section(sid: str) -> np.ndarray:
            if sid not in vectors:
                vectors[sid] = kb.embedder.embed([c.index_text() for c in section(sid)])
            return vectors[sid]

        rows: list[dict] = []
        for q in sample:
            gold = f"{abbreviate(q['source_act'])}_S{q['source_section']}"
            if not section(gold):
                continue
            for kind, claim in claims_of(q["output"]):
                hard = next(
                    (h.chunk.source_id for h in kb.search(COLLECTION, claim, k=10)
                     if h.chunk.source_id != gold),
                    None,
                )  # fmt: skip
                easy = rng.choice([s for s in all_ids if s != gold])
                claim_vec = kb.embedder.embed([claim])[0]
                claim_terms = set(terms(claim))
                for label, sid in (("positive", gold), ("hard", hard), ("easy", easy)):
                    if sid is None:
                        continue
                    chunks = section(sid)
                    text = " ".join([chunks[0].heading, *(c.text for c in chunks)])
                    lexical = len(claim_terms & set(terms(text))) / len(claim_terms)
                    semantic = float(np.max(embed_section(sid) @ claim_vec))
                    rows.append(
                        {"kind": kind, "label": label, "lexical": lexical, "semantic": semantic}
                    )
    out: list[list] = []
    for kind in ("summary", "quote", "all"):
        subset = [r for r in rows if kind == "all" or r["kind"] == kind]

        def rate(label: str, accept, subset=subset) -> float:  # type: ignore[no-untyped-def]
            group = [r for r in subset if r["label"] == label]
            return sum(1 for r in group if accept(r)) / max(1, len(group))

        n_pos = sum(1 for r in subset if r["label"] == "positive")
        for t in LEX_GRID:
            acc = lambda r, t=t: r["lexical"] >= t  # noqa: E731
            out.append([kind, n_pos, f"lexical ≥ {t}", rate("positive", acc),
                        rate("hard", acc), rate("easy", acc)])  # fmt: skip
        for t in SEM_GRID:
            acc = lambda r, t=t: r["semantic"] >= t  # noqa: E731
            out.append([kind, n_pos, f"semantic ≥ {t}", rate("positive", acc),
                        rate("hard", acc), rate("easy", acc)])  # fmt: skip
        combos = dict.fromkeys(
            [
                (LEXICAL_THRESHOLD, SEMANTIC_THRESHOLD),
                (0.5, 0.6),
                (0.6, 0.6),
                (0.6, 0.65),
                (0.7, 0.6),
                (0.7, 0.65),
                (0.7, 0.7),
            ]
        )
        for tl, ts in combos:  # fmt: skip
            acc = lambda r, tl=tl, ts=ts: r["lexical"] >= tl or r["semantic"] >= ts  # noqa: E731
            mark = "  ← sleuth" if (tl, ts) == (LEXICAL_THRESHOLD, SEMANTIC_THRESHOLD) else ""
            out.append([kind, n_pos, f"lex ≥ {tl} or sem ≥ {ts}{mark}", rate("positive", acc),
                        rate("hard", acc), rate("easy", acc)])  # fmt: skip
    print(
        table(
            ["claims", "positives", "rule", "TPR (gold)", "FPR (hard neg.)", "FPR (random)"],
            out,
        )
    )
    path = Path(RESULTS) / "citation_support.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    print(f"\nper-pair scores: {path}")


if __name__ == "__main__":
    main()
