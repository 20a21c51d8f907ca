"""The HTTP API in process (FastAPI's TestClient): search, streaming, runs, auth, isolation
between users, collections, uploads and their errors, the OpenAPI document."""

from __future__ import annotations

import io
import json
import time
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from sleuth.agents.events import AgentEventAdapter, DoneEvent, ThinkEvent
from sleuth.api.keys import authenticate, create_user, hash_api_key
from sleuth.api.runs import RunBuffer
from sleuth.api.uploads import UploadRejected, check_type, safe_file_name
from sleuth.tools.base import RunContext
from tests.api_helpers import ApiEnv, make_api, sse_events

MURDER = "What is the punishment for murder?"


@pytest.fixture
def env(tmp_path: Path) -> ApiEnv:
    return make_api(tmp_path)


@pytest.fixture
def client(env: ApiEnv) -> Iterator[TestClient]:
    with TestClient(env.app) as c:
        yield c


def _search(client: TestClient, env: ApiEnv, user: str = "alice", **body: Any) -> Any:
    payload = {"query": MURDER, "collection": "test", "use_memory": False, **body}
    return client.post("/agent/search", json=payload, headers=env.auth(user))


def _wait_job(client: TestClient, env: ApiEnv, url: str, user: str = "alice") -> dict[str, Any]:
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        job = client.get(url, headers=env.auth(user)).json()
        if job["state"] in ("succeeded", "failed"):
            return job
        time.sleep(0.05)
    raise AssertionError(f"job did not finish: {job}")


# ----------------------------------------------------------------------------- search


def test_health_needs_no_key(client: TestClient) -> None:
    r = client.get("/health")
    assert r.status_code == 200 and r.json()["status"] == "ok"


def test_search_answers_with_cited_source_text_and_stores_the_run(
    client: TestClient, env: ApiEnv
) -> None:
    r = _search(client, env)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "completed" and not body["is_insufficient_context"]
    assert "[BNS_S103]" in body["answer"] and body["key_points"]
    cited = {c["source_id"]: c for c in body["citations"]}
    assert "imprisonment for life" in cited["BNS_S103"]["text"]
    assert body["reasoning_steps"] and body["tool_calls"] and body["trace"]["iterations"] >= 1
    run = env.sleuth.catalog.get_run(body["task_id"])
    assert run is not None and run["user_id"] == env.user_ids["alice"]
    assert run["answer"]["answer_text"] == body["answer"] and run["steps"]
    events = [AgentEventAdapter.validate_python(e) for e in run["events"]]
    assert [e.seq for e in events] == list(range(1, len(events) + 1))
    assert events[-1].type == "done"
    stored = client.get(f"/agent/search/{body['task_id']}", headers=env.auth()).json()
    assert stored["answer"] == body["answer"] and stored["citations"] == body["citations"]
    assert stored["status"] == "completed" and stored["finished_at"]


@pytest.mark.parametrize("mode", ["react", "guided"])
def test_streamed_search_answers_202_then_the_events_in_order(
    client: TestClient, env: ApiEnv, mode: str
) -> None:
    r = _search(client, env, stream=True, mode=mode)
    assert r.status_code == 202, r.text
    accepted = r.json()
    task = accepted["task_id"]
    assert r.headers["location"] == accepted["result_url"] == f"/agent/search/{task}"
    with client.stream("GET", accepted["stream_url"], headers=env.auth()) as resp:
        assert resp.headers["content-type"].startswith("text/event-stream")
        events = sse_events(resp)
    seqs = [int(e["id"]) for e in events]
    assert seqs == list(range(1, len(events) + 1))
    assert all(e["data"]["seq"] == int(e["id"]) and e["data"]["task_id"] == task for e in events)
    kinds = [e["event"] for e in events]
    assert kinds.count("done") + kinds.count("error") == 1 and kinds[-1] == "done"
    assert kinds[-2] == "answer" and "think" in kinds
    assert kinds.index("think") < kinds.index("tool_call") < kinds.index("tool_result")
    calls = {e["data"]["call_id"] for e in events if e["event"] == "tool_call"}
    assert {e["data"]["call_id"] for e in events if e["event"] == "tool_result"} == calls
    # the result is there once 'done' was seen
    final = client.get(accepted["result_url"], headers=env.auth()).json()
    assert final["status"] == "completed" and "[BNS_S103]" in final["answer"]


