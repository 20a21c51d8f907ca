"""``sleuth mcp`` as a real subprocess, driven by the official MCP client over stdio and
streamable HTTP, on a collection ingested with the real embedder."""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

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
SLEUTH = str(Path(sys.executable).with_name("sleuth"))
FIRST_CALL_TIMEOUT = timedelta(seconds=180)  # the first call loads the embedding model


def _env(data: Path) -> dict[str, str]:
    env = {**os.environ, "SLEUTH_DATA_DIR": str(data), "SLEUTH_LLM": "heuristic"}
    env.pop("SLEUTH_MCP_SERVERS", None)
    env.pop("SLEUTH_MCP_USER", None)
    return env


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("mcp-server")
    (root / "lighthouse.md").write_text(NOTES)
    data = root / "data"
    result = subprocess.run(
        [SLEUTH, "ingest", str(root / "lighthouse.md"), "-c", "notes"],
        capture_output=True,
        text=True,
        env=_env(data),
        timeout=600,
    )
    assert result.returncode == 0, result.stderr
    return data


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


def _check(out: dict[str, Any]) -> None:
    assert out["tools"] == ["ask", "list_collections", "rag_search", "read_section"]
    assert "Fog signals" in out["first"]["title"]
    assert "ninety seconds" in out["read"]["text"]
    assert [c["name"] for c in out["listed"]["collections"]] == ["notes"]
    ask = out["ask"]
    assert ask["status"] == "completed" and not ask["is_insufficient_context"]
    assert "ninety seconds" in ask["answer"]
    assert out["first"]["source_id"] in {c["source_id"] for c in ask["citations"]}
    is_error, text = out["unknown"]
    assert is_error and "unknown collection 'missing' (collections: notes)" in text


def test_stdio(data_dir: Path) -> None:
    params = StdioServerParameters(
        command=SLEUTH, args=["mcp", "--collection", "notes"], env=_env(data_dir)
    )

    async def run() -> dict[str, Any]:
        async with (
            stdio_client(params) as (read, write),
            ClientSession(read, write) as session,
        ):
            return await _exercise(session)

    _check(asyncio.run(run()))


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture
def http_server(data_dir: Path, tmp_path: Path) -> Iterator[tuple[str, int]]:
    port = _free_port()
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        process = subprocess.Popen(
            [SLEUTH, "mcp", "--transport", "http", "--port", str(port), "-c", "notes"],
            stdout=out,
            stderr=out,
            env=_env(data_dir),
        )
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


def test_streamable_http(http_server: tuple[str, int], data_dir: Path) -> None:
    url, port = http_server

    async def run() -> dict[str, Any]:
        async with (
            streamable_http_client(url) as (read, write, _),
            ClientSession(read, write) as session,
        ):
            return await _exercise(session)

    _check(asyncio.run(run()))

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
