"""``sleuth mcp`` as a real subprocess, driven by the official MCP client over stdio and
streamable HTTP, on collections ingested with the real embedder: over HTTP one process serves
several users, each by their API key."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from sleuth.api.keys import create_user
from sleuth.config import Settings
from sleuth.store.catalog import Catalog

pytestmark = pytest.mark.integration
pytest.importorskip("mcp")

from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.client.streamable_http import streamable_http_client  # noqa: E402

NOTES = """# Lighthouse keeping

## Lamp maintenance

The lamp of the Skerry lighthouse is cleaned every Tuesday with vinegar and a soft cloth.
The keeper records each cleaning in the red logbook.

## Fog signals

During fog the keeper sounds the horn twice every ninety seconds until visibility returns.
See the section Lamp maintenance for the logbook.
"""
SHIPS = """# Ferry timetable

## Winter crossings

The ferry Morning Gull crosses to the island at seven and at fifteen o'clock in winter.
"""
SLEUTH = str(Path(sys.executable).with_name("sleuth"))
FIRST_CALL_TIMEOUT = timedelta(seconds=180)  # the first call loads the embedding model


def _env(data: Path) -> dict[str, str]:
    env = {**os.environ, "SLEUTH_DATA_DIR": str(data), "SLEUTH_LLM": "heuristic"}
    env.pop("SLEUTH_MCP_SERVERS", None)
    env.pop("SLEUTH_MCP_USER", None)
    return env


def _catalog(data: Path) -> Catalog:
    return Catalog(Settings(data_dir=data).catalog_url)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """ "notes" and "ships"; over HTTP alice owns "notes", bob "ships" (see ``keys``)."""
    root = tmp_path_factory.mktemp("mcp-server")
    data = root / "data"
    for name, text in (("notes", NOTES), ("ships", SHIPS)):
        (root / f"{name}.md").write_text(text)
        result = subprocess.run(
            [SLEUTH, "ingest", str(root / f"{name}.md"), "-c", name],
            capture_output=True,
            text=True,
            env=_env(data),
            timeout=600,
        )
        assert result.returncode == 0, result.stderr
    return data


@pytest.fixture(scope="module")
def keys(data_dir: Path) -> dict[str, str]:
    """API keys of alice (owns "notes"), bob (owns "ships") and carol (owns nothing)."""
    catalog = _catalog(data_dir)
    try:
        out = {name: create_user(catalog, name)[1] for name in ("alice", "bob", "carol")}
        for name, collection in (("alice", "notes"), ("bob", "ships")):
            user = catalog.get_user(name)
            assert user is not None
            catalog.set_collection_owner(collection, user.id)
    finally:
        catalog.close()
    return out


async def _exercise(session: ClientSession) -> dict[str, Any]:
    """Call every tool once, as another agent would."""
    await session.initialize()
    tools = sorted(t.name for t in (await session.list_tools()).tools)
    search = await session.call_tool(
        "rag_search",
        {"query": "fog horn", "top_k": 2},
        read_timeout_seconds=FIRST_CALL_TIMEOUT,
    )
    assert not search.isError, search.content
    first = search.structuredContent["results"][0]  # type: ignore[index]
    read = await session.call_tool("read_section", {"source_id": first["source_id"]})
    listed = await session.call_tool("list_collections", {})
    ask = await session.call_tool(
        "ask",
        {"question": "How often does the keeper sound the horn during fog?"},
        read_timeout_seconds=FIRST_CALL_TIMEOUT,
    )
    unknown = await session.call_tool("ask", {"question": "Why?", "collection": "missing"})
    return {
        "tools": tools,
        "first": first,
        "read": read.structuredContent,
        "listed": listed.structuredContent,
        "ask": ask.structuredContent,
        "unknown": (unknown.isError, unknown.content[0].text),  # type: ignore[union-attr]
    }


def _check(out: dict[str, Any], collections: tuple[str, ...] = ("notes",)) -> None:
    assert out["tools"] == ["ask", "list_collections", "rag_search", "read_section"]
    assert "Fog signals" in out["first"]["title"]
    assert "ninety seconds" in out["read"]["text"]
    assert [c["name"] for c in out["listed"]["collections"]] == list(collections)
    ask = out["ask"]
    assert ask["status"] == "completed" and not ask["is_insufficient_context"]
    assert "ninety seconds" in ask["answer"]
    assert out["first"]["source_id"] in {c["source_id"] for c in ask["citations"]}
    is_error, text = out["unknown"]
    known = ", ".join(collections)
    assert is_error and f"unknown collection 'missing' (collections: {known})" in text


def test_stdio(data_dir: Path, keys: dict[str, str]) -> None:
    params = StdioServerParameters(
        command=SLEUTH, args=["mcp", "--collection", "notes"], env=_env(data_dir)
    )

    async def run() -> dict[str, Any]:
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write) as session,
        ):
            return await _exercise(session)

    _check(asyncio.run(run()), ("notes", "ships"))  # the local installation: every collection


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def _serving(data: Path, log: Path, *args: str) -> Iterator[tuple[str, int]]:
    """``sleuth mcp --transport http *args`` on a free port, until the block ends."""
    port = _free_port()
    command = [SLEUTH, "mcp", "--transport", "http", "--port", str(port), *args]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=out, env=_env(data))
    try:
        deadline = time.monotonic() + 120
        while True:
            assert process.poll() is None, log.read_text()
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                assert time.monotonic() < deadline, log.read_text()
                time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/mcp", port
    finally:
        process.terminate()
        try:
            process.wait(15)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(15)
    assert "streamable HTTP on http://127.0.0.1" in log.read_text()


@pytest.fixture(scope="module")
def http_server(
    data_dir: Path, keys: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, int]]:
    """One server for every user: each request runs as the user of its API key."""
    log = tmp_path_factory.mktemp("mcp-http") / "server.log"
    with _serving(data_dir, log, "-c", "notes") as served:
        yield served
    assert "as the user of each request's API key" in log.read_text()


def _client(key: str | None) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    return httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30, read=300))


async def _as_user(url: str, key: str, body: Any) -> Any:
    async with (
        _client(key) as http,
        streamable_http_client(url, http_client=http) as (read, write, session_id),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await body(session, session_id)


def test_streamable_http(
    http_server: tuple[str, int], data_dir: Path, keys: dict[str, str]
) -> None:
    url, port = http_server

    async def body(session: ClientSession, _: Any) -> dict[str, Any]:
        return await _exercise(session)

    _check(asyncio.run(_as_user(url, keys["alice"], body)))  # alice: "notes" only

    busy = subprocess.run(
        [SLEUTH, "mcp", "--transport", "http", "--port", str(port)],
        capture_output=True,
        text=True,
        env=_env(data_dir),
        timeout=120,
    )
    assert busy.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port}" in busy.stderr
    assert len(busy.stderr.strip().splitlines()) == 1


async def _search(session: ClientSession, query: str, collection: str) -> tuple[bool, Any]:
    result = await session.call_tool(
        "rag_search",
        {"query": query, "collection": collection, "top_k": 1},
        read_timeout_seconds=FIRST_CALL_TIMEOUT,
    )
    if result.isError:
        return False, result.content[0].text  # type: ignore[union-attr]
    return True, result.structuredContent["results"][0]["title"]  # type: ignore[index]


def test_http_users_reach_only_their_own_collections(
    http_server: tuple[str, int], keys: dict[str, str]
) -> None:
    url, _ = http_server

    async def body(session: ClientSession, _: Any) -> dict[str, Any]:
        listed = await session.call_tool("list_collections", {})
        return {
            "listed": [c["name"] for c in listed.structuredContent["collections"]],  # type: ignore[index]
            "notes": await _search(session, "fog horn", "notes"),
            "ships": await _search(session, "ferry winter", "ships"),
        }

    async def both() -> tuple[dict[str, Any], dict[str, Any]]:  # at once, on one server
        return tuple(  # type: ignore[return-value]
            await asyncio.gather(
                _as_user(url, keys["alice"], body), _as_user(url, keys["bob"], body)
            )
        )

    alice, bob = asyncio.run(both())
    assert alice["listed"] == ["notes"] and bob["listed"] == ["ships"]
    assert alice["notes"][0] and "Fog signals" in alice["notes"][1]
    assert bob["ships"][0] and "Winter crossings" in bob["ships"][1]
    assert alice["ships"][0] is False
    assert "unknown collection 'ships' (collections: notes)" in alice["ships"][1]
    assert bob["notes"][0] is False
    assert "unknown collection 'notes' (collections: ships)" in bob["notes"][1]


INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "test", "version": "0"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


def test_http_refuses_no_key_a_wrong_key_and_a_revoked_key(
    http_server: tuple[str, int], data_dir: Path, keys: dict[str, str]
) -> None:
    url, _ = http_server
    wrong = keys["carol"][:-4] + ("AAAA" if not keys["carol"].endswith("AAAA") else "BBBB")

    async def carol(session: ClientSession, session_id: Any) -> tuple[Any, str | None]:
        listed = await session.call_tool("list_collections", {})
        return listed.structuredContent, session_id()

    listed, session_id = asyncio.run(_as_user(url, keys["carol"], carol))
    assert listed["collections"] == []  # type: ignore[index]  # carol owns nothing
    catalog = _catalog(data_dir)
    try:
        catalog.set_user_disabled("carol")
    finally:
        catalog.close()
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "x"}}
    with httpx.Client(timeout=30) as http:

        def post(key: str | None, message: dict[str, Any], **headers: str) -> httpx.Response:
            auth = {"Authorization": f"Bearer {key}"} if key else {}
            return http.post(url, json=message, headers={**ACCEPT, **auth, **headers})

        refused = [
            post(None, INITIALIZE),
            post(wrong, INITIALIZE),
            post(keys["carol"], INITIALIZE),  # revoked
            post(keys["carol"], call, **{"mcp-session-id": session_id or ""}),
        ]
    assert [r.status_code for r in refused] == [401] * 4
    assert all(r.json()["error"] == "invalid_token" for r in refused)
    assert all(r.headers["www-authenticate"].startswith("Bearer ") for r in refused)


def test_http_no_auth_is_explicit_and_user_needs_it(
    data_dir: Path, keys: dict[str, str], tmp_path: Path
) -> None:
    mixed = subprocess.run(
        [SLEUTH, "mcp", "--transport", "http", "--user", "alice"],
        capture_output=True,
        text=True,
        env=_env(data_dir),
        timeout=120,
    )
    assert mixed.returncode == 2 and "--user applies to stdio or --no-auth" in mixed.stderr

    async def listed(url: str) -> list[str]:
        async with (
            streamable_http_client(url) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            result = await session.call_tool("list_collections", {})
            return [c["name"] for c in result.structuredContent["collections"]]  # type: ignore[index]

    with _serving(data_dir, tmp_path / "server.log", "--no-auth", "--user", "bob") as (url, _):
        assert asyncio.run(listed(url)) == ["ships"]  # no key: every request runs as bob
    assert "as user 'bob', without authentication" in (tmp_path / "server.log").read_text()