def test_stream_resumes_after_last_event_id_without_loss(client: TestClient, env: ApiEnv) -> None:
    task = _search(client, env, stream=True).json()["task_id"]
    url = f"/agent/search/{task}/stream"
    with client.stream("GET", url, headers=env.auth()) as resp:
        full = sse_events(resp)
    for k in (0, 3, len(full) - 1, len(full)):
        headers = {**env.auth(), "Last-Event-ID": str(k)}
        with client.stream("GET", url, headers=headers) as resp:
            rest = sse_events(resp)
        assert rest == full[k:]
    with client.stream("GET", f"{url}?last_event_id=2", headers=env.auth()) as resp:
        assert sse_events(resp) == full[2:]
    # a finished run that has left memory replays from the catalog
    env.app.state.sleuth.runs._runs.clear()
    with client.stream("GET", url, headers={**env.auth(), "Last-Event-ID": "4"}) as resp:
        assert sse_events(resp) == full[4:]
    assert client.get(f"/agent/search/{task}", headers=env.auth()).json()["status"] == "completed"


def test_a_bad_last_event_id_is_a_422_naming_it(client: TestClient, env: ApiEnv) -> None:
    task = _search(client, env).json()["task_id"]
    r = client.get(f"/agent/search/{task}/stream", headers={**env.auth(), "Last-Event-ID": "abc"})
    assert r.status_code == 422 and "Last-Event-ID" in r.json()["detail"]


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"query": "   "}, "query"),
        ({"query": ""}, "query"),
        ({"query": "x" * 4001}, "query"),
        ({"query": "?!? …"}, "query"),
        ({"collection": "../etc"}, "collection"),
        ({"mode": "fast"}, "mode"),
        ({"max_iterations": 0}, "max_iterations"),
        ({"timeout_s": -1}, "timeout_s"),
        ({"colection": "test"}, "colection"),
    ],
)
def test_bad_search_requests_are_422_naming_the_field(
    client: TestClient, env: ApiEnv, body: dict[str, Any], field: str
) -> None:
    r = _search(client, env, **body)
    assert r.status_code == 422, r.text
    assert r.json()["message"].startswith(f"{field}:")


def test_a_validators_message_is_shown_without_pydantics_prefix(
    client: TestClient, env: ApiEnv
) -> None:
    r = _search(client, env, query="   ")
    assert r.json()["message"] == "query: the question is empty", r.text


def test_a_refused_long_question_is_not_echoed_back_whole(client: TestClient, env: ApiEnv) -> None:
    r = _search(client, env, query="x" * 4001)
    assert r.status_code == 422
    assert len(r.text) < 1500, len(r.text)
    assert "4,001 characters" in r.text


def test_a_body_sent_without_the_json_content_type_says_so(client: TestClient, env: ApiEnv) -> None:
    r = client.post(
        "/agent/search",
        content=b'{"query": "murder", "collection": "test"}',
        headers={**env.auth(), "Content-Type": "application/x-www-form-urlencoded"},
    )
    assert r.status_code == 422
    assert r.json()["message"] == (
        "the request body must be JSON with 'Content-Type: application/json' "
        "(got application/x-www-form-urlencoded)"
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"{not json", "request body is not valid JSON: Expecting property name enclosed in"),
        (b'{"query": "a" "b"}', "request body is not valid JSON: Expecting ',' delimiter (at"),
    ],
)
def test_malformed_json_is_a_422_that_says_so(
    client: TestClient, env: ApiEnv, body: bytes, message: str
) -> None:
    # not "1: JSON decode error": the body's offset alone named no field
    r = client.post(
        "/agent/search",
        content=body,
        headers={**env.auth(), "Content-Type": "application/json"},
    )
    assert r.status_code == 422 and r.json()["message"].startswith(message), r.text


