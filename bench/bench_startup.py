"""Start-up cost of the ``sleuth`` command: whole processes, wall time and peak RSS.

Prepares a data dir (``sleuth ingest ../shared/data/statutes/the_*.json -c statutes`` into a
fresh temporary ``SLEUTH_DATA_DIR``, or reuses ``--data-dir``), then runs each command below
as a new process, ``--runs`` times (default 5) after one untimed warm-up round, in a rotating
order so that load drift hits every command alike:

* ``python -c "import numpy"``: the yardstick, measured in the same run (ratios are to it);
* ``sleuth --help``, ``sleuth collections``;
* ``sleuth search "culpable homicide" -c statutes --mode bm25`` and the same in hybrid mode
  (the query embedding included: the embedding model is loaded);
* ``sleuth ask "What is the punishment for murder?" -c statutes --quiet --no-memory`` with the
  heuristic reasoner (memory off, so that every run does the same work).

Per command: median, min and max wall seconds (``time.perf_counter`` around the child), peak
RSS of the child (``ru_maxrss`` from ``os.wait4``, per process), the exit code. Settings are
pinned (local index, SQLite catalog in the data dir, heuristic reasoner; other ``SLEUTH_*``
variables of the shell are dropped).

Then ``sleuth serve`` on a free loopback port, ``--runs`` times: seconds until ``/health``
answers, and its resident set (``VmRSS`` of ``/proc/<pid>/status``) after 3 s idle; stopped
with SIGTERM.

Targets (issue 13, "Fast start"): collections ≤ 0.5 s; hybrid search ≤ 1.0 s and ≤ 250 MB;
heuristic ask ≤ 1.5 s; ``sleuth serve`` idle ≤ 300 MB.

    python bench/bench_startup.py [--runs 5] [--data-dir DIR] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import (
    COLLECTION,
    REPO,
    STATUTES,
    data_dir,
    load_average,
    machine_facts,
    print_header,
    table,
    verdict,
)
from bench_api_load import free_port

SEARCH_QUERY = "culpable homicide"
SERVE_IDLE_S = 3.0
SERVE_TARGET_MB = 300.0
ASK_QUESTION = "What is the punishment for murder?"
YARDSTICK = "python -c 'import numpy'"


@dataclass(frozen=True)
class Case:
    """One command to time, with its targets (``None``: no target)."""

    name: str
    argv: tuple[str, ...]
    target_s: float | None = None
    target_mb: float | None = None
    ok_codes: tuple[int, ...] = (0,)


@dataclass(frozen=True)
class Sample:
    """One run of a command: wall seconds, peak RSS (MB = 10^6 bytes), exit code, output."""

    wall_s: float
    rss_mb: float
    code: int
    output: str


def sleuth_executable() -> str:
    """The ``sleuth`` console script of this interpreter's environment."""
    beside = Path(sys.executable).with_name("sleuth")
    if not beside.exists():
        raise SystemExit(f"the 'sleuth' command is not installed beside {sys.executable}")
    return str(beside)


def cases(sleuth: str) -> list[Case]:
    """The commands of the benchmark, the yardstick first."""
    return [
        Case(YARDSTICK, (sys.executable, "-c", "import numpy")),
        Case("sleuth --help", (sleuth, "--help")),
        Case("sleuth collections", (sleuth, "collections"), target_s=0.5),
        Case(
            "sleuth search --mode bm25",
            (sleuth, "search", SEARCH_QUERY, "-c", COLLECTION, "--mode", "bm25"),
        ),
        Case(
            "sleuth search (hybrid)",
            (sleuth, "search", SEARCH_QUERY, "-c", COLLECTION),
            target_s=1.0,
            target_mb=250.0,
        ),
        Case(
            "sleuth ask (heuristic)",
            (sleuth, "ask", ASK_QUESTION, "-c", COLLECTION, "--quiet", "--no-memory"),
            target_s=1.5,
            ok_codes=(0, 3),
        ),
    ]


