"""Faults on a real ``sleuth serve`` process: SIGKILL during an ingestion job and during a
streamed run, then a restart; SIGTERM during a run. Nothing the server accepted is lost.

Every test runs on both stores: ``local`` (SQLite catalog, local index in the data dir) and
``postgres`` (catalog and index in one PostgreSQL database, a real pgserver server).

The agent's model is a loopback OpenAI-compatible server that never answers in time, so a
run stays in flight for as long as a test needs.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

from sleuth.store.catalog import Catalog
from tests.postgres import HAVE_POSTGRES, NO_POSTGRES, new_database, postgres_server

pytestmark = pytest.mark.integration

FINAL = ("succeeded", "failed")
STATUTES = Path(__file__).resolve().parents[2].parent / "shared" / "data" / "statutes"
BNSS = STATUTES / "the_bharatiya_nagarik_suraksha_sanhita_2023.json"
SLEUTH = Path(sys.executable).with_name("sleuth")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class _Silent(BaseHTTPRequestHandler):
    """A model server that takes a minute to answer anything."""

    def do_POST(self) -> None:
        time.sleep(60)

    def log_message(self, *_args: Any) -> None:
        pass


@pytest.fixture
def silent_model() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Silent)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()


@pytest.fixture(scope="module")
def pg_server_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with postgres_server(tmp_path_factory.mktemp("pg")) as url:
        yield url


@pytest.fixture(
    params=[
        "local",
        pytest.param("postgres", marks=pytest.mark.skipif(not HAVE_POSTGRES, reason=NO_POSTGRES)),
    ]
)
def store(request: pytest.FixtureRequest, tmp_path: Path) -> dict[str, str]:
    """The store settings of one test's server: the catalog URL and the index backend."""
    if request.param == "local":
        url = f"sqlite:///{tmp_path / 'data' / 'catalog.sqlite3'}"
        return {"SLEUTH_INDEX_BACKEND": "local", "SLEUTH_DATABASE_URL": url}
    url = new_database(request.getfixturevalue("pg_server_url"))
    return {"SLEUTH_INDEX_BACKEND": "postgres", "SLEUTH_DATABASE_URL": url}


class Server:
    """``sleuth serve`` in a subprocess over one data dir and store; restartable."""

    def __init__(self, data_dir: Path, store: dict[str, str], **env: str) -> None:
        self.data_dir = data_dir
        self.catalog_url = store["SLEUTH_DATABASE_URL"]
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("SLEUTH_")}
        self.env.update(
            SLEUTH_DATA_DIR=str(data_dir),
            SLEUTH_API_USER_RATE="100000/minute",  # the tests poll; the limit is not tested here
            **store,
            **env,
        )
        self.proc: subprocess.Popen[bytes] | None = None
        self.url = ""
        self.log = data_dir / "server.log"

    def sleuth(self, *args: str) -> str:
        done = subprocess.run(
            [str(SLEUTH), *args], env=self.env, capture_output=True, text=True, timeout=120
        )
        assert done.returncode == 0, done.stderr
        return done.stdout.strip()

    def start(self) -> httpx.Client:
        port = _free_port()
        self.url = f"http://127.0.0.1:{port}"
        with self.log.open("ab") as out:
            self.proc = subprocess.Popen(
                [str(SLEUTH), "serve", "--port", str(port), "--log-level", "warning"],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
            )
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            try:
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return httpx.Client(base_url=self.url, timeout=120)
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        raise AssertionError("the server did not start: " + self.log.read_text()[-3000:])

    def kill(self, sig: int = signal.SIGKILL) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=60)


def _wait(predicate: Any, what: str, limit_s: float = 120) -> Any:
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.25)
    raise AssertionError(f"timed out waiting for {what}")


def _embedding_bnss(server: Server) -> tuple[dict[str, str], str]:
    """Start ``server``, upload the BNSS into a new collection 'law' and return (the auth
    header, the job's status URL) once the job has embedded its first chunks."""
    key = server.sleuth("users", "create", "alice")
    auth = {"Authorization": f"Bearer {key}"}
    with server.start() as client:
        assert client.post("/collections", json={"name": "law"}, headers=auth).status_code == 201
        with BNSS.open("rb") as f:
            r = client.post(
                "/collections/law/documents", files=[("files", (BNSS.name, f))], headers=auth
            )
        assert r.status_code == 202
        url = str(r.json()["status_url"])
        _wait(
            lambda: client.get(url, headers=auth).json()["progress"]["chunks_embedded"] > 0,
            "the job to embed its first chunks",
        )
    return auth, url