def test_a_run_that_cannot_start_ends_with_an_error_event(client: TestClient, env: ApiEnv) -> None:
    state = env.app.state.sleuth

    def fail(*_: Any, **__: Any) -> Any:
        raise RuntimeError("index unavailable")

    state.runs.agent = type("Broken", (), {"execute_agentic_search": staticmethod(fail)})()
    r = _search(client, env)
    assert r.status_code == 200
    body = r.json()
    assert body["status"] == "error" and "index unavailable" in body["error"]
    with client.stream("GET", f"/agent/search/{body['task_id']}/stream", headers=env.auth()) as s:
        events = sse_events(s)
    assert [e["event"] for e in events] == ["error"] and events[0]["id"] == "1"
    stored = env.sleuth.catalog.get_run(body["task_id"])
    assert stored is not None and stored["status"] == "error"


def test_a_collection_with_unfinished_runs_cannot_be_deleted(tmp_path: Path) -> None:
    from tests.api_helpers import SlowReasoner

    env = make_api(tmp_path, reasoner=SlowReasoner(0.2))
    with TestClient(env.app) as client:
        task = _search(client, env, stream=True).json()["task_id"]
        r = client.delete("/collections/test", headers=env.auth())
        assert r.status_code == 409 and "runs on collection 'test'" in r.json()["detail"]
        with client.stream("GET", f"/agent/search/{task}/stream", headers=env.auth()) as s:
            assert sse_events(s)[-1]["event"] == "done"
        assert client.delete("/collections/test", headers=env.auth()).status_code == 204


def test_too_many_waiting_runs_answer_429(tmp_path: Path) -> None:
    from tests.api_helpers import SlowReasoner

    env = make_api(tmp_path, reasoner=SlowReasoner(0.3), api_run_workers=1, api_max_queued_runs=1)
    with TestClient(env.app) as client:
        assert _search(client, env, stream=True).status_code == 202
        r = _search(client, env, stream=True)
        assert r.status_code == 429 and "SLEUTH_API_MAX_QUEUED_RUNS" in r.json()["detail"]
        assert r.headers["retry-after"]


# ----------------------------------------------------------------------------- auth


def test_missing_or_invalid_keys_are_401_and_a_revoked_key_403(
    client: TestClient, env: ApiEnv
) -> None:
    r = client.get("/collections")
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    assert "Authorization: Bearer" in r.json()["detail"]
    for bad in ("nope", env.keys["alice"][:-2] + "xx", "Basic abc"):
        r = client.get("/collections", headers={"Authorization": f"Bearer {bad}"})
        assert r.status_code == 401, bad
    r = client.get("/collections", headers={"Authorization": f"Basic {env.keys['alice']}"})
    assert r.status_code == 401
    env.sleuth.catalog.set_user_disabled("bob")
    r = client.get("/collections", headers=env.auth("bob"))
    assert r.status_code == 403 and "revoked" in r.json()["detail"]
    assert client.get("/collections", headers=env.auth("alice")).status_code == 200


def test_keys_are_stored_hashed_and_checked_whole(env: ApiEnv) -> None:
    catalog = env.sleuth.catalog
    user, key = create_user(catalog, "carol")
    found = catalog.user_key_hash(user.id)
    assert found is not None and found[1] == hash_api_key(key) and key not in found[1]
    assert authenticate(catalog, key) == user
    assert authenticate(catalog, key + "a") is None
    assert authenticate(catalog, key.replace(user.id[2:], "0" * 16)) is None
    assert authenticate(catalog, "") is None
    with pytest.raises(Exception, match="already exists"):
        create_user(catalog, "carol")


