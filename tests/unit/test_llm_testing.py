"""Unit tests of the shipped test doubles in sleuth.llm.testing."""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, SystemMessage
from langchain_core.tools import tool

from sleuth.llm.testing import ScriptedChatModel, ScriptExhaustedError, final, tool_call


@tool
def search(query: str, k: int = 5) -> str:
    """Search the collection."""
    return query


@tool
def read(doc_id: str) -> str:
    """Read a document."""
    return doc_id


def test_responses_come_in_order_and_strings_become_messages() -> None:
    model = ScriptedChatModel(["first", final("second"), AIMessage(content="third")])
    assert [model.invoke("q").content for _ in range(3)] == ["first", "second", "third"]
    assert model.remaining == 0


def test_calls_are_recorded() -> None:
    model = ScriptedChatModel(["a", "b"])
    model.invoke("hello")
    model.invoke([SystemMessage("sys"), HumanMessage("again")])
    assert len(model.calls) == 2
    assert [m.content for m in model.calls[0]] == ["hello"]
    assert [type(m) for m in model.calls[1]] == [SystemMessage, HumanMessage]
    assert model.calls[1][1].content == "again"


def test_callable_response_sees_messages() -> None:
    def echo(messages: list[BaseMessage]) -> str:
        return f"got {len(messages)}: {messages[-1].content}"

    model = ScriptedChatModel([echo, lambda msgs: final("done")])
    assert model.invoke([HumanMessage("x"), HumanMessage("y")]).content == "got 2: y"
    assert model.invoke("z").content == "done"


def test_callable_returning_wrong_type_fails_clearly() -> None:
    model = ScriptedChatModel([lambda msgs: 42])
    with pytest.raises(TypeError, match="must be an AIMessage or str"):
        model.invoke("x")


def test_exhaustion_raises_clear_error() -> None:
    model = ScriptedChatModel(["only"])
    model.invoke("1")
    with pytest.raises(ScriptExhaustedError, match=r"1 response\(s\) and this is call 2"):
        model.invoke("2")
    # the failed call was still recorded, so the test can see what was asked
    assert len(model.calls) == 2


def test_empty_script_raises_even_with_repeat_last() -> None:
    with pytest.raises(ScriptExhaustedError):
        ScriptedChatModel([], repeat_last=True).invoke("x")


def test_repeat_last_repeats_with_fresh_ids() -> None:
    model = ScriptedChatModel(["a", final("b")], repeat_last=True)
    outputs = [model.invoke("q") for _ in range(4)]
    assert [o.content for o in outputs] == ["a", "b", "b", "b"]
    ids = [o.id for o in outputs]
    assert all(ids)
    assert len(set(ids)) == 4


def test_repeat_last_does_not_reuse_an_explicit_id() -> None:
    # graph state merges messages by id: a reused id would replace, not append
    model = ScriptedChatModel([AIMessage(content="x", id="fixed")], repeat_last=True)
    ids = [model.invoke("q").id for _ in range(3)]
    assert ids[0] == "fixed"
    assert len(set(ids)) == 3


def test_returned_messages_are_copies() -> None:
    scripted = final("text")
    model = ScriptedChatModel([scripted], repeat_last=True)
    first = model.invoke("q")
    first.content = "mutated"
    assert model.invoke("q").content == "text"
    assert scripted.content == "text"


def test_bind_tools_records_tools_and_shares_position() -> None:
    model = ScriptedChatModel([tool_call("search", {"query": "q"}), final("answer")])
    bound = model.bind_tools([search, read], tool_choice="auto", parallel_tool_calls=False)
    assert isinstance(bound, ScriptedChatModel)
    assert bound.bound_tool_names == ["search", "read"]
    assert model.bound_tool_names == []
    schema = bound.bound_tools[0]["function"]
    assert schema["name"] == "search"
    assert set(schema["parameters"]["properties"]) == {"query", "k"}
    assert bound.bound_tool_choice == "auto"
    assert bound.bound_kwargs == {"parallel_tool_calls": False}

    first = bound.invoke("q")
    assert first.tool_calls[0]["name"] == "search"
    # the unbound original continues the same script
    assert model.invoke("q").content == "answer"
    assert model.calls is bound.calls
    assert len(model.calls) == 2
    assert model.call_tool_names == [["search", "read"], []]


def test_tool_call_with_dict_args() -> None:
    message = tool_call("search", {"query": "llamas"}, id="call_1")
    assert message.content == ""
    assert message.tool_calls == [
        {"name": "search", "args": {"query": "llamas"}, "id": "call_1", "type": "tool_call"}
    ]
    assert message.invalid_tool_calls == []


def test_tool_call_generates_distinct_ids() -> None:
    a = tool_call("search", {"query": "x"})
    b = tool_call("search", {"query": "x"})
    assert a.tool_calls[0]["id"] != b.tool_calls[0]["id"]


def test_tool_call_with_valid_json_string_parses() -> None:
    message = tool_call("search", '{"query": "llamas", "k": 3}', id="c")
    assert message.tool_calls[0]["args"] == {"query": "llamas", "k": 3}
    assert message.invalid_tool_calls == []


def test_tool_call_with_broken_json_is_invalid_like_langchain() -> None:
    raw = '{"query": "llamas", '
    message = tool_call("search", raw, id="bad_1")
    assert message.tool_calls == []
    assert len(message.invalid_tool_calls) == 1
    bad = message.invalid_tool_calls[0]
    assert bad["name"] == "search"
    assert bad["args"] == raw
    assert bad["id"] == "bad_1"
    assert bad["type"] == "invalid_tool_call"
    assert "are not valid JSON" in bad["error"]
    assert "JSONDecodeError" in bad["error"]


def test_tool_call_with_non_object_json_is_invalid() -> None:
    message = tool_call("search", "[1, 2]")
    assert message.tool_calls == []
    assert "JSON object" in message.invalid_tool_calls[0]["error"]


def test_invalid_tool_call_survives_the_model() -> None:
    model = ScriptedChatModel([tool_call("search", "{not json")])
    out = model.bind_tools([search]).invoke("q")
    assert out.tool_calls == []
    assert out.invalid_tool_calls[0]["args"] == "{not json"


def test_ainvoke_uses_the_same_script() -> None:
    model = ScriptedChatModel(["sync", "async"])
    assert model.invoke("a").content == "sync"
    assert asyncio.run(model.ainvoke("b")).content == "async"
    assert len(model.calls) == 2
