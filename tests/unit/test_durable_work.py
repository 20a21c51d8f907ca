"""Accepted work survives the process: ingestion jobs are catalog rows whose status URLs
outlive restarts and that resume; runs in flight when the server stopped read ``interrupted``."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from sleuth.api import create_app
from sleuth.store.catalog import Catalog
from tests.api_helpers import ApiEnv, SlowReasoner, make_api, sse_events
from tests.helpers import check_jobs_claimed_once_by_processes

DEAD_WORKER = f"{socket.gethostname()}:999999999:deadbeef"  # no such pid on this host


def _wait_job(client: TestClient, env: ApiEnv, url: str) -> dict[str, Any]:
    deadline = time.monotonic() + 20
    job: dict[str, Any] = {}
    while time.monotonic() < deadline:
        job = client.get(url, headers=env.auth()).json()
        if job.get("state") in ("succeeded", "failed"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job did not finish: {job}")


def _left_behind(env: ApiEnv, job_id: str, staged: dict[str, Path], state: str) -> None:
    """The catalog row a killed server leaves: the job accepted, its worker gone."""
    env.sleuth.catalog.save_job(
        {
            "job_id": job_id,
            "collection": "notes",
            "user_id": env.user_ids["alice"],
            "state": state,
            "staged": {name: str(path) for name, path in staged.items()},
            "files": [{"name": name, "status": "pending"} for name in staged],
            "progress": {"files_total": len(staged)},
            "worker": DEAD_WORKER,
        }
    )


def _notes(env: ApiEnv) -> None:
    with TestClient(env.app) as client:
        assert client.post("/collections", json={"name": "notes"}, headers=env.auth()).is_success


def test_a_finished_jobs_status_url_works_after_a_restart(tmp_path: Path) -> None:
    env = make_api(tmp_path)
    with TestClient(env.app) as client:
        client.post("/collections", json={"name": "notes"}, headers=env.auth())
        files = [("files", ("cats.md", b"# Cats\n\nCats purr and chase mice.\n"))]
        job = client.post("/collections/notes/documents", files=files, headers=env.auth()).json()
        done = _wait_job(client, env, job["status_url"])
    assert done["state"] == "succeeded"
    # a new process: nothing of the old one's memory is left
    again = create_app(sleuth=env.sleuth)
    with TestClient(again) as client:
        read = client.get(job["status_url"], headers=env.auth())
        assert read.status_code == 200
        assert read.json()["state"] == "succeeded"
        assert read.json()["files"][0]["status"] == "added"
        listed = client.get("/collections/notes/jobs", headers=env.auth()).json()
        assert [j["job_id"] for j in listed] == [job["job_id"]]
        # another user still cannot read it
        assert client.get(job["status_url"], headers=env.auth("bob")).status_code == 404


def test_a_job_a_killed_server_left_running_resumes_at_start(tmp_path: Path) -> None:
    env = make_api(tmp_path)
    _notes(env)
    staging = env.sleuth.settings.data_dir / "uploads" / ".staging" / "j1"
    staging.mkdir(parents=True)
    (staging / "owls.md").write_text("# Owls\n\nOwls hunt at night.\n")
    _left_behind(env, "j1", {"owls.md": staging / "owls.md"}, "running")

    with TestClient(create_app(sleuth=env.sleuth)) as client:
        done = _wait_job(client, env, "/collections/notes/jobs/j1")
        assert done["state"] == "succeeded", done
        assert "resumed after a server restart" in done["warnings"]
        docs = client.get("/collections/notes/documents", headers=env.auth()).json()
        assert [d["doc_id"] for d in docs] == ["owls"]
    row = env.sleuth.catalog.get_job("j1")
    assert row is not None and row["worker"] != DEAD_WORKER
    assert not staging.exists()  # moved into the collection's upload folder, then ingested


def test_a_running_server_takes_over_the_job_of_a_process_that_died(tmp_path: Path) -> None:
    """Several API processes on one catalog: when one dies, a live one finishes its jobs at
    its next heartbeat, without waiting for a restart."""
    env = make_api(tmp_path)
    _notes(env)
    with TestClient(create_app(sleuth=env.sleuth)) as client:
        state = client.app.state.sleuth  # type: ignore[attr-defined]
        staging = env.sleuth.settings.data_dir / "uploads" / ".staging" / "j9"
        staging.mkdir(parents=True)
        (staging / "owls.md").write_text("# Owls\n\nOwls hunt at night.\n")
        _left_behind(env, "j9", {"owls.md": staging / "owls.md"}, "running")  # a peer died
        state.jobs.beat()
        done = _wait_job(client, env, "/collections/notes/jobs/j9")
        assert done["state"] == "succeeded", done
        docs = client.get("/collections/notes/documents", headers=env.auth()).json()
        assert [d["doc_id"] for d in docs] == ["owls"]
    row = env.sleuth.catalog.get_job("j9")
    assert row is not None and row["worker"] == state.jobs.worker


def test_a_job_moved_but_not_ingested_resumes_from_the_collection_folder(tmp_path: Path) -> None:
    env = make_api(tmp_path)
    _notes(env)
    moved = env.sleuth.settings.data_dir / "uploads" / "notes" / "owls.md"
    moved.parent.mkdir(parents=True)
    moved.write_text("# Owls\n\nOwls hunt at night.\n")
    gone = env.sleuth.settings.data_dir / "uploads" / ".staging" / "j2" / "owls.md"
    _left_behind(env, "j2", {"owls.md": gone}, "running")
    with TestClient(create_app(sleuth=env.sleuth)) as client:
        assert _wait_job(client, env, "/collections/notes/jobs/j2")["state"] == "succeeded"


def test_a_job_whose_files_are_gone_is_failed_with_the_reason(tmp_path: Path) -> None:
    env = make_api(tmp_path)
    _notes(env)
    lost = env.sleuth.settings.data_dir / "uploads" / ".staging" / "j3" / "lost.md"
    _left_behind(env, "j3", {"lost.md": lost}, "queued")
    with TestClient(create_app(sleuth=env.sleuth)) as client:
        done = _wait_job(client, env, "/collections/notes/jobs/j3")
    assert done["state"] == "failed"
    assert "lost.md were not found at restart; upload them again" in done["error"]


def test_a_job_of_a_live_worker_is_not_taken_over(tmp_path: Path) -> None:
    env = make_api(tmp_path)
    _notes(env)
    staging = env.sleuth.settings.data_dir / "uploads" / ".staging" / "j4"
    staging.mkdir(parents=True)
    (staging / "owls.md").write_text("Owls.\n")
    _left_behind(env, "j4", {"owls.md": staging / "owls.md"}, "queued")
    live = "another-host:1:cafe"  # heartbeat fresh: another process still holds it
    env.sleuth.catalog.save_job({"job_id": "j4", "worker": live, "heartbeat_at": time.time()})
    app = create_app(sleuth=env.sleuth)
    with TestClient(app):
        assert app.state.sleuth.jobs.resume() == []
    row = env.sleuth.catalog.get_job("j4")
    assert row is not None and (row["state"], row["worker"]) == ("queued", live)


def test_exactly_one_process_claims_a_job(tmp_path: Path) -> None:
    catalog = Catalog(f"sqlite:///{tmp_path / 'c.sqlite3'}")
    catalog.save_job(
        {"job_id": "j", "collection": "c", "user_id": "u", "state": "queued", "staged": {}}
    )
    catalog.save_job({"job_id": "j", "worker": "old"})
    assert catalog.claim_job("j", "a", "old") is True
    assert catalog.claim_job("j", "b", "old") is False  # b saw the old worker too: too late
    assert catalog.get_job("j")["worker"] == "a"  # type: ignore[index]


def test_processes_racing_for_jobs_on_one_sqlite_catalog_claim_each_once(tmp_path: Path) -> None:
    check_jobs_claimed_once_by_processes(f"sqlite:///{tmp_path / 'c.sqlite3'}")


# ---------------------------------------------------------------- runs


def _run_left_in_flight(env: ApiEnv, task_id: str) -> None:
    """The row of a run the killed server was streaming: two events stored, no end."""
    events = [
        {"seq": 1, "task_id": task_id, "type": "observe", "content": "Question: q", "timestamp": 1},
        {
            "seq": 2,
            "task_id": task_id,
            "type": "think",
            "content": "I search.",
            "iteration": 0,
            "timestamp": 2,
        },
    ]
    env.sleuth.catalog.save_run(
        {
            "task_id": task_id,
            "collection": "test",
            "user_id": env.user_ids["alice"],
            "question": "What is the punishment for murder?",
            "mode": "react",
            "status": "running",
            "worker": DEAD_WORKER,
            "events": events,
        }
    )


def test_a_run_in_flight_when_the_server_died_reads_interrupted(tmp_path: Path) -> None:
    env = make_api(tmp_path)
    _run_left_in_flight(env, "r1")
    with TestClient(create_app(sleuth=env.sleuth)) as client:
        run = client.get("/agent/search/r1", headers=env.auth()).json()
        assert run["status"] == "interrupted"
        assert "the server stopped while this run was in flight" in run["error"]
        with client.stream("GET", "/agent/search/r1/stream", headers=env.auth()) as r:
            events = sse_events(r)  # ends: no hang
        assert [e["event"] for e in events] == ["observe", "think", "error"]
        assert [int(e["id"]) for e in events] == [1, 2, 3]
        listed = client.get("/agent/search", headers=env.auth()).json()
        assert listed[0]["task_id"] == "r1" and listed[0]["status"] == "interrupted"


def test_an_accepted_run_is_stored_running_before_it_ends(tmp_path: Path) -> None:
    env = make_api(tmp_path, reasoner=SlowReasoner(0.3))
    with TestClient(env.app) as client:
        body = {
            "query": "What is the punishment for murder?",
            "collection": "test",
            "stream": True,
            "use_memory": False,
        }
        accepted = client.post("/agent/search", json=body, headers=env.auth()).json()
        row = env.sleuth.catalog.get_run(accepted["task_id"])
        assert row is not None and row["status"] == "running"
        assert row["worker"] == env.app.state.sleuth.runs.worker
        deadline = time.monotonic() + 30
        while client.get(accepted["result_url"], headers=env.auth()).json()["status"] == "running":
            assert time.monotonic() < deadline
            time.sleep(0.05)
        # the live process's own runs are never taken for interrupted
        assert env.app.state.sleuth.runs.recover() == []
    row = env.sleuth.catalog.get_run(accepted["task_id"])
    assert row is not None and row["status"] == "completed" and row["events"][-1]["type"] == "done"


def test_a_shutdown_stops_a_job_after_the_file_being_read_and_the_next_start_ends_it(
    tmp_path: Path, monkeypatch: Any
) -> None:
    import sleuth.ingest.pipeline as pipeline

    env = make_api(tmp_path)
    _notes(env)
    app = create_app(sleuth=env.sleuth)
    registry = app.state.sleuth.jobs
    real_load = pipeline.load_file

    def load_then_shut_down(path: Path, options: Any) -> Any:
        registry._closing.set()  # what a SIGTERM's shutdown does while this file is read
        return real_load(path, options)

    monkeypatch.setattr(pipeline, "load_file", load_then_shut_down)
    files = [
        ("files", (f"{name}.md", f"# {name.title()}\n\n{name.title()} are birds.\n".encode()))
        for name in ("owls", "wrens", "larks")
    ]
    with TestClient(app) as client:
        job = client.post("/collections/notes/documents", files=files, headers=env.auth())
        job_id = job.json()["job_id"]
        deadline = time.monotonic() + 20
        while (row := env.sleuth.catalog.get_job(job_id)) and not row.get("warnings"):
            assert time.monotonic() < deadline, row
            time.sleep(0.05)
        # the file being read was written whole; the others wait, the job with them
        assert row["state"] == "queued" and row["finished_at"] is None
        assert [f["status"] for f in row["files"]] == ["added", "pending", "pending"]
        assert "the server stopped after 1 of 3 file(s)" in row["warnings"][-1]
        docs = client.get("/collections/notes/documents", headers=env.auth()).json()
        assert [d["doc_id"] for d in docs] == ["owls"]
    monkeypatch.setattr(pipeline, "load_file", real_load)
    env.sleuth.catalog.save_job({"job_id": job_id, "worker": DEAD_WORKER})  # that process exited
    with TestClient(create_app(sleuth=env.sleuth)) as client:
        done = _wait_job(client, env, f"/collections/notes/jobs/{job_id}")
        assert done["state"] == "succeeded", done
        # the file indexed before the stop keeps its outcome ("added", not "unchanged")
        assert [f["status"] for f in done["files"]] == ["added", "added", "added"]
        docs = client.get("/collections/notes/documents", headers=env.auth()).json()
        assert sorted(d["doc_id"] for d in docs) == ["larks", "owls", "wrens"]