def test_users_reach_only_their_own_collections_and_runs(client: TestClient, env: ApiEnv) -> None:
    task = _search(client, env).json()["task_id"]
    bob = env.auth("bob")
    assert client.get("/collections", headers=bob).json() == []
    for method, url in [
        ("GET", "/collections/test"),
        ("GET", "/collections/test/documents"),
        ("DELETE", "/collections/test"),
        ("DELETE", "/collections/test/documents/BNS"),
        ("GET", "/collections/test/jobs"),
        ("GET", f"/agent/search/{task}"),
        ("GET", f"/agent/search/{task}/stream"),
    ]:
        r = client.request(method, url, headers=bob)
        assert r.status_code == 404, (method, url, r.text)
    r = _search(client, env, user="bob")
    assert r.status_code == 404 and r.json()["detail"] == "collection 'test' not found"
    files = [("files", ("a.md", b"# A\n\ntext\n"))]
    assert client.post("/collections/test/documents", files=files, headers=bob).status_code == 404
    assert client.get("/agent/search", headers=bob).json() == []
    assert [r["task_id"] for r in client.get("/agent/search", headers=env.auth()).json()] == [task]
    # a taken name cannot be created again, by anyone (without saying whose it is)
    r = client.post("/collections", json={"name": "test"}, headers=bob)
    assert r.status_code == 409 and "already exists" in r.json()["detail"]
    assert env.sleuth.catalog.collection_owner("test") == env.user_ids["alice"]


def test_a_collection_without_owner_is_out_of_the_apis_reach(
    client: TestClient, env: ApiEnv
) -> None:
    env.sleuth.catalog.set_collection_owner("test", None)  # as if made with the CLI
    assert _search(client, env).status_code == 404
    assert client.get("/collections", headers=env.auth()).json() == []


def test_memory_and_agent_tools_stay_within_the_user(client: TestClient, env: ApiEnv) -> None:
    env.sleuth.catalog.set_collection_owner("test", env.user_ids["alice"])
    r = client.post("/collections", json={"name": "bobs"}, headers=env.auth("bob"))
    assert r.status_code == 201
    first = _search(client, env, use_memory=True).json()
    assert first["trace"]["memory"]["stored"] is True
    again = _search(client, env, use_memory=True).json()
    assert first["task_id"] in again["trace"]["memory"]["recalled"]
    tool = env.sleuth.agent.tool_registry().get("list_collections")
    assert tool is not None
    for user, expected in (("alice", ["test"]), ("bob", ["bobs", "test"])):
        ctx = RunContext(collection="test", user_id=env.user_ids[user])
        listed = tool.invoke({}, ctx).payload["collections"]
        assert [c["name"] for c in listed] == expected  # own ones, and the run's own
    everything = tool.invoke({}, RunContext(collection="test")).payload["collections"]
    assert [c["name"] for c in everything] == ["bobs", "test"]  # the CLI sees all


# ----------------------------------------------------------------------------- collections


def test_collection_lifecycle(client: TestClient, env: ApiEnv) -> None:
    h = env.auth()
    r = client.post("/collections", json={"name": "notes"}, headers=h)
    assert r.status_code == 201 and r.json()["n_documents"] == 0
    assert client.post("/collections", json={"name": "notes"}, headers=h).status_code == 409
    assert [c["name"] for c in client.get("/collections", headers=h).json()] == ["notes", "test"]
    assert client.get("/collections/notes", headers=h).json()["embedding_model"]
    assert client.delete("/collections/notes", headers=h).status_code == 204
    assert client.get("/collections/notes", headers=h).status_code == 404
    assert env.sleuth.catalog.get_collection("notes") is None


@pytest.mark.parametrize("name", ["", "../x", "a/b", ".hidden", "x" * 65])
def test_invalid_collection_names_are_422(client: TestClient, env: ApiEnv, name: str) -> None:
    r = client.post("/collections", json={"name": name}, headers=env.auth())
    assert r.status_code == 422 and r.json()["message"].startswith("name:")


