"""``sleuth eval`` end to end: wall time of the offline HotpotQA evaluation, as a user runs it.

Runs the installed ``sleuth`` command in a subprocess, with a fresh ``SLEUTH_DATA_DIR`` and
the heuristic reasoner, once per mode::

    sleuth eval --dataset hotpotqa --mode guided --data-root ../shared/data --out DIR
    sleuth eval --dataset hotpotqa --mode react  --data-root ../shared/data --out DIR

The first run pays for the ingest of the 994 paragraphs (1,094 chunks embedded by
all-MiniLM-L6-v2 on the CPU); the second reuses the collection (an unchanged file is not
re-embedded), as a user's second evaluation would. Each wall time covers the whole command:
interpreter start, imports, model load, ingest (first run), 100 runs, scoring, the results
folder with its plots. Prints each run's summary metrics, then ``sleuth eval compare``.

Target (issue 6): an offline run over all 100 questions finishes in under 5 minutes.

    python bench/bench_eval.py [--keep DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from _common import DATA, data_dir, load_average, print_header, table, verdict

TARGET_S = 300.0
MODES = ("guided", "react")


def sleuth_exe() -> str:
    return str(Path(sys.executable).with_name("sleuth"))


def run_eval(mode: str, ddir: Path, out: Path) -> tuple[float, dict[str, Any]]:
    """Wall seconds of one ``sleuth eval`` command and its summary."""
    env = {**os.environ, "SLEUTH_DATA_DIR": str(ddir / "data"), "SLEUTH_LLM": "heuristic"}
    args = ["eval", "--dataset", "hotpotqa", "--mode", mode, "--data-root", str(DATA)]
    t0 = time.perf_counter()
    done = subprocess.run(
        [sleuth_exe(), *args, "--out", str(out), "--json"],
        capture_output=True,
        text=True,
        env=env,
        check=False,
    )
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"sleuth eval failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds, json.loads(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", default=None, help="keep the data and results here")
    args = parser.parse_args()
    with data_dir(args.keep, "sleuth-bench-eval-") as ddir:
        print_header(
            "bench_eval: sleuth eval over the 100 HotpotQA questions (heuristic, CLI subprocess)",
            [("data dir", f"{ddir} ({'kept' if args.keep else 'temporary'})")],
        )
        rows = []
        summaries = {}
        for position, mode in enumerate(MODES):
            seconds, s = run_eval(mode, ddir, ddir / f"out-{mode}")
            summaries[mode] = s
            ingest = s["collection"]["ingest"] or {}
            rows.append(
                [
                    mode,
                    "first (ingest)" if position == 0 else "second (reuse)",
                    seconds,
                    ingest.get("seconds", 0.0),
                    s["wall_s"],
                    s["retrieval"]["all_gold_retrieved"],
                    s["retrieval"]["recall_at"]["10"],
                    s["retrieval"]["mrr"],
                    s["answer"]["answer_contains"],
                    s["citations"]["precision"],
                    s["citations"]["recall"],
                    s["outcome"]["insufficient_rate"],
                    s["latency_s"]["p50"],
                    s["latency_s"]["p95"],
                ]
            )
        print(
            table(
                [
                    "mode",
                    "run",
                    "command s",
                    "ingest s",
                    "100 runs s",
                    "all gold retrieved",
                    "recall@10",
                    "MRR",
                    "answer contains",
                    "cite precision",
                    "cite recall",
                    "insufficient",
                    "p50 s",
                    "p95 s",
                ],
                rows,
                title="sleuth eval --dataset hotpotqa (100 questions)",
            )
        )
        print()
        compare = subprocess.run(
            [sleuth_exe(), "eval", "compare", str(ddir / "out-guided"), str(ddir / "out-react")],
            capture_output=True,
            text=True,
            env={**os.environ, "COLUMNS": "180"},
            check=False,
        )
        print(compare.stdout)
        for row in rows:
            print(
                f"Target: {row[0]} ({row[1]}) under {TARGET_S:.0f} s: {row[2]:.1f} s → "
                f"{verdict(row[2], TARGET_S, higher_is_better=False)}"
            )
        print(f"load average at the end: {load_average()}")


if __name__ == "__main__":
    main()
