"""Ingest throughput: the pipeline versus the raw embedder, on the same chunks.

Ingests BNS, BNSS and BSA into a fresh collection (a fresh temporary data dir per pipeline
pass) with the real embedder (all-MiniLM-L6-v2), loaded before any timing. In the same run,
the same embedder object embeds the same chunk texts (``Chunk.index_text()`` of the chunks
now in the catalog, in ingest order) in the same jobs as the pipeline (``max(4 × batch
size, EMBED_JOB_MIN)`` texts per ``embed`` call). Passes alternate (pipeline, raw, raw,
pipeline, ...) so that both orders are measured under the same load.

Target: pipeline chunks/s ÷ raw chunks/s ≥ 0.8.

    python bench/bench_ingest.py [--passes 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from _common import (
    ACTS_3,
    COLLECTION,
    bench_settings,
    load_average,
    print_header,
    statute_paths,
    table,
    verdict,
)
from sleuth.app import Sleuth
from sleuth.ingest.pipeline import EMBED_JOB_MIN, IngestReport
from sleuth.retrieval.embeddings import Embedder, get_embedder

TARGET_RATIO = 0.8


def warmup_texts(path: Path, n: int, words: int) -> list[str]:
    """``n`` real section texts of chunk length, to warm the model up on realistic shapes."""
    sections = json.loads(path.read_text(encoding="utf-8"))["sections"]
    return [" ".join(s["text"].split()[:words]) for s in sections[:n]]


def pipeline_pass(embedder: Embedder, paths: list[Path]) -> tuple[float, IngestReport, list[str]]:
    """One ingest into a fresh data dir; returns wall seconds, the report and the chunk texts."""
    with tempfile.TemporaryDirectory(prefix="sleuth-bench-ingest-") as tmp:
        app = Sleuth(bench_settings(Path(tmp)))
        if app.pipeline.embedder is not embedder:
            raise SystemExit("the pipeline did not get the pre-loaded embedder object")
        t0 = time.perf_counter()
        report = app.pipeline.ingest(paths, COLLECTION)
        wall = time.perf_counter() - t0
        if not report.ok or report.totals["added"] != len(paths):
            raise SystemExit(f"ingest did not add every file: {report.totals} {report.warnings}")
        texts = [
            chunk.index_text()
            for outcome in report.files
            for chunk in app.catalog.doc_chunks(COLLECTION, str(outcome.doc_id))
        ]
        if len(texts) != report.n_embedded:
            raise SystemExit(
                f"catalog holds {len(texts)} chunks but the pipeline embedded {report.n_embedded}"
            )
        app.close()
        app.catalog.close()
    return wall, report, texts


def raw_pass(embedder: Embedder, texts: list[str], step: int) -> float:
    """Embed ``texts`` in jobs of ``step`` texts, as the pipeline does; wall seconds."""
    t0 = time.perf_counter()
    for i in range(0, len(texts), step):
        embedder.embed(texts[i : i + step])
    return time.perf_counter() - t0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--passes", type=int, default=2, help="pipeline/raw pairs, alternating order (default 2)"
    )
    args = parser.parse_args()
    paths = statute_paths(ACTS_3)
    settings = bench_settings(Path(tempfile.gettempdir()))
    step = max(settings.embedding_batch_size * 4, EMBED_JOB_MIN)

    print_header(
        "bench_ingest: pipeline vs raw embedder throughput (BNS + BNSS + BSA)",
        [
            ("files", ", ".join(p.name for p in paths)),
            ("embedding model", settings.embedding_model),
            ("batch size / job size", f"{settings.embedding_batch_size} / {step} texts per call"),
            ("chunk words / overlap", f"{settings.chunk_words} / {settings.chunk_overlap_words}"),
        ],
    )

    t0 = time.perf_counter()
    embedder = get_embedder(settings.embedding_model, settings.embedding_batch_size)
    load_s = time.perf_counter() - t0
    warm_texts = warmup_texts(paths[-1], settings.embedding_batch_size, settings.chunk_words)
    t0 = time.perf_counter()
    embedder.embed(warm_texts)
    warm_s = time.perf_counter() - t0
    print(
        f"model load: {load_s:.2f} s; warm-up embed of {len(warm_texts)} section texts: "
        f"{warm_s:.2f} s (neither is timed below)"
    )
    print()

    texts: list[str] = []
    runs: list[dict[str, object]] = []
    reports: list[IngestReport] = []
    pipe_rates: list[float] = []
    raw_rates: list[float] = []
    for i in range(args.passes):
        order = ("pipeline", "raw") if i % 2 == 0 else ("raw", "pipeline")
        if not texts:
            order = ("pipeline", "raw")
        for position, kind in enumerate(order, start=1):
            load_before = load_average().split()[0]
            if kind == "pipeline":
                wall, report, got = pipeline_pass(embedder, paths)
                texts = texts or got
                n = report.n_embedded
                reports.append(report)
                pipe_rates.append(n / wall)
            else:
                n = len(texts)
                wall = raw_pass(embedder, texts, step)
                raw_rates.append(n / wall)
            runs.append(
                {
                    "pass": i + 1,
                    "kind": kind,
                    "position": f"{position} of 2",
                    "wall_s": wall,
                    "chunks": n,
                    "rate": n / wall,
                    "load": load_before,
                }
            )

    print(
        table(
            ["pass", "run", "order", "wall s", "chunks", "chunks/s", "load(1m) before"],
            [
                [
                    r["pass"],
                    r["kind"],
                    r["position"],
                    r["wall_s"],
                    r["chunks"],
                    r["rate"],
                    r["load"],
                ]
                for r in runs
            ],
            title="Throughput per run",
        )
    )
    print()
    print(
        table(
            [
                "pipeline pass",
                "load s",
                "chunk s",
                "embed s (bg thread)",
                "index s",
                "total s",
                "total - embed s",
                "embed-thread chunks/s",
            ],
            [
                [
                    j + 1,
                    r.timings.load_s,
                    r.timings.chunk_s,
                    r.timings.embed_s,
                    r.timings.index_s,
                    r.timings.total_s,
                    r.timings.total_s - r.timings.embed_s,
                    r.n_embedded / r.timings.embed_s if r.timings.embed_s else 0.0,
                ]
                for j, r in enumerate(reports)
            ],
            title="Pipeline stage timings (report.timings; embedding overlaps the other stages)",
        )
    )
    print()
    files = reports[0].files
    print(
        table(
            ["file", "doc_id", "status", "chunks"],
            [[Path(f.path).name, f.doc_id, f.status, f.n_chunks] for f in files],
            title="Files (first pipeline pass)",
        )
    )
    print()

    pairs = [p / r for p, r in zip(pipe_rates, raw_rates, strict=False)]
    mean_ratio = statistics.mean(pipe_rates) / statistics.mean(raw_rates)
    best_ratio = max(pipe_rates) / max(raw_rates)
    rows: list[list[object]] = [
        [f"pass {j + 1} (pipeline ÷ raw of the same pass)", ratio] for j, ratio in enumerate(pairs)
    ]
    rows.append(["mean pipeline rate ÷ mean raw rate", mean_ratio])
    rows.append(["best pipeline rate ÷ best raw rate", best_ratio])
    print(table(["ratio", "value"], rows, title="Pipeline chunks/s ÷ raw chunks/s"))
    print()
    print(
        f"Target: ratio ≥ {TARGET_RATIO}: mean {mean_ratio:.3f} → "
        f"{verdict(mean_ratio, TARGET_RATIO, higher_is_better=True)}"
    )
    print(f"load average at the end: {load_average()}")


if __name__ == "__main__":
    main()