def test_upload_ingests_in_the_background_with_progress(client: TestClient, env: ApiEnv) -> None:
    h = env.auth()
    client.post("/collections", json={"name": "notes"}, headers=h)
    files = [
        ("files", ("cats.md", b"# Cats\n\nCats purr and chase mice.\n")),
        ("files", ("dogs.txt", b"Dogs bark at the postman.\n")),
        ("files", ("empty.md", b"")),
    ]
    r = client.post("/collections/notes/documents", files=files, headers=h)
    assert r.status_code == 202, r.text
    job = r.json()
    assert r.headers["location"] == job["status_url"]
    assert job["state"] in ("queued", "running") and job["progress"]["files_total"] == 3
    done = _wait_job(client, env, job["status_url"])
    assert done["state"] == "succeeded" and done["error"] is None
    by_name = {f["name"]: f for f in done["files"]}
    assert by_name["cats.md"]["status"] == "added" and by_name["cats.md"]["n_chunks"] >= 1
    assert by_name["empty.md"]["status"] == "skipped"
    assert done["progress"]["files_done"] == 3
    assert done["progress"]["chunks_embedded"] == done["progress"]["chunks_total"] >= 2
    docs = {d["doc_id"]: d for d in client.get("/collections/notes/documents", headers=h).json()}
    assert docs["cats"]["name"] == "cats.md" and "path" not in docs["cats"]
    assert [j["job_id"] for j in client.get("/collections/notes/jobs", headers=h).json()] == [
        job["job_id"]
    ]
    r = client.post(
        "/agent/search",
        json={"query": "What do cats chase?", "collection": "notes", "use_memory": False},
        headers=h,
    )
    assert r.json()["citations"][0]["text"] == "Cats purr and chase mice."
    uploaded = env.sleuth.settings.data_dir / "uploads" / "notes" / "cats.md"
    assert uploaded.is_file()
    assert client.delete("/collections/notes/documents/cats", headers=h).status_code == 204
    assert not uploaded.exists()
    assert client.delete("/collections/notes/documents/cats", headers=h).status_code == 404
    assert client.delete("/collections/notes", headers=h).status_code == 204
    assert not uploaded.parent.exists()


def _docx() -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("word/document.xml", "<x/>")
    return buf.getvalue()


@pytest.mark.parametrize(
    ("files", "status", "needle"),
    [
        ([("files", ("../../etc/passwd.txt", b"x"))], 422, "directory part"),
        ([("files", ("..\\evil.md", b"x"))], 422, "directory part"),
        ([("files", (".env.md", b"x"))], 422, "must not start with '.'"),
        ([("files", ("x" * 130 + ".md", b"x"))], 422, "longer than"),
        ([("files", ("run.exe", b"MZ"))], 415, "unsupported file type '.exe'"),
        ([("files", ("noext", b"hello"))], 415, "unsupported file type '(none)'"),
        ([("files", ("fake.pdf", b"hello"))], 415, "not a PDF"),
        ([("files", ("fake.docx", b"hello"))], 415, "not a .docx"),
        ([("files", ("bin.txt", b"ab\x00cd"))], 415, "binary"),
        ([("files", ("a.md", b"x")), ("files", ("A.md", b"y"))], 422, "sent twice"),
        ([("other", ("a.md", b"x"))], 422, "at least one file"),
        ([], 422, "at least one file"),
    ],
)
def test_bad_uploads_are_refused_with_a_clear_4xx(
    client: TestClient, env: ApiEnv, files: list[Any], status: int, needle: str
) -> None:
    r = client.post(
        "/collections/test/documents",
        files=files or None,
        data=None if files else {"x": "1"},
        headers=env.auth(),
    )
    assert r.status_code == status, r.text
    assert needle in r.json()["detail"]
    assert not list((env.sleuth.settings.data_dir / "uploads").glob("test/*"))


def test_upload_limits_on_size_and_count(tmp_path: Path) -> None:
    env = make_api(tmp_path, upload_max_bytes=2000, upload_max_files=2)
    with TestClient(env.app) as client:
        h = env.auth()
        big = [("files", ("big.md", b"x" * 5000))]
        r = client.post("/collections/test/documents", files=big, headers=h)
        assert r.status_code == 413 and "SLEUTH_UPLOAD_MAX_BYTES=2000" in r.json()["detail"]
        many = [("files", (f"f{i}.md", b"x")) for i in range(3)]
        r = client.post("/collections/test/documents", files=many, headers=h)
        assert r.status_code == 422 and "at most 2" in r.json()["detail"]
        ok = [("files", ("f.md", b"# F\n\nfine\n")), ("files", ("g.docx", _docx()))]
        r = client.post("/collections/test/documents", files=ok, headers=h)
        assert r.status_code == 202
        job = _wait_job(client, env, r.json()["status_url"])
        assert {f["name"]: f["status"] for f in job["files"]}["f.md"] == "added"


