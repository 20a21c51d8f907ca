"""The HTTP API on a real uvicorn server on loopback: SSE streaming and resume, a client that
disconnects, 10 concurrent streamed runs, and a long ingestion that must not block the server.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from httpx_sse import aconnect_sse, connect_sse

from sleuth.agents.events import AgentEventAdapter
from tests.api_helpers import ApiEnv, SlowReasoner, make_api, serve, sse_events

pytestmark = pytest.mark.integration

MURDER = "What is the punishment for murder?"

# ten sections, each on a topic of its own, and a question that only one of them answers
TOPICS = {
    "ZOO_S1": ("Keeping of zebras.", "zebras", "stabled in a fenced paddock of one acre"),
    "ZOO_S2": ("Sale of volcanoes.", "volcanoes", "registered with the geological board"),
    "ZOO_S3": ("Taxation of lanterns.", "lanterns", "taxed at two coins per wick"),
    "ZOO_S4": ("Export of glaciers.", "glaciers", "exported only in the winter months"),
    "ZOO_S5": ("Licensing of kites.", "kites", "licensed by the harbour master"),
    "ZOO_S6": ("Storage of cinnamon.", "cinnamon", "stored in sealed cedar chests"),
    "ZOO_S7": ("Ringing of bells.", "bells", "rung only between dawn and noon"),
    "ZOO_S8": ("Painting of bridges.", "bridges", "painted green every seventh year"),
    "ZOO_S9": ("Breeding of falcons.", "falcons", "bred under a permit of the warden"),
    "ZOO_S10": ("Carving of marble.", "marble", "carved by guild members alone"),
}
SECTIONS = {
    sid: (title, f"All {word} shall be {rule}; a breach is fined. The {word} register is kept.")
    for sid, (title, word, rule) in TOPICS.items()
}


def _question(word: str) -> str:
    return f"What does the law say about {word}?"


def _run_body(query: str, **extra: Any) -> dict[str, Any]:
    return {"query": query, "collection": "test", "use_memory": False, **extra}


def _wait_finished(client: httpx.Client, env: ApiEnv, task: str, limit_s: float = 60) -> Any:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        run = client.get(f"/agent/search/{task}", headers=env.auth()).json()
        if run["status"] != "running":
            return run
        time.sleep(0.05)
    raise AssertionError(f"run {task} did not finish in {limit_s} s")


def test_sse_resume_with_last_event_id_over_http(tmp_path: Path) -> None:
    env = make_api(tmp_path, reasoner=SlowReasoner(0.15))
    with serve(env.app) as url, httpx.Client(base_url=url, timeout=30) as client:
        r = client.post("/agent/search", json=_run_body(MURDER, stream=True), headers=env.auth())
        assert r.status_code == 202
        task = r.json()["task_id"]
        stream = f"/agent/search/{task}/stream"
        with client.stream("GET", stream, headers=env.auth()) as resp:
            first = sse_events(resp, limit=3)  # then the connection is dropped mid-run
        assert [e["id"] for e in first] == ["1", "2", "3"]
        assert client.get(f"/agent/search/{task}", headers=env.auth()).json()["status"] == (
            "running"
        )
        headers = {**env.auth(), "Last-Event-ID": first[-1]["id"]}
        with connect_sse(client, "GET", stream, headers=headers) as source:
            rest = [
                {"id": s.id, "event": s.event, "data": s.json()}
                for s in source.iter_sse()
                if s.data
            ]
        events = first + rest
        assert [int(e["id"]) for e in events] == list(range(1, len(events) + 1))
        assert [e["event"] for e in events].count("done") == 1 and events[-1]["event"] == "done"
        stored = env.sleuth.catalog.get_run(task)
        assert stored is not None
        assert [e["data"] for e in events] == [
            AgentEventAdapter.dump_python(AgentEventAdapter.validate_python(e), mode="json")
            for e in stored["events"]
        ]


def test_a_client_that_disconnects_mid_stream_leaves_the_run_to_finish_and_be_stored(
    tmp_path: Path,
) -> None:
    """Disconnect policy: finish and store (the run does not depend on its readers)."""
    env = make_api(tmp_path, reasoner=SlowReasoner(0.2))
    with serve(env.app) as url, httpx.Client(base_url=url, timeout=30) as client:
        task = client.post(
            "/agent/search", json=_run_body(MURDER, stream=True), headers=env.auth()
        ).json()["task_id"]
        with client.stream("GET", f"/agent/search/{task}/stream", headers=env.auth()) as resp:
            assert len(sse_events(resp, limit=2)) == 2
        # gone: the run goes on
        assert client.get(f"/agent/search/{task}", headers=env.auth()).json()["status"] == (
            "running"
        )
        run = _wait_finished(client, env, task)
        assert run["status"] == "completed" and "[BNS_S103]" in run["answer"]
        stored = env.sleuth.catalog.get_run(task)
        assert stored is not None and stored["status"] == "completed"
        assert stored["events"][-1]["type"] == "done" and stored["answer"]["citations"]
        # and it can still be streamed whole, from the start
        with client.stream("GET", f"/agent/search/{task}/stream", headers=env.auth()) as resp:
            replay = sse_events(resp)
        assert len(replay) == len(stored["events"]) and replay[-1]["event"] == "done"


def test_ten_concurrent_streamed_runs_each_see_only_their_own_steps_and_answer(
    tmp_path: Path,
) -> None:
    env = make_api(tmp_path, sections=SECTIONS, reasoner=SlowReasoner(0.05), api_run_workers=10)
    words = [word for _, word, _ in TOPICS.values()]
    with serve(env.app) as url:
        # each question alone first: what its run should see
        with httpx.Client(base_url=url, timeout=60) as client:
            alone = {
                w: client.post(
                    "/agent/search", json=_run_body(_question(w)), headers=env.auth()
                ).json()
                for w in words
            }

        async def streamed(client: httpx.AsyncClient, word: str) -> tuple[str, list[Any]]:
            r = await client.post(
                "/agent/search", json=_run_body(_question(word), stream=True), headers=env.auth()
            )
            task = r.json()["task_id"]
            async with aconnect_sse(
                client, "GET", f"/agent/search/{task}/stream", headers=env.auth()
            ) as source:
                return task, [s.json() async for s in source.aiter_sse() if s.data]

        async def together() -> list[tuple[str, list[Any]]]:
            async with httpx.AsyncClient(base_url=url, timeout=60) as client:
                return await asyncio.gather(*(streamed(client, w) for w in words))

        results = asyncio.run(together())

    spans = []
    for word, (task, events) in zip(words, results, strict=True):
        sid = next(s for s, (_, w, _) in TOPICS.items() if w == word)
        assert {e["task_id"] for e in events} == {task}
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert [e["type"] for e in events].count("done") == 1 and events[-1]["type"] == "done"
        answer = next(e for e in events if e["type"] == "answer")["answer"]
        expected = alone[word]
        assert answer["answer_text"] == expected["answer"]  # the same as when run alone
        assert [c["source_id"] for c in answer["citations"]][:1] == [sid]
        calls = [(e["tool"], e["arguments"]) for e in events if e["type"] == "tool_call"]
        assert calls == [(c["tool"], c["arguments"]) for c in expected["tool_calls"]]
        searched = " ".join(str(a.get("query", "")) for t, a in calls if t == "rag_search")
        others = [w for w in words if w != word]
        assert word in searched and not any(w in searched for w in others)
        stored = env.sleuth.catalog.get_run(task)
        assert stored is not None and stored["question"] == _question(word)
        spans.append((events[0]["timestamp"], events[-1]["timestamp"]))
    # they did run at the same time
    overlapping = sum(1 for a in spans if sum(1 for b in spans if b[0] < a[1] and a[0] < b[1]) > 1)
    assert overlapping >= 5


def _write_pdf(path: Path, pages: int) -> None:
    from reportlab.lib.pagesizes import A4
    from reportlab.pdfgen import canvas

    pdf = canvas.Canvas(str(path), pagesize=A4)
    words = [
        "river",
        "mountain",
        "ledger",
        "harvest",
        "council",
        "granary",
        "treaty",
        "lantern",
        "orchard",
        "meadow",
    ]
    for page in range(pages):
        pdf.setFont("Helvetica", 10)
        pdf.drawString(72, 800, f"Chapter {page + 1}. On the {words[page % 10]} of the realm")
        for line in range(6):
            text = " ".join(words[(page + line + k) % 10] for k in range(14))
            pdf.drawString(72, 780 - 18 * line, f"{line + 1}. The {text}.")
        pdf.showPage()
    pdf.save()


def test_a_long_ingestion_does_not_block_health_or_a_streamed_query(tmp_path: Path) -> None:
    """A 400-page PDF is ingested with the real embedder while /health and a streamed run
    are served."""
    from sleuth.retrieval.embeddings import get_embedder

    pytest.importorskip("reportlab")
    pdf = tmp_path / "realm.pdf"
    _write_pdf(pdf, 400)
    env = make_api(tmp_path, embedder=get_embedder(), own_ingest_embedder=True)
    health: list[float] = []
    with serve(env.app) as url, httpx.Client(base_url=url, timeout=30) as client:
        client.post("/collections", json={"name": "realm"}, headers=env.auth())
        with pdf.open("rb") as fh:
            r = client.post(
                "/collections/realm/documents",
                files=[("files", ("realm.pdf", fh, "application/pdf"))],
                headers=env.auth(),
            )
        assert r.status_code == 202, r.text
        job_url = r.json()["status_url"]

        def job() -> dict[str, Any]:
            return client.get(job_url, headers=env.auth()).json()

        deadline = time.monotonic() + 60
        while job()["progress"]["chunks_total"] == 0:  # parsed and chunked: embedding now
            assert time.monotonic() < deadline and job()["state"] != "failed"
            t0 = time.perf_counter()
            assert client.get("/health").status_code == 200
            health.append(time.perf_counter() - t0)
            time.sleep(0.05)
        posted, posted_wall = time.perf_counter(), time.time()
        r = client.post("/agent/search", json=_run_body(MURDER, stream=True), headers=env.auth())
        accepted_s = time.perf_counter() - posted
        task = r.json()["task_id"]
        assert job()["state"] == "running"  # the query starts while the ingestion runs
        for _ in range(10):
            t0 = time.perf_counter()
            assert client.get("/health").status_code == 200
            health.append(time.perf_counter() - t0)
            time.sleep(0.1)
        with client.stream("GET", f"/agent/search/{task}/stream", headers=env.auth()) as resp:
            events = sse_events(resp)
        first_event_s = events[0]["data"]["timestamp"] - posted_wall
        done_s = events[-1]["data"]["timestamp"] - posted_wall
        assert events[-1]["event"] == "done"
        ingesting_at_done = job()["state"] == "running"
        assert ingesting_at_done  # the run went through while the ingestion went on
        assert done_s < 10  # not queued behind the ingestion's embedding
        while job()["state"] == "running":
            t0 = time.perf_counter()
            assert client.get("/health").status_code == 200
            health.append(time.perf_counter() - t0)
            time.sleep(0.2)
        final = job()
    assert final["state"] == "succeeded", final
    assert final["files"][0]["status"] == "added" and final["files"][0]["n_chunks"] >= 200
    assert accepted_s < 1.0
    assert max(health) < 1.0, sorted(health)[-5:]
    print(
        f"\n/health during the ingestion: {len(health)} probes, max {max(health) * 1e3:.0f} ms; "
        f"search accepted in {accepted_s * 1e3:.0f} ms, first event after {first_event_s:.2f} s, "
        f"done after {done_s:.2f} s (ingestion still running then: {ingesting_at_done}); "
        f"{final['files'][0]['n_chunks']} chunks"
    )


def test_sleuth_serve_starts_on_loopback(tmp_path: Path) -> None:
    """The CLI command itself: binds 127.0.0.1, answers /health, refuses requests without a
    key."""
    import os
    import socket
    import subprocess
    import sys

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
    env["SLEUTH_DATA_DIR"] = str(tmp_path / "data")
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("sleuth")), "serve", "--port", str(port)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                r = httpx.get(f"http://127.0.0.1:{port}/health", timeout=2)
                break
            except httpx.TransportError:
                assert proc.poll() is None, proc.stdout.read() if proc.stdout else ""
                assert time.monotonic() < deadline, "sleuth serve did not start"
                time.sleep(0.2)
        assert r.json()["status"] == "ok"
        assert httpx.get(f"http://127.0.0.1:{port}/collections").status_code == 401
    finally:
        proc.terminate()
        proc.wait(30)
