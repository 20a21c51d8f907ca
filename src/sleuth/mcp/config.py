"""The MCP servers whose tools the agent may call (``SLEUTH_MCP_SERVERS``).

The variable holds either the JSON itself or the path of a ``.json`` / ``.toml`` file. The
JSON (or file) is a list of servers, an object ``{"servers": [...]}`` (TOML: ``[[servers]]``
tables), or the ``{"mcpServers": {"<name>": {...}}}`` layout other MCP clients use::

    [
      {"name": "calc", "command": "python", "args": ["calc_server.py"], "allow": ["add"]},
      {"name": "forge", "url": "https://gateway.example/servers/42/mcp",
       "headers": {"Authorization": "Bearer ${FORGE_TOKEN}"}, "timeout_s": 20}
    ]

``transport`` is ``stdio`` or ``http`` (streamable HTTP); when omitted it follows from
``command`` (stdio) or ``url`` (http). ``${VAR}`` in ``args``, ``env``, ``url`` and
``headers`` is replaced by the environment variable when the server is started, so secrets
need not sit in the file. Only pydantic is needed here, not the ``mcp`` package.
"""

from __future__ import annotations

import json
import os
import re
import tomllib
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from sleuth.errors import ConfigError

FIELD = "SLEUTH_MCP_SERVERS"
SERVER_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]|_(?!_)){0,31}$")
"""1-32 letters, digits, ``-`` or ``_`` (never ``__``, the namespace separator of tool names)."""
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")
_TRANSPORTS = {
    "stdio": "stdio",
    "http": "http",
    "streamable-http": "http",
    "streamable_http": "http",
    "streamablehttp": "http",
}