def test_sigkill_during_ingestion_then_restart_finishes_the_job(
    tmp_path: Path, store: dict[str, str]
) -> None:
    if not BNSS.is_file():
        pytest.skip(f"statutes data not found at {BNSS}")
    server = Server(tmp_path / "data", store)
    auth, url = _embedding_bnss(server)
    server.kill()
    row = Catalog(server.catalog_url).get_job(url.rsplit("/")[-1])
    assert row is not None and row["state"] == "running"  # what the killed server left

    with server.start() as client:
        job = _wait(
            lambda: (
                (j := client.get(url, headers=auth).json())["state"] != "running"
                and j["state"] != "queued"
                and j
            ),
            "the resumed job",
            limit_s=300,
        )
        assert job["state"] == "succeeded", job
        assert "resumed after a server restart" in job["warnings"]
        docs = client.get("/collections/law/documents", headers=auth).json()
        assert [d["status"] for d in docs] == ["indexed"] and docs[0]["n_chunks"] > 100
        run = client.post(
            "/agent/search",
            json={"query": "When may police arrest without warrant?", "collection": "law"},
            headers=auth,
        ).json()
        assert run["status"] == "completed" and run["citations"]
    assert server.kill(signal.SIGTERM) == 0


def test_sigterm_mid_ingestion_exits_0_and_the_job_resumes_at_the_next_start(
    tmp_path: Path, store: dict[str, str]
) -> None:
    """SIGTERM while a job embeds: the server stops taking requests, the job stops at its
    next safe point (or the grace ends), the process exits 0, and the next start finishes
    the job."""
    if not BNSS.is_file():
        pytest.skip(f"statutes data not found at {BNSS}")
    server = Server(tmp_path / "data", store, SLEUTH_API_SHUTDOWN_GRACE_S="1")
    auth, url = _embedding_bnss(server)
    started = time.monotonic()
    assert server.kill(signal.SIGTERM) == 0
    assert time.monotonic() - started < 30
    with pytest.raises(httpx.HTTPError):  # no longer accepting
        httpx.get(f"{server.url}/health", timeout=2)
    row = Catalog(server.catalog_url).get_job(url.rsplit("/")[-1])
    assert row is not None and row["state"] in ("queued", "running")  # left for the next start

    with server.start() as client:
        job = _wait(
            lambda: (j := client.get(url, headers=auth).json())["state"] in FINAL and j,
            "the resumed job",
            limit_s=300,
        )
        assert job["state"] == "succeeded", job
        assert "resumed after a server restart" in job["warnings"]
        docs = client.get("/collections/law/documents", headers=auth).json()
        assert [d["status"] for d in docs] == ["indexed"] and docs[0]["n_chunks"] > 100
    assert server.kill(signal.SIGINT) == 0


def _stream_run(client: httpx.Client, auth: dict[str, str]) -> str:
    body = {"query": "What is the punishment for murder?", "collection": "law", "stream": True}
    r = client.post("/agent/search", json=body, headers=auth)
    assert r.status_code == 202, r.text
    return str(r.json()["task_id"])


def _law(server: Server, auth: dict[str, str], client: httpx.Client) -> None:
    assert client.post("/collections", json={"name": "law"}, headers=auth).status_code == 201
    notes = b"# Murder\n\nWhoever commits murder shall be punished with death.\n"
    r = client.post(
        "/collections/law/documents", files=[("files", ("murder.md", notes))], headers=auth
    )
    url = r.json()["status_url"]
    _wait(lambda: client.get(url, headers=auth).json()["state"] == "succeeded", "the upload")


def test_sigkill_during_a_streamed_run_reads_interrupted_after_restart(
    tmp_path: Path, silent_model: str, store: dict[str, str]
) -> None:
    server = Server(
        tmp_path / "data", store, SLEUTH_LLM="openai:silent", SLEUTH_LLM_BASE_URL=silent_model
    )
    auth = {"Authorization": f"Bearer {server.sleuth('users', 'create', 'alice')}"}
    with server.start() as client:
        _law(server, auth, client)
        task = _stream_run(client, auth)
        time.sleep(1.0)  # the run is waiting on the model
        assert client.get(f"/agent/search/{task}", headers=auth).json()["status"] == "running"
    server.kill()
    with server.start() as client:
        run = client.get(f"/agent/search/{task}", headers=auth).json()
        assert run["status"] == "interrupted"
        with client.stream("GET", f"/agent/search/{task}/stream", headers=auth) as r:
            lines = [ln for ln in r.iter_lines() if ln.startswith("event:")]
        assert lines[-1] == "event: error"  # the replay ends
    assert server.kill(signal.SIGTERM) == 0


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_stop_signal_mid_run_exits_0_within_the_grace_and_the_run_is_interrupted(
    tmp_path: Path, silent_model: str, sig: int, store: dict[str, str]
) -> None:
    server = Server(
        tmp_path / "data",
        store,
        SLEUTH_LLM="openai:silent",
        SLEUTH_LLM_BASE_URL=silent_model,
        SLEUTH_API_SHUTDOWN_GRACE_S="1",
    )
    auth = {"Authorization": f"Bearer {server.sleuth('users', 'create', 'alice')}"}
    with server.start() as client:
        _law(server, auth, client)
        task = _stream_run(client, auth)
        time.sleep(1.0)
    started = time.monotonic()
    assert server.kill(sig) == 0
    assert time.monotonic() - started < 20  # not the model's 60 s
    run = Catalog(server.catalog_url).get_run(task)
    assert run is not None and run["status"] == "interrupted"
    assert json.dumps(run["events"][-1]).count("interrupted") == 1
