"""The MCP server's tools through the official client, on the SDK's in-memory transport."""

from __future__ import annotations

import asyncio
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from sleuth.app import Sleuth
from sleuth.errors import UserError
from tests.helpers import make_app

pytest.importorskip("mcp")

from mcp import ClientSession
from mcp.server.auth.provider import AccessToken
from mcp.shared.memory import create_connected_server_and_client_session

from sleuth.api.keys import create_user
from sleuth.mcp.server import ApiKeyVerifier, SleuthTools, build_server


def _session(tools: SleuthTools, body: Callable[[ClientSession], Awaitable[Any]]) -> Any:
    server = build_server(tools)

    async def run() -> Any:
        async with create_connected_server_and_client_session(server._mcp_server) as session:
            return await body(session)

    return asyncio.run(run())


async def _call(session: ClientSession, tool: str, **arguments: Any) -> tuple[bool, Any]:
    result = await session.call_tool(tool, arguments)
    if result.isError:
        return False, result.content[0].text  # type: ignore[union-attr]
    return True, result.structuredContent


@pytest.fixture
def app(tmp_path: Path) -> Sleuth:
    app = make_app(tmp_path, collection="laws")
    yield app
    app.close()


def test_tools_answer_search_read_list_and_ask(app: Sleuth) -> None:
    async def body(session: ClientSession) -> dict[str, Any]:
        listed = await session.list_tools()
        return {
            "tools": {t.name: t for t in listed.tools},
            "search": await _call(session, "rag_search", query="punishment for murder", top_k=2),
            "read": await _call(session, "read_section", source_id="BNS_S103"),
            "list": await _call(session, "list_collections"),
            "ask": await _call(session, "ask", question="What is the punishment for murder?"),
        }

    out = _session(SleuthTools(app, collection="laws"), body)
    assert set(out["tools"]) == {"rag_search", "read_section", "list_collections", "ask"}
    assert out["tools"]["rag_search"].annotations.readOnlyHint is True
    assert "question" in out["tools"]["ask"].inputSchema["required"]

    ok, search = out["search"]
    assert ok and search["collection"] == "laws"
    assert search["results"][0]["source_id"] == "BNS_S103" and len(search["results"]) <= 2
    ok, read = out["read"]
    assert ok and "imprisonment for life" in read["text"] and read["source_id"] == "BNS_S103"
    ok, listed = out["list"]
    assert ok and [c["name"] for c in listed["collections"]] == ["laws"]
    ok, answer = out["ask"]
    assert ok and answer["status"] == "completed" and not answer["is_insufficient_context"]
    assert "BNS_S103" in {c["source_id"] for c in answer["citations"]}
    assert "imprisonment for life" in answer["answer"] and answer["task_id"]
    run = app.catalog.get_run(answer["task_id"])
    assert run is not None and run["user_id"] is None  # the local installation: anonymous


def test_bad_requests_are_tool_errors_with_one_clear_line(app: Sleuth) -> None:
    async def body(session: ClientSession) -> list[tuple[bool, Any]]:
        return [
            await _call(session, "ask", question="What is murder?", collection="nope"),
            await _call(session, "rag_search", query="x", collection="bad name!"),
            await _call(session, "read_section", source_id="BNS_S999"),
            await _call(session, "rag_search", query="   "),
            await _call(session, "rag_search", query="murder", top_k=500),
        ]

    results = _session(SleuthTools(app, collection="laws"), body)
    assert all(not ok for ok, _ in results)
    unknown, bad_name, no_section, empty, too_many = (text for _, text in results)
    assert "unknown collection 'nope' (collections: laws)" in unknown
    assert "invalid collection name" in bad_name.lower() or "bad name!" in bad_name
    assert "no section 'BNS_S999'" in no_section
    assert "query is empty" in empty
    assert "top_k" in too_many