class MCPServerSpec(BaseModel):
    """One MCP server: how to reach it, which of its tools to offer, how long to wait."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(description="Namespace of its tools: <name>__<tool>")
    transport: Literal["stdio", "http"] = Field(
        description="'stdio' (a subprocess) or 'http' (streamable HTTP)"
    )
    command: str | None = Field(default=None, description="stdio: the program to start")
    args: list[str] = Field(default_factory=list, description="stdio: its arguments")
    env: dict[str, str] = Field(
        default_factory=dict,
        description="stdio: variables added to the SDK's minimal environment (PATH, HOME...)",
    )
    cwd: str | None = Field(default=None, description="stdio: working directory")
    url: str | None = Field(default=None, description="http: the MCP endpoint, e.g. .../mcp")
    headers: dict[str, str] = Field(default_factory=dict, description="http: request headers")
    allow: list[str] | None = Field(
        default=None,
        description="Tool names (shell-style patterns allowed) to offer; default: all",
    )
    timeout_s: float = Field(default=30.0, gt=0, le=3600, description="Per-call timeout")
    connect_timeout_s: float = Field(
        default=15.0, gt=0, le=600, description="Start, handshake and tool listing"
    )
    retry_after_s: float = Field(
        default=30.0,
        ge=0,
        le=86400,
        description="After a failure the server counts as down this long (its calls fail at "
        "once), then it is reconnected on the next call or run",
    )

    @model_validator(mode="before")
    @classmethod
    def _infer_transport(cls, data: Any) -> Any:
        if isinstance(data, dict):
            data = dict(data)
            given = data.get("transport", data.pop("type", None))
            if isinstance(given, str):
                data["transport"] = _TRANSPORTS.get(given.strip().lower(), given)
            elif given is None:
                if "command" in data:
                    data["transport"] = "stdio"
                elif "url" in data:
                    data["transport"] = "http"
        return data

    @field_validator("name")
    @classmethod
    def _check_name(cls, value: str) -> str:
        if not SERVER_NAME.match(value):
            raise ValueError(
                "use 1-32 letters, digits, '-' or '_' (no '__'), starting with a letter or digit"
            )
        return value

    @field_validator("allow")
    @classmethod
    def _check_allow(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and any(not p.strip() for p in value):
            raise ValueError("tool names must not be empty")
        return value

    @model_validator(mode="after")
    def _check_transport(self) -> MCPServerSpec:
        if self.transport == "stdio":
            if not self.command or not self.command.strip():
                raise ValueError("transport 'stdio' needs 'command'")
            extra = [f for f in ("url", "headers") if getattr(self, f)]
        else:
            if not self.url:
                raise ValueError("transport 'http' needs 'url'")
            if not re.match(r"^https?://[^/\s]", self.url):
                raise ValueError(f"url must start with http:// or https://, not '{self.url}'")
            extra = [f for f in ("command", "args", "env", "cwd") if getattr(self, f)]
        if extra:
            names = ", ".join(f"'{f}'" for f in extra)
            verb = "does" if len(extra) == 1 else "do"
            raise ValueError(f"{names} {verb} not apply to transport '{self.transport}'")
        return self

    def allows(self, tool: str) -> bool:
        """Whether the allow-list (default: everything) lets ``tool`` through."""
        from fnmatch import fnmatchcase

        return self.allow is None or any(fnmatchcase(tool, p) for p in self.allow)

    def expanded(self) -> MCPServerSpec:
        """This spec with ``${VAR}`` replaced in ``args``, ``env``, ``url`` and ``headers``.

        Raises:
            ConfigError: a referenced variable is not set (the message names the field).
        """

        def sub(text: str, where: str) -> str:
            def one(match: re.Match[str]) -> str:
                value = os.environ.get(match.group(1))
                if value is None:
                    raise ConfigError(
                        f"{FIELD}: server '{self.name}' {where}: environment variable "
                        f"{match.group(1)} is not set"
                    )
                return value

            return _VARIABLE.sub(one, text)

        return self.model_copy(
            update={
                "args": [sub(a, f"args[{i}]") for i, a in enumerate(self.args)],
                "env": {k: sub(v, f"env.{k}") for k, v in self.env.items()},
                "url": sub(self.url, "url") if self.url else None,
                "headers": {k: sub(v, f"headers.{k}") for k, v in self.headers.items()},
            }
        )


def _location(loc: tuple[Any, ...]) -> str:
    return "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in loc).lstrip(".")


def _entries(data: Any) -> list[tuple[str, Any]]:
    """``(location, entry)`` for each server of the parsed document."""
    if isinstance(data, dict):
        if "mcpServers" in data:
            servers = data["mcpServers"]
            if not isinstance(servers, dict):
                raise ValueError("mcpServers must be an object of servers by name")
            return [
                (
                    f"mcpServers.{name}",
                    {"name": name, **entry} if isinstance(entry, dict) else entry,
                )
                for name, entry in servers.items()
            ]
        if "servers" in data:
            data = data["servers"]
        else:
            raise ValueError('expected a list of servers, {"servers": [...]} or {"mcpServers": {}}')
    if not isinstance(data, list):
        raise ValueError(f"expected a list of servers, not {type(data).__name__}")
    return [(f"servers[{i}]", entry) for i, entry in enumerate(data)]


def _document(value: str) -> tuple[Any, Path | None]:
    """The parsed JSON (inline or a file) or TOML file, and the file it came from."""
    text = value.strip()
    if text[:1] in "[{":
        try:
            return json.loads(text), None
        except json.JSONDecodeError as exc:
            raise ValueError(f"not valid JSON: {exc}") from exc
    path = Path(text).expanduser()
    if path.suffix.lower() not in (".json", ".toml"):
        raise ValueError("give a JSON list of servers, or the path of a .json or .toml file")
    try:
        raw = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror or exc}") from exc
    try:
        if path.suffix.lower() == ".toml":
            return tomllib.loads(raw), path
        return json.loads(raw), path
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{path}: not valid {path.suffix[1:].upper()}: {exc}") from exc


def parse_mcp_servers(value: str | None) -> list[MCPServerSpec]:
    """The servers described by ``value`` (inline JSON or a file path); none when empty.

    A relative stdio ``cwd`` in a file is taken relative to that file.

    Raises:
        ValueError: the first problem, located, e.g.
            ``servers[1].timeout_s: Input should be greater than 0``.
    """
    if value is None or not value.strip():
        return []
    data, path = _document(value)
    where = f"{path}: " if path else ""
    specs: list[MCPServerSpec] = []
    for loc, entry in _entries(data):
        if not isinstance(entry, dict):
            raise ValueError(f"{where}{loc}: expected an object, not {type(entry).__name__}")
        try:
            spec = MCPServerSpec.model_validate(entry)
        except ValidationError as exc:
            first = exc.errors()[0]
            field = _location(tuple(first.get("loc") or ()))
            message = first.get("msg", "invalid").removeprefix("Value error, ")
            if field == "transport" and first.get("type") == "missing":
                field, message = "", "give 'command' (a stdio server) or 'url' (streamable HTTP)"
            raise ValueError(f"{where}{loc}{'.' + field if field else ''}: {message}") from None
        if path and spec.cwd and not Path(spec.cwd).expanduser().is_absolute():
            spec = spec.model_copy(update={"cwd": str(path.parent / spec.cwd)})
        if any(s.name == spec.name for s in specs):
            raise ValueError(f"{where}{loc}.name: duplicate server name '{spec.name}'")
        specs.append(spec)
    return specs


def load_mcp_servers(value: str | None) -> list[MCPServerSpec]:
    """:func:`parse_mcp_servers`, raising :class:`ConfigError` that names the variable."""
    try:
        return parse_mcp_servers(value)
    except ValueError as exc:
        raise ConfigError(f"{FIELD}: {exc}") from exc


def mask_mcp_servers(value: str) -> str:
    """``SLEUTH_MCP_SERVERS`` for display: header and env values of inline JSON become
    ``***`` (``${VAR}`` references are kept), a password in a URL too; a path is shown as is.
    """
    from sleuth.config import mask_url

    text = value.strip()
    if text[:1] not in "[{":
        return value
    try:
        data = json.loads(text)
        entries = _entries(data)
    except ValueError:
        return "<not valid JSON: not shown>"

    def hide(values: Any) -> Any:
        if not isinstance(values, dict):
            return values
        return {k: v if _VARIABLE.fullmatch(str(v)) else "***" for k, v in values.items()}

    for _loc, entry in entries:
        if isinstance(entry, dict):
            for key in ("headers", "env"):
                if key in entry:
                    entry[key] = hide(entry[key])
            if isinstance(entry.get("url"), str):
                entry["url"] = mask_url(entry["url"])
    if isinstance(data, dict) and "mcpServers" in data:
        data = {"mcpServers": {loc.split(".", 1)[1]: e for loc, e in entries}}
    return json.dumps(data, ensure_ascii=False)
