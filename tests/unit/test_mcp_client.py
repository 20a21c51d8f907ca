"""MCP tools on the agent's side, without servers: results, argument checks, run wiring.

Real servers (stdio and streamable HTTP; healthy, hanging, dying) are in
``tests/integration/test_mcp_client.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from langchain_core.messages import BaseMessage, ToolMessage

from sleuth.agents.llm_reasoner import LLMReasoner
from sleuth.agents.state import RunStatus
from sleuth.errors import ToolError
from sleuth.llm.testing import ScriptedChatModel, tool_call
from sleuth.service import AgentService
from sleuth.tools.base import RunContext, ToolResult
from tests.helpers import make_app

pytest.importorskip("mcp")

from mcp.types import CallToolResult, ImageContent, TextContent

from sleuth.mcp.client import MCPTool, _Arguments, _not_called_directly, to_tool_result
from sleuth.mcp.schema import adapt_schema

LOOKUP_SCHEMA = {
    "type": "object",
    "properties": {
        "key": {"type": "string"},
        "options": {"anyOf": [{"$ref": "#/$defs/Opts"}, {"type": "null"}]},
    },
    "required": ["key", "options"],
    "$defs": {"Opts": {"type": "object", "properties": {"upper": {"type": "boolean"}}}},
}


class StubToolbox:
    """Stands in for MCPToolbox: fixed tools, canned results, calls recorded."""

    def __init__(self, results: dict[str, ToolResult]) -> None:
        self.results = results
        self.calls: list[tuple[str, str, dict[str, Any]]] = []
        self.listed = 0
        self.closed = False

    def make_tool(self, server: str, tool: str, schema: dict[str, Any]) -> MCPTool:
        return MCPTool(
            name=f"{server}__{tool}",
            description=f"{tool} (tool '{tool}' of the MCP server '{server}')",
            args_schema=_Arguments,
            func=_not_called_directly,
            server=server,
            remote_name=tool,
            input_schema=schema,
            adapted=adapt_schema(schema),
            toolbox=self,  # type: ignore[arg-type]
        )

    def call(self, server: str, tool: str, arguments: dict[str, Any]) -> ToolResult:
        self.calls.append((server, tool, arguments))
        return self.results[f"{server}/{tool}"]

    def tools(self) -> list[MCPTool]:
        self.listed += 1
        return [
            self.make_tool("calc", "add", {"type": "object", "properties": {"a": {}, "b": {}}}),
            self.make_tool("slow", "wait", {"type": "object", "properties": {}}),
        ]

    def status(self) -> dict[str, Any]:
        return {"servers": {"calc": {"status": "ok"}}, "warnings": ["MCP server 'x' ..."]}

    def close(self) -> None:
        self.closed = True


def test_call_results_become_tool_results() -> None:
    text = CallToolResult(content=[TextContent(type="text", text="Paris\nFrance")])
    out = to_tool_result("geo__capital", "geo", "capital", text)
    assert out.ok and out.status == "geo__capital: Paris France"
    assert out.payload == {"server": "geo", "tool": "capital", "content": "Paris\nFrance"}

    structured = CallToolResult(
        content=[TextContent(type="text", text='{"result": 5}')], structuredContent={"result": 5}
    )
    out = to_tool_result("calc__add", "calc", "add", structured)
    assert out.ok and out.payload["result"] == {"result": 5}

    failed = CallToolResult(content=[TextContent(type="text", text="boom")], isError=True)
    out = to_tool_result("calc__add", "calc", "add", failed)
    assert not out.ok and out.status == "Error: calc/add failed: boom"

    image = CallToolResult(content=[ImageContent(type="image", data="AAAA", mimeType="image/png")])
    out = to_tool_result("cam__shot", "cam", "shot", image)
    assert "AAAA" not in out.observation() and "image/png" in out.status


def test_arguments_are_checked_against_the_servers_schema() -> None:
    box = StubToolbox({"geo/lookup": ToolResult(status="geo__lookup: Paris")})
    tool = box.make_tool("geo", "lookup", LOOKUP_SCHEMA)
    spec = tool.spec()["function"]
    assert spec["name"] == "geo__lookup"
    assert spec["parameters"]["required"] == ["key"]  # options is nullable: not required
    assert "$defs" not in spec["parameters"]

    ctx = RunContext(collection="c")
    assert tool.invoke({"key": "france"}, ctx).status == "geo__lookup: Paris"
    assert box.calls[-1] == ("geo", "lookup", {"key": "france", "options": None})
    with pytest.raises(ToolError) as info:
        tool.invoke({"key": 3, "options": {"upper": "yes"}}, ctx)
    message = str(info.value)
    assert message.startswith("invalid arguments for geo__lookup: ")
    assert "key: 3 is not of type 'string'" in message
    assert "options" in message and "\n" not in message
    assert len(box.calls) == 1


def test_a_scripted_model_calls_mcp_tools_next_to_the_knowledge_base(tmp_path: Path) -> None:
    box = StubToolbox(
        {
            "calc/add": ToolResult(status="calc__add: 5", payload={"result": {"result": 5}}),
            "slow/wait": ToolResult(
                ok=False, status="Error: tool unavailable: slow/wait timed out after 1 s"
            ),
        }
    )

    def answer(messages: list[BaseMessage]) -> Any:
        tool_messages = [m for m in messages if isinstance(m, ToolMessage)]
        total = next(m.content for m in tool_messages if m.name == "calc__add").split()[1]
        return tool_call(
            "final_answer",
            {
                "answer_text": "Murder is punished with death or imprisonment for life "
                f"[BNS_S103]. The sum asked for is {total}.",
                "citations": ["BNS_S103"],
            },
        )

    model = ScriptedChatModel(
        [
            tool_call("rag_search", {"query": "punishment for murder"}),
            tool_call("calc__add", {"a": 2, "b": 3}),
            tool_call("slow__wait", {}),
            answer,
        ]
    )
    app = make_app(tmp_path)
    service = AgentService(
        app.settings,
        app.kb,
        reasoner=LLMReasoner(model),
        memory=app.memory,
        mcp=box,  # type: ignore[arg-type]
    )
    response = service.execute_agentic_search("What is the punishment for murder? And 2+3?", "test")

    assert "calc__add" in model.call_tool_names[0] and "slow__wait" in model.call_tool_names[0]
    assert box.calls == [("calc", "add", {"a": 2, "b": 3}), ("slow", "wait", {})]
    observations = [s.content for s in response.reasoning_steps if s.step_type == "observe"]
    assert any("tool unavailable: slow/wait" in o for o in observations)
    assert response.status == RunStatus.COMPLETED
    assert "The sum asked for is 5." in response.answer.answer_text
    # the answer rests on an MCP tool's observation: it keeps the loop's own wording (no
    # second writing from the knowledge-base sections, which would not see the sum)
    prompts = [str(call[-1].content) for call in model.calls]
    assert not any(p.startswith("Evidence:") for p in prompts)
    assert response.trace["mcp"] == box.status()
    service.close()
    assert box.closed
    app.close()


@pytest.mark.parametrize("mode", ["react", "guided"])
def test_no_server_is_contacted_for_the_heuristic_reasoner(tmp_path: Path, mode: str) -> None:
    box = StubToolbox({})
    app = make_app(tmp_path)
    service = AgentService(app.settings, app.kb, memory=app.memory, mcp=box)  # type: ignore[arg-type]
    response = service.execute_agentic_search("What is murder?", "test", mode=mode)  # type: ignore[arg-type]
    assert response.answer.citations
    assert box.listed == 0 and "mcp" not in response.trace
    service.close()
    app.close()