def test_a_user_reaches_only_their_collections_and_runs_under_their_id(app: Sleuth) -> None:
    catalog = app.catalog  # "laws" has no owner yet: the local installation's
    alice = catalog.add_user("u_alice0000000000", "alice", "hash-a")
    catalog.add_user("u_bob000000000000", "bob", "hash-b")
    tools_bob = SleuthTools(app, user="bob", collection="laws")

    async def as_bob(session: ClientSession) -> list[tuple[bool, Any]]:
        return [
            await _call(session, "list_collections"),
            await _call(session, "rag_search", query="murder"),
            await _call(session, "ask", question="What is murder?"),
        ]

    listed, search, ask = _session(tools_bob, as_bob)
    assert listed == (True, {"default": "laws", "collections": []})
    assert not search[0] and "unknown collection 'laws' (collections: none)" in search[1]
    assert not ask[0]

    catalog.set_collection_owner("laws", alice.id)
    tools_alice = SleuthTools(app, user="alice", collection="laws")

    async def as_alice(session: ClientSession) -> list[tuple[bool, Any]]:
        return [
            await _call(session, "list_collections"),
            await _call(session, "ask", question="What is the punishment for murder?"),
        ]

    listed, ask = _session(tools_alice, as_alice)
    assert [c["name"] for c in listed[1]["collections"]] == ["laws"]
    assert ask[0] and ask[1]["status"] == "completed"
    run = catalog.get_run(ask[1]["task_id"])
    assert run is not None and run["user_id"] == alice.id

    catalog.set_user_disabled("alice")

    async def revoked(session: ClientSession) -> tuple[bool, Any]:
        return await _call(session, "list_collections")

    ok, text = _session(tools_alice, revoked)
    assert not ok and "user 'alice' has been revoked" in text
    with pytest.raises(UserError, match="no user named 'carol'"):
        SleuthTools(app, user="carol")


def test_over_stdio_only_the_protocol_reaches_stdout() -> None:
    code = (
        "import os, sys\n"
        "from sleuth.mcp.server import _guard_stdout\n"
        "_guard_stdout()\n"
        "print('stray print')\n"
        "os.write(1, b'native write\\n')\n"
        "sys.stdout.buffer.write(b'protocol')\n"
        "sys.stdout.buffer.flush()\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, timeout=60, check=True
    )
    assert result.stdout == b"protocol"
    assert b"stray print" in result.stderr and b"native write" in result.stderr


def _as_key_holder(tools: SleuthTools, token: AccessToken | None, body: Any) -> Any:
    """Run an in-memory session as the SDK's auth middleware would after checking ``token``
    (the server's task inherits the context variable it sets)."""
    from mcp.server.auth.middleware.auth_context import auth_context_var
    from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser

    reset = auth_context_var.set(AuthenticatedUser(token) if token is not None else None)
    try:
        return _session(tools, body)
    finally:
        auth_context_var.reset(reset)


def test_api_key_verifier_accepts_active_keys_only(app: Sleuth) -> None:
    alice, key = create_user(app.catalog, "alice")
    verifier = ApiKeyVerifier(app.catalog)
    token = asyncio.run(verifier.verify_token(key))
    assert token is not None and token.client_id == alice.id and token.scopes == []
    assert verifier.check(key[:-4] + "AAAA") is None  # unknown key
    assert verifier.check("not-a-key") is None
    app.catalog.set_user_disabled("alice")
    assert verifier.check(key) is None  # revoked: the SDK answers 401


