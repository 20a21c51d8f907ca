"""Embedding backends: torch (sentence-transformers) vs onnxruntime fp32 vs onnxruntime int8.

The bundled all-MiniLM-L6-v2 on each backend of ``sleuth.retrieval.embeddings``:

* **cold start**, in a fresh subprocess per backend (and per repeat): import of the module +
  model load, then one query embedding; peak RSS of that process; whether torch got
  imported. The ONNX files are exported beforehand into the benchmark's data dir (the
  one-time export and int8 quantisation are timed separately).
* **throughput**, in this process, every model loaded and warmed up first: the statute
  sections of the four acts (``title + "\\n" + text``, 1,166 texts) embedded in jobs of
  ``max(4 × batch size, EMBED_JOB_MIN)`` texts per ``embed`` call, as the ingest pipeline
  does; passes rotate the backend order so that each is measured under the same load.
* **agreement**: cosine of every section vector and of the 996 synthetic_qa questions to
  torch's (min / mean), and section-level dense hit@1/5/10 (each backend embeds both the
  sections and the questions; gold = ``abbreviate(source_act) + "_S" + source_section``).

Targets: onnx fp32 cosine to torch ≥ 0.999 (min over sections); hit@5 within 0.01 of torch;
ingest throughput ≥ 2 × torch (fastest ONNX variant that keeps cosine ≥ 0.99).

    python bench/bench_embeddings.py [--passes 2] [--cold-repeats 1] [--sweep] [--json]

The results are also written to ``bench/results/bench_embeddings.json``.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from _common import (
    ACTS_4,
    REPO,
    RESULTS,
    STATUTES,
    data_dir,
    load_average,
    print_header,
    statute_paths,
    table,
    verdict,
)

BACKENDS = ("torch", "onnx", "onnx-int8")
QUERY = "What is the punishment for murder?"
TARGET_SPEEDUP = 2.0
TARGET_COSINE = 0.999
TARGET_HIT5_DELTA = 0.01

_COLD = """
import json, sys, time
t0 = time.perf_counter()
def peak_rss_mb():
    # VmHWM starts afresh at exec (ru_maxrss would carry the forking parent's peak)
    for line in open("/proc/self/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

from sleuth.retrieval.embeddings import SentenceTransformerEmbedder
from pathlib import Path
model = SentenceTransformerEmbedder(backend=sys.argv[1], data_dir=Path(sys.argv[2]))
t1 = time.perf_counter()
vector = model.embed([sys.argv[3]])
t2 = time.perf_counter()
print(json.dumps({
    "backend": model.backend,
    "load_s": t1 - t0,
    "query_s": t2 - t1,
    "first_query_total_s": t2 - t0,
    "peak_rss_mb": peak_rss_mb(),
    "torch_imported": "torch" in sys.modules,
    "dim": int(vector.shape[1]),
}))
"""


def section_texts() -> tuple[list[str], list[str]]:
    """``(texts, ids)`` of every section of the four acts: ``title\\ntext`` and ``BNS_S103``."""
    from sleuth.ingest.records import abbreviate

    texts: list[str] = []
    ids: list[str] = []
    for path in statute_paths(ACTS_4):
        act = json.loads(path.read_text(encoding="utf-8"))
        for s in act["sections"]:
            texts.append(f"{s['title']}\n{s['text']}")
            ids.append(f"{abbreviate(act['name'])}_S{s['section_number']}")
    return texts, ids


def cold_start(backend: str, data: Path) -> dict[str, Any]:
    """One fresh interpreter: import + load + one query; its JSON line as a dict."""
    out = subprocess.run(
        [sys.executable, "-c", _COLD, backend, str(data), QUERY],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"cold start of {backend} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def embed_jobs(embedder: Any, texts: list[str], step: int) -> tuple[float, np.ndarray]:
    """Embed ``texts`` in jobs of ``step``; ``(wall seconds, (n, dim) vectors)``."""
    parts = []
    t0 = time.perf_counter()
    for i in range(0, len(texts), step):
        parts.append(embedder.embed(texts[i : i + step]))
    return time.perf_counter() - t0, np.concatenate(parts)


def hits(docs: np.ndarray, queries: np.ndarray, doc_ids: list[str], gold: list[str]) -> dict:
    """Section-level dense hit@1/5/10 of ``queries`` against ``docs`` (both L2-normalised)."""
    scores = queries @ docs.T
    top = np.argsort(-scores, axis=1)[:, :10]
    ranked = [[doc_ids[j] for j in row] for row in top]
    return {
        f"hit@{k}": float(np.mean([g in r[:k] for g, r in zip(gold, ranked, strict=True)]))
        for k in (1, 5, 10)
    }


def cos_stats(a: np.ndarray, b: np.ndarray) -> tuple[float, float]:
    """(min, mean) row-wise cosine of two L2-normalised ``(n, dim)`` arrays."""
    c = np.sum(a.astype(np.float64) * b.astype(np.float64), axis=1)
    return float(c.min()), float(c.mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--passes", type=int, default=2, help="throughput passes (default 2)")
    parser.add_argument(
        "--cold-repeats", type=int, default=1, help="cold-start subprocesses per backend"
    )
    parser.add_argument(
        "--sweep",
        action="store_true",
        help="also time onnx fp32/int8 at other batch sizes and thread counts (one pass each)",
    )
    parser.add_argument("--data-dir", help="ONNX cache data dir to reuse (default: a fresh one)")
    parser.add_argument("--json", action="store_true", help="print one JSON object instead")
    args = parser.parse_args()

    from sleuth.config import Settings
    from sleuth.ingest.pipeline import EMBED_JOB_MIN
    from sleuth.retrieval.embeddings import SentenceTransformerEmbedder

    batch = Settings.model_fields["embedding_batch_size"].default
    step = max(batch * 4, EMBED_JOB_MIN)
    texts, doc_ids = section_texts()
    from _common import load_questions

    questions = load_questions()
    qtexts = [q.text for q in questions]
    gold = [q.gold for q in questions]
    result: dict[str, Any] = {
        "sections": len(texts),
        "questions": len(qtexts),
        "batch_size": batch,
        "job_size": step,
        "load_average_start": load_average(),
    }
    if not args.json:
        print_header(
            "bench_embeddings: torch vs onnxruntime (fp32, int8) for all-MiniLM-L6-v2",
            [
                ("texts", f"{len(texts)} statute sections (4 acts), {len(qtexts)} questions"),
                ("batch size / job size", f"{batch} / {step} texts per embed call"),
                ("data", str(STATUTES)),
            ],
        )

    with data_dir(args.data_dir, "sleuth-bench-embed-") as data:
        # one-time ONNX export / quantisation (not part of any timing below)
        from sleuth.retrieval.embeddings import onnx_cache_dir
        from sleuth.retrieval.onnx_embedder import OnnxEmbedder, default_threads

        embedders: dict[str, Any] = {}
        prep: dict[str, Any] = {}
        for backend in BACKENDS:
            t0 = time.perf_counter()
            embedders[backend] = SentenceTransformerEmbedder(
                backend=backend, batch_size=batch, data_dir=data
            )
            impl = embedders[backend]._impl
            prep[backend] = {
                "load_s": time.perf_counter() - t0,
                "built": bool(getattr(impl, "built", False)),
                "file": str(getattr(impl, "path", "")),
                "file_mb": (
                    Path(impl.path).stat().st_size / 1e6 if hasattr(impl, "path") else None
                ),
            }
        result["prepare"] = prep

        cold: dict[str, list[dict[str, Any]]] = {b: [] for b in BACKENDS}
        for _ in range(args.cold_repeats):
            for backend in BACKENDS:
                cold[backend].append(cold_start(backend, data))
        result["cold"] = cold

        # warm-up on realistic shapes
        for e in embedders.values():
            e.embed(texts[:batch])

        rates: dict[str, list[float]] = {b: [] for b in BACKENDS}
        vectors: dict[str, np.ndarray] = {}
        runs: list[dict[str, Any]] = []
        for i in range(args.passes):
            order = BACKENDS[i % len(BACKENDS) :] + BACKENDS[: i % len(BACKENDS)]
            for backend in order:
                before = load_average().split()[0]
                wall, vecs = embed_jobs(embedders[backend], texts, step)
                vectors.setdefault(backend, vecs)
                rates[backend].append(len(texts) / wall)
                runs.append(
                    {
                        "pass": i + 1,
                        "backend": backend,
                        "wall_s": wall,
                        "rate": len(texts) / wall,
                        "load": before,
                    }
                )
        result["throughput_runs"] = runs

        qvec = {b: e.embed(qtexts) for b, e in embedders.items()}
        quality: dict[str, Any] = {}
        for backend in BACKENDS:
            smin, smean = cos_stats(vectors[backend], vectors["torch"])
            qmin, qmean = cos_stats(qvec[backend], qvec["torch"])
            quality[backend] = {
                "section_cos_min": smin,
                "section_cos_mean": smean,
                "query_cos_min": qmin,
                "query_cos_mean": qmean,
                **hits(vectors[backend], qvec[backend], doc_ids, gold),
            }
        quality["onnx-int8 docs + onnx queries"] = {
            **hits(vectors["onnx-int8"], qvec["onnx"], doc_ids, gold)
        }
        quality["onnx-int8 docs + torch queries"] = {
            **hits(vectors["onnx-int8"], qvec["torch"], doc_ids, gold)
        }
        result["quality"] = quality

        sweep: list[dict[str, Any]] = []
        if args.sweep:
            threads_all = default_threads()
            configs = [("fp32", threads_all, bs) for bs in (16, 32, 64, 256)]
            configs += [("fp32", 1, 32), ("int8", threads_all, 32), ("int8", threads_all, 64)]
            for variant, threads, bs in configs:
                e = OnnxEmbedder(
                    embedders["onnx"]._impl.spec.model_dir,
                    "all-MiniLM-L6-v2",
                    onnx_cache_dir(data),
                    batch_size=bs,
                    variant=variant,
                    threads=threads,
                )
                e.batch_size = bs  # past MAX_BATCH too, to show why it is there
                e.embed(texts[:bs])
                wall, _ = embed_jobs(e, texts, max(step, bs))
                sweep.append(
                    {
                        "variant": variant,
                        "threads": threads,
                        "batch_size": bs,
                        "rate": len(texts) / wall,
                        "load": load_average().split()[0],
                    }
                )
            result["sweep"] = sweep

    mean_rate = {b: statistics.mean(r) for b, r in rates.items()}
    speedup = {b: mean_rate[b] / mean_rate["torch"] for b in BACKENDS}
    result["mean_rate"] = mean_rate
    result["speedup_vs_torch"] = speedup
    result["load_average_end"] = load_average()
    hit5 = {b: quality[b]["hit@5"] for b in BACKENDS}
    result["targets"] = {
        "onnx_cos_min": verdict(quality["onnx"]["section_cos_min"], TARGET_COSINE, True),
        "onnx_hit5_delta": verdict(abs(hit5["onnx"] - hit5["torch"]), TARGET_HIT5_DELTA, False),
        "int8_hit5_delta": verdict(
            abs(hit5["onnx-int8"] - hit5["torch"]), TARGET_HIT5_DELTA, False
        ),
        "onnx_speedup": verdict(speedup["onnx"], TARGET_SPEEDUP, True),
        "int8_speedup": verdict(speedup["onnx-int8"], TARGET_SPEEDUP, True),
    }
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "bench_embeddings.json").write_text(json.dumps(result, indent=2), encoding="utf-8")
    if args.json:
        print(json.dumps(result, indent=2))
        return

    print(
        table(
            ["backend", "load s (export incl.)", "exported now", "file MB"],
            [[b, p["load_s"], str(p["built"]), p["file_mb"] or "-"] for b, p in prep.items()],
            title="Preparation in this process (the one-time ONNX export / int8 quantisation)",
        )
    )
    print()
    print(
        table(
            ["backend", "run", "import + load s", "one query s", "peak RSS MB", "torch imported"],
            [
                [b, j + 1, c["load_s"], c["query_s"], c["peak_rss_mb"], str(c["torch_imported"])]
                for b in BACKENDS
                for j, c in enumerate(cold[b])
            ],
            title="Cold start: a fresh subprocess per row (cache already built)",
        )
    )
    print()
    print(
        table(
            ["pass", "backend", "wall s", "sections/s", "load(1m) before"],
            [[r["pass"], r["backend"], r["wall_s"], r["rate"], r["load"]] for r in runs],
            title=f"Throughput: {len(texts)} sections, {step} texts per embed call",
        )
    )
    print()
    print(
        table(
            ["backend", "mean sections/s", "× torch"],
            [[b, mean_rate[b], speedup[b]] for b in BACKENDS],
            title="Mean throughput",
        )
    )
    print()
    rows = []
    for name, q in quality.items():
        rows.append(
            [
                name,
                q.get("section_cos_min", "-"),
                q.get("section_cos_mean", "-"),
                q.get("query_cos_min", "-"),
                q.get("query_cos_mean", "-"),
                q["hit@1"],
                q["hit@5"],
                q["hit@10"],
            ]
        )
    print(
        table(
            [
                "vectors",
                "sect cos min",
                "sect cos mean",
                "query cos min",
                "query cos mean",
                "hit@1",
                "hit@5",
                "hit@10",
            ],
            rows,
            title="Agreement with torch (cosine) and dense section-level hit@k",
        )
    )
    print(
        "  exact cosines: "
        + "; ".join(
            f"{b}: sections {quality[b]['section_cos_min']:.6f} / "
            f"{quality[b]['section_cos_mean']:.6f}, queries {quality[b]['query_cos_min']:.6f} / "
            f"{quality[b]['query_cos_mean']:.6f}"
            for b in ("onnx", "onnx-int8")
        )
    )
    print()
    if sweep:
        print(
            table(
                ["variant", "threads", "batch size", "sections/s", "load(1m)"],
                [
                    [s["variant"], s["threads"], s["batch_size"], s["rate"], s["load"]]
                    for s in sweep
                ],
                title="Sweep (one pass each, not interleaved with torch)",
            )
        )
        print()
    for key, value in result["targets"].items():
        print(f"Target {key}: {value}")
    print(f"load average at the end: {result['load_average_end']}")


if __name__ == "__main__":
    main()