def test_deleting_a_collection_with_a_pending_job_is_409(client: TestClient, env: ApiEnv) -> None:
    jobs = env.app.state.sleuth.jobs
    import threading

    gate = threading.Event()
    original = env.sleuth.pipeline.ingest

    def slow_ingest(*args: Any, **kwargs: Any) -> Any:
        gate.wait(10)
        return original(*args, **kwargs)

    env.sleuth.pipeline.ingest = slow_ingest  # type: ignore[method-assign]
    r = client.post(
        "/collections/test/documents",
        files=[("files", ("a.md", b"# A\n\nalpha\n"))],
        headers=env.auth(),
    )
    try:
        assert client.delete("/collections/test", headers=env.auth()).status_code == 409
        r2 = client.delete("/collections/test/documents/BNS", headers=env.auth())
        assert r2.status_code == 409 and "wait until it has finished" in r2.json()["detail"]
    finally:
        gate.set()
    assert _wait_job(client, env, r.json()["status_url"])["state"] == "succeeded"
    assert jobs.pending("test") is None
    assert client.delete("/collections/test", headers=env.auth()).status_code == 204


# ----------------------------------------------------------------------------- parts


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("report.pdf", "report.pdf"), ("a b:c?.md", "a b_c_.md"), ("Straße.txt", "Straße.txt")],
)
def test_safe_file_names(raw: str, expected: str) -> None:
    assert safe_file_name(raw, "f") == expected


@pytest.mark.parametrize(
    "raw", [None, "", " ", "..", "/etc/x.md", "a/../b.md", "C:\\x.md", "a\x01b.md", ".env"]
)
def test_unsafe_file_names(raw: str | None) -> None:
    with pytest.raises(UploadRejected) as info:
        safe_file_name(raw, "files[0]")
    assert info.value.status == 422 and info.value.message.startswith("files[0]")


def test_type_check_accepts_real_content() -> None:
    check_type("a.pdf", b"%PDF-1.7 ...", "f")
    check_type("a.docx", _docx()[:100], "f")
    check_type("a.json", b'{"a": 1}', "f")
    check_type("a.md", b"", "f")  # empty: ingested as skipped


def test_run_buffer_orders_events_and_releases_only_the_contiguous_prefix() -> None:
    buffer = RunBuffer()
    third = ThinkEvent(content="c", iteration=0, seq=3)
    buffer.add(third)
    assert buffer.after(0) == [] and buffer.last_seq == 0
    buffer.add(ThinkEvent(content="a", iteration=0, seq=1))
    buffer.add(ThinkEvent(content="b", iteration=0, seq=2))
    assert [e.seq for e in buffer.after(0)] == [1, 2, 3] and buffer.after(2) == [third]
    assert not buffer.terminated
    buffer.add(DoneEvent(status="completed", seq=4))
    assert buffer.terminated and buffer.last_seq == 4