def bench_env(ddir: Path) -> dict[str, str]:
    """The environment of every child: the caller's, minus ``SLEUTH_*`` and
    ``PYTHONDONTWRITEBYTECODE``, plus the pins. Bytecode is written (the warm-up round writes
    it, as the first run of any install does): without it every run compiles sleuth's
    modules from source again, ~0.1–0.2 s that no user's second run pays."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith("SLEUTH_") and k != "PYTHONDONTWRITEBYTECODE"
    }
    env.update(
        {
            "SLEUTH_DATA_DIR": str(ddir),
            "SLEUTH_LLM": "heuristic",
            "SLEUTH_INDEX_BACKEND": "local",
            "COLUMNS": "120",
        }
    )
    return env


def run_once(argv: tuple[str, ...], env: dict[str, str]) -> Sample:
    """Run ``argv`` to completion; its wall time and its own peak RSS (``os.wait4``)."""
    with tempfile.TemporaryFile() as out:
        t0 = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, env=env, cwd=REPO)
        _, status, usage = os.wait4(proc.pid, 0)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)  # already reaped
        out.seek(0)
        text = out.read().decode("utf-8", errors="replace")
    # ru_maxrss is in KiB on Linux, in bytes on macOS
    rss_bytes = usage.ru_maxrss if sys.platform == "darwin" else usage.ru_maxrss * 1024
    return Sample(wall, rss_bytes / 1e6, proc.returncode, text)


def prepare(ddir: Path, env: dict[str, str]) -> tuple[float, str]:
    """Ingest the statutes (``the_*.json``) into ``ddir``; wall seconds and the summary."""
    paths = sorted(STATUTES.glob("the_*.json"))
    if not paths:
        raise SystemExit(f"no statutes (the_*.json) under {STATUTES}")
    argv = (sleuth_executable(), "ingest", *map(str, paths), "-c", COLLECTION)
    t0 = time.perf_counter()
    done = subprocess.run(
        argv, env=env, cwd=REPO, capture_output=True, text=True, timeout=3600, check=False
    )
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"sleuth ingest failed ({done.returncode}): {done.stderr[-2000:]}")
    return seconds, done.stdout.strip()


def measure(todo: list[Case], env: dict[str, str], runs: int) -> dict[str, list[Sample]]:
    """One warm-up round, then ``runs`` timed rounds, each in another rotation of ``todo``.

    Raises:
        SystemExit: a command ended with an exit code it should not have (its output shown).
    """
    samples: dict[str, list[Sample]] = {c.name: [] for c in todo}
    for round_ in range(runs + 1):
        shift = round_ % len(todo)
        for case in todo[shift:] + todo[:shift]:
            sample = run_once(case.argv, env)
            if sample.code not in case.ok_codes:
                raise SystemExit(f"{case.name} exited with {sample.code}:\n{sample.output[-2000:]}")
            if round_:  # round 0 warms the page cache
                samples[case.name].append(sample)
    return samples


def _rss_mb(pid: int) -> float:
    """Resident set of a running process (MB = 10^6 bytes), from ``/proc/<pid>/status``."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024 / 1e6
    raise RuntimeError(f"no VmRSS for process {pid}")


def serve_idle(sleuth: str, env: dict[str, str], runs: int) -> dict[str, Any]:
    """``sleuth serve`` ``runs`` times: seconds to a ``/health`` answer and RSS when idle.

    Raises:
        SystemExit: the server exited early or did not answer within 120 s.
    """
    ready, rss = [], []
    for _ in range(runs):
        port = free_port()
        with tempfile.TemporaryFile() as out:
            t0 = time.perf_counter()
            proc = subprocess.Popen(
                (sleuth, "serve", "--port", str(port)),
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
                cwd=REPO,
            )
            try:
                while True:
                    if proc.poll() is not None or time.perf_counter() - t0 > 120:
                        out.seek(0)
                        tail = out.read().decode("utf-8", errors="replace")[-2000:]
                        raise SystemExit(f"sleuth serve did not come up:\n{tail}")
                    try:
                        with urllib.request.urlopen(
                            f"http://127.0.0.1:{port}/health", timeout=1
                        ) as r:
                            if r.status == 200:
                                break
                    except (urllib.error.URLError, OSError):
                        time.sleep(0.05)
                ready.append(time.perf_counter() - t0)
                time.sleep(SERVE_IDLE_S)
                rss.append(_rss_mb(proc.pid))
            finally:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=30)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
    median_rss = statistics.median(rss)
    return {
        "ready_median_s": statistics.median(ready),
        "ready_s": [round(x, 3) for x in ready],
        "idle_rss_mb": median_rss,
        "idle_rss_max_mb": max(rss),
        "target_mb": SERVE_TARGET_MB,
        "verdict_mb": verdict(median_rss, SERVE_TARGET_MB, False),
    }


