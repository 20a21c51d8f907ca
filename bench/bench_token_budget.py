"""The ONNX embedder's token budget per forward pass: throughput, memory and vectors.

For each budget (padded tokens per pass, ``onnx_embedder.MAX_BATCH_TOKENS``; "none" = 32
texts whatever their length, the behaviour before the budget), in a fresh subprocess with
the bundled all-MiniLM-L6-v2 on onnxruntime fp32:

* **ingest**: the 1,166 statute sections of the four acts (``title + "\\n" + text``)
  embedded 128 per ``embed`` call, as the ingest pipeline sends them: sections/s;
* **memory**: the process's RSS after loading the model, after the ingest, and after 200
  mixed calls (1 to 40 texts cut to 50–3,000 characters, a fixed seed): onnxruntime's
  memory arena keeps the largest pass a session has run, so this is what a long-lived
  server keeps;
* **vectors**: the smallest cosine of any section's vector to the "none" run's.

The ONNX cache of ``--data-dir`` (default: a fresh one, exported first with torch in a child
process) is shared by every row.

    python bench/bench_token_budget.py [--budgets none 4096 2048 1024 512] [--data-dir DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import random
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

from _common import ACTS_4, STATUTES, data_dir, load_average, print_header, table

CHILD = "--child"
UNLIMITED = 1_000_000


def _rss_mb() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def _sections() -> list[str]:
    texts: list[str] = []
    for name in ACTS_4:
        record = json.loads((STATUTES / name).read_text(encoding="utf-8"))
        texts += [f"{s['title']}\n{s['text']}" for s in record["sections"]]
    return texts


def child(budget: int, out: Path) -> None:
    """One budget in this process; writes its numbers and vectors under ``out``."""
    import sleuth.retrieval.onnx_embedder as onnx_embedder
    from sleuth.retrieval.embeddings import get_embedder

    onnx_embedder._Encoder.embed.__defaults__ = (budget,)  # the budget under test
    embedder = get_embedder("sentence-transformers/all-MiniLM-L6-v2", 32)
    loaded = _rss_mb()
    texts = _sections()
    t0 = time.perf_counter()
    vectors = np.concatenate(
        [embedder.embed(texts[i : i + 128]) for i in range(0, len(texts), 128)]
    )
    seconds = time.perf_counter() - t0
    ingested = _rss_mb()
    rng = random.Random(20261202)
    for _ in range(200):
        n = rng.choice([1, 1, 1, 3, 8, 16, 40])
        embedder.embed([t[: rng.choice([50, 200, 800, 3000])] for t in rng.sample(texts, n)])
    np.save(out / f"vectors-{budget}.npy", vectors)
    (out / f"row-{budget}.json").write_text(
        json.dumps(
            {
                "sections_per_s": len(texts) / seconds,
                "rss_loaded": loaded,
                "rss_ingested": ingested,
                "rss_mixed": _rss_mb(),
            }
        )
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--budgets", nargs="+", default=["none", "4096", "2048", "1024", "512"])
    parser.add_argument("--data-dir", help="data dir whose ONNX cache to use (default: fresh)")
    args = parser.parse_args()
    budgets = [UNLIMITED if b == "none" else int(b) for b in args.budgets]
    print_header("bench_token_budget: padded tokens per ONNX forward pass")
    with data_dir(args.data_dir, "sleuth-bench-tokens-") as ddir:
        env = {**os.environ, "SLEUTH_DATA_DIR": str(ddir)}
        subprocess.run(  # the one-time export, outside the measured children
            [sys.executable, __file__, CHILD, "512", str(ddir)], env=env, check=True
        )
        rows, reference = [], None
        for budget in budgets:
            subprocess.run(
                [sys.executable, __file__, CHILD, str(budget), str(ddir)], env=env, check=True
            )
            row = json.loads((ddir / f"row-{budget}.json").read_text())
            vectors = np.load(ddir / f"vectors-{budget}.npy")
            reference = vectors if reference is None else reference
            rows.append(
                [
                    "none" if budget == UNLIMITED else budget,
                    row["sections_per_s"],
                    row["rss_loaded"],
                    row["rss_ingested"],
                    row["rss_mixed"],
                    float((vectors * reference).sum(axis=1).min()),
                ]
            )
    print(
        table(
            [
                "budget",
                "sections/s",
                "RSS loaded MB",
                "after ingest MB",
                "after 200 mixed MB",
                f"min cos to {args.budgets[0]}",
            ],
            rows,
        )
    )
    print(f"\nload average at the end: {load_average()}")


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == CHILD:
        child(int(sys.argv[2]), Path(sys.argv[3]))
    else:
        main()