def test_openapi_documents_every_operation_with_examples(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    ops = [(path, m, op) for path, item in spec["paths"].items() for m, op in item.items()]
    assert {p for p, _, _ in ops} >= {
        "/health",
        "/agent/search",
        "/agent/search/{task_id}",
        "/agent/search/{task_id}/stream",
        "/collections",
        "/collections/{name}",
        "/collections/{name}/documents",
        "/collections/{name}/documents/{doc_id}",
        "/collections/{name}/jobs",
        "/collections/{name}/jobs/{job_id}",
    }
    for path, method, op in ops:
        assert op.get("summary"), (path, method)
        if path != "/health":
            assert "401" in op["responses"], (path, method)
    schemas = spec["components"]["schemas"]
    for name in ("AgentSearchRequest", "AgentSearchResponse", "AgentSearchAccepted", "JobOut"):
        assert schemas[name].get("examples"), name
    upload = spec["paths"]["/collections/{name}/documents"]["post"]
    assert "multipart/form-data" in upload["requestBody"]["content"]
    assert (
        "text/event-stream"
        in spec["paths"]["/agent/search/{task_id}/stream"]["get"]["responses"]["200"]["content"]
    )


@pytest.mark.parametrize("raw", ["NaN", "Infinity", "-Infinity", "1e400"])
def test_non_finite_numbers_are_a_422_naming_the_field_not_a_500(
    client: TestClient, env: ApiEnv, raw: str
) -> None:
    body = '{"query": "murder", "collection": "test", "timeout_s": ' + raw + "}"
    headers = {**env.auth(), "Content-Type": "application/json"}
    resp = client.post("/agent/search", content=body, headers=headers)
    assert resp.status_code == 422
    assert "timeout_s" in resp.json()["message"]


def test_job_messages_do_not_reveal_server_paths(client: TestClient, env: ApiEnv) -> None:
    h = env.auth()
    client.post("/collections", json={"name": "notes"}, headers=h)
    text = b"# Cats\n\nCats purr and chase mice.\n"
    first = client.post(
        "/collections/notes/documents", files=[("files", ("cats.md", text))], headers=h
    )
    assert _wait_job(client, env, first.json()["status_url"])["state"] == "succeeded"
    again = client.post(
        "/collections/notes/documents", files=[("files", ("copy.md", text))], headers=h
    )
    done = _wait_job(client, env, again.json()["status_url"])
    [copy] = done["files"]
    assert copy["status"] == "duplicate" and "cats.md" in copy["message"]
    everything = json.dumps(done)
    assert str(env.sleuth.settings.data_dir) not in everything and "uploads" not in everything


def test_the_key_is_checked_before_a_malformed_body(client: TestClient, env: ApiEnv) -> None:
    broken = {"Content-Type": "application/json"}
    no_key = client.post("/agent/search", content='{"query":', headers=broken)
    assert no_key.status_code == 401 and "API key" in no_key.json()["detail"]
    wrong = client.post(
        "/agent/search", content='{"query":', headers={**broken, "Authorization": "Bearer nope"}
    )
    assert wrong.status_code == 401
    good = client.post("/agent/search", content='{"query":', headers={**broken, **env.auth()})
    assert good.status_code == 422


# ----------------------------------------------------------------------- retrieval only


def test_search_endpoint_ranks_sections_without_the_agent(client: TestClient, env: ApiEnv) -> None:
    r = client.get(
        "/collections/test/search", params={"q": "punishment for murder"}, headers=env.auth()
    )
    assert r.status_code == 200, r.text
    hits = r.json()
    assert hits[0]["source_id"] == "BNS_S103" and hits[0]["rank"] == 1
    assert len({h["source_id"] for h in hits}) == len(hits)  # one row per section
    assert {"doc_id", "title", "score", "retriever", "text"} <= set(hits[0])
    assert "murder" in hits[0]["text"]
    chunks = client.get(
        "/collections/test/search",
        params={"q": "theft", "k": 2, "mode": "bm25", "chunks": "true"},
        headers=env.auth(),
    ).json()
    assert len(chunks) <= 2 and all(h["retriever"] == "bm25" for h in chunks)
    assert "BNS_S303" in [h["source_id"] for h in chunks]


def test_search_endpoint_errors_are_json_and_other_users_see_404(
    client: TestClient, env: ApiEnv
) -> None:
    blank = client.get("/collections/test/search", params={"q": "  "}, headers=env.auth())
    assert blank.status_code == 422 and blank.json()["detail"] == "q: the query is blank"
    bad = client.get(
        "/collections/test/search", params={"q": "theft", "mode": "fuzzy"}, headers=env.auth()
    )
    assert bad.status_code == 422
    other = client.get("/collections/test/search", params={"q": "theft"}, headers=env.auth("bob"))
    assert other.status_code == 404
    assert client.get("/collections/test/search", params={"q": "theft"}).status_code == 401
