"""The agent's MCP client against real FastMCP servers, over stdio and streamable HTTP.

The servers (``mcp_fixture_server.py``) run as subprocesses: a healthy one (``add``,
``lookup``, ``secret``), one whose tool hangs, one that exits in the middle of a call; plus
servers that never come up. The knowledge base uses the hashing test embedder (no model).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, ToolMessage

from sleuth.agents.llm_reasoner import LLMReasoner
from sleuth.agents.state import RunStatus
from sleuth.llm.testing import ScriptedChatModel, tool_call
from sleuth.service import AgentService
from sleuth.tools.base import RunContext
from tests.helpers import make_app

pytestmark = pytest.mark.integration
pytest.importorskip("mcp")

from sleuth.mcp.client import MCPToolbox  # noqa: E402
from sleuth.mcp.config import MCPServerSpec  # noqa: E402

FIXTURE = str(Path(__file__).with_name("mcp_fixture_server.py"))
HANG_TIMEOUT_S = 1.5
SILENT = "import time; time.sleep(60)"  # a stdio server that never answers


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _stdio(name: str, role: str, **options: Any) -> dict[str, Any]:
    return {"name": name, "command": sys.executable, "args": [FIXTURE, role], **options}


@contextmanager
def http_server(role: str, log_dir: Path) -> Iterator[str]:
    """Start the fixture server ``role`` over streamable HTTP; yield its endpoint URL."""
    port = _free_port()
    log = (log_dir / f"http-{role}-{port}.log").open("wb")
    process = subprocess.Popen(
        [sys.executable, FIXTURE, role, "--http", str(port)], stdout=log, stderr=log
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            if process.poll() is not None:
                pytest.fail(f"{role} server exited: {(log_dir / log.name).read_text()[-2000:]}")
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    pytest.fail(f"{role} server did not listen on {port} within 30 s")
                time.sleep(0.1)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        process.kill()
        process.wait(10)
        log.close()


@contextmanager
def servers(transport: str, log_dir: Path, **hang: Any) -> Iterator[list[dict[str, Any]]]:
    """The healthy (calc), hanging (slow) and dying (flaky) servers over ``transport``."""
    options = {
        "calc": {"allow": ["add", "lookup"]},
        "slow": {"timeout_s": HANG_TIMEOUT_S, **hang},
        "flaky": {"timeout_s": 20},
    }
    roles = {"calc": "healthy", "slow": "hang", "flaky": "die"}
    if transport == "stdio":
        yield [_stdio(name, roles[name], **options[name]) for name in roles]
        return
    with (
        http_server("healthy", log_dir) as calc,
        http_server("hang", log_dir) as slow,
        http_server("die", log_dir) as flaky,
    ):
        urls = {"calc": calc, "slow": slow, "flaky": flaky}
        yield [{"name": n, "url": urls[n], **options[n]} for n in roles]


def test_discovery_namespaces_filters_and_adapts_and_skips_servers_that_are_down(
    tmp_path: Path,
) -> None:
    closed_port = _free_port()  # nothing listens there
    with http_server("healthy", tmp_path) as url:
        specs = [
            MCPServerSpec.model_validate(s)
            for s in [
                _stdio("calc", "healthy", allow=["add", "lookup"]),
                {"name": "web", "url": url},
                {"name": "gone", "command": sys.executable, "args": ["-c", "raise SystemExit(2)"]},
                {"name": "mute", "command": sys.executable, "args": ["-c", SILENT],
                 "connect_timeout_s": 2},
                {"name": "closed", "url": f"http://127.0.0.1:{closed_port}/mcp"},
            ]
        ]  # fmt: skip
        toolbox = MCPToolbox(specs, log_dir=tmp_path / "logs")
        try:
            started = time.monotonic()
            tools = {t.name: t for t in toolbox.tools()}
            assert time.monotonic() - started < 10  # servers are tried concurrently
            assert set(tools) == {"calc__add", "calc__lookup", "web__add", "web__lookup",
                                  "web__secret"}  # fmt: skip
            status = toolbox.status()
            assert {n: s["status"] for n, s in status["servers"].items()} == {
                "calc": "ok", "web": "ok", "gone": "unavailable", "mute": "unavailable",
                "closed": "unavailable",
            }  # fmt: skip
            warnings = "\n".join(status["warnings"])
            assert "MCP server 'gone' unavailable at discovery" in warnings
            assert "mcp-gone.log" in warnings  # where its stderr went
            assert "'mute' unavailable at discovery: could not connect: no answer within 2 s" in (
                warnings
            )
            assert "'closed' unavailable at discovery: could not connect: ConnectError" in warnings

            lookup = tools["calc__lookup"].spec()["function"]["parameters"]
            assert "$defs" not in json.dumps(lookup) and "anyOf" not in json.dumps(lookup)
            assert lookup["required"] == ["key"]
            assert lookup["properties"]["options"]["properties"]["uppercase"]["type"] == "boolean"

            ctx = RunContext(collection="c")
            result = tools["calc__lookup"].invoke({"key": "japan"}, ctx)  # options → null
            assert result.ok and result.payload["result"] == {"result": "Tokyo"}
            result = tools["web__lookup"].invoke(
                {"key": "kenya", "options": {"uppercase": True, "prefix": "> "}}, ctx
            )
            assert result.ok and result.payload["result"] == {"result": "> NAIROBI"}
            assert tools["web__add"].invoke({"a": 2, "b": 40}, ctx).status == "web__add: 42"
        finally:
            toolbox.close()


@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_a_react_run_uses_the_healthy_tool_and_survives_a_hang_and_a_crash(
    tmp_path: Path, transport: str
) -> None:
    def answer(messages: list[BaseMessage]) -> Any:
        results = {m.name: m.content for m in messages if isinstance(m, ToolMessage)}
        capital = json.loads(results["calc__lookup"].split("\n", 1)[1])["result"]["result"]
        return tool_call(
            "final_answer",
            {
                "answer_text": "Murder is punished with death or imprisonment for life "
                f"[BNS_S103]. The capital of France is {capital}.",
                "citations": ["BNS_S103"],
            },
        )

    model = ScriptedChatModel(
        [
            tool_call("rag_search", {"query": "punishment for murder"}),
            tool_call("calc__lookup", {"key": "France"}),
            tool_call("slow__wait", {"seconds": 1}),
            tool_call("flaky__crash", {"message": "now"}),
            tool_call("calc__add", {"a": 2, "b": 3}),
            answer,
        ]
    )
    app = make_app(tmp_path / "kb")
    with servers(transport, tmp_path) as specs:
        settings = app.settings.model_copy(update={"mcp_servers": json.dumps(specs)})
        service = AgentService(settings, app.kb, reasoner=LLMReasoner(model), memory=app.memory)
        try:
            started = time.monotonic()
            response = service.execute_agentic_search(
                "What is the punishment for murder, and what is the capital of France?", "test"
            )
            elapsed = time.monotonic() - started
        finally:
            service.close()
    app.close()

    offered = model.call_tool_names[0]
    assert {"calc__add", "calc__lookup", "slow__wait", "flaky__crash"} <= set(offered)
    assert "calc__secret" not in offered  # not on the allow-list
    calls = {c["tool"]: c for c in response.tool_calls}
    assert calls["calc__lookup"]["ok"] and calls["calc__lookup"]["status"] == (
        "calc__lookup: Paris"
    )
    assert calls["slow__wait"]["status"].startswith(
        f"Error: tool unavailable: slow/wait timed out after {HANG_TIMEOUT_S:g} s"
    )
    assert calls["flaky__crash"]["status"].startswith(
        "Error: tool unavailable: flaky/crash lost its connection during the call"
    )
    assert calls["calc__add"]["ok"]  # the healthy server still answers after the failures
    observations = [s.content for s in response.reasoning_steps if s.step_type == "observe"]
    assert sum("tool unavailable" in o for o in observations) == 2
    assert response.status == RunStatus.COMPLETED
    assert "The capital of France is Paris." in response.answer.answer_text
    assert [c.source_id for c in response.answer.citations] == ["BNS_S103"]
    mcp = response.trace["mcp"]
    assert {n: s["status"] for n, s in mcp["servers"].items()} == {
        "calc": "ok",
        "slow": "down",
        "flaky": "down",
    }
    assert mcp["warnings"] == []
    assert elapsed < HANG_TIMEOUT_S + 15  # the crash is noticed at once, not at a timeout


def test_a_crashed_server_is_started_again_on_the_next_call(tmp_path: Path) -> None:
    specs = [
        MCPServerSpec.model_validate(_stdio("flaky", "die", retry_after_s=0)),
        MCPServerSpec.model_validate(_stdio("slow", "hang", timeout_s=1, retry_after_s=60)),
    ]
    toolbox = MCPToolbox(specs)
    try:
        tools = {t.name: t for t in toolbox.tools()}
        ctx = RunContext(collection="c")
        for _ in range(2):  # a new process each time: the crash is seen again, mid-call
            result = tools["flaky__crash"].invoke({}, ctx)
            assert "lost its connection during the call" in result.status
        assert "timed out after 1 s" in tools["slow__wait"].invoke({}, ctx).status
        started = time.monotonic()
        again = tools["slow__wait"].invoke({}, ctx)  # down for 60 s: fails at once
        assert time.monotonic() - started < 0.5
        assert "slow/wait is down (timed out after 1 s); it is retried in" in again.status
        # a new run is not offered the tools of a server that is down
        assert [t.name for t in toolbox.tools()] == ["flaky__crash"]
        assert toolbox.status()["servers"]["slow"]["status"] == "down"
    finally:
        toolbox.close()


def test_a_hung_mcp_tool_is_given_only_the_runs_time_left(tmp_path: Path) -> None:
    """A server's own timeout_s (20 s) is longer than the run's deadline (3 s): the call is
    stopped at the deadline, the run ends ``timeout`` in time, and the server is not marked
    down for it (issue 28: 21.7 s against a 3 s deadline)."""
    model = ScriptedChatModel(
        [
            tool_call("rag_search", {"query": "punishment for murder"}),
            tool_call("slow__wait", {"seconds": 1}),
            tool_call(
                "final_answer", {"answer_text": "Death [BNS_S103].", "citations": ["BNS_S103"]}
            ),
        ]
    )
    app = make_app(tmp_path / "kb")
    specs = [_stdio("slow", "hang", timeout_s=20)]
    settings = app.settings.model_copy(update={"mcp_servers": json.dumps(specs)})
    service = AgentService(settings, app.kb, reasoner=LLMReasoner(model), memory=app.memory)
    try:
        started = time.monotonic()
        response = service.execute_agentic_search(
            "What is the punishment for murder?", "test", timeout_s=3
        )
        elapsed = time.monotonic() - started
        status = service.mcp.status() if service.mcp is not None else {}
    finally:
        service.close()
    app.close()
    assert response.status == RunStatus.TIMEOUT
    assert elapsed < 3 + 2
    waited = next(c for c in response.tool_calls if c["tool"] == "slow__wait")
    assert "run's deadline" in str(waited.get("status"))
    assert status["servers"]["slow"]["status"] == "ok"
    assert "BNS_S103" in [c.source_id for c in response.answer.citations]
