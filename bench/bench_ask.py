"""End-to-end agentic runs: ``execute_agentic_search`` with the heuristic reasoner, warm.

Ingests the four statute files into a fresh collection (or reuses ``--data-dir``), loads
the model, does one warm-up run, then answers 50 synthetic questions (a fixed-seed sample
of synthetic_qa.json) with ``AgentService.execute_agentic_search``: wall time p50/p95,
mean tool calls and iterations, status counts, and the citation hit rate (the gold
section among the answer's final citations; also reported: the gold section retrieved at
all during the run). Then times the CLI path once, as a cold subprocess against the same
data dir (interpreter start, imports and model load included)::

    sleuth ask "What is the punishment for murder?" -c statutes --quiet

Target: warm p50 ≤ 1.5 s.

    python bench/bench_ask.py [--data-dir DIR] [--n 50] [--seed 20251130]
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

from _common import (
    ACTS_4,
    COLLECTION,
    REPO,
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

TARGET_P50_S = 1.5
CLI_QUESTION = "What is the punishment for murder?"
WARMUP_QUESTION = "What is the punishment for theft?"


def sleuth_executable() -> str:
    """The ``sleuth`` console script of this interpreter's environment."""
    beside = Path(sys.executable).with_name("sleuth")
    if beside.exists():
        return str(beside)
    found = shutil.which("sleuth")
    if not found:
        raise SystemExit("the 'sleuth' command is not installed (pip install -e .)")
    return found


def time_cli(ddir: Path) -> tuple[float, int, str]:
    """Run the CLI question once in a fresh process; wall seconds, exit code, output."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
    env.update(
        {
            "SLEUTH_DATA_DIR": str(ddir),
            "SLEUTH_LLM": "heuristic",
            "SLEUTH_INDEX_BACKEND": "local",
        }
    )
    cmd = [sleuth_executable(), "ask", CLI_QUESTION, "-c", COLLECTION, "--quiet"]
    t0 = time.perf_counter()
    proc = subprocess.run(
        cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False
    )
    wall = time.perf_counter() - t0
    return wall, proc.returncode, (proc.stdout + proc.stderr).strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data-dir", help="reuse/keep the index here (default: fresh temp dir)")
    parser.add_argument("--n", type=int, default=50, help="questions (50)")
    parser.add_argument("--seed", type=int, default=20251130, help="sample seed (20251130)")
    args = parser.parse_args()
    paths = statute_paths(ACTS_4)
    questions = load_questions()
    sample = sorted(random.Random(args.seed).sample(questions, args.n), key=lambda q: q.index)

    with data_dir(args.data_dir, "sleuth-bench-ask-") as ddir:
        settings = bench_settings(ddir)
        print_header(
            "bench_ask: execute_agentic_search end to end (heuristic reasoner, warm)",
            [
                ("data dir", f"{ddir}{' (kept)' if args.data_dir else ' (temporary)'}"),
                ("questions", f"{len(sample)} of {len(questions)} (random.Random({args.seed}))"),
                ("reasoner / max iterations", f"{settings.llm} / {settings.max_iterations}"),
            ],
        )
        app = Sleuth(settings)
        t0 = time.perf_counter()
        _ = app.kb.embedder
        load_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        report = app.pipeline.ingest(paths, COLLECTION)
        ingest_s = time.perf_counter() - t0
        if not report.ok:
            raise SystemExit(f"ingest failed: {[f.message for f in report.by_status('failed')]}")
        t0 = time.perf_counter()
        warm = app.agent.execute_agentic_search(WARMUP_QUESTION, COLLECTION)
        warm_s = time.perf_counter() - t0
        print(
            f"model load {load_s:.1f} s; ingest {ingest_s:.1f} s ({report.totals}); "
            f"warm-up run {warm_s:.2f} s ({warm.status.value})"
        )
        print(f"load average before the timed runs: {load_average()}")
        print()

        walls: list[float] = []
        tool_calls: list[int] = []
        iterations: list[int] = []
        statuses: Counter[str] = Counter()
        cited_hits = retrieved_hits = 0
        n_citations: list[int] = []
        stage_ms: dict[str, list[float]] = {}
        per_question = []
        for q in sample:
            t0 = time.perf_counter()
            resp = app.agent.execute_agentic_search(q.text, COLLECTION)
            wall = time.perf_counter() - t0
            walls.append(wall)
            tool_calls.append(len(resp.tool_calls))
            iterations.append(int(resp.trace.get("iterations", 0)))
            statuses[resp.status.value] += 1
            cited_ids = [c.source_id for c in resp.answer.citations]
            cited = q.gold in cited_ids
            retrieved = q.gold in resp.trace.get("retrieved_source_ids", [])
            cited_hits += cited
            retrieved_hits += retrieved
            n_citations.append(len(resp.answer.citations))
            for stage, ms in resp.trace.get("timings_ms", {}).items():
                stage_ms.setdefault(stage, []).append(float(ms))
            per_question.append((q, wall, resp, cited))
        load_after = load_average()

        n = len(sample)
        print(
            table(
                ["metric", "value"],
                [
                    ["runs", n],
                    ["wall p50 (s)", percentile(walls, 50)],
                    ["wall p95 (s)", percentile(walls, 95)],
                    ["wall mean (s)", statistics.mean(walls)],
                    ["wall max (s)", max(walls)],
                    ["mean tool calls", statistics.mean(tool_calls)],
                    ["mean iterations", statistics.mean(iterations)],
                    ["mean citations per answer", statistics.mean(n_citations)],
                    ["citation hit rate (gold among final citations)", cited_hits / n],
                    ["gold section retrieved during the run", retrieved_hits / n],
                    ["load average after the runs", load_after],
                ],
                title=f"Warm agentic runs over {n} synthetic questions",
            )
        )
        print()
        print(
            table(
                ["status", "runs"],
                [[s, c] for s, c in statuses.most_common()],
                title="Status counts",
            )
        )
        print()
        print(
            table(
                ["stage (trace timings_ms)", "mean ms", "p50 ms", "p95 ms"],
                [
                    [s, statistics.mean(v), percentile(v, 50), percentile(v, 95)]
                    for s, v in sorted(stage_ms.items(), key=lambda kv: -statistics.mean(kv[1]))
                ],
                title="Where the time goes (per run)",
            )
        )
        print()
        print(
            table(
                ["#", "gold", "status", "wall s", "tools", "cited", "citations", "question"],
                [
                    [
                        q.index,
                        q.gold,
                        r.status.value,
                        w,
                        len(r.tool_calls),
                        "yes" if c else "no",
                        " ".join(c.source_id for c in r.answer.citations) or "-",
                        q.text[:70],
                    ]
                    for q, w, r, c in per_question
                ],
                title="Per question",
            )
        )
        print()

        app.close()
        app.catalog.close()
        cli_s, rc, out = time_cli(ddir)
        print("CLI path (cold process: interpreter, imports, model load, index open, one run):")
        print(f"  $ sleuth ask {CLI_QUESTION!r} -c {COLLECTION} --quiet")
        print(f"  wall {cli_s:.2f} s, exit code {rc}, load average after {load_average()}")
        for line in out.splitlines()[:8]:
            print(f"  | {line}")
        print()
        p50 = percentile(walls, 50)
        print(
            f"Target: warm p50 ≤ {TARGET_P50_S} s: {p50:.3f} s → "
            f"{verdict(p50, TARGET_P50_S, higher_is_better=False)}"
        )
        print(f"load average at the end: {load_average()}")


if __name__ == "__main__":
    main()
