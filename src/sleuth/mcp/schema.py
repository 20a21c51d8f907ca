"""MCP tool input schemas → function parameters every LLM provider accepts.

MCP servers publish full JSON Schema (pydantic output: ``$defs`` and ``$ref``, nullable
``anyOf [X, null]``, ``allOf`` wrappers, ``const``, ``additionalProperties`` …). Providers
accept different subsets (Gemini rejects ``$ref`` and ``additionalProperties``; some
OpenAI-compatible servers choke on ``anyOf``), so :func:`adapt_schema` rewrites a schema
into the plain common subset: local references inlined, ``X | None`` collapsed to ``X``,
single ``allOf`` merged, ``const`` as a one-value ``enum``, ``additionalProperties``
dropped (its dict-valued form kept only as the object's description), the top level an
object with ``properties``. The original schema still validates the arguments
(:mod:`sleuth.mcp.client`); the adapted one is only what the model reads.

Names: :func:`tool_name` makes ``<server>__<tool>`` valid as an OpenAI function name
(``^[a-zA-Z0-9_-]{1,64}$``).
"""

from __future__ import annotations

import copy
import hashlib
import re
from dataclasses import dataclass
from typing import Any

MAX_DEPTH = 8
"""Nesting of ``$ref`` expansion before a (recursive) reference becomes a plain object."""
DROPPED_KEYS = frozenset(
    {"title", "$schema", "$id", "$comment", "$anchor", "$defs", "definitions", "examples",
     "readOnly", "writeOnly", "deprecated", "$dynamicAnchor", "$dynamicRef", "contentMediaType",
     "contentEncoding", "unevaluatedProperties", "patternProperties", "propertyNames"}
)  # fmt: skip
"""Keys removed everywhere: metadata (titles repeat the property names) and keywords few
providers support."""
_INVALID_NAME_CHARS = re.compile(r"[^A-Za-z0-9_-]")
MAX_NAME = 64


@dataclass(frozen=True)
class AdaptedSchema:
    """The parameters schema shown to the model, and the top-level properties that were
    required but nullable (``X | None`` without a default): when the model omits one it is
    sent as ``null``, which the server accepts."""

    parameters: dict[str, Any]
    null_defaults: tuple[str, ...] = ()


def tool_name(server: str, tool: str, taken: set[str] | None = None) -> str:
    """``<server>__<tool>``, with characters outside ``[A-Za-z0-9_-]`` replaced by ``_``,
    shortened with a hash suffix beyond 64 characters or when the name is ``taken``."""
    name = f"{server}__{_INVALID_NAME_CHARS.sub('_', tool)}"
    if len(name) > MAX_NAME or (taken is not None and name in taken):
        digest = hashlib.sha1(f"{server}/{tool}".encode()).hexdigest()[:8]
        name = f"{name[: MAX_NAME - 9]}_{digest}"
    return name


def _resolve_pointer(root: dict[str, Any], ref: str) -> Any:
    """The target of a local reference ``#/a/b``; ``None`` when it does not resolve."""
    if ref == "#":
        return root
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for raw in ref[2:].split("/"):
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def _is_null(schema: Any) -> bool:
    return isinstance(schema, dict) and (
        schema.get("type") == "null" or (schema.get("const", 0) is None and len(schema) <= 2)
    )


def _merge(outer: dict[str, Any], inner: dict[str, Any]) -> dict[str, Any]:
    """``inner`` with the annotations of ``outer`` (description, default, title) on top."""
    merged = dict(inner)
    for key, value in outer.items():
        if key not in ("$ref", "allOf", "anyOf", "oneOf"):
            merged[key] = value
    return merged


