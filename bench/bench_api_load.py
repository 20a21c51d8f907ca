"""Sustained concurrent ``POST /agent/search`` against ``sleuth serve`` on loopback.

Takes a private copy of the statutes index (``bench/results/statutes-data``, built or
refreshed first: re-ingesting unchanged files is a no-op), so the runs stored by the server
do not grow the shared catalog. Creates an API user owning the ``statutes`` collection,
starts ``sleuth serve`` in a subprocess (heuristic reasoner, local index, SQLite; the
server's defaults otherwise: 8 run workers), warms it up, then for 1, 4 and 16 concurrent
clients (one asyncio task each, one shared httpx connection pool) sends questions of
``synthetic_qa.json`` (a fixed-seed shuffle) back to back for ``--seconds`` per level:
throughput, client-side latency p50/p95/max, errors (HTTP errors, transport errors and
runs that ended with status ``error``), run statuses, and the server-side run time from
the trace (``timings_ms.total``) to show what HTTP and queueing add.

    python bench/bench_api_load.py [--seconds 20] [--levels 1,4,16] [--memory]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from _common import (
    ACTS_4,
    COLLECTION,
    REPO,
    RESULTS,
    bench_settings,
    load_average,
    load_questions,
    percentile,
    print_header,
    private_copy,
    statute_paths,
    table,
)

SEED = 20251130
SERVER_START_S = 120


@dataclass
class Level:
    clients: int
    latencies: list[float] = field(default_factory=list)
    server_ms: list[float] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)
    http_errors: Counter[str] = field(default_factory=Counter)
    elapsed: float = 0.0

    @property
    def completed(self) -> int:
        return len(self.latencies)

    @property
    def errors(self) -> int:
        return sum(self.http_errors.values()) + self.statuses.get("error", 0)


def refresh_source(source: Path) -> None:
    """Build (or confirm) the statutes collection in the shared bench data dir."""
    from sleuth.app import Sleuth

    app = Sleuth(bench_settings(source))
    try:
        report = app.pipeline.ingest(statute_paths(ACTS_4), COLLECTION)
        if not report.ok:
            raise SystemExit(f"ingest failed: {[f.message for f in report.by_status('failed')]}")
    finally:
        app.close()
        app.catalog.close()


def make_user(ddir: Path) -> str:
    """A fresh API user owning the collection; returns the key."""
    from sleuth.api.keys import create_user
    from sleuth.store.catalog import Catalog

    catalog = Catalog(bench_settings(ddir).catalog_url)
    try:
        user, key = create_user(catalog, "bench")
        catalog.set_collection_owner(COLLECTION, user.id)
        return key
    finally:
        catalog.close()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(ddir: Path, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
    env.update(
        SLEUTH_DATA_DIR=str(ddir),
        SLEUTH_LLM="heuristic",
        SLEUTH_INDEX_BACKEND="local",
        SLEUTH_API_USER_RATE="100000/minute",
        SLEUTH_API_USER_MAX_RUNS="1000",
    )
    sleuth = Path(sys.executable).with_name("sleuth")
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(sleuth), "serve", "--port", str(port), "--log-level", "warning"],
            cwd=REPO,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    deadline = time.monotonic() + SERVER_START_S
    while True:
        if proc.poll() is not None:
            raise SystemExit(f"sleuth serve exited:\n{log.read_text()[-3000:]}")
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        if time.monotonic() > deadline:
            proc.kill()
            raise SystemExit("sleuth serve did not answer /health")
        time.sleep(0.2)


async def run_level(
    url: str, key: str, clients: int, seconds: float, questions: list[str], memory: bool
) -> Level:
    level = Level(clients)
    feed = itertools.cycle(questions)
    headers = {"Authorization": f"Bearer {key}"}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=url, timeout=300, limits=limits) as client:
        start = time.perf_counter()
        end = start + seconds

        async def worker() -> None:
            while time.perf_counter() < end:
                body = {"query": next(feed), "collection": COLLECTION, "use_memory": memory}
                t0 = time.perf_counter()
                try:
                    r = await client.post("/agent/search", json=body, headers=headers)
                except httpx.HTTPError as exc:
                    level.http_errors[type(exc).__name__] += 1
                    continue
                level.latencies.append(time.perf_counter() - t0)
                if r.status_code != 200:
                    level.http_errors[f"HTTP {r.status_code}"] += 1
                    continue
                run = r.json()
                level.statuses[run["status"]] += 1
                total = (run.get("trace") or {}).get("timings_ms", {}).get("total")
                if total is not None:
                    level.server_ms.append(float(total))

        await asyncio.gather(*(worker() for _ in range(clients)))
        level.elapsed = time.perf_counter() - start
    return level


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=20.0, help="per level (20)")
    parser.add_argument("--levels", default="1,4,16", help="concurrent clients (1,4,16)")
    parser.add_argument("--memory", action="store_true", help="use_memory: true (default off)")
    parser.add_argument(
        "--source", default=str(RESULTS / "statutes-data"), help="statutes data dir to copy"
    )
    args = parser.parse_args()
    levels = [int(x) for x in args.levels.split(",")]
    source = Path(args.source).expanduser().resolve()
    questions = [q.text for q in load_questions()]
    random.Random(SEED).shuffle(questions)

    print_header(
        "bench_api_load: sustained concurrent POST /agent/search on loopback",
        [
            ("server", "sleuth serve (uvicorn, 1 process), SLEUTH_API_RUN_WORKERS=8 (default)"),
            ("reasoner / memory", f"heuristic / use_memory={str(args.memory).lower()}"),
            ("levels / duration", f"{levels} clients, {args.seconds:.0f} s each"),
            ("questions", f"{len(questions)} from synthetic_qa.json, random.Random({SEED})"),
            ("index", f"private copy of {source}"),
        ],
    )
    t0 = time.perf_counter()
    refresh_source(source)
    with tempfile.TemporaryDirectory(prefix="sleuth-bench-api-") as tmp:
        ddir = Path(tmp)
        private_copy(source, ddir)
        key = make_user(ddir)
        port = free_port()
        proc = start_server(ddir, port, ddir / "server.log")
        url = f"http://127.0.0.1:{port}"
        try:
            print(f"setup (refresh, copy, server start) {time.perf_counter() - t0:.1f} s")
            warm = asyncio.run(run_level(url, key, 1, 3.0, questions[-50:], args.memory))
            print(f"warm-up: {warm.completed} runs in {warm.elapsed:.1f} s")
            print(f"load average before the levels: {load_average()}")
            print()
            results = []
            for clients in levels:
                level = asyncio.run(
                    run_level(url, key, clients, args.seconds, questions, args.memory)
                )
                results.append((level, load_average()))
        finally:
            proc.terminate()
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()
        log = (ddir / "server.log").read_text(errors="replace")
    print(
        table(
            [
                "clients",
                "requests",
                "errors",
                "req/s",
                "p50 ms",
                "p95 ms",
                "max ms",
                "server p50 ms",
                "load after",
            ],
            [
                [
                    lv.clients,
                    lv.completed,
                    lv.errors,
                    lv.completed / lv.elapsed,
                    percentile(lv.latencies, 50) * 1e3,
                    percentile(lv.latencies, 95) * 1e3,
                    max(lv.latencies, default=float("nan")) * 1e3,
                    percentile(lv.server_ms, 50),
                    load,
                ]
                for lv, load in results
            ],
            title="POST /agent/search, back to back per client (latency = client-side wall)",
        )
    )
    print()
    for lv, _ in results:
        statuses = ", ".join(f"{k} {v}" for k, v in lv.statuses.most_common())
        errors = ", ".join(f"{k} {v}" for k, v in lv.http_errors.items()) or "none"
        print(f"{lv.clients:>2} clients: run statuses: {statuses}; HTTP/transport errors: {errors}")
    tracebacks = log.count("Traceback")
    print(f"server log: {len(log.splitlines())} lines, {tracebacks} tracebacks")
    print(f"load average at the end: {load_average()}")


if __name__ == "__main__":
    main()