def test_with_keys_each_request_runs_as_its_keys_user(app: Sleuth) -> None:
    alice, key_a = create_user(app.catalog, "alice")
    _, key_b = create_user(app.catalog, "bob")
    app.catalog.set_collection_owner("laws", alice.id)
    tools = SleuthTools(app, collection="laws", require_key=True)
    verifier = ApiKeyVerifier(app.catalog)

    async def body(session: ClientSession) -> list[tuple[bool, Any]]:
        return [
            await _call(session, "list_collections"),
            await _call(session, "rag_search", query="murder", top_k=1),
        ]

    def as_holder(key: str | None) -> list[tuple[bool, Any]]:
        return _as_key_holder(tools, verifier.check(key) if key else None, body)

    listed, search = as_holder(key_a)
    assert [c["name"] for c in listed[1]["collections"]] == ["laws"]
    assert search[0] and search[1]["results"][0]["source_id"] == "BNS_S103"
    listed, search = as_holder(key_b)
    assert listed == (True, {"default": "laws", "collections": []})
    assert not search[0] and "unknown collection 'laws' (collections: none)" in search[1]
    (ok, text), _ = as_holder(None)  # never the local installation's view
    assert not ok and "authentication required" in text
    with pytest.raises(UserError, match="cannot be combined with API keys"):
        SleuthTools(app, user="alice", require_key=True)


def test_http_without_a_valid_key_is_refused_before_any_tool(app: Sleuth) -> None:
    from starlette.testclient import TestClient

    _, key = create_user(app.catalog, "alice")
    _, revoked = create_user(app.catalog, "carol")
    app.catalog.set_user_disabled("carol")
    server = build_server(SleuthTools(app, collection="laws", require_key=True))
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "test", "version": "0"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    with TestClient(server.streamable_http_app(), base_url="http://127.0.0.1:8765") as client:

        def post(token: str | None) -> Any:
            auth = {"Authorization": f"Bearer {token}"} if token else {}
            return client.post("/mcp", json=init, headers={**accept, **auth})

        refused = [post(None), post("sleuth_0123456789abcdef." + "x" * 43), post(revoked)]
        accepted = post(key)
    assert [r.status_code for r in refused] == [401, 401, 401]
    assert all(r.json()["error"] == "invalid_token" for r in refused)
    assert refused[0].headers["www-authenticate"].startswith("Bearer")
    assert accepted.status_code == 200 and "mcp-session-id" in accepted.headers


def test_ask_in_a_thread_reads_the_follow_up_in_its_context(app: Sleuth) -> None:
    alice = app.catalog.add_user("u_alice0000000000", "alice", "hash-a")
    app.catalog.add_user("u_bob000000000000", "bob", "hash-b")
    app.catalog.set_collection_owner("laws", alice.id)

    async def dialogue(session: ClientSession) -> list[tuple[bool, Any]]:
        ok, first = await _call(
            session, "ask", question="What is the punishment for murder?", new_thread=True
        )
        assert ok and first["thread_id"]
        follow = await _call(
            session,
            "ask",
            question="And if a group of five persons commits it?",
            thread_id=first["thread_id"],
        )
        return [(ok, first), follow]

    (_, first), (ok, follow) = _session(SleuthTools(app, user="alice", collection="laws"), dialogue)
    assert ok and follow["thread_id"] == first["thread_id"]
    assert follow["rewritten_question"].startswith("And if a group of five persons commits it")
    assert "What is the punishment for murder" in follow["rewritten_question"]
    turns = app.catalog.thread_turns(first["thread_id"])
    assert [t.task_id for t in turns] == [first["task_id"], follow["task_id"]]

    async def both(session: ClientSession) -> tuple[bool, Any]:
        return await _call(
            session, "ask", question="And then?", thread_id=first["thread_id"], new_thread=True
        )

    ok, text = _session(SleuthTools(app, user="alice", collection="laws"), both)
    assert not ok and "thread_id and new_thread exclude each other" in text

    async def as_bob(session: ClientSession) -> tuple[bool, Any]:
        return await _call(session, "ask", question="And then?", thread_id=first["thread_id"])

    ok, text = _session(SleuthTools(app, user="bob", collection="laws"), as_bob)
    assert not ok and f"thread '{first['thread_id']}' not found" in text
    assert len(app.catalog.thread_turns(first["thread_id"])) == 2
