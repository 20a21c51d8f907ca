"""Soak: mixed load on ``sleuth serve`` for minutes, with the server killed and restarted.

Over a private copy of the statutes index (as ``bench_api_load.py``), three API users drive
one ``sleuth serve`` process on loopback (heuristic reasoner, local index, SQLite):

- ``reader`` owns ``statutes``: blocking asks in guided and react mode, streamed asks whose
  SSE stream is dropped after two events and resumed with ``Last-Event-ID`` (checking that
  no event is lost or repeated), retrieval-only searches (``GET /collections/{name}/search``),
  reads of stored runs, sections and run lists;
- ``writer1`` and ``writer2`` each own a collection: they upload small Markdown documents
  (each unique), delete indexed ones, and ask their own collection.

At 30 % and 60 % of ``--minutes`` the server is killed with SIGKILL and started again on the
same port (a *restart window* runs from the kill until ``/health`` answers, plus 2 s). The
server's resident memory is sampled every 5 s. Before the server first starts, one
``sleuth search`` exports the bundled embedding model to the copy's ONNX cache (a data
dir's one-time step, which loads torch: left to the server, its first lifetime started
~350 MB larger than the others). At the end every accepted upload's job is
polled until it ends, and every accepted streamed run is read.

Reported: requests and errors by kind, latency p50/p95, 5xx and transport errors outside
the restart windows, RSS per server lifetime (after a 60 s warm-up) and its growth, and the
accepted work: uploads whose job ended indexed or reported failed, runs that read a final
state. Targets (issue 14 §5): 0 accepted items lost, 0 5xx outside the restart windows, RSS
growth < 10 % after warm-up.

    python bench/bench_soak.py [--minutes 10] [--clients 2]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, get_args

import httpx

from _common import (
    COLLECTION,
    REPO,
    RESULTS,
    bench_settings,
    load_average,
    load_questions,
    percentile,
    print_header,
    private_copy,
    table,
    verdict,
)
from bench_api_load import free_port, refresh_source
from sleuth.api.schemas import RunState

SEED = 20261201
WARMUP_S = 60.0
SAMPLE_S = 5.0
SERVER_START_S = 180.0
WINDOW_PAD_S = 2.0
FINAL_STATES = frozenset(get_args(RunState)) - {"running"}
JOB_FINAL = {"succeeded", "failed"}
WORDS = [
    "river",
    "harbour",
    "lantern",
    "quarry",
    "orchard",
    "meadow",
    "beacon",
    "granary",
    "ferry",
    "vineyard",
    "mill",
    "canal",
    "tannery",
    "bridge",
    "foundry",
    "market",
    "abbey",
    "citadel",
    "causeway",
    "weir",
]


@dataclass
class Tally:
    """Everything the clients saw, by kind of request."""

    latency: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    errors: list[tuple[float, str, str]] = field(default_factory=list)
    windows: list[tuple[float, float]] = field(default_factory=list)
    jobs: list[tuple[str, str, str]] = field(default_factory=list)  # user, collection, job_id
    streamed: list[tuple[str, str]] = field(default_factory=list)  # user, task_id
    sse_faults: list[str] = field(default_factory=list)
    rss: list[list[tuple[float, int]]] = field(default_factory=list)  # per server lifetime
    outcome: Counter[str] = field(default_factory=Counter)  # accepted work, as it ended
    lost: list[str] = field(default_factory=list)
    start: float = field(default_factory=time.monotonic)

    def now(self) -> float:
        return time.monotonic() - self.start

    def ok(self, kind: str, seconds: float) -> None:
        self.latency[kind].append(seconds)

    def error(self, kind: str, what: str) -> None:
        self.errors.append((self.now(), kind, what))

    def in_window(self, at: float) -> bool:
        return any(start <= at <= end for start, end in self.windows)


class Server:
    """``sleuth serve`` in a subprocess on a fixed port; killed and restarted by the soak."""

    def __init__(self, data_dir: Path, port: int) -> None:
        self.port = port
        self.log = data_dir / "server.log"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
        self.env.update(
            SLEUTH_DATA_DIR=str(data_dir),
            SLEUTH_LLM="heuristic",
            SLEUTH_INDEX_BACKEND="local",
            SLEUTH_API_USER_RATE="100000/minute",
            SLEUTH_API_USER_MAX_RUNS="1000",
        )
        self.proc: subprocess.Popen[bytes] | None = None

    def sleuth(self, *args: str) -> str:
        done = subprocess.run(
            [str(Path(sys.executable).with_name("sleuth")), *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
            cwd=REPO,
        )
        if done.returncode != 0:
            raise SystemExit(f"sleuth {' '.join(args)} failed: {done.stderr}")
        return done.stdout.strip()

    async def start(self) -> None:
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [
                    str(Path(sys.executable).with_name("sleuth")),
                    "serve",
                    "--port",
                    str(self.port),
                    "--log-level",
                    "warning",
                ],
                cwd=REPO,
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + SERVER_START_S
        async with httpx.AsyncClient(timeout=2) as client:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    raise SystemExit(f"sleuth serve exited:\n{self.log.read_text()[-3000:]}")
                try:
                    if (await client.get(f"{self.url}/health")).status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                await asyncio.sleep(0.2)
        raise SystemExit("sleuth serve did not answer /health")

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def rss_kib(self) -> int | None:
        if self.proc is None or self.proc.poll() is not None:
            return None
        try:
            status = Path(f"/proc/{self.proc.pid}/status").read_text()
        except OSError:
            return None
        line = next((x for x in status.splitlines() if x.startswith("VmRSS:")), None)
        return int(line.split()[1]) if line else None

    def kill(self) -> None:
        if self.proc is not None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=60)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(60)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def document(rng: random.Random, n: int) -> tuple[str, bytes]:
    """A small unique Markdown document: three sections of generated prose."""
    words = [rng.choice(WORDS) for _ in range(240)]
    body = [f"# Ledger {n}"]
    for part in range(3):
        chunk = " ".join(words[part * 80 : (part + 1) * 80])
        body.append(f"\n## Part {part + 1}\n\nEntry {n}.{part}: the {chunk}.")
    return f"ledger_{n:04d}.md", "\n".join(body).encode()


async def timed(
    tally: Tally, kind: str, call: Any, ok: tuple[int, ...] = (200,)
) -> httpx.Response | None:
    """One request: latency on success, an error (HTTP status or transport) otherwise."""
    t0 = time.perf_counter()
    try:
        response = await call
    except httpx.HTTPError as exc:
        tally.error(kind, type(exc).__name__)
        await asyncio.sleep(0.5)
        return None
    if response.status_code not in ok:
        tally.error(kind, f"HTTP {response.status_code}")
        await asyncio.sleep(0.5)
        return None
    tally.ok(kind, time.perf_counter() - t0)
    return response


async def asker(
    client: httpx.AsyncClient, tally: Tally, end: float, collection: str, questions: Any
) -> None:
    modes = itertools.cycle(["guided", "react"])
    while time.monotonic() < end:
        mode = next(modes)
        body = {"query": next(questions), "collection": collection, "mode": mode}
        body["use_memory"] = False
        r = await timed(tally, f"ask {mode}", client.post("/agent/search", json=body))
        if r is not None and r.json().get("status") == "error":
            tally.error(f"ask {mode}", "run status error")


async def read_stream(
    client: httpx.AsyncClient, task_id: str, after: int, limit: int | None
) -> list[int]:
    """Event seqs of one SSE connection after ``after``, at most ``limit`` of them."""
    seqs: list[int] = []
    headers = {"Last-Event-ID": str(after)} if after else {}
    async with client.stream("GET", f"/agent/search/{task_id}/stream", headers=headers) as r:
        r.raise_for_status()
        async for line in r.aiter_lines():
            if line.startswith("id:"):  # id, event, data: the event's id comes first
                seqs.append(int(line[3:].strip()))
                if limit is not None and len(seqs) >= limit:
                    break
            if line.startswith("event:") and line[6:].strip() in ("done", "error"):
                break
    return seqs


async def streamer(client: httpx.AsyncClient, tally: Tally, end: float, questions: Any) -> None:
    while time.monotonic() < end:
        body = {"query": next(questions), "collection": COLLECTION, "stream": True}
        body["use_memory"] = False
        r = await timed(tally, "ask stream", client.post("/agent/search", json=body), (202,))
        if r is None:
            continue
        task_id = r.json()["task_id"]
        tally.streamed.append(("reader", task_id))
        t0 = time.perf_counter()
        try:
            first = await read_stream(client, task_id, 0, 2)
            rest = await read_stream(client, task_id, first[-1] if first else 0, None)
        except (httpx.HTTPError, ValueError) as exc:
            tally.error("sse resume", type(exc).__name__)
            await asyncio.sleep(0.5)
            continue
        seqs = first + rest
        if seqs != list(range(1, len(seqs) + 1)):
            tally.sse_faults.append(f"{task_id}: {seqs[:12]}…")
        tally.ok("sse resume", time.perf_counter() - t0)


async def reader(client: httpx.AsyncClient, tally: Tally, end: float, feed: Any) -> None:
    while time.monotonic() < end:
        r = await timed(tally, "list runs", client.get("/agent/search", params={"limit": 20}))
        if r is not None and r.json():
            task_id = r.json()[-1]["task_id"]
            await timed(tally, "read run", client.get(f"/agent/search/{task_id}"))
        await timed(
            tally, "read section", client.get(f"/collections/{COLLECTION}/sections/BNS_S103")
        )
        await timed(
            tally,
            "search",
            client.get(f"/collections/{COLLECTION}/search", params={"q": next(feed), "k": 5}),
        )
        await asyncio.sleep(0.2)


async def writer(
    client: httpx.AsyncClient,
    tally: Tally,
    end: float,
    user: str,
    collection: str,
    rng: random.Random,
    counter: Any,
) -> None:
    while time.monotonic() < end:
        name, content = document(rng, next(counter))
        files = [("files", (name, content, "text/markdown"))]
        url = f"/collections/{collection}/documents"
        r = await timed(tally, "upload", client.post(url, files=files), (202,))
        if r is not None:
            tally.jobs.append((user, collection, r.json()["job_id"]))
        await asyncio.sleep(1.0)
        if rng.random() < 0.4:
            docs = await timed(tally, "list documents", client.get(url))
            indexed = [d for d in (docs.json() if docs else []) if d["status"] == "indexed"]
            if len(indexed) > 3:
                doc = rng.choice(indexed)
                # 409: the collection is busy with a job; asked again later
                delete = client.delete(f"{url}/{doc['doc_id']}")
                await timed(tally, "delete", delete, (204, 409))
        if rng.random() < 0.3:
            body = {"query": "Which ledger entry mentions the foundry?", "collection": collection}
            body["use_memory"] = False
            await timed(tally, "ask own", client.post("/agent/search", json=body))


async def sampler(server: Server, tally: Tally, end: float) -> None:
    while time.monotonic() < end:
        restarting = bool(tally.windows) and tally.windows[-1][1] == float("inf")
        rss = None if restarting else server.rss_kib()  # not a process being killed
        if rss is not None and tally.rss:
            tally.rss[-1].append((tally.now(), rss))
        await asyncio.sleep(SAMPLE_S)


async def chaos(server: Server, tally: Tally, kills_at: list[float]) -> None:
    for at in kills_at:
        await asyncio.sleep(max(0.0, at - tally.now()))
        killed = tally.now()
        tally.windows.append((killed, float("inf")))  # open until the server answers again
        server.kill()
        await server.start()
        tally.rss.append([])
        tally.windows[-1] = (killed, tally.now() + WINDOW_PAD_S)
        print(f"  killed at {killed:.0f} s, serving again at {tally.now():.0f} s", flush=True)


async def settle(
    clients: dict[str, httpx.AsyncClient], tally: Tally, limit_s: float = 600
) -> tuple[Counter[str], list[str]]:
    """Poll every accepted job until it ends; read every accepted streamed run."""
    outcome: Counter[str] = Counter()
    lost: list[str] = []
    deadline = time.monotonic() + limit_s
    for user, collection, job_id in tally.jobs:
        while True:
            r = await clients[user].get(f"/collections/{collection}/jobs/{job_id}")
            state = r.json().get("state") if r.status_code == 200 else f"HTTP {r.status_code}"
            if state in JOB_FINAL or r.status_code != 200 or time.monotonic() > deadline:
                break
            await asyncio.sleep(1.0)
        if state == "succeeded":
            files = r.json()["files"]
            reported = all(f["status"] != "pending" for f in files)
            outcome["upload indexed" if reported else "upload lost"] += 1
            if not reported:
                lost.append(f"job {job_id}: files {files}")
        elif state == "failed" and r.json().get("error"):
            outcome["upload reported failed"] += 1
        else:
            outcome["upload lost"] += 1
            lost.append(f"job {job_id}: {state}")
    for user, task_id in tally.streamed:
        r = await clients[user].get(f"/agent/search/{task_id}")
        status = r.json().get("status") if r.status_code == 200 else f"HTTP {r.status_code}"
        if status in FINAL_STATES:
            outcome[f"run {status}"] += 1
        else:
            outcome["run lost"] += 1
            lost.append(f"run {task_id}: {status}")
    return outcome, lost


async def soak(server: Server, keys: dict[str, str], minutes: float, clients_n: int) -> Tally:
    tally = Tally()
    duration = minutes * 60
    end = time.monotonic() + duration
    rng = random.Random(SEED)
    questions = [q.text for q in load_questions()]
    rng.shuffle(questions)
    feed = itertools.cycle(questions)
    counter = itertools.count()
    limits = httpx.Limits(max_connections=32)
    clients = {
        user: httpx.AsyncClient(
            base_url=server.url,
            timeout=120,
            limits=limits,
            headers={"Authorization": f"Bearer {key}"},
        )
        for user, key in keys.items()
    }
    tally.rss.append([])
    try:
        tasks = [
            *(asker(clients["reader"], tally, end, COLLECTION, feed) for _ in range(clients_n)),
            streamer(clients["reader"], tally, end, feed),
            reader(clients["reader"], tally, end, feed),
            writer(clients["writer1"], tally, end, "writer1", "ledgers1", rng, counter),
            writer(clients["writer2"], tally, end, "writer2", "ledgers2", rng, counter),
            sampler(server, tally, end),
            chaos(server, tally, [duration * 0.3, duration * 0.6]),
        ]
        await asyncio.gather(*tasks)
        print(f"load ended at {tally.now():.0f} s; settling accepted work", flush=True)
        tally.outcome, tally.lost = await settle(clients, tally)
    finally:
        for client in clients.values():
            await client.aclose()
    return tally


def rss_rows(tally: Tally) -> list[list[Any]]:
    """Per server lifetime: RSS after the warm-up, at the end, peak, growth from the warm-up
    to the end, and the slope over the lifetime's second half (MB per minute: a leak shows
    as a steady slope, a one-time allocation as a step)."""
    rows: list[list[Any]] = []
    for i, samples in enumerate(tally.rss, start=1):
        if not samples:
            continue
        born = samples[0][0]
        warm = [s for s in samples if s[0] - born >= WARMUP_S]
        if len(warm) < 2:
            rows.append([i, f"{born:.0f}", len(samples), "-", "-", "-", "-", "-"])
            continue
        base, last = warm[0][1], warm[-1][1]
        half = samples[len(samples) // 2 :]
        minutes = (half[-1][0] - half[0][0]) / 60
        slope = (half[-1][1] - half[0][1]) / 1024 / minutes if minutes > 0 else float("nan")
        rows.append(
            [
                i,
                f"{born:.0f}",
                len(samples),
                base / 1024,
                last / 1024,
                max(s[1] for s in warm) / 1024,
                (last - base) / base * 100,
                slope,
            ]
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="load duration (10)")
    parser.add_argument("--clients", type=int, default=2, help="blocking askers (2)")
    parser.add_argument(
        "--source", default=str(RESULTS / "statutes-data"), help="statutes data dir to copy"
    )
    parser.add_argument("--json", help="also write the summary to this file")
    args = parser.parse_args()
    source = Path(args.source).expanduser().resolve()
    print_header(
        "bench_soak: mixed load with two SIGKILL restarts",
        [
            ("server", "sleuth serve (1 process), heuristic reasoner, local index, SQLite"),
            ("duration", f"{args.minutes:g} min, kills at 30 % and 60 %"),
            ("clients", f"{args.clients} askers + 1 streamer + 1 reader + 2 writers"),
        ],
    )
    refresh_source(source)
    with tempfile.TemporaryDirectory(prefix="sleuth-bench-soak-") as tmp:
        ddir = Path(tmp)
        private_copy(source, ddir)
        server = Server(ddir, free_port())
        # a data dir's first query exports the bundled embedding model to ONNX once (torch
        # loaded for it); done here, so the server's lifetimes are alike
        server.sleuth("search", "murder", "-c", COLLECTION, "--mode", "hybrid")
        keys = {u: server.sleuth("users", "create", u) for u in ("reader", "writer1", "writer2")}
        _own(ddir, "reader", COLLECTION)
        asyncio.run(server.start())
        try:
            for user, name in (("writer1", "ledgers1"), ("writer2", "ledgers2")):
                r = httpx.post(
                    f"{server.url}/collections",
                    json={"name": name},
                    headers={"Authorization": f"Bearer {keys[user]}"},
                    timeout=120,
                )
                if r.status_code != 201:
                    raise SystemExit(f"could not create {name}: {r.status_code} {r.text}")
            tally = asyncio.run(soak(server, keys, args.minutes, args.clients))
        finally:
            server.stop()
        log = server.log.read_text(errors="replace")
    report(tally, log, args.json)


def _own(ddir: Path, user_name: str, collection: str) -> None:
    from sleuth.store.catalog import Catalog

    catalog = Catalog(bench_settings(ddir).catalog_url)
    try:
        user = catalog.get_user(user_name)
        if user is None:
            raise SystemExit(f"no user {user_name}")
        catalog.set_collection_owner(collection, user.id)
    finally:
        catalog.close()


def report(tally: Tally, log: str, json_path: str | None) -> None:
    errors_by: Counter[str] = Counter()
    outside: Counter[str] = Counter()
    for at, kind, what in tally.errors:
        errors_by[kind] += 1
        if not tally.in_window(at):
            outside[f"{kind}: {what}"] += 1
    kinds = sorted(set(tally.latency) | set(errors_by))
    print()
    print(
        table(
            ["request", "ok", "errors", "p50 ms", "p95 ms"],
            [
                [
                    k,
                    len(tally.latency.get(k, [])),
                    errors_by.get(k, 0),
                    percentile(tally.latency.get(k, []), 50) * 1e3,
                    percentile(tally.latency.get(k, []), 95) * 1e3,
                ]
                for k in kinds
            ],
            title="Requests by kind (latency client-side; errors include the restart windows)",
        )
    )
    print()
    windows = ", ".join(f"{a:.0f}–{b:.0f} s" for a, b in tally.windows)
    print(f"restart windows: {windows}")
    server_errors = sum(v for k, v in outside.items() if "HTTP 5" in k)
    transport = sum(v for k, v in outside.items() if "HTTP" not in k and "run status" not in k)
    print(f"errors outside the windows: {dict(outside) or 'none'}")
    print(f"SSE resumes with a lost or repeated event: {len(tally.sse_faults)}")
    for fault in tally.sse_faults[:5]:
        print(f"  {fault}")
    print()
    rows = rss_rows(tally)
    print(
        table(
            [
                "lifetime",
                "from s",
                "samples",
                "RSS warm MB",
                "RSS end MB",
                "peak MB",
                "growth %",
                "2nd half MB/min",
            ],
            rows,
            title=f"Server RSS per lifetime (sampled every {SAMPLE_S:.0f} s; growth from "
            f"{WARMUP_S:.0f} s after start to the last sample)",
        )
    )
    outcome, lost = tally.outcome, tally.lost
    print()
    print("accepted work: " + ", ".join(f"{k} {v}" for k, v in sorted(outcome.items())))
    for item in lost[:10]:
        print(f"  lost: {item}")
    growths = [r[-2] for r in rows if isinstance(r[-2], float)]
    worst = max(growths, default=float("nan"))
    n_lost = outcome.get("upload lost", 0) + outcome.get("run lost", 0)
    print(f"server log: {len(log.splitlines())} lines, {log.count('Traceback')} tracebacks")
    print(f"load average at the end: {load_average()}")
    print()
    print(f"target 0 accepted items lost: {n_lost} → {verdict(-n_lost, 0, True)}")
    print(f"target 0 5xx outside restarts: {server_errors} → {verdict(-server_errors, 0, True)}")
    print(f"transport errors outside restarts: {transport}")
    print(
        f"target RSS growth < 10 % after warm-up: worst {worst:.1f} % → "
        f"{verdict(worst, 10.0, False)}"
    )
    if json_path:
        Path(json_path).write_text(
            json.dumps(
                {
                    "requests": {k: len(v) for k, v in tally.latency.items()},
                    "errors": dict(errors_by),
                    "errors_outside_windows": dict(outside),
                    "windows": tally.windows,
                    "sse_faults": tally.sse_faults,
                    "rss": tally.rss,
                    "accepted": dict(outcome),
                    "lost": lost,
                },
                indent=1,
            )
        )


if __name__ == "__main__":
    main()