def summarize(todo: list[Case], samples: dict[str, list[Sample]]) -> list[dict[str, Any]]:
    """Per command: median/min/max seconds, median and max peak RSS, ratio to the yardstick,
    verdicts against its targets."""
    base = statistics.median(s.wall_s for s in samples[YARDSTICK])
    rows = []
    for case in todo:
        got = samples[case.name]
        wall = statistics.median(s.wall_s for s in got)
        rss = statistics.median(s.rss_mb for s in got)
        rows.append(
            {
                "command": case.name,
                "argv": list(case.argv[1:]),
                "median_s": wall,
                "min_s": min(s.wall_s for s in got),
                "max_s": max(s.wall_s for s in got),
                "times_s": [round(s.wall_s, 4) for s in got],
                "x_yardstick": wall / base if base else float("nan"),
                "peak_rss_mb": rss,
                "max_peak_rss_mb": max(s.rss_mb for s in got),
                "exit_codes": sorted({s.code for s in got}),
                "target_s": case.target_s,
                "target_mb": case.target_mb,
                "verdict_s": (
                    None if case.target_s is None else verdict(wall, case.target_s, False)
                ),
                "verdict_mb": (
                    None if case.target_mb is None else verdict(rss, case.target_mb, False)
                ),
            }
        )
    return rows


def _target_text(row: dict[str, Any]) -> str:
    parts = []
    if row["target_s"] is not None:
        parts.append(f"≤ {row['target_s']:g} s: {row['verdict_s']}")
    if row["target_mb"] is not None:
        parts.append(f"≤ {row['target_mb']:g} MB: {row['verdict_mb']}")
    return "; ".join(parts) or "-"


def main() -> None:
    """Parse the options, prepare the data dir, time the commands, print the results."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="timed runs per command (5)")
    parser.add_argument("--data-dir", help="reuse/keep the data dir here (default: fresh temp)")
    parser.add_argument("--json", action="store_true", help="print the results as JSON only")
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be >= 1")
    sleuth = sleuth_executable()

    with data_dir(args.data_dir, "sleuth-bench-startup-") as ddir:
        env = bench_env(ddir)
        ingest_s, ingest_summary = prepare(ddir, env)
        todo = cases(sleuth)
        load_before = load_average()
        samples = measure(todo, env, args.runs)
        rows = summarize(todo, samples)
        served = serve_idle(sleuth, env, args.runs)
        load_after = load_average()

    facts = [
        ("data dir", f"{ddir}{' (kept)' if args.data_dir else ' (temporary)'}"),
        ("prepared", f"sleuth ingest the_*.json in {ingest_s:.1f} s: {ingest_summary}"),
        ("runs", f"{args.runs} per command after 1 warm-up round, rotating order"),
        ("load average before / after", f"{load_before} / {load_after}"),
    ]
    if args.json:
        payload = {"facts": dict([*machine_facts(), *facts]), "results": rows, "serve": served}
        print(json.dumps(payload, indent=2, ensure_ascii=False))
        return
    print_header("bench_startup: whole-process start-up of sleuth commands", facts)
    print(
        table(
            ["command", "median s", "min s", "max s", "× numpy", "peak RSS MB", "exit", "target"],
            [
                [
                    r["command"],
                    r["median_s"],
                    r["min_s"],
                    r["max_s"],
                    r["x_yardstick"],
                    r["peak_rss_mb"],
                    ",".join(map(str, r["exit_codes"])),
                    _target_text(r),
                ]
                for r in rows
            ],
            title=f"wall time per process (median of {args.runs}) and peak RSS (median)",
        )
    )
    print(
        table(
            ["command", "ready median s", "ready s", "idle RSS MB", "max MB", "target"],
            [
                [
                    "sleuth serve",
                    served["ready_median_s"],
                    " ".join(f"{x:.2f}" for x in served["ready_s"]),
                    served["idle_rss_mb"],
                    served["idle_rss_max_mb"],
                    f"≤ {SERVE_TARGET_MB:g} MB idle: {served['verdict_mb']}",
                ]
            ],
            title=f"sleuth serve: seconds until /health answers, RSS after {SERVE_IDLE_S:g} s idle",
        )
    )


if __name__ == "__main__":
    main()
