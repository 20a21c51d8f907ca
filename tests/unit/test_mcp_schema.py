"""MCP input schemas adapted to the subset every LLM provider accepts; namespaced names."""

from __future__ import annotations

import copy
import re
from typing import Any

from pydantic import BaseModel, Field

from sleuth.mcp.schema import adapt_schema, tool_name

FORBIDDEN = ("$ref", "$defs", "definitions", "additionalProperties", "$schema", "const", "title")


def _walk(node: Any) -> list[tuple[str, Any]]:
    """Every (key, value) pair of schema keywords, skipping property names."""
    out: list[tuple[str, Any]] = []
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "properties" and isinstance(value, dict):
                for sub in value.values():
                    out.extend(_walk(sub))
                continue
            out.append((key, value))
            out.extend(_walk(value))
    elif isinstance(node, list):
        for item in node:
            out.extend(_walk(item))
    return out


def _assert_plain(schema: dict[str, Any]) -> None:
    pairs = _walk(schema)
    assert not [k for k, _ in pairs if k in FORBIDDEN], schema
    assert all(v != "null" for k, v in pairs if k == "type"), schema
    assert schema["type"] == "object" and isinstance(schema["properties"], dict)


class Address(BaseModel):
    street: str
    city: str | None = None


class Person(BaseModel):
    name: str = Field(description="Full name")
    home: Address | None = Field(description="Where they live")
    work: Address | None = None
    tags: dict[str, int] = Field(default_factory=dict, description="Counts by tag")
    friends: list[Person] = Field(default_factory=list)


def test_a_pydantic_schema_is_inlined_and_null_free() -> None:
    original = Person.model_json_schema()
    before = copy.deepcopy(original)
    adapted = adapt_schema(original)
    assert original == before  # the input is not modified
    schema = adapted.parameters
    _assert_plain(schema)
    props = schema["properties"]
    # $ref inlined, with the referring property's description kept
    assert props["home"]["type"] == "object"
    assert props["home"]["description"] == "Where they live"
    assert set(props["home"]["properties"]) == {"street", "city"}
    assert props["home"]["properties"]["city"]["type"] == "string"  # anyOf [string, null]
    assert props["home"]["required"] == ["street"]
    # a dict-valued additionalProperties becomes a note in the description
    assert (
        props["tags"]["type"] == "object" and "each value: integer" in props["tags"]["description"]
    )
    # recursion stops: friends are objects, listed to a bounded depth
    assert props["friends"]["type"] == "array"
    assert props["friends"]["items"]["type"] == "object"
    # required + nullable without default: no longer required, sent as null when omitted
    assert schema["required"] == ["name"]
    assert adapted.null_defaults == ("home",)


def test_tricky_hand_written_schema() -> None:
    schema = {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "title": "Args",
        "additionalProperties": False,
        "definitions": {"Mode": {"type": "string", "enum": ["fast", "slow", None]}},
        "properties": {
            "mode": {"allOf": [{"$ref": "#/definitions/Mode"}], "description": "How"},
            "limit": {"type": ["integer", "null"], "default": None},
            "kind": {"const": "search"},
            "either": {"oneOf": [{"type": "string"}, {"type": "integer"}, {"type": "null"}]},
            "missing": {"$ref": "#/$defs/Nowhere"},
            "anything": True,
        },
        "required": ["mode", "gone"],
    }
    adapted = adapt_schema(schema)
    out = adapted.parameters
    _assert_plain(out)
    props = out["properties"]
    assert props["mode"] == {"type": "string", "enum": ["fast", "slow"], "description": "How"}
    assert props["limit"] == {"type": "integer", "default": None}
    assert props["kind"] == {"enum": ["search"]}
    assert props["either"] == {"oneOf": [{"type": "string"}, {"type": "integer"}]}
    assert props["missing"] == {"type": "object"}  # unresolvable reference: a plain object
    assert props["anything"] == {}
    assert out["required"] == ["mode"]  # names that are not properties are dropped
    assert adapted.null_defaults == ()


def test_empty_and_odd_top_levels_become_objects() -> None:
    assert adapt_schema(None).parameters == {"type": "object", "properties": {}}
    assert adapt_schema({}).parameters == {"type": "object", "properties": {}}
    assert adapt_schema({"type": "object"}).parameters == {"type": "object", "properties": {}}
    out = adapt_schema({"$ref": "#/$defs/A", "$defs": {"A": {"properties": {"x": {}}}}})
    assert out.parameters == {"properties": {"x": {}}, "type": "object"}


def test_self_reference_at_the_top_does_not_loop() -> None:
    schema = {
        "type": "object",
        "properties": {"child": {"$ref": "#"}, "name": {"type": "string"}},
    }
    out = adapt_schema(schema).parameters
    _assert_plain(out)
    depth, node = 0, out
    while "child" in node.get("properties", {}):
        node = node["properties"]["child"]
        depth += 1
    assert 1 <= depth <= 10


def test_tool_names_are_namespaced_and_valid_function_names() -> None:
    valid = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
    assert tool_name("calc", "add") == "calc__add"
    assert tool_name("fs", "read.file/v2 beta") == "fs__read_file_v2_beta"
    long = tool_name("gateway", "x" * 100)
    assert valid.match(long) and len(long) == 64 and long.startswith("gateway__xxx")
    assert tool_name("gateway", "x" * 100) == long  # stable
    taken = {tool_name("fs", "read.file")}
    other = tool_name("fs", "read_file", taken)
    assert other != "fs__read_file" and valid.match(other)