class _Adapter:
    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root

    def node(self, schema: Any, depth: int, refs: tuple[str, ...]) -> Any:
        if isinstance(schema, bool):
            return {} if schema else {"not": {}}
        if not isinstance(schema, dict):
            return schema
        schema = {k: v for k, v in schema.items() if k not in DROPPED_KEYS}
        ref = schema.get("$ref")
        if isinstance(ref, str):
            target = _resolve_pointer(self.root, ref)
            if target is None or ref in refs or depth >= MAX_DEPTH:
                # unresolvable or recursive: an object the model can still fill in
                rest = {k: v for k, v in schema.items() if k != "$ref"}
                title = target.get("title") if isinstance(target, dict) else None
                fallback = {"type": "object"}
                if title and "description" not in rest:
                    fallback["description"] = f"A {title} object"
                return self.node({**fallback, **rest}, depth, refs)
            return self.node(_merge(schema, target), depth + 1, (*refs, ref))
        for combinator in ("anyOf", "oneOf"):
            options = schema.get(combinator)
            if isinstance(options, list):
                kept = [o for o in options if not _is_null(o)]
                if len(kept) == 1:
                    merged = _merge(schema, kept[0] if isinstance(kept[0], dict) else {})
                    if kept[0] is True:
                        merged = _merge(schema, {})
                    return self.node(merged, depth, refs)
                if kept:
                    schema[combinator] = kept
        all_of = schema.get("allOf")
        if isinstance(all_of, list) and len(all_of) == 1 and isinstance(all_of[0], dict):
            return self.node(_merge(schema, all_of[0]), depth, refs)
        if isinstance(schema.get("type"), list):
            types = [t for t in schema["type"] if t != "null"]
            schema["type"] = types[0] if len(types) == 1 else types
            if not types:
                schema.pop("type")
        if "const" in schema:
            const = schema.pop("const")
            if const is None:
                schema["type"] = "null"
            else:
                schema["enum"] = [const]
        if "enum" in schema and isinstance(schema["enum"], list):
            without_null = [v for v in schema["enum"] if v is not None]
            if without_null:
                schema["enum"] = without_null
        extra = schema.pop("additionalProperties", None)
        if isinstance(extra, dict) and extra and "properties" not in schema:
            value_type = self.node(extra, depth + 1, refs)
            note = f"Any keys; each value: {_describe(value_type)}"
            schema["description"] = (
                f"{schema['description']} ({note})" if schema.get("description") else note
            )
        out: dict[str, Any] = {}
        for key, value in schema.items():
            if key == "properties" and isinstance(value, dict):
                out[key] = {name: self.node(sub, depth + 1, refs) for name, sub in value.items()}
            elif key in ("items", "not", "if", "then", "else", "contains"):
                out[key] = (
                    [self.node(s, depth + 1, refs) for s in value]
                    if isinstance(value, list)
                    else self.node(value, depth + 1, refs)
                )
            elif key in ("anyOf", "oneOf", "allOf", "prefixItems") and isinstance(value, list):
                out[key] = [self.node(s, depth + 1, refs) for s in value]
            else:
                out[key] = value
        if isinstance(out.get("required"), list) and isinstance(out.get("properties"), dict):
            out["required"] = [r for r in out["required"] if r in out["properties"]]
            if not out["required"]:
                out.pop("required")
        return out


def _describe(schema: Any) -> str:
    if isinstance(schema, dict):
        kind = schema.get("type")
        if isinstance(kind, str):
            return kind
        if isinstance(kind, list):
            return " or ".join(str(k) for k in kind)
    return "any JSON value"


def _nullable(schema: Any, root: dict[str, Any]) -> bool:
    """Whether a property schema admits ``null`` (``anyOf``/``oneOf`` with null, or a type
    list with ``"null"``), following one local reference."""
    if not isinstance(schema, dict):
        return False
    ref = schema.get("$ref")
    if isinstance(ref, str):
        return _nullable(_resolve_pointer(root, ref), root)
    types = schema.get("type")
    if isinstance(types, list) and "null" in types:
        return True
    for combinator in ("anyOf", "oneOf"):
        options = schema.get(combinator)
        if isinstance(options, list) and any(_is_null(o) for o in options):
            return True
    return False


def adapt_schema(schema: dict[str, Any] | None) -> AdaptedSchema:
    """The function parameters for an MCP ``inputSchema`` (the input is left unchanged).

    Returns:
        The adapted object schema (``type: object`` with ``properties``, no ``$ref``,
        ``$defs``, null alternatives or ``additionalProperties``), and the required
        properties that admit ``null``; they are no longer required in the adapted schema.
    """
    root = copy.deepcopy(schema) if isinstance(schema, dict) else {}
    adapted = _Adapter(root).node(root, 0, ())
    if not isinstance(adapted, dict):
        adapted = {}
    adapted.pop("title", None)
    if adapted.get("type") != "object":
        adapted["type"] = "object"
    if not isinstance(adapted.get("properties"), dict):
        adapted["properties"] = {}
    top: Any = root
    for _ in range(MAX_DEPTH):  # a recursive model's schema is a reference to its $defs entry
        if not (isinstance(top, dict) and isinstance(top.get("$ref"), str)):
            break
        top = _resolve_pointer(root, top["$ref"])
    properties = top.get("properties") if isinstance(top, dict) else None
    properties = properties if isinstance(properties, dict) else {}
    required = list(adapted.get("required") or [])
    nullable = tuple(
        name
        for name in required
        if _nullable(properties.get(name), root) and "default" not in (properties.get(name) or {})
    )
    if nullable:
        required = [r for r in required if r not in nullable]
        if required:
            adapted["required"] = required
        else:
            adapted.pop("required", None)
    return AdaptedSchema(parameters=adapted, null_defaults=nullable)
