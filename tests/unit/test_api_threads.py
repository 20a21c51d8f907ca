"""Conversation threads over the HTTP API: create, list, read, delete, ask in a thread, and
another user's thread answering 404 everywhere."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from tests.api_helpers import ApiEnv, make_api, sse_events

MURDER = "What is the punishment for murder?"
FOLLOW_UP = "And if a group of five persons commits it?"


@pytest.fixture
def env(tmp_path: Path) -> ApiEnv:
    return make_api(tmp_path)


@pytest.fixture
def client(env: ApiEnv) -> Iterator[TestClient]:
    with TestClient(env.app) as c:
        yield c


def _new_thread(client: TestClient, env: ApiEnv, user: str = "alice") -> dict[str, Any]:
    r = client.post("/threads", json={"collection": "test"}, headers=env.auth(user))
    assert r.status_code == 201, r.text
    return r.json()


def _ask(client: TestClient, env: ApiEnv, thread_id: str, query: str, **body: Any) -> Any:
    payload = {"query": query, "collection": "test", "thread_id": thread_id, "use_memory": False}
    return client.post("/agent/search", json={**payload, **body}, headers=env.auth())


def test_a_two_turn_dialogue_is_stored_with_the_rewritten_follow_up(
    client: TestClient, env: ApiEnv
) -> None:
    thread = _new_thread(client, env)
    assert thread["turn_count"] == 0 and thread["collection"] == "test"
    first = _ask(client, env, thread["thread_id"], MURDER)
    assert first.status_code == 200, first.text
    assert first.json()["trace"]["conversation"]["rewrite"] == "none"

    accepted = _ask(client, env, thread["thread_id"], FOLLOW_UP, stream=True, mode="guided")
    assert accepted.status_code == 202, accepted.text
    with client.stream("GET", accepted.json()["stream_url"], headers=env.auth()) as resp:
        events = sse_events(resp)
    observed = [e["data"]["content"] for e in events if e["event"] == "observe"]
    assert any(line.startswith("Follow-up made standalone") for line in observed)

    detail = client.get(f"/threads/{thread['thread_id']}", headers=env.auth()).json()
    assert detail["turn_count"] == 2 and detail["title"] == MURDER
    assert [t["question"] for t in detail["turns"]] == [MURDER, FOLLOW_UP]
    assert detail["turns"][0]["rewritten_question"] is None
    assert "(What is the punishment for murder)" in (detail["turns"][1]["rewritten_question"])
    assert "BNS_S103" in detail["turns"][1]["citations"]
    assert detail["turns"][1]["task_id"] == accepted.json()["task_id"]
    last = client.get(f"/threads/{thread['thread_id']}?last=1", headers=env.auth()).json()
    assert [t["question"] for t in last["turns"]] == [FOLLOW_UP]


def test_threads_are_listed_newest_first_and_deleted_with_their_turns(
    client: TestClient, env: ApiEnv
) -> None:
    older = _new_thread(client, env)
    newer = _new_thread(client, env)
    _ask(client, env, older["thread_id"], MURDER)  # used last: listed first
    listed = client.get("/threads", headers=env.auth()).json()
    assert [t["thread_id"] for t in listed] == [older["thread_id"], newer["thread_id"]]
    assert client.get("/threads?collection=other", headers=env.auth()).json() == []
    r = client.delete(f"/threads/{older['thread_id']}", headers=env.auth())
    assert r.status_code == 204
    assert client.get(f"/threads/{older['thread_id']}", headers=env.auth()).status_code == 404
    assert env.sleuth.catalog.thread_turns(older["thread_id"]) == []
    assert [t["thread_id"] for t in client.get("/threads", headers=env.auth()).json()] == [
        newer["thread_id"]
    ]


def test_another_users_thread_is_404_on_every_endpoint(client: TestClient, env: ApiEnv) -> None:
    thread = _new_thread(client, env)["thread_id"]
    bob = env.auth("bob")
    assert client.get(f"/threads/{thread}", headers=bob).status_code == 404
    assert client.delete(f"/threads/{thread}", headers=bob).status_code == 404
    assert client.get("/threads", headers=bob).json() == []
    r = client.post(
        "/agent/search",
        json={"query": MURDER, "collection": "test", "thread_id": thread},
        headers=bob,
    )
    assert r.status_code == 404  # bob reaches neither alice's collection nor her thread
    r = client.post("/threads", json={"collection": "test"}, headers=bob)
    assert r.status_code == 404  # a thread over someone else's collection
    assert env.sleuth.catalog.thread_turns(thread) == []


def test_a_thread_answers_only_for_its_own_collection(client: TestClient, env: ApiEnv) -> None:
    thread = _new_thread(client, env)["thread_id"]
    assert client.post("/collections", json={"name": "other"}, headers=env.auth()).status_code in (
        200,
        201,
    )
    r = client.post(
        "/agent/search",
        json={"query": MURDER, "collection": "other", "thread_id": thread},
        headers=env.auth(),
    )
    assert r.status_code == 400 and "belongs to collection 'test'" in r.json()["detail"]
    r = client.post(
        "/agent/search",
        json={"query": MURDER, "collection": "test", "thread_id": "no such id"},
        headers=env.auth(),
    )
    assert r.status_code == 422  # not a thread id at all
    assert client.get("/threads/" + "x" * 65, headers=env.auth()).status_code == 422
    assert client.delete("/threads/a%20b", headers=env.auth()).status_code == 422


def test_the_openapi_document_describes_threads(client: TestClient) -> None:
    spec = client.get("/openapi.json").json()
    assert {"/threads", "/threads/{thread_id}"} <= spec["paths"].keys()
    assert "thread_id" in spec["components"]["schemas"]["AgentSearchRequest"]["properties"]
    assert "ThreadDetail" in spec["components"]["schemas"]
