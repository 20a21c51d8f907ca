"""Search latency over the statutes index (four acts): hybrid, BM25, dense, query embedding.

Ingests BNS, BNSS, BSA and CPA into a fresh collection (or reuses ``--data-dir``), loads
the model, runs 20 warm-up queries in every mode, then times, for each of the 996
synthetic questions, in a rotating order so that load drift hits every operation alike:

* ``embed``: ``kb.embedder.embed([question])`` alone (the query-embedding time);
* ``bm25`` / ``dense`` / ``hybrid``: ``kb.search(collection, question, k=10, mode=...)``
  (dense and hybrid include the query embedding);
* ``hybrid index only``: ``index.search_hybrid`` with a precomputed vector (what hybrid
  costs beyond the embedding).

Target: hybrid p50 ≤ 30 ms (warm, k = 10).

    python bench/bench_latency.py [--data-dir DIR] [--k 10]
"""

from __future__ import annotations

import argparse
import gc
import re
import statistics
import time
from collections.abc import Callable

from _common import (
    ACTS_4,
    COLLECTION,
    bench_settings,
    data_dir,
    load_average,
    load_questions,
    percentile,
    print_header,
    statute_paths,
    table,
    verdict,
)
from sleuth.app import Sleuth

TARGET_HYBRID_P50_MS = 30.0
_NAMES_SECTION = re.compile(r"\bsection\s+\d+", re.IGNORECASE)
WARMUP = 20


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", help="reuse/keep the index here (default: fresh temp dir)")
    parser.add_argument("--k", type=int, default=10, help="hits per search (10)")
    args = parser.parse_args()
    paths = statute_paths(ACTS_4)
    questions = load_questions()

    with data_dir(args.data_dir, "sleuth-bench-latency-") as ddir:
        print_header(
            "bench_latency: warm search latency over the statutes index (4 acts)",
            [
                ("data dir", f"{ddir}{' (kept)' if args.data_dir else ' (temporary)'}"),
                ("queries", f"{len(questions)} synthetic questions, k={args.k}, {WARMUP} warm-up"),
            ],
        )
        app = Sleuth(bench_settings(ddir))
        t0 = time.perf_counter()
        embedder = app.kb.embedder
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        report = app.pipeline.ingest(paths, COLLECTION)
        ingest_s = time.perf_counter() - t0
        if not report.ok:
            raise SystemExit(f"ingest failed: {[f.message for f in report.by_status('failed')]}")
        index = app.kb.index(COLLECTION)
        print(
            f"model load {load_s:.1f} s; ingest {ingest_s:.1f} s ({report.totals}); "
            f"index holds {index.count()} chunks"
        )
        kb = app.kb
        k = args.k

        ops: dict[str, Callable[[str], object]] = {
            "embed (query only)": lambda q: embedder.embed([q]),
            "bm25": lambda q: kb.search(COLLECTION, q, k=k, mode="bm25"),
            "dense (incl. embed)": lambda q: kb.search(COLLECTION, q, k=k, mode="dense"),
            "hybrid (incl. embed)": lambda q: kb.search(COLLECTION, q, k=k, mode="hybrid"),
        }
        for q in questions[:WARMUP]:
            for op in ops.values():
                op(q.text)
        print(f"warm-up done ({WARMUP} queries × {len(ops)} operations); load {load_average()}")
        t0 = time.perf_counter()
        vecs = embedder.embed([q.text for q in questions])
        batch_embed_s = time.perf_counter() - t0
        vectors = {q.index: vecs[i] for i, q in enumerate(questions)}

        def hybrid_index_only(i: int, text: str) -> object:
            return index.search_hybrid(text, vectors[i], k)

        names = [*ops, "hybrid index only (precomputed vector)"]
        times: dict[str, list[float]] = {name: [] for name in names}
        load_start = load_average()
        gc.collect()
        wall0 = time.perf_counter()
        for n, q in enumerate(questions):
            order = names[n % len(names) :] + names[: n % len(names)]
            for name in order:
                t0 = time.perf_counter()
                if name in ops:
                    ops[name](q.text)
                else:
                    hybrid_index_only(q.index, q.text)
                times[name].append((time.perf_counter() - t0) * 1e3)
        wall = time.perf_counter() - wall0
        load_end = load_average()

        rows = []
        for name in names:
            ms = times[name]
            rows.append(
                [
                    name,
                    len(ms),
                    percentile(ms, 50),
                    percentile(ms, 95),
                    percentile(ms, 99),
                    statistics.mean(ms),
                    max(ms),
                ]
            )
        print()
        print(
            table(
                ["operation", "n", "p50 ms", "p95 ms", "p99 ms", "mean ms", "max ms"],
                rows,
                title=f"Warm latency, k={k} (load average before {load_start}, after {load_end})",
            )
        )
        print()
        print(
            f"batch query embedding (all {len(questions)} questions in one embed call): "
            f"{batch_embed_s:.2f} s = {batch_embed_s / len(questions) * 1e3:.2f} ms/question"
        )
        print(f"timed loop wall time: {wall:.1f} s")
        named = [i for i, q in enumerate(questions) if _NAMES_SECTION.search(q.text)]
        named_set = set(named)
        split_rows = []
        for name in ("hybrid (incl. embed)", "dense (incl. embed)"):
            for label, idx in (
                ("names a section", named),
                ("names none", [i for i in range(len(questions)) if i not in named_set]),
            ):
                ms = [times[name][i] for i in idx]
                split_rows.append(
                    [
                        name,
                        label,
                        len(ms),
                        percentile(ms, 50),
                        percentile(ms, 95),
                        statistics.mean(ms),
                    ]
                )
        print()
        print(
            table(
                ["operation", "question", "n", "p50 ms", "p95 ms", "mean ms"],
                split_rows,
                title="Questions that name a section ('Section N of ...') vs the others",
            )
        )
        p50 = percentile(times["hybrid (incl. embed)"], 50)
        print()
        print(
            f"Target: hybrid p50 ≤ {TARGET_HYBRID_P50_MS:.0f} ms: {p50:.1f} ms → "
            f"{verdict(p50, TARGET_HYBRID_P50_MS, higher_is_better=False)}"
        )
        print(f"load average at the end: {load_average()}")
        app.close()
        app.catalog.close()


if __name__ == "__main__":
    main()
